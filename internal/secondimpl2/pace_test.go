package secondimpl2

import (
	"context"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// A prover at the slowest pace the spec allows that still passes: its
// HelloAck just within the handshake timeout of reading the hello
// (§5a), each answer just within the round's budget; our verifier must
// accept it.
func TestPaceSlowestProverAccepted(t *testing.T) {
	t.Parallel()
	pol := skill.DefaultPolicy()
	pol.Tau = 2 * time.Second
	p := newPair(t, "tcp", protocol.Config{Policy: pol})
	p.mine.prover.ackAfter = handshakeTimeout - 100*time.Millisecond
	p.mine.prover.answerAfter = func(c *challenge) time.Duration {
		return time.Duration(c.BudgetMs)*time.Millisecond - 100*time.Millisecond
	}
	res, err := p.ours.Verify(p.ctx, p.mine.h.ID(), false)
	p.checkOurs(t, res, err)
}

// A verifier at the slowest pace the spec allows (§6 step 5, §9): its
// first probe just within I − P of reading the ack, each answer read
// 0.6 s after it came and the next frame written just within 8 s
// (10 s − P) of reading it; and round 1 at 9.7 s from writing its first
// probe, past its own round-1 window (8 s since document 1.12.9, §5
// step 4) on purpose: on loopback that is 9.7 s from our prover's
// reading the probe, within the 10 s the prover MUST wait (its floor).
// Our prover must not give up. (With document 1.12.2's bound, the next
// frame 9.8 s after reading the answer, it did: the honest prover's
// stream failed after a challenge and the verifier signed it
// protocol_error.)
func TestPaceSlowestVerifierServed(t *testing.T) {
	t.Parallel()
	p := newPair(t, "tcp", protocol.Config{})
	o := defaultVerifierOpts()
	o.rounds, o.tauMs, o.totalMs = 2, 2000, 12000 // I = 22 s
	const P = 2 * time.Second
	o.probeAfter = 22*time.Second - P - 300*time.Millisecond
	o.round1After = handshakeTimeout - 300*time.Millisecond
	o.readLate = 600 * time.Millisecond
	o.nextAfter = handshakeTimeout - P - 300*time.Millisecond
	vr := p.mine.verify(p.ctx, p.oursH.ID(), o)
	if vr.noSession != nil || !vr.accepted {
		t.Fatalf("slow verifier: %v %s %+v", vr.noSession, vr.reason, vr.rounds)
	}
	pr := p.ourProved(t)
	if pr.Err != nil || !pr.Accepted || pr.Attestation == nil {
		t.Fatalf("our prover cut the slow verifier off: %+v", pr)
	}
}

type stuckSource struct{}

func (stuckSource) Next(ctx context.Context) (*skill.Set, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (stuckSource) Name() string { return "stuck" }

// Our verifier whose source never answers writes its first frame after
// the ack (the inconclusive verdict) within I − P of the prover's ack
// (§5 step 1, document 1.12.3); it wrote it just after I − 2 s of reading
// the ack before.
func TestPaceSlowSourceFirstFrame(t *testing.T) {
	t.Parallel()
	pol := skill.DefaultPolicy()
	pol.Tau, pol.Total = 2*time.Second, 5*time.Second // I = 15 s
	p := newPair(t, "tcp", protocol.Config{Policy: pol, Source: stuckSource{}})
	res, err := p.ours.Verify(p.ctx, p.mine.h.ID(), false)
	if err == nil && res.Verdict.Accepted {
		t.Fatalf("accepted without a source: %+v", res)
	}
	pr := p.myProved(t)
	if pr.firstFrame.IsZero() || pr.verdict == nil || pr.verdict.Reason != "inconclusive" {
		t.Fatalf("my prover: %+v", pr)
	}
	if d := pr.firstFrame.Sub(pr.ackWritten); d > 15*time.Second-2*time.Second {
		t.Fatalf("first frame after the ack %v after it, over I − P = 13 s", d)
	}
}
