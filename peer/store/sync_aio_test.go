//go:build linux && (amd64 || arm64 || riscv64 || loong64 || ppc64le || mips64le)

package store

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// The AIO syncer syncs a file and reports a failure without hanging; a
// store uses it where the kernel offers it.
func TestAIOSync(t *testing.T) {
	a, err := newAIOSyncer()
	if err != nil {
		t.Skipf("no native AIO here: %v", err)
	}
	defer a.close()
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("data")); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := a.fdatasync(f); err != nil {
			t.Skipf("native AIO without fdatasync here: %v", err)
		}
	}
	f.Close()
	if err := a.fdatasync(f); err == nil {
		t.Error("fdatasync of a closed file succeeded")
	}
	s, _ := openTemp(t)
	defer s.Close()
	if _, ok := s.wal.sync.(*aioSyncer); !ok {
		t.Errorf("store syncs with %T, want *aioSyncer", s.wal.sync)
	}
}

// Where the file system takes direct I/O, the log is appended with direct
// writes: the file holds exactly the image the store keeps of it, across
// appends of one record and of several, unaligned and across blocks, and
// a store opened after a crash finds every record.
func TestWALDirect(t *testing.T) {
	s, path := openTemp(t)
	if s.wal.direct == nil {
		d, err := openDirect(path + "-wal")
		if err != nil {
			t.Skipf("no direct I/O on this file system: %v", err)
		}
		// The first block written back as it is, as the store tries.
		data, err := os.ReadFile(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		probe := alignedBytes(directAlign, directAlign)
		copy(probe, data)
		werr := s.wal.sync.writeDSync(d, probe, 0)
		d.Close()
		if werr != nil {
			t.Skipf("no direct writes here: %v", werr)
		}
		t.Fatal("the file system takes direct writes, the store appends through the page cache")
	}
	key, _ := testutil.NewKey(t)
	envs, as := records(t, key, 12)
	// One at a time, then a batch of several (as the commit queue's
	// leader appends them).
	for i := range 5 {
		if err := s.Put(Issued, envs[i], as[i]); err != nil {
			t.Fatal(err)
		}
	}
	var batch []*walRecord
	for i := 5; i < len(envs); i++ {
		r, err := newWALRecord(Issued, envs[i], as[i])
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, r)
	}
	if err := s.logRecords(batch); err != nil {
		t.Fatal(err)
	}
	if s.wal.off < directAlign {
		t.Fatalf("the records took %d bytes: none crosses a block", s.wal.off)
	}
	onDisk, err := os.ReadFile(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, s.wal.image) {
		t.Fatal("the log file differs from the store's image of it")
	}
	s = s.crashReopen(t, path)
	defer s.Close()
	if got := listed(t, s, Issued); len(got) != len(envs) {
		t.Errorf("%d records after the crash, want %d", len(got), len(envs))
	}
}
