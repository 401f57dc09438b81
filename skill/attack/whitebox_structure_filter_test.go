package attack_test

import (
	"context"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/attack"
	"github.com/acaptcha/acaptcha/skill/generate"
)

// TestValidatorRunsStructureAttackers checks that the offline validator's
// white-box filter holds the structure attackers for model-written sets:
// on the small set written for the test (testdata/structure), the mean
// questions that only the series attacker answers, and the entity
// question the scatter attacker answers, are dropped, and so is the
// question of the second set that every other filter attacker fails and
// the survivor attacker answers by eliminating their answers, for LLM,
// corpus and hybrid sets alike.
func TestValidatorRunsStructureAttackers(t *testing.T) {
	for _, f := range []struct {
		file string
		want []struct {
			part, question int
			by             string
		}
	}{
		{"tollgate_brewhouse.json", []struct {
			part, question int
			by             string
		}{{1, 2, attack.WhiteBoxSeries}, {2, 2, attack.WhiteBoxSeries}, {1, 1, attack.WhiteBoxScatter}}},
		// Every other filter attacker fails its part 1 question.
		{"harrow_cold_chain.json", []struct {
			part, question int
			by             string
		}{{1, 1, attack.WhiteBoxSurvivor}}},
	} {
		set, err := skill.LoadFile("testdata/structure/" + f.file)
		if err != nil {
			t.Fatal(err)
		}
		for _, kind := range []skill.SourceKind{skill.SourceLLM, skill.SourceCorpus, skill.SourceHybrid} {
			vr, err := generate.NewValidator(generate.ValidatorConfig{Params: generate.Params{MinTokens: 50}, WhiteBoxKind: kind})
			if err != nil {
				t.Fatal(err)
			}
			rep := vr.Offline(context.Background(), set)
			for _, want := range f.want {
				found := false
				for _, q := range rep.Questions {
					if q.Part != want.part || q.Question != want.question {
						continue
					}
					found = true
					answered := false
					for _, a := range q.Scripts {
						answered = answered || a.Attacker == want.by && a.Correct
					}
					if !answered || q.Dropped == "" {
						t.Errorf("%s %s: part %d question %d: %s answered %v, dropped %q (set: %s %s); scripts %+v", f.file, kind, want.part, want.question, want.by, answered, q.Dropped, rep.Reason, rep.Detail, q.Scripts)
					}
				}
				if !found {
					t.Errorf("%s %s: part %d question %d not in the report (%s: %s)", f.file, kind, want.part, want.question, rep.Reason, rep.Detail)
				}
			}
		}
	}
}
