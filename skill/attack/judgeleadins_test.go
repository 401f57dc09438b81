package attack

import (
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

// agentLeadIns are the sentences a language model wraps its answer in
// that verification.md 1.5.33 reads as a lead-in or a tail frame (X is
// the answer): each was refused on every question of the procedural sets
// before (TestMeasureJudgeVariants).
var agentLeadIns = []string{
	"The correct answer is X.",
	"I'd go with X.",
	"Definitely X.",
	"It should be X.",
	"That would be X.",
	"According to the narrative, X.",
	"Based on the report, X.",
	"From the narrative: X",
	"X is my answer.",
	"Based on the email thread, the correct answer is X.",
}

// TestJudgeAgentLeadInsProcedural judges every question of procedural
// sets (our fixtures) with its canonical answer in each of agentLeadIns:
// all are accepted; and each form around a distractor, or around the
// answer joined to a distractor, is refused, as the bare text is.
func TestJudgeAgentLeadInsProcedural(t *testing.T) {
	for _, set := range procSets(t, 8, 20261129) {
		for k := range set.Parts {
			narr := narrativesUpTo(set, k)
			for j := range set.Parts[k].Questions {
				q := &set.Parts[k].Questions[j]
				for _, f := range agentLeadIns {
					if a := strings.Replace(f, "X", q.Answer, 1); len(a) <= skill.MaxAnswerBytes && !skill.Judge(q, a, narr) {
						t.Errorf("%q refused (question %q, answers %q)", a, q.Question, q.Variants())
					}
					for _, d := range q.Distractors {
						for _, x := range []string{d, q.Answer + " or " + d, d + " " + q.Answer} {
							a := strings.Replace(f, "X", x, 1)
							if len(a) <= skill.MaxAnswerBytes && skill.Judge(q, a, narr) {
								t.Errorf("%q accepted for %q (distractors %q)", a, q.Answer, q.Distractors)
							}
						}
					}
				}
			}
		}
	}
}
