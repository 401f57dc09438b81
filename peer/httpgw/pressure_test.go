package httpgw

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/skill"
)

// Connections that idle between requests cannot hold the door's total:
// at three quarters of it keep-alives go off, idle connections are
// closed and a new client is served at once (it waited in the kernel's
// accept queue until idle connections timed out: clients of 16 networks,
// each within its network's caps, held all 1 024 connections sending one
// request per 15 s on each). Keep-alives come back once the load falls.
func TestIdleConnectionsCannotHoldTheDoor(t *testing.T) {
	_, sets := newAnswerKey(t)
	core := newFakeCore(t, sets[0], skill.DefaultPolicy())
	const total = 8
	g, err := New(Config{Core: core, MaxConns: total, MaxConnsPerIP: total, MaxConnsPerPrefix: total, MaxConnsPerBlock: total,
		IdleTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := g.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	// Every slot taken by a connection that sent one request and idles.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	get := func(c net.Conn) error {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := fmt.Fprintf(c, "GET /v1/manifest HTTP/1.1\r\nHost: door\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	for i := range total {
		c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if err := get(c); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	// A new client is served within a second, not after the idle timeout.
	cl := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	t0 := time.Now()
	resp, err := cl.Get("http://" + addr.String() + "/v1/manifest")
	if err != nil {
		t.Fatalf("new client with every slot held by idle connections: %v after %v", err, time.Since(t0))
	}
	resp.Body.Close()
	if d := time.Since(t0); d > time.Second {
		t.Fatalf("new client served after %v", d)
	}
	// The idle connections were closed (a read sees the end).
	closed := 0
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
			closed++
		}
	}
	// At least those idle when the sixth connection came: the first
	// four surely (the fifth may not be idle yet in the server's eyes:
	// its response reaches the client before the server's connection
	// state turns idle, and CI saw 4 of 8 once); later ones may be kept
	// alive again once the closes brought the count down to half. None
	// was closed before keep-alives went off under pressure.
	if closed < total*3/4-2 {
		t.Fatalf("%d of %d idle connections closed under pressure", closed, total)
	}
	// Load gone: keep-alives are back (a connection serves two requests).
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		err1, err2 := get(c), get(c)
		c.Close()
		if err1 == nil && err2 == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("keep-alive not restored after the load fell: %v, %v", err1, err2)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
