//go:build linux && (amd64 || arm64 || riscv64 || loong64 || ppc64le || mips64le)

package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
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
	iocbCmdPwrite = 1
	iocbCmdFdsync = 3
	iocbFlagResfd = 1 << 0
)

// iocb is struct iocb of linux/aio_abi.h on 64-bit little-endian
// machines (aio_key and aio_rw_flags swap places on big-endian ones: those
// sync with fdatasync, sync_plain.go).
type iocb struct {
	_       uint64 // aio_data
	_       uint32 // aio_key
	rwFlags int32  // aio_rw_flags
	opcode  uint16 // aio_lio_opcode
	_       int16  // aio_reqprio
	fildes  uint32 // aio_fildes
	buf     uint64 // aio_buf
	nbytes  uint64 // aio_nbytes
	offset  int64  // aio_offset
	_       uint64 // aio_reserved2
	flags   uint32 // aio_flags
	resfd   uint32 // aio_resfd
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
	cb := iocb{opcode: iocbCmdFdsync, fildes: uint32(f.Fd())}
	_, err := a.run(&cb, "fdatasync")
	return err
}

// writeDSync writes b at off in f, opened for direct I/O (openDirect),
// as pwritev2 with RWF_DSYNC would: it returns once the data and what
// reading it back needs are on the device. b, off and len(b) are
// multiples of directAlign.
func (a *aioSyncer) writeDSync(f *os.File, b []byte, off int64) error {
	if len(b) == 0 {
		return nil
	}
	cb := iocb{opcode: iocbCmdPwrite, fildes: uint32(f.Fd()), rwFlags: unix.RWF_DSYNC,
		buf: uint64(uintptr(unsafe.Pointer(&b[0]))), nbytes: uint64(len(b)), offset: off}
	n, err := a.run(&cb, "write")
	runtime.KeepAlive(b)
	switch {
	case err != nil:
		return err
	case n != int64(len(b)):
		return fmt.Errorf("write: %d of %d bytes written", n, len(b))
	}
	return nil
}

// run submits cb and waits for its completion: its result (a count of
// bytes for a write), or the device's error as syncFailed.
func (a *aioSyncer) run(cb *iocb, what string) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cb.flags, cb.resfd = iocbFlagResfd, uint32(a.efd.Fd())
	cbs := [1]*iocb{cb}
	if _, _, e := unix.Syscall(unix.SYS_IO_SUBMIT, a.ctx, 1, uintptr(unsafe.Pointer(&cbs[0]))); e != 0 {
		return 0, fmt.Errorf("io_submit %s: %w", what, e)
	}
	// The eventfd counts completions; one request is in flight at a time.
	var b [8]byte
	for {
		n, err := a.efd.Read(b[:])
		if err != nil {
			return 0, fmt.Errorf("wait for %s: %w", what, err)
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
		return 0, fmt.Errorf("io_getevents: %w", e)
	case n != 1:
		return 0, fmt.Errorf("io_getevents: %s completion missing", what)
	case ev[0].res < 0:
		return 0, syncFailed{what, unix.Errno(-ev[0].res)}
	}
	return ev[0].res, nil
}

// directAlign is what direct I/O needs aligned here: the memory, offset
// and length of a write. 4 KiB covers devices whose logical blocks are
// 512 bytes or 4 KiB; on others the first write fails and the log is
// written through the page cache (openWAL).
const directAlign = 4096

// openDirect opens path for direct I/O (O_DIRECT): writes go from memory
// to the device without the page cache. Some file systems (tmpfs) refuse
// it.
func openDirect(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open for direct I/O: %w", err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// syncFailed is the error of an fdatasync or write that AIO ran: the
// file's data did not reach the device.
type syncFailed struct {
	what  string
	errno unix.Errno
}

func (e syncFailed) Error() string { return e.what + ": " + e.errno.Error() }
func (e syncFailed) Unwrap() error { return e.errno }

func (a *aioSyncer) close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, _, _ = unix.Syscall(unix.SYS_IO_DESTROY, a.ctx, 0, 0)
	return a.efd.Close()
}

// plainSyncer syncs with fdatasync(2), blocking its thread; it writes
// nothing itself (the log is then written through the page cache).
type plainSyncer struct{}

func (plainSyncer) writeDSync(*os.File, []byte, int64) error { return errors.ErrUnsupported }

func (plainSyncer) fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

func (plainSyncer) close() error { return nil }
