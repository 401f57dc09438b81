package peer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	"github.com/libp2p/go-libp2p/p2p/protocol/identify"
	ma "github.com/multiformats/go-multiaddr"
)

// inboundOf reports the inbound streams the resource manager of n counts
// in libp2p service svc.
func inboundOf(t *testing.T, n *Node, svc string) int {
	t.Helper()
	held := 0
	if err := n.host.Network().ResourceManager().ViewService(svc, func(s network.ServiceScope) error {
		held = s.Stat().NumStreamsInbound
		return nil
	}); err != nil {
		t.Fatalf("view service %s: %v", svc, err)
	}
	return held
}

// An identify request (/ipfs/id/1.0.0) holds its stream only while the
// node writes its answer, one message well within a stream's flow
// control window, and the stream's scope is given back when the node
// closes its side, whether or not the peer ever reads or closes: fresh
// peer IDs of one IPv4 /24 that open every identify stream libp2p lets
// them (16 a peer, more peers than the service's inbound limit allows)
// and never read hold none, and a peer of another network is answered.
// (The answer's write could only wait on a connection whose peer stops
// reading it altogether, and yamux closes such a connection, and its
// streams, after its 10 s write timeout.)
func TestIdentifyRequestsHoldNoStreams(t *testing.T) {
	victim := newBareNode(t, Config{LimitLoopback: true, ConnsPerIP: 512})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const perPeer = 16 // libp2p's per-peer limit of the identify service
	total := serviceInboundLimit(identify.ServiceName)
	attackers := total/perPeer + 2
	hosts := freshPeers(ctx, t, victim, attackers)
	// Opened in batches the node negotiates at once; each is answered
	// (its answer waits in the peer's stream buffer: a 1-byte read
	// returns at once) and then never read further nor closed.
	opened := 0
	for _, h := range hosts {
		for b := 0; b < perPeer; b += maxNegotiatingPerPeer {
			var batch []network.Stream
			for range min(maxNegotiatingPerPeer, perPeer-b) {
				s, err := h.NewStream(ctx, victim.ID(), identify.ID)
				if err != nil {
					t.Fatalf("open identify stream: %v", err)
				}
				t.Cleanup(func() { s.Reset() })
				// Sends the protocol header (negotiation is lazy).
				if _, err := s.Write(nil); err != nil {
					t.Fatalf("identify request: %v", err)
				}
				batch = append(batch, s)
			}
			for _, s := range batch {
				_ = s.SetReadDeadline(time.Now().Add(10 * time.Second))
				if _, err := s.Read(make([]byte, 1)); err != nil {
					t.Fatalf("identify request %d not answered: %v", opened, err)
				}
				opened++
			}
		}
	}
	// The node holds none of them.
	for held := inboundOf(t, victim, identify.ServiceName); held > 0; held = inboundOf(t, victim, identify.ServiceName) {
		if ctx.Err() != nil {
			t.Fatalf("%d fresh peers of 127.0.0.0/24 hold %d identify streams they never read", attackers, held)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("%d fresh peers of 127.0.0.0/24 opened %d identify requests, never read to the end: the node holds none", attackers, opened)
	honest := otherNetworkPeer(ctx, t, victim)
	s, err := honest.NewStream(ctx, victim.ID(), identify.ID)
	if err != nil {
		t.Fatalf("a peer of another network: identify: %v", err)
	}
	defer s.Reset()
	_ = s.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := s.Read(make([]byte, 1)); err != nil {
		t.Errorf("a peer of another network: identify not answered: %v", err)
	}
}

// Hole punching (Config.NAT; DCUtR, /libp2p/dcutr): go-libp2p's service
// resets at once an inbound DCUtR stream on a connection the peer
// dialed, and serves one only on a connection this node dialed (through
// a relay, to the peer it hole-punches to). Fresh peer IDs, which dial
// the node, hold no DCUtR stream however many they open. The service
// registers its handler once the node has a public address, which a
// loopback node never has: the test starts it on the node's host with
// one.
func TestDCUtRStreamsOfDialingPeersReset(t *testing.T) {
	victim := newBareNode(t, Config{LimitLoopback: true, ConnsPerIP: 512})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ider, ok := victim.host.(interface{ IDService() identify.IDService })
	if !ok {
		t.Fatalf("the node's host %T has no identify service", victim.host)
	}
	public := ma.StringCast("/ip4/1.2.3.4/tcp/4001")
	svc, err := holepunch.NewService(victim.host, ider.IDService(), func() []ma.Multiaddr { return []ma.Multiaddr{public} })
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	const perPeer = 2 // libp2p's per-peer limit of the service
	attackers := serviceInboundLimit(holepunch.ServiceName)/perPeer + 2
	hosts := freshPeers(ctx, t, victim, attackers)
	// The handler is in place once a stream is reset by it rather than
	// refused in negotiation (it is set by the service's goroutine).
	for {
		s, err := hosts[0].NewStream(ctx, victim.ID(), holepunch.Protocol)
		if err == nil {
			_, err = s.Write([]byte{5})
			if err == nil {
				_ = s.SetReadDeadline(time.Now().Add(10 * time.Second))
				_, err = s.Read(make([]byte, 1))
			}
			s.Reset()
		}
		if errors.Is(err, network.ErrReset) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the hole-punching handler never answered: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	held := 0
	for _, h := range hosts {
		held += holdIdle(ctx, t, h, victim, holepunch.Protocol, perPeer)
	}
	if held > 0 {
		t.Errorf("%d fresh peers of 127.0.0.0/24 hold %d DCUtR streams on connections they dialed, want none", attackers, held)
	}
	if n := inboundOf(t, victim, holepunch.ServiceName); n > 0 {
		t.Errorf("the hole-punching service counts %d inbound streams, want none", n)
	}
}
