package protocol

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-msgio/pbio"
	"github.com/multiformats/go-varint"
	"google.golang.org/protobuf/proto"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// Frame caps. A frame is an unsigned-varint length followed by that many
// bytes of a pb.Frame; the caps bound the length (the prefix excluded).
const (
	// MaxVerifierFrame caps every frame the verifier sends (challenge
	// narratives, the verdict with its attestation envelope).
	MaxVerifierFrame = 64 << 10
	// MaxProverFrame caps every frame the prover sends (acks, answers,
	// declines).
	MaxProverFrame = 1 << 10
	// MaxDeclineDetail caps the detail of a Decline and of a Verdict.
	MaxDeclineDetail = 256
	// MaxProbes caps the RTT probes of one session.
	MaxProbes = 16
	// probeNonceBytes is the size of a probe nonce.
	probeNonceBytes = 8
	// streamMemory is what each side reserves in the resource manager: the
	// largest frame plus the buffered reader's and writer's slack.
	streamMemory = MaxVerifierFrame + 8<<10
)

// Stream error codes this protocol sends with ResetWithError. The libp2p
// error-code spec reserves 0..10000 for libp2p itself; acaptcha uses the
// private block 0xAC100000-0xAC1000FF. Transports that cannot carry a code
// (or the peer's implementation) may deliver a plain reset instead.
const (
	// ErrCodeProtocolViolation: the peer sent a frame that is malformed,
	// out of order or inconsistent with the session.
	ErrCodeProtocolViolation network.StreamErrorCode = 0xAC100001
	// ErrCodeOversized: the peer sent a frame above the cap for its role.
	ErrCodeOversized network.StreamErrorCode = 0xAC100002
	// ErrCodeTimeout: the peer did not send the expected frame, or did not
	// close the stream after the verdict, in time.
	ErrCodeTimeout network.StreamErrorCode = 0xAC100003
	// ErrCodeReflection: the prover received a challenge that its own
	// verifier had issued.
	ErrCodeReflection network.StreamErrorCode = 0xAC100004
	// ErrCodeBusy: the prover's inbound session limits are reached, or (from
	// the verifier) a draw budget was spent after the paid ack.
	ErrCodeBusy network.StreamErrorCode = 0xAC100005
	// ErrCodeDeclined: the prover refused the hello.
	ErrCodeDeclined network.StreamErrorCode = 0xAC100006
)

// Errors of the wire layer.
var (
	// ErrProtocolViolation is wrapped by every error caused by a peer that
	// does not follow spec/protocol.md.
	ErrProtocolViolation = errors.New("acaptcha protocol violation")
	// ErrFrameTooLarge is wrapped (together with ErrProtocolViolation) when
	// a frame exceeds the cap for the sender's role.
	ErrFrameTooLarge = errors.New("frame exceeds size cap")
)

// frameError is a read or decode failure classified for the reset code.
type frameError struct {
	code network.StreamErrorCode // 0: I/O failure, no code of our own
	err  error
}

func (e *frameError) Error() string { return e.err.Error() }
func (e *frameError) Unwrap() error { return e.err }

// frameReader reads the frames of one stream: pbio's delimited reader
// (pbio.NewDelimitedReader: the same varint prefix, cap and errors, so that
// readFrame classifies both alike) without its two allocations per stream.
// pbio allocates a 4 KiB bufio.Reader for every stream and a body buffer
// that it grows to each larger frame; in MutualAttestConcurrent (peer/) they
// were 16.7 and 17.3 KB of the ~216 KB a mutual attestation allocated
// (alloc_space), and pbio takes neither from the caller. Here the
// bufio.Reader comes from a pool and goes back with release, a body that
// fits in it is decoded where it lies (Peek) and a larger one from a pooled
// buffer. proto.Unmarshal copies every string and bytes field (it aliases
// its input only under protoiface.UnmarshalAliasBuffer, which it never
// sets), so a decoded frame holds nothing of either buffer
// (TestFrameReaderDoesNotAlias).
type frameReader struct {
	br  *bufio.Reader // nil once released
	max int
}

// frameReaderSize is the buffer of a frameReader: bufio's default, which
// pbio used.
const frameReaderSize = 4 << 10

var frameReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, frameReaderSize) }}

// errReaderReleased is returned by a frameReader used after its release
// (a bug: the stream's reads are over by then).
var errReaderReleased = errors.New("acaptcha: frame reader used after release")

// newFrameReader returns the one reader a stream uses for all its frames,
// with frames capped at max bytes (the prefix excluded).
func newFrameReader(r io.Reader, max int) *frameReader {
	fr := new(frameReader)
	fr.open(r, max)
	return fr
}

// open makes fr the frame reader of r (see newFrameReader).
func (fr *frameReader) open(r io.Reader, max int) {
	fr.br = frameReaders.Get().(*bufio.Reader)
	fr.br.Reset(r)
	fr.max = max
}

// release gives the reader's buffer back to the pool, discarding whatever
// it held unread. It is called once no read is pending or will follow;
// a reader never released simply leaves its buffer to the collector.
func (fr *frameReader) release() {
	if fr.br == nil {
		return
	}
	fr.br.Reset(nil)
	frameReaders.Put(fr.br)
	fr.br = nil
}

// ReadMsg reads one frame into m (pbio.Reader): io.ErrShortBuffer for a
// length above the cap, go-varint's errors for a bad prefix, io.ReadFull's
// for a short body, proto.Unmarshal's for undecodable bytes, and a decoder
// panic recovered as an error, all as pbio's uvarintReader returns them.
func (fr *frameReader) ReadMsg(m proto.Message) (err error) {
	defer func() {
		// As pbio does (minus its print to stderr: the session logs the
		// error it returns).
		if p := recover(); p != nil {
			err = fmt.Errorf("panic reading message: %s", p)
		}
	}()
	if fr.br == nil {
		return errReaderReleased
	}
	n64, err := varint.ReadUvarint(fr.br)
	if err != nil {
		return err
	}
	n := int(n64)
	if n < 0 || n > fr.max {
		return io.ErrShortBuffer
	}
	if n <= fr.br.Size() {
		b, err := fr.br.Peek(n)
		// Consumed once decoded (or the decoder panicked), or if short,
		// as io.ReadFull would have consumed them.
		defer fr.br.Discard(len(b))
		if len(b) < n {
			if len(b) > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		return proto.Unmarshal(b, m)
	}
	bp := frameBufs.Get().(*[]byte)
	defer frameBufs.Put(bp)
	if cap(*bp) < n {
		*bp = make([]byte, n)
	}
	buf := (*bp)[:n]
	if _, err := io.ReadFull(fr.br, buf); err != nil {
		return err
	}
	return proto.Unmarshal(buf, m)
}

// readFrame reads one frame into f (which it resets). Oversized frames,
// undecodable bytes and frames without a body are reported as
// ErrProtocolViolation with the code to reset with; transport failures
// (EOF, reset, deadline) are returned wrapped and uncoded.
func readFrame(r pbio.Reader, f *pb.Frame) error {
	proto.Reset(f)
	err := r.ReadMsg(f)
	switch {
	case err == nil:
	case errors.Is(err, io.ErrShortBuffer):
		return &frameError{ErrCodeOversized, fmt.Errorf("%w: %w", ErrProtocolViolation, ErrFrameTooLarge)}
	case errors.Is(err, varint.ErrOverflow), errors.Is(err, varint.ErrNotMinimal):
		return &frameError{ErrCodeProtocolViolation, fmt.Errorf("%w: bad length prefix: %w", ErrProtocolViolation, err)}
	case errors.Is(err, proto.Error) || strings.HasPrefix(err.Error(), "panic reading message"):
		// proto.Unmarshal failures (and a decoder panic pbio recovered).
		return &frameError{ErrCodeProtocolViolation, fmt.Errorf("%w: undecodable frame: %w", ErrProtocolViolation, err)}
	default:
		// Everything else comes from the transport: EOF, reset, deadline,
		// a closed connection.
		return &frameError{0, err}
	}
	if f.GetBody() == nil {
		return &frameError{ErrCodeProtocolViolation, fmt.Errorf("%w: frame without a body", ErrProtocolViolation)}
	}
	return nil
}

func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// resetCode returns the stream error code the remote reset with, if any.
func resetCode(err error) (network.StreamErrorCode, bool) {
	var se *network.StreamError
	if errors.As(err, &se) && se.Remote {
		return se.ErrorCode, true
	}
	return 0, false
}

// appendFrame appends the varint-delimited encoding of f to buf, refusing
// frames above max: a node never sends what its peer must reject.
func appendFrame(buf []byte, f *pb.Frame, max int) ([]byte, error) {
	n := proto.Size(f)
	if n > max {
		return buf, fmt.Errorf("%w: outgoing frame of %d bytes exceeds %d", ErrFrameTooLarge, n, max)
	}
	buf = binary.AppendUvarint(buf, uint64(n))
	return proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(buf, f)
}

// armWriteDeadline gives the write about to start until d from now at
// the latest, and at least d/2, on a stream whose write deadline only
// this function sets; *by is the deadline it set last. Re-arming on
// every write cost a timer allocation and a timer-heap update per frame
// in yamux (SetWriteDeadline stops its timer and starts a new one): 5 %
// of all allocations of a mutual attestation. go-yamux's own send loop
// extends its connection's write deadline the same way.
func armWriteDeadline(str interface{ SetWriteDeadline(time.Time) error }, by *time.Time, d time.Duration) {
	now := time.Now()
	if by.Sub(now) >= d/2 {
		return
	}
	*by = now.Add(d)
	_ = str.SetWriteDeadline(*by)
}

// writeFrame writes f with a single Write, so that the time a write
// returns is the time the whole frame was handed to the transport.
func writeFrame(w io.Writer, f *pb.Frame, max int) error {
	bp := frameBufs.Get().(*[]byte)
	buf, err := appendFrame((*bp)[:0], f, max)
	if err != nil {
		frameBufs.Put(bp)
		return err
	}
	if _, err := w.Write(buf); err != nil {
		// A transport that failed mid-write may still hold the bytes:
		// the buffer is not reused.
		return err
	}
	// io.Writer: Write does not retain buf once it returned.
	*bp = buf[:0]
	frameBufs.Put(bp)
	// Stream muxers over TCP (yamux) queue the frame for their send-loop
	// goroutine and return: yielding lets that goroutine encrypt and send
	// it now, before this goroutine's bookkeeping, rather than after it.
	// Every frame here is one the other side waits for (a challenge, an
	// answer, a probe). It also moves where the verifier's clock starts
	// (when the challenge's Write returns): once the challenge is on its
	// way, not while it waits in the muxer's queue, so the prover is not
	// charged for the verifier's own encryption and send. On loopback
	// TCP a round went from 1.8x to 1.4-1.5x a ping (BenchmarkRoundVsPing),
	// mostly for that second reason. QUIC streams send from Write already
	// (and return once the prover gave flow-control credit: the verifier
	// bounds what of that wait the round does not charge, maxChallengeWrite).
	//
	// Only while the process runs no more sessions than it has Ps: when
	// more are runnable the send loop gets a P soon anyway, and a yield
	// (which queues this goroutine globally) cost 15-20 % of the
	// throughput of 16 concurrent sessions (MutualAttestConcurrent).
	if running.Load() <= int64(procs) {
		runtime.Gosched()
	}
	return nil
}

// running counts the sessions (either side) this process is running.
var running atomic.Int64

// RunningSessions is how many sessions (either side) this process runs
// now.
func RunningSessions() int { return int(running.Load()) }

// procs is GOMAXPROCS when the package started (reading it takes the
// scheduler's lock).
var procs = runtime.GOMAXPROCS(0)

// sessionRunning counts a session as running until the returned function
// is called.
func sessionRunning() func() {
	running.Add(1)
	return func() { running.Add(-1) }
}

// frameBufs recycles the encoding buffers of writeFrame (a session writes
// a handful of frames, the challenges and the verdict a few KiB each) and
// the body buffers of the frames a frameReader cannot decode in place.
var frameBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence
// (skill.CapBytes, the project's one string cap), dropping invalid bytes
// first: the result goes into protobuf strings, which must be UTF-8.
func truncate(s string, n int) string { return skill.CapBytes(strings.ToValidUTF8(s, ""), n) }

// frameKind names a frame's body for logs and errors.
func frameKind(f *pb.Frame) string {
	switch f.GetBody().(type) {
	case *pb.Frame_Hello:
		return "hello"
	case *pb.Frame_HelloAck:
		return "hello_ack"
	case *pb.Frame_Probe:
		return "probe"
	case *pb.Frame_ProbeAck:
		return "probe_ack"
	case *pb.Frame_Challenge:
		return "challenge"
	case *pb.Frame_Answer:
		return "answer"
	case *pb.Frame_Decline:
		return "decline"
	case *pb.Frame_Verdict:
		return "verdict"
	default:
		return "empty"
	}
}
