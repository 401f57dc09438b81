package peer

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"

	wirepb "github.com/acaptcha/acaptcha/protocol/pb"
)

// TestContactWorkersSharedByNetworks (audit-82): the first-contact
// workers (maxContactWorkers, 1,024) were bounded in total only. A
// reciprocal request (or, on a verify-first node, any hello: spec §5c)
// from a fresh peer ID starts one, and while the few session slots are
// taken (four sessions of T_total each) every worker waits, so the peers
// of one IPv4 /24 could hold all 1,024 and every other peer's reciprocal
// request was answered BUSY and its first contact put off to a rescan
// that found the table full again. One network now holds at most
// maxContactWorkersPerNet of them (an IPv6 /32 twice that); beyond, its
// requests are BUSY and other networks keep the rest.
func TestContactWorkersSharedByNetworks(t *testing.T) {
	n := newBareNode(t, Config{Source: exampleCorpus(t), LimitLoopback: true, ConnsPerIP: 4096,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	c := &n.contact
	// The session slots are all taken (four long sessions): the workers
	// started below wait for one.
	for range cap(c.sem) {
		c.sem <- struct{}{}
	}
	// Peers of one /24 (loopback counts as 127.0.0.0/24 here): a share
	// and a dozen more.
	share := maxContactWorkers / 16
	peers := share + 12
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	var ids []peer.ID
	for i := 0; i < peers && time.Since(start) < 40*time.Second; i++ {
		h, err := libp2p.New(libp2p.NoTransports, libp2p.Transport(tcp.NewTCPTransport), libp2p.NoListenAddrs, libp2p.DisableMetrics())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		if err := h.Connect(ctx, peer.AddrInfo{ID: n.ID(), Addrs: n.Host().Addrs()}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, h.ID())
	}
	if len(ids) < peers {
		t.Fatalf("only %d of %d peers connected in time", len(ids), peers)
	}
	net0 := n.peerNets(ids[0]).prefix
	if !net0.IsValid() {
		t.Fatal("the peers have no network (LimitLoopback off?)")
	}
	will := 0
	for _, p := range ids {
		if n.peerNets(p).prefix != net0 {
			t.Fatalf("peer %s not of %s", p, net0)
		}
		if n.onReciprocal(p, true) == wirepb.Reciprocal_RECIPROCAL_WILL {
			will++
		}
	}
	c.mu.Lock()
	active := len(c.active)
	c.mu.Unlock()
	t.Logf("%d peers of %s asked to be verified back: %d answered WILL, %d workers wait (share %d, total cap %d)",
		peers, net0, will, active, share, maxContactWorkers)
	if active > share || will > share {
		t.Fatalf("one network holds %d first-contact workers (%d WILL), want at most its share %d of %d",
			active, will, share, maxContactWorkers)
	}
	if will < share {
		t.Fatalf("only %d of the network's %d requests answered WILL, want its share %d", will, peers, share)
	}
	// The slots free: the workers run (their sessions fail at once, the
	// peers do not speak the protocol) and give the network's share back.
	for range cap(c.sem) {
		<-c.sem
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		c.mu.Lock()
		active, held := len(c.active), len(c.workersIn)
		c.mu.Unlock()
		if active == 0 && held == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d workers and %d networks' counts left 20 s after the slots freed", active, held)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
