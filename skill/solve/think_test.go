package solve

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/llm"
	"github.com/acaptcha/acaptcha/skill"
)

// TestUnclosedThinkIsNoAnswer: a reasoning model cut off by the answer
// token cap inside its <think> block has not answered. Its first line,
// "<think>", was sent to the verifier as the answer (and signed
// wrong_answer); now the round fails with an error that says why.
func TestUnclosedThinkIsNoAnswer(t *testing.T) {
	for _, in := range []string{
		"<think>\nOkay, the question asks which ship arrived late.",
		"<think>Okay so the ship",
		"<THINKING>\nhmm\n",
		"<think>first</think>\n<think>\nstill going",
	} {
		if got := ExtractAnswer(in); got != "" {
			t.Errorf("ExtractAnswer(%q) = %q, want none", in, got)
		}
	}
	for _, provider := range testutil.Providers {
		t.Run(provider, func(t *testing.T) {
			reasoning := "<think>\nOkay, let me read the narrative carefully. " + strings.Repeat("The logbook says the ship arrived late, so I need to check which one. ", 20) + "</think>\nMeridian"
			m, _ := testutil.NewModelFor(t, provider, testutil.Text(reasoning))
			s := New(m, Config{})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ans, err := s.NewSession().Answer(ctx, skill.Challenge{Round: 1, Rounds: 3, Narrative: "The supply ship Meridian arrived two hours late.", Question: "Which ship arrived late?", Budget: 5 * time.Second})
			if err == nil {
				t.Fatalf("answered %q from a reply cut off inside <think>", ans)
			}
			if !errors.Is(err, llm.ErrTruncated) || !strings.Contains(err.Error(), "<think>") {
				t.Errorf("err %v: want ErrTruncated naming the unfinished <think>", err)
			}
		})
	}
}
