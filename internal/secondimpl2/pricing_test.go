package secondimpl2

import (
	"fmt"
	"testing"
	"time"
)

// bucket is a token bucket refilled continuously, starting full.
type bucket struct {
	capacity, rate, tokens float64
	at                     time.Time
}

func newBucket(capacity, rate float64, now time.Time) *bucket {
	return &bucket{capacity, rate, capacity, now}
}

func (b *bucket) fill(now time.Time) {
	b.tokens = min(b.capacity, b.tokens+now.Sub(b.at).Seconds()*b.rate)
	b.at = now
}

// pricer is trust.md §3.4's signature-check pricing of the Go node.
type pricer struct {
	forwarder, group, block map[string]*bucket
	node                    *bucket
	seen                    map[string]time.Time // message ID → validated at
}

const nodeReserve = 16384

func newPricer(now time.Time) *pricer {
	return &pricer{map[string]*bucket{}, map[string]*bucket{}, map[string]*bucket{},
		newBucket(65536, 4096, now), map[string]time.Time{}}
}

type gossipMsg struct {
	id               string
	forwarder, group string // group "" for none (loopback)
	block            string // the /32 when the group is an IPv6 /48
	admitted         bool   // the node admits the forwarder directly
	price            int
}

func get(m map[string]*bucket, k string, c, r float64, now time.Time) *bucket {
	b, ok := m[k]
	if !ok {
		b = newBucket(c, r, now)
		m[k] = b
	}
	b.fill(now)
	return b
}

// keep prices one message; true when it is kept for validation.
func (p *pricer) keep(m gossipMsg, now time.Time) bool {
	if at, ok := p.seen[m.id]; m.id != "" && ok && now.Sub(at) >= 0 && now.Sub(at) < 100*time.Second {
		return true // a copy: free
	}
	c := float64(m.price)
	if m.price > 2048 {
		return false
	}
	bs := []*bucket{get(p.forwarder, m.forwarder, 2048, 128, now)}
	if m.group != "" {
		bs = append(bs, get(p.group, m.group, 8192, 512, now))
		if m.block != "" {
			bs = append(bs, get(p.block, m.block, 16384, 1024, now))
		}
	}
	p.node.fill(now)
	need := c
	if !m.admitted {
		need += nodeReserve
	}
	if p.node.tokens < need {
		return false
	}
	for _, b := range bs {
		if b.tokens < c {
			return false
		}
	}
	for _, b := range append(bs, p.node) {
		b.tokens -= c
	}
	return true
}

// The figures trust.md §3.4 and its 1.5.0 and 1.6.0 changes state.
func TestGossipPricingFigures(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	// distinct messages (no ID the pricer saw validated), ed25519 author
	// and record keys: 2 units each
	msg := func(fwd, group, block string, admitted bool) gossipMsg {
		return gossipMsg{forwarder: fwd, group: group, block: block, admitted: admitted, price: 2}
	}
	// one forwarder: 1 024 ed25519 records at once, then 64 a second
	p := newPricer(now)
	kept := 0
	one := msg("f", "g", "", false)
	for i := 0; i < 5000; i++ {
		if p.keep(one, now) {
			kept++
		}
	}
	if kept != 1024 {
		t.Errorf("one forwarder at once: %d records", kept)
	}
	kept = 0
	for i := 0; i < 5000; i++ {
		if p.keep(one, now.Add(time.Second)) {
			kept++
		}
	}
	if kept != 64 {
		t.Errorf("one forwarder the next second: %d records", kept)
	}
	// 256 IPv4 /24s of 4 forwarders: 49 152 units at once, 4 096 a second;
	// an admitted forwarder still has 16 384.
	p = newPricer(now)
	units := 0
	for g := 0; g < 256; g++ {
		for f := 0; f < 4; f++ {
			m := msg(fmt.Sprint(g, "/", f), fmt.Sprint(g), "", false)
			for i := 0; i < 1030; i++ {
				if p.keep(m, now) {
					units += 2
				}
			}
		}
	}
	if units != 49152 {
		t.Errorf("256 /24s at once: %d units", units)
	}
	units = 0
	for g := 0; g < 256; g++ {
		m := msg(fmt.Sprint(g, "/0"), fmt.Sprint(g), "", false)
		for i := 0; i < 100; i++ {
			if p.keep(m, now.Add(time.Second)) {
				units += 2
			}
		}
	}
	if units != 4096 {
		t.Errorf("256 /24s the next second: %d units", units)
	}
	units = 0
	for f := 0; f < 16; f++ {
		m := msg(fmt.Sprint("adm", f), fmt.Sprint("a", f), "", true)
		for i := 0; i < 1030; i++ {
			if p.keep(m, now.Add(time.Second)) {
				units += 2
			}
		}
	}
	if units != 16384 {
		t.Errorf("admitted forwarders after the flood: %d units", units)
	}
	// a /42: 64 /48s of one /32: 16 384 units at once, 1 024 a second
	p = newPricer(now)
	units = 0
	for g := 0; g < 64; g++ {
		for f := 0; f < 4; f++ {
			m := msg(fmt.Sprint(g, "/", f), fmt.Sprint("48-", g), "2001:db8::/32", false)
			for i := 0; i < 1030; i++ {
				if p.keep(m, now) {
					units += 2
				}
			}
		}
	}
	if units != 16384 {
		t.Errorf("a /42 at once: %d units", units)
	}
	units = 0
	for g := 0; g < 64; g++ {
		m := msg(fmt.Sprint(g, "/0"), fmt.Sprint("48-", g), "2001:db8::/32", false)
		for i := 0; i < 100; i++ {
			if p.keep(m, now.Add(time.Second)) {
				units += 2
			}
		}
	}
	if units != 1024 {
		t.Errorf("a /42 the next second: %d units", units)
	}
	// copies of a message validated less than 100 s before are free
	p = newPricer(now)
	p.seen["x"] = now
	for i := 0; i < 3000; i++ {
		if !p.keep(gossipMsg{id: "x", forwarder: "f", price: 2}, now.Add(99*time.Second)) {
			t.Fatal("a copy within 100 s was priced")
		}
	}
	// a price over 2 048 is always dropped
	if p.keep(gossipMsg{id: "big", forwarder: "new", price: keyUnits(0, 8000) + 1}, now) {
		t.Error("price over 2 048 kept")
	}
}
