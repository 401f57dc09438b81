package mcpserver_test

import (
	"context"
	"errors"
	"log/slog"
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
