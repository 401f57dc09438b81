package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
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

// Concurrent writes share transactions, each returns after its commit,
// and all of them are in the file after a reopen.
func TestCommitQueueCoalesces(t *testing.T) {
	s, path := openTemp(t)
	const n = 64
	var (
		mu  sync.Mutex
		txs = map[int]int{} // transaction ID -> writes in it
		wg  sync.WaitGroup
	)
	hold := make(chan struct{})
	// The first write holds its commit until the others queued.
	wg.Go(func() {
		err := s.update(func(tx *bolt.Tx) error {
			<-hold
			return tx.Bucket(bucketServed).Put([]byte("first"), []byte{1})
		})
		if err != nil {
			t.Error(err)
		}
	})
	s.waitQueued(t, 0)
	for i := range n {
		wg.Go(func() {
			err := s.update(func(tx *bolt.Tx) error {
				mu.Lock()
				txs[tx.ID()]++
				mu.Unlock()
				return tx.Bucket(bucketServed).Put(fmt.Appendf(nil, "k%02d", i), []byte{byte(i)})
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	s.waitQueued(t, n)
	close(hold)
	wg.Wait()
	if len(txs) != 1 {
		t.Errorf("%d writes queued behind one commit took %d transactions, want 1", n, len(txs))
	}
	// The leader's commit and the one it handed over: n+1 writes in 2.
	if c, b := s.Commits(); c != 2 || b != n+1 {
		t.Errorf("Commits() = %d commits, %d batched writes; want 2, %d", c, b, n+1)
	}
	// A write outside the queue commits on its own, batching nothing.
	if err := s.PutRevocation("someone", time.Now()); err != nil {
		t.Fatal(err)
	}
	if c, b := s.Commits(); c != 3 || b != n+1 {
		t.Errorf("after a revocation: Commits() = %d, %d; want 3, %d", c, b, n+1)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketServed)
		for i := range n {
			if v := b.Get(fmt.Appendf(nil, "k%02d", i)); len(v) != 1 || v[0] != byte(i) {
				return fmt.Errorf("k%02d = %v after reopen", i, v)
			}
		}
		if b.Get([]byte("first")) == nil {
			return errors.New("first write lost")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A failing or panicking write gets its error and leaves no trace; the
// writes batched with it commit.
func TestCommitQueueFailureIsolated(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	boom := errors.New("boom")
	hold := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = s.update(func(*bolt.Tx) error { <-hold; return nil })
	})
	s.waitQueued(t, 0)
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() {
			errs[i] = s.update(func(tx *bolt.Tx) error {
				if err := tx.Bucket(bucketServed).Put(fmt.Appendf(nil, "w%d", i), []byte{1}); err != nil {
					return err
				}
				switch i {
				case 2:
					return boom
				case 4:
					panic("write panics")
				}
				return nil
			})
		})
	}
	s.waitQueued(t, len(errs))
	close(hold)
	wg.Wait()
	// The leader's empty commit, the batch that rolled back (not counted),
	// the two failing writes alone (rolled back) and the rest together.
	if c, b := s.Commits(); c != 2 || b != 5 {
		t.Errorf("Commits() = %d commits, %d batched writes; want 2, 5", c, b)
	}
	for i, err := range errs {
		switch {
		case i == 2 && !errors.Is(err, boom), i == 4 && err == nil:
			t.Errorf("write %d: %v, want its failure", i, err)
		case i != 2 && i != 4 && err != nil:
			t.Errorf("write %d: %v", i, err)
		}
	}
	_ = s.db.View(func(tx *bolt.Tx) error {
		for i := range errs {
			got := tx.Bucket(bucketServed).Get(fmt.Appendf(nil, "w%d", i)) != nil
			if want := i != 2 && i != 4; got != want {
				t.Errorf("w%d stored %v, want %v", i, got, want)
			}
		}
		return nil
	})
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
// likely, and commits together with the next write as soon as it comes;
// without company it commits at once.
func TestCommitLinger(t *testing.T) {
	for _, busy := range []bool{true, false} {
		t.Run(fmt.Sprintf("company=%v", busy), func(t *testing.T) {
			s, path := openTemp(t)
			s.SetLinger(10*time.Second, func() bool { return busy })
			txOf := func(key string) (id int, took time.Duration, err error) {
				t0 := time.Now()
				err = s.update(func(tx *bolt.Tx) error {
					id = tx.ID()
					return tx.Bucket(bucketServed).Put([]byte(key), []byte{1})
				})
				return id, time.Since(t0), err
			}
			type res struct {
				id   int
				took time.Duration
				err  error
			}
			first := make(chan res, 1)
			go func() {
				id, took, err := txOf("first")
				first <- res{id, took, err}
			}()
			time.Sleep(100 * time.Millisecond)
			id2, _, err := txOf("second")
			if err != nil {
				t.Fatal(err)
			}
			r := <-first
			if r.err != nil {
				t.Fatal(r.err)
			}
			switch {
			case busy && (r.id != id2 || r.took < 100*time.Millisecond || r.took > 5*time.Second):
				t.Fatalf("lingering write: tx %d (second %d) after %v, want one commit when the second came", r.id, id2, r.took)
			case !busy && (r.id == id2 || r.took > 5*time.Second):
				t.Fatalf("lone write: tx %d (second %d) after %v, want its own commit at once", r.id, id2, r.took)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			err = s2.db.View(func(tx *bolt.Tx) error {
				for _, k := range []string{"first", "second"} {
					if tx.Bucket(bucketServed).Get([]byte(k)) == nil {
						return fmt.Errorf("%s lost", k)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
