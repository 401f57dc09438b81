package mcpserver_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/peer/mcpserver"
)

// smallSendBuffers gives every connection it accepts a send buffer of
// 64 KiB, as a server's socket to a client across the internet has
// (loopback's grow to megabytes), so that a response of a few hundred
// KB fills it.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(64 << 10)
	}
	return c, err
}

// TestHTTPUnreadResponseCut: the server has no write timeout (a tool
// call's response may stream for minutes), so a client that sent a
// request and never read its response held the server's write, its
// connection and the calls of its session waiting behind it for as long
// as its kernel kept answering: a JSON-RPC batch of tools/list (26 KB
// each; 50 a request beyond loopback) read by no one held a connection
// of the server's cap, the goroutine writing and the batch's calls
// waiting to write, with no end. A write that makes no progress for
// HTTPConfig.WriteStall now fails and the connection is closed.
func TestHTTPUnreadResponseCut(t *testing.T) {
	h := newHTTPHandler(t, mcpserver.HTTPConfig{WriteStall: 300 * time.Millisecond})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	hs := mcpserver.NewHTTPServer(mux)
	served := make(chan struct{})
	go func() { defer close(served); _ = hs.Serve(h.Listener(smallSendBuffers{l})) }()
	t.Cleanup(func() {
		_ = hs.Close()
		<-served
		h.Close()
	})
	// The session, on a connection the server closes after it.
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	_, sid := initializeFrom(t, "http://"+addr+"/mcp", "")
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	if sid == "" {
		t.Fatal("no session")
	}
	// About 1 MB of response: many times the socket buffers.
	const calls = 40
	var b strings.Builder
	b.WriteString("[")
	for i := range calls {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, 10+i)
	}
	b.WriteString("]")
	// The session's connections gone first, so that the count below is
	// of the new connection alone.
	for wait := time.Now().Add(10 * time.Second); h.OpenConns() > 0 && time.Now().Before(wait); {
		time.Sleep(10 * time.Millisecond)
	}
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nContent-Length: %d\r\n\r\n%s",
		addr, sid, b.Len(), b.String()); err != nil {
		t.Fatal(err)
	}
	// Read nothing: the server lets the connection go within a stall of
	// its write blocking (polled: under -race the batch takes a while).
	// The server must have taken the connection before its count can
	// say it let it go: a first look before its Accept saw 0, the
	// client then read the whole response and nothing stalled.
	start := time.Now()
	for h.OpenConns() == 0 && time.Since(start) < 10*time.Second {
		time.Sleep(5 * time.Millisecond)
	}
	if h.OpenConns() == 0 {
		t.Fatal("the server never counted the connection of the unread request")
	}
	deadline := start.Add(30 * time.Second)
	for h.OpenConns() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	open := h.OpenConns()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, c)
	t.Logf("%v after the request: %d connections open; then %d bytes read, %v", time.Since(start).Round(time.Millisecond), open, n, err)
	if open > 0 {
		t.Fatalf("%d connections still open 30 s after a client stopped reading (WriteStall 300 ms)", open)
	}
	if n > calls*20_000 {
		t.Errorf("%d bytes read: the whole response was written, nothing was cut", n)
	}
}
