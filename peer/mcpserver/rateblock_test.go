package mcpserver_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/peer/mcpserver"
)

// TestHTTPRequestsRateLimitedByBlock: sessions and connections are
// shared by IPv6 /32 (twice a network's), but the request rate was not:
// the holder of one /32 (a /42 from a hoster is 64 /48s) spent every
// /48's bucket and so the whole rate beyond loopback, and every other
// network beyond loopback was answered 429. The /48s of one /32 now
// share a bucket of twice a network's.
func TestHTTPRequestsRateLimitedByBlock(t *testing.T) {
	h := newHTTPHandler(t, mcpserver.HTTPConfig{RequestRate: 1, RequestBurst: 10, RemoteRate: 50})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("X-Test-Remote"); a != "" {
			r.RemoteAddr = a
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.Close()
		h.Close()
	})
	post := func(from string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", "no-such-session")
		req.Header.Set("X-Test-Remote", from)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// 30 /48s of 2001:db8::/32, 10 requests each (their buckets' burst).
	served := 0
	for i := range 300 {
		if post(fmt.Sprintf("[2001:db8:%x::1]:4000", 1+i%30)) != http.StatusTooManyRequests {
			served++
		}
	}
	others := 0
	for i := range 5 {
		if post(fmt.Sprintf("198.51.%d.1:4000", 100+i)) != http.StatusTooManyRequests {
			others++
		}
	}
	t.Logf("one /32's 30 /48s: %d of 300 requests served (a network's burst 10, all networks' 100); then 5 other networks: %d served", served, others)
	if served > 2*10+2 {
		t.Errorf("one /32 had %d requests served in a burst, want about twice a network's (20)", served)
	}
	if others < 5 {
		t.Errorf("other networks got %d of 5 requests served after one /32's burst", others)
	}
}
