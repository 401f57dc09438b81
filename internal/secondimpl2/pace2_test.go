package secondimpl2

import (
	"errors"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// A prover whose handler reads the hello 1 s after it arrived and acks
// 9.8 s after reading it meets its deadline (§5a: within the handshake
// timeout of reading the hello); the verifier's wait, from writing the
// hello, includes the path allowance (document 1.12.2). Before it, our
// verifier gave up at 10 s: "no hello ack within the deadline".
func TestPaceLateHelloRead(t *testing.T) {
	t.Parallel()
	pol := skill.DefaultPolicy()
	pol.Tau = 2 * time.Second
	p := newPair(t, "tcp", protocol.Config{Policy: pol})
	p.mine.prover.helloLate = time.Second
	p.mine.prover.ackAfter = handshakeTimeout - 200*time.Millisecond
	res, err := p.ours.Verify(p.ctx, p.mine.h.ID(), false)
	p.checkOurs(t, res, err)
}

// My verifier waits for the ack the handshake timeout plus the path
// allowance P = 2 s from writing the hello (§5a, document 1.12.2): a
// prover whose handler reads the hello 1.5 s after it arrived and acks
// 9.8 s after reading it (within its own deadline) is verified. With
// the handshake timeout alone my verifier found it unresponsive.
func TestPaceMyVerifierWaitsPathAllowance(t *testing.T) {
	t.Parallel()
	v, p, ctx := newMinePair(t, true)
	p.prover.helloLate = 1500 * time.Millisecond
	p.prover.ackAfter = handshakeTimeout - 200*time.Millisecond
	vr := v.verify(ctx, p.h.ID(), defaultVerifierOpts())
	if vr.noSession != nil || !vr.accepted {
		t.Fatalf("late ack within the prover's deadline: %v %s", vr.noSession, vr.reason)
	}
	if pr := provedBy(t, p); pr.record == nil {
		t.Fatalf("prover: %+v", pr)
	}
}

// My verifier's probes end within the round-1 window, the handshake
// timeout less P (8 s) of writing the first probe (§5 step 4, document
// 1.12.9): with 16 probes asked and each ack 0.6 s late it starts
// another only while two more of the fastest round trips fit in 8 s,
// and writes round 1 by then (it counted 10 s, and wrote round 1 at
// about 9 s).
func TestPaceMyVerifierRound1Window(t *testing.T) {
	t.Parallel()
	v, p, ctx := newMinePair(t, true)
	p.prover.probeAckAfter = func(uint32) time.Duration { return 600 * time.Millisecond }
	o := defaultVerifierOpts()
	o.probes = 16
	vr := v.verify(ctx, p.h.ID(), o)
	if vr.noSession != nil || !vr.accepted {
		t.Fatalf("slow probe acks: %v %s", vr.noSession, vr.reason)
	}
	if d := vr.round1.Sub(vr.firstProbe); d > round1Window {
		t.Fatalf("round 1 written %v after the first probe, past the round-1 window (%v)", d, round1Window)
	}
	pr := provedBy(t, p)
	if d := pr.round1Read.Sub(pr.firstFrame); pr.record == nil || d > round1Window {
		t.Fatalf("prover read round 1 %v after the first probe: %+v", d, pr)
	}
	t.Logf("round 1 written %v after the first probe", vr.round1.Sub(vr.firstProbe))
}

// My verifier waits for a probe's ack at most until the round-1 window
// ends, even when the probe timeout (5 s) reaches further: probe 3,
// written 4.9 s after the first, is acked 4.5 s later (9.4 s), and the
// verifier has given up at 8 s: no reply, no session, nothing signed
// (§5 step 4). It waited until 9.9 s and then wrote round 1.
func TestPaceMyVerifierProbeAckCut(t *testing.T) {
	t.Parallel()
	v, p, ctx := newMinePair(t, true)
	p.prover.probeAckAfter = func(seq uint32) time.Duration {
		return []time.Duration{0, 0, 4900 * time.Millisecond, 4500 * time.Millisecond}[min(seq, 3)]
	}
	o := defaultVerifierOpts()
	o.probes = 3
	vr := v.verify(ctx, p.h.ID(), o)
	ended := time.Now()
	if !errors.Is(vr.noSession, errUnresponsive) || vr.envelope != nil || !vr.round1.IsZero() {
		t.Fatalf("ack past the round-1 window: %v %s, envelope %d bytes", vr.noSession, vr.reason, len(vr.envelope))
	}
	if d := ended.Sub(vr.firstProbe); d < round1Window || d > round1Window+time.Second {
		t.Fatalf("gave up %v after the first probe, want the end of the round-1 window (%v)", d, round1Window)
	}
	if pr := provedBy(t, p); pr.verdict != nil || pr.answered != 0 {
		t.Fatalf("prover: %+v", pr)
	}
}
