package mcpserver_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/peer/mcpserver"
)

// dialCounter is a loopback TCP listener that counts the connections
// made to it and closes each at once (a libp2p dial to it fails fast).
type dialCounter struct {
	l    net.Listener
	n    atomic.Int64
	done chan struct{}
}

func newDialCounter(t *testing.T) *dialCounter {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &dialCounter{l: l, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			d.n.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = l.Close(); <-d.done })
	return d
}

func (d *dialCounter) port() int { return d.l.Addr().(*net.TCPAddr).Port }

// remoteMCP serves srv over HTTP on loopback; a session's requests carry
// the caller address it was opened with (X-Test-Remote; empty: loopback).
func remoteMCP(t *testing.T, srv *mcpserver.Server) func(ctx context.Context, remote string) *mcp.ClientSession {
	t.Helper()
	h := mustHTTPHandler(t, srv, mcpserver.HTTPConfig{Logger: testLogger(t)})
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
	return func(ctx context.Context, remote string) *mcp.ClientSession {
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
}

// TestHTTPRemoteAttestDialsPublicOnly: an MCP session opened from beyond
// loopback had attest_peer dial any address it named: the node connected
// to its own loopback services (server-side request forgery). Such a
// session now names a public IP address unless the operator allows
// private dials; a loopback session dials as before.
func TestHTTPRemoteAttestDialsPublicOnly(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("RemotePrivateDials=%v", allow), func(t *testing.T) {
			_, sets, _ := splitSets(t)
			srv, err := mcpserver.New(mcpserver.Config{Node: startNode(t, sets, nil), Version: "test", Logger: testLogger(t), RemotePrivateDials: allow})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Close)
			session := remoteMCP(t, srv)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			d := newDialCounter(t)
			cs := session(ctx, "198.51.100.7:4000")
			refused := 0
			addrs := []string{
				fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", d.port()),
				fmt.Sprintf("/dns4/localhost/tcp/%d", d.port()),
				fmt.Sprintf("/ip6/::ffff:127.0.0.1/tcp/%d", d.port()),
			}
			for _, a := range addrs {
				_, id := testutil.NewKey(t)
				_, err := call[mcpserver.AttestOutput](ctx, cs, "attest_peer", map[string]any{"addr": a + "/p2p/" + id.String(), "timeout_seconds": 5})
				if err != nil && !errors.Is(err, context.DeadlineExceeded) && d.n.Load() == 0 {
					refused++
				}
				t.Logf("%s: %v", a, err)
			}
			remoteDials := d.n.Load()
			t.Logf("remote session: %d of %d loopback addresses refused, %d connections to the loopback port", refused, len(addrs), remoteDials)
			if !allow && (remoteDials != 0 || refused != len(addrs)) {
				t.Errorf("a session from beyond loopback had the node dial loopback %d times (%d of %d refused), want 0", remoteDials, refused, len(addrs))
			}
			if allow && remoteDials == 0 {
				t.Error("with RemotePrivateDials the node did not dial the loopback address")
			}
			// The node's own agent on loopback dials it.
			lcs := session(ctx, "")
			_, id := testutil.NewKey(t)
			_, _ = call[mcpserver.AttestOutput](ctx, lcs, "attest_peer", map[string]any{"addr": addrs[0] + "/p2p/" + id.String(), "timeout_seconds": 5})
			if d.n.Load() == remoteDials {
				t.Error("a loopback session's attest_peer did not dial the loopback address")
			}
		})
	}
}

// TestPublicDialAddr: what a session from beyond loopback may name.
func TestPublicDialAddr(t *testing.T) {
	for a, ok := range map[string]bool{
		"/ip4/8.8.8.8/tcp/4717":              true,
		"/ip4/8.8.8.8/udp/4717/quic-v1":      true,
		"/ip6/2a00:1450::1/tcp/4717":         true,
		"/ip6/64:ff9b::808:808/tcp/4717":     true,
		"/ip4/127.0.0.1/tcp/4717":            false,
		"/ip4/10.1.2.3/tcp/4717":             false,
		"/ip4/172.16.0.1/tcp/4717":           false,
		"/ip4/192.168.1.1/tcp/4717":          false,
		"/ip4/100.64.0.1/tcp/4717":           false,
		"/ip4/169.254.169.254/tcp/80":        false,
		"/ip4/0.0.0.0/tcp/4717":              false,
		"/ip4/224.0.0.1/tcp/4717":            false,
		"/ip4/192.0.2.1/tcp/4717":            false,
		"/ip6/::1/tcp/4717":                  false,
		"/ip6/::/tcp/4717":                   false,
		"/ip6/fd00::1/tcp/4717":              false,
		"/ip6/fe80::1/tcp/4717":              false,
		"/ip6zone/eth0/ip6/fe80::1/tcp/4717": false,
		"/ip6/::ffff:127.0.0.1/tcp/4717":     false,
		"/ip6/::ffff:10.0.0.1/tcp/4717":      false,
		"/ip6/64:ff9b::7f00:1/tcp/4717":      false,
		"/ip6/64:ff9b::a00:1/tcp/4717":       false,
		"/ip6/2001:db8::1/tcp/4717":          false,
		"/dns4/localhost/tcp/4717":           false,
		"/dns4/example.com/tcp/4717":         false,
		"/dnsaddr/example.com":               false,
		"/ip4/8.8.8.8/tcp/1/p2p/12D3KooWRBhwfeP2Y4TCx1SM6s9rUoHhR5STiGwxBhgFRcw3UERE/p2p-circuit": true,
	} {
		m, err := ma.NewMultiaddr(a)
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		if err := mcpserver.PublicDialAddr(m); (err == nil) != ok {
			t.Errorf("%s: err %v, want allowed %v", a, err, ok)
		}
	}
}

// TestHTTPRemoteAttestsPaced: an MCP session from beyond loopback
// started an attestation, and so a dial of an address it named, for
// every request its HTTP rate allowed (10 a second per network): the
// node connected for it as fast as it asked. Starts from beyond loopback
// are now paced per caller network, per IPv6 /32, per target network and
// in total (mcpserver.RemoteAttestBurst at once).
func TestHTTPRemoteAttestsPaced(t *testing.T) {
	_, sets, _ := splitSets(t)
	srv, err := mcpserver.New(mcpserver.Config{Node: startNode(t, sets, nil), Version: "test", Logger: testLogger(t), RemotePrivateDials: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	session := remoteMCP(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := newDialCounter(t)
	attest := func(cs *mcp.ClientSession, host string) bool {
		_, id := testutil.NewKey(t)
		_, err := call[mcpserver.AttestOutput](ctx, cs, "attest_peer", map[string]any{"addr": fmt.Sprintf("/ip4/%s/tcp/%d/p2p/%s", host, d.port(), id), "timeout_seconds": 5})
		return err == nil || !isPaced(err)
	}
	// One network, ten calls one after another (each fails fast).
	cs := session(ctx, "198.51.100.7:4000")
	started := 0
	for range 10 {
		if attest(cs, "127.0.0.1") {
			started++
		}
	}
	// Another network, toward the same target network.
	cs2 := session(ctx, "203.0.113.9:4000")
	sameTarget := 0
	for range 3 {
		if attest(cs2, "127.0.0.2") {
			sameTarget++
		}
	}
	// A third network toward another target network.
	cs3 := session(ctx, "192.0.2.9:4000")
	other := 0
	if attest(cs3, "127.0.1.1") {
		other++
	}
	t.Logf("one network started %d of 10 attestations (%d connections to the port); another network toward the same /24 %d of 3; a third toward another /24 %d of 1", started, d.n.Load(), sameTarget, other)
	if started > mcpserver.RemoteAttestBurst {
		t.Errorf("one network beyond loopback started %d attestations in a row, want at most %d", started, mcpserver.RemoteAttestBurst)
	}
	if sameTarget > 0 {
		t.Errorf("callers beyond loopback started %d more attestations toward a target network whose pace was spent", sameTarget)
	}
	if other != 1 {
		t.Error("a fresh network toward a fresh target network was refused")
	}
}

func isPaced(err error) bool {
	return err != nil && strings.Contains(err.Error(), "too many attestations started from beyond loopback")
}

// TestHTTPAttestationsSharedByBlock: the MCP sessions of one IPv6 /32
// beyond loopback ran every attestation remote sessions may run (each of
// its /48s is a network with its own share): other networks got none.
// The /48s of one /32 now share twice a network's share.
func TestHTTPAttestationsSharedByBlock(t *testing.T) {
	_, sets, _ := splitSets(t)
	release := make(chan struct{})
	var once sync.Once
	srv, err := mcpserver.New(mcpserver.Config{Node: startNode(t, sets, nil), Version: "test", Logger: testLogger(t), RemotePrivateDials: true,
		Ready: func(ctx context.Context) error {
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
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	session := remoteMCP(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	target := 0
	attest := func(cs *mcp.ClientSession) bool {
		_, id := testutil.NewKey(t)
		target++ // a target network each: no target's pace is spent
		_, err := call[mcpserver.AttestOutput](ctx, cs, "attest_peer", map[string]any{"addr": fmt.Sprintf("/ip4/127.0.%d.1/tcp/9/p2p/%s", target, id), "background": true, "timeout_seconds": 25})
		return err == nil
	}
	inBlock := 0
	for i := range 3 {
		cs := session(ctx, fmt.Sprintf("[2001:db8:%x::1]:4000", i+1))
		for range 2 {
			if attest(cs) {
				inBlock++
			}
		}
	}
	others := 0
	for i := range 2 {
		if attest(session(ctx, fmt.Sprintf("198.51.%d.1:4000", 100+i))) {
			others++
		}
	}
	remoteShare := mcpserver.DefaultMaxAttests - mcpserver.DefaultMaxAttests/4
	t.Logf("three /48s of one /32 started %d attestations; two other networks %d (remote share %d)", inBlock, others, remoteShare)
	if want := 2 * (mcpserver.DefaultMaxAttests / 4); inBlock > want {
		t.Errorf("one IPv6 /32 ran %d attestations at once, want at most %d (twice a network's share)", inBlock, want)
	}
	if others == 0 {
		t.Error("other networks beyond loopback could start no attestation")
	}
}
