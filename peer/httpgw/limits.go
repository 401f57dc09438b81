package httpgw

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"golang.org/x/time/rate"

	"github.com/acaptcha/acaptcha/internal/bounded"
)

// Request rates and connection caps (spec/http.md §5). The session limits
// bound what is open at once; these bound how fast a client can make the
// door spend on it: a create (a session slot, a draw check) and a verify
// (a signature check, up to 1.6 ms for an RSA-8192 key) cost the door
// whatever the client sends, so each IP prefix gets a token bucket and the
// door one in total. Connections are capped in total and per address, so
// that idle keep-alive connections cannot hold every server goroutine.
const (
	// DefaultRequestRate and DefaultRequestBurst are one IP prefix's
	// budget of costly requests (creates and verifies) per second.
	DefaultRequestRate  = 10
	DefaultRequestBurst = 50
	// DefaultGlobalRequestRate and DefaultGlobalRequestBurst are the
	// door's.
	DefaultGlobalRequestRate  = 200
	DefaultGlobalRequestBurst = 400
	// DefaultMaxConns and DefaultMaxConnsPerIP cap open connections (a
	// trusted proxy's are capped by the total only).
	DefaultMaxConns      = 1024
	DefaultMaxConnsPerIP = 32
	// maxRatePrefixes bounds the prefix table; when full, a sixteenth
	// is forgotten at once, prefixes whose bucket is full again first
	// (a forgotten prefix starts full; the door's bucket still bounds
	// it).
	maxRatePrefixes = 1 << 14
)

// rateLimits is the door's budget of costly requests.
type rateLimits struct {
	rate   rate.Limit
	burst  int
	global *rate.Limiter

	mu       sync.Mutex
	prefixes map[string]*rate.Limiter
}

func newRateLimits(perPrefix float64, burst int, global float64, globalBurst int) *rateLimits {
	return &rateLimits{
		rate: rate.Limit(perPrefix), burst: burst,
		global:   rate.NewLimiter(rate.Limit(global), globalBurst),
		prefixes: map[string]*rate.Limiter{},
	}
}

// allow spends one request of prefix's bucket and of the door's; it
// reports false, spending nothing, when either is empty.
func (l *rateLimits) allow(prefix string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	pl, ok := l.prefixes[prefix]
	if !ok {
		bounded.MakeRoom(l.prefixes, maxRatePrefixes, func(v *rate.Limiter) bool { return v.TokensAt(now) >= float64(l.burst) })
		pl = rate.NewLimiter(l.rate, l.burst)
		l.prefixes[prefix] = pl
	}
	if pl.TokensAt(now) < 1 || l.global.TokensAt(now) < 1 {
		return false
	}
	pl.AllowN(now, 1)
	l.global.AllowN(now, 1)
	return true
}

// limitListener caps a listener's open connections in total
// (netutil.LimitListener, which makes Accept wait) and per remote IP
// address: a connection over its address's cap is closed at once. The
// per-address count is hand-written: x/net has no such limiter, and the
// libp2p resource manager guards libp2p connections only.
func limitListener(l net.Listener, total, perIP int, exempt []netip.Prefix) net.Listener {
	return &perIPListener{Listener: netutil.LimitListener(l, total), max: perIP, exempt: exempt, open: map[netip.Addr]int{}}
}

type perIPListener struct {
	net.Listener
	max    int
	exempt []netip.Prefix

	mu   sync.Mutex
	open map[netip.Addr]int
}

func (l *perIPListener) Accept() (net.Conn, error) {
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
		l.mu.Lock()
		if l.open[ip] >= l.max {
			l.mu.Unlock()
			_ = c.Close()
			continue
		}
		l.open[ip]++
		l.mu.Unlock()
		return &countedConn{Conn: c, release: sync.OnceFunc(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.open[ip]--; l.open[ip] <= 0 {
				delete(l.open, ip)
			}
		})}, nil
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
