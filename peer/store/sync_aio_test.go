//go:build linux && (amd64 || arm64 || riscv64 || loong64 || ppc64le || mips64le)

package store

import (
	"os"
	"path/filepath"
	"testing"
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
