package store

import (
	"errors"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// flakySyncer fails some of the syncs and direct writes of the syncer it
// wraps, as a device that reports write errors now and then: a failure
// either does nothing or writes (and syncs) first and then reports the
// error, the data being on the disk although the write was reported
// failed.
type flakySyncer struct {
	fileSyncer
	mu     sync.Mutex
	rng    *rand.Rand
	rate   float64
	fails  atomic.Int64
	failAt atomic.Bool // fail every call while set
}

func (f *flakySyncer) fail() (fail, write bool) {
	if f.failAt.Load() {
		return true, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rng.Float64() >= f.rate {
		return false, true
	}
	return true, f.rng.IntN(2) == 0
}

func (f *flakySyncer) fdatasync(file *os.File) error {
	fail, write := f.fail()
	if write {
		if err := f.fileSyncer.fdatasync(file); err != nil || !fail {
			return err
		}
	}
	f.fails.Add(1)
	return errors.New("injected sync failure")
}

func (f *flakySyncer) writeDSync(file *os.File, b []byte, off int64) error {
	fail, write := f.fail()
	if write {
		if err := f.fileSyncer.writeDSync(file, b, off); err != nil || !fail {
			return err
		}
	}
	f.fails.Add(1)
	return errors.New("injected write failure")
}

// Under concurrent Puts whose shared log appends fail now and then (the
// write or its sync reported failed, the data reaching the file or not),
// every write of a failed append is told so, and after a crash the store
// holds exactly the records whose Put returned nil: none acknowledged is
// lost, none reported failed comes back (a successful append follows
// the last failure).
func TestFlakySyncConcurrentPuts(t *testing.T) {
	syncers(t, func(t *testing.T) {
		key, _ := testutil.NewKey(t)
		const writers, each = 8, 60
		envs, as := records(t, key, writers*each+1)
		s, path := openTemp(t)
		fs := &flakySyncer{fileSyncer: s.wal.sync, rng: rand.New(rand.NewPCG(1, 2)), rate: 0.3}
		s.wal.sync = fs
		var (
			mu             sync.Mutex
			acked, refused = map[string]bool{}, map[string]bool{}
			wg             sync.WaitGroup
		)
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					k := w*each + i
					err := s.Put(Issued, envs[k], as[k])
					mu.Lock()
					if err == nil {
						acked[string(envs[k])] = true
					} else {
						refused[string(envs[k])] = true
					}
					mu.Unlock()
					if i%17 == 0 {
						// A read checkpoints: the failures meet
						// checkpoints as well as appends.
						if _, err := s.List(Issued, as[k].Subject); err != nil {
							t.Error(err)
						}
					}
				}
			})
		}
		wg.Wait()
		if fs.fails.Load() == 0 || len(refused) == 0 || len(acked) == 0 {
			t.Fatalf("%d injected failures, %d refused, %d acknowledged: the test tested nothing", fs.fails.Load(), len(refused), len(acked))
		}
		// One append that succeeds after the last failure.
		fs.rate = 0
		last := writers * each
		if err := s.Put(Issued, envs[last], as[last]); err != nil {
			t.Fatal(err)
		}
		acked[string(envs[last])] = true
		s = s.crashReopen(t, path)
		defer s.Close()
		got := listed(t, s, Issued)
		lost, back := 0, 0
		for e := range acked {
			if !got[e] {
				lost++
			}
		}
		for e := range refused {
			if got[e] {
				back++
			}
		}
		t.Logf("%d injected failures; %d acknowledged, %d refused; recovered %d from the log", fs.fails.Load(), len(acked), len(refused), s.Recovered().Records)
		if lost > 0 || back > 0 {
			t.Fatalf("after the crash: %d of %d acknowledged records lost, %d of %d refused ones came back", lost, len(acked), back, len(refused))
		}
	})
}

// When the log's sync fails, every write of the failed append gets the
// error, however many share it; the next write that succeeds has put the
// records acknowledged before the failure into bbolt (they shared blocks
// with the failed write) before it returns.
func TestSyncFailureReachesEveryWaiter(t *testing.T) {
	syncers(t, func(t *testing.T) {
		key, _ := testutil.NewKey(t)
		const n = 12
		envs, as := records(t, key, n+2)
		s, path := openTemp(t)
		if err := s.Put(Issued, envs[0], as[0]); err != nil {
			t.Fatal(err)
		}
		fs := &flakySyncer{fileSyncer: s.wal.sync, rng: rand.New(rand.NewPCG(3, 4))}
		fs.failAt.Store(true)
		s.wal.sync = fs
		// Hold the first commit until every write is queued: they share
		// the next append.
		release := make(chan struct{})
		var once sync.Once
		s.beforeCommit = func() { once.Do(func() { <-release }) }
		errs := make(chan error, n)
		for i := 1; i <= n; i++ {
			go func() { errs <- s.Put(Issued, envs[i], as[i]) }()
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			s.commits.mu.Lock()
			q := len(s.commits.queue)
			s.commits.mu.Unlock()
			if q >= n-1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		close(release)
		for range n {
			if err := <-errs; err == nil {
				t.Error("a Put returned nil although every sync failed")
			}
		}
		fs.failAt.Store(false)
		fs.rate = 0
		if err := s.Put(Issued, envs[n+1], as[n+1]); err != nil {
			t.Fatal(err)
		}
		// The record acknowledged before the failure is in bbolt now.
		inBolt := false
		k, err := newWALRecord(Issued, envs[0], as[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := s.view(func(tx *bolt.Tx) error {
			inBolt = tx.Bucket(bucketIssued).Get(k.key) != nil
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !inBolt {
			t.Error("a write succeeded after a failed sync while an earlier acknowledged record was still only in the log")
		}
		s = s.crashReopen(t, path)
		defer s.Close()
		got := listed(t, s, Issued)
		if len(got) != 2 || !got[string(envs[0])] || !got[string(envs[n+1])] {
			t.Fatalf("after the crash %d records, want the 2 acknowledged", len(got))
		}
	})
}

// A read that checkpoints (List, Get, Latest, FlushedCommits...) and
// shares a commit with a write whose log append fails gets the result of
// its checkpoint, not the write's error: the write's caller hears of its
// own failure, and the read finds every acknowledged record in bbolt.
func TestReadNotFailedByOthersAppend(t *testing.T) {
	syncers(t, func(t *testing.T) {
		key, _ := testutil.NewKey(t)
		envs, as := records(t, key, 3)
		s, _ := openTemp(t)
		defer s.Close()
		if err := s.Put(Issued, envs[0], as[0]); err != nil {
			t.Fatal(err)
		}
		fs := &flakySyncer{fileSyncer: s.wal.sync, rng: rand.New(rand.NewPCG(5, 6))}
		fs.failAt.Store(true)
		s.wal.sync = fs
		release := make(chan struct{})
		var once sync.Once
		s.beforeCommit = func() { once.Do(func() { <-release }) }
		putErrs := make(chan error, 2)
		go func() { putErrs <- s.Put(Issued, envs[1], as[1]) }() // leads, held
		waitQueued := func(n int) {
			t.Helper()
			deadline := time.Now().Add(10 * time.Second)
			for {
				s.commits.mu.Lock()
				q, leading := len(s.commits.queue), s.commits.leading
				s.commits.mu.Unlock()
				if leading && q >= n {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d writes queued, want %d", q, n)
				}
				time.Sleep(time.Millisecond)
			}
		}
		waitQueued(0)
		go func() { putErrs <- s.Put(Issued, envs[2], as[2]) }()
		waitQueued(1)
		listErr := make(chan error, 1)
		go func() {
			_, err := s.List(Issued, "")
			listErr <- err
		}()
		waitQueued(2)
		close(release)
		for range 2 {
			if err := <-putErrs; err == nil {
				t.Error("a Put returned nil although every sync failed")
			}
		}
		if err := <-listErr; err != nil {
			t.Errorf("List failed with another write's error: %v", err)
		}
		fs.failAt.Store(false)
		if got := listed(t, s, Issued); len(got) != 1 || !got[string(envs[0])] {
			t.Errorf("%d records listed, want the 1 acknowledged", len(got))
		}
	})
}
