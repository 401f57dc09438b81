package protocol

import (
	"math/rand/v2"
	"testing"
)

// hashIndex behaves as a map (of a first posting and a list length)
// through random pushes, drops, updates and deletes, with keys crowded
// into few buckets (so that probe runs wrap the table and deletions
// shift entries back across its end).
func TestHashIndexMatchesMap(t *testing.T) {
	t.Parallel() // pure computation on its own values, no package state written
	r := rand.New(rand.NewPCG(21, 22))
	// spread 0: low bits within 40 of a multiple of 1024, so that homes
	// sit at both ends of every table up to 1024 buckets and runs wrap.
	for _, spread := range []uint64{0, 40, 1 << 10, 1 << 62} {
		var x hashIndex
		m := map[uint64]uint32{}
		lens := map[uint64]uint32{}
		key := func() uint64 {
			// Low bits from a small range, high bits varied: many keys
			// share a home bucket.
			if spread == 0 {
				return (r.Uint64N(80)-40)&1023 | r.Uint64N(4)<<40
			}
			return r.Uint64N(spread) | r.Uint64N(4)<<40
		}
		for step := range 20000 {
			h := key()
			switch r.IntN(5) {
			case 0, 1:
				v := r.Uint32N(1 << 20)
				i, found := x.slot(h)
				if _, ok := m[h]; ok != found {
					t.Fatalf("spread %d step %d: slot(%d) found %v, map %v", spread, step, h, found, ok)
				}
				if found && x.value(i) != m[h] {
					t.Fatalf("spread %d step %d: value %d, map %d", spread, step, x.value(i), m[h])
				}
				x.push(i, v)
				m[h] = v
				lens[h]++
			case 2:
				if _, ok := m[h]; ok {
					v := r.Uint32N(1 << 20)
					x.set(h, v)
					m[h] = v
				}
			case 3:
				if _, ok := m[h]; ok {
					x.drop(h)
					if lens[h]--; lens[h] == 0 {
						delete(m, h)
						delete(lens, h)
					}
				}
			default:
				x.del(h)
				delete(m, h)
				delete(lens, h)
			}
			if x.len() != len(m) {
				t.Fatalf("spread %d step %d: %d held, map %d", spread, step, x.len(), len(m))
			}
			if step%97 == 0 {
				for k, v := range m {
					if got, ok := x.get(k); !ok || got != v {
						t.Fatalf("spread %d step %d: get(%d) = %d %v, want %d", spread, step, k, got, ok, v)
					}
					if got, n, ok := x.list(k); !ok || got != v || n != lens[k] {
						t.Fatalf("spread %d step %d: list(%d) = %d, %d, %v, want %d, %d", spread, step, k, got, n, ok, v, lens[k])
					}
				}
				n := 0
				x.each(func(h uint64) {
					if _, ok := m[h]; !ok {
						t.Fatalf("spread %d step %d: %d held, not in the map", spread, step, h)
					}
					n++
				})
				if n != len(m) {
					t.Fatalf("spread %d step %d: each saw %d, want %d", spread, step, n, len(m))
				}
			}
			if _, ok := x.get(h); ok != (func() bool { _, ok := m[h]; return ok })() {
				t.Fatalf("spread %d step %d: get(%d) presence differs", spread, step, h)
			}
		}
	}
}

// get returns the first posting of h (tests).
func (x *hashIndex) get(h uint64) (uint32, bool) {
	first, _, ok := x.list(h)
	return first, ok
}

// set sets the first posting of h, which must be present, to v (tests).
func (x *hashIndex) set(h uint64, v uint32) {
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		if x.b[i].key == h && x.b[i].val != 0 {
			x.b[i].val = v + 1
			return
		}
	}
}

// del removes h, if present (tests).
func (x *hashIndex) del(h uint64) {
	if x.n == 0 {
		return
	}
	for i := h & x.mask; x.b[i].val != 0; i = (i + 1) & x.mask {
		if x.b[i].key == h {
			x.delAt(i)
			return
		}
	}
}

// each calls f with every hash held (tests).
func (x *hashIndex) each(f func(h uint64)) {
	for _, b := range x.b {
		if b.val != 0 {
			f(b.key)
		}
	}
}
