package secondimpl2

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// The verifier's payment (protocol.md §5b) between two nodes of this
// implementation: v verifies p over a connection vDials decides.
func newMinePair(t *testing.T, vDials bool) (v, p *node, ctx context.Context) {
	t.Helper()
	hv, kv := newHost(t, "/ip4/127.0.0.1/tcp/0")
	hp, kp := newHost(t, "/ip4/127.0.0.1/tcp/0")
	v, p = newNode(hv, kv), newNode(hp, kp)
	v.prover = proverOpts{answer: truth.answerMine}
	p.prover = proverOpts{answer: truth.answerMine}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	dialer, to := hv, hp
	if !vDials {
		dialer, to = hp, hv
	}
	if err := dialer.Connect(ctx, lpeer.AddrInfo{ID: to.ID(), Addrs: to.Addrs()}); err != nil {
		t.Fatal(err)
	}
	return v, p, ctx
}

func provedBy(t *testing.T, n *node) *proverResult {
	t.Helper()
	select {
	case r := <-n.proved:
		return r
	case <-time.After(time.Minute):
		t.Fatal("prover reported nothing")
	}
	return nil
}

// checkPaid: my verifier was asked d bits and paid them in probe 1.
func checkPaid(t *testing.T, vr *verifierResult, d uint32, mine *node) {
	t.Helper()
	if vr.payAsked != d || len(vr.paid) < 1 || len(vr.paid) > 32 || len(vr.payNonce) != payNonceLen ||
		!payValid(vr.payNonce, mine.id, vr.paid, int(d)) {
		t.Fatalf("my verifier: asked %d bits (want %d), paid %x for nonce %x", vr.payAsked, d, vr.paid, vr.payNonce)
	}
}

func TestPaySelf(t *testing.T) {
	t.Parallel()
	v, p, ctx := newMinePair(t, true)
	p.prover.payDifficulty = 12

	// paid: accepted, signed
	vr := v.verify(ctx, p.h.ID(), defaultVerifierOpts())
	if vr.noSession != nil || !vr.accepted {
		t.Fatalf("paid session: %v %s", vr.noSession, vr.reason)
	}
	checkPaid(t, vr, 12, v)
	if pr := provedBy(t, p); pr.err != nil || pr.record == nil || pr.unpaid || pr.payAsked != 12 || pr.answered != 3 {
		t.Fatalf("prover: %+v", pr)
	}

	// unpaid: Decline{BUSY} naming the bits, nothing answered or signed
	for _, edit := range []func(o *verifierOpts){
		func(o *verifierOpts) { o.noPay = true },
		func(o *verifierOpts) { o.wrongPay = true },
	} {
		o := defaultVerifierOpts()
		edit(&o)
		vr := v.verify(ctx, p.h.ID(), o)
		if !errors.Is(vr.noSession, errBusy) || !vr.busyDecline || vr.envelope != nil || !strings.Contains(vr.noSession.Error(), "12 bits") {
			t.Fatalf("unpaid (%+v): %v busy decline %v", o, vr.noSession, vr.busyDecline)
		}
		if pr := provedBy(t, p); !pr.unpaid || pr.answered != 0 || pr.verdict != nil {
			t.Fatalf("prover after an unpaid probe: %+v", pr)
		}
	}

	// above the verifier's maximum: it resets BUSY, no session
	o := defaultVerifierOpts()
	o.maxPay = 8
	vr = v.verify(ctx, p.h.ID(), o)
	if !errors.Is(vr.noSession, errPayRefused) || vr.envelope != nil {
		t.Fatalf("above the maximum: %v", vr.noSession)
	}
	if pr := provedBy(t, p); pr.verdict != nil || pr.answered != 0 {
		t.Fatalf("prover: %+v", pr)
	} else if code, remote := remoteCode(pr.err); !remote || code != codeBusy {
		t.Fatalf("prover: %v, want a reset ErrCodeBusy", pr.err)
	}

	// malformed asks: as a wrong nonce (reset ErrCodeProtocolViolation)
	for _, m := range []struct {
		d uint32
		n int
	}{{33, 16}, {8, 15}, {8, 0}, {0, 16}, {0, 1}} {
		p.prover.ackHook = func(a *helloAck) { a.PayDifficulty, a.PayNonce = m.d, randBytes(m.n) }
		vr := v.verify(ctx, p.h.ID(), defaultVerifierOpts())
		if !errors.Is(vr.noSession, errUnpaid) || vr.envelope != nil {
			t.Fatalf("malformed ask %+v: %v", m, vr.noSession)
		}
		if pr := provedBy(t, p); pr.verdict != nil {
			t.Fatalf("prover: %+v", pr)
		} else if code, remote := remoteCode(pr.err); !remote || code != codePV {
			t.Fatalf("malformed ask %+v: prover %v, want a reset ErrCodeProtocolViolation", m, pr.err)
		}
	}
	// a pre-1.13 verifier reads no ask at all, malformed or not: with
	// D_v 0 and a nonce it pays nothing and the prover checks nothing
	o = defaultVerifierOpts()
	o.noPay = true
	p.prover.ackHook = func(a *helloAck) { a.PayDifficulty, a.PayNonce = 0, randBytes(16) }
	if vr := v.verify(ctx, p.h.ID(), o); !vr.accepted {
		t.Fatalf("no ask (D_v 0): %v %s", vr.noSession, vr.reason)
	}
	provedBy(t, p)
}

// The prover opened the connection: by §5b's intended use it asks
// nothing; asked all the same (payAlways), the verifier will not pay.
func TestPaySelfProverCameToVerifier(t *testing.T) {
	t.Parallel()
	v, p, ctx := newMinePair(t, false)
	p.prover.payDifficulty = 12
	vr := v.verify(ctx, p.h.ID(), defaultVerifierOpts())
	if !vr.accepted || vr.payAsked != 0 || vr.paid != nil {
		t.Fatalf("no ask expected: %v %s asked %d", vr.noSession, vr.reason, vr.payAsked)
	}
	provedBy(t, p)
	p.prover.payAlways = true
	vr = v.verify(ctx, p.h.ID(), defaultVerifierOpts())
	if !errors.Is(vr.noSession, errPayRefused) || vr.envelope != nil {
		t.Fatalf("asked by a prover that came: %v", vr.noSession)
	}
	if pr := provedBy(t, p); pr.verdict != nil || pr.answered != 0 {
		t.Fatalf("prover: %+v", pr)
	}
}
