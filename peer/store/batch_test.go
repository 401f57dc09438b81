package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	bolt "go.etcd.io/bbolt"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
)

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return s, path
}

// crash closes s's files without the checkpoint Close makes, as a process
// that dies leaves them.
func (s *Store) crash(t *testing.T) {
	t.Helper()
	s.commits.mu.Lock()
	s.commits.closed = true
	s.commits.mu.Unlock()
	s.flushTimer.Stop()
	if err := errors.Join(s.wal.close(), s.db.Close()); err != nil {
		t.Fatal(err)
	}
}

// crashReopen crashes s and opens the store at path again, as a node
// restarted after it died.
func (s *Store) crashReopen(t *testing.T, path string) *Store {
	t.Helper()
	s.crash(t)
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return s2
}

// records returns n signed acceptances by key about fresh subjects.
func records(t *testing.T, key crypto.PrivKey, n int) ([][]byte, []*protocol.Attestation) {
	t.Helper()
	envs, as := make([][]byte, n), make([]*protocol.Attestation, n)
	for i := range n {
		_, subject := testutil.NewKey(t)
		envs[i], as[i] = sealed(t, key, subject, time.Now(), time.Hour)
	}
	return envs, as
}

// listed returns the envelopes the store lists in direction d.
func listed(t *testing.T, s *Store, d Direction) map[string]bool {
	t.Helper()
	es, err := s.List(d, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, e := range es {
		got[string(e.Envelope)] = true
	}
	return got
}

// syncers runs f with the AIO syncer (where the kernel has it) and with
// fdatasync.
func syncers(t *testing.T, f func(t *testing.T)) {
	for _, plain := range []bool{false, true} {
		t.Run(fmt.Sprintf("plain=%v", plain), func(t *testing.T) {
			old := forcePlainSync
			forcePlainSync = plain
			t.Cleanup(func() { forcePlainSync = old })
			f(t)
		})
	}
}

// Concurrent writes share one synced log append, each returns after it,
// and all of them are in bbolt after a reopen.
func TestCommitQueueCoalesces(t *testing.T) {
	s, path := openTemp(t)
	key, _ := testutil.NewKey(t)
	const n = 64
	envs, as := records(t, key, n+1)
	hold := make(chan struct{})
	var once sync.Once
	s.beforeCommit = func() { once.Do(func() { <-hold }) }
	c0, _ := s.Commits()
	var wg sync.WaitGroup
	// The first write holds its commit until the others queued.
	wg.Go(func() {
		if err := s.Put(Issued, envs[n], as[n]); err != nil {
			t.Error(err)
		}
	})
	s.waitQueued(t, 0)
	for i := range n {
		wg.Go(func() {
			if err := s.Put(Issued, envs[i], as[i]); err != nil {
				t.Error(err)
			}
		})
	}
	s.waitQueued(t, n)
	close(hold)
	wg.Wait()
	// The leader's append and the one it handed over: n+1 writes in 2.
	if c, b := s.Commits(); c-c0 != 2 || b != n+1 {
		t.Errorf("Commits() = %d commits, %d batched writes; want 2, %d", c-c0, b, n+1)
	}
	// A write outside the queue commits on its own, batching nothing.
	if err := s.PutRevocation("someone", time.Now()); err != nil {
		t.Fatal(err)
	}
	if c, b := s.Commits(); c-c0 != 3 || b != n+1 {
		t.Errorf("after a revocation: Commits() = %d, %d; want 3, %d", c-c0, b, n+1)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Close checkpointed: bbolt holds every record, the log none.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		for i, env := range envs {
			if tx.Bucket(bucketIssued).Get(entryKey(as[i].Subject, as[i].IssuedAt, env)) == nil {
				return fmt.Errorf("record %d not in bbolt after Close", i)
			}
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
}

// waitQueued waits (at most 10 s) until a write leads a commit (n = 0)
// or n writes are queued behind it.
func (s *Store) waitQueued(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.commits.mu.Lock()
		q, leading := len(s.commits.queue), s.commits.leading
		s.commits.mu.Unlock()
		if (n == 0 && leading) || (n > 0 && q >= n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued (leading %v), want %d", q, leading, n)
		}
	}
}

// A lone write lingers for company while company() says more writes are
// likely, and shares its log append with the next write as soon as it
// comes; without company it commits at once.
func TestCommitLinger(t *testing.T) {
	key, _ := testutil.NewKey(t)
	for _, busy := range []bool{true, false} {
		t.Run(fmt.Sprintf("company=%v", busy), func(t *testing.T) {
			s, _ := openTemp(t)
			defer s.Close()
			s.SetLinger(10*time.Second, func() bool { return busy })
			envs, as := records(t, key, 2)
			c0, _ := s.Commits()
			first := make(chan error, 1)
			t0 := time.Now()
			go func() { first <- s.Put(Issued, envs[0], as[0]) }()
			time.Sleep(100 * time.Millisecond)
			if err := s.Put(Received, envs[1], as[1]); err != nil {
				t.Fatal(err)
			}
			if err := <-first; err != nil {
				t.Fatal(err)
			}
			took := time.Since(t0)
			c, _ := s.Commits()
			switch {
			case busy && (c-c0 != 1 || took < 100*time.Millisecond || took > 5*time.Second):
				t.Fatalf("lingering write: %d appends, %v; want one append when the second came", c-c0, took)
			case !busy && c-c0 != 2:
				t.Fatalf("lone write: %d appends, want one each", c-c0)
			}
		})
	}
}

// Records acknowledged but not checkpointed survive a crash: the next Open
// moves them from the log into bbolt. Frames of a generation already
// checkpointed are never applied again, and a torn last frame ends the
// log without failing the open.
func TestWALRecovery(t *testing.T) {
	syncers(t, func(t *testing.T) {
		key, _ := testutil.NewKey(t)
		s, path := openTemp(t)
		envs, as := records(t, key, 6)
		for i := range 3 {
			if err := s.Put(Issued, envs[i], as[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Put(Received, envs[3], as[3]); err != nil {
			t.Fatal(err)
		}
		if got := s.pendingCount(); got != 4 {
			t.Fatalf("%d records pending before the crash, want 4", got)
		}
		s.crash(t)

		s, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.pendingCount(); got != 0 {
			t.Fatalf("%d records pending after recovery, want 0 (checkpointed at open)", got)
		}
		if got := s.Recovered(); got != (Recovery{Records: 4}) {
			t.Errorf("Recovered() = %+v, want 4 records", got)
		}
		issued, received := listed(t, s, Issued), listed(t, s, Received)
		for i := range 3 {
			if !issued[string(envs[i])] {
				t.Errorf("issued record %d lost in the crash", i)
			}
		}
		if !received[string(envs[3])] || len(issued) != 3 || len(received) != 1 {
			t.Errorf("after recovery: %d issued, %d received (received record kept: %v); want 3, 1", len(issued), len(received), received[string(envs[3])])
		}
		// Delete record 1 in bbolt, log another record and crash: record
		// 1, whose frame follows the new one's in the file (frames of one
		// size), is of a checkpointed generation and stays deleted.
		if err := s.db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketIssued).Delete(entryKey(as[1].Subject, as[1].IssuedAt, envs[1]))
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(Issued, envs[4], as[4]); err != nil {
			t.Fatal(err)
		}
		s = s.crashReopen(t, path)
		issued = listed(t, s, Issued)
		if issued[string(envs[1])] {
			t.Error("a record from a checkpointed generation's frames came back")
		}
		if !issued[string(envs[4])] || len(issued) != 3 {
			t.Errorf("%d issued records (the one logged before the crash kept: %v), want 3", len(issued), issued[string(envs[4])])
		}
		// A torn last frame ends the log; the open does not fail.
		if err := s.Put(Issued, envs[5], as[5]); err != nil {
			t.Fatal(err)
		}
		end := s.wal.off
		s.crash(t)
		f, err := os.OpenFile(path+"-wal", os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{0xff}, end-10); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if s, err = Open(path); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if got := s.Recovered(); got != (Recovery{}) {
			t.Errorf("Recovered() after a torn last frame = %+v, want nothing", got)
		}
		issued = listed(t, s, Issued)
		if issued[string(envs[5])] || len(issued) != 3 {
			t.Errorf("%d issued records (the torn one applied: %v), want 3", len(issued), issued[string(envs[5])])
		}
	})
}

// More records than the log holds: checkpoints make room, and every
// record survives a crash.
func TestWALWrapsAndCheckpoints(t *testing.T) {
	key, _ := testutil.NewKey(t)
	s, path := openTemp(t)
	const n = 1500 // about 1.4 MiB of frames, over walSize
	envs, as := records(t, key, n)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				if err := s.Put(Issued, envs[i], as[i]); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := s.pendingCount(); got >= walCheckpointRecords {
		t.Errorf("%d records pending, want fewer than %d", got, walCheckpointRecords)
	}
	s = s.crashReopen(t, path)
	defer s.Close()
	got := listed(t, s, Issued)
	for i, env := range envs {
		if !got[string(env)] {
			t.Fatalf("record %d of %d lost (%d listed)", i, n, len(got))
		}
	}
}

// A read that could see a logged record checkpoints first; a read of
// another peer does not; a lone record reaches bbolt within
// walCheckpointAfter.
func TestWALReadsAndTimer(t *testing.T) {
	key, _ := testutil.NewKey(t)
	s, _ := openTemp(t)
	defer s.Close()
	envs, as := records(t, key, 2)
	for i := range 2 {
		if err := s.Put(Issued, envs[i], as[i]); err != nil {
			t.Fatal(err)
		}
	}
	_, stranger := testutil.NewKey(t)
	if es, err := s.List(Issued, stranger); err != nil || len(es) != 0 {
		t.Fatalf("List(stranger) = %d, %v", len(es), err)
	}
	if got := s.pendingCount(); got != 2 {
		t.Fatalf("a read of another peer checkpointed: %d pending, want 2", got)
	}
	e, err := s.Latest(Issued, as[0].Subject, time.Now())
	if err != nil || e == nil || !bytes.Equal(e.Envelope, envs[0]) {
		t.Fatalf("Latest right after Put = %v, %v; want the record", e, err)
	}
	if got := s.pendingCount(); got != 0 {
		t.Fatalf("%d pending after a read of a logged record, want 0", got)
	}
	envs, as = records(t, key, 1)
	if err := s.Put(Received, envs[0], as[0]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * walCheckpointAfter)
	for s.pendingCount() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a lone logged record not checkpointed by the timer")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Under steady appends the checkpoint waits for a quiet log, up to
// walCheckpointMaxAge after the first pending record; then the records
// reach bbolt within walCheckpointAfter of the last append.
func TestWALCheckpointWaitsForQuiet(t *testing.T) {
	old := walCheckpointMaxAge
	walCheckpointMaxAge = 3 * walCheckpointAfter
	t.Cleanup(func() { walCheckpointMaxAge = old })
	key, _ := testutil.NewKey(t)
	s, _ := openTemp(t)
	defer s.Close()
	envs, as := records(t, key, 40)
	put := func(i int) {
		t.Helper()
		if err := s.Put(Issued, envs[i], as[i]); err != nil {
			t.Fatal(err)
		}
	}
	// Appends every walCheckpointAfter/4 for twice walCheckpointAfter:
	// none is followed by a quiet second, none is older than the max age.
	start := time.Now()
	i := 0
	for ; time.Since(start) < 2*walCheckpointAfter; i++ {
		put(i)
		time.Sleep(walCheckpointAfter / 4)
	}
	if got := s.pendingCount(); got != i {
		t.Fatalf("%d of %d records pending after %v of steady appends: checkpointed before the log was quiet", got, i, time.Since(start))
	}
	// Keep appending past the max age: the checkpoint comes anyway.
	for ; s.pendingCount() == i && i < len(envs); i++ {
		if time.Since(start) > walCheckpointMaxAge+2*walCheckpointAfter {
			t.Fatalf("no checkpoint %v after the first pending record (max age %v)", time.Since(start), walCheckpointMaxAge)
		}
		put(i)
		time.Sleep(walCheckpointAfter / 4)
	}
	if i == len(envs) {
		t.Fatal("ran out of records before the max-age checkpoint")
	}
	if d := time.Since(start); d < walCheckpointMaxAge {
		t.Fatalf("checkpoint after %v of steady appends, before the max age %v", d, walCheckpointMaxAge)
	}
	// Quiet: what is pending reaches bbolt within walCheckpointAfter.
	put(i)
	deadline := time.Now().Add(5 * walCheckpointAfter)
	for s.pendingCount() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("pending records not checkpointed once the log was quiet")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A failed log write acknowledges nothing; writes after Close fail; Close
// twice is harmless.
func TestWALFailuresAndClose(t *testing.T) {
	key, _ := testutil.NewKey(t)
	envs, as := records(t, key, 2)
	s, _ := openTemp(t)
	good, goodDirect := s.wal.f, s.wal.direct
	broken, err := os.Open(os.DevNull) // read-only: writes fail
	if err != nil {
		t.Fatal(err)
	}
	s.wal.f = broken
	if s.wal.direct != nil {
		s.wal.direct = broken
	}
	if err := s.Put(Issued, envs[0], as[0]); err == nil {
		t.Error("Put succeeded with a log that cannot be written")
	}
	if got := s.pendingCount(); got != 0 {
		t.Errorf("%d records pending after a failed append, want 0", got)
	}
	s.wal.f, s.wal.direct = good, goodDirect
	broken.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(Issued, envs[1], as[1]); !errors.Is(err, errClosed) {
		t.Errorf("Put after Close: %v, want errClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Recovered reports what Open took from the log: the records a crash left
// there, frames that pass their checksum but hold no attestation (left
// out), and nothing after a clean Close.
func TestWALRecoveredCounts(t *testing.T) {
	key, _ := testutil.NewKey(t)
	s, path := openTemp(t)
	envs, as := records(t, key, 2)
	if err := s.Put(Issued, envs[0], as[0]); err != nil {
		t.Fatal(err)
	}
	junk := appendFrame(nil, s.wal.gen, &walRecord{dir: Received, env: []byte("not an envelope")})
	if _, err := s.wal.f.WriteAt(junk, s.wal.off); err != nil {
		t.Fatal(err)
	}
	s = s.crashReopen(t, path)
	if got := s.Recovered(); got != (Recovery{Records: 1, Undecodable: 1}) {
		t.Errorf("Recovered() = %+v, want 1 record and 1 left out", got)
	}
	if err := s.Put(Issued, envs[1], as[1]); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Recovered(); got != (Recovery{}) {
		t.Errorf("Recovered() after a clean Close = %+v, want nothing", got)
	}
	if got := listed(t, s, Issued); len(got) != 2 {
		t.Errorf("%d issued records, want 2", len(got))
	}
}

// failSyncer fails every sync, as a device that reports a write error.
type failSyncer struct{}

func (failSyncer) fdatasync(*os.File) error { return errors.New("injected sync failure") }
func (failSyncer) writeDSync(*os.File, []byte, int64) error {
	return errors.New("injected write failure")
}
func (failSyncer) close() error { return nil }

// Records whose log append failed (their Put returned the error) do not
// come back after a crash, although their frames reached the file: the
// next append starts a new generation.
func TestWALFailedAppendNotRecovered(t *testing.T) {
	key, _ := testutil.NewKey(t)
	s, path := openTemp(t)
	envs, as := records(t, key, 4)
	if err := s.Put(Issued, envs[0], as[0]); err != nil {
		t.Fatal(err)
	}
	good := s.wal.sync
	s.wal.sync = failSyncer{}
	var failed []*walRecord
	for i := 1; i <= 2; i++ {
		r, err := newWALRecord(Issued, envs[i], as[i])
		if err != nil {
			t.Fatal(err)
		}
		failed = append(failed, r)
	}
	// As the commit queue's leader would: one batch of two.
	if err := s.logRecords(failed); err == nil {
		t.Fatal("an append whose sync failed succeeded")
	}
	s.wal.sync = good
	if err := s.Put(Issued, envs[3], as[3]); err != nil {
		t.Fatal(err)
	}
	s = s.crashReopen(t, path)
	defer s.Close()
	got := listed(t, s, Issued)
	if got[string(envs[1])] || got[string(envs[2])] {
		t.Errorf("a record whose append failed came back after the crash (%v, %v)", got[string(envs[1])], got[string(envs[2])])
	}
	if !got[string(envs[0])] || !got[string(envs[3])] || len(got) != 2 {
		t.Errorf("%d issued records (acknowledged ones kept: %v, %v), want the 2 acknowledged", len(got), got[string(envs[0])], got[string(envs[3])])
	}
}

// A log left beside a deleted database file is not taken for the new
// database's: a new store starts at a random generation.
func TestWALNotReplayedIntoNewDatabase(t *testing.T) {
	key, _ := testutil.NewKey(t)
	s, path := openTemp(t)
	envs, as := records(t, key, 1)
	if err := s.Put(Issued, envs[0], as[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s = s.crashReopen(t, path)
	defer s.Close()
	if got := listed(t, s, Issued); len(got) != 0 || s.Recovered() != (Recovery{}) {
		t.Errorf("the new database holds %d records from the old one's log (recovered %+v), want none", len(got), s.Recovered())
	}
}

// The store maps more address space than its file holds
// (initialMmapSize) without growing the file to it: a small store stays
// a small file, and records go in and come back after a reopen.
func TestMappedSizeLeavesFileSmall(t *testing.T) {
	key, _ := testutil.NewKey(t)
	s, path := openTemp(t)
	envs, as := records(t, key, 20)
	for i := range envs {
		if err := s.Put(Issued, envs[i], as[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if initialMmapSize > 0 && fi.Size() >= int64(initialMmapSize) || fi.Size() > 4<<20 {
		t.Fatalf("a store of 20 records is a file of %d bytes (mapped size %d)", fi.Size(), initialMmapSize)
	}
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := listed(t, s, Issued); len(got) != len(envs) {
		t.Fatalf("after reopening: %d records, want %d", len(got), len(envs))
	}
}
