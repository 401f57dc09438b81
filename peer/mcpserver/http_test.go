package mcpserver_test

import (
	"fmt"
	"io"
	"math"
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
	h := mustHTTPHandler(t, srv, mcpserver.HTTPConfig{MaxSessions: 3, SessionTimeout: 300 * time.Millisecond, Logger: testLogger(t)})
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

// TestHTTPSessionsSharedByNetworks: with --http bound beyond loopback,
// one caller filled the whole session cap (64) and held it for the idle
// timeout (an hour), and every other MCP client, the node's own agent on
// loopback included, got 503. A network (IPv4 /24, IPv6 /48; the /48s
// of an IPv6 /32 together twice that; NAT64 as the IPv4 it carries) holds
// at most an eighth of the cap, callers beyond loopback together at most
// three quarters of it, and loopback callers the rest.
func TestHTTPSessionsSharedByNetworks(t *testing.T) {
	_, sets, _ := splitSets(t)
	srv, err := mcpserver.New(mcpserver.Config{Node: startNode(t, sets, nil), Version: "test", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	const capN = 16 // 2 per network, 4 per /32, 12 beyond loopback
	h := mustHTTPHandler(t, srv, mcpserver.HTTPConfig{MaxSessions: capN, Logger: testLogger(t)})
	ts := remoteServer(t, h)
	from := func(addr string) int {
		t.Helper()
		st, _ := initializeFrom(t, ts.URL, addr)
		return st
	}
	opened := 0
	for i := range 20 {
		if from(fmt.Sprintf("192.0.2.%d:4000", 10+i)) == http.StatusOK {
			opened++
		}
	}
	t.Logf("one /24: %d of %d initializes opened a session (cap %d)", opened, 20, capN)
	if opened != 2 {
		t.Errorf("one /24 opened %d sessions, want 2 (an eighth of %d)", opened, capN)
	}
	// NAT64 addresses count as the IPv4 address they carry.
	if st := from("[64:ff9b::c000:263]:4000"); st != http.StatusServiceUnavailable {
		t.Errorf("NAT64 address of the same /24: %d, want 503", st)
	}
	// The /48s of one IPv6 /32 share twice a network's share.
	opened = 0
	for i := range 6 {
		if from(fmt.Sprintf("[2001:db8:%x::1]:4000", i)) == http.StatusOK {
			opened++
		}
	}
	if opened != 4 {
		t.Errorf("the /48s of one /32 opened %d sessions, want 4", opened)
	}
	// Callers beyond loopback hold three quarters at most.
	opened = 0
	for i := range 10 {
		if from(fmt.Sprintf("198.51.%d.1:4000", i)) == http.StatusOK {
			opened++
		}
	}
	if opened != 6 {
		t.Errorf("other networks opened %d sessions, want 6 (12 beyond loopback, 6 held)", opened)
	}
	// Loopback keeps the last quarter.
	for range capN / 4 {
		if st := from(""); st != http.StatusOK {
			t.Fatalf("loopback initialize with the networks' share taken: %d", st)
		}
	}
	if st := from(""); st != http.StatusServiceUnavailable {
		t.Errorf("initialize beyond the cap: %d, want 503", st)
	}
}

// initializeFrom is initialize with the caller's address in X-Test-Remote
// (none: the loopback address of the test client).
func initializeFrom(t *testing.T, url, addr string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if addr != "" {
		req.Header.Set("X-Test-Remote", addr)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}

// remoteServer serves h on a loopback test server where a request's
// X-Test-Remote header stands for the caller's address; the server and h
// close with the test.
func remoteServer(t *testing.T, h *mcpserver.HTTPHandler) *httptest.Server {
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
	return ts
}

// mustHTTPHandler is NewHTTPHandler's handler, the test failing on its
// error.
func mustHTTPHandler(t *testing.T, srv *mcpserver.Server, cfg mcpserver.HTTPConfig) *mcpserver.HTTPHandler {
	t.Helper()
	h, err := mcpserver.NewHTTPHandler(srv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestNewHTTPHandlerRefusesAbsurdRates: a NaN rate passed the defaults'
// check (NaN <= 0 is false) and refused every request from beyond
// loopback; an infinite one lifted the limit. NewHTTPHandler refuses
// both, naming the field, as the HTTP door's New does.
func TestNewHTTPHandlerRefusesAbsurdRates(t *testing.T) {
	_, sets, _ := splitSets(t)
	srv, err := mcpserver.New(mcpserver.Config{Node: startNode(t, sets, nil), Version: "test", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		field string
		cfg   mcpserver.HTTPConfig
	}{
		{"RequestRate", mcpserver.HTTPConfig{RequestRate: math.NaN()}},
		{"RequestRate", mcpserver.HTTPConfig{RequestRate: math.Inf(1)}},
		{"RemoteRate", mcpserver.HTTPConfig{RemoteRate: math.NaN()}},
		{"RemoteRate", mcpserver.HTTPConfig{RemoteRate: math.Inf(-1)}},
	} {
		tc.cfg.Logger = testLogger(t)
		h, err := mcpserver.NewHTTPHandler(srv, tc.cfg)
		if err == nil {
			h.Close()
			t.Errorf("%s %+v accepted", tc.field, tc.cfg)
		} else if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("error %q does not name %s", err, tc.field)
		}
	}
}
