package skill_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/llm"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/solve"
)

// TestRateLimitWaitDeclinesHellos: an answer refused by the provider's
// rate limit with a stated wait (Retry-After) tells the node that its
// answerer will not answer before then. A verifier can bring that about
// within its own budgets (its rounds burn the provider's per-minute
// quota, which the node's hourly token bucket lets it do in a burst);
// the guard took the refusal as a reply ("there, only busy") and the
// node kept accepting hellos whose sessions could only end with
// Decline{PROVER_ERROR}, which every honest verifier of that minute
// signed as a declined rejection. While the wait runs Unavailable now
// says so, and the node declines BUSY at the hello, nothing signed
// (spec/protocol.md §6 step 3).
func TestRateLimitWaitDeclinesHellos(t *testing.T) {
	// The node's classifier (cmd/acaptcha llmReplied).
	replied := func(err error) bool {
		return errors.Is(err, llm.ErrRateLimited) || errors.Is(err, llm.ErrEmptyOutput) || errors.Is(err, llm.ErrTruncated)
	}
	c := skill.Challenge{Round: 1, Rounds: 1, Narrative: "The supply ship Meridian arrived two hours late.", Question: "Which ship arrived late?", Budget: 5 * time.Second}
	for _, provider := range testutil.Providers {
		t.Run(provider, func(t *testing.T) {
			limited := testutil.BrainFunc(func(testutil.BrainRequest) testutil.BrainReply {
				return testutil.BrainReply{Status: 429, RetryAfter: 20 * time.Second}
			})
			m, srv := testutil.NewModelFor(t, provider, limited)
			g := skill.NewGuardedProver(solve.New(m, solve.Config{}), nil, replied)
			defer g.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := g.NewSession().Answer(ctx, c); !errors.Is(err, llm.ErrRateLimited) || llm.RetryAfter(err) != 20*time.Second {
				t.Fatalf("answer error %v (wait %s): want a rate limit asking for 20 s", err, llm.RetryAfter(err))
			}
			if err := g.Unavailable(); err == nil {
				t.Error("the provider asked the node to wait 20 s, and the node still accepts hellos whose sessions can only fail")
			}
			if n := srv.Requests(); n != 1 {
				t.Errorf("%d provider calls, want 1 (no canary for a rate limit)", n)
			}
		})
	}
}

// TestRateLimitWithoutWaitDeclinesHellos: a provider's 429 that names no
// wait (no Retry-After) says as much as one that does: the answerer does
// not answer now. The guard held nothing for it, so the node kept
// accepting hellos whose sessions could only end Decline{PROVER_ERROR},
// each signed as a declined rejection by its verifier, and a verifier
// that spent the provider's quota within its own budgets turned the
// honest verifiers of that minute into signers of rejections. Now it
// holds hellos off (BUSY, nothing signed) for a short default
// (spec/protocol.md §6 step 3).
func TestRateLimitWithoutWaitDeclinesHellos(t *testing.T) {
	replied := func(err error) bool {
		return errors.Is(err, llm.ErrRateLimited) || errors.Is(err, llm.ErrEmptyOutput) || errors.Is(err, llm.ErrTruncated)
	}
	c := skill.Challenge{Round: 1, Rounds: 1, Narrative: "The supply ship Meridian arrived two hours late.", Question: "Which ship arrived late?", Budget: 5 * time.Second}
	for _, provider := range testutil.Providers {
		t.Run(provider, func(t *testing.T) {
			limited := testutil.BrainFunc(func(testutil.BrainRequest) testutil.BrainReply {
				return testutil.BrainReply{Status: 429}
			})
			m, srv := testutil.NewModelFor(t, provider, limited)
			g := skill.NewGuardedProver(solve.New(m, solve.Config{}), nil, replied)
			defer g.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := g.NewSession().Answer(ctx, c); !errors.Is(err, llm.ErrRateLimited) || llm.RetryAfter(err) != 0 {
				t.Fatalf("answer error %v (wait %s): want a rate limit naming no wait", err, llm.RetryAfter(err))
			}
			if err := g.Unavailable(); err == nil {
				t.Error("the provider refused the answer with a rate limit, and the node still accepts hellos whose sessions can only fail")
			}
			if n := srv.Requests(); n != 1 {
				t.Errorf("%d provider calls, want 1 (no canary for a rate limit)", n)
			}
		})
	}
}
