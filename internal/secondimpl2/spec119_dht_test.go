package secondimpl2

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/peer"
	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// protocol.md §9a, "The DHT" (1.13.10, 1.13.11), against a reference node
// with --dht: a request of at most 16 KiB is read, one whose length
// prefix announces more is reset before it is read; at most 4 inbound
// DHT streams of one peer are served at once, one over the bound is
// reset as it arrives (of five opened together, four are served).
func TestSpec119DHTRequestBounds(t *testing.T) {
	t.Parallel()
	key, _, err := lcrypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := peer.New(peer.Config{Key: key, StorePath: t.TempDir() + "/store.db", ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		Source: ourCorpus(t), Prover: ourProver{}, DHT: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const kad = "/acaptcha/kad/1.0.0"
	fresh := func() *node {
		hm, km := newHost(t, "/ip4/127.0.0.1/tcp/0")
		if err := hm.Connect(ctx, lpeer.AddrInfo{ID: n.ID(), Addrs: n.Addrs()}); err != nil {
			t.Fatal(err)
		}
		return newNode(hm, km)
	}
	// waiting: the node still reads the stream a second later (not reset)
	waiting := func(s network.Stream) bool {
		s.SetReadDeadline(time.Now().Add(time.Second))
		_, err := s.Read(make([]byte, 1))
		return isTimeout(err)
	}
	// open: a DHT stream announcing a request of size bytes, 10 of them sent
	open := func(me *node, size uint64) network.Stream {
		t.Helper()
		s, err := me.h.NewStream(ctx, n.ID(), kad)
		if err != nil {
			t.Fatalf("DHT stream: %v", err)
		}
		t.Cleanup(func() { s.Reset() })
		s.Write(append(binary.AppendUvarint(nil, size), make([]byte, 10)...))
		return s
	}
	a := fresh()
	if s := open(a, 16<<10); !waiting(s) {
		t.Fatal("a request announcing 16 384 bytes was not read")
	}
	b := fresh()
	if s := open(b, 16<<10+1); waiting(s) {
		t.Fatal("a request announcing 16 385 bytes was not reset")
	}
	c := fresh()
	var streams []network.Stream
	for i := 0; i < 5; i++ {
		streams = append(streams, open(c, 100))
	}
	// the node takes them concurrently: which one is over the bound is
	// its order of arrival, so count
	served := 0
	for _, s := range streams {
		if waiting(s) {
			served++
		}
	}
	if served != 4 {
		t.Fatalf("%d of 5 DHT streams of one peer served at once, want 4", served)
	}
}
