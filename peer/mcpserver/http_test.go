package mcpserver_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/peer/mcpserver"
)

// initialize opens an MCP session with a bare initialize request and
// returns the HTTP status and the session ID.
func initialize(t *testing.T, url string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Logf("initialize: %d %s", resp.StatusCode, b)
	}
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}

// TestHTTPSessionsBounded: the streamable HTTP transport kept every
// session it opened until its client deleted it, so a caller that
// initialized and went away grew the server without bound (3000
// initialize requests in 3.9 s: 3000 sessions, +3000 goroutines, +32 MB,
// none ever freed). Sessions are capped, and an idle one is closed.
func TestHTTPSessionsBounded(t *testing.T) {
	_, sets, _ := splitSets(t)
	srv, err := mcpserver.New(mcpserver.Config{Node: startNode(t, sets, nil), Version: "test", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	h := mcpserver.NewHTTPHandler(srv, mcpserver.HTTPConfig{MaxSessions: 3, SessionTimeout: 300 * time.Millisecond, Logger: testLogger(t)})
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ts.Close()
		h.Close()
	})
	var ids []string
	for range 3 {
		st, id := initialize(t, ts.URL)
		if st != http.StatusOK || id == "" {
			t.Fatalf("initialize: %d %q", st, id)
		}
		ids = append(ids, id)
	}
	for range 5 {
		if st, id := initialize(t, ts.URL); st != http.StatusServiceUnavailable || id != "" {
			t.Fatalf("initialize beyond the cap: %d %q, want 503", st, id)
		}
	}
	// A deleted session gives its slot back.
	req, _ := http.NewRequest(http.MethodDelete, ts.URL, nil)
	req.Header.Set("Mcp-Session-Id", ids[0])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if st, _ := initialize(t, ts.URL); st != http.StatusOK {
		t.Fatalf("initialize after a delete: %d", st)
	}
	// Abandoned sessions are closed when idle, and their slots come back.
	deadline := time.Now().Add(10 * time.Second)
	for h.Sessions() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle sessions still open after 10 s (timeout 300 ms)", h.Sessions())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 3 {
		if st, _ := initialize(t, ts.URL); st != http.StatusOK {
			t.Fatalf("initialize after the idle sessions closed: %d", st)
		}
	}
}
