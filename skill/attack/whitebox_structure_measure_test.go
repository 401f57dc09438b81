package attack_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/attack"
	"github.com/acaptcha/acaptcha/skill/generate"
)

// TestMeasureStructureAttackers (STRUCTURE_MEASURE=N sessions per set;
// skipped without the LLM corpus) measures the structure attackers
// (attack.Series, attack.Scatter), the survivor attacker and its next two
// levels the way acaptcha eval does: the offline validator first (with
// STRUCTURE_UNFILTERED set, its filter as it was before the structure and
// survivor attackers joined it, to see what they answer that it kept),
// then, on the
// questions it keeps, every question answered after every combination of
// earlier rounds' kept questions (a question counts when one context
// answers it), and N sessions per kept set run by skill.Run as a verifier
// runs them.
func TestMeasureStructureAttackers(t *testing.T) {
	n := 0
	fmt.Sscan(os.Getenv("STRUCTURE_MEASURE"), &n)
	if n == 0 {
		t.Skip("set STRUCTURE_MEASURE=<sessions per set> to measure")
	}
	dir := ""
	for _, d := range []string{"../../../shared/llm-corpus", "/work/shared/llm-corpus"} {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			dir = d
		}
	}
	if dir == "" {
		t.Skip("LLM corpus not present")
	}
	verbose := os.Getenv("STRUCTURE_VERBOSE") != ""
	for _, g := range []struct {
		pat  string
		kind skill.SourceKind
	}{{"/sets/*.json", skill.SourceCorpus}, {"/hybrid/*-hybrid.json", skill.SourceHybrid}, {"/hybrid/*-hybrid-q.json", skill.SourceHybrid}} {
		files, _ := filepath.Glob(dir + g.pat)
		pol := skill.DefaultPolicy()
		cfg := generate.ValidatorConfig{Policy: &pol, WhiteBoxKind: g.kind}
		if os.Getenv("STRUCTURE_UNFILTERED") != "" {
			// The filter as it was before the structure attackers
			// joined it: the generic attackers and the other white-box
			// attackers of the kind.
			cfg.WhiteBox = generate.WhiteBoxOff
			cfg.Attackers = attack.All()
			for _, a := range attack.WhiteBox(g.kind) {
				if !slices.ContainsFunc(append(attack.Structure(), attack.Survivor()), func(s attack.Named) bool { return s.Name == a.Name }) {
					cfg.Attackers = append(cfg.Attackers, a)
					cfg.Stateful = append(cfg.Stateful, a.Name)
				}
			}
			cfg.Stateful = append(cfg.Stateful, attack.StatefulRouter)
		}
		vr, err := generate.NewValidator(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var kept []*skill.Set
		raw := 0
		for _, f := range files {
			set, err := skill.LoadFile(f)
			if err != nil {
				continue
			}
			raw++
			if rep := vr.Offline(context.Background(), set); rep.Accepted() {
				kept = append(kept, rep.Set)
			}
		}
		for _, a := range append(attack.Structure(), attack.Survivor(), attack.SurvivorDepth(2), attack.SurvivorDepth(3)) {
			nq, hit, pass, sessions := 0, 0, 0, 0
			var byType = map[string][2]int{}
			for _, set := range kept {
				for k := range set.Parts {
					for j := range set.Parts[k].Questions {
						q := &set.Parts[k].Questions[j]
						ok, ans := answeredInSomeContext(t, set, a.Prover, k, j)
						nq++
						key := fmt.Sprintf("%s/%s", q.ReasoningType, q.AnswerType)
						v := byType[key]
						v[1]++
						if ok {
							hit++
							v[0]++
						}
						byType[key] = v
						if verbose {
							t.Logf("%s %s %s p%d: %v %q want %q | %s", a.Name, g.pat, set.Domain, k+1, ok, ans, q.Answer, q.Question)
						}
					}
				}
				for i := 0; i < n; i++ {
					sess, err := skill.NewSession(set, pol, rand.Reader)
					if err != nil {
						t.Fatal(err)
					}
					if v := skill.Run(context.Background(), sess, a.Prover.NewSession(), nil); v.Reason == skill.ReasonOK {
						pass++
					}
					sessions++
				}
			}
			for k, v := range byType {
				t.Logf("    %-24s %-18s %-22s %d/%d", g.pat, a.Name, k, v[0], v[1])
			}
			t.Logf("%-24s %-18s sets %d/%d kept, questions kept %d, answered %d (%.1f%%); sessions passed %d/%d",
				g.pat, a.Name, len(kept), raw, nq, hit, 100*float64(hit)/float64(max(nq, 1)), pass, sessions)
		}
	}
}

// answeredInSomeContext answers question j of part k after every
// combination of the earlier parts' questions and reports whether one
// of them is judged correct (with the first correct answer, or the
// first answer).
func answeredInSomeContext(t *testing.T, set *skill.Set, p skill.Prover, k, j int) (bool, string) {
	t.Helper()
	var narr []string
	for r := 0; r <= k; r++ {
		narr = append(narr, set.Parts[r].Narrative)
	}
	q := &set.Parts[k].Questions[j]
	var ctxs [][]int
	var walk func(r int, pre []int)
	walk = func(r int, pre []int) {
		if r == k {
			ctxs = append(ctxs, append(append([]int(nil), pre...), j))
			return
		}
		for i := range set.Parts[r].Questions {
			walk(r+1, append(pre, i))
		}
	}
	walk(0, nil)
	first := ""
	for _, c := range ctxs {
		s := p.NewSession()
		var ans string
		for r, qi := range c {
			var err error
			ans, err = s.Answer(context.Background(), skill.Challenge{Round: r + 1, Rounds: skill.Parts, Domain: set.Domain,
				Narrative: set.Parts[r].Narrative, Question: set.Parts[r].Questions[qi].Question, Budget: skill.DefaultTau})
			if err != nil {
				t.Fatal(err)
			}
		}
		if first == "" {
			first = ans
		}
		if skill.Judge(q, ans, narr) {
			return true, ans
		}
	}
	return false, first
}
