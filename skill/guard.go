package skill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Back-off of GuardedProver's canary while the answerer is down.
const (
	guardMinBackoff = 30 * time.Second
	guardMaxBackoff = 5 * time.Minute
	// guardCanaryTimeout bounds one canary call.
	guardCanaryTimeout = time.Minute
	// guardMaxHold caps how long a provider's stated wait (its
	// Retry-After) holds hellos off: then a session tries again.
	guardMaxHold = guardMaxBackoff
	// guardLimitHold is how long a rate limit that states no wait holds
	// hellos off, doubled for each further one that comes after a hold
	// ended with no answer succeeding since, up to guardLimitMaxHold: a
	// per-minute quota (the usual limit that states no wait) refills
	// within a minute, and a longer hold would only lengthen the time a
	// verifier that spent the quota keeps the node busy.
	guardLimitHold    = 10 * time.Second
	guardLimitMaxHold = time.Minute
)

// guardCanary is the challenge GuardedProver asks to learn whether its
// answerer is reachable: fixed, short, and written by nobody else, so that
// no verifier's text can make the answerer look down. Its answer is not
// judged: any reply means the answerer is there.
var guardCanary = Challenge{
	Round: 1, Rounds: 1, Domain: "health check",
	Narrative: "The night shift logged one event: at 02:10 the cold room at site B read 4 degrees, within its limit.",
	Question:  "At what time was the cold room reading logged?",
	Budget:    30 * time.Second,
}

// GuardedProver wraps a Prover whose answerer can become unreachable (an
// LLM behind a network). When an answer fails for another reason than a
// refusal (ErrDeclined) or the end of its context, it asks the answerer a
// canary challenge of its own; while the canary fails, Unavailable
// returns the error, and a node declines to be verified (spec
// protocol.md §6: BUSY at the hello, nothing signed) rather than accept
// sessions it can only fail, each of which the verifier signs as a
// rejection. The canary is asked again after a back-off (30 s doubling to
// 5 min) when a hello comes, one at a time, and a success clears the
// mark. While the mark stands the canary is also asked in the background
// when each back-off ends, so that the first verifier after the answerer
// came back is not the one turned away (at most one canary per back-off:
// 12 an hour at 5 min). An answer (or canary) refused with a wait the
// provider stated (a rate limit's Retry-After: an error with a
// RetryAfter() time.Duration method, as package llm's) makes Unavailable
// return an error until that wait, at most guardMaxHold, has passed or
// an answer succeeds: the answerer is known not to answer before then. A
// rate limit that states no wait (an error with a RateLimited() bool
// method that returns true, as llm.ErrRateLimited) holds them off for
// guardLimitHold (10 s), doubled for each further one after a hold ended
// with no answer succeeding since, at most guardLimitMaxHold (1 min).
// Neither starts a canary (reply). Close stops a canary under way and
// the timer.
type GuardedProver struct {
	prover Prover
	log    *slog.Logger
	now    func() time.Time
	reply  func(error) bool
	// after runs f once after d unless the returned stop is called
	// first (time.AfterFunc; tests replace it).
	after  func(d time.Duration, f func()) (stop func() bool)
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	down    error     // the last canary's error; nil: reachable
	next    time.Time // when a canary may run again
	backoff time.Duration
	// until is when the wait the provider last asked for ends (zero:
	// none).
	until time.Time
	// limitHold is the last hold of a rate limit that stated no wait
	// (zero: none since an answer succeeded).
	limitHold time.Duration
	checking  bool
	closed    bool
	stopTimer func() bool // the pending background re-check, if any
	// gen counts the answers that succeeded: a canary that began before
	// one does not mark the answerer down after it (its failure is
	// older news than the success).
	gen uint64
	wg  sync.WaitGroup
}

// NewGuardedProver wraps p; log receives the up and down transitions (a
// discarding logger when nil). reply, when not nil, tells the errors that
// came with a reply of the answerer's (a rate limit, an empty or cut
// output: it is there, only busy or unhappy), which neither start a canary
// nor fail one; every other error counts.
func NewGuardedProver(p Prover, log *slog.Logger, reply func(error) bool) *GuardedProver {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if reply == nil {
		reply = func(error) bool { return false }
	}
	ctx, cancel := context.WithCancel(context.Background())
	after := func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	return &GuardedProver{prover: p, log: log, now: time.Now, reply: reply, after: after, ctx: ctx, cancel: cancel}
}

// NewSession implements Prover.
func (g *GuardedProver) NewSession() Answerer {
	return guardedAnswerer{g: g, inner: g.prover.NewSession()}
}

// AnswersKind implements KindAnswerer as the wrapped prover does.
func (g *GuardedProver) AnswersKind(name string) bool { return Answers(g.prover, name) }

type guardedAnswerer struct {
	g     *GuardedProver
	inner Answerer
}

// AnswersKind implements KindAnswerer as the wrapped answerer does.
func (a guardedAnswerer) AnswersKind(name string) bool { return Answers(a.inner, name) }

func (a guardedAnswerer) Answer(ctx context.Context, c Challenge) (string, error) {
	s, err := a.inner.Answer(ctx, c)
	switch {
	case err == nil:
		a.g.up()
	case errors.Is(err, ErrDeclined) || ctx.Err() != nil:
	default:
		a.g.hold(err)
		if !a.g.reply(err) {
			a.g.suspect()
		}
	}
	return s, err
}

// providerWait is the wait a provider's refusal asked for (the
// Retry-After of package llm's rate-limit error), or 0.
func providerWait(err error) time.Duration {
	var w interface{ RetryAfter() time.Duration }
	if errors.As(err, &w) {
		return w.RetryAfter()
	}
	return 0
}

// rateLimited reports whether err is a provider's rate limit
// (llm.ErrRateLimited), with or without a stated wait.
func rateLimited(err error) bool {
	var r interface{ RateLimited() bool }
	return errors.As(err, &r) && r.RateLimited()
}

// hold records the wait err asks for, if any (holdLocked).
func (g *GuardedProver) hold(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.holdLocked(err)
}

// holdLocked holds hellos off until the wait err asks for (at most
// guardMaxHold) has passed, or for the next limitHold when err is a rate
// limit that states none.
func (g *GuardedProver) holdLocked(err error) {
	now := g.now()
	w := providerWait(err)
	if w <= 0 {
		if !rateLimited(err) || now.Before(g.until) {
			// Not a rate limit; or one of a hold's time (a session
			// accepted before it), which neither lengthens nor doubles
			// it.
			return
		}
		w = min(max(2*g.limitHold, guardLimitHold), guardLimitMaxHold)
		g.limitHold = w
	}
	until := now.Add(min(w, guardMaxHold))
	if !until.After(g.until) {
		return
	}
	if !now.Before(g.until) {
		g.log.Warn("answerer rate limited by its provider: this node declines to be verified (BUSY, nothing signed) until the wait it asked for (a default when it named none) has passed",
			"wait", w, "declining_for", until.Sub(now), "err", err)
	}
	g.until = until
}

// Unavailable reports the error of the answerer's last canary while it
// failed (nil when the answerer is reachable, or not known to be down),
// and starts another canary when the back-off has passed.
func (g *GuardedProver) Unavailable() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.down == nil {
		if left := g.until.Sub(g.now()); left > 0 {
			return fmt.Errorf("answerer rate limited: its provider asked to wait %s more", left.Round(time.Second))
		}
		return nil
	}
	if !g.checking && !g.now().Before(g.next) {
		g.startLocked()
	}
	return g.down
}

// Check asks the canary now and waits for its result (the start-up check
// of a command that needs its answerer); it records the result as a
// background canary would.
func (g *GuardedProver) Check(ctx context.Context) error {
	err := g.CheckAnswers(ctx)
	if err != nil && ctx.Err() == nil && g.reply(err) {
		return nil // there, only busy or unhappy
	}
	return err
}

// CheckAnswers is Check for a command about to be verified once (attest):
// it also returns the errors that came with a reply but no answer (a rate
// limit, an empty or cut output), which Check passes as "there". A
// session started now would fail on them, and its verifier sign the
// failure as a rejection that then stands. It records the result as
// Check does (such a reply does not mark the answerer down).
func (g *GuardedProver) CheckAnswers(ctx context.Context) error {
	g.mu.Lock()
	gen := g.gen
	g.mu.Unlock()
	err := g.canary(ctx)
	if err != nil && ctx.Err() != nil {
		// The caller stopped waiting (Ctrl-C during attest's start-up
		// check): that says nothing of the answerer, so no "answerer
		// unreachable" warning and no back-off.
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.recordLocked(err, gen)
	return err
}

// CheckAsync starts a canary now unless one runs (a node's start-up
// check: a dead answerer is reported, and hellos declined, before the
// first session fails).
func (g *GuardedProver) CheckAsync() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.checking {
		g.startLocked()
	}
}

// Close stops a canary under way and waits for it; no canary starts
// after it.
func (g *GuardedProver) Close() {
	g.mu.Lock()
	g.closed = true
	g.cancel()
	g.stopTimerLocked()
	g.mu.Unlock()
	g.wg.Wait()
}

// stopTimerLocked cancels the pending background re-check.
func (g *GuardedProver) stopTimerLocked() {
	if g.stopTimer != nil {
		g.stopTimer()
		g.stopTimer = nil
	}
}

// recheck is the background re-check at the end of a back-off: a canary
// unless the mark cleared, one runs or the prover closed.
func (g *GuardedProver) recheck() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopTimer = nil
	if g.down != nil && !g.checking {
		g.startLocked()
	}
}

// up clears the mark after an answer succeeded.
func (g *GuardedProver) up() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.clearLocked()
	g.until, g.limitHold = time.Time{}, 0
	g.gen++
}

// clearLocked marks the answerer reachable.
func (g *GuardedProver) clearLocked() {
	if g.down != nil {
		// At the level of the warning that it was down: a node logs at
		// warn by default, and the operator who saw that should see
		// this.
		g.log.Warn("answerer reachable again: this node is verified again")
	}
	g.down, g.backoff = nil, 0
	g.stopTimerLocked()
}

// suspect starts a canary after a failed answer, unless one runs or the
// back-off since the last one has not passed.
func (g *GuardedProver) suspect() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.checking || g.now().Before(g.next) {
		return
	}
	g.startLocked()
}

func (g *GuardedProver) startLocked() {
	if g.closed {
		return
	}
	g.checking = true
	gen := g.gen
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		err := g.canary(g.ctx)
		g.mu.Lock()
		defer g.mu.Unlock()
		g.checking = false
		if g.closed {
			return
		}
		g.recordLocked(err, gen)
	}()
}

// recordLocked records a canary's result; gen is g.gen when it began.
func (g *GuardedProver) recordLocked(err error, gen uint64) {
	switch {
	case err == nil:
		g.until, g.limitHold = time.Time{}, 0 // the provider answered
	case gen == g.gen:
		g.holdLocked(err)
	}
	if err != nil && (g.reply(err) || gen != g.gen) {
		// A reply (the answerer is there), or an answer succeeded
		// since the canary began: not down.
		err = nil
	}
	if err == nil {
		g.clearLocked()
		g.next = g.now().Add(guardMinBackoff)
		return
	}
	if g.down == nil {
		g.log.Warn("answerer unreachable: this node declines to be verified (BUSY, nothing signed) until it answers again", "err", err)
	}
	g.down = err
	g.backoff = min(max(2*g.backoff, guardMinBackoff), guardMaxBackoff)
	g.next = g.now().Add(g.backoff)
	g.stopTimerLocked()
	if !g.closed {
		g.stopTimer = g.after(g.backoff, g.recheck)
	}
}

func (g *GuardedProver) canary(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, guardCanaryTimeout)
	defer cancel()
	if _, err := g.prover.NewSession().Answer(ctx, guardCanary); err != nil {
		return fmt.Errorf("answerer health check: %w", err)
	}
	return nil
}
