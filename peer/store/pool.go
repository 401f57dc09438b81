package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/acaptcha/acaptcha/skill/pool"
)

// The challenge pool's buckets (see pool.Store). They are created
// on first use, inside the pool's own transactions.
var (
	// bucketPoolReady holds the ready sets: key = creation time (unix
	// nanoseconds, big-endian) + set id, so a cursor walks them oldest
	// first; value = serve count (uint32, big-endian) + the set's JSON.
	bucketPoolReady = []byte("pool/ready")
	// bucketPoolIndex maps a ready set's id to its key in pool/ready.
	bucketPoolIndex = []byte("pool/index")
	// bucketPoolServed holds the ids of sets served out (value: the time,
	// unix nanoseconds), so the same set is not added again for
	// pool.ServedRetention (PoolPrune forgets them then, and the oldest
	// beyond pool.MaxServedIDs).
	bucketPoolServed = []byte("pool/served")
)

// PoolPrune scans pool/served at most once per servedPruneEvery (the
// pool's janitor prunes every minute, and the bucket holds up to
// pool.MaxServedIDs ids), and deletes at most servedPruneBatch ids per
// transaction; a full batch makes the next prune scan again.
const servedPruneEvery = time.Hour

// servedPruneBatch and maxServedIDs (pool.MaxServedIDs) are variables
// for tests.
var (
	servedPruneBatch = 1 << 16
	maxServedIDs     = pool.MaxServedIDs
)

// servedPrune is when PoolPrune next scans pool/served.
type servedPrune struct {
	mu   sync.Mutex
	next time.Time
}

// MaxPoolSetBytes caps one stored pool set.
const MaxPoolSetBytes = 1 << 20

func poolKey(created time.Time, id string) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(id)), uint64(created.UnixNano()))
	return append(k, id...)
}

func poolBuckets(tx *bolt.Tx) (ready, index, served *bolt.Bucket, err error) {
	if ready, err = tx.CreateBucketIfNotExists(bucketPoolReady); err != nil {
		return
	}
	if index, err = tx.CreateBucketIfNotExists(bucketPoolIndex); err != nil {
		return
	}
	served, err = tx.CreateBucketIfNotExists(bucketPoolServed)
	return
}

// expired reports whether a pool key's set was created maxAge or longer
// before now.
func poolExpired(k []byte, now time.Time, maxAge time.Duration) bool {
	if len(k) < 8 {
		return true
	}
	created := time.Unix(0, int64(binary.BigEndian.Uint64(k[:8])))
	return now.Sub(created) >= maxAge
}

// PoolAdd stores a ready challenge set for the generation pool. It
// reports false, storing nothing, when the id is ready already or was
// served out before.
func (s *Store) PoolAdd(id string, created time.Time, data []byte) (bool, error) {
	if id == "" {
		return false, errors.New("pool store: empty set id")
	}
	if len(data) > MaxPoolSetBytes {
		return false, fmt.Errorf("pool store: set of %d bytes exceeds %d", len(data), MaxPoolSetBytes)
	}
	added := false
	err := s.update1(func(tx *bolt.Tx) error {
		ready, index, served, err := poolBuckets(tx)
		if err != nil {
			return err
		}
		if index.Get([]byte(id)) != nil || served.Get([]byte(id)) != nil {
			return nil
		}
		k := poolKey(created, id)
		v := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(data)), 0)
		if err := ready.Put(k, append(v, data...)); err != nil {
			return err
		}
		added = true
		return index.Put([]byte(id), k)
	})
	if err != nil {
		return false, fmt.Errorf("pool store: add %s: %w", id, err)
	}
	return added, nil
}

// PoolTake takes the oldest unexpired ready set in one transaction: it
// counts a serve and, at maxServes serves, removes the set and records its
// id as served. Two concurrent takes never get the same set beyond
// maxServes.
func (s *Store) PoolTake(now time.Time, maxAge time.Duration, maxServes int) (pool.Taken, bool, error) {
	var (
		t  pool.Taken
		ok bool
	)
	err := s.update1(func(tx *bolt.Tx) error {
		ready, index, served, err := poolBuckets(tx)
		if err != nil {
			return err
		}
		c := ready.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if poolExpired(k, now, maxAge) || len(v) < 4 {
				continue
			}
			n := binary.BigEndian.Uint32(v[:4]) + 1
			t = pool.Taken{
				ID:      string(k[8:]),
				Created: time.Unix(0, int64(binary.BigEndian.Uint64(k[:8]))),
				Data:    append([]byte(nil), v[4:]...),
			}
			ok = true
			if int(n) >= maxServes {
				key := append([]byte(nil), k...)
				if err := ready.Delete(key); err != nil {
					return err
				}
				if err := index.Delete([]byte(t.ID)); err != nil {
					return err
				}
				return served.Put([]byte(t.ID), binary.BigEndian.AppendUint64(nil, uint64(now.UnixNano())))
			}
			nv := binary.BigEndian.AppendUint32(make([]byte, 0, len(v)), n)
			return ready.Put(append([]byte(nil), k...), append(nv, v[4:]...))
		}
		return nil
	})
	if err != nil {
		return pool.Taken{}, false, fmt.Errorf("pool store: take: %w", err)
	}
	return t, ok, nil
}

// PoolReturn undoes one PoolTake of t that no peer saw, in one
// transaction: a ready set's serve count goes down by one; a set removed at
// maxServes serves leaves pool/served and is ready again under its
// original key with maxServes-1 serves.
func (s *Store) PoolReturn(t pool.Taken, maxServes int) error {
	if t.ID == "" {
		return errors.New("pool store: return: empty set id")
	}
	if len(t.Data) > MaxPoolSetBytes {
		return fmt.Errorf("pool store: return %s: set of %d bytes exceeds %d", t.ID, len(t.Data), MaxPoolSetBytes)
	}
	err := s.update1(func(tx *bolt.Tx) error {
		ready, index, served, err := poolBuckets(tx)
		if err != nil {
			return err
		}
		if k := index.Get([]byte(t.ID)); k != nil {
			v := ready.Get(k)
			if len(v) < 4 {
				return nil
			}
			n := binary.BigEndian.Uint32(v[:4])
			if n == 0 {
				return nil
			}
			nv := binary.BigEndian.AppendUint32(make([]byte, 0, len(v)), n-1)
			return ready.Put(append([]byte(nil), k...), append(nv, v[4:]...))
		}
		if served.Get([]byte(t.ID)) == nil {
			return nil // neither ready nor served out: nothing to undo
		}
		if err := served.Delete([]byte(t.ID)); err != nil {
			return err
		}
		k := poolKey(t.Created, t.ID)
		v := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(t.Data)), uint32(max(maxServes-1, 0)))
		if err := ready.Put(k, append(v, t.Data...)); err != nil {
			return err
		}
		return index.Put([]byte(t.ID), k)
	})
	if err != nil {
		return fmt.Errorf("pool store: return %s: %w", t.ID, err)
	}
	return nil
}

// PoolLen counts the unexpired ready sets.
func (s *Store) PoolLen(now time.Time, maxAge time.Duration) (int, error) {
	n := 0
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPoolReady)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if !poolExpired(k, now, maxAge) {
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("pool store: count: %w", err)
	}
	return n, nil
}

// PoolPrune removes the expired ready sets; one that was served at least
// once is recorded as served. It forgets the served ids older than
// pool.ServedRetention and the oldest beyond pool.MaxServedIDs (see
// servedPruneEvery).
func (s *Store) PoolPrune(now time.Time, maxAge time.Duration) (int, error) {
	n := 0
	var next time.Time
	err := s.update1(func(tx *bolt.Tx) error {
		ready, index, served, err := poolBuckets(tx)
		if err != nil {
			return err
		}
		var dead [][]byte
		var servedIDs [][]byte
		c := ready.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if !poolExpired(k, now, maxAge) {
				continue
			}
			dead = append(dead, append([]byte(nil), k...))
			if len(v) >= 4 && binary.BigEndian.Uint32(v[:4]) > 0 && len(k) > 8 {
				servedIDs = append(servedIDs, append([]byte(nil), k[8:]...))
			}
		}
		for _, k := range dead {
			if err := ready.Delete(k); err != nil {
				return err
			}
			if len(k) > 8 {
				if err := index.Delete(k[8:]); err != nil {
					return err
				}
			}
		}
		for _, id := range servedIDs {
			if err := served.Put(id, binary.BigEndian.AppendUint64(nil, uint64(now.UnixNano()))); err != nil {
				return err
			}
		}
		n = len(dead)
		s.served.mu.Lock()
		due := !now.Before(s.served.next)
		s.served.mu.Unlock()
		if !due {
			return nil
		}
		full, err := pruneServed(served, now)
		if err != nil {
			return err
		}
		next = now.Add(servedPruneEvery)
		if full {
			next = now
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("pool store: prune: %w", err)
	}
	if !next.IsZero() {
		s.served.mu.Lock()
		s.served.next = next
		s.served.mu.Unlock()
	}
	return n, nil
}

// pruneServed deletes from pool/served the ids served out
// pool.ServedRetention or longer before now (and those whose time does
// not decode), then the oldest beyond pool.MaxServedIDs, at most
// servedPruneBatch in all; it reports whether it deleted that many.
func pruneServed(served *bolt.Bucket, now time.Time) (bool, error) {
	horizon := now.Add(-pool.ServedRetention).UnixNano()
	var dead [][]byte
	var kept []int64
	c := served.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(v) != 8 || int64(binary.BigEndian.Uint64(v)) <= horizon {
			if len(dead) < servedPruneBatch {
				dead = append(dead, bytes.Clone(k))
			}
			continue
		}
		kept = append(kept, int64(binary.BigEndian.Uint64(v)))
	}
	if extra := len(kept) - maxServedIDs; extra > 0 && len(dead) < servedPruneBatch {
		slices.Sort(kept)
		cut := kept[extra-1]
		for k, v := c.First(); k != nil && len(dead) < servedPruneBatch; k, v = c.Next() {
			if len(v) == 8 && int64(binary.BigEndian.Uint64(v)) <= cut && int64(binary.BigEndian.Uint64(v)) > horizon {
				dead = append(dead, bytes.Clone(k))
			}
		}
	}
	for _, k := range dead {
		if err := served.Delete(k); err != nil {
			return false, err
		}
	}
	return len(dead) == servedPruneBatch, nil
}
