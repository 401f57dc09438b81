package attack

import (
	"context"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/skill"
)

// The tests and measurements of this package ask a prover one question
// as a verifier's session would: a fresh session, the first question of
// every earlier part first, then the question, judged against the
// narratives delivered up to its part. These helpers are that sequence;
// AnswerAt and NarrativesUpTo export them to the external test package.
var (
	AnswerAt       = answerAt
	NarrativesUpTo = narrativesUpTo
)

// answerAt answers question j of part k of set in a fresh session of p
// that has answered question 0 of every earlier part first, and returns
// the last answer.
func answerAt(t testing.TB, set *skill.Set, p skill.Prover, k, j int) string {
	t.Helper()
	return answerAtBudget(t, set, p, k, j, 0)
}

// answerAtBudget is answerAt with budget in every challenge.
func answerAtBudget(t testing.TB, set *skill.Set, p skill.Prover, k, j int, budget time.Duration) string {
	t.Helper()
	s := p.NewSession()
	var ans string
	for r := 0; r <= k; r++ {
		qi := 0
		if r == k {
			qi = j
		}
		var err error
		ans, err = s.Answer(context.Background(), skill.Challenge{Round: r + 1, Rounds: skill.Parts, Domain: set.Domain,
			Narrative: set.Parts[r].Narrative, Question: set.Parts[r].Questions[qi].Question, Budget: budget})
		if err != nil {
			t.Fatal(err)
		}
	}
	return ans
}

// narrativesUpTo returns the narratives of parts 0 to k of set: what a
// question of part k is judged against.
func narrativesUpTo(set *skill.Set, k int) []string {
	var narr []string
	for r := 0; r <= k; r++ {
		narr = append(narr, set.Parts[r].Narrative)
	}
	return narr
}

// candidates returns q's accepted variants, then its distractors, in a
// new slice.
func candidates(q *skill.Question) []string {
	return append(append([]string{}, q.Variants()...), q.Distractors...)
}
