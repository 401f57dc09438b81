package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"unsafe"

	"github.com/libp2p/go-libp2p/core/peer"
	bolt "go.etcd.io/bbolt"

	"github.com/acaptcha/acaptcha/protocol"
)

// The attestations a node issues and receives go first to a write-ahead
// log beside the bbolt file (PATH-wal), then into bbolt in checkpoints.
//
// Why: every attestation leaves a record on each node, and a record is
// acknowledged only once it is on the disk. A bbolt commit syncs twice
// (its pages, then its meta page) and writes a page per tree level of
// every bucket it touches, about 8 pages; an append to a preallocated log
// writes one or two blocks and syncs once, as one direct write through
// AIO where Linux offers it (sync_aio.go, and wal below). A checkpoint
// then moves hundreds of records into bbolt in one commit. bbolt has no
// log of its own to borrow (its NoSync mode is unsafe across a crash of
// the machine), so the log is here: a fixed-size file of CRC-checked
// frames, about 200 lines.
//
// Crash safety: a frame carries the log's generation; bbolt's meta bucket
// holds the generation whose frames are not yet in bbolt. A checkpoint
// applies the pending records and bumps that generation in one bbolt
// transaction, then writes the next frames from the start of the file
// under the new generation. On open, the frames of the stored generation
// are read from the start until the first that is torn, fails its CRC or
// is of another generation, and are applied (records are idempotent: a
// record's key holds its envelope's digest) in a checkpoint that bumps the
// generation, so frames left from before are never read again. A new
// database starts at a random generation, so a log left beside a deleted
// or replaced database file is not read into it; and after an append that
// failed (its frames may be in the file, its writes were reported failed)
// the next append comes after a checkpoint, under a new generation.

// fileSyncer flushes a file's data to its device, and where it can
// writes data straight to the device (writeDSync, sync_aio.go).
type fileSyncer interface {
	fdatasync(f *os.File) error
	writeDSync(f *os.File, b []byte, off int64) error
	close() error
}

// forcePlainSync makes stores opened after it is set sync with a blocking
// fdatasync (tests of the fallback).
var forcePlainSync bool

const (
	// walSize is the log's preallocated size: about 700 records of 1.5 KB.
	// Appends overwrite zeros or older frames and never grow the file, so
	// a sync flushes data and no file-system metadata.
	walSize = 1 << 20
	// walCheckpointRecords pending records trigger a checkpoint.
	walCheckpointRecords = 512
	// frameHeader is a frame's length (uint32, of what follows the header)
	// and CRC-32C (of the same bytes); then the generation (uint64) and
	// the direction (one byte), then the signed envelope.
	frameHeader = 8
	frameFixed  = 9
)

var (
	bucketMeta = []byte("meta")
	keyWALGen  = []byte("wal_generation")
	crcTable   = crc32.MakeTable(crc32.Castagnoli)
)

// walRecord is an attestation on its way to bbolt.
type walRecord struct {
	dir  Direction
	env  []byte
	a    *protocol.Attestation
	peer peer.ID // the peer its key starts with: subject (issued), issuer (received)
	key  []byte
}

func newWALRecord(d Direction, env []byte, a *protocol.Attestation) (*walRecord, error) {
	if _, err := bucketFor(d); err != nil {
		return nil, err
	}
	p := a.Subject
	if d == Received {
		p = a.Issuer
	}
	return &walRecord{dir: d, env: env, a: a, peer: p, key: entryKey(p, a.IssuedAt, env)}, nil
}

// apply writes r into bbolt and returns how it changed the number of
// received records. An issued rejection replaces the older rejections of
// its subject (see PutIssued); a received record replaces the older
// records of its issuer about the same subject, or is dropped when one of
// them supersedes it (see putReceived).
func (r *walRecord) apply(tx *bolt.Tx) (int, error) {
	switch {
	case r.dir == Received:
		return putReceived(tx, r.key, r.env, r.a)
	case !r.a.Accepted:
		return 0, putIssuedRejection(tx, r.key, r.env, r.a)
	}
	return 0, tx.Bucket(bucketIssued).Put(r.key, r.env)
}

// wal is the log file. Only the commit queue's leader uses it.
//
// Where the file system allows, appends are direct writes with RWF_DSYNC
// (one asynchronous request, sync_aio.go) of the blocks they touch, from
// image, a copy of the whole file in memory (1 MiB) aligned for direct
// I/O. Through the page cache an append cost a write that dirtied a page,
// then a sync that wrote it back and waited for it: on ext4 about twice
// the CPU of the direct write (an isolated loop of 16 logs: 130-180
// against 250-330 µs of machine CPU an append; alternated with the build
// before in BenchmarkMutualAttestConcurrent's repeat order: 1.6-2.2
// against 2.2-2.8 ms of machine CPU an attestation). A direct write
// covers whole 4 KiB blocks; the bytes of a block around the new frames
// are the file's own, from image, so rewriting them changes nothing, and
// a torn write leaves each sector either as it was or as written, with
// the same bytes outside the new frames either way.
type wal struct {
	f      *os.File
	direct *os.File // f's file opened for direct I/O, or nil
	image  []byte   // the file's bytes (with direct only)
	sync   fileSyncer
	gen    uint64 // generation of the frames written now
	off    int64  // where the next frame goes
	buf    []byte
	// failed: an append failed after it may have written frames of gen
	// at off; they must not be read back after a crash (their writes
	// were reported failed), so the next append starts a new generation
	// first (Store.logRecords).
	failed bool
}

// openWAL opens (or creates and preallocates) the log at path and returns
// it with the records of generation gen it holds, in order. undecodable
// counts frames that passed their CRC but hold no attestation (left out).
func openWAL(path string, gen uint64) (w *wal, recs []*walRecord, undecodable int, err error) {
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("open write-ahead log: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	data := make([]byte, walSize)
	n, err := f.ReadAt(data, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, 0, fmt.Errorf("read write-ahead log: %w", err)
	}
	if n < walSize {
		// New, or cut short: preallocate with zeros, which end the frames.
		clear(data[n:])
		if _, err := f.WriteAt(data[n:], int64(n)); err != nil {
			return nil, nil, 0, fmt.Errorf("preallocate write-ahead log: %w", err)
		}
	}
	syncer, err := newFileSyncer(f)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("sync write-ahead log: %w", err)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		// A new file: its directory entry must reach the disk too.
		if err := syncDir(filepath.Dir(path)); err != nil {
			syncer.close()
			return nil, nil, 0, fmt.Errorf("sync write-ahead log directory: %w", err)
		}
	}
	w = &wal{f: f, sync: syncer, gen: gen}
	w.openDirect(path, data)
	recs, undecodable = walRecords(data, gen, false)
	return w, recs, undecodable, nil
}

// openDirect sets w up to append with direct writes (see wal) when the
// file system and the syncer allow: the first block, written back as it
// is, tries it. Otherwise w appends through the page cache.
func (w *wal) openDirect(path string, data []byte) {
	if forcePlainSync {
		return
	}
	d, err := openDirect(path)
	if err != nil {
		return
	}
	image := alignedBytes(walSize, directAlign)
	copy(image, data)
	if err := w.sync.writeDSync(d, image[:directAlign], 0); err != nil {
		d.Close()
		return
	}
	w.direct, w.image = d, image
}

// alignedBytes returns n bytes whose address is a multiple of align.
func alignedBytes(n, align int) []byte {
	b := make([]byte, n+align)
	at := 0
	if r := int(uintptr(unsafe.Pointer(&b[0])) % uintptr(align)); r != 0 {
		at = align - r
	}
	return b[at : at+n : at+n]
}

// readFrame reads the frame at off of generation gen: its body after the
// generation (direction and envelope) and the next frame's offset. ok is
// false at the end of the frames: zeros, a torn or corrupt frame, or a
// frame of another generation.
func readFrame(data []byte, off int, gen uint64) (body []byte, next int, ok bool) {
	if off+frameHeader > len(data) {
		return nil, 0, false
	}
	n := int(binary.BigEndian.Uint32(data[off:]))
	sum := binary.BigEndian.Uint32(data[off+4:])
	start := off + frameHeader
	if n < frameFixed+1 || n > len(data)-start {
		return nil, 0, false
	}
	payload := data[start : start+n]
	if crc32.Checksum(payload, crcTable) != sum || binary.BigEndian.Uint64(payload) != gen {
		return nil, 0, false
	}
	return payload[8:], start + n, true
}

// appendFrame appends r's frame of generation gen to buf.
func appendFrame(buf []byte, gen uint64, r *walRecord) []byte {
	at := len(buf)
	buf = binary.BigEndian.AppendUint32(buf, uint32(frameFixed+len(r.env)))
	buf = append(buf, 0, 0, 0, 0) // CRC, below
	buf = binary.BigEndian.AppendUint64(buf, gen)
	dir := byte('i')
	if r.dir == Received {
		dir = 'r'
	}
	buf = append(buf, dir)
	buf = append(buf, r.env...)
	binary.BigEndian.PutUint32(buf[at+4:], crc32.Checksum(buf[at+frameHeader:], crcTable))
	return buf
}

// frameSize is the size of r's frame.
func frameSize(r *walRecord) int { return frameHeader + frameFixed + len(r.env) }

// append writes the frames of recs after the last one and syncs them. It
// returns false, writing nothing, when they do not fit before the end of
// the file.
func (w *wal) append(recs []*walRecord) (bool, error) {
	size := 0
	for _, r := range recs {
		size += frameSize(r)
	}
	if w.off+int64(size) > walSize {
		return false, nil
	}
	w.buf = w.buf[:0]
	for _, r := range recs {
		w.buf = appendFrame(w.buf, w.gen, r)
	}
	if w.direct != nil {
		// The blocks the frames touch, from the file's image (walSize
		// is a multiple of directAlign).
		copy(w.image[w.off:], w.buf)
		start := w.off &^ (directAlign - 1)
		end := (w.off + int64(size) + directAlign - 1) &^ (directAlign - 1)
		if err := w.sync.writeDSync(w.direct, w.image[start:end], start); err != nil {
			// The image may now hold frames the file does not: they
			// are of this generation, which the next append leaves
			// (Store.logRecords), so none is ever read as a record.
			w.failed = true
			return true, fmt.Errorf("write-ahead log: %w", err)
		}
		w.off += int64(size)
		return true, nil
	}
	if _, err := w.f.WriteAt(w.buf, w.off); err != nil {
		w.failed = true
		return true, fmt.Errorf("write-ahead log: %w", err)
	}
	if err := w.sync.fdatasync(w.f); err != nil {
		w.failed = true
		return true, fmt.Errorf("sync write-ahead log: %w", err)
	}
	w.off += int64(size)
	return true, nil
}

// restart begins generation gen at the start of the file (its records are
// all in bbolt).
func (w *wal) restart(gen uint64) { w.gen, w.off, w.failed = gen, 0, false }

func (w *wal) close() error {
	var err error
	if w.direct != nil {
		err = w.direct.Close()
	}
	return errors.Join(w.sync.close(), err, w.f.Close())
}

// syncDir flushes a directory's entries to the disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// walGeneration reads the generation whose frames are not yet in bbolt;
// ok is false for a store that has none yet.
func walGeneration(tx *bolt.Tx) (gen uint64, ok bool) {
	b := tx.Bucket(bucketMeta)
	if b == nil {
		return 0, false
	}
	if v := b.Get(keyWALGen); len(v) == 8 {
		return binary.BigEndian.Uint64(v), true
	}
	return 0, false
}

func putWALGeneration(tx *bolt.Tx, gen uint64) error {
	b, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return err
	}
	return b.Put(keyWALGen, binary.BigEndian.AppendUint64(nil, gen))
}

// walRecords decodes the records of generation gen in a log's bytes;
// copied, their envelopes do not alias data (a read-only open's buffer is
// its own, the log's is reused).
func walRecords(data []byte, gen uint64, copied bool) (recs []*walRecord, undecodable int) {
	for off := 0; ; {
		body, next, ok := readFrame(data, off, gen)
		if !ok {
			break
		}
		off = next
		d := Issued
		if body[0] == 'r' {
			d = Received
		}
		env := body[1:]
		if copied {
			env = bytes.Clone(env)
		}
		a, ok := decodeStored(env)
		if !ok || (body[0] != 'i' && body[0] != 'r') {
			undecodable++
			continue
		}
		r, err := newWALRecord(d, env, a)
		if err != nil {
			undecodable++
			continue
		}
		recs = append(recs, r)
	}
	return recs, undecodable
}
