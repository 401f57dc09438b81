package mcpserver_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/peer/mcpserver"
)

// serveMCP serves h as acaptcha mcp --http does (mcpserver.NewHTTPServer
// over h.Listener) on a loopback port and returns its address.
func serveMCP(t *testing.T, h *mcpserver.HTTPHandler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	hs := mcpserver.NewHTTPServer(mux)
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(h.Listener(l)) }()
	t.Cleanup(func() {
		_ = hs.Close()
		<-done
		h.Close()
	})
	return l.Addr().String()
}

func newHTTPHandler(t *testing.T, cfg mcpserver.HTTPConfig) *mcpserver.HTTPHandler {
	t.Helper()
	_, sets, _ := splitSets(t)
	srv, err := mcpserver.New(mcpserver.Config{Node: startNode(t, sets, nil), Version: "test", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cfg.Logger = testLogger(t)
	return mustHTTPHandler(t, srv, cfg)
}

// closedBy reports whether the server closed c (or answered and closed)
// within d.
func closedBy(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			ne, ok := err.(net.Error)
			return !ok || !ne.Timeout()
		}
	}
}

// TestHTTPSlowBodyCut: a POST whose body trickles in held its connection
// and its goroutine for as long as the client kept sending (the server
// had a header timeout only), and connections were not capped: a client
// held any number. The body must arrive within the body timeout.
func TestHTTPSlowBodyCut(t *testing.T) {
	h := newHTTPHandler(t, mcpserver.HTTPConfig{BodyTimeout: 400 * time.Millisecond})
	addr := serveMCP(t, h)
	const conns = 8
	var held []net.Conn
	for range conns {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n{", addr)
		held = append(held, c)
	}
	// Trickle a byte a connection every 100 ms for 2 s.
	stop := time.Now().Add(2 * time.Second)
	for time.Now().Before(stop) {
		for _, c := range held {
			_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			_, _ = c.Write([]byte(" "))
		}
		time.Sleep(100 * time.Millisecond)
	}
	open := 0
	for _, c := range held {
		if !closedBy(c, 200*time.Millisecond) {
			open++
		}
	}
	t.Logf("%d of %d slow-body connections still open after 2 s (body timeout 400 ms)", open, conns)
	if open > 0 {
		t.Fatalf("%d slow-body connections still open after 2 s, want none past the body timeout", open)
	}
}

// TestHTTPConnsCapped: connections beyond MaxConns are closed at once
// (loopback callers count against the total only).
func TestHTTPConnsCapped(t *testing.T) {
	const maxConns = 8
	h := newHTTPHandler(t, mcpserver.HTTPConfig{MaxConns: maxConns})
	addr := serveMCP(t, h)
	var conns []net.Conn
	for range 3 * maxConns {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
	}
	time.Sleep(200 * time.Millisecond)
	closed := 0
	for _, c := range conns {
		if closedBy(c, 100*time.Millisecond) {
			closed++
		}
	}
	t.Logf("%d idle connections opened, %d closed at once (cap %d)", len(conns), closed, maxConns)
	if open := len(conns) - closed; open > maxConns {
		t.Fatalf("%d connections held open, want at most %d", open, maxConns)
	}
	// A closed connection's slot is given back: a request is served.
	for _, c := range conns {
		c.Close()
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /nope HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err == nil && strings.HasPrefix(line, "HTTP/1.1 404") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no request served after the held connections closed: %q %v", line, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fakeConnListener hands out connections from the given remote addresses.
type fakeConnListener struct {
	mu     sync.Mutex
	remote []string
}

type fakeRemoteConn struct {
	net.Conn
	remote net.Addr
	closed *bool
}

func (c *fakeRemoteConn) RemoteAddr() net.Addr { return c.remote }
func (c *fakeRemoteConn) Close() error         { *c.closed = true; return nil }

func (l *fakeConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.remote) == 0 {
		return nil, net.ErrClosed
	}
	ap := netip.MustParseAddrPort(l.remote[0])
	l.remote = l.remote[1:]
	return &fakeRemoteConn{remote: net.TCPAddrFromAddrPort(ap), closed: new(bool)}, nil
}
func (l *fakeConnListener) Close() error   { return nil }
func (l *fakeConnListener) Addr() net.Addr { return &net.TCPAddr{} }

// TestHTTPConnsSharedByNetworks: beyond loopback, one network holds an
// eighth of the connections, the /48s of one /32 a quarter, all networks
// three quarters; loopback keeps the rest.
func TestHTTPConnsSharedByNetworks(t *testing.T) {
	const maxConns = 32 // 4 per network, 8 per /32, 24 beyond loopback
	h := newHTTPHandler(t, mcpserver.HTTPConfig{MaxConns: maxConns})
	var remote []string
	for i := range 10 {
		remote = append(remote, fmt.Sprintf("192.0.2.%d:4000", 10+i))
	}
	for i := range 12 {
		remote = append(remote, fmt.Sprintf("[2001:db8:%x::1]:4000", i))
	}
	for i := range 40 {
		remote = append(remote, fmt.Sprintf("198.51.%d.1:4000", i))
	}
	for range 12 {
		remote = append(remote, "127.0.0.1:4000")
	}
	l := h.Listener(&fakeConnListener{remote: remote})
	byKind := map[string]int{}
	for {
		c, err := l.Accept()
		if err != nil {
			break
		}
		ap := netip.MustParseAddrPort(c.RemoteAddr().String())
		switch a := ap.Addr(); {
		case a.IsLoopback():
			byKind["loopback"]++
		case a.Is6():
			byKind["/32"]++
		case strings.HasPrefix(a.String(), "192.0.2."):
			byKind["/24"]++
		default:
			byKind["others"]++
		}
	}
	t.Logf("accepted %v (cap %d)", byKind, maxConns)
	if byKind["/24"] != 4 || byKind["/32"] != 8 || byKind["others"] != 12 || byKind["loopback"] != 8 {
		t.Fatalf("accepted %v, want 4 of one /24, 8 of one /32, 12 of other networks (24 beyond loopback) and 8 of loopback", byKind)
	}
}

// TestHTTPRequestsRateLimitedByNetwork: beyond loopback, requests were not
// rate-limited: a caller could send verify_attestation (a signature
// check, up to 1.6 ms of CPU for an RSA-8192 record it replays) or
// list_attestations (the whole store read) as fast as it could post.
// Each network gets a bucket (HTTPConfig.RequestRate, RequestBurst), all
// networks beyond loopback one together; loopback callers none.
func TestHTTPRequestsRateLimitedByNetwork(t *testing.T) {
	h := newHTTPHandler(t, mcpserver.HTTPConfig{RequestRate: 1, RequestBurst: 10})
	ts := remoteServer(t, h)
	post := func(from string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", "no-such-session")
		if from != "" {
			req.Header.Set("X-Test-Remote", from)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	const n = 100
	served := 0
	for i := range n {
		if post(fmt.Sprintf("192.0.2.%d:4000", 1+i%200)) != http.StatusTooManyRequests {
			served++
		}
	}
	t.Logf("one /24: %d of %d requests reached the MCP server in a burst (rate 1/s, burst 10)", served, n)
	if served > 12 {
		t.Fatalf("one /24 had %d of %d requests served at once, want about the burst (10)", served, n)
	}
	if st := post("198.51.100.1:4000"); st == http.StatusTooManyRequests {
		t.Errorf("another network was refused: %d", st)
	}
	for range 20 {
		if st := post(""); st == http.StatusTooManyRequests {
			t.Fatalf("a loopback caller was rate-limited: %d", st)
		}
	}
}

// headerTransport adds X-Test-Remote to every request (the test server
// takes it as the caller's address).
type headerTransport struct{ remote string }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if t.remote != "" {
		r.Header.Set("X-Test-Remote", t.remote)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestHTTPAttestationsSharedByNetworks: over HTTP, the MCP sessions of one
// network beyond loopback ran every attestation the server allows at
// once (8 by default: 2 sessions of 4), and the node's own agent on
// loopback got none. Sessions beyond loopback share three quarters of
// the cap, one network a quarter.
func TestHTTPAttestationsSharedByNetworks(t *testing.T) {
	_, sets, _ := splitSets(t)
	release := make(chan struct{})
	var inReady atomic.Int64
	srv, err := mcpserver.New(mcpserver.Config{Node: startNode(t, sets, nil), Version: "test", Logger: testLogger(t), RemotePrivateDials: true, Ready: func(ctx context.Context) error {
		inReady.Add(1)
		defer inReady.Add(-1)
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
	t.Cleanup(func() {
		close(release)
		ts.Close()
		h.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	session := func(remote string) *mcp.ClientSession {
		t.Helper()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint: ts.URL, HTTPClient: &http.Client{Transport: headerTransport{remote}}, MaxRetries: -1,
		}, nil)
		if err != nil {
			t.Fatalf("connect from %q: %v", remote, err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	attest := func(cs *mcp.ClientSession) bool {
		_, id := testutil.NewKey(t)
		_, err := call[mcpserver.AttestOutput](ctx, cs, "attest_peer", map[string]any{"addr": "/ip4/127.0.0.1/tcp/9/p2p/" + id.String(), "background": true, "timeout_seconds": 25})
		return err == nil
	}
	started := 0
	for i := range 2 {
		cs := session(fmt.Sprintf("192.0.2.%d:4000", 10+i))
		for range 4 {
			if attest(cs) {
				started++
			}
		}
	}
	local := 0
	lcs := session("")
	for range 4 {
		if attest(lcs) {
			local++
		}
	}
	t.Logf("one /24's 2 sessions started %d of 8 attestations; then loopback %d of 4 (cap %d)", started, local, mcpserver.DefaultMaxAttests)
	if started > mcpserver.DefaultMaxAttests/4 {
		t.Errorf("one network ran %d attestations at once, want at most a quarter of %d", started, mcpserver.DefaultMaxAttests)
	}
	if local == 0 {
		t.Error("the loopback caller could start no attestation")
	}
}

// TestHTTPBodyWaitEndsWithServerContext: a POST whose body stalls is
// answered 503 once the server's base context ends (acaptcha mcp --http
// ends it a second after a stop), where it waited out the body timeout
// (10 s by default) and held the server's shutdown that long.
func TestHTTPBodyWaitEndsWithServerContext(t *testing.T) {
	h := newHTTPHandler(t, mcpserver.HTTPConfig{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{}, 1)
	mux := http.NewServeMux()
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case entered <- struct{}{}:
		default:
		}
		h.ServeHTTP(w, r)
	}))
	hs := mcpserver.NewHTTPServer(mux)
	base, stop := context.WithCancel(context.Background())
	defer stop()
	hs.BaseContext = func(net.Listener) context.Context { return base }
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(h.Listener(l)) }()
	t.Cleanup(func() { _ = hs.Close(); <-done })
	addr := l.Addr().String()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{", addr)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the handler")
	}
	stop()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response within 2 s of the server's context ending (body timeout %v): %v", mcpserver.DefaultHTTPBodyTimeout, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status %d, want %d", resp.StatusCode, http.StatusServiceUnavailable)
	}
}
