package secondimpl2

import (
	"context"
	"errors"
	"testing"
	"time"

	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// Verify first (protocol.md §5c) between two nodes of this
// implementation, and the verifier's side of it.

// verifyAsking is §5c's verifier: verify p; when p declines the hello
// VERIFY_FIRST with reciprocal WILL, wait (at most wait) for p's verdict
// on this node (the session p runs against this node's prover) and, once
// it accepts this node, ask again, once. Any other reciprocal answer is
// reported as it is (first.reciprocal): no verdict comes.
func (n *node) verifyAsking(ctx context.Context, p lpeer.ID, o verifierOpts, wait time.Duration) (first, again *verifierResult, theirs *proverResult) {
	first = n.verify(ctx, p, o)
	if !first.verifyFirst || first.reciprocal != reciprocalWill {
		return first, nil, nil
	}
	theirs = n.verdictFrom(ctx, p, wait)
	if theirs == nil || theirs.record == nil || !theirs.record.Accepted {
		return first, nil, theirs
	}
	return first, n.verify(ctx, p, o), theirs
}

// verdictFrom waits for a session of p's against this node's prover that
// ended with a verdict; the prover results of other sessions are put
// back afterwards.
func (n *node) verdictFrom(ctx context.Context, p lpeer.ID, wait time.Duration) *proverResult {
	var others []*proverResult
	defer func() {
		for _, r := range others {
			n.proved <- r
		}
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case r := <-n.proved:
			if r.verifier == p && r.verdict != nil {
				return r
			}
			others = append(others, r)
		case <-t.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// checkVerifyFirst: my verifier's hello was declined VERIFY_FIRST with
// reciprocal rec, no session ran and nothing was signed.
func checkVerifyFirst(t *testing.T, vr *verifierResult, rec int32) {
	t.Helper()
	if !vr.verifyFirst || vr.reciprocal != rec || !errors.Is(vr.noSession, errVerifyFirst) ||
		!errors.Is(vr.noSession, errDeclinedHell) || vr.envelope != nil || vr.rounds != nil || !vr.firstProbe.IsZero() {
		t.Fatalf("want a VERIFY_FIRST decline with reciprocal %d and no session: verify first %v, reciprocal %d, %v, envelope %d bytes",
			rec, vr.verifyFirst, vr.reciprocal, vr.noSession, len(vr.envelope))
	}
}

// checkDeclinedFirst: my prover declined the hello VERIFY_FIRST with
// reciprocal rec, answered nothing, took no verdict, and the verifier
// reset the stream ErrCodeDeclined during the linger (§5 step 3: "after
// a Decline the verifier resets with ErrCodeDeclined"; §5c says the same
// for VERIFY_FIRST).
func checkDeclinedFirst(t *testing.T, pr *proverResult, rec int32) {
	t.Helper()
	if !pr.verifyFirst || pr.declineReciprocal != rec || pr.answered != 0 || pr.verdict != nil || !pr.ackWritten.IsZero() {
		t.Fatalf("my prover: want a VERIFY_FIRST decline with reciprocal %d: %+v", rec, pr)
	}
	if code, remote := remoteCode(pr.lingerErr); !remote || code != codeDeclined {
		t.Fatalf("my prover: the verifier ended the linger with %v, want a reset ErrCodeDeclined", pr.lingerErr)
	}
}

// v comes to p (v opened the connection); p verifies first and verifies
// v back: v's hello is declined VERIFY_FIRST WILL, nothing signed; p's
// session accepts v, v asks again and is answered. A reciprocal request
// of v's is then answered ATTESTED (p's acceptance stands, §1a.3).
func TestVerifyFirstSelf(t *testing.T) {
	t.Parallel()
	v, p, ctx := newMinePair(t, true)
	p.prover.verifyFirst, p.prover.verifyBack = true, true
	p.prover.payDifficulty = 12 // a verify-first prover asks none (§5c)
	p.backOpts = defaultVerifierOpts()

	first, again, theirs := v.verifyAsking(ctx, p.h.ID(), defaultVerifierOpts(), time.Minute)
	checkVerifyFirst(t, first, reciprocalWill)
	checkDeclinedFirst(t, provedBy(t, p), reciprocalWill)
	if theirs == nil || theirs.record == nil || !theirs.record.Accepted || theirs.answered != 3 {
		t.Fatalf("p's verdict on v: %+v", theirs)
	}
	if again == nil || again.noSession != nil || !again.accepted || again.payAsked != 0 {
		t.Fatalf("asked again: %+v", again)
	}
	if pr := provedBy(t, p); pr.err != nil || pr.record == nil || pr.answered != 3 {
		t.Fatalf("p answering v again: %+v", pr)
	}
	select {
	case b := <-p.back:
		if !b.accepted {
			t.Fatalf("p's session back: %+v", b)
		}
	case <-time.After(time.Minute):
		t.Fatal("no session back")
	}
	o := defaultVerifierOpts()
	o.reciprocal = true
	if vr := v.verify(ctx, p.h.ID(), o); !vr.accepted || vr.reciprocal != reciprocalAttested {
		t.Fatalf("reciprocal request after p's acceptance: %v %s reciprocal %d", vr.noSession, vr.reason, vr.reciprocal)
	}
	provedBy(t, p)
}

// A verify-first prover that does not verify the verifier now says why
// (here NOT_OFFERED, its default): the verifier stops, no verdict comes.
// Once the prover admits it (its trust), it is answered, and asked no
// payment. A verifier the prover came to is answered at once.
func TestVerifyFirstSelfAdmits(t *testing.T) {
	t.Parallel()
	t.Run("came", func(t *testing.T) {
		t.Parallel()
		v, p, ctx := newMinePair(t, true)
		admitted := false
		p.prover.verifyFirst = true
		p.prover.admits = func(id lpeer.ID) bool { return admitted && id == v.h.ID() }
		first, again, theirs := v.verifyAsking(ctx, p.h.ID(), defaultVerifierOpts(), time.Minute)
		checkVerifyFirst(t, first, reciprocalNotOffered)
		if again != nil || theirs != nil {
			t.Fatalf("asked again after NOT_OFFERED: %+v %+v", again, theirs)
		}
		checkDeclinedFirst(t, provedBy(t, p), reciprocalNotOffered)
		p.prover.reciprocal = reciprocalBusy
		vr := v.verify(ctx, p.h.ID(), defaultVerifierOpts())
		checkVerifyFirst(t, vr, reciprocalBusy)
		provedBy(t, p)
		admitted = true
		if vr := v.verify(ctx, p.h.ID(), defaultVerifierOpts()); !vr.accepted {
			t.Fatalf("admitted verifier: %v %s", vr.noSession, vr.reason)
		}
		if pr := provedBy(t, p); pr.verifyFirst || pr.answered != 3 || pr.record == nil {
			t.Fatalf("p answering an admitted verifier: %+v", pr)
		}
	})
	t.Run("prover came", func(t *testing.T) {
		t.Parallel()
		v, p, ctx := newMinePair(t, false)
		p.prover.verifyFirst = true
		if vr := v.verify(ctx, p.h.ID(), defaultVerifierOpts()); !vr.accepted || vr.verifyFirst {
			t.Fatalf("a verifier the prover came to: %v %s", vr.noSession, vr.reason)
		}
		provedBy(t, p)
	})
}

// VERIFY_FIRST after the HelloAck is read as any other decline there:
// signed declined, no round entries (§5c, §5 step 4).
func TestVerifyFirstAfterAckSigned(t *testing.T) {
	t.Parallel()
	v, p, ctx := newMinePair(t, true)
	p.prover.probeReply = func(*probe) *frame {
		return &frame{Body: bDecline, Decline: &decline{Reason: drVerifyFirst, Detail: "too late", Reciprocal: reciprocalWill}}
	}
	vr := v.verify(ctx, p.h.ID(), defaultVerifierOpts())
	if vr.noSession != nil || vr.verifyFirst || vr.reason != "declined" || vr.failed != 1 || len(vr.rounds) != 0 || vr.envelope == nil {
		t.Fatalf("VERIFY_FIRST at the probe: %v verify first %v, %s failed %d", vr.noSession, vr.verifyFirst, vr.reason, vr.failed)
	}
	provedBy(t, p)
}
