package pool

import (
	"fmt"
	"testing"
	"time"
)

// TestMemStoreForgetsServed: the in-memory store remembers a served id
// (PoolAdd refuses it) until ServedRetention has passed, then forgets it
// at the next prune, as the node's bbolt store does.
func TestMemStoreForgetsServed(t *testing.T) {
	m := NewMemStore()
	now := time.Now()
	const n = 20
	for i := range n {
		if ok, err := m.PoolAdd(fmt.Sprint(i), now, []byte("{}")); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if _, ok, err := m.PoolTake(now, time.Hour, 1); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	for _, c := range []struct {
		at     time.Duration
		served int
	}{{ServedRetention - time.Minute, n}, {ServedRetention, 0}} {
		if _, err := m.PoolPrune(now.Add(c.at), time.Hour); err != nil {
			t.Fatal(err)
		}
		if len(m.served) != c.served {
			t.Fatalf("prune at +%v: %d served ids remembered, want %d", c.at, len(m.served), c.served)
		}
		ok, err := m.PoolAdd("3", now.Add(c.at), []byte("{}"))
		if err != nil || ok != (c.served == 0) {
			t.Fatalf("prune at +%v: a served set added again: %v, %v", c.at, ok, err)
		}
	}
}
