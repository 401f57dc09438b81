package mcpserver_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/peer/mcpserver"
)

// TestHTTPBatchCountsEachCall (audit 87): the request rate of callers
// beyond loopback counted HTTP requests, but the SDK takes a JSON-RPC
// batch (a JSON array of messages) from a client that sends no
// Mcp-Protocol-Version header, and runs each call of it on a goroutine of
// its own: one request of a network whose burst is 10 had 100 tool calls
// run (1 MiB holds some 15,000 of them; verify_attestation is a
// signature check each, list_peers a pass over the trust index). A
// batch now takes one token per message, and one larger than a
// network's burst is refused before any of it runs.
func TestHTTPBatchCountsEachCall(t *testing.T) {
	h := newHTTPHandler(t, mcpserver.HTTPConfig{RequestRate: 1, RequestBurst: 10})
	post := remoteSession(t, h, "192.0.2.7:4000")
	const n = 100
	calls := make([]string, n)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"list_peers","arguments":{"limit":1}}}`, 10+i)
	}
	code, body := post("[" + strings.Join(calls, ",") + "]")
	ran := strings.Count(body, `"result"`)
	t.Logf("a batch of %d tool calls from a network whose burst is 10: %d, %d calls ran", n, code, ran)
	if ran > 10 {
		t.Fatalf("one request of a batch of %d ran %d tool calls (burst 10): the rate counts requests, not calls", n, ran)
	}
	if code != http.StatusTooManyRequests && code != http.StatusBadRequest {
		t.Errorf("a batch over the burst: %d, want 429 or 400", code)
	}
	// A batch within the bucket still runs, each call taking a token.
	small := "[" + strings.Join(calls[:3], ",") + "]"
	if code, body := post(small); code != http.StatusOK || strings.Count(body, `"result"`) != 3 {
		t.Errorf("a batch of 3: %d %.300s, want its 3 results", code, body)
	}
}

// TestHTTPBatchWithTrailingDataCounted: the batch count read the body
// with json.Unmarshal, which refuses data after the array, while the SDK
// reads a batch with a decoder that stops at the array's end; a batch
// followed by any byte (here "x") was counted as one request and then
// run whole, so the per-message charge and the burst cap were both
// skipped.
func TestHTTPBatchWithTrailingDataCounted(t *testing.T) {
	h := newHTTPHandler(t, mcpserver.HTTPConfig{RequestRate: 1, RequestBurst: 10})
	post := remoteSession(t, h, "192.0.2.8:4000")
	const n = 40
	calls := make([]string, n)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"list_peers","arguments":{"limit":1}}}`, 10+i)
	}
	for _, tail := range []string{"x", " []", "\n{}"} {
		code, body := post("[" + strings.Join(calls, ",") + "]" + tail)
		if ran := strings.Count(body, `"result"`); ran > 10 {
			t.Fatalf("a batch of %d calls with %q after it ran %d calls (burst 10): %d", n, tail, ran, code)
		}
		if code != http.StatusTooManyRequests && code != http.StatusBadRequest {
			t.Errorf("a batch over the burst with %q after it: %d, want 429 or 400", tail, code)
		}
	}
}

// remoteSession initializes an MCP session on h from the address from
// (beyond loopback, through remoteServer) and returns a poster of request
// bodies in it: the status and the body of each answer.
func remoteSession(t *testing.T, h *mcpserver.HTTPHandler, from string) func(body string) (int, string) {
	t.Helper()
	ts := remoteServer(t, h)
	code, sid := initializeFrom(t, ts.URL, from)
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q", code, sid)
	}
	post := func(body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("X-Test-Remote", from)
		cl := &http.Client{Timeout: 10 * time.Second}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		return resp.StatusCode, string(b)
	}
	if code, body := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", code, body)
	}
	return post
}
