package peer

// Audit (helper-80): first contact's back-off table against fresh peer
// IDs. Each failed on the code it was written against.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
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

// TestAudit80ContactBackoffBounded: a peer that declines our hello (any
// decline but BUSY: NO_PROVER, VERSION, or VERIFY_FIRST with anything but
// WILL/BUSY/BACKING_OFF) costs it a connection and one frame, draws
// nothing and is charged to no budget of its network, and leaves a
// back-off as from a rejection: an hour, kept for a day past it once the
// peer has gone (pruneBackoff keeps rejected entries 24 h past their
// end). Fresh peer IDs are free, so the table grew by one entry per ID
// for 25 hours, without a bound in total. It now holds at most
// maxContactBackoffs entries.
func TestAudit80ContactBackoffBounded(t *testing.T) {
	src := exampleCorpus(t)
	n := newBareNode(t, Config{Source: src, AttestPolicy: AttestAll, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	// The remote path: fresh peer IDs that connect, decline our hello
	// NO_PROVER and leave.
	const remotes = 4
	var hellos atomic.Int64
	for i := range remotes {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
		if err != nil {
			t.Fatal(err)
		}
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
				Reason: wirepb.DeclineReason_DECLINE_REASON_NO_PROVER}}})
			_ = s.CloseWrite()
			_, _ = io.Copy(io.Discard, s)
		})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = h.Connect(ctx, peer.AddrInfo{ID: n.ID(), Addrs: n.host.Addrs()})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for hellos.Load() < int64(i+1) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		id := h.ID()
		deadline = time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			n.contact.mu.Lock()
			b := n.contact.backoff[id]
			n.contact.mu.Unlock()
			if b != nil && b.rejected > 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		h.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(n.host.Network().Peers()) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	n.pruneBackoff(time.Now())
	n.contact.mu.Lock()
	kept := len(n.contact.backoff)
	n.contact.mu.Unlock()
	if hellos.Load() != remotes || kept != remotes {
		t.Fatalf("%d fresh peers declined %d hellos and left: %d back-offs kept after they left, want %d (the premise)", remotes, hellos.Load(), kept, remotes)
	}

	// The same at the scale of a day of fresh IDs (a decline takes a
	// round trip: thousands a minute through 4 contact slots), recorded
	// the way firstContact records them; none of these peers is
	// connected, and every back-off is still running.
	const fresh = 100_000
	declined := fmt.Errorf("%w: %s: this node does not answer challenges", protocol.ErrDeclined, "x")
	for i := range fresh {
		n.recordContact(peer.ID(fmt.Sprintf("fresh-peer-%d", i)), nil, declined, false)
	}
	n.pruneBackoff(time.Now())
	n.contact.mu.Lock()
	kept = len(n.contact.backoff)
	n.contact.mu.Unlock()
	if kept > maxContactBackoffs {
		t.Fatalf("%d fresh peer IDs that declined our hello and left: %d back-offs kept (each for 25 h), want at most %d", fresh+remotes, kept, maxContactBackoffs)
	}
}

// TestAudit80KeepFailingWarnLimited: the warning that a peer's sessions
// keep failing (its seventh in a row, about three minutes of a
// connection whose hellos it breaks) was written unlimited, one per peer
// ID: a script that keeps its connections (8 per address, 400 and more in
// all) and cycles fresh IDs wrote thousands an hour. It now goes through
// warnPeer (one per peer a minute, a burst of 20 then one a second in
// all).
func TestAudit80KeepFailingWarnLimited(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := &Node{log: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	n.contact.ctx = ctx
	n.contact.backoff = map[peer.ID]*contactBackoff{}
	n.contact.verified = map[peer.ID]time.Time{}
	const peers = 200
	fail := errors.New("stream reset")
	for i := range peers {
		p := peer.ID(fmt.Sprintf("fresh-peer-%d", i))
		for range contactTransientTries + 1 {
			n.recordContact(p, nil, fail, false)
		}
	}
	mu.Lock()
	lines := strings.Count(logs.String(), "keep failing")
	mu.Unlock()
	if lines > warnBurst+2 {
		t.Fatalf("%d fresh peers whose sessions failed %d times in a row: %d WARN lines at once, want at most the burst of %d", peers, contactTransientTries+1, lines, warnBurst)
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
