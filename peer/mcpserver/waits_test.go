package mcpserver_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/peer/mcpserver"
)

// TestHTTPAbandonedWaitsBounded: a long-poll (attest_status or
// next_challenge with wait_ms, up to 60 s) runs on after its HTTP client
// went away: the SDK does not cancel a call whose request was dropped.
// A caller that posted waits and hung up at once held a goroutine per
// call for a minute, bounded only by its network's request rate (10 a
// second, bursts of 50: some 650 per network, 12,000 from all networks);
// neither the connection cap (the connection is gone) nor the session
// cap bounded them. One MCP session now has at most
// Config.MaxWaitsPerSession (4) long-polls waiting; a call beyond
// answers at once, as with wait_ms 0.
func TestHTTPAbandonedWaitsBounded(t *testing.T) {
	_, sets, _ := splitSets(t)
	release := make(chan struct{})
	srv, err := mcpserver.New(mcpserver.Config{Node: startNode(t, sets, nil), Version: "test", Logger: testLogger(t), RemotePrivateDials: true, Ready: func(ctx context.Context) error {
		select {
		case <-release:
			return errors.New("released")
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	h := mustHTTPHandler(t, srv, mcpserver.HTTPConfig{Logger: testLogger(t)})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("X-Test-Remote"); a != "" {
			r.RemoteAddr = a
		}
		h.ServeHTTP(w, r)
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const remote = "192.0.2.10:4000"
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: ts.URL, HTTPClient: &http.Client{Transport: headerTransport{remote}}, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(release) // the job ends, and the waits with it
		cs.Close()
		ts.Close()
		h.Close()
	})
	_, id := testutil.NewKey(t)
	out, err := call[mcpserver.AttestOutput](ctx, cs, "attest_peer", map[string]any{"addr": "/ip4/127.0.0.1/tcp/9/p2p/" + id.String(), "background": true, "timeout_seconds": 25})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	base := runtime.NumGoroutine()
	const abandoned = 40
	for i := range abandoned {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"attest_status","arguments":{"job_id":%q,"wait_ms":60000}}}`, 1000+i, out.JobID)
		rctx, rcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		req, _ := http.NewRequestWithContext(rctx, http.MethodPost, ts.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		req.Header.Set("X-Test-Remote", remote)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = resp.Body.Read(make([]byte, 64))
			_ = resp.Body.Close()
		}
		rcancel()
	}
	time.Sleep(500 * time.Millisecond)
	held := runtime.NumGoroutine() - base
	t.Logf("%d attest_status waits posted and abandoned by one session: %d goroutines held after (cap %d waits per session)", abandoned, held, mcpserver.DefaultMaxWaitsPerSession)
	if held > 3*mcpserver.DefaultMaxWaitsPerSession {
		t.Fatalf("%d goroutines held by %d abandoned waits of one session", held, abandoned)
	}
	// A wait beyond the cap answers at once.
	start := time.Now()
	st, err := call[mcpserver.AttestOutput](ctx, cs, "attest_status", map[string]any{"job_id": out.JobID, "wait_ms": 20000})
	if err != nil || st.Status != "running" {
		t.Fatalf("attest_status over the cap: %+v, %v", st, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("attest_status over the cap waited %v", d)
	}
}
