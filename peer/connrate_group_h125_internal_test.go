package peer

import (
	"net/netip"
	"testing"
)

// TestConnRatePerNetwork (h125): the node-wide rate of new connections
// (NewConnsPerSecond, a bucket of four seconds of it) had no share per
// network, and libp2p's per-address rate (16 at once, then one every
// 5 s) is per IPv4 address and IPv6 /56 or /48: the 256 addresses of one
// IPv4 /24 (4 096 connections at once, 51 a second after), or the /48s
// of one IPv6 /32, spent the whole node-wide bucket, and every other
// network's new connection, inbound or dialed, was refused ("rate limit
// exceeded") while they kept at it. One IPv4 /24 now gets an eighth of
// the node-wide rate and bucket, one IPv6 /32 a quarter, and the others
// still connect.
func TestConnRatePerNetwork(t *testing.T) {
	for _, tc := range []struct {
		name  string
		addr  func(i int) netip.Addr
		share int // the network's bucket
	}{
		{"one IPv4 /24", func(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}) }, newConnBurstSeconds * DefaultNewConnsPerSecond / 8},
		{"one IPv6 /32", func(i int) netip.Addr {
			return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i >> 8), byte(i)})
		}, newConnBurstSeconds * DefaultNewConnsPerSecond / 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := connRateLimiter(&Config{})
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			for i := range 256 {
				for range 16 {
					if l.Allow(tc.addr(i)) {
						got++
					}
				}
			}
			// A second of refill at most, beyond the bucket.
			if most := tc.share + tc.share/newConnBurstSeconds; got > most {
				t.Errorf("%s got %d new connections at once, want at most %d of the node's %d", tc.name, got, most, newConnBurstSeconds*DefaultNewConnsPerSecond)
			}
			refused := 0
			for i := range 64 {
				other := netip.AddrFrom4([4]byte{203, 0, byte(i), 1})
				if i%2 == 1 {
					other = netip.AddrFrom16([16]byte{0x2a, 0x00, byte(i), 0, 0, 1})
				}
				if !l.Allow(other) {
					refused++
				}
			}
			if refused > 0 {
				t.Errorf("after %s spent its share, %d of 64 new connections of other networks were refused", tc.name, refused)
			}
		})
	}
}
