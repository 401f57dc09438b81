package mcpserver

import (
	"net/netip"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// The request buckets of callers beyond loopback (networks and IPv6
// /32s, one table) stay within maxRateGroups while fresh /48s of many
// /32s each send a request at half the remote rate for an hour of the
// fake clock, and a network asking at twice its rate all along is never
// forgotten: it is allowed its rate and burst, no more (a regression test
// of a cap that had none; passes on the code as it is).
func TestRateGroupsBoundedOverAnHour_h129(t *testing.T) {
	l := &rateLimits{rate: rate.Limit(DefaultHTTPRequestRate), burst: DefaultHTTPRequestBurst,
		remote: rate.NewLimiter(rate.Limit(DefaultHTTPRemoteRate), 2*DefaultHTTPRemoteRate), groups: map[netip.Prefix]*rate.Limiter{}}
	now := time.Unix(1_700_000_000, 0)
	busy := netip.MustParsePrefix("192.0.2.0/24")
	tick := 2 * time.Second / DefaultHTTPRemoteRate
	steps := int(time.Hour / tick)
	every := DefaultHTTPRemoteRate / 2 / DefaultHTTPRequestRate / 2 // the busy network asks 20 a second
	asked, allowed := 0, 0
	for i := range steps {
		now = now.Add(tick)
		blk := i % 1024
		a := [16]byte{0x2a, 0x0f, byte(blk >> 8), byte(blk), byte(i >> 8), byte(i)}
		l.allow(netip.PrefixFrom(netip.AddrFrom16(a), 48), now)
		if i%every == 0 {
			asked++
			if l.allow(busy, now) {
				allowed++
			}
		}
		if i%4096 == 0 || i == steps-1 {
			l.mu.Lock()
			n := len(l.groups)
			_, kept := l.groups[busy]
			l.mu.Unlock()
			if n > maxRateGroups {
				t.Fatalf("step %d: %d groups tracked, over %d", i, n, maxRateGroups)
			}
			if !kept {
				t.Fatalf("step %d: the busy network's bucket was forgotten", i)
			}
		}
	}
	most := int(time.Hour/time.Second)*DefaultHTTPRequestRate + DefaultHTTPRequestBurst
	t.Logf("%d requests of fresh networks over an hour: %d groups tracked; the busy network allowed %d of %d (at most %d)", steps, len(l.groups), allowed, asked, most)
	if allowed > most {
		t.Fatalf("the busy network was allowed %d requests in an hour, over its %d", allowed, most)
	}
}
