// Package store is the node's bbolt database: the attestations it issued,
// received and learned, the revocations, the ledger of served challenge
// sets (skill.Ledger) and the challenge pool's sets (pool.Store). Records
// are kept as their signed envelopes and verified again when read, so a
// tampered file cannot make the node trust a record. The attestations a
// node issues and receives reach bbolt through a write-ahead log beside
// it (PATH-wal, wal.go); a store closed cleanly holds them all in bbolt.
// The received attestations are kept one per issuer and bounded in total
// (received.go).
package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/acaptcha/acaptcha/protocol"
)

// Direction tells whether this node issued an attestation or received it.
type Direction string

// Directions of stored attestations.
const (
	Issued   Direction = "issued"   // we verified the subject
	Received Direction = "received" // a verifier attested us
)

var (
	bucketIssued   = []byte("attestations/issued")
	bucketReceived = []byte("attestations/received")
	bucketServed   = []byte("challenges/served")
)

// Store keeps attestations (issued and received) and the ledger of served
// challenge sets in a bbolt file. Records are stored as their signed
// envelopes and verified again when read, so a tampered file cannot make
// the node trust a record.
type Store struct {
	db *bolt.DB
	// commits batches the attestation writes of concurrent sessions into
	// appends to wal; its leader alone uses wal.
	commits commitQueue
	wal     *wal
	// pending are the logged records not yet in bbolt, in log order;
	// pendingPeers counts them by the peer their keys start with.
	pmu          sync.Mutex
	pending      []*walRecord
	pendingPeers map[peer.ID]int
	// flushTimer checkpoints walCheckpointAfter after the first pending
	// record.
	flushTimer *time.Timer
	// committed counts the synced commits (log appends and bbolt
	// read-write transactions), batched the attestations the commit
	// queue put in them.
	committed, batched atomic.Uint64
	// beforeCommit, when set (tests), runs as a leader starts its commit.
	beforeCommit func()
	recovery     Recovery
	// rmu is held across the write transactions that change the
	// received bucket (checkpoints, prunes, trims), and guards
	// nReceived, the records in it; maxReceived is their bound
	// (MaxReceived, or less in tests). See received.go.
	rmu         sync.Mutex
	nReceived   int
	maxReceived int
}

// Recovery is what Open found in the write-ahead log: the attestations a
// crash (or a kill) left there, which Open moved into bbolt, and the
// frames that passed their checksum but held no attestation this version
// decodes (left out). After a clean Close both are zero.
type Recovery struct {
	Records, Undecodable int
}

// Recovered returns what Open recovered from the write-ahead log.
func (s *Store) Recovered() Recovery { return s.recovery }

// walCheckpointAfter is the longest a logged record waits for its
// checkpoint into bbolt.
const walCheckpointAfter = time.Second

// Commits returns how many synced commits the store made since it was
// opened (appends to the write-ahead log, which sync once, and bbolt
// transactions, which sync twice), and how many attestation writes went
// through the commit queue (the attestations this node issued and
// received, batched with those of concurrent sessions). On a disk, syncs
// rather than bytes are what a busy node's store costs.
func (s *Store) Commits() (commits, batched uint64) {
	return s.committed.Load(), s.batched.Load()
}

// update1 runs fn in a read-write transaction of its own (DB.Update) and
// counts the commit.
func (s *Store) update1(fn func(*bolt.Tx) error) error {
	err := s.db.Update(fn)
	if err == nil {
		s.committed.Add(1)
	}
	return err
}

// Entry is one stored attestation.
type Entry struct {
	Key         string
	Direction   Direction
	Attestation *protocol.Attestation
	Envelope    []byte
}

// ErrLocked is returned when another process holds the store.
var ErrLocked = errors.New("store is locked by another process (is a node running with it? pass --store)")

// Open opens or creates the store at path.
func Open(path string) (*Store, error) { return open(path, MaxReceived) }

// open opens the store at path, keeping at most maxReceived received
// records.
func open(path string, maxReceived int) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store directory: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("open store %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	var gen uint64
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketIssued, bucketReceived, bucketServed, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		var ok bool
		if gen, ok = walGeneration(tx); !ok {
			// A new store starts at a random generation: the frames of
			// a log left beside a deleted or replaced database file are
			// never taken for its own.
			var b [8]byte
			if _, err := rand.Read(b[:]); err != nil {
				return fmt.Errorf("draw write-ahead log generation: %w", err)
			}
			gen = binary.BigEndian.Uint64(b[:]) >> 1 // room for 2^63 checkpoints
			return putWALGeneration(tx, gen)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("init store %s: %w", path, err)
	}
	s := &Store{db: db, pendingPeers: map[peer.ID]int{}, maxReceived: maxReceived}
	// A store written before received records were bounded (or with a
	// larger bound) is trimmed first, in transactions of its own.
	if err := s.openReceived(time.Now()); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// bbolt's file lock is held: this process alone uses the log.
	w, recs, undecodable, err := openWAL(path+"-wal", gen)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s.wal, s.recovery = w, Recovery{Records: len(recs), Undecodable: undecodable}
	s.flushTimer = time.AfterFunc(walCheckpointAfter, func() { _ = s.flush() })
	s.flushTimer.Stop()
	// Move what a crash left in the log into bbolt, and start a new
	// generation even when there was none: frames left in the file from
	// before are never read again.
	if err := s.checkpointRecovered(recs); err != nil {
		w.close()
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

// checkpointRecovered writes the records read from the log at open into
// bbolt and starts the log's next generation.
func (s *Store) checkpointRecovered(recs []*walRecord) error {
	next := s.wal.gen + 1
	if err := s.applyRecords(next, recs); err != nil {
		return fmt.Errorf("recover write-ahead log: %w", err)
	}
	s.wal.restart(next)
	return nil
}

// Close moves the logged attestations into bbolt and closes the store.
// Writes after it fail. When the final checkpoint fails, its records stay
// in the log for the next Open.
func (s *Store) Close() error {
	err := s.enqueue(&pendingWrite{close: true, done: make(chan error, 1)})
	if errors.Is(err, errClosed) {
		return nil // closed already
	}
	s.flushTimer.Stop()
	return errors.Join(err, s.wal.close(), s.db.Close())
}

// key is the peer the record is about (subject for issued, issuer for
// received), then the issue time, then a digest of the envelope: entries of
// one peer sort together, oldest first, and re-putting the same envelope is
// idempotent.
func entryKey(p peer.ID, at time.Time, env []byte) []byte {
	h := sha256.Sum256(env)
	k := make([]byte, 0, len(p)+1+8+8)
	k = append(k, []byte(p)...)
	k = append(k, 0)
	k = binary.BigEndian.AppendUint64(k, uint64(at.Unix()))
	return append(k, h[:8]...)
}

func bucketFor(d Direction) ([]byte, error) {
	switch d {
	case Issued:
		return bucketIssued, nil
	case Received:
		return bucketReceived, nil
	}
	return nil, fmt.Errorf("unknown direction %q", d)
}

// Put stores an envelope. Issued records are keyed by subject, received
// ones by issuer. An issued rejection replaces the older rejections of its
// subject (see PutIssued); a received record replaces its issuer's older
// records about the same subject, and the received records are bounded by
// MaxReceived (see putReceived). It returns once the record is on the
// disk: in the write-ahead log, with the records of concurrent sessions in
// the same synced append; a checkpoint moves it into bbolt later.
func (s *Store) Put(d Direction, env []byte, a *protocol.Attestation) error {
	r, err := newWALRecord(d, env, a)
	if err != nil {
		return err
	}
	if err := s.put(r); err != nil {
		return fmt.Errorf("store attestation: %w", err)
	}
	return nil
}

// PutIssued stores an attestation this node issued. A rejection replaces
// the older rejections of the same subject when it reaches bbolt, in the
// same transaction: the rejections of one peer coalesce into the newest
// (which alone drives the back-off after a restart), so a peer failing
// again and again does not grow the store. Acceptances are kept.
func (s *Store) PutIssued(env []byte, a *protocol.Attestation) error {
	return s.Put(Issued, env, a)
}

// putIssuedRejection puts the issued rejection env under key k and deletes
// the older rejections of its subject. It decodes them without a
// signature check (decodeStored): it runs inside the write transaction,
// over every record of the subject. Run again, it finds nothing more to
// delete and puts the same record.
func putIssuedRejection(tx *bolt.Tx, k, env []byte, a *protocol.Attestation) error {
	prefix := append([]byte(a.Subject), 0)
	b := tx.Bucket(bucketIssued)
	var dead [][]byte
	c := b.Cursor()
	for kk, v := c.Seek(prefix); kk != nil && bytes.HasPrefix(kk, prefix); kk, v = c.Next() {
		if bytes.Equal(kk, k) {
			continue
		}
		old, ok := decodeStored(v)
		if !ok || old.Subject != a.Subject || old.Accepted || old.IssuedAt.After(a.IssuedAt) {
			continue
		}
		dead = append(dead, bytes.Clone(kk))
	}
	for _, kk := range dead {
		if err := b.Delete(kk); err != nil {
			return err
		}
	}
	return b.Put(k, env)
}

// List returns the stored entries of one direction ("" for both), for one
// peer (empty for all), verifying each envelope again (expired records are
// listed; their Attestation.Valid tells).
func (s *Store) List(d Direction, p peer.ID) ([]Entry, error) {
	dirs := []Direction{Issued, Received}
	if d != "" {
		if _, err := bucketFor(d); err != nil {
			return nil, err
		}
		dirs = []Direction{d}
	}
	// Records still in the log that the listing could show go to bbolt
	// first.
	if err := s.flushFor(p); err != nil {
		return nil, err
	}
	var out []Entry
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, dir := range dirs {
			b, _ := bucketFor(dir)
			c := tx.Bucket(b).Cursor()
			var prefix []byte
			if p != "" {
				prefix = append([]byte(p), 0)
			}
			for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				env := append([]byte(nil), v...)
				a, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{AllowExpired: true})
				if err != nil {
					return fmt.Errorf("stored attestation %x does not verify: %w", k, err)
				}
				out = append(out, Entry{Key: fmt.Sprintf("%x", k), Direction: dir, Attestation: a, Envelope: env})
			}
		}
		return nil
	})
	return out, err
}

// Latest returns the newest valid (unexpired, accepted or not) attestation
// of direction d about or from peer p.
func (s *Store) Latest(d Direction, p peer.ID, now time.Time) (*Entry, error) {
	es, err := s.List(d, p)
	if err != nil {
		return nil, err
	}
	var best *Entry
	for i := range es {
		e := &es[i]
		if !e.Attestation.Valid(now) {
			continue
		}
		if best == nil || e.Attestation.IssuedAt.After(best.Attestation.IssuedAt) {
			best = e
		}
	}
	return best, nil
}

// Get returns the entry with the given key (as printed by List).
func (s *Store) Get(key string) (*Entry, error) {
	es, err := s.List("", "")
	if err != nil {
		return nil, err
	}
	for i := range es {
		if es[i].Key == key || (len(key) >= 8 && bytes.HasSuffix([]byte(es[i].Key), []byte(key))) {
			return &es[i], nil
		}
	}
	return nil, fmt.Errorf("no attestation with key %s", key)
}

// Unserve implements skill.Ledger: it undoes one granted TryServe of id
// (the set was given back unseen).
func (s *Store) Unserve(id string) error {
	err := s.update1(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketServed)
		v := b.Get([]byte(id))
		if len(v) != 8 {
			return nil
		}
		switch n := binary.BigEndian.Uint64(v); n {
		case 0, 1:
			return b.Delete([]byte(id))
		default:
			return b.Put([]byte(id), binary.BigEndian.AppendUint64(nil, n-1))
		}
	})
	if err != nil {
		return fmt.Errorf("unrecord served challenge: %w", err)
	}
	return nil
}

// TryServe implements skill.Ledger on the store, so challenge sets served
// once are never served again after a restart.
func (s *Store) TryServe(id string, max int) (bool, error) {
	ok := false
	err := s.update1(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketServed)
		var n uint64
		if v := b.Get([]byte(id)); len(v) == 8 {
			n = binary.BigEndian.Uint64(v)
		}
		if n >= uint64(max) {
			return nil
		}
		ok = true
		return b.Put([]byte(id), binary.BigEndian.AppendUint64(nil, n+1))
	})
	if err != nil {
		return false, fmt.Errorf("record served challenge: %w", err)
	}
	return ok, nil
}

// pruneBatch bounds the deletions of one transaction of PruneExpired: a
// node's commits stay small while it prunes a large backlog.
const pruneBatch = 1000

// PruneExpired deletes the issued and received attestations that expired
// before cutoff and returns how many it deleted. A record's key holds its
// issue time, so only records issued before cutoff are decoded; their
// signatures are not checked again (the store holds only records that
// verified when they were put), and a record that no longer decodes is
// left for List to report, not deleted. It deletes in transactions of at
// most pruneBatch records, and stops early, with ctx's error, when ctx
// ends (a node that closes does not wait for a long backlog).
func (s *Store) PruneExpired(ctx context.Context, cutoff time.Time) (int, error) {
	if err := s.flushFor(""); err != nil {
		return 0, fmt.Errorf("prune expired attestations: %w", err)
	}
	total := 0
	for _, b := range [][]byte{bucketIssued, bucketReceived} {
		// after is the key to resume the scan after: a transaction
		// deletes at most pruneBatch records, then the next one goes on.
		var after []byte
		for {
			if err := ctx.Err(); err != nil {
				return total, fmt.Errorf("prune expired attestations: %w", err)
			}
			deleted, next, err := s.pruneSome(ctx, b, after, cutoff)
			total += deleted
			if err != nil {
				return total, fmt.Errorf("prune expired attestations: %w", err)
			}
			if next == nil {
				break
			}
			after = next
		}
	}
	return total, nil
}

// pruneSome deletes up to pruneBatch records of bucket b expired before
// cutoff, scanning from the first key after after (nil: from the start).
// It returns the last key it looked at when it stopped at the batch bound
// (nil when it reached the end). It reads in a read-only transaction and
// commits only when there is something to delete.
func (s *Store) pruneSome(ctx context.Context, b []byte, after []byte, cutoff time.Time) (int, []byte, error) {
	var dead [][]byte
	var next []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(b).Cursor()
		k, v := c.First()
		if after != nil {
			k, v = c.Seek(after)
			if k != nil && bytes.Equal(k, after) {
				k, v = c.Next()
			}
		}
		for read := 0; k != nil; k, v = c.Next() {
			if read++; read%1024 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			if len(k) < 17 {
				continue
			}
			if issued := int64(binary.BigEndian.Uint64(k[len(k)-16 : len(k)-8])); issued >= cutoff.Unix() {
				continue // issued at or after cutoff: not expired before it
			}
			if exp, ok := expiresAt(v); !ok || !exp.Before(cutoff) {
				continue
			}
			dead = append(dead, bytes.Clone(k))
			if len(dead) == pruneBatch {
				next = bytes.Clone(k)
				return nil
			}
		}
		return nil
	})
	if err != nil || len(dead) == 0 {
		return 0, nil, err
	}
	// Deleting a key twice or one already gone is harmless: records are
	// never rewritten under their key (it holds the envelope's digest).
	n, err := s.deleteKeys(b, dead)
	if err != nil {
		return 0, nil, err
	}
	return n, next, nil
}

// expiresAt reads a stored envelope's expiry without checking its
// signature again (a check costs about 50 µs; a backlog of a million
// expired records would take a minute of CPU).
func expiresAt(env []byte) (time.Time, bool) {
	a, ok := decodeStored(env)
	if !ok {
		return time.Time{}, false
	}
	return a.ExpiresAt, true
}

// decodeStored decodes a stored envelope's attestation without checking
// its signature again: the store holds only records that verified when
// they were put.
func decodeStored(env []byte) (*protocol.Attestation, bool) {
	e, err := record.UnmarshalEnvelope(env)
	if err != nil {
		return nil, false
	}
	var a protocol.Attestation
	if err := e.TypedRecord(&a); err != nil {
		return nil, false
	}
	return &a, true
}
