package peer

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
)

// presentableNode is a bare node that holds an acceptance about itself to
// present and attests every peer it meets (first contact on).
func presentableNode(t *testing.T) *Node {
	t.Helper()
	n := newBareNode(t, Config{AttestPolicy: AttestAll, Source: exampleCorpus(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ik, issuer := testutil.NewKey(t)
	env := SealTest(ik, n.ID(), true, time.Now().Add(-time.Minute), time.Hour)
	a, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{Subject: n.ID()})
	if err != nil {
		t.Fatal(err)
	}
	n.recordReceived(protocol.ProverResult{Verifier: issuer, Accepted: true, Reason: a.Reason, Attestation: a, Envelope: env})
	if len(n.trust.presentable(time.Now(), MaxPresented)) == 0 {
		t.Fatal("nothing to present")
	}
	return n
}

// presentedPeer is a host that names the attestation protocol (so that
// first contact goes to it), resets every session, and counts the
// presentations it is sent (as each stream opens: the presenter's wait
// for the acknowledgement ends after it).
func presentedPeer(t *testing.T, got *atomic.Int64) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	h.SetStreamHandler(protocol.ID, func(s network.Stream) { _ = s.Reset() })
	h.SetStreamHandler(PresentProtocol, func(s network.Stream) {
		got.Add(1)
		_, _ = io.Copy(io.Discard, s)
		_, _ = s.Write([]byte{0})
		_ = s.Close()
	})
	return h
}

// meet connects h to n and waits until a first-contact worker for h has
// started and ended (its presentation, if any, acknowledged).
func meet(t *testing.T, ctx context.Context, n *Node, h host.Host) {
	t.Helper()
	before := n.contact.started.Load()
	if err := h.Connect(ctx, peer.AddrInfo{ID: n.ID(), Addrs: n.host.Addrs()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool {
		n.contact.mu.Lock()
		defer n.contact.mu.Unlock()
		return n.contact.started.Load() > before && !n.contact.active[h.ID()]
	})
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A peer that connects, lets first contact present to it, disconnects and
// connects again (or fresh peer IDs, one connection each) made the node
// open a presentation and write its records every time: a stream and up
// to 32 envelopes per connection, for a handshake of the peer's, where a
// receiver itself takes 8 then one a minute from one presenter. First
// contact now presents within the receiver's rates, kept per receiver,
// per receiver's network and in total (allowPresentTo).
func TestFirstContactPresentsWithinRates_h129(t *testing.T) {
	t.Run("one peer reconnecting", func(t *testing.T) {
		n := presentableNode(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var got atomic.Int64
		h := presentedPeer(t, &got)
		const reconnects = 2 * PresentPeerBurst
		for range reconnects {
			meet(t, ctx, n, h)
			_ = h.Network().ClosePeer(n.ID())
			waitFor(t, 5*time.Second, func() bool { return n.host.Network().Connectedness(h.ID()) != network.Connected })
		}
		t.Logf("%d connections of one peer: %d presentations", reconnects, got.Load())
		if got.Load() == 0 || got.Load() > PresentPeerBurst {
			t.Fatalf("%d connections of one peer got %d presentations, want 1 to %d (a receiver's bound of one presenter)", reconnects, got.Load(), PresentPeerBurst)
		}
	})
	t.Run("fresh peer IDs", func(t *testing.T) {
		n := presentableNode(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var got atomic.Int64
		const fresh = 2 * PresentGlobalBurst
		start := time.Now()
		for range fresh {
			meet(t, ctx, n, presentedPeer(t, &got))
		}
		// Loopback peers count in no network: the total bounds them,
		// down to its reserve for peers the node does not admit.
		allowed := int64(PresentGlobalBurst - presentReserve + int(time.Since(start)/PresentGlobalEvery) + 1)
		t.Logf("%d fresh peers: %d presentations in %s", fresh, got.Load(), time.Since(start).Round(time.Millisecond))
		if got.Load() > allowed {
			t.Fatalf("%d fresh peers got %d presentations, want at most %d", fresh, got.Load(), allowed)
		}
	})
}
