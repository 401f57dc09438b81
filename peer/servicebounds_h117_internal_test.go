package peer

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/host/autonat"
	circuit "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/proto"
	"github.com/libp2p/go-libp2p/p2p/protocol/identify"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
)

// serviceInboundLimit is the resource manager's inbound-stream limit of
// libp2p service svc on a node of the default configuration.
func serviceInboundLimit(svc string) int {
	part := connLimitConfig(DefaultConnHighWater, attestStreamsPerPeer(Limits{})).ToPartialLimitConfig()
	return part.Service[svc].StreamsInbound.Build(0)
}

// freshPeers connects k new peer IDs to n, all from 127.0.0.1 (one
// network), a few at a time.
func freshPeers(ctx context.Context, t *testing.T, n *Node, k int) []host.Host {
	t.Helper()
	hosts := make([]host.Host, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range hosts {
		h, err := libp2p.New(libp2p.NoListenAddrs, libp2p.Transport(tcp.NewTCPTransport), libp2p.DisableRelay(),
			libp2p.ResourceManager(&network.NullResourceManager{}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		hosts[i] = h
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = h.Connect(ctx, peer.AddrInfo{ID: n.ID(), Addrs: n.Addrs()})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("fresh peers: %v", err)
	}
	return hosts
}

// otherNetworkPeer is a peer of another network than freshPeers'
// (127.0.114.0/24: any 127.x.y.z is loopback on Linux) connected to n.
func otherNetworkPeer(ctx context.Context, t *testing.T, n *Node) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.114.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	if err := h.Connect(ctx, peer.AddrInfo{ID: n.ID(), Addrs: n.Addrs()}); err != nil {
		t.Fatal(err)
	}
	return h
}

// holdIdle opens k streams of pid from h to n, in batches n negotiates
// at once, each writing a varint prefix of a message that never comes;
// it returns how many n holds (a read on them times out rather than
// seeing a reset). The streams stay open until the test ends.
//
// A stream whose first read times out (50 ms) is read once more, all
// such streams until one shared deadline holdConfirm later: on a loaded
// machine (CI runs two packages at once, each test binary several
// goroutines per peer) a reset can take longer than 50 ms to arrive, and
// a stream so reset was counted as held.
func holdIdle(ctx context.Context, t *testing.T, h host.Host, n *Node, pid protocol.ID, k int) int {
	t.Helper()
	return len(holdIdleStreams(ctx, t, h, n, pid, k))
}

// holdIdleStreams is holdIdle returning the streams held.
func holdIdleStreams(ctx context.Context, t *testing.T, h host.Host, n *Node, pid protocol.ID, k int) []network.Stream {
	t.Helper()
	var maybe []network.Stream
	for b := 0; b < k; b += maxNegotiatingPerPeer {
		var batch []network.Stream
		for range min(maxNegotiatingPerPeer, k-b) {
			s, err := h.NewStream(ctx, n.ID(), pid)
			if err != nil {
				break
			}
			t.Cleanup(func() { s.Reset() })
			if _, err := s.Write([]byte{5}); err != nil {
				break
			}
			batch = append(batch, s)
		}
		deadline := time.Now().Add(50 * time.Millisecond)
		for _, s := range batch {
			_ = s.SetReadDeadline(deadline)
			if _, err := s.Read(make([]byte, 1)); isTimeout(err) {
				maybe = append(maybe, s)
			}
		}
	}
	return stillHeld(maybe)
}

// stillHeld returns the streams of ss that read nothing, neither data nor
// their end, until one shared deadline holdConfirm from now.
func stillHeld(ss []network.Stream) []network.Stream {
	var held []network.Stream
	deadline := time.Now().Add(holdConfirm)
	for _, s := range ss {
		_ = s.SetReadDeadline(deadline)
		if _, err := s.Read(make([]byte, 1)); isTimeout(err) {
			held = append(held, s)
		}
	}
	return held
}

// holdConfirm is how long holdIdle waits, in all, for a reset late to
// arrive on the streams whose first read timed out.
const holdConfirm = 300 * time.Millisecond

// The node serves libp2p ping (2 streams a peer, kept while the peer
// pings within 10 s) with no share per network: fresh peer IDs of one
// IPv4 /24, two pings each, held every ping stream the resource manager
// allows (252 on a 24 GiB machine) and every other peer's ping was
// reset. The peers of one network now hold at most maxPingPerGroup.
func TestPingStreamsPerNetworkBounded(t *testing.T) {
	victim := newBareNode(t, Config{LimitLoopback: true, ConnsPerIP: 512})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	total := serviceInboundLimit(ping.ServiceName)
	attackers := total/maxPingPerPeer + 2
	hosts := freshPeers(ctx, t, victim, attackers)
	held := 0
	for _, h := range hosts {
		for range maxPingPerPeer {
			s, err := h.NewStream(ctx, victim.ID(), ping.ID)
			if err != nil {
				continue
			}
			t.Cleanup(func() { s.Reset() })
			// A ping answered is a stream the node holds for the
			// next one (10 s).
			buf := make([]byte, ping.PingSize)
			if _, err := s.Write(buf); err == nil {
				if _, err := s.Read(buf); err == nil {
					held++
				}
			}
		}
	}
	t.Logf("%d fresh peers of 127.0.0.0/24 hold %d ping streams (the resource manager allows %d in all)", attackers, held, total)
	honest := otherNetworkPeer(ctx, t, victim)
	if r := <-ping.Ping(ctx, honest, victim.ID()); r.Error != nil {
		t.Errorf("a peer of another network: ping %v", r.Error)
	}
	if held > maxPingPerGroup {
		t.Errorf("the peers of one network hold %d ping streams, want at most %d", held, maxPingPerGroup)
	}
	// The streams give their places back when they end (here, with
	// their peers).
	rm, ok := victim.host.Network().ResourceManager().(*negotiationRM)
	if !ok {
		t.Fatal("the node's resource manager does not bound the libp2p services")
	}
	for _, h := range hosts {
		h.Close()
	}
	honest.Close()
	for {
		n, _, _ := rm.services[ping.ID].held()
		if n == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d ping streams still counted after their peers left", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Identify push lets a peer hold 16 streams, each read until identify's
// 5 s timeout, and 252 in all: 18 fresh peer IDs of one IPv4 /24 held
// them all and another peer's push was reset. The peers of one network
// now hold at most maxIDPushPerGroup.
func TestIdentifyPushPerNetworkBounded(t *testing.T) {
	victim := newBareNode(t, Config{LimitLoopback: true, ConnsPerIP: 512})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const perPeer = 16 // libp2p's per-peer limit of the identify service
	total := serviceInboundLimit(identify.ServiceName)
	attackers := total/perPeer + 2
	hosts := freshPeers(ctx, t, victim, attackers)
	// Identify reads a push for 5 s and then ends it: on a slow machine
	// a stream held by a peer early in the loop had ended, and a later
	// peer's taken its place, before the loop's end (the loop takes
	// 1.6-1.8 s under -race at load 5; with 400 ms more a peer it took
	// 10 s, and the streams held one after the other added up to 16).
	// The bound is on the streams held at once: those the peers still
	// hold once they all tried.
	var streams []network.Stream
	start := time.Now()
	for _, h := range hosts {
		streams = append(streams, holdIdleStreams(ctx, t, h, victim, identify.IDPush, perPeer)...)
	}
	took := time.Since(start)
	held := len(stillHeld(streams))
	t.Logf("%d fresh peers of 127.0.0.0/24 hold %d identify-push streams at once after %v (%d held in all; the identify service allows %d in all)",
		attackers, held, took.Round(time.Millisecond), len(streams), total)
	honest := otherNetworkPeer(ctx, t, victim)
	s, err := honest.NewStream(ctx, victim.ID(), identify.IDPush)
	if err == nil {
		defer s.Reset()
		if _, err = s.Write([]byte{5}); err == nil {
			_ = s.SetReadDeadline(time.Now().Add(time.Second))
			_, err = s.Read(make([]byte, 1))
		}
	}
	if !isTimeout(err) {
		t.Errorf("a peer of another network: identify push refused: %v", err)
	}
	if held > maxIDPushPerGroup {
		t.Errorf("the peers of one network hold %d identify-push streams, want at most %d", held, maxIDPushPerGroup)
	}
}

// The relay service (Config.RelayService) reads a hop stream for a
// minute and lets a peer hold 64: the peers of one network held as many
// as their connections allowed. They now hold at most maxHopPerGroup,
// one peer maxHopPerPeer, and a peer of another network is served.
func TestRelayHopStreamsPerNetworkBounded(t *testing.T) {
	victim := newBareNode(t, Config{LimitLoopback: true, RelayService: true,
		HostOptions: []libp2p.Option{libp2p.ForceReachabilityPublic()}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The relay service starts once the node finds itself public.
	sub, err := victim.host.EventBus().Subscribe(new(event.EvtLocalProtocolsUpdated))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for !slices.Contains(victim.host.Mux().Protocols(), circuit.ProtoIDv2Hop) {
		select {
		case <-sub.Out():
		case <-ctx.Done():
			t.Fatal("the relay service never started")
		}
	}
	const attackers, perPeer = 6, 2 * maxHopPerPeer // ConnsPerIP is 8
	hosts := freshPeers(ctx, t, victim, attackers)
	held := 0
	for i, h := range hosts {
		n := holdIdle(ctx, t, h, victim, circuit.ProtoIDv2Hop, perPeer)
		if i == 0 && n > maxHopPerPeer {
			t.Errorf("one peer holds %d hop streams, want at most %d", n, maxHopPerPeer)
		}
		held += n
	}
	t.Logf("%d fresh peers of 127.0.0.0/24 hold %d hop streams", attackers, held)
	if held > maxHopPerGroup {
		t.Errorf("the peers of one network hold %d hop streams, want at most %d", held, maxHopPerGroup)
	}
	honest := otherNetworkPeer(ctx, t, victim)
	if n := holdIdle(ctx, t, honest, victim, circuit.ProtoIDv2Hop, 1); n != 1 {
		t.Errorf("a peer of another network: hop stream not served")
	}
}

// AutoNAT v1's service (on with Config.NAT) reads a request for up to a
// minute and lets a peer hold 2 streams, 75 in all here: 39 fresh peer
// IDs of one IPv4 /24 held them all and another peer's stream was
// reset. The peers of one network now hold at most maxAutoNATPerGroup.
func TestAutoNATStreamsPerNetworkBounded(t *testing.T) {
	// The service alone (Config.NAT would also try port mapping on the
	// machine's network).
	victim := newBareNode(t, Config{LimitLoopback: true, ConnsPerIP: 512,
		HostOptions: []libp2p.Option{libp2p.EnableNATService()}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	total := serviceInboundLimit(autonat.ServiceName)
	attackers := total/maxAutoNATPerPeer + 2
	hosts := freshPeers(ctx, t, victim, attackers)
	held := 0
	for _, h := range hosts {
		held += holdIdle(ctx, t, h, victim, autonat.AutoNATProto, maxAutoNATPerPeer)
	}
	t.Logf("%d fresh peers of 127.0.0.0/24 hold %d AutoNAT streams (the service allows %d in all)", attackers, held, total)
	honest := otherNetworkPeer(ctx, t, victim)
	if n := holdIdle(ctx, t, honest, victim, autonat.AutoNATProto, 1); n != 1 {
		t.Errorf("a peer of another network: AutoNAT stream not served")
	}
	if held > maxAutoNATPerGroup {
		t.Errorf("the peers of one network hold %d AutoNAT streams, want at most %d", held, maxAutoNATPerGroup)
	}
}
