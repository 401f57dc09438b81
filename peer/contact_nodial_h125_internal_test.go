package peer

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	swarm "github.com/libp2p/go-libp2p/p2p/net/swarm"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
)

// TestFirstContactDialsNoAdvertisedAddress (h125): first contact acts on
// a peer that connected to the node, over that connection. Its worker
// presented the node's attestations before it checked the peer was still
// connected, and opened the presentation's stream allowing a dial: a
// peer that named another host's addresses in identify and hung up made
// the node dial them (every address it named, up to the peerstore's
// hundred, once per fresh peer ID), a connection amplifier aimed
// wherever the peer chose. The worker now neither presents to nor
// verifies a peer it is not connected to, and opens no stream that
// dials.
func TestFirstContactDialsNoAdvertisedAddress(t *testing.T) {
	n := newBareNode(t, Config{Source: exampleCorpus(t), AttestPolicy: AttestNone,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	// Something to present: an acceptance of the node by another issuer.
	ik, _ := testutil.NewKey(t)
	a, _, err := protocol.VerifyAttestation(SealTest(ik, n.ID(), true, time.Now().Add(-time.Minute), time.Hour), protocol.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.indexReceived(a, SealTest(ik, n.ID(), true, time.Now().Add(-time.Minute), time.Hour))
	if len(n.trust.presentable(n.trustNow(), MaxPresented)) == 0 {
		t.Fatal("nothing presentable")
	}

	// The victim: a TCP listener that counts the connections it gets.
	victim, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	var dialed atomic.Int32
	go func() {
		for {
			c, err := victim.Accept()
			if err != nil {
				return
			}
			dialed.Add(1)
			_ = c.Close()
		}
	}()
	victimAddr := ma.StringCast("/ip4/127.0.0.1/tcp/" + strconv.Itoa(victim.Addr().(*net.TCPAddr).Port))

	// The attacker names the victim as its only address.
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.AddrsFactory(func([]ma.Multiaddr) []ma.Multiaddr { return []ma.Multiaddr{victimAddr} }))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Connect(context.Background(), peer.AddrInfo{ID: n.ID(), Addrs: n.host.Addrs()}); err != nil {
		t.Fatal(err)
	}
	waitH125(t, 5*time.Second, func() bool {
		for _, ad := range n.host.Peerstore().Addrs(h.ID()) {
			if ad.Equal(victimAddr) {
				return true
			}
		}
		return false
	}, "identify put the attacker's advertised address in the peerstore")
	if err := h.Network().ClosePeer(n.ID()); err != nil {
		t.Fatal(err)
	}
	waitH125(t, 5*time.Second, func() bool {
		return n.host.Network().Connectedness(h.ID()) != network.Connected
	}, "the node sees the attacker gone")

	// The worker of the contact queued when the attacker was identified.
	done := make(chan struct{})
	go func() { defer close(done); n.firstContact(h.ID(), "connected") }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("first contact did not return")
	}
	if k := dialed.Load(); k > 0 {
		t.Errorf("first contact with a peer that hung up dialed the address it advertised %d times, want none", k)
	}
	// The verifier's own session on the worker's context does not dial
	// either (the worker checks the connection first, but the peer may
	// hang up in between).
	dialed.Store(0)
	n.host.Network().(interface{ Backoff() *swarm.DialBackoff }).Backoff().Clear(h.ID())
	if _, err := n.contactVerify(h.ID()); err == nil {
		t.Error("a session with a disconnected peer succeeded")
	}
	if k := dialed.Load(); k > 0 {
		t.Errorf("the contact session dialed the advertised address %d times, want none", k)
	}
}

// waitH125 polls cond every 10 ms until it holds or d passes.
func waitH125(t *testing.T, d time.Duration, cond func() bool, what string) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not within %s: %s", d, what)
		}
	}
}
