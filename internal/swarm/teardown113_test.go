package swarm

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A run that ends with sessions in flight (here at its time limit, the
// provers taking some 25 s a round) closed its nodes a few at a time,
// and every node still open warned about each session a closed one broke
// off: bench swarm --timeout ended in a screenful of WARN lines about
// nothing but its own teardown. Those lines go to DEBUG
// (level_at_teardown); none is a warning.
func TestTeardownNotWarned(t *testing.T) {
	if testing.Short() {
		t.Skip("swarm run")
	}
	var logs syncBuffer
	cfg := Config{N: 10, Latency: LatencyRealistic, LatencyScale: 10, Timeout: 1500 * time.Millisecond,
		Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.TimedOut {
		t.Fatalf("the run did not end at its time limit: %+v", rep)
	}
	var warns []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			warns = append(warns, l)
		}
	}
	if len(warns) > 0 {
		t.Fatalf("%d warnings, the first: %s", len(warns), warns[0])
	}
	if !strings.Contains(logs.String(), "level_at_teardown=WARN") {
		t.Fatal("no teardown warning was demoted: the run ended with no session in flight, so this test showed nothing")
	}
}
