package secondimpl2

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/peer"
	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// protocol.md §5c: "A verifier whose standing verdict from the prover is a
// rejection is never answered by a verify-first prover, asked for or not
// (the Go node: declined VERIFY_FIRST, its reciprocal chosen as for any
// hello by §1a's order: BACKING_OFF within the back-off that followed the
// rejection ...)". The reference node, verifying first, rejects my prover
// (wrong answers): my verifier's next hello is declined VERIFY_FIRST
// with a dropped reciprocal (BACKING_OFF, or ATTESTED where the node keeps
// no back-off entry for its rejection: §1a lets a prover name any dropped
// value that holds) and nothing is answered, on a connection my node opened
// (it came) and after the node's own Attest asked mine (it was asked).
func TestSpec119RejectedVerifierNeverAnswered(t *testing.T) {
	t.Parallel()
	wrong := func(*challenge) (string, error) { return "no idea at all", nil }
	t.Run("came", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int32
		n := newVFNode(t, &calls)
		hm, km := newHost(t, "/ip4/127.0.0.1/tcp/0")
		mine := newNode(hm, km)
		mine.prover = proverOpts{answer: wrong}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := hm.Connect(ctx, lpeer.AddrInfo{ID: n.ID(), Addrs: n.Addrs()}); err != nil {
			t.Fatal(err)
		}
		res, err := n.Verify(ctx, hm.ID())
		if err != nil || res.Verdict.Accepted || res.Envelope == nil {
			t.Fatalf("the node's verification of mine: %v %+v", err, res)
		}
		<-mine.proved
		for _, reciprocal := range []bool{false, true} {
			o := defaultVerifierOpts()
			o.reciprocal = reciprocal
			checkRejectedFirst(t, mine.verify(ctx, n.ID(), o))
		}
		if c := calls.Load(); c != 0 {
			t.Fatalf("the node's answerer called %d times", c)
		}
	})
	t.Run("first contact", func(t *testing.T) {
		// The back-off that follows a first-contact rejection: BACKING_OFF.
		t.Parallel()
		var calls atomic.Int32
		key, _, err := lcrypto.GenerateEd25519Key(nil)
		if err != nil {
			t.Fatal(err)
		}
		n, err := peer.New(peer.Config{Key: key, StorePath: t.TempDir() + "/store.db", ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
			Source: ourCorpus(t), Prover: countingProver{&calls}, VerifyFirst: true, AttestPolicy: peer.AttestAll})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		hm, km := newHost(t, "/ip4/127.0.0.1/tcp/0")
		mine := newNode(hm, km)
		mine.prover = proverOpts{answer: wrong}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := hm.Connect(ctx, lpeer.AddrInfo{ID: n.ID(), Addrs: n.Addrs()}); err != nil {
			t.Fatal(err)
		}
		select {
		case pr := <-mine.proved:
			if pr.record == nil || pr.record.Accepted {
				t.Fatalf("the node's first contact with mine: %+v", pr)
			}
		case <-time.After(time.Minute):
			t.Fatal("the node's first contact did not verify mine")
		}
		// the node stores its record as it closes, and starts its
		// back-off once the session has returned: ask until the back-off
		// stands (bounded). In between, the stored rejection alone
		// stands, answered ATTESTED (§1a: any dropped value that holds);
		// a node that never backed off would answer it to the end.
		var vr *verifierResult
		for i := 0; i < 20; i++ {
			if vr = mine.verify(ctx, n.ID(), defaultVerifierOpts()); vr.reciprocal != reciprocalWill && vr.reciprocal != reciprocalAttested {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		checkRejectedFirst(t, vr)
		if vr.reciprocal != reciprocalBackingOff {
			t.Errorf("after a first-contact rejection: reciprocal %d, want BACKING_OFF (§5c, the Go node)", vr.reciprocal)
		}
		if c := calls.Load(); c != 0 {
			t.Fatalf("the node's answerer called %d times", c)
		}
	})
	t.Run("asked", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int32
		n := newVFNode(t, &calls)
		hm, km := newHost(t, "/ip4/127.0.0.1/tcp/0")
		mine := newNode(hm, km)
		mine.prover = proverOpts{answer: wrong, verifyBack: true}
		mine.backOpts = defaultVerifierOpts()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		m, err := n.Attest(ctx, lpeer.AddrInfo{ID: hm.ID(), Addrs: hm.Addrs()})
		if m == nil || m.Ours == nil || m.Ours.Verdict.Accepted {
			t.Fatalf("the node's Attest: %v %+v", err, m)
		}
		<-mine.proved
		// my session back started at the node's hello, before the
		// node's verdict: no standing rejection then, and the node asked
		// mine, so it may be answered.
		select {
		case <-mine.back:
		case <-time.After(30 * time.Second):
		}
		before := calls.Load()
		checkRejectedFirst(t, mine.verify(ctx, n.ID(), defaultVerifierOpts()))
		if c := calls.Load(); c != before {
			t.Fatalf("the node's answerer called %d times after its rejection", c-before)
		}
	})
}

// checkRejectedFirst: declined VERIFY_FIRST with a reciprocal that says no
// verdict is coming (BACKING_OFF or ATTESTED for a standing rejection),
// no session ran.
func checkRejectedFirst(t *testing.T, vr *verifierResult) {
	t.Helper()
	if !vr.verifyFirst || (vr.reciprocal != reciprocalBackingOff && vr.reciprocal != reciprocalAttested) || vr.envelope != nil {
		t.Fatalf("want a VERIFY_FIRST decline with reciprocal BACKING_OFF or ATTESTED: verify first %v, reciprocal %d, %v, envelope %d bytes",
			vr.verifyFirst, vr.reciprocal, vr.noSession, len(vr.envelope))
	}
	t.Logf("declined VERIFY_FIRST, reciprocal %d", vr.reciprocal)
}
