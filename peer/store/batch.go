package store

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// commitQueue coalesces concurrent writes into shared bbolt transactions
// (group commit). A write that finds no commit running commits at once,
// together with every write queued meanwhile; writes that arrive during a
// commit wait for the next one, which the first of them leads. Each write
// returns only after the transaction that holds it committed (and was
// synced, as with DB.Update), so durability is unchanged; a lone write
// waits for nothing, unlike DB.Batch, whose batches start after a delay.
//
// A write may run more than once (a write that fails makes its
// transaction roll back; it is then run alone and the others again without
// it), so it must be idempotent, as for DB.Batch.
type commitQueue struct {
	mu      sync.Mutex
	queue   []*pendingWrite
	leading bool // a writer is committing; it hands over to queue[0]
	// linger and company: see Store.SetLinger. arrived is closed by the
	// next write while a lone leader lingers.
	linger  time.Duration
	company func() bool
	arrived chan struct{}
}

type pendingWrite struct {
	fn func(*bolt.Tx) error
	// done receives errLead (this write leads the next commit) and then
	// the write's result.
	done chan error
}

// errLead hands the commit over to a queued write.
var errLead = errors.New("store: lead the next commit")

// update runs fn in a read-write transaction shared with the writes
// queued with it and returns once that transaction committed.
func (s *Store) update(fn func(*bolt.Tx) error) error {
	w := &pendingWrite{fn: fn, done: make(chan error, 1)}
	q := &s.commits
	q.mu.Lock()
	q.queue = append(q.queue, w)
	if q.arrived != nil {
		close(q.arrived)
		q.arrived = nil
	}
	if q.leading {
		q.mu.Unlock()
		if err := <-w.done; err != errLead {
			return err
		}
		q.mu.Lock()
	} else if len(q.queue) == 1 && q.linger > 0 && q.company != nil && q.company() {
		// A lone write while other sessions run: their records are
		// likely to follow within the linger and share this commit.
		q.leading = true
		arrived := make(chan struct{})
		q.arrived = arrived
		q.mu.Unlock()
		t := time.NewTimer(q.linger)
		select {
		case <-arrived:
		case <-t.C:
		}
		t.Stop()
		q.mu.Lock()
		q.arrived = nil
	}
	q.leading = true
	batch := q.queue
	q.queue = nil
	q.mu.Unlock()

	s.commit(batch)

	q.mu.Lock()
	if len(q.queue) > 0 {
		q.queue[0].done <- errLead
	} else {
		q.leading = false
	}
	q.mu.Unlock()
	return <-w.done
}

// commit runs batch in one transaction and tells every write its result.
func (s *Store) commit(batch []*pendingWrite) {
	for len(batch) > 0 {
		failed := -1
		err := s.update1(func(tx *bolt.Tx) error {
			for i, w := range batch {
				if err := safeCall(w.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			if err == nil {
				s.batched.Add(uint64(len(batch)))
			}
			for _, w := range batch {
				w.done <- err // nil, or the commit's failure
			}
			return
		}
		// The transaction rolled back: the failing write runs alone, as
		// DB.Update would have run it, and the others run again.
		w := batch[failed]
		err = s.update1(func(tx *bolt.Tx) error { return safeCall(w.fn, tx) })
		if err == nil {
			s.batched.Add(1)
		}
		w.done <- err
		batch = slices.Delete(batch, failed, failed+1)
	}
}

// safeCall runs fn, turning a panic into an error: the leader runs other
// callers' writes.
func safeCall(fn func(*bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store: write panicked: %v", r)
		}
	}()
	return fn(tx)
}

// SetLinger lets a lone write wait up to d for company before it commits
// when company() reports other writes are likely soon (sessions in
// flight): one synced commit then holds both. Every write still returns
// only after its commit, so durability is unchanged; d is the most a
// write's latency grows. Call it before the first write.
func (s *Store) SetLinger(d time.Duration, company func() bool) {
	s.commits.linger, s.commits.company = d, company
}
