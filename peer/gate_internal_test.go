package peer

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

func TestDialablePublic(t *testing.T) {
	for addr, want := range map[string]bool{
		"/ip4/203.0.113.7/tcp/1":          false, // documentation range: not public
		"/ip4/8.8.8.8/tcp/1":              true,
		"/ip6/2606:4700::1/udp/1/quic-v1": true,
		"/ip4/10.1.2.3/tcp/1":             false,
		"/ip4/192.168.1.1/tcp/1":          false,
		"/ip4/172.16.0.1/tcp/1":           false,
		"/ip4/100.64.0.1/tcp/1":           false,
		"/ip4/127.0.0.1/tcp/1":            false,
		"/ip4/169.254.1.1/tcp/1":          false,
		"/ip4/0.0.0.0/tcp/1":              false,
		"/ip6/::1/tcp/1":                  false,
		"/ip6/fe80::1/tcp/1":              false,
		"/ip6/fd00::1/tcp/1":              false,
		"/dns4/example.com/tcp/1":         false,
		"/ip6/64:ff9b::a00:1/tcp/1":       false, // NAT64 of 10.0.0.1
		"/ip6/64:ff9b::808:808/tcp/1":     true,  // NAT64 of 8.8.8.8
		"/ip6/64:ff9b:1::a00:1/tcp/1":     false, // local-use NAT64
		"/ip6/::ffff:10.0.0.1/tcp/1":      false,
		"/ip6/::ffff:8.8.8.8/tcp/1":       true,
		"/ip4/10.0.0.1/tcp/1/p2p/12D3KooWCKq9ZvccjmCqhBbPsrgpAKBHWQpgB61ruM19CyAvH1Cp/p2p-circuit": true,
	} {
		if got := dialablePublic(ma.StringCast(addr)); got != want {
			t.Errorf("%s: %v, want %v", addr, got, want)
		}
	}
}

// A node with DialPublicOnly refuses to dial a loopback address, and a
// DNS name that resolves to one (the swarm resolves before the gater
// sees the address): a DHT record or gossip naming such a name could
// point it at its own machine or network. Without it, the same dial goes.
func TestDialPublicOnlyRefusesResolvedPrivate(t *testing.T) {
	target, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	port, err := target.Addrs()[0].ValueForProtocol(ma.P_TCP)
	if err != nil {
		t.Fatal(err)
	}
	node := func(publicOnly bool) *Node {
		key, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		n, err := New(Config{Key: key, StorePath: filepath.Join(t.TempDir(), "s.db"), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
			DialPublicOnly: publicOnly, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	strict := node(true)
	for _, a := range []string{"/ip4/127.0.0.1/tcp/" + port, "/dns4/localhost/tcp/" + port} {
		strict.Host().Peerstore().ClearAddrs(target.ID())
		err := strict.Host().Connect(ctx, peer.AddrInfo{ID: target.ID(), Addrs: []ma.Multiaddr{ma.StringCast(a)}})
		if err == nil {
			t.Fatalf("dialed %s with DialPublicOnly", a)
		}
	}
	if got := strict.Stats().DialsRefused; got < 2 {
		t.Fatalf("%d dials refused, want 2 (the IP and the resolved name)", got)
	}
	open := node(false)
	if err := open.Host().Connect(ctx, peer.AddrInfo{ID: target.ID(), Addrs: []ma.Multiaddr{ma.StringCast("/dns4/localhost/tcp/" + port)}}); err != nil {
		t.Fatalf("without DialPublicOnly: %v", err)
	}
}
