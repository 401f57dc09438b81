package skill

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestGuardedProver(t *testing.T) {
	var down atomic.Bool
	var canaries, answers atomic.Int64
	inner := ProverFunc(func() Answerer {
		return AnswerFunc(func(ctx context.Context, c Challenge) (string, error) {
			if c.Question == guardCanary.Question {
				canaries.Add(1)
			} else {
				answers.Add(1)
			}
			if c.Question == "refuse" {
				return "", ErrDeclined
			}
			if down.Load() {
				return "", errors.New("dial tcp 127.0.0.1:9: connect: connection refused")
			}
			return "ok", nil
		})
	})
	g := NewGuardedProver(inner, nil)
	defer g.Close()
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	g.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	ctx := context.Background()

	// A refusal is no sign of a dead answerer.
	if _, err := g.NewSession().Answer(ctx, Challenge{Question: "refuse"}); !errors.Is(err, ErrDeclined) {
		t.Fatal(err)
	}
	if g.Unavailable() != nil || canaries.Load() != 0 {
		t.Fatalf("a refusal marked the answerer down (canaries %d)", canaries.Load())
	}
	// A failed answer makes it ask its own canary; the canary fails too:
	// down, with the error.
	down.Store(true)
	if _, err := g.NewSession().Answer(ctx, Challenge{Question: "q1"}); err == nil {
		t.Fatal("answer of a dead answerer succeeded")
	}
	waitFor(t, "the canary to mark the answerer down", func() bool { return g.Unavailable() != nil })
	// Within the back-off no further canary runs, whatever fails.
	c := canaries.Load()
	for range 5 {
		g.NewSession().Answer(ctx, Challenge{Question: "q2"})
		if g.Unavailable() == nil {
			t.Fatal("answerer up again while its canary fails")
		}
	}
	if canaries.Load() != c {
		t.Fatalf("%d canaries within the back-off, want none", canaries.Load()-c)
	}
	// After the back-off a hello's check asks again; the answerer is
	// back: the mark clears.
	down.Store(false)
	advance(guardMinBackoff)
	g.Unavailable()
	waitFor(t, "the canary to clear the mark", func() bool { return g.Unavailable() == nil })
	// A failure caused by the caller's deadline is not the answerer's.
	down.Store(true)
	c = canaries.Load()
	dctx, cancel := context.WithCancel(ctx)
	cancel()
	g.NewSession().Answer(dctx, Challenge{Question: "q3"})
	if canaries.Load() != c || g.Unavailable() != nil {
		t.Fatal("a cancelled answer started a canary")
	}
	// Check runs the canary now and records it.
	advance(guardMaxBackoff)
	if err := g.Check(ctx); err == nil || g.Unavailable() == nil {
		t.Fatalf("Check of a dead answerer: %v", err)
	}
}
