package peer

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
)

// transientInbound is the inbound streams in n's transient scope: those
// whose protocol is not negotiated yet.
func transientInbound(t *testing.T, n *Node) int {
	t.Helper()
	in := 0
	if err := n.host.Network().ResourceManager().ViewTransient(func(s network.ResourceScope) error {
		in = s.Stat().NumStreamsInbound
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return in
}

// holdNegotiating connects a fresh host to n and opens k raw streams on
// its connection that write one byte of a protocol header and never
// finish it; it returns once n has taken or refused all of them (a last
// stream's outcome: n accepts one connection's streams in order).
func holdNegotiating(ctx context.Context, t *testing.T, n *Node, k int) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	if err := h.Connect(ctx, peer.AddrInfo{ID: n.ID(), Addrs: n.Addrs()}); err != nil {
		t.Fatal(err)
	}
	c := h.Network().ConnsToPeer(n.ID())[0]
	for i := range k {
		s, err := c.NewStream(ctx)
		if err != nil {
			t.Fatalf("raw stream %d: %v", i, err)
		}
		// A varint length of 19 (multistream's header is 19 bytes):
		// the header never completes.
		if _, err := s.Write([]byte{0x13}); err != nil {
			break // reset already: over a bound
		}
	}
	last, err := h.NewStream(ctx, n.ID(), ping.ID)
	if err == nil {
		_, err = last.Write(make([]byte, ping.PingSize))
		if err == nil {
			_, err = last.Read(make([]byte, ping.PingSize))
		}
		last.Reset()
	}
	t.Logf("peer %s: %d streams left in negotiation; its last stream: %v", h.ID(), k, err)
	return h
}

// One peer opened streams and wrote no protocol header: libp2p holds
// them in its transient scope (504 inbound streams, shared by every
// peer) for its negotiation timeout of 10 s, and every other peer's new
// stream, to any protocol, was reset for resource limits meanwhile; the
// peer could open them again at once. One peer now holds at most
// maxNegotiatingPerPeer of them, and the peers of one network
// maxNegotiatingPerGroup (TestNegotiatingStreamsPerNetworkBounded).
func TestNegotiatingStreamsPerPeerBounded(t *testing.T) {
	victim := newBareNode(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	attacker := holdNegotiating(ctx, t, victim, 700)
	held := transientInbound(t, victim)
	t.Logf("one peer holds %d inbound streams in negotiation", held)
	// Its streams give their places back when they end (here, with its
	// connection): nothing is left counted.
	defer func() {
		rm, ok := victim.host.Network().ResourceManager().(*negotiationRM)
		if !ok {
			t.Fatal("the node's resource manager does not bound streams in negotiation")
		}
		attacker.Close()
		for {
			total, _, _ := rm.negotiating()
			if total == 0 {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%d streams still counted in negotiation after their peer left", total)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()

	honest, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	defer honest.Close()
	if err := honest.Connect(ctx, peer.AddrInfo{ID: victim.ID(), Addrs: victim.Addrs()}); err != nil {
		t.Fatal(err)
	}
	if r := <-ping.Ping(ctx, honest, victim.ID()); r.Error != nil {
		t.Fatalf("another peer's ping: %v", r.Error)
	}
	s, err := honest.NewStream(ctx, victim.ID(), PresentProtocol)
	if err == nil {
		// The presentation protocol's reader answers (or resets) once
		// it has read the header: a write and a read prove the
		// stream was negotiated.
		_, err = s.Write([]byte{0})
		if err == nil {
			_ = s.CloseWrite()
			_, err = s.Read(make([]byte, 1))
		}
		s.Reset()
	}
	if err != nil && !isStreamEnd(err) {
		t.Fatalf("another peer's presentation stream: %v", err)
	}
	if held > maxNegotiatingPerPeer {
		t.Fatalf("one peer holds %d streams in negotiation, want at most %d", held, maxNegotiatingPerPeer)
	}
}

// isStreamEnd reports whether err is the end of a negotiated stream (an
// EOF or a reset by its handler), not a refusal before negotiation.
func isStreamEnd(err error) bool {
	if errors.Is(err, io.EOF) {
		return true
	}
	var se *network.StreamError
	return errors.As(err, &se) && se.ErrorCode != network.StreamResourceLimitExceeded && se.ErrorCode != network.StreamProtocolNegotiationFailed
}

// Fresh peer IDs of one network (loopback, limited as any network here)
// share maxNegotiatingPerGroup streams in negotiation.
func TestNegotiatingStreamsPerNetworkBounded(t *testing.T) {
	victim := newBareNode(t, Config{LimitLoopback: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const peers = 6 // ConnsPerIP is 8
	for range peers {
		holdNegotiating(ctx, t, victim, 2*maxNegotiatingPerPeer)
	}
	held := transientInbound(t, victim)
	t.Logf("%d peers of one network hold %d inbound streams in negotiation", peers, held)
	if held > maxNegotiatingPerGroup {
		t.Fatalf("one network holds %d streams in negotiation, want at most %d", held, maxNegotiatingPerGroup)
	}
	// A peer of another network (127.0.114.0/24: any 127.x.y.z is
	// loopback on Linux) still opens streams.
	other, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.114.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Connect(ctx, peer.AddrInfo{ID: victim.ID(), Addrs: victim.Addrs()}); err != nil {
		t.Fatal(err)
	}
	if r := <-ping.Ping(ctx, other, victim.ID()); r.Error != nil {
		t.Fatalf("a peer of another network: ping %v", r.Error)
	}
}

// A node configured for more sessions per peer than
// maxNegotiatingPerPeer lets one peer open that many streams (and the
// two refused ones of the attestation service) at once.
func TestNegotiatingStreamsFollowSessionsPerPeer(t *testing.T) {
	const sessions = 16
	victim := newBareNode(t, Config{Limits: Limits{MaxInboundPerPeer: sessions}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holdNegotiating(ctx, t, victim, 2*sessions)
	want := attestStreamsPerPeer(Limits{MaxInboundPerPeer: sessions})
	if held := transientInbound(t, victim); held != want {
		t.Fatalf("one peer of a node serving %d sessions per peer holds %d streams in negotiation, want %d", sessions, held, want)
	}
}
