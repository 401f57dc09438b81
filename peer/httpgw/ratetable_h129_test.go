package httpgw

import (
	"fmt"
	"testing"
	"time"
)

// The door's request-rate tables (prefixes and IPv6 blocks, creates and
// verifies or reads) stay within maxRatePrefixes while fresh networks
// send a request each at half the door's total rate for an hour of the fake
// clock, and a busy network that spends past its rate all along is never
// forgotten, so that the flood cannot hand it a full bucket again (a
// regression test of a cap that had none; passes on the code as it is).
func TestRateTablesBoundedOverAnHour_h129(t *testing.T) {
	l := newRateLimits(DefaultRequestRate, DefaultRequestBurst, DefaultGlobalRequestRate, DefaultGlobalRequestBurst)
	now := time.Unix(1_700_000_000, 0)
	const busy = "192.0.2.0/24"
	tick := 2 * time.Second / DefaultGlobalRequestRate
	steps := int(time.Hour / tick)
	refused := 0
	for i := range steps {
		now = now.Add(tick)
		// A fresh /48 of one of 8,192 /32s.
		blk := i % 8192
		prefix := fmt.Sprintf("2a0f:%x:%x::/48", blk, i>>13)
		l.allow(prefix, fmt.Sprintf("2a0f:%x::/32", blk), now)
		// The busy network asks at twice its rate: its bucket stays
		// about empty (a bucket full again is forgotten first, at no
		// loss: a forgotten one starts full).
		if i%(DefaultGlobalRequestRate/2/DefaultRequestRate/2) == 0 && !l.allow(busy, "", now) {
			refused++
		}
		if i%4096 == 0 || i == steps-1 {
			l.mu.Lock()
			np, nb := len(l.prefixes), len(l.blocks)
			_, kept := l.prefixes[busy]
			l.mu.Unlock()
			if np > maxRatePrefixes || nb > maxRatePrefixes {
				t.Fatalf("step %d: %d prefixes, %d blocks tracked, over %d", i, np, nb, maxRatePrefixes)
			}
			if !kept {
				t.Fatalf("step %d: the busy network's bucket was forgotten", i)
			}
		}
	}
	asked := (steps + 4) / 5
	t.Logf("%d requests of fresh networks over an hour: %d prefixes, %d blocks tracked; the busy network refused %d of %d", steps, len(l.prefixes), len(l.blocks), refused, asked)
	// Its own rate and burst, no more: a network forgotten while busy
	// would have had a full bucket again.
	if allowed, most := asked-refused, int(time.Hour/time.Second)*DefaultRequestRate+DefaultRequestBurst; allowed > most {
		t.Fatalf("the busy network was allowed %d requests in an hour, over its %d", allowed, most)
	}
}
