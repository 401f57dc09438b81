package mcpserver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/lograte"
	"github.com/acaptcha/acaptcha/peer/mcpserver"
)

// lineCounter is a slog handler that counts the records written at
// INFO and above, their longest message, and the records held back to
// DEBUG.
type lineCounter struct {
	mu            sync.Mutex
	lines, held   int
	longest       int
	messageBytes  int
	firstMessages []string
}

func (c *lineCounter) Enabled(context.Context, slog.Level) bool { return true }

func (c *lineCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Level < slog.LevelInfo {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "level_held_back" {
				c.held++
			}
			return true
		})
		return nil
	}
	c.lines++
	c.messageBytes += len(r.Message)
	c.longest = max(c.longest, len(r.Message))
	if len(c.firstMessages) < 3 {
		c.firstMessages = append(c.firstMessages, r.Message[:min(len(r.Message), 80)])
	}
	return nil
}

func (c *lineCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *lineCounter) WithGroup(string) slog.Handler      { return c }

// TestHTTPSDKLinesBounded: the MCP SDK logs through the logger it is
// given, and a caller makes it log at will: an INFO line for each session
// it opens and closes, and a WARN for each request naming a protocol
// version from 2026-07-28 on (which its stateful server refuses), that
// header's value quoted in the message. 40 such requests of one network
// beyond loopback, within its request rate, wrote 160 lines and 330 KB
// (an 8 KB header each; the server takes 64 KiB). The SDK's lines now
// pass the libraries' bounds (internal/liblog: a burst of 20, then one a
// second; once a minute per message), their text cut to liblog.MaxText.
func TestHTTPSDKLinesBounded(t *testing.T) {
	_, sets, _ := splitSets(t)
	lc := &lineCounter{}
	lg := slog.New(lc)
	srv, err := mcpserver.New(mcpserver.Config{Node: startNode(t, sets, nil), Version: "test", Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	ts := remoteServer(t, mustHTTPHandler(t, srv, mcpserver.HTTPConfig{Logger: lg}))
	pad := strings.Repeat("x", 8<<10)
	const requests = 40
	start := time.Now()
	for i := range requests {
		req, err := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", fmt.Sprintf("2026-07-28.%d.%s", i, pad))
		req.Header.Set("X-Test-Remote", "198.51.100.7:4000")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			t.Fatalf("request %d refused by the rate: the test means to stay within it", i)
		}
	}
	elapsed := time.Since(start)
	lc.mu.Lock()
	defer lc.mu.Unlock()
	t.Logf("%d requests in %v: %d lines at INFO or above (%d message bytes, longest %d), %d held back to DEBUG; first %q",
		requests, elapsed.Round(time.Millisecond), lc.lines, lc.messageBytes, lc.longest, lc.held, lc.firstMessages)
	if want := lograte.Burst + int(elapsed/lograte.Refill) + 1; lc.lines > want {
		t.Errorf("%d lines at INFO or above for %d requests, want at most %d (a burst of %d, then one a second)", lc.lines, requests, want, lograte.Burst)
	}
	if lc.longest > 1024 {
		t.Errorf("a line's message has %d bytes: a caller's header went into the log whole", lc.longest)
	}
	if lc.held == 0 {
		t.Errorf("no line held back to DEBUG")
	}
}
