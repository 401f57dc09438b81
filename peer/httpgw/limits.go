package httpgw

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"golang.org/x/time/rate"

	"github.com/acaptcha/acaptcha/internal/bounded"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// Request rates and connection caps (spec/http.md §5). The session limits
// bound what is open at once; these bound how fast a client can make the
// door spend on it: a create (a session slot, a draw check) and a verify
// (a signature check, up to 1.6 ms for an RSA-8192 key) cost the door
// whatever the client sends, so each IP prefix gets a token bucket, each
// IPv6 block one of BlockFactor prefixes' (rateLimits) and the door one in
// total. Reads (GETs, requests for no route or no session)
// cost little each, but cost nothing to send and keep a connection busy:
// they get buckets of their own with the same rates, so that reading
// cannot spend a prefix's creates. Connections are capped in total and
// per client, per IP prefix and per IPv6 allocation (addrPlan), so that
// idle keep-alive connections of one network cannot hold every server
// goroutine.
const (
	// DefaultRequestRate and DefaultRequestBurst are one IP prefix's
	// budget of costly requests (creates and verifies) per second, and
	// of reads.
	DefaultRequestRate  = 10
	DefaultRequestBurst = 50
	// DefaultGlobalRequestRate and DefaultGlobalRequestBurst are the
	// door's.
	DefaultGlobalRequestRate  = 200
	DefaultGlobalRequestBurst = 400
	// DefaultMaxConns caps open connections in total. A trusted proxy's
	// count against it only.
	DefaultMaxConns = 1024
	// DefaultMaxConnsPerIP caps the connections of one client: one IPv4
	// address, or one IPv6 /64 (the network one host is given: counted
	// per /128, one host would get a cap per address it takes).
	DefaultMaxConnsPerIP = 32
	// DefaultMaxConnsPerPrefix caps those of one IP prefix (IPv4 /24,
	// IPv6 /48, as the session limits): 1/16 of the total, so that it
	// takes 16 networks, not 32 addresses of one, to hold every
	// connection.
	DefaultMaxConnsPerPrefix = 64
	// DefaultMaxConnsPerBlock caps those of one IPv6 /32 (one
	// allocation, which holds 65,536 /48s): 1/8 of the total.
	DefaultMaxConnsPerBlock = 128
	// DefaultV6BlockBits is the IPv6 allocation the per-block limits
	// count in.
	DefaultV6BlockBits = 32
	// v6HostBits is the IPv6 network counted as one client.
	v6HostBits = 64
	// maxRatePrefixes bounds the prefix table; when full, a sixteenth
	// is forgotten at once, prefixes whose bucket is full again first
	// (a forgotten prefix starts full; the door's bucket still bounds
	// it).
	maxRatePrefixes = 1 << 14
)

// Idle keep-alive connections (spec/http.md §5) are closed after
// minIdleTimeout, or after the longest a client waits between two requests
// of a session (the longest round's answer wait, plus a second), up to
// maxIdleTimeout: a connection the door closes while the agent thinks
// costs its answer a new handshake inside the timed round.
const (
	minIdleTimeout = 20 * time.Second
	maxIdleTimeout = 60 * time.Second
)

// idleTimeoutFor is the idle timeout of connections for sessions under p.
func idleTimeoutFor(p skill.Policy) time.Duration {
	wait := p.Total
	if !p.DeriveTau && p.Tau > 0 && p.Tau < wait {
		wait = p.Tau
	}
	return min(max(wait+p.RTTCredit+AnswerGrace+time.Second, minIdleTimeout), maxIdleTimeout)
}

// addrPlan says how client addresses are grouped for counting: host is
// the client (an IPv4 address, an IPv6 /64), prefix its network (IPv4
// /24, IPv6 /48 by default) and block, for IPv6 only, the allocation the
// network is part of (/32): one holder of a /32 has 65,536 /48s, so
// per-prefix limits alone do not bound it.
type addrPlan struct{ v4, v6, v6Block int }

// addrKeys are the groups one address counts in; block is invalid for
// IPv4, and all are invalid for an invalid address.
type addrKeys struct{ host, prefix, block netip.Prefix }

func (p addrPlan) keys(a netip.Addr) addrKeys {
	if !a.IsValid() {
		return addrKeys{}
	}
	// An IPv4-mapped or NAT64 (64:ff9b::/96) address counts as the IPv4
	// address it carries, as in the core's budgets: as IPv6 every IPv4
	// client behind a translator was one client of one /64.
	a = protocol.GroupAddr(a)
	pfx := func(bits int) netip.Prefix {
		q, err := a.Prefix(bits)
		if err != nil {
			return netip.Prefix{}
		}
		return q
	}
	if a.Is4() {
		return addrKeys{host: pfx(32), prefix: pfx(p.v4)}
	}
	// The host is never coarser than the prefix, nor the block finer
	// (whatever the configured bits).
	return addrKeys{host: pfx(max(v6HostBits, p.v6)), prefix: pfx(p.v6), block: pfx(min(p.v6Block, p.v6))}
}

// rateLimits is the door's budget of costly requests (or of reads): a
// token bucket per IP prefix, one per IPv6 block that BlockFactor
// prefixes' rate and burst fill, and the door's. A /48 costs nothing to
// the holder of a /32, which has 65,536 of them: without the block's
// bucket the /48s of one allocation, each within its prefix's rate,
// spent the door's whole rate (20 of them with the defaults) and every
// other client was refused.
type rateLimits struct {
	rate, blockRate   rate.Limit
	burst, blockBurst int
	global            *rate.Limiter

	mu       sync.Mutex
	prefixes map[string]*rate.Limiter
	blocks   map[string]*rate.Limiter
}

func newRateLimits(perPrefix float64, burst int, global float64, globalBurst int) *rateLimits {
	return &rateLimits{
		rate: rate.Limit(perPrefix), burst: burst,
		blockRate: rate.Limit(protocol.BlockFactor * perPrefix), blockBurst: protocol.BlockFactor * burst,
		global:   rate.NewLimiter(rate.Limit(global), globalBurst),
		prefixes: map[string]*rate.Limiter{},
		blocks:   map[string]*rate.Limiter{},
	}
}

// allow spends one request of prefix's bucket, of block's (an IPv6
// block; "" for none) and of the door's; it reports false, spending
// nothing, when one of them is empty.
func (l *rateLimits) allow(prefix, block string, now time.Time) bool {
	return l.charge(prefix, block, 1, now)
}

// bucketLocked returns key's bucket in m, making it (and room for it)
// with rate r and burst b; l.mu is held.
func bucketLocked(m map[string]*rate.Limiter, key string, r rate.Limit, b int, now time.Time) *rate.Limiter {
	pl, ok := m[key]
	if !ok {
		bounded.MakeRoom(m, maxRatePrefixes, func(v *rate.Limiter) bool { return v.TokensAt(now) >= float64(b) })
		pl = rate.NewLimiter(r, b)
		m[key] = pl
	}
	return pl
}

// charge spends n of prefix's bucket, of block's (an IPv6 block; "" for
// none) and of the door's, at most the prefix's burst (so that any one
// request can be served by full buckets); it reports false, spending
// nothing, when one of them holds less.
func (l *rateLimits) charge(prefix, block string, n int, now time.Time) bool {
	if n <= 0 {
		return true
	}
	n = min(n, l.burst)
	l.mu.Lock()
	defer l.mu.Unlock()
	buckets := []*rate.Limiter{bucketLocked(l.prefixes, prefix, l.rate, l.burst, now), l.global}
	if block != "" {
		buckets = append(buckets, bucketLocked(l.blocks, block, l.blockRate, l.blockBurst, now))
	}
	for _, b := range buckets {
		if b.TokensAt(now) < float64(n) {
			return false
		}
	}
	for _, b := range buckets {
		b.AllowN(now, n)
	}
	return true
}

// keepAlivePressure turns the server's keep-alives off while its open
// connections are at or above high (closing the idle ones at once, and
// every later one after its response) and back on once they are down to
// low. The total cap (limitListener) makes Accept wait when full, and a
// connection that idles between requests holds its slot for the idle
// timeout: clients of a few networks, each within its network's cap and
// the request rates, sending one request per idle timeout on every
// connection held all of them, and a new client waited in the kernel's
// accept queue. Under pressure a connection lives for one request, and a
// slot is held only as long as a request takes (its header within
// readHeaderTimeout). http.Server.SetKeepAlivesEnabled does the closing
// (HTTP/1 connections; the door serves no HTTP/2).
type keepAlivePressure struct {
	srv       *http.Server
	high, low int

	mu   sync.Mutex
	open int
	off  bool
}

// newKeepAlivePressure watches srv's connections against a total cap:
// keep-alives go off at three quarters of it, on again at half.
func newKeepAlivePressure(srv *http.Server, total int) *keepAlivePressure {
	return &keepAlivePressure{srv: srv, high: max(1, total*3/4), low: total / 2}
}

// connState is the server's ConnState hook (run outside the server's
// lock, so it may call SetKeepAlivesEnabled).
func (p *keepAlivePressure) connState(_ net.Conn, st http.ConnState) {
	var d int
	switch st {
	case http.StateNew:
		d = 1
	case http.StateClosed, http.StateHijacked:
		d = -1
	default:
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open += d
	switch {
	case !p.off && p.open >= p.high:
		p.off = true
		p.srv.SetKeepAlivesEnabled(false)
	case p.off && p.open <= p.low:
		p.off = false
		p.srv.SetKeepAlivesEnabled(true)
	}
}

// connCaps are the per-group connection caps of limitListener.
type connCaps struct{ host, prefix, block int }

// limitListener caps a listener's open connections in total
// (netutil.LimitListener, which makes Accept wait) and per group of
// remote addresses (plan: per client, per IP prefix, per IPv6 /32): a
// connection over one of its groups' caps is closed at once. The
// per-group counts are hand-written: x/net has no such limiter, and the
// libp2p resource manager guards libp2p connections only. Connections
// from exempt networks (trusted proxies) count against the total only.
func limitListener(l net.Listener, total int, caps connCaps, plan addrPlan, exempt []netip.Prefix) net.Listener {
	return &groupListener{Listener: netutil.LimitListener(l, total), caps: caps, plan: plan, exempt: exempt,
		host: map[netip.Prefix]int{}, prefix: map[netip.Prefix]int{}, block: map[netip.Prefix]int{}}
}

type groupListener struct {
	net.Listener
	caps   connCaps
	plan   addrPlan
	exempt []netip.Prefix

	mu                  sync.Mutex
	host, prefix, block map[netip.Prefix]int
}

func (l *groupListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
		if err != nil {
			return c, nil // not an IP connection (tests on pipes): the total cap applies
		}
		ip := ap.Addr().Unmap()
		if inAny(ip, l.exempt) {
			return c, nil
		}
		k := l.plan.keys(ip)
		l.mu.Lock()
		if l.host[k.host] >= l.caps.host || l.prefix[k.prefix] >= l.caps.prefix ||
			(k.block.IsValid() && l.block[k.block] >= l.caps.block) {
			l.mu.Unlock()
			_ = c.Close()
			continue
		}
		l.host[k.host]++
		l.prefix[k.prefix]++
		if k.block.IsValid() {
			l.block[k.block]++
		}
		l.mu.Unlock()
		return &countedConn{Conn: c, release: sync.OnceFunc(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			uncount(l.host, k.host)
			uncount(l.prefix, k.prefix)
			if k.block.IsValid() {
				uncount(l.block, k.block)
			}
		})}, nil
	}
}

// uncount takes one from m[k], forgetting k at zero.
func uncount[K comparable](m map[K]int, k K) {
	if m[k]--; m[k] <= 0 {
		delete(m, k)
	}
}

type countedConn struct {
	net.Conn
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

func inAny(ip netip.Addr, nets []netip.Prefix) bool {
	for _, n := range nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}
