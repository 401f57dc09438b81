package peer

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"

	wirepb "github.com/acaptcha/acaptcha/protocol/pb"
)

// TestLeashCoversStreamOpen (audit-82): the leash started when the
// session's stream had opened, and opening it is bounded by twice the
// handshake timeout (20 s). A peer that never answers the protocol
// negotiation (a modified host; over QUIC one that grants no stream
// credit) held a first-contact slot for all of it, not for contactLeash:
// four fresh peer IDs asking to be verified back held every slot for 20 s.
// The leash now runs from the open's start.
func TestLeashCoversStreamOpen(t *testing.T) {
	const leash = 300 * time.Millisecond
	cfg := WithContactLeash(Config{Source: exampleCorpus(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, leash)
	n := newBareNode(t, cfg)
	h, err := libp2p.New(libp2p.NoTransports, libp2p.Transport(tcp.NewTCPTransport), libp2p.NoListenAddrs, libp2p.DisableMetrics())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Connect(ctx, peer.AddrInfo{ID: n.ID(), Addrs: n.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
	// The peer takes every stream this node opens and never answers its
	// negotiation (identify's included, so this node knows none of its
	// protocols and negotiates eagerly).
	h.Network().SetStreamHandler(func(s network.Stream) {
		<-ctx.Done()
		_ = s.Reset()
	})
	if got := n.onReciprocal(h.ID(), true); got != wirepb.Reciprocal_RECIPROCAL_WILL {
		t.Fatalf("reciprocal request: %v, want WILL", got)
	}
	c := &n.contact
	start := time.Now()
	var took, held time.Duration
	for time.Since(start) < 8*time.Second {
		if len(c.sem) > 0 {
			held = time.Since(start)
			if took == 0 {
				took = held
			}
		} else if took > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if took == 0 {
		t.Fatal("the session never took a slot")
	}
	t.Logf("a peer that never answers the stream's negotiation held a first-contact slot for %s (leash %s)", held.Round(10*time.Millisecond), leash)
	if held > leash+2*time.Second {
		t.Fatalf("a slot held %s past a peer that never let the stream open, want about the leash (%s)", held.Round(10*time.Millisecond), leash)
	}
}
