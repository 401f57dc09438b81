package liblog

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/identify"
	"github.com/libp2p/go-libp2p/p2p/protocol/identify/pb"
	"github.com/libp2p/go-msgio/pbio"
)

// countingHandler counts the records it is given, per level and message.
type countingHandler struct {
	mu    sync.Mutex
	level slog.Level
	n     map[slog.Level]map[string]int
	attrs []map[string]slog.Value
}

func (c *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= c.level }

func (c *countingHandler) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[slog.Level]map[string]int{}
	}
	if c.n[r.Level] == nil {
		c.n[r.Level] = map[string]int{}
	}
	c.n[r.Level][r.Message]++
	m := map[string]slog.Value{"msg": slog.StringValue(r.Message)}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value; return true })
	c.attrs = append(c.attrs, m)
	return nil
}

func (c *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *countingHandler) WithGroup(string) slog.Handler      { return c }

func (c *countingHandler) count(l slog.Level, msg string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[l][msg]
}

const msgKeyMismatch = "received key for remote peer mismatch"

func newLoopbackHost(t *testing.T) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// pushForeignKey opens an identify push stream from a to b carrying the
// public key of another identity, which b's identify logs as an ERROR.
func pushForeignKey(ctx context.Context, t *testing.T, a host.Host, b peer.ID, key []byte) {
	t.Helper()
	s, err := a.NewStream(ctx, b, identify.IDPush)
	if err != nil {
		t.Fatal(err)
	}
	if err := pbio.NewDelimitedWriter(s).WriteMsg(&pb.Identify{PublicKey: key}); err != nil {
		t.Fatal(err)
	}
	_ = s.CloseWrite()
	// Wait for b to read the message and close its side.
	_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _ = s.Read(make([]byte, 1))
	_ = s.Close()
}

func foreignKey(t *testing.T) []byte {
	t.Helper()
	_, pub, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := crypto.MarshalPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A hostile peer sending identify pushes with another identity's key
// made go-libp2p log an ERROR per push (from loopback, identify does not
// rate-limit pushes; elsewhere 10 per /24, then one per 5 s) and another
// per connection. Routed, one peer gets one line per minute, the next
// carrying how many were held back, and fresh identities at most the
// burst in total; what is held back goes to DEBUG and is counted.
func TestHostileIdentifyLogsBounded(t *testing.T) {
	t.Setenv("GOLOG_LOG_LEVEL", "")
	frozen := time.Now()
	now = func() time.Time { return frozen }
	lim = limiter{}
	t.Cleanup(func() { now = time.Now; lim = limiter{} })
	ch := &countingHandler{level: slog.LevelDebug}
	Install(ch)
	t.Cleanup(func() { Install(slog.NewTextHandler(discard{}, nil)) })

	node := newLoopbackHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := foreignKey(t)

	// One peer, 50 bad pushes.
	const pushes = 50
	atk := newLoopbackHost(t)
	if err := atk.Connect(ctx, peer.AddrInfo{ID: node.ID(), Addrs: node.Addrs()}); err != nil {
		t.Fatal(err)
	}
	before := Suppressed()
	for range pushes {
		pushForeignKey(ctx, t, atk, node.ID(), key)
	}
	waitFor(t, func() bool {
		return ch.count(slog.LevelError, msgKeyMismatch)+ch.count(slog.LevelDebug, msgKeyMismatch) >= pushes
	})
	if got := ch.count(slog.LevelError, msgKeyMismatch); got != 1 {
		t.Fatalf("one peer's %d bad identify pushes wrote %d ERROR lines, want 1", pushes, got)
	}
	if got := Suppressed() - before; got != pushes-1 {
		t.Errorf("Suppressed counted %d, want %d", got, pushes-1)
	}

	// Fresh identities, one bad push each: the burst in total.
	const sybils = limitBurst + 10
	for range sybils {
		h := newLoopbackHost(t)
		if err := h.Connect(ctx, peer.AddrInfo{ID: node.ID(), Addrs: node.Addrs()}); err != nil {
			t.Fatal(err)
		}
		pushForeignKey(ctx, t, h, node.ID(), key)
		_ = h.Close()
	}
	waitFor(t, func() bool {
		return ch.count(slog.LevelError, msgKeyMismatch)+ch.count(slog.LevelDebug, msgKeyMismatch) >= pushes+sybils
	})
	if got := ch.count(slog.LevelError, msgKeyMismatch); got != limitBurst {
		t.Fatalf("%d identities' bad pushes (and one peer's %d) wrote %d ERROR lines with the clock still, want the burst %d", sybils, pushes, got, limitBurst)
	}

	// A minute on, the peer's next line says how many were held back.
	frozen = frozen.Add(sameEvery)
	pushForeignKey(ctx, t, atk, node.ID(), key)
	waitFor(t, func() bool { return ch.count(slog.LevelError, msgKeyMismatch) == limitBurst+1 })
	ch.mu.Lock()
	last := ch.attrs[len(ch.attrs)-1]
	ch.mu.Unlock()
	if last["msg"].String() != msgKeyMismatch || last["suppressed"].Int64() != pushes-1 || last["suppressed_other"].Int64() != sybils-(limitBurst-1) {
		t.Errorf("line after the minute: %v; want suppressed %d, suppressed_other %d", last, pushes-1, sybils-(limitBurst-1))
	}
}

func waitFor(t *testing.T, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
