package store

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// commitQueue coalesces concurrent attestation writes into shared appends
// to the write-ahead log (group commit). A write that finds no commit
// running commits at once, together with every write queued meanwhile;
// writes that arrive during a commit wait for the next one, which the
// first of them leads. Each write returns only after the log append that
// holds it was synced, so durability is unchanged; a lone write waits for
// nothing, unlike DB.Batch, whose batches start after a delay. The leader
// alone touches the log, and it also runs the checkpoints that move the
// logged records into bbolt (wal.go).
type commitQueue struct {
	mu      sync.Mutex
	queue   []*pendingWrite
	leading bool // a writer is committing; it hands over to queue[0]
	closed  bool // the store closed: writes fail with errClosed
	// linger and company: see Store.SetLinger. arrived is closed by the
	// next write while a lone leader lingers.
	linger  time.Duration
	company func() bool
	arrived chan struct{}
}

type pendingWrite struct {
	rec *walRecord // nil: a checkpoint request (flush)
	// close: checkpoint, then refuse every later write.
	close bool
	// done receives errLead (this write leads the next commit) and then
	// the write's result.
	done chan error
}

var (
	// errLead hands the commit over to a queued write.
	errLead = errors.New("store: lead the next commit")
	// errClosed is a write after Close.
	errClosed = errors.New("store is closed")
)

// put logs r durably (see commitQueue) and returns once its log append
// was synced.
func (s *Store) put(r *walRecord) error {
	return s.enqueue(&pendingWrite{rec: r, done: make(chan error, 1)})
}

// flush moves the logged records into bbolt (a checkpoint) and returns
// once that commit was synced.
func (s *Store) flush() error {
	return s.enqueue(&pendingWrite{done: make(chan error, 1)})
}

func (s *Store) enqueue(w *pendingWrite) error {
	q := &s.commits
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return errClosed
	}
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
	} else if len(q.queue) == 1 && w.rec != nil && q.linger > 0 && q.company != nil && q.company() {
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
	if q.closed {
		// Handed over after a Close: nobody commits any more.
		q.leading = false
		q.mu.Unlock()
		for _, o := range batch {
			o.done <- errClosed
		}
		return <-w.done
	}
	q.mu.Unlock()

	closing := s.commit(batch)

	q.mu.Lock()
	if closing {
		q.closed = true
	}
	if len(q.queue) > 0 {
		q.queue[0].done <- errLead
	} else {
		q.leading = false
	}
	q.mu.Unlock()
	return <-w.done
}

// commit logs the batch's records in one synced append, checkpoints when
// asked or when enough records wait, and tells every write its result. It
// reports whether the batch closed the store.
func (s *Store) commit(batch []*pendingWrite) (closing bool) {
	if s.beforeCommit != nil {
		s.beforeCommit()
	}
	var recs []*walRecord
	flush := false
	for _, w := range batch {
		if w.rec != nil {
			recs = append(recs, w.rec)
		} else {
			flush = true
			closing = closing || w.close
		}
	}
	logErr := s.logRecords(recs)
	var cpErr error
	if flush || (logErr == nil && s.pendingCount() >= walCheckpointRecords) {
		cpErr = s.checkpoint(nil)
	}
	for _, w := range batch {
		if w.rec != nil {
			w.done <- logErr // a failed threshold checkpoint leaves the records logged
		} else {
			// A flush (a read, Close) waits for the checkpoint alone:
			// the records whose append failed were never pending, and
			// their writers hear of it. Joined, one failed write failed
			// every read sharing its commit.
			w.done <- cpErr
		}
	}
	return closing
}

// logRecords appends recs to the log in one synced write, after a
// checkpoint when they do not fit; a batch larger than the whole log goes
// straight into bbolt with the pending records.
func (s *Store) logRecords(recs []*walRecord) error {
	if len(recs) == 0 {
		return nil
	}
	if s.wal.failed {
		// Frames of a failed append may sit after the last good one:
		// a new generation (a checkpoint) leaves them unread.
		if err := s.checkpoint(nil); err != nil {
			return err
		}
	}
	fit, err := s.wal.append(recs)
	if !fit {
		if err := s.checkpoint(nil); err != nil {
			return err
		}
		if fit, err = s.wal.append(recs); !fit {
			return s.checkpoint(recs)
		}
	}
	if err != nil {
		return err
	}
	s.pmu.Lock()
	// The checkpoint waits for the log to be quiet for
	// walCheckpointAfter, but for no more than walCheckpointMaxAge after
	// the first pending record.
	now := time.Now()
	if len(s.pending) == 0 {
		s.firstPending = now
	}
	s.flushTimer.Reset(min(walCheckpointAfter, s.firstPending.Add(walCheckpointMaxAge).Sub(now)))
	s.pending = append(s.pending, recs...)
	for _, r := range recs {
		s.pendingPeers[r.peer]++
	}
	s.pmu.Unlock()
	// Counted once the records are pending: a reader that sees the new
	// count finds them to flush (FlushedCommits).
	s.committed.Add(1)
	s.batched.Add(uint64(len(recs)))
	return nil
}

// FlushedCommits checkpoints the logged records into bbolt, if any, and
// then returns the commits count (Commits): a reader that keeps what it
// read from bbolt while the count stays the same misses no record.
func (s *Store) FlushedCommits() (uint64, error) {
	if err := s.flushFor(""); err != nil {
		return 0, err
	}
	return s.committed.Load(), nil
}

// checkpoint writes the pending records, then extra, into bbolt in one
// synced commit that also starts the log's next generation.
func (s *Store) checkpoint(extra []*walRecord) error {
	s.pmu.Lock()
	recs := s.pending
	s.pmu.Unlock()
	if len(recs) == 0 && len(extra) == 0 && !s.wal.failed {
		return nil
	}
	next := s.wal.gen + 1
	err := s.applyRecords(next, recs, extra)
	if err != nil {
		return fmt.Errorf("checkpoint write-ahead log: %w", err)
	}
	s.wal.restart(next)
	s.batched.Add(uint64(len(extra)))
	s.pmu.Lock()
	s.pending = nil
	clear(s.pendingPeers)
	s.flushTimer.Stop()
	s.pmu.Unlock()
	return nil
}

func (s *Store) pendingCount() int {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	return len(s.pending)
}

// flushFor checkpoints before a read that could see logged records: any
// record (p empty) or one whose key starts with p.
func (s *Store) flushFor(p peer.ID) error {
	s.pmu.Lock()
	need := len(s.pending) > 0 && (p == "" || s.pendingPeers[p] > 0)
	s.pmu.Unlock()
	if !need {
		return nil
	}
	if err := s.flush(); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// SetLinger lets a lone write wait up to d for company before it commits
// when company() reports other writes are likely soon (sessions in
// flight): one synced log append then holds both. Every write still returns
// only after its commit, so durability is unchanged; d is the most a
// write's latency grows. Call it before the first write.
func (s *Store) SetLinger(d time.Duration, company func() bool) {
	s.commits.linger, s.commits.company = d, company
}
