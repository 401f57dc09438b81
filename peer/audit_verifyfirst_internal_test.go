package peer

// Adversarial tests of spec/protocol.md §5c (verify first) against first contact from an audit
// (helper-79, 2026-11-28): each failed on the code it was written
// against and guards its fix now.

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-msgio/pbio"

	"github.com/acaptcha/acaptcha/protocol"
	wirepb "github.com/acaptcha/acaptcha/protocol/pb"
)

// Audit (helper-79): a VERIFY_FIRST decline whose reciprocal is
// UNSPECIFIED says no verdict is coming (§5c): first contact backs off as
// from a rejection instead of asking every half minute for ever.
func TestVerifyFirstUnspecifiedBacksOff(t *testing.T) {
	saved := contactTransientMax
	contactTransientMax = time.Second
	t.Cleanup(func() { contactTransientMax = saved })
	src := exampleCorpus(t)
	n := newBareNode(t, Config{Source: src, AttestPolicy: AttestAll, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	var hellos atomic.Int64
	h.SetStreamHandler(protocol.ID, func(s network.Stream) {
		defer s.Reset()
		_ = s.SetDeadline(time.Now().Add(5 * time.Second))
		r, w := pbio.NewDelimitedReader(s, protocol.MaxVerifierFrame), pbio.NewDelimitedWriter(s)
		var f wirepb.Frame
		if r.ReadMsg(&f) != nil || f.GetHello() == nil {
			return
		}
		hellos.Add(1)
		_ = w.WriteMsg(&wirepb.Frame{Body: &wirepb.Frame_Decline{Decline: &wirepb.Decline{
			Reason: wirepb.DeclineReason_DECLINE_REASON_VERIFY_FIRST, Reciprocal: wirepb.Reciprocal_RECIPROCAL_UNSPECIFIED}}})
		_ = s.CloseWrite()
		_, _ = io.Copy(io.Discard, s)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.Connect(ctx, peer.AddrInfo{ID: n.ID(), Addrs: n.host.Addrs()}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	if got := hellos.Load(); got != 1 {
		t.Fatalf("a peer that declines every hello VERIFY_FIRST with reciprocal UNSPECIFIED (no verdict coming) got %d hellos in 4 s "+
			"(the ask-again delay shortened to %s); want 1, then a back-off as from a decline", got, contactTransientMax/2)
	}
}
