package store

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// TestNewestSoundMemory_audit83: the node's start (loadTrustIndex)
// copied every issued record out of bbolt and kept each one's decoded
// attestation until it had picked the winners, then returned every winner
// at once: about 3.4 KB of peak heap a record (20,000 records: 69 MB
// peak), and remote peers make the node issue one record per session
// drawn (some 744,000 at the default draw budget and retention, one per
// fresh peer ID, each its subject's only record, so a winner): ~2.5 GB at
// every start. EachNewestSound reads a chunk of records at a time and
// yields its winners before it reads the next: what it holds does not
// grow with the store.
func TestNewestSoundMemory_audit83(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	key, _ := testutil.NewKey(t)
	const n, chunk = 6000, 200
	defer func(n int) { newestChunk = n }(newestChunk)
	newestChunk = chunk
	base := time.Now().Add(-2 * time.Hour)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				_, subject := testutil.NewKey(t)
				env, a := sealed(t, key, subject, base.Add(time.Duration(i)*time.Second), 24*time.Hour)
				if err := s.Put(Issued, env, a); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	h0 := heap()
	var peak uint64
	got := 0
	bad, err := s.EachNewestSound(Issued, key.GetPublic(), func(e Entry) error {
		got++
		if got%chunk == chunk/2 {
			peak = max(peak, heap())
		}
		return nil
	})
	if err != nil || bad != 0 || got != n {
		t.Fatalf("EachNewestSound: %d of %d yielded, %d damaged, %v", got, n, bad, err)
	}
	held := float64(peak-min(peak, h0)) / n
	t.Logf("heap %d at start, %d at the peak", h0, peak)
	t.Logf("%d records in chunks of %d: %.0f bytes held a record at the peak (%.1f MB)", n, chunk, held, float64(peak-min(peak, h0))/1e6)
	// This test's records are small (no transcript): a chunk of all 6,000
	// held about 1,250 bytes a record (7.5 MB); a chunk of 200, about
	// 40 bytes a record of the 6,000, and nothing measurable after GC.
	if held > 600 {
		t.Fatalf("EachNewestSound held %.0f bytes a record over %d records", held, n)
	}
}
