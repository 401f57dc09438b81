package store

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	bolt "go.etcd.io/bbolt"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
)

// closedStore writes a store at a fresh path with n issued and n received
// records, closes it and returns the path and its bytes.
func closedStore(t *testing.T, n int) (string, []byte) {
	t.Helper()
	s, path := openTemp(t)
	key, _ := testutil.NewKey(t)
	envs, as := records(t, key, n)
	for i := range envs {
		if err := s.Put(Issued, envs[i], as[i]); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(Received, envs[i], as[i]); err != nil {
			t.Fatal(err)
		}
		if err := s.PutLearned(Learned{Attestation: as[i], Envelope: envs[i], Via: ViaGossip, LearnedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, data
}

// fileState is what a test compares to see that nothing was written: the
// bytes of the files at path and path-wal (nil when missing).
func fileState(t *testing.T, path string) [2]*[32]byte {
	t.Helper()
	var st [2]*[32]byte
	for i, p := range []string{path, path + "-wal"} {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(data)
		st[i] = &h
	}
	return st
}

func sameState(a, b [2]*[32]byte) bool {
	for i := range a {
		if (a[i] == nil) != (b[i] == nil) || a[i] != nil && *a[i] != *b[i] {
			return false
		}
	}
	return true
}

// writeFile writes data to a fresh file in t's directory.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// openOrList opens the store at path as o says and lists it, returning
// the first error.
func openOrList(path string, o Options) error {
	s, err := OpenWith(path, o)
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err = s.List("", ""); err != nil {
		return err
	}
	// The reads a node makes at start (its trust index) go through the
	// same guard.
	if _, _, err = s.ListLearned(""); err != nil {
		return err
	}
	_, err = s.Revocations()
	return err
}

func wantCorrupt(t *testing.T, what string, err error, path string) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%s: %v, want an error wrapping ErrCorrupt", what, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "store "+path+" is damaged: ") || !strings.HasSuffix(msg, "; move it aside to start afresh") {
		t.Fatalf("%s: message %q does not name the file and what to do", what, msg)
	}
}

// A damaged store file is an error naming it, for Open and a read-only
// open alike, never a panic or a fault: a store cut short (as `head -c
// 30000 a/db > z/db` cut it), a file of garbage, a freelist page whose
// count sends bbolt past the end of the file, and pages of the tree
// overwritten, which bbolt panics on while Open replays and counts or
// List reads. Nothing is written to a damaged file.
func TestOpenDamagedStore(t *testing.T) {
	_, data := closedStore(t, 60)
	for _, ro := range []bool{false, true} {
		o := Options{ReadOnly: ro}
		for _, c := range []struct {
			name string
			data []byte
		}{
			{"truncated", data[:30000]},
			{"truncated-to-a-page", data[:4096]},
			{"garbage", randomBytes(t, 64<<10)},
			{"short-garbage", randomBytes(t, 100)},
		} {
			path := writeFile(t, c.name+".db", c.data)
			before := fileState(t, path)
			_, err := OpenWith(path, o)
			wantCorrupt(t, c.name, err, path)
			if !sameState(before, fileState(t, path)) {
				t.Fatalf("%s (read-only %v): the damaged file was written to", c.name, ro)
			}
		}
	}

	// The freelist's count says it holds more pages than the file: bbolt
	// would allocate them all (1 TiB; the runtime cannot recover from
	// running out of memory) and read past its mapping.
	m := newestMeta(t, data)
	d := bytes.Clone(data)
	fl := d[m.freelist*m.pageSize:]
	binary.NativeEndian.PutUint16(fl[10:], 0xFFFF) // count: in the first element
	binary.NativeEndian.PutUint64(fl[16:], 1<<40)  // the first element
	path := writeFile(t, "freelist.db", d)
	for _, ro := range []bool{false, true} {
		_, err := OpenWith(path, Options{ReadOnly: ro})
		wantCorrupt(t, "freelist count", err, path)
	}

	// The issued bucket's root page far past the end of the file: List
	// faults reading it (recovered), Open read-write too when it reads it.
	d = bytes.Clone(data)
	setBucketRoot(t, d, m, bucketIssued, 1<<40)
	path = writeFile(t, "bucket-root.db", d)
	for _, ro := range []bool{true, false} {
		wantCorrupt(t, "bucket root", openOrList(path, Options{ReadOnly: ro}), path)
	}

	// Every page of the tree overwritten with garbage after its header
	// (so that the header checks pass): Open or List fails with
	// ErrCorrupt, or works (a free page); never a panic.
	caught := 0
	for pg := uint64(boltFirstDataPage); pg < m.pgid; pg++ {
		if pg == m.freelist {
			continue
		}
		d := bytes.Clone(data)
		if _, err := rand.Read(d[pg*m.pageSize+boltPageHeader : (pg+1)*m.pageSize]); err != nil {
			t.Fatal(err)
		}
		path := writeFile(t, "page.db", d)
		if pg%16 == 0 {
			// Read-write too (slower: it makes the log). A failed open
			// leaves no lock behind (the read-only open below would
			// wait for it and fail with ErrLocked).
			if err := openOrList(path, Options{}); err != nil {
				wantCorrupt(t, "page overwritten (read-write)", err, path)
			}
		}
		if err := openOrList(path, Options{ReadOnly: true}); err != nil {
			wantCorrupt(t, "page overwritten", err, path)
			caught++
		}
	}
	if caught == 0 {
		t.Fatal("no overwritten page was noticed")
	}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// setBucketRoot points the root page of the top-level bucket name, in the
// root page of data (a leaf), to root.
func setBucketRoot(t *testing.T, data []byte, m boltMeta, name []byte, root uint64) {
	t.Helper()
	page := data[m.root*m.pageSize:]
	ne := binary.NativeEndian
	if flags := ne.Uint16(page[8:]); flags&boltLeafPage == 0 {
		t.Fatalf("root page %d is no leaf (flags %#x)", m.root, flags)
	}
	// Leaf elements follow the header: flags, pos (from the element),
	// ksize, vsize (uint32 each); a bucket's value starts with its root
	// page id.
	for i := range int(ne.Uint16(page[10:])) {
		e := page[boltPageHeader+16*i:]
		pos, ksize := ne.Uint32(e[4:]), ne.Uint32(e[8:])
		if bytes.Equal(e[pos:pos+ksize], name) {
			ne.PutUint64(e[pos+ksize:], root)
			return
		}
	}
	t.Fatalf("no bucket %s in the root page", name)
}

// newestMeta decodes the meta page bbolt uses of a store's bytes.
func newestMeta(t *testing.T, data []byte) boltMeta {
	t.Helper()
	m0, ok0 := readBoltMeta(data)
	if !ok0 {
		t.Fatal("meta page 0 does not decode")
	}
	m1, ok1 := readBoltMeta(data[m0.pageSize:])
	if ok1 && m1.txid > m0.txid {
		return m1
	}
	return m0
}

// A read-only open writes nothing and creates nothing: a path with no
// file, an empty file (`touch empty.db`, which a read-write open would
// make a store of) and a bbolt database without the store's buckets are
// errors, and the files stay as they were.
func TestOpenReadOnlyRefusesWhatIsNoStore(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "sub", "missing.db")
	if _, err := OpenWith(missing, Options{ReadOnly: true}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Stat(filepath.Dir(missing)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a read-only open of a missing store made its directory: %v", err)
	}

	empty := writeFile(t, "empty.db", nil)
	_, err := OpenWith(empty, Options{ReadOnly: true})
	if !errors.Is(err, ErrNotStore) || !strings.Contains(err.Error(), "is not an acaptcha store (empty file)") {
		t.Fatalf("empty file: %v, want ErrNotStore saying it is empty", err)
	}
	if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
		t.Fatalf("empty file after a read-only open: %v, %d bytes", err, fi.Size())
	}
	if _, err := os.Stat(empty + "-wal"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a read-only open made a write-ahead log: %v", err)
	}
	if _, err := OpenWith(dir, Options{ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("directory: %v", err)
	}

	other := filepath.Join(t.TempDir(), "other.db")
	db, err := bolt.Open(other, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("x")); return err }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before := fileState(t, other)
	if _, err := OpenWith(other, Options{ReadOnly: true}); !errors.Is(err, ErrNotStore) {
		t.Fatalf("bbolt file without the store's buckets: %v, want ErrNotStore", err)
	}
	if !sameState(before, fileState(t, other)) {
		t.Fatal("a read-only open wrote to another bbolt database")
	}

	// An empty file is still a new store for a read-write open (a node
	// or attest given a touched file).
	s, err := Open(empty)
	if err != nil {
		t.Fatalf("read-write open of an empty file: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := openOrList(empty, Options{ReadOnly: true}); err != nil {
		t.Fatalf("read-only open of the store made of the empty file: %v", err)
	}
}

// A read-only open of a store a crash left with records in its
// write-ahead log lists them as a read-write open would after replaying
// them (a received record superseding the stored one of its issuer, an
// issued rejection replacing the older one), without writing to either
// file; its writes fail; it takes the shared lock, so a store open
// read-write elsewhere makes it fail with ErrLocked.
func TestOpenReadOnlyWritesNothing(t *testing.T) {
	s, path := openTemp(t)
	vk, verifier := testutil.NewKey(t)
	myKey, me := testutil.NewKey(t)
	_, subject := testutil.NewKey(t)
	now := time.Now().Truncate(time.Second)
	put := func(d Direction, env []byte, a *protocol.Attestation) {
		t.Helper()
		if err := s.Put(d, env, a); err != nil {
			t.Fatal(err)
		}
	}
	oldRecv, oldRecvA := sealedVerdict(t, vk, me, true, now.Add(-time.Hour), 2*time.Hour)
	oldRej, oldRejA := sealedVerdict(t, myKey, subject, false, now.Add(-time.Hour), 2*time.Hour)
	acc, accA := sealedVerdict(t, myKey, verifier, true, now.Add(-time.Hour), 2*time.Hour)
	put(Received, oldRecv, oldRecvA)
	put(Issued, oldRej, oldRejA)
	put(Issued, acc, accA)
	if err := s.flush(); err != nil { // these three in bbolt
		t.Fatal(err)
	}
	newRecv, newRecvA := sealedVerdict(t, vk, me, false, now.Add(-time.Minute), 2*time.Hour)
	newRej, newRejA := sealedVerdict(t, myKey, subject, false, now.Add(-time.Minute), 2*time.Hour)
	put(Received, newRecv, newRecvA)
	put(Issued, newRej, newRejA)
	put(Issued, acc, accA) // again: still one record
	s.crash(t)             // these in the log only

	// A copy replayed read-write is what the read-only listing must
	// show.
	rwPath := filepath.Join(t.TempDir(), "rw.db")
	for _, suffix := range []string{"", "-wal"} {
		data, err := os.ReadFile(path + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(rwPath+suffix, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rw, err := Open(rwPath)
	if err != nil {
		t.Fatal(err)
	}
	want, err := rw.List("", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 3 {
		t.Fatalf("read-write replay lists %d records, want 3 (the newest received, the newest rejection, the acceptance)", len(want))
	}

	before := fileState(t, path)
	ro, err := OpenWith(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := ro.Recovered(); got.Records != 3 {
		t.Fatalf("Recovered() = %+v, want the 3 logged records", got)
	}
	for _, p := range []string{"", string(verifier), string(subject)} {
		got, err := ro.List("", peer.ID(p))
		if err != nil {
			t.Fatal(err)
		}
		w, err := rw.List("", peer.ID(p))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(w) {
			t.Fatalf("peer %q: read-only lists %d records, read-write %d", p, len(got), len(w))
		}
		for i := range got {
			if got[i].Key != w[i].Key || got[i].Direction != w[i].Direction || !bytes.Equal(got[i].Envelope, w[i].Envelope) {
				t.Fatalf("peer %q: record %d differs: %s %s, want %s %s", p, i, got[i].Direction, got[i].Key, w[i].Direction, w[i].Key)
			}
		}
	}
	if e, err := ro.Latest(Received, verifier, now); err != nil || e == nil || !bytes.Equal(e.Envelope, newRecv) {
		t.Fatalf("Latest received from the verifier: %v, %v; want the logged rejection", e, err)
	}
	if err := ro.Put(Issued, acc, accA); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Put on a read-only store: %v, want ErrReadOnly", err)
	}
	if _, err := ro.TryServe("set", 1); err == nil {
		t.Fatal("TryServe on a read-only store succeeded")
	}
	if _, err := ro.PruneExpired(t.Context(), now.Add(3*time.Hour), time.Time{}); err == nil {
		t.Fatal("PruneExpired on a read-only store succeeded")
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ro.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if !sameState(before, fileState(t, path)) {
		t.Fatal("a read-only open wrote to the store or its log")
	}

	// The store open read-write (rw holds its copy): a read-only open
	// waits for the lock, then says who holds it.
	if _, err := OpenWith(rwPath, Options{ReadOnly: true}); !errors.Is(err, ErrLocked) {
		t.Fatalf("read-only open of a store open read-write: %v, want ErrLocked", err)
	}
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
}

// A store that looks damaged while another process holds it open (its
// writes can change the pages the unlocked check reads) is reported
// locked, never damaged: only a check under the lock says damaged.
func TestOpenDamagedWhileLockedIsLocked(t *testing.T) {
	s, path := openTemp(t)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 2*4096), 0); err != nil { // both meta pages
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{true, false} {
		if _, err := OpenWith(path, Options{ReadOnly: ro}); !errors.Is(err, ErrLocked) {
			t.Fatalf("read-only %v: %v, want ErrLocked", ro, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = OpenWith(path, Options{ReadOnly: true})
	wantCorrupt(t, "meta pages zeroed", err, path)
}
