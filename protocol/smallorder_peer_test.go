package protocol

import (
	"context"
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	"github.com/libp2p/go-msgio/pbio"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/acaptcha/acaptcha/protocol/attestation"
	"github.com/acaptcha/acaptcha/protocol/pb"
)

// smallOrderKey is a libp2p Ed25519 private key whose public half is the
// identity point (01 00...00, of order 1): its peer ID is one anyone can
// complete libp2p's handshakes as (spec/attestation.md §2). It signs
// nothing valid; mocknet, which runs no handshake, carries it.
func smallOrderKey(t *testing.T) crypto.PrivKey {
	t.Helper()
	raw := make([]byte, ed25519.PrivateKeySize)
	raw[0] = 7
	raw[ed25519.SeedSize] = 1
	k, err := crypto.UnmarshalEd25519PrivateKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil || !attestation.SmallOrderPeerID(id) {
		t.Fatalf("key of peer ID %s is not of small order (%v)", id, err)
	}
	return k
}

// audit84 (open, now fixed): a peer whose peer ID is that of an Ed25519
// key of small order is anyone, so no record about it or by it is valid
// (attestation.md §2): the verifier ran a whole session against it (a
// set drawn, its rounds timed) and failed only when it sealed the verdict
// (logged at Error), and the prover answered such a verifier. Verify now
// refuses at once, and the prover resets the stream before any budget.
func TestSmallOrderPeerNoSession(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { mn.Close() })
	goodKey, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	good, err := mn.AddPeer(goodKey, mustAddr(t, "/ip4/127.0.0.1/tcp/4001"))
	if err != nil {
		t.Fatal(err)
	}
	bad, err := mn.AddPeer(smallOrderKey(t), mustAddr(t, "/ip4/127.0.0.1/tcp/4002"))
	if err != nil {
		t.Fatal(err)
	}
	if err := mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	if err := mn.ConnectAllButSelf(); err != nil {
		t.Fatal(err)
	}
	svc := newService(t, good, Config{Source: sourceOf("small-order")})
	if _, err := svc.Verify(testCtx(t, 10*time.Second), bad.ID(), false); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Verify of a small-order peer: %v, want ErrMalformed before any session", err)
	}
	if u := svc.PeerUsage(bad.ID()); u.Drawn != 0 {
		t.Fatalf("a set drawn for a small-order peer: %+v", u)
	}
	// As a verifier: the stream is reset before the hello is read.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	str, err := bad.NewStream(ctx, good.ID(), ID)
	if errors.Is(err, network.ErrReset) {
		return // reset while the protocol was negotiated: not answered
	}
	if err != nil {
		t.Fatal(err)
	}
	defer str.Reset()
	_ = str.SetDeadline(time.Now().Add(5 * time.Second))
	w, r := pbio.NewDelimitedWriter(str), pbio.NewDelimitedReader(str, MaxProverFrame)
	_ = w.WriteMsg(&pb.Frame{Body: &pb.Frame_Hello{Hello: &pb.Hello{SpecVersion: SpecVersion,
		VerifierId: []byte(bad.ID()), ProverId: []byte(good.ID()), Nonce: make([]byte, 32), Rounds: 3, TotalMs: 60000}}})
	var f pb.Frame
	if err := r.ReadMsg(&f); err == nil {
		t.Fatalf("the prover answered a small-order verifier: %v", &f)
	}
}

func mustAddr(t *testing.T, s string) ma.Multiaddr {
	t.Helper()
	a, err := ma.NewMultiaddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
