package peer_test

import (
	"bytes"
	"crypto/rand"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"

	"github.com/acaptcha/acaptcha/internal/testutil/testnode"

	"github.com/acaptcha/acaptcha/peer"
)

type discOpts struct {
	key       crypto.PrivKey
	listen    string
	bootstrap []string
	dht       bool
	// tune adjusts the node's config (e.g. peer.WithDiscoveryTiming).
	tune func(peer.Config) peer.Config
}

// startDisc starts a node for discovery tests: no source, no prover, no
// first contact, and never mDNS (tests stay off real interfaces).
func startDisc(t *testing.T, o discOpts) *peer.Node {
	t.Helper()
	cfg := peer.Config{Key: o.key, Bootstrap: o.bootstrap, DHT: o.dht, MDNS: false}
	if o.listen != "" {
		cfg.ListenAddrs = []string{o.listen}
	}
	if o.tune != nil {
		cfg = o.tune(cfg)
	}
	return testnode.New(t, testnode.Options{Config: cfg})
}

func p2pAddr(t *testing.T, n *peer.Node) string {
	t.Helper()
	as := n.Addrs()
	if len(as) == 0 {
		t.Fatal("node has no address")
	}
	return as[0].String()
}

func connected(a, b *peer.Node) bool {
	return a.Host().Network().Connectedness(b.ID()) == network.Connected
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestDiscoveryBootstrapRetriesAndReconnects(t *testing.T) {
	fast := func(c peer.Config) peer.Config {
		return peer.WithDiscoveryTiming(c, 200*time.Millisecond, 100*time.Millisecond, time.Second)
	}
	// The bootstrap peer is down when the node starts: the node retries
	// with back-off until it comes up, and redials after a disconnect.
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	listen := "/ip4/127.0.0.1/tcp/" + itoa(freePort(t))
	b := startDisc(t, discOpts{tune: fast, key: key, listen: listen})
	addr := p2pAddr(t, b)
	b.Close()

	a := startDisc(t, discOpts{tune: fast, bootstrap: []string{addr}})
	time.Sleep(500 * time.Millisecond)
	b = startDisc(t, discOpts{tune: fast, key: key, listen: listen})
	waitFor(t, 15*time.Second, "connection to the bootstrap peer", func() bool { return connected(a, b) })

	if err := a.Host().Network().ClosePeer(b.ID()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "reconnection to the bootstrap peer", func() bool { return connected(a, b) })
}

func TestDiscoveryDHTRendezvous(t *testing.T) {
	fast := func(c peer.Config) peer.Config {
		return peer.WithDiscoveryTiming(c, 200*time.Millisecond, 200*time.Millisecond, 300*time.Millisecond)
	}
	// A and C know only B; they find each other through the private DHT
	// (its lookups and the rendezvous).
	b := startDisc(t, discOpts{tune: fast, dht: true})
	a := startDisc(t, discOpts{tune: fast, dht: true, bootstrap: []string{p2pAddr(t, b)}})
	c := startDisc(t, discOpts{tune: fast, dht: true, bootstrap: []string{p2pAddr(t, b)}})
	waitFor(t, 30*time.Second, "A and C to find each other on the rendezvous", func() bool { return connected(a, c) })
	// The DHT speaks only the private protocol.
	var private bool
	for _, p := range a.Host().Mux().Protocols() {
		switch {
		case strings.HasPrefix(string(p), "/ipfs/kad"):
			t.Fatalf("node speaks the public DHT protocol %s", p)
		case strings.HasPrefix(string(p), string(peer.DHTProtocolPrefix)+"/kad/"):
			private = true
		}
	}
	if !private {
		t.Fatalf("node does not speak %s/kad: %v", peer.DHTProtocolPrefix, a.Host().Mux().Protocols())
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestDiscoveryMDNSStaysOffOnLoopback(t *testing.T) {
	// mDNS is requested, but a loopback-only node has nothing to announce
	// on the network: it must start without touching real interfaces.
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	n, err := peer.New(peer.Config{
		Key: key, StorePath: filepath.Join(t.TempDir(), "s.db"),
		ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, MDNS: true, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
}

// --dht without --bootstrap used to start silently and find nobody
// (issue 12): the node now warns at start.
func TestDiscoveryDHTWithoutBootstrapWarns(t *testing.T) {
	var buf syncBuffer
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	n, err := peer.New(peer.Config{
		Key: key, StorePath: filepath.Join(t.TempDir(), "s.db"),
		ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: true,
		Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	if out := buf.String(); !strings.Contains(out, "without bootstrap peers") {
		t.Fatalf("no warning about a DHT without bootstrap peers; log:\n%s", out)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
