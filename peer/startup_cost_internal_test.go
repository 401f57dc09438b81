package peer

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
)

// fillStartupStore writes issued records of ours about fresh subjects
// and learned records of fresh issuers into a store at path.
func fillStartupStore(t *testing.T, path string, self crypto.PrivKey, issued, learned int) {
	t.Helper()
	st, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	per := (issued + 63) / 64
	for w := 0; w < issued; w += per {
		wg.Go(func() {
			for i := w; i < min(w+per, issued); i++ {
				sub := testutil.NewPeerID(t)
				a := MakeTestAttestation(self, sub, i%2 == 0, now.Add(-time.Duration(i%3600)*time.Second), 24*time.Hour)
				env, err := protocol.Seal(a, self)
				if err == nil {
					err = st.Put(Issued, env, a)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var ls []Learned
	for i := range learned {
		k, from := testutil.NewKey(t)
		sub := testutil.NewPeerID(t)
		a := MakeTestAttestation(k, sub, true, now, 24*time.Hour)
		env, err := protocol.Seal(a, k)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, Learned{Attestation: a, Envelope: env, Via: ViaGossip, From: from, LearnedAt: now})
		if len(ls) == 4096 || i == learned-1 {
			if err := st.PutLearned(ls...); err != nil {
				t.Fatal(err)
			}
			ls = ls[:0]
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStartupTrustIndexCost measures loading the trust index of a store
// holding ACAPTCHA_STARTUP_ISSUED issued records of ours and
// ACAPTCHA_STARTUP_LEARNED learned ones (a measurement, run on demand;
// store.TestListOwnChecksNoOwnSignature counts the checks). Figures on
// a loaded 2-core machine, 40 000 issued: 6.1 s (152 µs a record) when
// every signature was checked, 0.40 s (10 µs) reading our own records
// without; learned records cost ~110 µs each when they were verified at
// start, ~35 µs decoded only (their check runs after start:
// TestStartupLearnedCost).
func TestStartupTrustIndexCost(t *testing.T) {
	issued, learned := 0, 0
	if v, err := strconv.Atoi(os.Getenv("ACAPTCHA_STARTUP_ISSUED")); err == nil {
		issued = v
	}
	if v, err := strconv.Atoi(os.Getenv("ACAPTCHA_STARTUP_LEARNED")); err == nil {
		learned = v
	}
	if issued+learned == 0 {
		t.Skip("a measurement: set ACAPTCHA_STARTUP_ISSUED and ACAPTCHA_STARTUP_LEARNED")
	}
	self, id := testutil.NewKey(t)
	path := filepath.Join(t.TempDir(), "store.db")
	t0 := time.Now()
	fillStartupStore(t, path, self, issued, learned)
	t.Logf("filled %d issued and %d learned records in %s", issued, learned, time.Since(t0).Round(time.Millisecond))
	st, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	h0 := m.HeapAlloc
	// The peak heap while the index loads, sampled every 5 ms.
	var peak atomic.Uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	t0 = time.Now()
	idx, err := loadTrustIndex(st, id, self.GetPublic())
	close(done)
	<-sampled
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(t0)
	t.Logf("trust index of %d issued subjects, %d learned: %s (%.1f µs a record), heap peak %.1f MB above the start", len(idx.issued), idx.nLearned, el.Round(time.Millisecond), float64(el.Microseconds())/float64(issued+learned), float64(peak.Load()-min(peak.Load(), h0))/1e6)
}
