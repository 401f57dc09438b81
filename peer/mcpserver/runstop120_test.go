package mcpserver_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acaptcha/acaptcha/peer/mcpserver"
)

// levelRecorder keeps the messages logged at ERROR.
type levelRecorder struct {
	mu     sync.Mutex
	errors []string
}

func (r *levelRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *levelRecorder) Handle(_ context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelError {
		r.mu.Lock()
		r.errors = append(r.errors, rec.Message)
		r.mu.Unlock()
	}
	return nil
}
func (r *levelRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *levelRecorder) WithGroup(string) slog.Handler      { return r }

// TestRunStoppedLogsNoError: Run ends on its context (Ctrl-C or SIGTERM
// of `acaptcha mcp`, for which a signal is the normal end, exit 0)
// without an ERROR line; before, the SDK's Server.Run logged "server run
// cancelled" at ERROR on every such stop.
func TestRunStoppedLogsNoError(t *testing.T) {
	_, sets, _ := splitSets(t)
	rec := &levelRecorder{}
	srv, err := mcpserver.New(mcpserver.Config{Node: startNode(t, sets, nil), Version: "test", Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, st) }()
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).Connect(cctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(cctx, nil); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v, want context.Canceled", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15 s of its context's end")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.errors) > 0 {
		t.Errorf("a stop logged at ERROR: %q", rec.errors)
	}
}

// stopFixture is a server whose attest_peer calls wait in Ready until
// their context ends, announcing each on entered.
func stopFixture(t *testing.T) (srv *mcpserver.Server, entered chan struct{}, target string) {
	t.Helper()
	a, b, _ := splitSets(t)
	tn := startNode(t, a, nil)
	entered = make(chan struct{}, 4)
	q := mcpserver.NewQueue(mcpserver.QueueConfig{Logger: testLogger(t)})
	t.Cleanup(q.Close)
	srv, err := mcpserver.New(mcpserver.Config{Node: startNode(t, b, q), Queue: q, Version: "test", Logger: testLogger(t),
		Ready: func(ctx context.Context) error {
			entered <- struct{}{}
			<-ctx.Done()
			return context.Cause(ctx)
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv, entered, tn.Addrs()[0].String()
}

// TestStopEndsCallsInFlight: stopping `acaptcha mcp` (Ctrl-C, SIGTERM)
// ends the tool calls in flight, a long-poll or an attest_peer waiting
// on a peer, and the command exits at once; before, the SDK waited for
// every call of the session to return, so a stop took as long as the
// longest call had left: up to a minute for next_challenge, up to
// attest_peer's timeout (30 min at most) for an attestation. Over stdio
// the end of Run's context stops them; over HTTP, Close.
func TestStopEndsCallsInFlight(t *testing.T) {
	for _, via := range []string{"run", "close"} {
		t.Run(via, func(t *testing.T) {
			srv, entered, target := stopFixture(t)
			st, ct := mcp.NewInMemoryTransports()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- srv.Run(ctx, st) }()
			cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer ccancel()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).Connect(cctx, ct, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			calls := make(chan error, 2)
			go func() {
				_, err := call[mcpserver.AttestOutput](cctx, cs, "attest_peer", map[string]any{"addr": target, "timeout_seconds": 1800})
				calls <- err
			}()
			go func() {
				_, err := call[mcpserver.NextOutput](cctx, cs, "next_challenge", map[string]any{"wait_ms": 60000})
				calls <- err
			}()
			select {
			case <-entered:
			case <-cctx.Done():
				t.Fatal("attest_peer never reached Ready")
			}
			start := time.Now()
			if via == "run" {
				cancel()
			} else {
				srv.Close()
			}
			const bound = 10 * time.Second
			if via == "run" {
				select {
				case <-done:
				case <-time.After(bound):
					t.Fatalf("Run did not return within %v of its context's end", bound)
				}
			}
			for range 2 {
				select {
				case err := <-calls:
					if via == "close" && (err == nil || !strings.Contains(err.Error(), "stopping")) {
						t.Errorf("a call in flight at Close answered %v, want an error saying the server is stopping", err)
					}
				case <-time.After(bound - time.Since(start)):
					t.Fatalf("a call in flight did not end within %v of the stop", bound)
				}
			}
		})
	}
}
