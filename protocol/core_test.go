package protocol

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/skill"
)

func randomPeer(t testing.TB) peer.ID {
	t.Helper()
	_, id := testutil.NewKey(t)
	return id
}

// paidSession begins a session for p and pays it.
func paidSession(t *testing.T, v *Verifier, p peer.ID, opt BeginOptions) *VerifierSession {
	t.Helper()
	vs, err := v.Begin(p, opt)
	if err != nil {
		t.Fatal(err)
	}
	pow, err := SolvePow(context.Background(), vs.Nonce(), p, vs.PowDifficulty(), MaxPowDifficulty)
	if err != nil {
		t.Fatal(err)
	}
	if err := vs.Pay(context.Background(), pow); err != nil {
		t.Fatal(err)
	}
	return vs
}

// TestCoreSession runs a session through the transport-free core alone:
// payment, the rounds judged with the door's timing, the signed record.
func TestCoreSession(t *testing.T) {
	src := sourceOf("core")
	svc := newService(t, newHost(t), Config{Source: src})
	v := svc.Core()
	answers := oracle(src.sets...)
	p := randomPeer(t)

	// Unpaid: refused before anything is drawn, and counted.
	vs, err := v.Begin(p, BeginOptions{MinPowDifficulty: 12})
	if err != nil {
		t.Fatal(err)
	}
	if vs.PowDifficulty() != 12 || len(vs.Nonce()) != NonceBytes {
		t.Fatalf("difficulty %d, nonce %d bytes", vs.PowDifficulty(), len(vs.Nonce()))
	}
	err = vs.Pay(context.Background(), []byte{1})
	if !errors.Is(err, ErrUnpaid) {
		t.Fatalf("junk pow: %v", err)
	}
	vs.Abort(err)
	if svc.budgets.unpaid != 1 {
		t.Errorf("unpaid count %d after an unpaid session", svc.budgets.unpaid)
	}
	if d := svc.budgets.difficulty(p, svc.now()); d < 1 {
		t.Errorf("difficulty %d after a failure, want it raised", d)
	}

	vs = paidSession(t, v, p, BeginOptions{})
	vs.SetRTT(2 * time.Millisecond)
	var rounds int
	for {
		c, ok := vs.Next()
		if !ok {
			break
		}
		rounds++
		if _, again := vs.Next(); !again || vs.issuedRound != c.Round || len(vs.digests) != rounds {
			t.Fatalf("Next is not idempotent within round %d (%d digests)", c.Round, len(vs.digests))
		}
		if d := vs.AnswerDeadline(0); d != c.Budget+vs.Credit() {
			t.Errorf("deadline %s, want budget %s + credit %s", d, c.Budget, vs.Credit())
		}
		if _, err := vs.Submit(answers[c.Question], skill.Timing{Elapsed: 10 * time.Millisecond, RTT: 2 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	res := vs.Finish()
	if rounds != 3 || !res.Verdict.Accepted || res.Attestation == nil || res.Credit != 2*time.Millisecond {
		t.Fatalf("rounds %d, result %+v", rounds, res)
	}
	a, _, err := VerifyAttestation(res.Envelope, VerifyOptions{Subject: p, Issuer: v.Self()})
	if err != nil || !a.Accepted || a.SetID != src.sets[0].ContentID() {
		t.Fatalf("record: %v %+v", err, a)
	}
	if vs.Finish() != res {
		t.Error("Finish is not idempotent")
	}
	if _, ok := vs.Next(); ok {
		t.Error("Next after Finish")
	}
}

// TestCoreLateAnswer: the door's timing decides; late is timeout, signed.
func TestCoreLateAnswer(t *testing.T) {
	src := sourceOf("late")
	v := newService(t, newHost(t), Config{Source: src, Policy: fastPolicy(time.Second, 10*time.Second)}).Core()
	p := randomPeer(t)
	vs := paidSession(t, v, p, BeginOptions{})
	vs.SetRTT(0)
	c, _ := vs.Next()
	if _, err := vs.Submit(oracle(src.sets...)[c.Question], skill.Timing{Elapsed: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if !vs.Done() {
		t.Fatal("a late answer did not end the session")
	}
	res := vs.Finish()
	if res.Verdict.Reason != skill.ReasonTimeout || res.Verdict.FailedRound != 1 || res.Attestation == nil {
		t.Fatalf("late answer: %+v", res.Verdict)
	}
}

// TestCoreGivesBackUnseen: a session that never delivered a challenge
// gives its set back and refunds the draw; a delivered one does not.
func TestCoreGivesBackUnseen(t *testing.T) {
	src := &returningSource{staticSource: sourceOf("back")}
	v := newService(t, newHost(t), Config{Source: src, MaxDrawsPerPeer: 1}).Core()
	p := randomPeer(t)
	vs := paidSession(t, v, p, BeginOptions{})
	vs.Abort(ErrUnresponsive)
	if src.returnedCount() != 1 {
		t.Fatalf("%d sets given back after an aborted session", src.returnedCount())
	}
	// The draw was refunded: the one-draw share allows another session.
	vs = paidSession(t, v, p, BeginOptions{})
	if _, ok := vs.Next(); !ok {
		t.Fatal("no challenge")
	}
	vs.FailRound(skill.ReasonTimeout, "no answer", skill.Timing{Elapsed: time.Minute})
	if res := vs.Finish(); res.Verdict.Reason != skill.ReasonTimeout || res.Attestation == nil {
		t.Fatalf("unanswered round: %+v", res.Verdict)
	}
	if src.returnedCount() != 1 {
		t.Errorf("a seen set was given back")
	}
	if _, err := v.Begin(p, BeginOptions{}); !errors.Is(err, ErrPeerQuota) {
		t.Errorf("third session within a one-draw share: %v", err)
	}
}

// TestCoreSignedUnseenKeepsDraw: a verdict signed before any challenge
// was shown (a failed probe) gives the unseen set back but not the draw:
// otherwise a peer could have any number of signed, stored records made
// within a one-draw share.
func TestCoreSignedUnseenKeepsDraw(t *testing.T) {
	src := &returningSource{staticSource: sourceOf("signed-unseen")}
	v := newService(t, newHost(t), Config{Source: src, MaxDrawsPerPeer: 1}).Core()
	p := randomPeer(t)
	vs := paidSession(t, v, p, BeginOptions{})
	vs.Fail(skill.ReasonProtocolError, "probe ack with a wrong nonce", false)
	res := vs.Finish()
	if res.Attestation == nil || res.Verdict.Reason != skill.ReasonProtocolError {
		t.Fatalf("failed probe: %+v", res.Verdict)
	}
	if src.returnedCount() != 1 {
		t.Errorf("%d sets given back after a session that showed none", src.returnedCount())
	}
	if _, err := v.Begin(p, BeginOptions{}); !errors.Is(err, ErrPeerQuota) {
		t.Errorf("second session within a one-draw share after a signed verdict: %v", err)
	}
}

// TestCorePrefixBudget: the draw budget of the door's client address
// applies across peer IDs.
func TestCorePrefixBudget(t *testing.T) {
	src := sourceOf("prefix")
	v := newService(t, newHost(t), Config{Source: src, MaxDrawsPerPrefix: 1}).Core()
	addr := netip.MustParseAddr("192.0.2.7")
	vs := paidSession(t, v, randomPeer(t), BeginOptions{Addr: addr})
	vs.Next()
	vs.Fail(skill.ReasonDeclined, "test", true)
	vs.Finish()
	if _, err := v.Begin(randomPeer(t), BeginOptions{Addr: netip.MustParseAddr("192.0.2.200")}); !errors.Is(err, ErrPeerQuota) {
		t.Errorf("another peer ID in the same /24: %v", err)
	}
	vs = paidSession(t, v, randomPeer(t), BeginOptions{Addr: netip.MustParseAddr("198.51.100.7")})
	vs.Abort(ErrClosed)
}

// TestCoreSourceFailure: a source that fails makes the session
// inconclusive (unsigned) and refunds the draw.
func TestCoreSourceFailure(t *testing.T) {
	src := sourceOf("fail")
	src.err = errors.New("pool empty")
	v := newService(t, newHost(t), Config{Source: src, MaxDrawsPerPeer: 1}).Core()
	p := randomPeer(t)
	for range 2 { // the refund lets the one-draw share try again
		vs := paidSession(t, v, p, BeginOptions{})
		if !vs.Done() {
			t.Fatal("a session without a set is not done")
		}
		res := vs.Finish()
		if res.Verdict.Reason != skill.ReasonInconclusive || res.Attestation != nil || res.Verdict.Detail == "" {
			t.Fatalf("source failure: %+v", res)
		}
	}
}

// TestCoreReflected: the prover side's reflection check finds a session of
// the core and tells its door.
func TestCoreReflected(t *testing.T) {
	src := sourceOf("reflect")
	svc := newService(t, newHost(t), Config{Source: src})
	p := randomPeer(t)
	vs := paidSession(t, svc.Core(), p, BeginOptions{})
	called := make(chan struct{}, 2)
	vs.OnReflected(func() { called <- struct{}{} })
	c, _ := vs.Next()
	to, run, ok := svc.guard.check(challengeDigest(c.Narrative, c.Question), svc.now())
	if !ok || to != p || run != vs {
		t.Fatalf("guard check: %v %v %v", to, run, ok)
	}
	run.markReflected()
	run.markReflected()
	if len(called) != 1 || !vs.Reflected() {
		t.Fatalf("OnReflected called %d times", len(called))
	}
	vs.OnReflected(func() { called <- struct{}{} }) // late registration runs at once
	if len(called) != 2 {
		t.Error("late OnReflected not called")
	}
	vs.FailRound(skill.ReasonProtocolError, "reflected", skill.Timing{})
	vs.Finish()
	if _, run, _ := svc.guard.check(challengeDigest(c.Narrative, c.Question), svc.now()); run != nil {
		t.Error("the guard still points at a finished session")
	}
}
