package solve

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/skill"
)

// TestMemoryKeepsTheAnswerOnly: a chained session re-sends its earlier
// turns with every round, and the prover's token budgets charge the
// earlier rounds' narratives and questions (spec/protocol.md §9a), not
// the model's earlier replies. The verifier steers how long those are
// (its narrative asks for reasoning, or for an explanation after the
// answer) up to the answer token cap, which a reasoning model's
// configuration sets in the thousands (--answer-max-tokens, up to
// 32 768): the whole replies were kept, so rounds 2 and 3 re-read up to
// three caps of text that no budget counted. The assistant turn kept is
// the answer the round extracted, at most skill.MaxAnswerBytes.
func TestMemoryKeepsTheAnswerOnly(t *testing.T) {
	padding := strings.Repeat("The logbook says the ship arrived late, so I check every entry again. ", 150) // 1 950 words
	replies := map[string]string{
		"think":   "<think>\n" + padding + "\n</think>\nMeridian",
		"explain": "Meridian\n\n" + padding,
	}
	for _, provider := range testutil.Providers {
		for name, reply := range replies {
			t.Run(provider+"/"+name, func(t *testing.T) {
				m, srv := testutil.NewModelFor(t, provider, testutil.Text(reply))
				sess := New(m, Config{Memory: true, MaxAnswerTokens: 4096}).NewSession()
				for round := 1; round <= 3; round++ {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					ans, err := sess.Answer(ctx, skill.Challenge{Round: round, Rounds: 3, Narrative: "The supply ship Meridian arrived two hours late. Think at length before you answer.", Question: "Which ship arrived late?", Budget: 5 * time.Second})
					cancel()
					if err != nil {
						t.Fatalf("round %d: %v", round, err)
					}
					if ans != "Meridian" {
						t.Fatalf("round %d: answer %q", round, ans)
					}
				}
				reqs := srv.Received()
				if len(reqs) != 3 {
					t.Fatalf("%d requests", len(reqs))
				}
				var turns int
				for _, msg := range reqs[2].Messages {
					if msg.Role != "assistant" && msg.Role != "model" {
						continue
					}
					turns++
					if len(msg.Content) > skill.MaxAnswerBytes {
						t.Errorf("round 3 re-sends an assistant turn of %d bytes (%d words), over the %d bytes of an answer", len(msg.Content), testutil.Tokens(msg.Content), skill.MaxAnswerBytes)
					}
				}
				if turns != 2 {
					t.Errorf("round 3 carries %d assistant turns, want 2 (rounds 1 and 2)", turns)
				}
			})
		}
	}
}
