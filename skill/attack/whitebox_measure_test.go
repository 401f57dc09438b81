package attack

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

// wbScore answers every question of a set with a fresh session that has
// seen the earlier parts, and counts correct answers under Judge and under
// exact matching.
type wbScore struct {
	n, judge, exact int
	byType          map[string][2]int
}

func (sc *wbScore) add(key string, ok bool) {
	if sc.byType == nil {
		sc.byType = map[string][2]int{}
	}
	v := sc.byType[key]
	v[1]++
	if ok {
		v[0]++
	}
	sc.byType[key] = v
}

func scoreSet(t testing.TB, set *skill.Set, p skill.Prover, sc *wbScore, verbose bool) {
	t.Helper()
	for k := range set.Parts {
		for j := range set.Parts[k].Questions {
			ans := answerAt(t, set, p, k, j)
			q := &set.Parts[k].Questions[j]
			narr := narrativesUpTo(set, k)
			okJ := skill.Judge(q, ans, narr)
			okE := skill.MatchAny(ans, q.Variants())
			sc.n++
			if okJ {
				sc.judge++
			}
			if okE {
				sc.exact++
			}
			sc.add(fmt.Sprintf("p%d %s/%s", k+1, q.ReasoningType, q.AnswerType), okJ)
			if verbose && !okJ {
				t.Logf("MISS %s p%d %s/%s: %q want %v\n   Q: %s", set.Domain, k+1, q.ReasoningType, q.AnswerType, ans, q.Variants(), q.Question)
			}
		}
	}
}

func sessionPass(t testing.TB, set *skill.Set, p skill.Prover, n int) int {
	t.Helper()
	pass := 0
	for i := 0; i < n; i++ {
		sess, err := skill.NewSession(set, skill.DefaultPolicy(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if v := skill.Run(context.Background(), sess, p.NewSession(), nil); v.Reason == skill.ReasonOK {
			pass++
		}
	}
	return pass
}

// TestWhiteBoxMeasureProcedural prints the inverter's figures on fresh
// procedural sets (WB_MEASURE=N sets).
func TestWhiteBoxMeasureProcedural(t *testing.T) {
	nSets := 0
	fmt.Sscan(os.Getenv("WB_MEASURE"), &nSets)
	if nSets == 0 {
		t.Skip("set WB_MEASURE=<sets> to measure")
	}
	inv := WhiteBox(skill.SourceProcedural)[0]
	var sc wbScore
	pass, sessions := 0, 0
	for i, set := range procSets(t, nSets, 20261124) {
		scoreSet(t, set, inv.Prover, &sc, os.Getenv("WB_VERBOSE") != "" && i < 20)
		pass += sessionPass(t, set, inv.Prover, 4)
		sessions += 4
	}
	for k, v := range sc.byType {
		t.Logf("%-28s %d/%d", k, v[0], v[1])
	}
	t.Logf("procedural inverter: %d sets, %d questions: Judge %d (%.1f%%), exact %d (%.1f%%); sessions %d/%d (%.1f%%)",
		nSets, sc.n, sc.judge, 100*float64(sc.judge)/float64(sc.n), sc.exact, 100*float64(sc.exact)/float64(sc.n), pass, sessions, 100*float64(pass)/float64(sessions))
}

// corpusDir returns the shared LLM-written corpus, or "" when it is
// absent.
func corpusDir() string {
	for _, d := range []string{"../../../shared/llm-corpus", "/work/shared/llm-corpus"} {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d
		}
	}
	return ""
}

// llmCorpusDir returns the shared LLM-written corpus, or skips.
func llmCorpusDir(t testing.TB) string {
	t.Helper()
	d := corpusDir()
	if d == "" {
		t.Skip("LLM corpus not present")
	}
	return d
}

// TestWhiteBoxMeasureCorpus prints the white-box and listing attackers'
// per-question accuracy on the LLM-written sets and hybrid rewordings
// (WB_MEASURE_CORPUS=1).
func TestWhiteBoxMeasureCorpus(t *testing.T) {
	if os.Getenv("WB_MEASURE_CORPUS") == "" {
		t.Skip("set WB_MEASURE_CORPUS=1 to measure")
	}
	dir := llmCorpusDir(t)
	groups := map[string][]string{}
	for _, pat := range []string{"/sets/*.json", "/hybrid/*-hybrid.json", "/hybrid/*-hybrid-q.json"} {
		fs, _ := filepath.Glob(dir + pat)
		groups[pat] = fs
	}
	attackers := append(WhiteBox(""), Listing())
	for _, pat := range []string{"/sets/*.json", "/hybrid/*-hybrid.json", "/hybrid/*-hybrid-q.json"} {
		for _, a := range attackers {
			var sc wbScore
			pass, sessions := 0, 0
			for _, f := range groups[pat] {
				set, err := skill.LoadFile(f)
				if err != nil {
					t.Logf("%s: %v", f, err)
					continue
				}
				scoreSet(t, set, a.Prover, &sc, os.Getenv("WB_VERBOSE") != "")
				pass += sessionPass(t, set, a.Prover, 20)
				sessions += 20
			}
			t.Logf("%-24s %-20s questions %d: Judge %d (%.1f%%), exact %d; sessions %d/%d", pat, a.Name, sc.n, sc.judge, 100*float64(sc.judge)/float64(max(sc.n, 1)), sc.exact, pass, sessions)
		}
	}
}
