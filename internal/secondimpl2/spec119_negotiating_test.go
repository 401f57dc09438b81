package secondimpl2

import (
	"context"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/peer"
	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// protocol.md §9a, "Streams in negotiation" (1.13.9): the Go node lets
// one peer hold at most 8 inbound streams whose protocol is not
// negotiated yet, and resets one over the bound as it opens
// (StreamResourceLimitExceeded). My host opens raw streams to the node
// and writes one byte of a protocol header: 8 are held, the 9th is reset at once,
// and once they are gone a new stream is negotiated as usual.
func TestSpec119NegotiatingStreamsPerPeer(t *testing.T) {
	t.Parallel()
	key, _, err := lcrypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := peer.New(peer.Config{Key: key, StorePath: t.TempDir() + "/store.db", ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		Source: ourCorpus(t), Prover: ourProver{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	hm, km := newHost(t, "/ip4/127.0.0.1/tcp/0")
	mine := newNode(hm, km)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := hm.Connect(ctx, lpeer.AddrInfo{ID: n.ID(), Addrs: n.Addrs()}); err != nil {
		t.Fatal(err)
	}
	// a stream reset at once reads its reset within a second; one held
	// reads nothing until the negotiation timeout (10 s)
	resetSoon := func(s network.Stream) bool {
		s.SetReadDeadline(time.Now().Add(time.Second))
		_, err := s.Read(make([]byte, 1))
		return err != nil && !isTimeout(err)
	}
	var held []network.Stream
	for i := 0; i < 8; i++ {
		s, err := hm.Network().NewStream(ctx, n.ID())
		if err != nil {
			t.Fatal(err)
		}
		// a length of 19, multistream's header, whose 19 bytes never
		// come: the stream stays in negotiation
		if _, err := s.Write([]byte{0x13}); err != nil {
			t.Fatalf("stream %d: %v", i+1, err)
		}
		held = append(held, s)
	}
	time.Sleep(200 * time.Millisecond)
	ninth, err := hm.Network().NewStream(ctx, n.ID())
	if err != nil {
		t.Fatal(err)
	}
	ninth.Write([]byte{0x13})
	if !resetSoon(ninth) {
		t.Fatal("the 9th stream in negotiation was not reset")
	}
	for i, s := range held {
		if resetSoon(s) {
			t.Fatalf("stream %d of 8 in negotiation was reset", i+1)
		}
	}
	for _, s := range held {
		s.Reset()
	}
	time.Sleep(200 * time.Millisecond)
	// the bound is on streams in negotiation only: a session runs
	if vr := mine.verify(ctx, n.ID(), defaultVerifierOpts()); vr.noSession != nil {
		t.Fatalf("a session after the held streams went: %v", vr.noSession)
	}
}
