package procedural

import (
	"os"
	"sort"
	"testing"
)

func TestCalib(t *testing.T) {
	if os.Getenv("CALIB") == "" {
		t.Skip()
	}
	g := mustNew(t, Config{})
	kindWords := map[string][2]int{}
	levelTok := map[int][3]int{}
	for seed := uint64(0); seed < 1000; seed++ {
		st := newGen(g, seed, &trace{})
		_, err := st.run()
		if err != nil {
			t.Fatal(err)
		}
		for p := range st.parts {
			ps := &st.parts[p]
			pt := &st.tr.parts[p]
			cw := 0
			for _, f := range pt.facts {
				w := countWords(f.text)
				cw += w
				k := "k" + string(rune('A'+f.kind))
				if f.kind2 != fkNone {
					k = "compound"
				}
				a := kindWords[k]
				kindWords[k] = [2]int{a[0] + 1, a[1] + w}
			}
			l := levelTok[ps.level]
			over := 0
			if tokensFor(cw) > ps.target {
				over = 1
			}
			levelTok[ps.level] = [3]int{l[0] + 1, l[1] + tokensFor(cw), l[2] + over}
		}
	}
	var ks []string
	for k := range kindWords {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		a := kindWords[k]
		t.Logf("%s: n=%d mean words %.1f", k, a[0], float64(a[1])/float64(a[0]))
	}
	for l, a := range levelTok {
		t.Logf("level %d: parts %d mean content tokens %d over %d", l, a[0], a[1]/a[0], a[2])
	}
}

func TestShowLevel0(t *testing.T) {
	if os.Getenv("SHOW0") == "" {
		t.Skip()
	}
	g := mustNew(t, Config{MinTokens: 350, MaxTokens: 360})
	set, tr := traced(t, g, 3)
	for p, part := range set.Parts {
		t.Logf("part %d target %d tokens %d\n%s", p+1, tr.parts[p].target, tokensFor(countWords(part.Narrative)), part.Narrative)
	}
}

func TestShow67(t *testing.T) {
	if os.Getenv("SHOW67") == "" {
		t.Skip()
	}
	g := mustNew(t, Config{MinTokens: 500, MaxTokens: 800})
	set, tr := traced(t, g, 67)
	p := 1
	t.Logf("level %d target %d eff %d n %d tokens %d\n%s", tr.parts[p].level, tr.parts[p].target, tr.parts[p].effTarget, len(tr.parts[p].cands), tokensFor(countWords(set.Parts[p].Narrative)), set.Parts[p].Narrative)
}

func TestCalibLevels(t *testing.T) {
	if os.Getenv("CALIB") == "" {
		t.Skip()
	}
	for _, r := range [][2]int{{350, 360}, {350, 1100}, {500, 800}} {
		g := mustNew(t, Config{MinTokens: r[0], MaxTokens: r[1]})
		type agg struct{ n, raised, worst, sumOver int }
		st := map[int]*agg{}
		for seed := uint64(0); seed < 1000; seed++ {
			set, tr := traced(t, g, seed)
			for p := range set.Parts {
				pt := &tr.parts[p]
				a := st[pt.level]
				if a == nil {
					a = &agg{}
					st[pt.level] = a
				}
				a.n++
				if pt.effTarget > pt.target {
					a.raised++
					a.sumOver += pt.effTarget - pt.target
					a.worst = max(a.worst, pt.effTarget)
				}
			}
		}
		for l, a := range st {
			t.Logf("range %v level %d: parts %d raised %d (mean +%d) worst %d", r, l, a.n, a.raised, a.sumOver/max(a.raised, 1), a.worst)
		}
	}
}
