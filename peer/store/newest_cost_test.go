package store

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// TestListNewestCopiesWhatItReturns: ListNewest (MCP list_attestations,
// which callers beyond loopback reach over --http at 10 requests a second
// per network) copied every record of the direction out of bbolt and
// decoded each to sort them by issue time, for a listing of 20: the issued
// records are one per session drawn, some 744,000 at the default draw
// budget and retention, so each call allocated hundreds of megabytes and
// seconds of CPU. The issue time is in the key (entryKey): the newest are
// chosen from the keys, and only they are copied, decoded and verified.
func TestListNewestCopiesWhatItReturns(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	key, _ := testutil.NewKey(t)
	const n = 3000
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
	if _, _, err := s.ListNewest(Issued, "", 20); err != nil { // the log checkpointed
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	es, total, err := s.ListNewest(Issued, "", 20)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d records: ListNewest(20) allocated %d KiB (%d bytes a record) in %v", n, alloc>>10, alloc/n, took)
	if total != n || len(es) != 20 {
		t.Fatalf("ListNewest: %d entries of %d, want 20 of %d", len(es), total, n)
	}
	for i, e := range es {
		if want := base.Add(time.Duration(n-1-i) * time.Second).UTC().Truncate(time.Second); !e.Attestation.IssuedAt.Equal(want) {
			t.Fatalf("entry %d issued at %v, want %v (newest first)", i, e.Attestation.IssuedAt, want)
		}
	}
	// 20 records decoded and verified, and a key per record at most.
	if alloc > 1<<20 {
		t.Errorf("ListNewest(20) of %d records allocated %d KiB, want under 1 MiB (what it returns, not the store)", n, alloc>>10)
	}
}

// ListNewest chooses from the keys what the full listing chooses by the
// decoded issue times: both directions, ties, a peer's records, limits.
func TestListNewestMatchesFullListing(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	key, self := testutil.NewKey(t)
	_, subject := testutil.NewKey(t)
	base := time.Now().Add(-time.Hour)
	for i := range 60 {
		sub := subject
		if i%3 != 0 {
			_, sub = testutil.NewKey(t)
		}
		env, a := sealed(t, key, sub, base.Add(time.Duration(i/4)*time.Second), 24*time.Hour) // 4 records a second: ties
		if err := s.Put(Issued, env, a); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 30 {
		ik, _ := testutil.NewKey(t)
		env, a := sealed(t, ik, self, base.Add(time.Duration(i/2)*time.Second), 24*time.Hour)
		if err := s.Put(Received, env, a); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []Direction{"", Issued, Received} {
		for _, p := range []peer.ID{"", subject} {
			for _, limit := range []int{1, 5, 20, 89, 200} {
				got, gn, err := s.ListNewest(d, p, limit)
				if err != nil {
					t.Fatal(err)
				}
				want, wn, err := s.listNewestAll(d, p, limit)
				if err != nil {
					t.Fatal(err)
				}
				if gn != wn || len(got) != len(want) {
					t.Fatalf("%q %s limit %d: %d of %d, want %d of %d", d, p, limit, len(got), gn, len(want), wn)
				}
				for i := range got {
					if got[i].Key != want[i].Key || got[i].Direction != want[i].Direction {
						t.Fatalf("%q %s limit %d: entry %d is %s %s, want %s %s", d, p, limit, i, got[i].Direction, got[i].Key, want[i].Direction, want[i].Key)
					}
				}
			}
		}
	}
}
