package httpgw

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/acaptcha/acaptcha/internal/lograte"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/skill"
)

// infoCounter counts the records at INFO and above by message.
type infoCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *infoCounter) Enabled(_ context.Context, l slog.Level) bool { return true }
func (c *infoCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelInfo {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[r.Message]++
	return nil
}
func (c *infoCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *infoCounter) WithGroup(string) slog.Handler      { return c }

func (c *infoCounter) count(msg string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[msg]
}

// TestUnsignedVerdictLinesBounded: every session a node ends logs its
// verdict at INFO twice ("verification finished" in the core, "verified
// peer" in the node), the signed ones bounded by the draw budgets, but a
// session that ends inconclusive before a set was drawn (the source is
// exhausted or failing) has its draw refunded and signs nothing: over
// HTTP, where peer IDs are free, a client that paid the door's 16-bit
// proof of work per session had the node write two INFO lines each, at
// the creates' rate (10 a second per network, 200 in all): 40 sessions,
// 80 lines. Those lines now pass the node's limits for remote-triggered
// lines (once a minute per message; the rest at DEBUG); signed verdicts
// are logged each, as before.
func TestUnsignedVerdictLinesBounded(t *testing.T) {
	nk, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	lc := &infoCounter{n: map[string]int{}}
	n, err := peer.New(peer.Config{Key: nk, StorePath: filepath.Join(t.TempDir(), "db"), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		Policy: skill.DefaultPolicy(), Source: leakySource{}, Logger: slog.New(lc)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	g, err := ForNode(n.Door(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	defer func() { srv.Close(); g.Close() }()
	const sessions = 40
	start := time.Now()
	for range sessions {
		a := newAgent(t, srv.URL)
		v := a.create()
		var done Session
		if st, eb := a.post("/v1/sessions/"+v.SessionID+"/start", a.startReq(v), &done); st != http.StatusOK || done.State != StateDone {
			t.Fatalf("start: %d %+v %+v", st, eb, done)
		}
	}
	elapsed := time.Since(start)
	fin, ver := lc.count("verification finished"), lc.count("verified peer")
	t.Logf("%d sessions ended inconclusive before a draw in %v: %d \"verification finished\" and %d \"verified peer\" lines at INFO",
		sessions, elapsed.Round(time.Millisecond), fin, ver)
	if fin > 1 {
		t.Errorf("%d \"verification finished\" lines at INFO for %d unsigned sessions, want one (once a minute)", fin, sessions)
	}
	// The node's lines about peers: once a minute per peer (the peer IDs
	// are fresh), a burst of lograte.Burst in all, then one a second.
	if want := lograte.Burst + int(elapsed/lograte.Refill) + 1; ver > want {
		t.Errorf("%d \"verified peer\" lines at INFO for %d unsigned sessions in %v, want at most %d", ver, sessions, elapsed, want)
	}
}
