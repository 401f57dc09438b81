package store

import (
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/acaptcha/acaptcha/skill/pool"
)

// TestPoolServedPruned_audit83: pool/served kept the id of every pool set
// served out (or expired after a serve) for good: PoolPrune removed
// expired ready sets but never a served id. The sets are what remote
// sessions consume (the pool refills at up to its token budget), so the
// bucket grew by about 90 bytes (a 64-digit content id, a time, bbolt's
// overhead) per set drawn, for the node's life: some 200 sets an hour is
// ~1.7 million ids, ~160 MB, a year. PoolPrune now forgets a served id
// after pool.ServedRetention, and the oldest beyond pool.MaxServedIDs;
// within the retention a served set is still refused.
func TestPoolServedPruned_audit83(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	now := time.Now()
	const n, maxAge = 500, time.Hour
	id := func(i int) string { return fmt.Sprintf("%064x", i) }
	for i := range n {
		if _, err := s.PoolAdd(id(i), now, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.PoolTake(now, maxAge, 1); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	left := func() int {
		t.Helper()
		k := 0
		if err := s.db.View(func(tx *bolt.Tx) error {
			k = tx.Bucket(bucketPoolServed).Stats().KeyN
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return k
	}
	// Within the retention: kept, and a served set is not added again.
	if _, err := s.PoolPrune(now.Add(10*maxAge), maxAge); err != nil {
		t.Fatal(err)
	}
	if k := left(); k != n {
		t.Fatalf("%d of %d served ids kept 10 h after their serve", k, n)
	}
	if ok, err := s.PoolAdd(id(7), now.Add(10*maxAge), []byte("{}")); err != nil || ok {
		t.Fatalf("a set served 10 h ago was added again: %v, %v", ok, err)
	}
	later := now.Add(pool.ServedRetention + time.Minute)
	// Past the retention, in batches: a full batch scans again at the
	// next prune.
	defer func(b int) { servedPruneBatch = b }(servedPruneBatch)
	servedPruneBatch = 200
	for i, want := range []int{300, 100, 0} {
		if _, err := s.PoolPrune(later.Add(time.Duration(i)*time.Minute), maxAge); err != nil {
			t.Fatal(err)
		}
		if k := left(); k != want {
			t.Fatalf("prune %d past the retention: %d served ids left, want %d", i+1, k, want)
		}
	}
	if ok, err := s.PoolAdd(id(7), later, []byte("{}")); err != nil || !ok {
		t.Fatalf("a set served past the retention was not added: %v, %v", ok, err)
	}
	// The scans are spaced by servedPruneEvery once a scan found less
	// than a batch: ids served long ago (as the clock says) wait for
	// the next scan.
	for i := range 10 {
		if _, err := s.PoolAdd(id(n+i), now, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.PoolTake(now, maxAge, 1); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	for _, c := range []struct {
		at   time.Duration
		want int
	}{{3 * time.Minute, 10}, {2*time.Minute + servedPruneEvery, 0}} {
		if _, err := s.PoolPrune(later.Add(c.at), maxAge); err != nil {
			t.Fatal(err)
		}
		if k := left(); k != c.want {
			t.Fatalf("prune at +%v: %d served ids left, want %d", c.at, k, c.want)
		}
	}
}

// TestPoolServedCapped: beyond maxServedIDs (pool.MaxServedIDs) the
// oldest served ids are forgotten first, within the retention.
func TestPoolServedCapped(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	defer func(m int) { maxServedIDs = m }(maxServedIDs)
	maxServedIDs = 100
	now := time.Now()
	const n = 150
	for i := range n {
		at := now.Add(time.Duration(i) * time.Second)
		if _, err := s.PoolAdd(fmt.Sprintf("%064x", i), at, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.PoolTake(at, time.Hour, 1); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	if _, err := s.PoolPrune(now.Add(time.Hour), time.Hour); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		ok, err := s.PoolAdd(fmt.Sprintf("%064x", i), now.Add(time.Hour), []byte("{}"))
		if err != nil {
			t.Fatal(err)
		}
		if forgotten := i < n-maxServedIDs; ok != forgotten {
			t.Fatalf("set %d (served %d s after the first): added again %v, want %v", i, i, ok, forgotten)
		}
	}
}
