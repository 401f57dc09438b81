package secondimpl2

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/protocol/pb"
	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// Verify first (protocol.md §5c) with the reference.

// (a) Our prover verifies first (Config.VerifyFirst) and my verifier
// came to it: the hello is declined VERIFY_FIRST with reciprocal WILL
// (OnReciprocal starts our session to mine), no session ran, nothing is
// signed and our answerer is never called. Our session accepts mine
// (VerifiedPeer says so from OnVerdict on, before the verdict is
// written); my verifier, having waited for that verdict, asks again and
// is answered and signed.
func TestInteropVerifyFirstOurProver(t *testing.T) {
	t.Parallel()
	var pp atomic.Pointer[pair]
	var calls, recCalls atomic.Int32
	var started, verified, trustAsked atomic.Bool
	conf := protocol.Config{VerifyFirst: true, Prover: countingProver{&calls}}
	conf.TrustedPeer = func(lpeer.ID) bool { trustAsked.Store(true); return false }
	conf.VerifiedPeer = func(id lpeer.ID) bool { return verified.Load() && id == pp.Load().mine.h.ID() }
	conf.OnReciprocal = func(id lpeer.ID, drawsLeft bool) pb.Reciprocal {
		recCalls.Add(1)
		if started.CompareAndSwap(false, true) {
			go func() {
				p := pp.Load()
				res, err := p.ours.Verify(p.ctx, id, false)
				p.backRes <- backResult{res, err}
			}()
		}
		return pb.Reciprocal_RECIPROCAL_WILL
	}
	conf.OnVerdict = func(id lpeer.ID, res *protocol.Result) {
		if res.Verdict.Accepted {
			verified.Store(true)
		}
	}
	p := newPair(t, "tcp", conf)
	pp.Store(p)

	// verifyAsking's steps, one by one
	first := p.mine.verify(p.ctx, p.oursH.ID(), defaultVerifierOpts())
	checkVerifyFirst(t, first, reciprocalWill)
	pr := p.ourProved(t)
	if !errors.Is(pr.Err, protocol.ErrVerifyFirst) || pr.Rounds != 0 || pr.Envelope != nil || pr.Accepted {
		t.Fatalf("our prover on the declined hello: %+v", pr)
	}
	if recCalls.Load() != 1 || !trustAsked.Load() {
		t.Fatalf("OnReciprocal called %d times, TrustedPeer asked %v", recCalls.Load(), trustAsked.Load())
	}
	theirs := p.mine.verdictFrom(p.ctx, p.oursH.ID(), 3*time.Minute)
	if theirs == nil || theirs.record == nil || !theirs.record.Accepted || theirs.answered != 3 {
		t.Fatalf("our verdict on mine, as my prover took it: %+v", theirs)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("our answerer called %d times before mine was accepted", n)
	}
	p.checkMine(t, p.mine.verify(p.ctx, p.oursH.ID(), defaultVerifierOpts()))
	if n := calls.Load(); n != 3 {
		t.Fatalf("our answerer called %d times, want 3", n)
	}
	select {
	case b := <-p.backRes:
		if b.err != nil || !b.res.Verdict.Accepted || b.res.Envelope == nil {
			t.Fatalf("our session to mine: %v %+v", b.err, b.res)
		}
	case <-time.After(time.Minute):
		t.Fatal("our session to mine did not end")
	}
}

// (a) continued: our prover that does not verify mine now says why
// (OnReciprocal's answer, here NOT_OFFERED) and my verifier stops; once
// TrustedPeer admits mine it is answered. A verifier our node came to
// (it opened the connection) is answered at once, admitted or not.
func TestInteropVerifyFirstOurProverAdmits(t *testing.T) {
	t.Parallel()
	t.Run("mine came", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int32
		var trusted atomic.Bool
		conf := protocol.Config{VerifyFirst: true, Prover: countingProver{&calls}}
		conf.TrustedPeer = func(lpeer.ID) bool { return trusted.Load() }
		conf.OnReciprocal = func(lpeer.ID, bool) pb.Reciprocal { return pb.Reciprocal_RECIPROCAL_NOT_OFFERED }
		p := newPair(t, "tcp", conf)
		first, again, theirs := p.mine.verifyAsking(p.ctx, p.oursH.ID(), defaultVerifierOpts(), time.Minute)
		checkVerifyFirst(t, first, int32(pb.Reciprocal_RECIPROCAL_NOT_OFFERED))
		if again != nil || theirs != nil {
			t.Fatalf("my verifier waited after NOT_OFFERED: %+v %+v", again, theirs)
		}
		if pr := p.ourProved(t); !errors.Is(pr.Err, protocol.ErrVerifyFirst) || pr.Rounds != 0 {
			t.Fatalf("our prover: %+v", pr)
		}
		trusted.Store(true)
		p.checkMine(t, p.mine.verify(p.ctx, p.oursH.ID(), defaultVerifierOpts()))
		if n := calls.Load(); n != 3 {
			t.Fatalf("our answerer called %d times, want 3", n)
		}
	})
	t.Run("ours came", func(t *testing.T) {
		t.Parallel()
		conf := protocol.Config{VerifyFirst: true}
		conf.TrustedPeer = func(lpeer.ID) bool { return false }
		p := newPairDialing(t, "tcp", conf, true)
		vr := p.mine.verify(p.ctx, p.oursH.ID(), defaultVerifierOpts())
		if vr.verifyFirst {
			t.Fatalf("declined VERIFY_FIRST on a connection our node opened: %v", vr.noSession)
		}
		p.checkMine(t, vr)
	})
}

// (b) My prover verifies first and our verifier came to it: Verify
// returns ErrVerifyFirst (a *VerifyFirstError with my reciprocal answer),
// nothing signed, and resets ErrCodeDeclined. With WILL my prover's
// session back accepts our node, and our next Verify is answered.
func TestInteropVerifyFirstMyProver(t *testing.T) {
	t.Parallel()
	t.Run("will", func(t *testing.T) {
		t.Parallel()
		p := newPairDialing(t, "tcp", protocol.Config{}, true)
		p.mine.prover.verifyFirst, p.mine.prover.verifyBack = true, true
		res, err := p.ours.Verify(p.ctx, p.mine.h.ID(), false)
		checkOurVerifyFirst(t, p.mine.h.ID(), res, err, pb.Reciprocal_RECIPROCAL_WILL)
		checkDeclinedFirst(t, p.myProved(t), reciprocalWill)
		select {
		case vr := <-p.mine.back:
			if !vr.accepted {
				t.Fatalf("my session back: %v %s", vr.noSession, vr.reason)
			}
		case <-time.After(time.Minute):
			t.Fatal("no session back from mine")
		}
		if pr := p.ourProved(t); !pr.Accepted || pr.Attestation == nil {
			t.Fatalf("our prover on my session back: %+v", pr)
		}
		res, err = p.ours.Verify(p.ctx, p.mine.h.ID(), false)
		p.checkOurs(t, res, err)
	})
	t.Run("busy", func(t *testing.T) {
		t.Parallel()
		p := newPairDialing(t, "tcp", protocol.Config{}, true)
		p.mine.prover.verifyFirst, p.mine.prover.reciprocal = true, reciprocalBusy
		res, err := p.ours.Verify(p.ctx, p.mine.h.ID(), true)
		checkOurVerifyFirst(t, p.mine.h.ID(), res, err, pb.Reciprocal_RECIPROCAL_BUSY)
		checkDeclinedFirst(t, p.myProved(t), reciprocalBusy)
	})
	// A VERIFY_FIRST after the HelloAck (which §5c forbids) is read as
	// any other decline there: signed declined (§5 step 4).
	t.Run("after the ack", func(t *testing.T) {
		t.Parallel()
		p := newPairDialing(t, "tcp", protocol.Config{}, true)
		p.mine.prover.probeReply = func(*probe) *frame {
			return &frame{Body: bDecline, Decline: &decline{Reason: drVerifyFirst, Detail: "too late", Reciprocal: reciprocalWill}}
		}
		res, err := p.ours.Verify(p.ctx, p.mine.h.ID(), false)
		if err != nil || res == nil || res.Verdict.Accepted || string(res.Verdict.Reason) != "declined" || res.Envelope == nil {
			t.Fatalf("our verifier on VERIFY_FIRST after the ack: %v %+v", err, res)
		}
		p.myProved(t)
	})
}

func checkOurVerifyFirst(t *testing.T, prover lpeer.ID, res *protocol.Result, err error, rec pb.Reciprocal) {
	t.Helper()
	var vfe *protocol.VerifyFirstError
	if !errors.Is(err, protocol.ErrVerifyFirst) || !errors.As(err, &vfe) {
		t.Fatalf("our Verify: %v (%T), want ErrVerifyFirst", err, err)
	}
	if vfe.Reciprocal != rec || vfe.Peer != prover {
		t.Fatalf("our Verify: reciprocal %v peer %v, want %v and %v", vfe.Reciprocal, vfe.Peer, rec, prover)
	}
	if res != nil && (res.Envelope != nil || res.Attestation != nil) {
		t.Fatalf("our verifier signed on VERIFY_FIRST: %+v", res)
	}
}

// newVFNode is a reference node (peer.Node) verifying first, with our
// corpus and a counting answerer.
func newVFNode(t *testing.T, calls *atomic.Int32) *peer.Node {
	t.Helper()
	key, _, err := lcrypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := peer.New(peer.Config{Key: key, StorePath: t.TempDir() + "/store.db", ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		Source: ourCorpus(t), Prover: countingProver{calls}, VerifyFirst: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// (c) The reference node verifying first (peer.Config.VerifyFirst) and
// my verifier coming to it: declined VERIFY_FIRST with WILL (the node
// verifies mine now), nothing signed, no answerer call; the node's
// session accepts mine, my verifier asks again and is answered.
func TestInteropVerifyFirstWithNode(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	n := newVFNode(t, &calls)
	hm, km := newHost(t, "/ip4/127.0.0.1/tcp/0")
	mine := newNode(hm, km)
	mine.prover = proverOpts{answer: truth.answerMine}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := hm.Connect(ctx, lpeer.AddrInfo{ID: n.ID(), Addrs: n.Addrs()}); err != nil {
		t.Fatal(err)
	}
	// verifyAsking's steps, one by one
	first := mine.verify(ctx, n.ID(), defaultVerifierOpts())
	checkVerifyFirst(t, first, reciprocalWill)
	theirs := mine.verdictFrom(ctx, n.ID(), 2*time.Minute)
	if theirs == nil || theirs.record == nil || !theirs.record.Accepted {
		t.Fatalf("the node's verdict on mine: %+v", theirs)
	}
	if c := calls.Load(); c != 0 {
		t.Fatalf("the node's answerer called %d times before it accepted mine", c)
	}
	again := mine.verify(ctx, n.ID(), defaultVerifierOpts())
	if again.noSession != nil || !again.accepted {
		t.Fatalf("asked again: %v %s", again.noSession, again.reason)
	}
	if c := calls.Load(); c != 3 {
		t.Fatalf("the node's answerer called %d times, want 3", c)
	}
}

// (c) continued: the reference node's Attest comes to my prover, which
// verifies first: declined VERIFY_FIRST WILL, my session back accepts
// the node, and Attest, having waited for that verdict, asks again and
// is answered; its reciprocal request is then answered ATTESTED (my
// acceptance stands), so no second session back runs.
func TestInteropVerifyFirstAttest(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	n := newVFNode(t, &calls)
	hm, km := newHost(t, "/ip4/127.0.0.1/tcp/0")
	mine := newNode(hm, km)
	mine.prover = proverOpts{answer: truth.answerMine, verifyFirst: true, verifyBack: true}
	mine.backOpts = defaultVerifierOpts()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m, err := n.Attest(ctx, lpeer.AddrInfo{ID: hm.ID(), Addrs: hm.Addrs()})
	if err != nil {
		t.Fatalf("Attest: %v", err)
	}
	if m.Ours == nil || !m.Ours.Verdict.Accepted || m.Ours.Envelope == nil {
		t.Fatalf("the node's verdict on mine: %+v", m.Ours)
	}
	if m.Theirs == nil || !m.Theirs.Accepted || m.Theirs.Attestation == nil {
		t.Fatalf("my verdict as the node saw it: %+v %v", m.Theirs, m.TheirsErr)
	}
	checkDeclinedFirst(t, provedBy(t, mine), reciprocalWill)
	if pr := provedBy(t, mine); pr.record == nil || !pr.record.Accepted || pr.answered != 3 {
		t.Fatalf("my prover answering the node's second hello: %+v", pr)
	}
	select {
	case vr := <-mine.back:
		if !vr.accepted {
			t.Fatalf("my session back: %v %s", vr.noSession, vr.reason)
		}
	case <-time.After(time.Minute):
		t.Fatal("no session back")
	}
	select {
	case vr := <-mine.back:
		t.Fatalf("a second session back: %+v", vr)
	default:
	}
	if c := calls.Load(); c != 3 {
		t.Fatalf("the node's answerer called %d times, want 3 (my one session back)", c)
	}
}
