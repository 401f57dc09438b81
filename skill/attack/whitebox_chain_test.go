package attack_test

import (
	"context"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/attack"
)

// TestChainSynthetic: the chained-round attacker answers a later part's
// entity question with the code the earlier narrative carries on, not the
// one the current narrative alone names, and a part-1 question with the
// code whose sentence best overlaps the question, not the one a sentence
// sets aside.
func TestChainSynthetic(t *testing.T) {
	p1 := "The audit covered three hosts. KX-101 beaconed every night to the same address over the whole month. KX-202 beaconed once and was ruled out as a scanner artefact."
	p2 := "The responders imaged two machines. KX-101 held the implant in its startup folder. KQ-900 held a stale installer that nobody ran."
	s := attack.Chain().Prover.NewSession()
	ask := func(round int, narr, q string) string {
		t.Helper()
		a, err := s.Answer(context.Background(), skill.Challenge{Round: round, Rounds: 3, Narrative: narr, Question: q, Budget: skill.DefaultTau})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := ask(1, p1, "Which host beaconed every night over the month?"); a != "KX-101" {
		t.Fatalf("round 1: %q, want KX-101", a)
	}
	if a := ask(2, p2, "Which machine held something in a folder?"); a != "KX-101" {
		t.Fatalf("round 2: %q, want KX-101 (carried on from round 1)", a)
	}
}

// TestValidatorDropsChainAnswered: on the shared hybrid rewordings (skipped
// without the corpus), the offline validator keeps no question that the
// chained-round attacker answers after some choice of earlier rounds.
// Before the attacker joined the filter (generation.md 1.1.18) it kept one
// (a part-1 entity it names).
func TestValidatorDropsChainAnswered(t *testing.T) {
	forKeptCorpusSets(t, func(pat string, _ skill.SourceKind, kept []*skill.Set) {
		for _, set := range kept {
			for k := range set.Parts {
				for j := range set.Parts[k].Questions {
					if ok, ans := answeredInSomeContext(t, set, attack.Chain().Prover, k, j); ok {
						t.Errorf("%s %s part %d: kept a question %s answers (%q)", pat, set.Domain, k+1, attack.WhiteBoxChain, ans)
					}
				}
			}
		}
	})
}
