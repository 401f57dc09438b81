package peer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// TestRecordContactKeepsRetrying: a peer whose sessions keep failing for
// reasons that are not its verdict (busy, network, inconclusive) is retried
// with a doubling back-off that stops growing at contactTransientMax, and
// is never dropped while it stays connected.
func TestRecordContactKeepsRetrying(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := &Node{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	n.contact.ctx = ctx
	n.contact.backoff = map[peer.ID]*contactBackoff{}
	n.contact.verified = map[peer.ID]time.Time{}
	p := peer.ID("peer-under-test")
	fail := errors.New("stream reset")
	var last time.Duration
	for i := 1; i <= contactTransientTries+10; i++ {
		d := n.recordContact(p, nil, fail, false)
		want := min(contactTransientBackoff<<(i-1), contactTransientMax)
		// jitter spreads a delay over [0.75, 1.25) of it.
		if d < want*3/4 || d >= want*5/4 {
			t.Fatalf("attempt %d: retry in %s, want about %s", i, d, want)
		}
		b := n.contact.backoff[p]
		if b == nil || b.transient != i {
			t.Fatalf("attempt %d: back-off state %+v", i, b)
		}
		last = d
	}
	if last < contactTransientMax*3/4 {
		t.Fatalf("back-off stopped at %s", last)
	}
	// A stopping node schedules nothing.
	cancel()
	if d := n.recordContact(p, nil, fail, false); d != 0 {
		t.Fatalf("retry scheduled after stop: %s", d)
	}
}
