package mcpserver_test

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	lpeer "github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/peer/mcpserver"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// holder runs answerers whose challenges stay pending until the test
// ends (a verifier that sends a tiny challenge with a long budget).
type holder struct {
	t      *testing.T
	q      *mcpserver.Queue
	ctx    context.Context
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

func newHolder(t *testing.T, q *mcpserver.Queue) *holder {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	h := &holder{t: t, q: q, ctx: ctx, cancel: cancel}
	t.Cleanup(func() { cancel(); h.wg.Wait() })
	return h
}

var longChallenge = skill.Challenge{Round: 1, Rounds: 3, Narrative: "n", Question: "q", Budget: 5 * time.Minute}

// hold sends a challenge on a and reports whether it was queued (true) or
// declined at once (false, with the error).
func (h *holder) hold(a skill.Answerer) (bool, error) {
	h.t.Helper()
	before := h.q.Len()
	errc := make(chan error, 1)
	h.wg.Go(func() {
		_, err := a.Answer(h.ctx, longChallenge)
		errc <- err
	})
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-errc:
			return false, err
		default:
		}
		if h.q.Len() > before {
			return true, nil
		}
		time.Sleep(time.Millisecond)
	}
	h.t.Fatal("the challenge was neither queued nor declined")
	return false, nil
}

func prefixOf(t *testing.T, addr string) netip.Prefix {
	t.Helper()
	pfx, ok := protocol.DrawPrefix(netip.MustParseAddr(addr), false)
	if !ok {
		t.Fatalf("no prefix for %s", addr)
	}
	return pfx
}

func newVerifier(t *testing.T) lpeer.ID {
	_, id := testutil.NewKey(t)
	return id
}

// TestQueueShares: fresh peer IDs of one network cannot hold the whole
// queue (finding A: two IDs with two sessions each held all 4 slots for up
// to T_total, and every other verifier's challenge was declined, which
// makes it sign a declined rejection of this node). One challenge per
// verifier, half the queue per IP prefix: a verifier of another network
// is still served.
func TestQueueShares(t *testing.T) {
	q := mcpserver.NewQueue(mcpserver.QueueConfig{Logger: testLogger(t)})
	defer q.Close()
	h := newHolder(t, q)
	attack := prefixOf(t, "2001:db8:aa:1::7") // an IPv6 /48

	// One verifier, its two inbound sessions: the second is declined.
	v1 := newVerifier(t)
	if ok, err := h.hold(q.NewSessionFor(v1, attack)); !ok {
		t.Fatalf("first challenge of a verifier declined: %v", err)
	}
	ok, err := h.hold(q.NewSessionFor(v1, attack))
	if ok || !errors.Is(err, skill.ErrDeclined) || !errors.Is(err, mcpserver.ErrVerifierShare) {
		t.Fatalf("second session of the same verifier: queued=%v %v, want declined ErrVerifierShare", ok, err)
	}
	// Fresh IDs from other addresses of the same /48: half the queue.
	if ok, err := h.hold(q.NewSessionFor(newVerifier(t), prefixOf(t, "2001:db8:aa:ffff::1"))); !ok {
		t.Fatalf("second verifier of the prefix declined: %v", err)
	}
	for range 4 {
		ok, err := h.hold(q.NewSessionFor(newVerifier(t), prefixOf(t, "2001:db8:aa:2::9")))
		if ok || !errors.Is(err, skill.ErrDeclined) || !errors.Is(err, mcpserver.ErrPrefixShare) {
			t.Fatalf("third verifier of the prefix: queued=%v %v, want declined ErrPrefixShare", ok, err)
		}
	}
	// Verifiers elsewhere still get through.
	for _, addr := range []string{"198.51.100.7", "203.0.113.9"} {
		if ok, err := h.hold(q.NewSessionFor(newVerifier(t), prefixOf(t, addr))); !ok {
			t.Fatalf("verifier of %s declined while one network held its share: %v", addr, err)
		}
	}
	if st := q.Stats(); st.Pending != 4 || st.DeclinedVerifier != 1 || st.DeclinedPrefix != 4 || st.DeclinedFull != 0 {
		t.Fatalf("stats %+v", st)
	}
	// An answered challenge gives its verifier's and prefix's share back.
	p, err := q.Next(context.Background(), 0)
	if err != nil || p == nil {
		t.Fatalf("Next: %+v %v", p, err)
	}
	if _, err := q.Answer(p.ID, "x", false); err != nil {
		t.Fatal(err)
	}
	if ok, err := h.hold(q.NewSessionFor(v1, attack)); !ok {
		t.Fatalf("verifier after its challenge was answered: %v", err)
	}
}

// A session opened without its verifier (NewSession) is under the
// per-session and total caps only; one with the zero prefix (loopback,
// exempt) under the per-verifier cap but no prefix's.
func TestQueueSharesUnknownOrigin(t *testing.T) {
	q := mcpserver.NewQueue(mcpserver.QueueConfig{Logger: testLogger(t)})
	defer q.Close()
	h := newHolder(t, q)
	for range 2 {
		if ok, err := h.hold(q.NewSession()); !ok {
			t.Fatalf("anonymous session declined: %v", err)
		}
	}
	for range 2 {
		if ok, err := h.hold(q.NewSessionFor(newVerifier(t), netip.Prefix{})); !ok {
			t.Fatalf("verifier without a prefix declined: %v", err)
		}
	}
	if ok, err := h.hold(q.NewSession()); ok || !errors.Is(err, mcpserver.ErrQueueFull) {
		t.Fatalf("fifth challenge: queued=%v %v, want ErrQueueFull", ok, err)
	}
}

// warnCounter counts the records at WARN or above.
type warnCounter struct {
	mu sync.Mutex
	n  int
}

func (w *warnCounter) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		w.mu.Lock()
		w.n++
		w.mu.Unlock()
	}
	return nil
}
func (w *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnCounter) WithGroup(string) slog.Handler      { return w }

// TestQueueFullNotWarnedPerRefusal: a verifier decides how often the queue
// is full, so a refusal is not a WARN line each (at most one a minute,
// with the count); every refusal is counted.
func TestQueueFullNotWarnedPerRefusal(t *testing.T) {
	warns := &warnCounter{}
	q := mcpserver.NewQueue(mcpserver.QueueConfig{MaxPending: 1, Logger: slog.New(warns)})
	defer q.Close()
	h := newHolder(t, q)
	if ok, err := h.hold(q.NewSession()); !ok {
		t.Fatal(err)
	}
	const refusals = 20
	for range refusals {
		if ok, err := h.hold(q.NewSession()); ok || !errors.Is(err, mcpserver.ErrQueueFull) {
			t.Fatalf("queued=%v %v, want ErrQueueFull", ok, err)
		}
	}
	warns.mu.Lock()
	n := warns.n
	warns.mu.Unlock()
	if n > 1 {
		t.Errorf("%d WARN lines for %d refusals within a minute, want at most 1", n, refusals)
	}
	if st := q.Stats(); st.DeclinedFull != refusals {
		t.Errorf("stats %+v, want %d declined_full", st, refusals)
	}
}

// TestQueueSharesPerBlock: the /48s of one IPv6 /32 share a cap as well.
// The queue grouped IPv6 by /48 only, so fresh peer IDs from two /48s of
// one allocation (65,536 of them cost its holder nothing) held all 4
// slots, and a verifier of any other network was declined (queue full).
// A block gets at most twice a prefix's share, and never the whole queue.
func TestQueueSharesPerBlock(t *testing.T) {
	q := mcpserver.NewQueue(mcpserver.QueueConfig{Logger: testLogger(t)})
	defer q.Close()
	h := newHolder(t, q)
	queued := 0
	for _, addr := range []string{"2001:db8:1::1", "2001:db8:1::2", "2001:db8:2::1", "2001:db8:3::1", "2001:db8:4::1"} {
		ok, err := h.hold(q.NewSessionFor(newVerifier(t), prefixOf(t, addr)))
		if ok {
			queued++
			continue
		}
		if !errors.Is(err, skill.ErrDeclined) || !errors.Is(err, mcpserver.ErrBlockShare) {
			t.Fatalf("verifier of %s: %v, want declined ErrBlockShare", addr, err)
		}
	}
	if queued != 3 {
		t.Fatalf("one IPv6 /32 holds %d of 4 slots, want 3", queued)
	}
	// NAT64 (64:ff9b::/96) counts as the IPv4 address it carries:
	// 198.51.100.7's /24.
	if ok, err := h.hold(q.NewSessionFor(newVerifier(t), prefixOf(t, "64:ff9b::c633:6407"))); !ok {
		t.Fatalf("verifier of another network declined while one /32 held its share: %v", err)
	}
	if st := q.Stats(); st.Pending != 4 || st.DeclinedBlock != 2 || st.DeclinedFull != 0 {
		t.Fatalf("stats %+v", st)
	}
	// An answered challenge gives the block's share back.
	for range 4 {
		p, err := q.Next(context.Background(), 0)
		if err != nil || p == nil {
			t.Fatalf("Next: %+v %v", p, err)
		}
		if _, err := q.Answer(p.ID, "x", false); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := h.hold(q.NewSessionFor(newVerifier(t), prefixOf(t, "2001:db8:5::1"))); !ok {
		t.Fatalf("verifier of the block after its challenges were answered: %v", err)
	}
}
