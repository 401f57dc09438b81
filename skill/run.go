package skill

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SimulatedAnswerer is an Answerer that reports how long it would have
// taken instead of taking it (the human timing model in evaluation). Run
// uses the reported duration in place of the wall clock.
type SimulatedAnswerer interface {
	Answerer
	AnswerSimulated(ctx context.Context, c Challenge) (answer string, took time.Duration, err error)
}

// ErrDeclined is returned by an Answerer that refuses a challenge.
var ErrDeclined = errors.New("prover declined the challenge")

// Run drives a session in-process against an answerer, timing each answer
// on the local clock (or on the answerer's simulated clock). It is the
// transport-free path used by evaluation, benchmarks and the demo; the
// libp2p transport in package protocol drives the same state machine over
// a stream.
func Run(ctx context.Context, s *Session, a Answerer, now func() time.Time) Verdict {
	if now == nil {
		now = time.Now
	}
	start := now()
	var simulated time.Duration
	sim, isSim := a.(SimulatedAnswerer)
	for {
		c, ok := s.Current()
		if !ok {
			break
		}
		var (
			ans     string
			err     error
			elapsed time.Duration
		)
		if isSim {
			ans, elapsed, err = sim.AnswerSimulated(ctx, c)
		} else {
			deadline := s.AnswerDeadline(0, now().Sub(start))
			rctx, cancel := context.WithTimeout(ctx, deadline)
			t0 := now()
			ans, err = a.Answer(rctx, c)
			elapsed = now().Sub(t0)
			cancel()
		}
		switch {
		case errors.Is(err, ErrDeclined):
			s.Fail(ReasonDeclined, err.Error(), true)
			continue
		case err != nil && ctx.Err() != nil:
			s.Fail(ReasonInconclusive, fmt.Sprintf("verifier cancelled: %v", ctx.Err()), true)
			continue
		case err != nil && errors.Is(err, context.DeadlineExceeded):
			s.FailRound(ReasonTimeout, "no answer within the budget", Timing{Elapsed: elapsed})
			continue
		case err != nil:
			s.Fail(ReasonProtocolError, fmt.Sprintf("prover failed: %v", err), true)
			continue
		}
		if isSim {
			simulated += elapsed
		}
		since := now().Sub(start)
		if isSim {
			since = simulated
		}
		if _, err := s.Submit(ans, Timing{Elapsed: elapsed, SinceStart: since}); err != nil {
			break
		}
	}
	v, _ := s.Verdict()
	return v
}
