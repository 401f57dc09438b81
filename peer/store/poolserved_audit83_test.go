package store

import (
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestPoolServedPruned_audit83: pool/served keeps the id of every pool
// set served out (or expired after a serve), for good: PoolPrune removes
// expired ready sets but never a served id. The sets are what remote
// sessions consume (the pool refills at up to its token budget, 2,000,000
// tokens an hour by default), so the bucket grows by about 90 bytes (a
// 64-digit content id, a time, bbolt's overhead) per set drawn, for the
// node's life: some 200 sets an hour is ~1.7 million ids, ~160 MB, a
// year, never reclaimed. An id older than the pool's MaxAge could go (a
// set re-added under it would be a fresh copy of content served out over
// MaxAge ago); that changes PoolAdd's "never again" rule (pool.Store), a
// design decision: proposed, not made.
func TestPoolServedPruned_audit83(t *testing.T) {
	t.Skip("audit83: pool/served grows by one id per pool set served, never pruned (~160 MB/year at the default token budget); proposed: PoolPrune drops served ids older than MaxAge")
	s, _ := openTemp(t)
	defer s.Close()
	now := time.Now()
	const n, maxAge = 500, time.Hour
	for i := range n {
		if _, err := s.PoolAdd(fmt.Sprintf("%064x", i), now, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.PoolTake(now, maxAge, 1); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	if _, err := s.PoolPrune(now.Add(10*maxAge), maxAge); err != nil {
		t.Fatal(err)
	}
	left := 0
	_ = s.db.View(func(tx *bolt.Tx) error {
		left = tx.Bucket(bucketPoolServed).Stats().KeyN
		return nil
	})
	if left > 0 {
		t.Fatalf("%d of %d served ids kept 10×MaxAge after their serve", left, n)
	}
}
