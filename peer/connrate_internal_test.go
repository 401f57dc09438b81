package peer

import (
	"crypto/rand"
	"net/netip"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// TestConnRateLimiterBuckets: the node's limiter of new connections keeps
// libp2p's per-address rate (16 at once from one IPv4 address), adds a
// node-wide one across addresses (libp2p had none: many prefixes meant
// handshakes as fast as they came), gives a static relay's address a
// bucket of the node-wide rate (every relayed connection arrives from it)
// and leaves loopback exempt unless it is limited.
func TestConnRateLimiterBuckets(t *testing.T) {
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	relayID, err := lpeer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	const perSec = 10 // a bucket of 40
	relay := "/ip4/203.0.113.7/tcp/4001/p2p/" + relayID.String()
	allowed := func(cfg *Config, addr func(i int) netip.Addr, tries int) int {
		t.Helper()
		l, err := connRateLimiter(cfg)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i := range tries {
			if l.Allow(addr(i)) {
				n++
			}
		}
		return n
	}
	one := func(s string) func(int) netip.Addr {
		a := netip.MustParseAddr(s)
		return func(int) netip.Addr { return a }
	}
	// Addresses of as many IPv4 /24s: each /24 has a share of the
	// node-wide rate of its own (TestConnRatePerNetwork).
	many := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, byte(i), byte(i >> 8), 1}) }
	base := Config{NewConnsPerSecond: perSec, Relays: []string{relay}}
	limited := base
	limited.LimitLoopback = true
	for _, tc := range []struct {
		name  string
		cfg   *Config
		addr  func(int) netip.Addr
		tries int
		max   int // a second of refill at most
		min   int
	}{
		{"one address: libp2p's 16", &base, one("198.51.100.1"), 100, 16, 16},
		{"many addresses: the node-wide bucket", &base, many, 200, 4*perSec + perSec, 4 * perSec},
		{"the relay's address: its own bucket of the node-wide rate", &base, one("203.0.113.7"), 200, 4*perSec + perSec, 4 * perSec},
		{"loopback exempt", &base, one("127.0.0.1"), 500, 500, 500},
		{"loopback limited: one bucket for all of it", &limited, one("127.0.0.1"), 200, 4*perSec + perSec, 4 * perSec},
		{"default rate", &Config{}, many, 1000, 5 * DefaultNewConnsPerSecond, 4 * DefaultNewConnsPerSecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := allowed(tc.cfg, tc.addr, tc.tries); got < tc.min || got > tc.max {
				t.Errorf("%d of %d new connections allowed, want %d to %d", got, tc.tries, tc.min, tc.max)
			}
		})
	}
}
