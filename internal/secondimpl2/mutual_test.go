package secondimpl2

import (
	"context"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol/pb"
	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// A mutual attestation with the reference node (peer.Node.Attest), and
// one that this implementation asks of it.
func TestInteropMutualWithNode(t *testing.T) {
	t.Parallel()
	key, _, err := lcrypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	n, err := peer.New(peer.Config{Key: key, StorePath: dir + "/store.db", ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		Source: ourCorpus(t), Prover: ourProver{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	hm, km := newHost(t, "/ip4/127.0.0.1/tcp/0")
	mine := newNode(hm, km)
	mine.prover = proverOpts{answer: truth.answerMine, verifyBack: true}
	mine.backOpts = defaultVerifierOpts()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	m, err := n.Attest(ctx, lpeer.AddrInfo{ID: hm.ID(), Addrs: hm.Addrs()})
	if err != nil {
		t.Fatalf("Attest: %v", err)
	}
	if m.Ours == nil || !m.Ours.Verdict.Accepted {
		t.Fatalf("node's verdict on mine: %+v", m.Ours)
	}
	if m.Theirs == nil || !m.Theirs.Accepted || m.Theirs.Attestation == nil {
		t.Fatalf("mine's verdict as the node saw it: %+v %v", m.Theirs, m.TheirsErr)
	}
	select {
	case pr := <-mine.proved:
		if pr.record == nil || !pr.record.Accepted {
			t.Fatalf("my prover: %+v", pr)
		}
	case <-time.After(time.Minute):
		t.Fatal("my prover reported nothing")
	}
	select {
	case vr := <-mine.back:
		if !vr.accepted {
			t.Fatalf("my session back: %+v", vr)
		}
	case <-time.After(time.Minute):
		t.Fatal("no session back")
	}

	// This implementation asks the node; the node holds a standing
	// acceptance of it now, so it answers ATTESTED (§1a.3) and runs none.
	o := defaultVerifierOpts()
	o.reciprocal = true
	vr := mine.verify(ctx, n.ID(), o)
	if !vr.accepted || vr.reciprocal != int32(pb.Reciprocal_RECIPROCAL_ATTESTED) {
		t.Fatalf("asking the node again: %+v", vr)
	}
}
