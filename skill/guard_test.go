package skill

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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
	g := NewGuardedProver(inner, nil, nil)
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

// A canary that began before an answer succeeded does not mark the
// answerer down when it fails afterwards (its news is older).
func TestGuardedProverStaleCanary(t *testing.T) {
	release := make(chan struct{})
	var started atomic.Bool
	var fail atomic.Bool
	fail.Store(true)
	inner := ProverFunc(func() Answerer {
		return AnswerFunc(func(ctx context.Context, c Challenge) (string, error) {
			if c.Question == guardCanary.Question {
				started.Store(true)
				<-release
				return "", errors.New("503 from the provider")
			}
			if fail.Load() {
				return "", errors.New("connection reset")
			}
			return "ok", nil
		})
	})
	g := NewGuardedProver(inner, nil, nil)
	defer g.Close()
	ctx := context.Background()
	g.NewSession().Answer(ctx, Challenge{Question: "q"}) // fails: a canary starts and blocks
	waitFor(t, "the canary to start", started.Load)
	fail.Store(false)
	if _, err := g.NewSession().Answer(ctx, Challenge{Question: "q"}); err != nil {
		t.Fatal(err)
	}
	close(release)
	waitFor(t, "the canary to end", func() bool { g.mu.Lock(); defer g.mu.Unlock(); return !g.checking })
	if err := g.Unavailable(); err != nil {
		t.Fatalf("marked down by a canary older than a successful answer: %v", err)
	}
}

// Errors that came with a reply (rate limit, empty output) neither start
// a canary nor fail one; Check says the answerer is there.
func TestGuardedProverReplyErrors(t *testing.T) {
	errLimited := errors.New("429 rate limit")
	var canaries atomic.Int64
	inner := ProverFunc(func() Answerer {
		return AnswerFunc(func(ctx context.Context, c Challenge) (string, error) {
			if c.Question == guardCanary.Question {
				canaries.Add(1)
			}
			return "", errLimited
		})
	})
	g := NewGuardedProver(inner, nil, func(err error) bool { return errors.Is(err, errLimited) })
	defer g.Close()
	g.NewSession().Answer(context.Background(), Challenge{Question: "q"})
	if canaries.Load() != 0 {
		t.Fatal("a rate-limited answer started a canary")
	}
	if err := g.Check(context.Background()); err != nil || g.Unavailable() != nil {
		t.Fatalf("a rate-limited canary: Check %v, Unavailable %v", err, g.Unavailable())
	}
}

// Close and hellos' checks at once: no canary starts after Close (run
// under -race), and Close waits for the one under way.
func TestGuardedProverCloseRace(t *testing.T) {
	inner := ProverFunc(func() Answerer {
		return AnswerFunc(func(ctx context.Context, c Challenge) (string, error) {
			return "", errors.New("down")
		})
	})
	for range 20 {
		g := NewGuardedProver(inner, nil, nil)
		if err := g.Check(context.Background()); err == nil {
			t.Fatal("Check of a dead answerer")
		}
		g.mu.Lock()
		g.next = time.Time{}
		g.mu.Unlock()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 50 {
					g.Unavailable()
				}
			})
		}
		g.Close()
		wg.Wait()
		g.mu.Lock()
		checking := g.checking
		g.mu.Unlock()
		if checking {
			t.Fatal("a canary started after Close")
		}
	}
}

// noKinds is a prover that answers no kind.
type noKinds struct{ ProverFunc }

func (noKinds) AnswersKind(string) bool { return false }

// The guard answers the kinds its prover answers.
func TestGuardedProverKinds(t *testing.T) {
	g := NewGuardedProver(ProverFunc(func() Answerer { return nil }), nil, nil)
	defer g.Close()
	if !Answers(g, NarrativeKind) {
		t.Fatal("the guard of a prover of every kind does not answer narrative")
	}
	h := NewGuardedProver(noKinds{func() Answerer { return nil }}, nil, nil)
	defer h.Close()
	if Answers(h, NarrativeKind) {
		t.Fatal("the guard of a prover of no kind answers narrative")
	}
}

// While the answerer is marked down, the canary is asked again in the
// background when each back-off ends, without waiting for a hello: the
// first verifier after the answerer came back is not turned away.
func TestGuardedProverBackgroundRecheck(t *testing.T) {
	var down atomic.Bool
	var canaries atomic.Int64
	inner := ProverFunc(func() Answerer {
		return AnswerFunc(func(ctx context.Context, c Challenge) (string, error) {
			if c.Question == guardCanary.Question {
				canaries.Add(1)
			}
			if down.Load() {
				return "", errors.New("dial tcp 127.0.0.1:9: connect: connection refused")
			}
			return "ok", nil
		})
	})
	g := NewGuardedProver(inner, nil, nil)
	type pending struct {
		d       time.Duration
		f       func()
		stopped *atomic.Bool
	}
	var mu sync.Mutex
	var timers []pending
	g.after = func(d time.Duration, f func()) func() bool {
		mu.Lock()
		defer mu.Unlock()
		p := pending{d: d, f: f, stopped: new(atomic.Bool)}
		timers = append(timers, p)
		return func() bool { return !p.stopped.Swap(true) }
	}
	last := func() pending {
		mu.Lock()
		defer mu.Unlock()
		if len(timers) == 0 {
			t.Fatal("no background re-check scheduled")
		}
		return timers[len(timers)-1]
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(timers) }
	ctx := context.Background()

	down.Store(true)
	if err := g.Check(ctx); err == nil {
		t.Fatal("Check of a dead answerer succeeded")
	}
	p := last()
	if p.d != guardMinBackoff || p.stopped.Load() {
		t.Fatalf("first re-check after %v (stopped %v), want %v", p.d, p.stopped.Load(), guardMinBackoff)
	}
	// The back-off ends with the answerer still down: the canary runs
	// (no hello needed) and the next re-check waits twice as long.
	c := canaries.Load()
	p.f()
	waitFor(t, "the second re-check", func() bool { return count() == 2 })
	if canaries.Load() != c+1 {
		t.Fatalf("%d canaries at the back-off's end, want 1", canaries.Load()-c)
	}
	if p = last(); p.d != 2*guardMinBackoff {
		t.Fatalf("second re-check after %v, want %v", p.d, 2*guardMinBackoff)
	}
	// The answerer is back: the next background canary clears the mark
	// before any hello asks.
	down.Store(false)
	p.f()
	waitFor(t, "the background canary to clear the mark", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.down == nil && !g.checking
	})
	if g.Unavailable() != nil {
		t.Fatal("still unavailable after the background canary succeeded")
	}
	if count() != 2 {
		t.Fatalf("%d re-checks scheduled after the mark cleared, want none more", count()-2)
	}
	// Down again, then closed: Close cancels the pending re-check.
	down.Store(true)
	g.Check(ctx)
	p = last()
	g.Close()
	if !p.stopped.Load() {
		t.Fatal("Close left the background re-check pending")
	}
	c = canaries.Load()
	p.f() // a timer that fired anyway starts nothing after Close
	if canaries.Load() != c {
		t.Fatal("a canary ran after Close")
	}
}

// A start-up check its caller gave up on (Ctrl-C during attest's check)
// says nothing of the answerer: no warning that it is unreachable, and
// it is not marked down.
func TestGuardedProverCheckCancelledIsNoVerdict(t *testing.T) {
	inner := ProverFunc(func() Answerer {
		return AnswerFunc(func(ctx context.Context, c Challenge) (string, error) {
			<-ctx.Done()
			return "", fmt.Errorf("call ended: %w", ctx.Err())
		})
	})
	var logs bytes.Buffer
	g := NewGuardedProver(inner, slog.New(slog.NewTextHandler(&logs, nil)), nil)
	defer g.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	if err := g.Check(ctx); err == nil {
		t.Fatal("a cancelled check succeeded")
	}
	if g.Unavailable() != nil || strings.Contains(logs.String(), "unreachable") {
		t.Fatalf("a cancelled check marked the answerer down (%v); log %q", g.Unavailable(), logs.String())
	}
}

// CheckAnswers (attest's check before it dials) refuses a rate limit and
// an empty reply, which Check passes as "there" (809b1b3's attest used
// Check, dialed, failed the peer's session and stored the peer's signed
// rejection, which then stood); neither marks the answerer down.
func TestGuardedProverCheckAnswersRefusesReplies(t *testing.T) {
	errLimited := errors.New("429 rate limit")
	inner := ProverFunc(func() Answerer {
		return AnswerFunc(func(ctx context.Context, c Challenge) (string, error) {
			return "", errLimited
		})
	})
	g := NewGuardedProver(inner, nil, func(err error) bool { return errors.Is(err, errLimited) })
	defer g.Close()
	if err := g.CheckAnswers(context.Background()); !errors.Is(err, errLimited) {
		t.Fatalf("CheckAnswers of a rate-limited answerer: %v, want the rate limit", err)
	}
	if err := g.Unavailable(); err != nil {
		t.Fatalf("a rate-limited canary marked the answerer down: %v", err)
	}
	if err := g.Check(context.Background()); err != nil {
		t.Fatalf("Check of a rate-limited answerer: %v, want nil (there, only busy)", err)
	}
}

// waitError is a rate limit that names the provider's wait, as package
// llm's does (llm.RetryAfter).
type waitError struct{ after time.Duration }

func (e waitError) Error() string             { return fmt.Sprintf("rate limited (retry after %s)", e.after) }
func (e waitError) RetryAfter() time.Duration { return e.after }

// TestGuardedProverHoldsForProviderWait: a provider's stated wait holds
// hellos off until it has passed (at most guardMaxHold) or an answer
// succeeds; a canary refused with a wait holds them off too; an error
// that is no rate limit holds nothing (TestGuardedProverReplyErrors), a
// rate limit that names no wait a default (TestGuardedProverHoldsForWaitlessLimit).
// TestRateLimitWaitDeclinesHellos drives it over the providers' wire.
func TestGuardedProverHoldsForProviderWait(t *testing.T) {
	var fail atomic.Pointer[error]
	inner := ProverFunc(func() Answerer {
		return AnswerFunc(func(ctx context.Context, c Challenge) (string, error) {
			if e := fail.Load(); e != nil {
				return "", *e
			}
			return "ok", nil
		})
	})
	failWith := func(err error) { fail.Store(&err) }
	g := NewGuardedProver(inner, nil, func(err error) bool { var w waitError; return errors.As(err, &w) })
	defer g.Close()
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	g.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	ctx := context.Background()
	answer := func() { _, _ = g.NewSession().Answer(ctx, Challenge{Question: "q"}) }

	failWith(fmt.Errorf("solver round 1: %w", waitError{20 * time.Second}))
	answer()
	if g.Unavailable() == nil {
		t.Fatal("no hold for a 20 s wait")
	}
	advance(19 * time.Second)
	if g.Unavailable() == nil {
		t.Fatal("hold ended 1 s early")
	}
	advance(2 * time.Second)
	if err := g.Unavailable(); err != nil {
		t.Fatalf("hold still on after the wait: %v", err)
	}

	// A shorter wait does not cut a longer one short.
	failWith(waitError{time.Hour})
	answer()
	failWith(waitError{time.Second})
	answer()
	advance(guardMaxHold - time.Second)
	if g.Unavailable() == nil {
		t.Fatal("a later 1 s wait cut the hold short")
	}
	advance(2 * time.Second)
	if err := g.Unavailable(); err != nil {
		t.Fatalf("an hour's wait held hellos off beyond %s: %v", guardMaxHold, err)
	}

	// A successful answer ends the hold at once.
	failWith(waitError{time.Minute})
	answer()
	fail.Store(nil)
	answer()
	if err := g.Unavailable(); err != nil {
		t.Fatalf("hold still on after an answer: %v", err)
	}

	// A canary refused with a wait holds them off; one that answers ends
	// the hold.
	failWith(waitError{time.Minute})
	if err := g.Check(ctx); err != nil || g.Unavailable() == nil {
		t.Fatalf("canary refused with a wait: Check %v, Unavailable %v", err, g.Unavailable())
	}
	fail.Store(nil)
	if err := g.Check(ctx); err != nil || g.Unavailable() != nil {
		t.Fatalf("canary answered: Check %v, Unavailable %v", err, g.Unavailable())
	}
}

// limitError is a rate limit that names no wait, as llm.ErrRateLimited
// without a Retry-After.
type limitError struct{}

func (limitError) Error() string     { return "rate limited" }
func (limitError) RateLimited() bool { return true }

// TestGuardedProverHoldsForWaitlessLimit: a rate limit that names no
// wait holds hellos off for guardLimitHold; refusals of sessions accepted
// before the hold neither lengthen nor double it; one after a hold ended
// with no answer in between doubles it, up to guardLimitMaxHold; an
// answer ends the hold and resets the doubling.
// TestRateLimitWithoutWaitDeclinesHellos drives it over the providers'
// wire.
func TestGuardedProverHoldsForWaitlessLimit(t *testing.T) {
	var fail atomic.Bool
	inner := ProverFunc(func() Answerer {
		return AnswerFunc(func(ctx context.Context, c Challenge) (string, error) {
			if fail.Load() {
				return "", fmt.Errorf("solver round 1: %w", limitError{})
			}
			return "ok", nil
		})
	})
	g := NewGuardedProver(inner, nil, func(err error) bool { var l limitError; return errors.As(err, &l) })
	defer g.Close()
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	g.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	answer := func() { _, _ = g.NewSession().Answer(context.Background(), Challenge{Question: "q"}) }
	// held reports whether hellos are held off for d and not beyond.
	held := func(d time.Duration) bool {
		t.Helper()
		advance(d - time.Second)
		if g.Unavailable() == nil {
			t.Errorf("hold ended before %s", d)
			return false
		}
		advance(time.Second)
		if err := g.Unavailable(); err != nil {
			t.Errorf("hold still on after %s: %v", d, err)
			return false
		}
		return true
	}

	fail.Store(true)
	answer()
	answer() // a session accepted before the hold
	if !held(guardLimitHold) {
		return
	}
	for _, d := range []time.Duration{2 * guardLimitHold, 4 * guardLimitHold, guardLimitMaxHold, guardLimitMaxHold} {
		answer()
		if !held(d) {
			return
		}
	}
	// An answer resets the doubling.
	fail.Store(false)
	answer()
	fail.Store(true)
	answer()
	held(guardLimitHold)
	// An answer ends a hold at once.
	answer()
	fail.Store(false)
	answer()
	if err := g.Unavailable(); err != nil {
		t.Fatalf("hold still on after an answer: %v", err)
	}
}
