package attack

import (
	"fmt"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

// TestJudgeTailHedgeRefused: on procedural sets (our fixtures), the
// canonical answer followed by a hedged second answer ("X, maybe Y",
// "X (perhaps Y)", "X — possibly Y", "X; alternatively Y") is refused for
// every other candidate Y, the distractors and, for a question without
// them, the narratives' numbers (verification.md 1.5.35), as "X (or Y)"
// is; the answer with an explanation that holds such a word later is
// accepted.
func TestJudgeTailHedgeRefused(t *testing.T) {
	forms := []string{"%s, maybe %s", "%s (perhaps %s)", "%s — possibly %s", "%s; alternatively %s"}
	tried := 0
	for _, set := range procSets(t, 8, 20261129) {
		for k := range set.Parts {
			narr := narrativesUpTo(set, k)
			for j := range set.Parts[k].Questions {
				q := &set.Parts[k].Questions[j]
				c := jvCase{q: q, narr: narr, a: q.Answer, num: jvNumRe.MatchString(q.Answer)}
				for _, y := range jvOthers(c) {
					for _, f := range forms {
						a := fmt.Sprintf(f, q.Answer, y)
						if len(a) > skill.MaxAnswerBytes {
							continue
						}
						tried++
						if skill.Judge(q, a, narr) {
							t.Errorf("%q accepted (variants %q, distractors %q)", a, q.Variants(), q.Distractors)
						}
					}
				}
				if a := q.Answer + " — it fits the record, maybe"; len(a) <= skill.MaxAnswerBytes && !skill.Judge(q, a, narr) {
					t.Errorf("%q refused", a)
				}
			}
		}
	}
	if tried < 1000 {
		t.Fatalf("only %d hedged answers tried", tried)
	}
}
