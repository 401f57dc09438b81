package httpgw

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/skill"
)

// loopbackProxies lists the test client as a trusted proxy, so that each
// request can name its client in X-Forwarded-For.
var loopbackProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// as sends a request as client (X-Forwarded-For) and returns the status
// and, for errors, the code; out, when set, receives a success body.
func as(t *testing.T, base, client, method, path, body string, out any) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Forwarded-For", client)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		var eb ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		return resp.StatusCode, eb.Code
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, ""
}

func createBody(t *testing.T) string {
	_, id := testutil.NewKey(t)
	return `{"peer_id":"` + id.String() + `"}`
}

// TestUnstartedSessionsOfOneAllocation (finding B): creating a session
// costs one request, and each unstarted session held a slot (and counted
// as load of the node's verifier) for 30 s: 32 IPv6 /48s of one
// allocation, 8 creates each, held all 256 slots, renewed every 30 s.
// Unstarted sessions are now bounded per /48 and per IPv6 /32, so one
// allocation holds a few and every other client still gets a session.
func TestUnstartedSessionsOfOneAllocation(t *testing.T) {
	_, _, base := fakeDoor(t, func(c *Config) { c.TrustedProxies = loopbackProxies })
	created := 0
	for n := range 32 {
		for range 8 {
			if st, _ := as(t, base, fmt.Sprintf("2001:db8:%x::%x", n+1, n+7), http.MethodPost, "/v1/sessions", createBody(t), nil); st == http.StatusCreated {
				created++
			}
		}
	}
	if created > DefaultMaxUnstartedPerBlock {
		t.Errorf("one IPv6 /32 holds %d unstarted sessions, want at most %d", created, DefaultMaxUnstartedPerBlock)
	}
	for _, client := range []string{"198.51.100.1", "2001:db9::1"} {
		if st, code := as(t, base, client, http.MethodPost, "/v1/sessions", createBody(t), nil); st != http.StatusCreated {
			t.Errorf("create from %s after one allocation's creates: %d %s", client, st, code)
		}
	}
}

// Unstarted sessions per IP prefix: a started session leaves the count
// (it paid), and stays within the prefix's open sessions.
func TestUnstartedPerPrefix(t *testing.T) {
	_, _, base := fakeDoor(t, func(c *Config) { c.TrustedProxies = loopbackProxies })
	a := newAgent(t, base)
	a.hc.Transport = headerTransport{"198.51.100.1"}
	var first *Session
	for i := range DefaultMaxUnstartedPerPrefix {
		v := a.create()
		if i == 0 {
			first = v
		}
	}
	if st, eb := a.post("/v1/sessions", map[string]string{"peer_id": a.id.String()}, nil); st != http.StatusTooManyRequests || eb.Code != CodeTooManySessions {
		t.Fatalf("unstarted session %d of one /24: %d %+v, want 429 too_many_sessions", DefaultMaxUnstartedPerPrefix+1, st, eb)
	}
	var cur Session
	if st, eb := a.post("/v1/sessions/"+first.SessionID+"/start", a.startReq(first), &cur); st != http.StatusOK {
		t.Fatalf("start: %d %+v", st, eb)
	}
	a.create() // the started one no longer counts as unstarted
	var m Manifest
	a.get(ManifestPath, &m)
	if m.Limits.StartTTLMs != DefaultStartTTL.Milliseconds() || DefaultStartTTL > 15*time.Second || m.Limits.MaxUnstartedPerPrefix != DefaultMaxUnstartedPerPrefix {
		t.Errorf("manifest limits %+v", m.Limits)
	}
}

// The total of unstarted sessions: a quarter of the slots by default.
func TestUnstartedTotal(t *testing.T) {
	_, _, base := fakeDoor(t, func(c *Config) { c.TrustedProxies = loopbackProxies; c.MaxUnstarted = 3 })
	for i := range 3 {
		if st, code := as(t, base, fmt.Sprintf("198.51.%d.1", i), http.MethodPost, "/v1/sessions", createBody(t), nil); st != http.StatusCreated {
			t.Fatalf("create %d: %d %s", i, st, code)
		}
	}
	if st, code := as(t, base, "203.0.113.1", http.MethodPost, "/v1/sessions", createBody(t), nil); st != http.StatusTooManyRequests || code != CodeTooManySessions {
		t.Fatalf("fourth unstarted session: %d %s", st, code)
	}
}

// On a real node the unstarted sessions of one allocation raised the proof
// of work every peer is asked by five bits (the core counts a begun
// session as load: a bit per doubling beyond 16, and 256 were begun); the
// 16 it can hold now add at most one.
func TestUnstartedLoadOnRealNode(t *testing.T) {
	_, n := newRealNode(t)
	g, err := ForNode(n.Door(), Config{TrustedProxies: loopbackProxies})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	defer func() { srv.CloseClientConnections(); srv.Close(); g.Close() }()
	for n := range 32 {
		for range 8 {
			as(t, srv.URL, fmt.Sprintf("2001:db8:%x::1", n+1), http.MethodPost, "/v1/sessions", createBody(t), nil)
		}
	}
	var v Session
	if st, code := as(t, srv.URL, "198.51.100.1", http.MethodPost, "/v1/sessions", createBody(t), &v); st != http.StatusCreated {
		t.Fatalf("honest create: %d %s", st, code)
	}
	if *v.PowDifficulty > DefaultPowDifficulty+1 {
		t.Errorf("proof of work %d bits after one allocation's creates, want at most the door's %d + 1", *v.PowDifficulty, DefaultPowDifficulty)
	}
}

// TestReadsRateLimited (finding C): GETs were not rate-limited, so a
// client could keep any number of connections busy with /openapi.json.
// Reads have buckets of their own: past the burst, rate_limited; another
// prefix and the prefix's creates are unaffected.
func TestReadsRateLimited(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	_, _, base := fakeDoor(t, func(c *Config) { c.TrustedProxies = loopbackProxies; c.Now = clock })
	limited := 0
	for i := range DefaultRequestBurst + 5 {
		path := []string{"/openapi.json", ManifestPath, "/v1/sessions/nope", "/nothing"}[i%4]
		st, code := as(t, base, "198.51.100.7", http.MethodGet, path, "", nil)
		if st == http.StatusTooManyRequests {
			if code != CodeRateLimited || i < DefaultRequestBurst {
				t.Fatalf("read %d: %d %s", i, st, code)
			}
			limited++
		}
	}
	if limited != 5 {
		t.Fatalf("%d of %d reads limited, want the 5 past the burst of %d", limited, DefaultRequestBurst+5, DefaultRequestBurst)
	}
	// A POST step naming no session is a read too.
	if st, code := as(t, base, "198.51.100.8", http.MethodPost, "/v1/sessions/nope/answer", `{}`, nil); st != http.StatusTooManyRequests || code != CodeRateLimited {
		t.Errorf("answer to no session past the read budget: %d %s", st, code)
	}
	if st, code := as(t, base, "198.51.100.9", http.MethodPost, "/v1/sessions", createBody(t), nil); st != http.StatusCreated {
		t.Errorf("create past the read budget: %d %s", st, code)
	}
	if st, code := as(t, base, "203.0.113.1", http.MethodGet, "/openapi.json", "", nil); st != http.StatusOK {
		t.Errorf("read of another prefix: %d %s", st, code)
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	if st, code := as(t, base, "198.51.100.7", http.MethodGet, "/openapi.json", "", nil); st != http.StatusOK {
		t.Errorf("read after the bucket refilled: %d %s", st, code)
	}
}

// TestConnsPerPrefix (finding C): connections were counted per address,
// so 32 addresses of one network held all 1,024. They are counted per
// client, per IP prefix (IPv4 /24 here: loopback addresses of 127.0.0.0/24)
// and per IPv6 /32.
func TestConnsPerPrefix(t *testing.T) {
	_, sets := newAnswerKey(t)
	g, err := New(Config{Core: newFakeCore(t, sets[0], skill.DefaultPolicy())})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := g.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	dial := func(from string) net.Conn {
		d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", addr.String())
		if err != nil {
			t.Skipf("dial from %s: %v (this system does not route 127.0.0.0/8 to loopback)", from, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// served reports whether a request on c gets an HTTP response (a 429
	// of the read budget is one).
	served := func(c net.Conn) bool {
		_, ok := getOpenAPI(c)
		return ok
	}
	var held []net.Conn
	for i := range DefaultMaxConnsPerPrefix {
		c := dial(fmt.Sprintf("127.0.0.%d", 1+i/DefaultMaxConnsPerIP))
		if !served(c) {
			t.Fatalf("connection %d of 127.0.0.0/24 not served", i)
		}
		held = append(held, c)
	}
	if served(dial("127.0.0.9")) {
		t.Fatalf("connection %d of 127.0.0.0/24 (a fresh address) served past the cap of %d", DefaultMaxConnsPerPrefix+1, DefaultMaxConnsPerPrefix)
	}
	if !served(dial("127.0.1.1")) {
		t.Fatal("a connection of another /24 was not served")
	}
	held[0].Close()
	deadline := time.Now().Add(3 * time.Second)
	for !served(dial("127.0.0.9")) {
		if time.Now().After(deadline) {
			t.Fatal("a closed connection's slot was not given back to its prefix")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fakeListener hands out connections from the given remote addresses,
// then fails.
type fakeListener struct {
	mu     sync.Mutex
	remote []string
	closed int // connections the limiter closed
}

type fakeConn struct {
	net.Conn
	l      *fakeListener
	remote net.Addr
}

func (c *fakeConn) RemoteAddr() net.Addr { return c.remote }
func (c *fakeConn) Close() error {
	c.l.mu.Lock()
	c.l.closed++
	c.l.mu.Unlock()
	return nil
}

func (l *fakeListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.remote) == 0 {
		return nil, net.ErrClosed
	}
	ap := netip.MustParseAddrPort(l.remote[0])
	l.remote = l.remote[1:]
	return &fakeConn{l: l, remote: net.TCPAddrFromAddrPort(ap)}, nil
}
func (l *fakeListener) Close() error   { return nil }
func (l *fakeListener) Addr() net.Addr { return &net.TCPAddr{} }

// The groups of IPv6 addresses: a /64 is one client, a /48 a prefix, a
// /32 a block.
func TestConnGroupsIPv6(t *testing.T) {
	plan := addrPlan{v4: DefaultV4PrefixBits, v6: DefaultV6PrefixBits, v6Block: DefaultV6BlockBits}
	caps := connCaps{host: 2, prefix: 3, block: 5}
	for _, tc := range []struct {
		name   string
		remote []string
		want   int
	}{
		{"addresses of one /64", []string{"[2001:db8:1:1::1]:1", "[2001:db8:1:1::2]:1", "[2001:db8:1:1::3]:1", "[2001:db8:1:1:ffff::9]:1"}, 2},
		{"/64s of one /48", []string{"[2001:db8:1:1::1]:1", "[2001:db8:1:2::1]:1", "[2001:db8:1:3::1]:1", "[2001:db8:1:4::1]:1"}, 3},
		{"/48s of one /32", []string{"[2001:db8:1::1]:1", "[2001:db8:2::1]:1", "[2001:db8:3::1]:1", "[2001:db8:4::1]:1", "[2001:db8:5::1]:1", "[2001:db8:6::1]:1"}, 5},
		{"IPv4 /24, no block", []string{"198.51.100.1:1", "198.51.100.1:2", "198.51.100.1:3", "198.51.100.2:1", "198.51.101.1:1", "198.51.102.1:1", "198.51.103.1:1", "198.51.104.1:1"}, 7},
		{"mapped IPv4 is IPv4", []string{"[::ffff:198.51.100.1]:1", "198.51.100.1:2", "[::ffff:198.51.100.1]:3"}, 2},
		// Behind a NAT64 translator each IPv4 client is its own host
		// (it was one /64: 2 connections for every IPv4 client at
		// once), and /24s of it are prefixes, with no block.
		{"NAT64 is the IPv4 it carries", []string{"[64:ff9b::198.51.100.1]:1", "[64:ff9b::198.51.100.2]:1", "[64:ff9b::198.51.100.3]:1", "[64:ff9b::198.51.100.4]:1", "[64:ff9b::198.51.101.1]:1", "[64:ff9b::198.51.102.1]:1", "[64:ff9b::198.51.103.1]:1", "[64:ff9b::198.51.104.1]:1", "[64:ff9b::198.51.105.1]:1"}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl := &fakeListener{remote: tc.remote}
			l := limitListener(fl, 1024, caps, plan, nil)
			got := 0
			for {
				_, err := l.Accept()
				if errors.Is(err, net.ErrClosed) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got++
			}
			if got != tc.want || fl.closed != len(tc.remote)-tc.want {
				t.Errorf("accepted %d (closed %d) of %d, want %d", got, fl.closed, len(tc.remote), tc.want)
			}
		})
	}
}

// Idle keep-alive connections are closed after the idle timeout: 20 s by
// default (it was 60 s), longer when the policy makes a client think
// longer over a round, at most 60 s.
func TestIdleTimeout(t *testing.T) {
	p := skill.DefaultPolicy()
	if d := idleTimeoutFor(p); d != 20*time.Second {
		t.Errorf("default policy: %v, want 20s", d)
	}
	p.Tau = 40 * time.Second
	if d := idleTimeoutFor(p); d != 40*time.Second+p.RTTCredit+AnswerGrace+time.Second {
		t.Errorf("tau 40s: %v", d)
	}
	p.DeriveTau = true
	if d := idleTimeoutFor(p); d != 60*time.Second {
		t.Errorf("derived tau: %v, want the 60s cap", d)
	}
	_, sets := newAnswerKey(t)
	g, err := New(Config{Core: newFakeCore(t, sets[0], skill.DefaultPolicy()), IdleTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := g.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	c, err := net.DialTimeout("tcp", addr.String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	if _, err := c.Write([]byte("GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("idle connection not closed by the server: %v", err)
	}
}

// insert forgets ended sessions when the table is full without taking
// their locks: a session's timer or handler holds the session's lock and
// then takes the door's (release, admitStart), so insert taking a
// session's lock under the door's deadlocked the door (found in review).
func TestInsertLockOrder(t *testing.T) {
	g, _, _ := fakeDoor(t, func(c *Config) { c.MaxSessions = 1 })
	var olds []*session
	for i := range 4 {
		o := &session{id: string(rune('a' + i)), state: StateAwaitingStart, prefix: "p"}
		g.mu.Lock()
		g.sessions[o.id] = o
		g.open++
		g.byPrefix["p"]++
		g.unstarted++
		g.unByPfx["p"]++
		g.mu.Unlock()
		olds = append(olds, o)
	}
	for _, o := range olds {
		o.mu.Lock() // every session's timer fires at once
	}
	inserted := make(chan struct{})
	go func() {
		_ = g.insert(&session{id: "new", state: StateAwaitingStart})
		close(inserted)
	}()
	released := make(chan struct{})
	go func() {
		o := olds[0]
		o.state = StateExpired
		g.release(o) // what abort does under o.mu
		close(released)
	}()
	for name, ch := range map[string]chan struct{}{"insert": inserted, "release": released} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not return: the door's lock and a session's are taken in both orders", name)
		}
	}
	for _, o := range olds {
		o.mu.Unlock()
	}
	// The stand-ins have no core session: out of the table before Close.
	g.mu.Lock()
	for _, id := range []string{"a", "b", "c", "d", "new"} {
		delete(g.sessions, id)
	}
	g.mu.Unlock()
}
