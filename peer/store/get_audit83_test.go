package store

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
)

// TestGetVerifiesOne_audit83: Get (acaptcha attestations show and export
// KEY) listed the whole store, verifying the signature of every record,
// to return one; the CLI listed it once more before (to tell a damaged
// store from a missing key). The issued records are one per peer ID a
// remote makes the node verify (some 744,000 at the default draw budget
// and retention): a show of one record cost two signature checks per
// record held, and a copy of every envelope. Get now verifies only the
// record it returns.
func TestGetVerifiesOne_audit83(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	key, _ := testutil.NewKey(t)
	const n = 2000
	base := time.Now().Add(-time.Hour)
	keys := make([]string, n)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				_, subject := testutil.NewKey(t)
				at := base.Add(time.Duration(i) * time.Second)
				env, a := sealed(t, key, subject, at, 24*time.Hour)
				keys[i] = string(entryKey(subject, a.IssuedAt, env))
				if err := s.Put(Issued, env, a); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	var checks atomic.Int64
	old := verifyEnvelope
	verifyEnvelope = func(env []byte, o protocol.VerifyOptions) (*protocol.Attestation, error) {
		checks.Add(1)
		return old(env, o)
	}
	t.Cleanup(func() { verifyEnvelope = old })

	want := []byte(keys[n/2])
	full := fmt.Sprintf("%x", want)
	start := time.Now()
	e, err := s.Get(full)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if e.Key != full {
		t.Fatalf("Get returned key %s, want %s", e.Key, full)
	}
	t.Logf("%d records: Get verified %d signatures in %v", n, checks.Load(), took)
	if c := checks.Load(); c > 1 {
		t.Fatalf("Get of one record verified %d signatures of %d records, want 1", c, n)
	}
	// By suffix (as printed, shortened) and a missing key.
	checks.Store(0)
	if e, err := s.Get(full[len(full)-12:]); err != nil || e.Key != full {
		t.Fatalf("Get by suffix: %v, %v", e, err)
	}
	if _, err := s.Get("00000000deadbeef"); err == nil {
		t.Fatal("Get of a missing key: no error")
	}
	if c := checks.Load(); c > 1 {
		t.Fatalf("Get by suffix and of a missing key verified %d signatures, want 1", c)
	}
}
