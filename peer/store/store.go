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
	"hash/fnv"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
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
	db   *bolt.DB
	path string
	// readOnly: opened with Options.ReadOnly. Such a store has no log
	// (wal, flushTimer nil); replay holds the records its log held, which
	// List shows as a checkpoint would have applied them.
	readOnly bool
	replay   []*walRecord
	// commits batches the attestation writes of concurrent sessions into
	// appends to wal; its leader alone uses wal.
	commits commitQueue
	wal     *wal
	// pending are the logged records not yet in bbolt, in log order;
	// pendingPeers counts them by the peer their keys start with.
	pmu          sync.Mutex
	pending      []*walRecord
	pendingPeers map[peer.ID]int
	// flushTimer checkpoints once the log was quiet for
	// walCheckpointAfter, or walCheckpointMaxAge after firstPending, the
	// first pending record's append.
	flushTimer   *time.Timer
	firstPending time.Time
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
	// served spaces PoolPrune's scans of pool/served.
	served servedPrune
}

// Recovery is what Open found in the write-ahead log: the attestations a
// crash (or a kill) left there, which Open moved into bbolt (a read-only
// Open only reads them), and the frames that passed their checksum but
// held no attestation this version decodes (left out). After a clean Close
// both are zero.
type Recovery struct {
	Records, Undecodable int
}

// Recovered returns what Open recovered from the write-ahead log.
func (s *Store) Recovered() Recovery { return s.recovery }

// initialMmapSize is the size bbolt maps the store's file at when it
// opens it (bolt.Options.InitialMmapSize): the file of about 40,000
// records grows into it without being mapped again.
//
// On Windows bbolt grows the file itself to the mapped size at open,
// so there the store keeps bbolt's default (a file as small as its data).
var initialMmapSize = func() int {
	if runtime.GOOS == "windows" {
		return 0
	}
	return 64 << 20
}()

// storeAllocSize is how far past its data bbolt grows the store's file
// when it must grow it (bolt.DB.AllocSize): one growth, a truncate and a
// sync, per checkpoint of up to 512 records at most.
const storeAllocSize = 1 << 20

// walCheckpointAfter is how long the log must be quiet (no append) for
// the logged records to be checkpointed into bbolt.
const walCheckpointAfter = time.Second

// walCheckpointMaxAge is the longest a logged record waits for its
// checkpoint while appends keep coming (walCheckpointRecords pending
// records checkpoint sooner). A node under steady load checkpointed once
// a second, a bbolt commit (two syncs and a page per tree level of every
// bucket touched) for however few records the second brought; at 100
// records a second it now commits 512 at a time, every 5 s. Durability
// is unchanged: every record is on the disk in the log before it is
// acknowledged, and a read that could see a logged record checkpoints
// first (flushFor) or reads the log (overlay).
var walCheckpointMaxAge = 10 * time.Second // a variable for tests

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
// counts the commit. A panic of bbolt on damaged pages (the transaction is
// rolled back) becomes an error wrapping ErrCorrupt, as in view.
func (s *Store) update1(fn func(*bolt.Tx) error) error {
	err := guard(s.path, func() error { return s.db.Update(fn) })
	var pe *panicError
	if errors.As(err, &pe) {
		return pe.CorruptError
	}
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
var ErrLocked = errors.New("store is locked by another process (a running node?)")

// ErrCorrupt is what Open returns (wrapped in a *CorruptError) for a file
// that is not a bbolt database it can read: damaged, cut short, or
// something else altogether. bbolt panics on the pages it finds
// inconsistent, and a read past the end of a cut file faults; Open checks
// the file's header before bbolt maps it and turns what bbolt still
// panics on while opening and reading the store into this error.
var ErrCorrupt = errors.New("store file is damaged")

// CorruptError names the damaged store file and what is wrong with it.
// errors.Is(err, ErrCorrupt) holds for it.
type CorruptError struct {
	Path   string
	Detail string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("store %s is damaged: %s; move it aside to start afresh", e.Path, e.Detail)
}

// Is makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// ErrNotStore is returned by a read-only Open for a file that holds no
// acaptcha store: an empty file, or a bbolt database without the store's
// buckets. (A read-write Open makes a store of an empty file.)
var ErrNotStore = errors.New("not an acaptcha store")

// ErrReadOnly is returned by the writes to a store opened read-only.
var ErrReadOnly = errors.New("store is open read-only")

// Options tune OpenWith.
type Options struct {
	// ReadOnly opens an existing store for reading only, for commands
	// that list or check what it holds: nothing is ever written to the
	// file or its write-ahead log, and no file is created. A path with no
	// file is an error wrapping fs.ErrNotExist, an empty file one
	// wrapping ErrNotStore. bbolt opens the file read-only under a shared
	// lock, so a node running with the store makes it fail with
	// ErrLocked. The attestations a crash left in the write-ahead log are
	// read and listed (List) without being moved into bbolt; the writes
	// (Put, the ledger, the pool, revocations, learned records, pruning)
	// fail.
	ReadOnly bool
}

// Open opens or creates the store at path.
func Open(path string) (*Store, error) { return OpenWith(path, Options{}) }

// OpenWith opens the store at path as o says; Options{} is Open.
func OpenWith(path string, o Options) (*Store, error) { return openWith(path, MaxReceived, o) }

// open opens the store at path, keeping at most maxReceived received
// records.
func open(path string, maxReceived int) (*Store, error) {
	return openWith(path, maxReceived, Options{})
}

func openWith(path string, maxReceived int, o Options) (s *Store, err error) {
	fi, statErr := os.Stat(path)
	switch {
	case statErr == nil && fi.IsDir():
		return nil, fmt.Errorf("store %s is a directory, not a store file", path)
	case statErr == nil && fi.Size() > 0:
		// Check bbolt's header before bbolt maps the file: it trusts the
		// page numbers there, and faults on a page past the end of a
		// file cut short.
		if err := checkBoltFile(path, fi.Size()); err != nil {
			if err = confirmDamage(path, err); err != nil {
				return nil, err
			}
		}
	case o.ReadOnly && statErr == nil:
		return nil, fmt.Errorf("store %s is %w (empty file)", path, ErrNotStore)
	case o.ReadOnly:
		return nil, fmt.Errorf("open store: %w", statErr)
	}
	if !o.ReadOnly {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("store directory: %w", err)
		}
	}
	// files are what bbolt opened: after a panic inside bolt.Open there
	// is no DB to close, but its file (and its lock) must not stay open.
	var (
		files []*os.File
		db    *bolt.DB
		w     *wal
	)
	err = guard(path, func() error {
		var err error
		db, err = bolt.Open(path, 0o600, &bolt.Options{
			Timeout:  2 * time.Second,
			ReadOnly: o.ReadOnly,
			// Address space, not memory: bbolt maps a growing file
			// again at every doubling up to this size, copying every
			// node the commit holds out of the old mapping and
			// waiting for the read transactions to end (about 4 % of
			// a new node's CPU over its first thousand attestations).
			InitialMmapSize: initialMmapSize,
			OpenFile: func(name string, flag int, mode os.FileMode) (*os.File, error) {
				f, err := os.OpenFile(name, flag, mode)
				if err == nil {
					files = append(files, f)
				}
				return f, err
			},
		})
		switch {
		case errors.Is(err, berrors.ErrTimeout):
			return fmt.Errorf("open store %s: %w", path, ErrLocked)
		case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
			return &CorruptError{Path: path, Detail: err.Error()}
		case err != nil:
			return fmt.Errorf("open store %s: %w", path, err)
		}
		if o.ReadOnly {
			s, err = openReadOnly(db, path)
		} else {
			// With the map larger than bbolt's allocation step, bbolt
			// grows the file by that step past what it needs (16 MiB
			// by default): a store of a few records would be a 16 MiB
			// file.
			db.AllocSize = storeAllocSize
			s, err = openReadWrite(db, path, maxReceived, &w)
		}
		return err
	})
	if err == nil {
		return s, nil
	}
	var pe *panicError
	switch {
	case errors.As(err, &pe):
		// bbolt panicked. Its file lock lasts as long as the file is
		// mapped, which only DB.Close undoes; after a panic inside
		// bolt.Open there is no DB, and the file stays mapped (and
		// locked for this process) until it exits.
		if w != nil {
			w.close()
		}
		if db != nil {
			closeAbandoned(db)
		}
		for _, f := range files {
			f.Close()
		}
		return nil, pe.CorruptError
	case db != nil:
		db.Close()
	}
	return nil, err
}

// closeAbandoned closes db after bbolt panicked in it. The panic may have
// left bbolt's write lock held (the rollback that releases it can panic
// too), and DB.Close would then wait for it forever: it is given a
// moment, then left running.
func closeAbandoned(db *bolt.DB) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = recover() }()
		db.Close()
	}()
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// openReadWrite opens the store on db (open read-write): it creates the
// buckets, trims the received records, and moves what a crash left in the
// write-ahead log into bbolt. On an error it has closed what it opened
// but db; *wp is the log once opened, for the caller to close when this
// panics.
func openReadWrite(db *bolt.DB, path string, maxReceived int, wp **wal) (*Store, error) {
	var gen uint64
	err := db.Update(func(tx *bolt.Tx) error {
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
		return nil, fmt.Errorf("init store %s: %w", path, err)
	}
	s := &Store{db: db, path: path, pendingPeers: map[peer.ID]int{}, maxReceived: maxReceived}
	// A store written before received records were bounded (or with a
	// larger bound) is trimmed first, in transactions of its own.
	if err := s.openReceived(time.Now()); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// bbolt's file lock is held: this process alone uses the log.
	w, recs, undecodable, err := openWAL(path+"-wal", gen)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	*wp = w
	s.wal, s.recovery = w, Recovery{Records: len(recs), Undecodable: undecodable}
	s.flushTimer = time.AfterFunc(walCheckpointAfter, func() { _ = s.flush() })
	s.flushTimer.Stop()
	// Move what a crash left in the log into bbolt, and start a new
	// generation even when there was none: frames left in the file from
	// before are never read again.
	if err := s.checkpointRecovered(recs); err != nil {
		w.close()
		*wp = nil
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

// openReadOnly opens the store on db (open read-only): it checks that db
// holds a store and reads, without changing it, what a crash left in the
// write-ahead log.
func openReadOnly(db *bolt.DB, path string) (*Store, error) {
	var (
		gen    uint64
		hasLog bool
	)
	err := db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketIssued) == nil || tx.Bucket(bucketReceived) == nil {
			return fmt.Errorf("store %s is %w (a bbolt database without its attestation buckets)", path, ErrNotStore)
		}
		gen, hasLog = walGeneration(tx)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, path: path, readOnly: true, pendingPeers: map[peer.ID]int{}, maxReceived: MaxReceived}
	if hasLog {
		recs, undecodable, err := readWAL(path+"-wal", gen)
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", path, err)
		}
		s.replay, s.recovery = recs, Recovery{Records: len(recs), Undecodable: undecodable}
	}
	return s, nil
}

// readWAL reads the records of generation gen in the write-ahead log at
// path without changing the file (openWAL, read-only); a missing log holds
// none.
func readWAL(path string, gen uint64) (recs []*walRecord, undecodable int, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("open write-ahead log: %w", err)
	}
	defer f.Close()
	data := make([]byte, walSize)
	n, err := io.ReadFull(f, data)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, 0, fmt.Errorf("read write-ahead log: %w", err)
	}
	clear(data[n:]) // zeros end the frames
	recs, undecodable = walRecords(data, gen, true)
	return recs, undecodable, nil
}

// confirmDamage checks again, with the file locked, a store that
// checkBoltFile found damaged, and returns the error that stands (nil: the
// file is sound). checkBoltFile reads the file without its lock: a node
// committing meanwhile can change the pages it reads, and a store in use
// is to be reported locked, never damaged. bbolt, opening a file
// read-only, takes a shared lock (no writer holds the file meanwhile) and
// reads only the meta pages.
func confirmDamage(path string, damage error) error {
	var ce *CorruptError
	if !errors.As(damage, &ce) {
		return damage
	}
	var (
		db  *bolt.DB
		err error
	)
	if guard(path, func() error {
		db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 2 * time.Second})
		return nil
	}) != nil {
		return damage // bbolt panicked: no DB to close
	}
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return fmt.Errorf("open store %s: %w", path, ErrLocked)
	case err != nil:
		return damage
	}
	defer db.Close()
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	return checkBoltFile(path, fi.Size())
}

// The parts of bbolt's file format (go.etcd.io/bbolt/internal/common)
// that checkBoltFile reads. A page starts with a header: its id (uint64),
// flags (uint16), count (uint16) and overflow (uint32). Pages 0 and 1 are
// meta pages; after the header, a meta holds the magic (uint32), the
// format version (uint32), the page size (uint32), flags (uint32), the
// root bucket (its page, uint64, and a sequence, uint64), the freelist's
// page (uint64), the high-water mark (the number of pages in use, uint64),
// the transaction id (uint64) and a checksum (FNV-64a of what precedes
// it), all in the machine's byte order.
const (
	boltMagic         = 0xED0CDAED
	boltVersion       = 2
	boltPageHeader    = 16
	boltMetaChecksum  = 56 // offset of the checksum in the meta
	boltMetaSize      = 64
	boltNoFreelist    = ^uint64(0)
	boltBranchPage    = 0x01
	boltLeafPage      = 0x02
	boltFreelistPage  = 0x10
	boltMinPageSize   = 1 << 10
	boltMaxPageSize   = 1 << 24
	boltFirstDataPage = 2
)

// boltMeta is a meta page's fields that checkBoltFile checks.
type boltMeta struct {
	pageSize                   uint64
	root, freelist, pgid, txid uint64
}

// readBoltMeta decodes the meta page at the start of page; ok is false
// when it is not a valid one (magic, version or checksum).
func readBoltMeta(page []byte) (m boltMeta, ok bool) {
	if len(page) < boltPageHeader+boltMetaSize {
		return m, false
	}
	b := page[boltPageHeader : boltPageHeader+boltMetaSize]
	ne := binary.NativeEndian
	if ne.Uint32(b[0:]) != boltMagic || ne.Uint32(b[4:]) != boltVersion {
		return m, false
	}
	h := fnv.New64a()
	h.Write(b[:boltMetaChecksum])
	if h.Sum64() != ne.Uint64(b[boltMetaChecksum:]) {
		return m, false
	}
	return boltMeta{
		pageSize: uint64(ne.Uint32(b[8:])),
		root:     ne.Uint64(b[16:]), freelist: ne.Uint64(b[32:]),
		pgid: ne.Uint64(b[40:]), txid: ne.Uint64(b[48:]),
	}, true
}

// checkBoltFile checks the header of the bbolt file at path, of size
// bytes, before bbolt maps it: the meta page bbolt will use (the valid one
// with the higher transaction id) must name a page size it can use, and
// pages for the root bucket and the freelist that lie within the file and
// are of their kind. bbolt checks the magic, version and checksum of the
// meta pages, but not that the pages they name exist: a file cut short
// makes it read past the end of its mapping (a fatal fault, not a panic)
// and garbage in place of the freelist page makes it panic.
func checkBoltFile(path string, size int64) error {
	corrupt := func(format string, args ...any) error {
		return &CorruptError{Path: path, Detail: fmt.Sprintf(format, args...)}
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer f.Close()
	page := make([]byte, boltPageHeader+boltMetaSize)
	readAt := func(off int64) bool {
		n, _ := f.ReadAt(page, off)
		return n == len(page)
	}
	var metas []boltMeta
	if readAt(0) {
		if m, ok := readBoltMeta(page); ok {
			metas = append(metas, m)
		}
	}
	// Page 1 is one page size in; the page size is in either meta, so try
	// them all as bbolt does.
	for ps := int64(boltMinPageSize); ps <= boltMaxPageSize && ps+int64(len(page)) <= size; ps <<= 1 {
		if !readAt(ps) {
			break
		}
		if m, ok := readBoltMeta(page); ok && m.pageSize == uint64(ps) {
			metas = append(metas, m)
			break
		}
	}
	if len(metas) == 0 {
		return corrupt("no valid bbolt meta page (not a store file, or its first pages are overwritten)")
	}
	m := metas[0]
	if len(metas) == 2 && metas[1].txid > m.txid {
		m = metas[1]
	}
	ps := m.pageSize
	switch {
	case ps < boltMinPageSize || ps > boltMaxPageSize || ps&(ps-1) != 0:
		return corrupt("page size %d", ps)
	case m.pgid < boltFirstDataPage+1 || m.pgid > uint64(size)/ps:
		return corrupt("cut short: %d bytes where its %d pages of %d bytes take %d", size, m.pgid, ps, m.pgid*ps)
	case m.root < boltFirstDataPage || m.root >= m.pgid:
		return corrupt("root bucket page %d outside its %d pages", m.root, m.pgid)
	case m.freelist != boltNoFreelist && (m.freelist < boltFirstDataPage || m.freelist >= m.pgid):
		return corrupt("freelist page %d outside its %d pages", m.freelist, m.pgid)
	}
	for _, c := range []struct {
		what  string
		id    uint64
		flags uint16
	}{{"root bucket", m.root, boltBranchPage | boltLeafPage}, {"freelist", m.freelist, boltFreelistPage}} {
		if c.id == boltNoFreelist {
			continue
		}
		if !readAt(int64(c.id * ps)) {
			return corrupt("cannot read its %s page %d", c.what, c.id)
		}
		ne := binary.NativeEndian
		id, flags, overflow := ne.Uint64(page), ne.Uint16(page[8:]), uint64(ne.Uint32(page[12:]))
		if id != c.id || flags&c.flags == 0 || overflow >= m.pgid-c.id {
			return corrupt("its %s page %d holds something else (page id %d, flags %#x, overflow %d)", c.what, c.id, id, flags, overflow)
		}
		if c.flags == boltFreelistPage {
			if err := checkFreelist(f, m, overflow, page); err != nil {
				return corrupt("its freelist page %d: %v", c.id, err)
			}
		}
	}
	return nil
}

// checkFreelist checks the freelist page of m, whose first bytes are in
// page: bbolt allocates as many page ids as its count says (the first
// element holds the count when the header's is 0xFFFF) and reads them, so
// they must fit in the page and its overflow pages, and name pages within
// the file.
func checkFreelist(f *os.File, m boltMeta, overflow uint64, page []byte) error {
	ne := binary.NativeEndian
	first, count := uint64(0), uint64(ne.Uint16(page[10:]))
	if count == 0xFFFF {
		first, count = 1, ne.Uint64(page[boltPageHeader:])
	}
	room := ((overflow+1)*m.pageSize - boltPageHeader) / 8
	if count > room || first+count > room {
		return fmt.Errorf("%d page ids do not fit in %d pages", count, overflow+1)
	}
	ids := make([]byte, (first+count)*8)
	if n, _ := f.ReadAt(ids, int64(m.freelist*m.pageSize+boltPageHeader)); n != len(ids) {
		return errors.New("cut short")
	}
	for i := first; i < first+count; i++ {
		if id := ne.Uint64(ids[i*8:]); id < boltFirstDataPage || id >= m.pgid {
			return fmt.Errorf("free page %d outside its %d pages", id, m.pgid)
		}
	}
	return nil
}

// panicError is a panic of bbolt that guard recovered.
type panicError struct{ *CorruptError }

// guard runs fn, turning a panic of bbolt (it panics on pages it finds
// inconsistent) or a fault reading the mapped file into a *panicError, the
// store at path being damaged. Any other panic goes on.
func guard(path string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if !bboltPanic(r) {
			panic(r)
		}
		err = &panicError{&CorruptError{Path: path, Detail: fmt.Sprint(r)}}
	}()
	return fn()
}

// bboltPanic tells whether the panic r being recovered (called from the
// recovering function) is a fault reading memory at an address (the mapped
// file: nil dereferences carry none) or was raised in bbolt.
func bboltPanic(r any) bool {
	if _, ok := r.(interface{ Addr() uintptr }); ok {
		return true
	}
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "runtime.") {
			return strings.HasPrefix(f.Function, "go.etcd.io/bbolt")
		}
		if !more {
			return false
		}
	}
}

// view runs fn in a read-only transaction (DB.View), a panic of bbolt on
// damaged pages becoming an error wrapping ErrCorrupt.
func (s *Store) view(fn func(*bolt.Tx) error) error {
	err := guard(s.path, func() error { return s.db.View(fn) })
	var pe *panicError
	if errors.As(err, &pe) {
		return pe.CorruptError
	}
	return err
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
	if s.readOnly {
		s.commits.mu.Lock()
		closed := s.commits.closed
		s.commits.closed = true
		s.commits.mu.Unlock()
		if closed {
			return nil
		}
		return s.db.Close()
	}
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
	if s.readOnly {
		return fmt.Errorf("store attestation: %w", ErrReadOnly)
	}
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
// the older rejections of the same subject that it supersedes (Supersedes)
// when it reaches bbolt, in the same transaction: the rejections of one
// peer coalesce into the newest
// (which alone drives the back-off after a restart), so a peer failing
// again and again does not grow the store. Acceptances are kept.
func (s *Store) PutIssued(env []byte, a *protocol.Attestation) error {
	return s.Put(Issued, env, a)
}

// putIssuedRejection puts the issued rejection env under key k and deletes
// the older rejections of its subject: those it supersedes (Supersedes; a
// rejection of the same second that expires later supersedes it and
// stays). It decodes them without a
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
		if !ok || old.Subject != a.Subject || old.Accepted || !Supersedes(a.IssuedAt, a.ExpiresAt, false, old.IssuedAt, old.ExpiresAt, false) {
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
	dirs, raw, err := s.stored(d, p)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for i, dir := range dirs {
		for _, kv := range raw[i] {
			e, err := verifiedEntry(dir, kv)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// ListSound is List leaving out the records that no longer decode or
// verify (bbolt checks no data page: a value damaged in place is seen
// only when read), and returns how many it left out. The node builds its
// index with it at start, so that one damaged record neither stops it
// nor is served; List, for the commands that show the store, reports
// such a record as an error.
func (s *Store) ListSound(d Direction, p peer.ID) ([]Entry, int, error) {
	dirs, raw, err := s.stored(d, p)
	if err != nil {
		return nil, 0, err
	}
	var out []Entry
	bad := 0
	for i, dir := range dirs {
		for _, kv := range raw[i] {
			e, err := verifiedEntry(dir, kv)
			if err != nil {
				bad++
				continue
			}
			out = append(out, e)
		}
	}
	return out, bad, nil
}

// NewestSound returns, of the records of direction d, for each issuer and
// subject the one that supersedes the others (Supersedes) among those
// that are still sound, in key order, and how many records it found
// damaged. It is EachNewestSound collecting what it yields; the node's
// start uses EachNewestSound, which holds no more than a chunk of
// records at a time.
func (s *Store) NewestSound(d Direction, self crypto.PubKey) ([]Entry, int, error) {
	var out []Entry
	bad, err := s.EachNewestSound(d, self, func(e Entry) error {
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return out, bad, nil
}

// newestChunk is how many records EachNewestSound copies out of the
// database at a time (more when one peer's records run past it: a
// peer's records are never split between chunks).
var newestChunk = 1024 // a variable for tests

// EachNewestSound calls fn, in key order, with the record of each issuer
// and subject of direction d that supersedes the others (Supersedes)
// among those that are still sound, and returns how many records it
// found damaged; an error of fn stops it and is returned. Every record is
// decoded; only the ones it yields, and the damaged ones it passed over
// for them, are checked further. A record sealed with self (the node's
// own public key; nil for none) is sound when
// protocol.DecodeOwnAttestation takes it: every check but the signature,
// which the node made and its store keeps. Any other record is sound
// when it verifies.
//
// The node builds its index of issued verdicts with it at start: a peer
// re-attested every few hours leaves a record per session for their
// lifetime and the keep-expired time, and remote peers make the node
// issue one record per session drawn (some 744,000 at the default draw
// budget, one per fresh peer ID), so verifying them all made a restart
// cost a signature check per session ever kept, and holding them all
// (a copy and a decoded attestation each, about 3.4 KB) some 2.5 GB.
// The records of one issuer and subject share the key's peer part
// (entryKey: the subject of an issued record, the issuer of a received
// one), so it reads the bucket in chunks of about newestChunk records
// that never split a peer's records, each in its own read transaction,
// and yields a chunk's winners before it reads the next.
func (s *Store) EachNewestSound(d Direction, self crypto.PubKey, fn func(Entry) error) (int, error) {
	var selfID peer.ID
	if self != nil {
		var err error
		if selfID, err = peer.IDFromPublicKey(self); err != nil {
			return 0, fmt.Errorf("newest sound attestations: %w", err)
		}
	}
	b, err := bucketFor(d)
	if err != nil {
		return 0, err
	}
	pick := func(kvs []storedKV) (int, error) {
		return eachNewest(d, self, selfID, kvs, fn)
	}
	if len(s.replay) > 0 {
		// A read-only store whose log's records overlay the database's
		// (Store.replay): the overlay needs every record of the
		// direction; the CLI's, not the node's.
		_, raw, err := s.stored(d, "")
		if err != nil {
			return 0, err
		}
		return pick(raw[0])
	}
	if err := s.flushFor(""); err != nil {
		return 0, err
	}
	bad := 0
	var next []byte // the first key of the next chunk; nil at the start
	for {
		var chunk []storedKV
		more := false
		err := s.view(func(tx *bolt.Tx) error {
			bk := tx.Bucket(b)
			if bk == nil {
				return nil
			}
			c := bk.Cursor()
			var last []byte // the peer part of the chunk's last key
			k, v := c.First()
			if next != nil {
				k, v = c.Seek(next)
			}
			for ; k != nil; k, v = c.Next() {
				if len(k) < 17 {
					return fmt.Errorf("stored attestation key %x is too short", k)
				}
				p := k[:len(k)-17]
				if len(chunk) >= newestChunk && !bytes.Equal(p, last) {
					next, more = bytes.Clone(k), true
					return nil
				}
				kv := storedKV{k: bytes.Clone(k), v: bytes.Clone(v)}
				last = kv.k[:len(kv.k)-17]
				chunk = append(chunk, kv)
			}
			return nil
		})
		if err != nil {
			return bad, err
		}
		n, err := pick(chunk)
		bad += n
		if err != nil || !more {
			return bad, err
		}
	}
}

// eachNewest yields, of kvs (records of direction d in key order, every
// record of a peer among them), the sound record that supersedes the
// others of its issuer and subject, in key order, and returns how many
// records it found damaged.
func eachNewest(d Direction, self crypto.PubKey, selfID peer.ID, kvs []storedKV, fn func(Entry) error) (int, error) {
	type cand struct {
		i int // key order
		a *protocol.Attestation
	}
	bad := 0
	groups := map[string][]cand{}
	var order []string
	for i, kv := range kvs {
		a, ok := decodeStored(kv.v)
		if !ok {
			bad++
			continue
		}
		g := string(a.Issuer) + "\x00" + string(a.Subject)
		if groups[g] == nil {
			order = append(order, g)
		}
		groups[g] = append(groups[g], cand{i: i, a: a})
	}
	won := map[int]Entry{}
	for _, g := range order {
		cs := groups[g]
		slices.SortStableFunc(cs, func(x, y cand) int { return supersedesFirst(x.a, y.a) })
		for _, c := range cs {
			kv := kvs[c.i]
			if self != nil {
				a, err := protocol.DecodeOwnAttestation(kv.v, self, selfID)
				if err == nil {
					won[c.i] = Entry{Key: fmt.Sprintf("%x", kv.k), Direction: d, Attestation: a, Envelope: kv.v}
					break
				}
				if !errors.Is(err, protocol.ErrIssuerMismatch) {
					bad++
					continue
				}
			}
			e, err := verifiedEntry(d, kv)
			if err != nil {
				bad++
				continue
			}
			won[c.i] = e
			break
		}
	}
	for _, i := range slices.Sorted(maps.Keys(won)) {
		if err := fn(won[i]); err != nil {
			return bad, err
		}
	}
	return bad, nil
}

// stored returns the records of direction d ("" for both: dirs) about or
// from p (empty for all), by direction in key order, the write-ahead
// log's records of a read-only store applied.
func (s *Store) stored(d Direction, p peer.ID) (dirs []Direction, raw [][]storedKV, err error) {
	dirs = []Direction{Issued, Received}
	if d != "" {
		if _, err := bucketFor(d); err != nil {
			return nil, nil, err
		}
		dirs = []Direction{d}
	}
	// Records still in the log that the listing could show go to bbolt
	// first.
	if err := s.flushFor(p); err != nil {
		return nil, nil, err
	}
	var prefix []byte
	if p != "" {
		prefix = append([]byte(p), 0)
	}
	raw = make([][]storedKV, len(dirs))
	err = s.view(func(tx *bolt.Tx) error {
		for i, dir := range dirs {
			b, _ := bucketFor(dir)
			bk := tx.Bucket(b)
			if bk == nil {
				continue
			}
			c := bk.Cursor()
			for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				raw[i] = append(raw[i], storedKV{k: bytes.Clone(k), v: bytes.Clone(v)})
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if len(s.replay) > 0 {
		for i, dir := range dirs {
			raw[i] = overlay(s.replay, dir, prefix, raw[i])
		}
	}
	return dirs, raw, nil
}

// verifyEnvelope checks a stored envelope (a variable: tests count the
// checks).
var verifyEnvelope = func(env []byte, o protocol.VerifyOptions) (*protocol.Attestation, error) {
	a, _, err := protocol.VerifyAttestation(env, o)
	return a, err
}

// verifiedEntry is the entry of a stored record, its envelope verified
// again.
func verifiedEntry(dir Direction, kv storedKV) (Entry, error) {
	a, err := verifyEnvelope(kv.v, protocol.VerifyOptions{AllowExpired: true})
	if err != nil {
		return Entry{}, fmt.Errorf("stored attestation %x does not verify: %w", kv.k, err)
	}
	return Entry{Key: fmt.Sprintf("%x", kv.k), Direction: dir, Attestation: a, Envelope: kv.v}, nil
}

// ListNewest returns the limit newest entries List would return (by
// IssuedAt, newest first; all of them when limit is 0 or less) and how
// many List would return. Only the entries returned are copied out of
// the database, decoded and verified again: the issue time is in every
// key (entryKey), so the newest are chosen from the keys. The records of
// the issued direction are about peer IDs that cost nothing (one per
// HTTP client, kept their lifetime and the keep-expired time: some
// 744,000 at the default draw budget); a listing of the newest few
// verified them all (before), then copied and decoded them all (~4 KiB
// and ~13 µs a record for each call of MCP list_attestations).
func (s *Store) ListNewest(d Direction, p peer.ID, limit int) ([]Entry, int, error) {
	if limit <= 0 || len(s.replay) > 0 {
		return s.listNewestAll(d, p, limit)
	}
	dirs := []Direction{Issued, Received}
	if d != "" {
		if _, err := bucketFor(d); err != nil {
			return nil, 0, err
		}
		dirs = []Direction{d}
	}
	if err := s.flushFor(p); err != nil {
		return nil, 0, err
	}
	var prefix []byte
	if p != "" {
		prefix = append([]byte(p), 0)
	}
	// top holds the newest candidates seen, newest first; ties keep the
	// scan's order (direction, then key), as List's order.
	type cand struct {
		at  uint64
		seq int
		dir Direction
		kv  storedKV
	}
	var top []cand
	n := 0
	err := s.view(func(tx *bolt.Tx) error {
		for _, dir := range dirs {
			b, _ := bucketFor(dir)
			bk := tx.Bucket(b)
			if bk == nil {
				continue
			}
			c := bk.Cursor()
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
				seq := n
				n++
				if len(k) < 17 {
					return fmt.Errorf("stored attestation key %x is too short", k)
				}
				at := binary.BigEndian.Uint64(k[len(k)-16 : len(k)-8])
				i := sort.Search(len(top), func(i int) bool { return top[i].at < at })
				if i >= limit {
					continue
				}
				if len(top) == limit {
					top = top[:limit-1]
				}
				top = slices.Insert(top, i, cand{at: at, seq: seq, dir: dir, kv: storedKV{k: bytes.Clone(k)}})
			}
			for i := range top {
				if top[i].dir == dir && top[i].kv.v == nil {
					top[i].kv.v = bytes.Clone(bk.Get(top[i].kv.k))
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	out := make([]Entry, 0, len(top))
	for _, c := range top {
		e, err := verifiedEntry(c.dir, c.kv)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, e)
	}
	return out, n, nil
}

// listNewestAll is ListNewest over a full listing: for every entry
// (limit 0) and for a read-only store whose log's records overlay the
// database's.
func (s *Store) listNewestAll(d Direction, p peer.ID, limit int) ([]Entry, int, error) {
	dirs, raw, err := s.stored(d, p)
	if err != nil {
		return nil, 0, err
	}
	type cand struct {
		dir    Direction
		kv     storedKV
		issued time.Time
	}
	var cs []cand
	for i, dir := range dirs {
		for _, kv := range raw[i] {
			a, ok := decodeStored(kv.v)
			if !ok {
				return nil, 0, fmt.Errorf("stored attestation %x does not decode", kv.k)
			}
			cs = append(cs, cand{dir: dir, kv: kv, issued: a.IssuedAt})
		}
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return b.issued.Compare(a.issued) })
	n := len(cs)
	if limit > 0 && limit < n {
		cs = cs[:limit]
	}
	out := make([]Entry, 0, len(cs))
	for _, c := range cs {
		e, err := verifiedEntry(c.dir, c.kv)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, e)
	}
	return out, n, nil
}

// supersedesFirst orders records the one that supersedes the other first
// (Supersedes), 0 for records that rank equal: a comparison for
// slices.SortStableFunc.
//
// Of records of one issuer and subject that tie fully (same issue time,
// verdict and expiry), the one of the lower challenge-source rank comes
// first (SupersedesOwn): the node's own records of a subject are all kept,
// and key order (a digest of the envelope) must not choose which counts.
func supersedesFirst(x, y *protocol.Attestation) int {
	switch {
	case SupersedesOwn(x.IssuedAt, x.ExpiresAt, x.Accepted, x.Provenance.Source, y.IssuedAt, y.ExpiresAt, y.Accepted, y.Provenance.Source):
		return -1
	case SupersedesOwn(y.IssuedAt, y.ExpiresAt, y.Accepted, y.Provenance.Source, x.IssuedAt, x.ExpiresAt, x.Accepted, x.Provenance.Source):
		return 1
	}
	return 0
}

// storedKV is a key and value of a bucket.
type storedKV struct{ k, v []byte }

// overlay applies the records of direction d whose keys start with prefix,
// of the write-ahead log a read-only store read (Store.replay), to kvs, the
// records of d's bucket under prefix in key order, as a checkpoint would
// (walRecord.apply: an issued rejection replaces the older rejections of
// its subject, a received record the records of its issuer about the same
// subject it supersedes), and returns the result in key order. The bound
// on received records is not applied.
func overlay(recs []*walRecord, d Direction, prefix []byte, kvs []storedKV) []storedKV {
	m := make(map[string][]byte, len(kvs))
	for _, kv := range kvs {
		m[string(kv.k)] = kv.v
	}
	for _, r := range recs {
		if r.dir != d || !bytes.HasPrefix(r.key, prefix) {
			continue
		}
		own := string(append([]byte(r.peer), 0))
		var dead []string
		keep := true
		for k, v := range m {
			if !strings.HasPrefix(k, own) {
				continue
			}
			if k == string(r.key) {
				keep = d == Issued // put again (an issued record), or stored already
				continue
			}
			old, ok := decodeStored(v)
			switch {
			case !ok:
			case d == Received:
				if old.Issuer != r.a.Issuer || old.Subject != r.a.Subject {
					continue
				}
				if supersedesAtt(r.a, old) {
					dead = append(dead, k)
				} else {
					keep = false
				}
			case !r.a.Accepted:
				if old.Subject == r.a.Subject && !old.Accepted && Supersedes(r.a.IssuedAt, r.a.ExpiresAt, false, old.IssuedAt, old.ExpiresAt, false) {
					dead = append(dead, k)
				}
			}
		}
		for _, k := range dead {
			delete(m, k)
		}
		if keep {
			m[string(r.key)] = r.env
		}
	}
	out := make([]storedKV, 0, len(m))
	for k, v := range m {
		out = append(out, storedKV{k: []byte(k), v: v})
	}
	slices.SortFunc(out, func(a, b storedKV) int { return bytes.Compare(a.k, b.k) })
	return out
}

// Latest returns the newest valid (unexpired, accepted or not) attestation
// of direction d about or from peer p (at equal issue times the rejection,
// as Supersedes ranks them). Every record of p is decoded, but
// only the one returned is verified again: a node reads its newest issued
// record of a peer at each contact with it, and a peer's issued
// acceptances accumulate (one per session, kept their lifetime and the
// keep-expired time), so verifying them all made each contact cost a
// signature check per session the peer ever passed. A record that no
// longer decodes or verifies (damaged in place) is passed over for the
// next newest, as ListSound leaves it out.
func (s *Store) Latest(d Direction, p peer.ID, now time.Time) (*Entry, error) {
	dirs, raw, err := s.stored(d, p)
	if err != nil {
		return nil, err
	}
	type cand struct {
		dir Direction
		kv  storedKV
		a   *protocol.Attestation
	}
	var cs []cand
	for i, dir := range dirs {
		for _, kv := range raw[i] {
			a, ok := decodeStored(kv.v)
			if !ok || !a.Valid(now) {
				continue
			}
			cs = append(cs, cand{dir: dir, kv: kv, a: a})
		}
	}
	// The superseding first (Supersedes: newest, at equal times the
	// rejection, then the later expiry), as admission orders them; of
	// records that rank equal, the first in key order.
	slices.SortStableFunc(cs, func(x, y cand) int { return supersedesFirst(x.a, y.a) })
	for _, c := range cs {
		if e, err := verifiedEntry(c.dir, c.kv); err == nil {
			return &e, nil
		}
	}
	return nil, nil
}

// ErrNoEntry is what Get returns (wrapped) for a key the store does not
// hold.
var ErrNoEntry = errors.New("no such attestation")

// Get returns the entry with the given key (as printed by List), or whose
// key ends with it (8 hex digits or more): the first in List's order. Only
// the entry returned is verified again. It listed the store (List) and
// so verified every record's signature, a CLI show or export of one
// record costing one check per record a remote made the node hold (some
// 744,000 issued records at the default draw budget: half a minute of
// CPU, and a copy of every envelope).
func (s *Store) Get(key string) (*Entry, error) {
	match := func(k []byte) bool {
		hk := fmt.Sprintf("%x", k)
		return hk == key || (len(key) >= 8 && strings.HasSuffix(hk, key))
	}
	var (
		found bool
		dir   Direction
		kv    storedKV
	)
	if len(s.replay) > 0 {
		// A read-only store with a log: its records overlay bbolt's.
		dirs, raw, err := s.stored("", "")
		if err != nil {
			return nil, err
		}
	scan:
		for i, d := range dirs {
			for _, x := range raw[i] {
				if match(x.k) {
					found, dir, kv = true, d, x
					break scan
				}
			}
		}
	} else {
		if err := s.flushFor(""); err != nil {
			return nil, err
		}
		err := s.view(func(tx *bolt.Tx) error {
			for _, d := range []Direction{Issued, Received} {
				b, _ := bucketFor(d)
				bk := tx.Bucket(b)
				if bk == nil {
					continue
				}
				c := bk.Cursor()
				for k, v := c.First(); k != nil; k, v = c.Next() {
					if match(k) {
						found, dir, kv = true, d, storedKV{k: bytes.Clone(k), v: bytes.Clone(v)}
						return nil
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if !found {
		return nil, fmt.Errorf("%w: no attestation with key %s", ErrNoEntry, key)
	}
	e, err := verifiedEntry(dir, kv)
	if err != nil {
		return nil, err
	}
	return &e, nil
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

// Serves implements skill.ServeCounter: how often id was served.
func (s *Store) Serves(id string) (int, error) {
	var n uint64
	err := s.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketServed).Get([]byte(id)); len(v) == 8 {
			n = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("read served challenge: %w", err)
	}
	return int(min(n, 1<<31)), nil
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
//
// A rejection issued at or after keepRejections is kept however long ago
// it expired (zero: no such floor). A node passes now minus the longest
// lifetime it gives or keeps a record (peer.MaxKeptLifetime): a rejection
// supersedes the acceptances of the pair issued before it, all expired
// by then; pruned sooner, at a Config.KeepExpired shorter than their
// lifetime, it left the newest record of the pair a withdrawn acceptance
// again, which the trust index loaded at the next start (spec/trust.md
// §3.6).
func (s *Store) PruneExpired(ctx context.Context, cutoff, keepRejections time.Time) (int, error) {
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
			deleted, next, err := s.pruneSome(ctx, b, after, cutoff, keepRejections)
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
func (s *Store) pruneSome(ctx context.Context, b []byte, after []byte, cutoff, keepRejections time.Time) (int, []byte, error) {
	var dead [][]byte
	var next []byte
	err := s.view(func(tx *bolt.Tx) error {
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
			// Decoded without checking the signature again (a check
			// costs about 50 µs; a backlog of a million expired records
			// would take a minute of CPU).
			a, ok := decodeStored(v)
			if !ok || !a.ExpiresAt.Before(cutoff) {
				continue
			}
			if !a.Accepted && !keepRejections.IsZero() && !a.IssuedAt.Before(keepRejections) {
				continue // a rejection still superseding what it withdrew
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
