//go:build linux && (amd64 || arm64 || riscv64 || loong64 || ppc64le || mips64le)

package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// aioSyncer runs fdatasync through Linux native AIO (IOCB_CMD_FDSYNC,
// Linux 4.18 and later) and waits for its completion on an eventfd, which
// the Go netpoller watches: the waiting goroutine parks and its P runs
// other goroutines. A plain fdatasync is a blocking system call that holds
// its P until the scheduler's monitor takes it back, tens to hundreds of
// microseconds later; with one sync per attestation on each node, that
// idled a quarter of a 2-core machine (BenchmarkMutualAttestConcurrent on
// a disk: 786-868 against 909-1,079 attestations/s with this syncer, the
// write-ahead log alike). Go offers no asynchronous fsync, and the
// io_uring libraries bring a ring and its memory mapping for this one
// call, so the few system calls are made here.
type aioSyncer struct {
	mu  sync.Mutex
	ctx uintptr  // aio_context_t
	efd *os.File // eventfd, non-blocking: reads go through the netpoller
}

// From linux/aio_abi.h.
const (
	iocbCmdFdsync = 3
	iocbFlagResfd = 1 << 0
)

// iocb is struct iocb of linux/aio_abi.h on 64-bit little-endian
// machines (aio_key and aio_rw_flags swap places on big-endian ones: those
// sync with fdatasync, sync_plain.go).
type iocb struct {
	_      uint64 // aio_data
	_      uint32 // aio_key
	_      int32  // aio_rw_flags
	opcode uint16 // aio_lio_opcode
	_      int16  // aio_reqprio
	fildes uint32 // aio_fildes
	_      uint64 // aio_buf
	_      uint64 // aio_nbytes
	_      int64  // aio_offset
	_      uint64 // aio_reserved2
	flags  uint32 // aio_flags
	resfd  uint32 // aio_resfd
}

// The kernel's sizes: 64 and 32 bytes.
var (
	_ [64]byte = [unsafe.Sizeof(iocb{})]byte{}
	_ [32]byte = [unsafe.Sizeof(ioEvent{})]byte{}
)

// ioEvent is struct io_event of linux/aio_abi.h.
type ioEvent struct {
	data uint64
	obj  uint64
	res  int64
	res2 int64
}

// newFileSyncer returns the syncer for f and syncs f once with it: AIO,
// or fdatasync when the kernel (or a seccomp filter) refuses AIO or its
// fdatasync command. A sync that ran and failed (syncFailed: the device's
// error) is returned, not retried with fdatasync: Linux reports a
// write-back error once per open file, so a retry would pass.
func newFileSyncer(f *os.File) (fileSyncer, error) {
	if !forcePlainSync {
		if a, err := newAIOSyncer(); err == nil {
			err := a.fdatasync(f)
			if err == nil {
				return a, nil
			}
			_ = a.close()
			if errors.As(err, new(syncFailed)) {
				return nil, err
			}
		}
	}
	var p plainSyncer
	if err := p.fdatasync(f); err != nil {
		return nil, err
	}
	return p, nil
}

func newAIOSyncer() (*aioSyncer, error) {
	var ctx uintptr
	if _, _, e := unix.Syscall(unix.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&ctx)), 0); e != 0 {
		return nil, fmt.Errorf("io_setup: %w", e)
	}
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		_, _, _ = unix.Syscall(unix.SYS_IO_DESTROY, ctx, 0, 0)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	return &aioSyncer{ctx: ctx, efd: os.NewFile(uintptr(fd), "aio-eventfd")}, nil
}

func (a *aioSyncer) fdatasync(f *os.File) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	cb := iocb{opcode: iocbCmdFdsync, fildes: uint32(f.Fd()), flags: iocbFlagResfd, resfd: uint32(a.efd.Fd())}
	cbs := [1]*iocb{&cb}
	if _, _, e := unix.Syscall(unix.SYS_IO_SUBMIT, a.ctx, 1, uintptr(unsafe.Pointer(&cbs[0]))); e != 0 {
		return fmt.Errorf("io_submit fdatasync: %w", e)
	}
	// The eventfd counts completions; one sync is in flight at a time.
	var b [8]byte
	for {
		n, err := a.efd.Read(b[:])
		if err != nil {
			return fmt.Errorf("wait for fdatasync: %w", err)
		}
		if n == 8 && binary.NativeEndian.Uint64(b[:]) > 0 {
			break
		}
	}
	var ev [1]ioEvent
	var ts unix.Timespec // do not wait: the eventfd said it completed
	n, _, e := unix.Syscall6(unix.SYS_IO_GETEVENTS, a.ctx, 1, 1, uintptr(unsafe.Pointer(&ev[0])), uintptr(unsafe.Pointer(&ts)), 0)
	switch {
	case e != 0:
		return fmt.Errorf("io_getevents: %w", e)
	case n != 1:
		return errors.New("io_getevents: fdatasync completion missing")
	case ev[0].res < 0:
		return syncFailed{unix.Errno(-ev[0].res)}
	}
	return nil
}

// syncFailed is the error of an fdatasync that AIO ran: the file's data
// did not reach the device.
type syncFailed struct{ errno unix.Errno }

func (e syncFailed) Error() string { return "fdatasync: " + e.errno.Error() }
func (e syncFailed) Unwrap() error { return e.errno }

func (a *aioSyncer) close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, _, _ = unix.Syscall(unix.SYS_IO_DESTROY, a.ctx, 0, 0)
	return a.efd.Close()
}

// plainSyncer syncs with fdatasync(2), blocking its thread.
type plainSyncer struct{}

func (plainSyncer) fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

func (plainSyncer) close() error { return nil }
