package secondimpl2

import (
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
// first probe just within I of the ack, round 1 just within 10 s of its
// first probe, each next frame just within 10 s of reading the answer.
// Our prover must not give up.
func TestPaceSlowestVerifierServed(t *testing.T) {
	t.Parallel()
	p := newPair(t, "tcp", protocol.Config{})
	o := defaultVerifierOpts()
	o.rounds, o.tauMs, o.totalMs = 2, 2000, 12000 // I = 22 s
	o.probeAfter = 22*time.Second - 500*time.Millisecond
	o.round1After = handshakeTimeout - 500*time.Millisecond
	o.nextAfter = handshakeTimeout - 500*time.Millisecond
	vr := p.mine.verify(p.ctx, p.oursH.ID(), o)
	if vr.noSession != nil || !vr.accepted {
		t.Fatalf("slow verifier: %v %s", vr.noSession, vr.reason)
	}
	pr := p.ourProved(t)
	if pr.Err != nil || !pr.Accepted || pr.Attestation == nil {
		t.Fatalf("our prover cut the slow verifier off: %+v", pr)
	}
}
