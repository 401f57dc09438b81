package httpgw

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestRequestRatesPerIPv6Block (h125): the door's request rates had
// buckets per IP prefix and in total only. A /48 costs nothing to the
// holder of a /32 (65,536 of them), so the /48s of one allocation, each
// within its prefix's rate, spent the door's whole rate of creates and
// verifies, and of reads, and every other client was answered
// rate_limited (with the defaults, 20 /48s at 10 per second each took
// all 200). The /48s of one IPv6 /32 now share a block bucket of
// BlockFactor (2) prefixes' rate and burst, as the connection and
// session caps count per block; another network keeps its share.
func TestRequestRatesPerIPv6Block(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	const perPrefix, global = 3, 30
	_, _, base := fakeDoor(t, func(c *Config) {
		c.TrustedProxies = loopbackProxies
		c.RequestRate, c.RequestBurst = 1, perPrefix
		c.GlobalRequestRate, c.GlobalRequestBurst = 1, global
		c.Now = clock
	})
	type kind struct {
		name, method, path, body string
	}
	for _, k := range []kind{
		{"verifies", http.MethodPost, "/v1/attestations/verify", `{"attestation":"AAAA"}`},
		{"reads", http.MethodGet, "/openapi.json", ""},
	} {
		passed := 0
		// Twice as many /48s of 2001:db8::/32 as it takes to spend the
		// door's burst, each sending its prefix's burst.
		for n := range 2 * global / perPrefix {
			for range perPrefix {
				if st, _ := as(t, base, fmt.Sprintf("2001:db8:%x::1", n+1), k.method, k.path, k.body, nil); st != http.StatusTooManyRequests {
					passed++
				}
			}
		}
		if want := 2 * perPrefix; passed > want {
			t.Errorf("%s: the /48s of one IPv6 /32 got %d requests past the rate limits, want at most %d (BlockFactor prefixes' burst)", k.name, passed, want)
		}
		for _, client := range []string{"198.51.100.1", "2001:db9::1"} {
			if st, code := as(t, base, client, k.method, k.path, k.body, nil); st == http.StatusTooManyRequests {
				t.Errorf("%s: a client of another network after one /32's burst: %d %s", k.name, st, code)
			}
		}
	}
}
