package peer_test

import (
	"context"
	"crypto/rand"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-msgio/pbio"

	"github.com/acaptcha/acaptcha/internal/lograte"
	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/internal/testutil/testnode"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/protocol/pb"
)

// lineCounter is a slog handler that counts the records of each level
// and message (safe for the node's goroutines).
type lineCounter struct {
	mu    sync.Mutex
	n     map[slog.Level]map[string]int
	level slog.Level
}

func newLineCounter(level slog.Level) *lineCounter {
	return &lineCounter{n: map[slog.Level]map[string]int{}, level: level}
}

func (c *lineCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= c.level }
func (c *lineCounter) WithAttrs([]slog.Attr) slog.Handler           { return c }
func (c *lineCounter) WithGroup(string) slog.Handler                { return c }

func (c *lineCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.n[r.Level]
	if m == nil {
		m = map[string]int{}
		c.n[r.Level] = m
	}
	m[r.Message]++
	return nil
}

// count is how many records of msg were written at level.
func (c *lineCounter) count(level slog.Level, msg string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[level][msg]
}

// verdictAfterAck plays a verifier that gives up at once: a hello, the
// prover's ack read, then an inconclusive verdict without a record (it
// signs nothing), and waits for the prover to end the stream.
func verdictAfterAck(ctx context.Context, h host.Host, to lpeer.ID) error {
	s, err := h.NewStream(ctx, to, protocol.ID)
	if err != nil {
		return err
	}
	defer func() { _ = s.Reset() }()
	_ = s.SetDeadline(time.Now().Add(5 * time.Second))
	nonce := make([]byte, protocol.NonceBytes)
	_, _ = rand.Read(nonce)
	w := pbio.NewDelimitedWriter(s)
	r := pbio.NewDelimitedReader(s, protocol.MaxProverFrame+16)
	if err := w.WriteMsg(&pb.Frame{Body: &pb.Frame_Hello{Hello: &pb.Hello{
		SpecVersion: protocol.SpecVersion, VerifierId: []byte(h.ID()), ProverId: []byte(to),
		Nonce: nonce, Rounds: 3, TotalMs: 60_000,
	}}}); err != nil {
		return err
	}
	var f pb.Frame
	if err := r.ReadMsg(&f); err != nil {
		return err
	}
	if f.GetHelloAck() == nil {
		return errNotAcked
	}
	if err := w.WriteMsg(&pb.Frame{Body: &pb.Frame_Verdict{Verdict: &pb.Verdict{Reason: "inconclusive"}}}); err != nil {
		return err
	}
	_ = s.CloseWrite()
	_ = r.ReadMsg(&f) // the prover ends the stream
	return nil
}

type ackError string

func (e ackError) Error() string { return string(e) }

const errNotAcked = ackError("the prover did not ack the hello")

// A verifier that acks nothing and signs nothing (a hello, then an
// inconclusive verdict without a record, session after session and under
// fresh peer IDs) made the node write an INFO line "peer verified us
// without a valid attestation" per session: some 2,000 an hour by the
// prover's session budgets, each costing the verifier a hello. The line
// now passes the limits of remote-triggered lines (once a minute per
// peer, a burst in total), the rest at DEBUG.
func TestVerdictWithoutRecordLinesLimited_h129(t *testing.T) {
	sets := dependentSets(t)
	logs := newLineCounter(slog.LevelDebug)
	n := testnode.New(t, testnode.Options{
		Config: peer.Config{Logger: slog.New(logs)},
		Sets:   sets, Brain: testutil.NewOracle(sets...), Memory: true,
	})
	const msg = "peer verified us without a valid attestation"
	ctx := ctxT(t, 60*time.Second)
	// One verifier, session after session.
	h, _ := rawHost(t)
	if err := h.Connect(ctx, addrInfo(n)); err != nil {
		t.Fatal(err)
	}
	const sessions = 12
	for i := range sessions {
		if err := verdictAfterAck(ctx, h, n.ID()); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
	}
	// Fresh peer IDs, one session each.
	const fresh = 60
	start := time.Now()
	for i := range fresh {
		f, _ := rawHost(t)
		if err := f.Connect(ctx, addrInfo(n)); err != nil {
			t.Fatal(err)
		}
		if err := verdictAfterAck(ctx, f, n.ID()); err != nil {
			t.Fatalf("fresh verifier %d: %v", i, err)
		}
		_ = f.Close()
	}
	total := sessions + fresh
	seen := func() int { return logs.count(slog.LevelInfo, msg) + logs.count(slog.LevelDebug, msg) }
	eventually(t, 10*time.Second, "every session's result noted", func() bool { return seen() >= total })
	info := logs.count(slog.LevelInfo, msg)
	t.Logf("%d sessions ended by a verdict without a record: %d INFO lines, %d at DEBUG", total, info, logs.count(slog.LevelDebug, msg))
	// One line for the first verifier, and for the fresh ones the total
	// budget: a burst, then one a refill.
	allowed := 1 + lograte.Burst + int(time.Since(start)/lograte.Refill) + 1
	if info > allowed {
		t.Fatalf("%d INFO lines for %d sessions of %d verifiers that signed nothing, want at most %d (one a peer a minute, a burst of %d in all, then one a second)",
			info, total, 1+fresh, allowed, lograte.Burst)
	}
}
