//go:build !(linux && (amd64 || arm64 || riscv64 || loong64 || ppc64le || mips64le))

package store

import (
	"errors"
	"os"
)

// newFileSyncer returns the syncer for f, File.Sync, and syncs f once
// with it: the asynchronous syncer is Linux's (sync_aio.go).
func newFileSyncer(f *os.File) (fileSyncer, error) {
	var p plainSyncer
	if err := p.fdatasync(f); err != nil {
		return nil, err
	}
	return p, nil
}

// plainSyncer syncs with File.Sync, blocking its thread.
type plainSyncer struct{}

func (plainSyncer) fdatasync(f *os.File) error { return f.Sync() }

func (plainSyncer) close() error { return nil }

func (plainSyncer) writeDSync(*os.File, []byte, int64) error { return errors.ErrUnsupported }

// directAlign is the alignment direct writes would need (none are made
// here: openDirect refuses).
const directAlign = 4096

// openDirect refuses: the log is written through the page cache.
func openDirect(string) (*os.File, error) { return nil, errors.ErrUnsupported }
