package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/libp2p/go-msgio/pbio"
	"google.golang.org/protobuf/proto"

	"github.com/acaptcha/acaptcha/protocol/pb"
)

// challengeSized is a challenge frame of a procedural narrative's size
// (about 3.6 KB): it fits in a frameReader's buffer.
func challengeSized() *pb.Frame {
	return &pb.Frame{Body: &pb.Frame_Challenge{Challenge: &pb.Challenge{Round: 1, Rounds: 3, Domain: "clinical",
		Narrative: strings.Repeat("The assay drifted at the central lab once. ", 85),
		Question:  "Which cause held up once the review had checked every lot?", BudgetMs: 30000, Kind: "narrative"}}}
}

// verdictSized is a verdict frame larger than a frameReader's buffer: its
// body is read into a pooled buffer.
func verdictSized() *pb.Frame {
	return &pb.Frame{Body: &pb.Frame_Verdict{Verdict: &pb.Verdict{Accepted: true, Reason: "ok",
		Attestation: bytes.Repeat([]byte{0xa5}, 20<<10)}}}
}

// bytesPerRun is the mean heap bytes allocated by a call of f (after one
// warm-up call), on one P as testing.AllocsPerRun measures.
func bytesPerRun(runs int, f func()) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(runs)
}

// TestFrameAllocs bounds what the frame path allocates for one stream's
// worth of work: open a reader, write a frame and read it back, release
// the reader. What is left is what proto.Unmarshal must allocate (the
// oneof, the message, copies of its strings and bytes). pbio's reader
// added a 4 KiB bufio.Reader and a body buffer the size of the frame per
// stream, about 2.5x the bytes and 4 more objects; the bounds leave room
// for protobuf's own changes but not for those.
func TestFrameAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	for _, tc := range []struct {
		name       string
		f          *pb.Frame
		maxObjects float64
	}{
		// Frame_Challenge, Challenge, domain, narrative, question, kind.
		{"challenge", challengeSized(), 8},
		// Frame_Verdict, Verdict, reason, attestation.
		{"verdict>buffer", verdictSized(), 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size := proto.Size(tc.f)
			var (
				stream bytes.Buffer // in memory: no goroutine, no allocation once grown
				fr     frameReader  // embedded in the runs as in proverRun and verifierRun
				got    pb.Frame
				err    error
			)
			session := func() {
				fr.open(&stream, MaxVerifierFrame)
				if err = writeFrame(&stream, tc.f, MaxVerifierFrame); err == nil {
					err = readFrame(&fr, &got)
				}
				fr.release()
			}
			objects := testing.AllocsPerRun(200, session)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(&got, tc.f) {
				t.Fatal("frame read back differs")
			}
			perRun := bytesPerRun(200, session)
			maxBytes := 1.25*float64(size) + 1024
			t.Logf("%d-byte frame: %.1f objects, %.0f bytes per open+write+read+release (bounds %.0f, %.0f)",
				size, objects, perRun, tc.maxObjects, maxBytes)
			if objects > tc.maxObjects {
				t.Errorf("%.1f objects allocated per frame, want at most %.0f", objects, tc.maxObjects)
			}
			if perRun > maxBytes {
				t.Errorf("%.0f bytes allocated for a %d-byte frame, want at most %.0f", perRun, size, maxBytes)
			}
		})
	}
}

// TestFrameReaderDoesNotAlias: a decoded frame keeps none of the reader's
// buffers, which are reused by the next frame and by the next stream once
// released.
func TestFrameReaderDoesNotAlias(t *testing.T) {
	ack := &pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: bytes.Repeat([]byte{1}, NonceBytes), Pow: []byte{2, 3, 4}}}}
	probe := &pb.Frame{Body: &pb.Frame_Probe{Probe: &pb.Probe{Seq: 1, Nonce: bytes.Repeat([]byte{5}, probeNonceBytes)}}}
	in := []*pb.Frame{ack, challengeSized(), verdictSized(), probe, verdictSized(), ack}
	wire := encodeFrames(t, in...)
	var (
		fr  frameReader
		out []*pb.Frame
	)
	fr.open(bytes.NewReader(wire), MaxVerifierFrame)
	for range in {
		f := new(pb.Frame)
		if err := readFrame(&fr, f); err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	fr.release()
	// Scribble over what the pools hold now.
	junk := bytes.Repeat([]byte{0xff}, 64<<10)
	for range 4 {
		var other frameReader
		other.open(bytes.NewReader(junk), MaxVerifierFrame)
		_, _ = other.br.Peek(frameReaderSize)
		other.release()
		bp := frameBufs.Get().(*[]byte)
		clear((*bp)[:cap(*bp)])
		frameBufs.Put(bp)
	}
	for i := range in {
		if !proto.Equal(out[i], in[i]) {
			t.Errorf("frame %d (%s) changed once the reader's buffers were reused", i, frameKind(in[i]))
		}
	}
}

// cutReader serves data, failing with errCut (a transport failure
// mid-stream) from cut on if cut < len(data), and ending with io.EOF.
type cutReader struct {
	data []byte
	cut  int
	off  int
}

var errCut = errors.New("transport failed")

func (r *cutReader) Read(p []byte) (int, error) {
	switch {
	case r.off >= len(r.data):
		return 0, io.EOF
	case r.off >= r.cut:
		return 0, errCut
	}
	n := copy(p, r.data[r.off:min(r.cut, len(r.data))])
	r.off += n
	return n, nil
}

// readAll reads frames and describes each outcome, reading on after an
// error (so that what an error consumed shows in what follows) up to a
// few errors.
func readAll(r pbio.Reader) []string {
	var out []string
	for errs := 0; errs < 3 && len(out) < 64; {
		var f pb.Frame
		err := readFrame(r, &f)
		if err != nil {
			var fe *frameError
			errors.As(err, &fe)
			out = append(out, fmt.Sprintf("error code=%#x eof=%v unexpectedEOF=%v tooLarge=%v cut=%v %q", uint32(fe.code),
				errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, ErrFrameTooLarge), errors.Is(err, errCut), err))
			errs++
			continue
		}
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&f)
		out = append(out, fmt.Sprintf("frame %x", b))
	}
	return out
}

// frameReaderMatchesPbio checks that a frameReader reads what pbio's
// delimited reader reads from the same bytes, frame for frame and error
// for error, behind each of a few reader shapes.
func frameReaderMatchesPbio(t *testing.T, input []byte, cut, max int) {
	t.Helper()
	shapes := []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"whole", func(r io.Reader) io.Reader { return r }},
		{"bytewise", iotest.OneByteReader},
		{"halves", iotest.HalfReader},
		{"data+EOF", iotest.DataErrReader},
	}
	for _, sh := range shapes {
		want := readAll(pbio.NewDelimitedReader(sh.wrap(&cutReader{data: input, cut: cut}), max))
		fr := newFrameReader(sh.wrap(&cutReader{data: input, cut: cut}), max)
		got := readAll(fr)
		fr.release()
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%s, cut at %d of %d, cap %d:\nframeReader: %.300q\npbio:        %.300q", sh.name, cut, len(input), max, got, want)
		}
	}
}

// TestFrameReaderMatchesPbio: the frameReader replaced pbio's reader with
// no change in what a stream's bytes decode to or fail with: valid frames
// of both sizes (decoded in place, and from a pooled buffer), caps, bad
// prefixes, undecodable bodies, and a transport failure at every byte.
func TestFrameReaderMatchesPbio(t *testing.T) {
	big := &pb.Frame{Body: &pb.Frame_Challenge{Challenge: &pb.Challenge{Round: 2, Rounds: 3, Domain: "d",
		Narrative: strings.Repeat("n", 5000), Question: "q?", BudgetMs: 1}}}
	frames := []*pb.Frame{helloFrame("a", "b", nil), {Body: &pb.Frame_Probe{Probe: &pb.Probe{Seq: 1, Nonce: []byte{1, 2}}}},
		challengeSized(), big, {Body: &pb.Frame_Answer{Answer: &pb.Answer{Round: 1, Answer: "LOOP-1"}}}, verdictSized()}
	stream := encodeFrames(t, frames...)
	// Transport failures: at every byte around each frame's start (in
	// and after the prefix, where the reader's buffer ends), and every
	// step bytes in between.
	cuts := map[int]bool{len(stream): true}
	step := 61
	if raceEnabled {
		step = 997
	}
	for i := 0; i <= len(stream); i += step {
		cuts[i] = true
	}
	start := 0
	for _, f := range frames {
		for _, at := range []int{start, start + frameReaderSize} {
			for i := max(at-8, 0); i <= min(at+8, len(stream)); i++ {
				cuts[i] = true
			}
		}
		start += len(encodeFrames(t, f))
	}
	for _, max := range []int{MaxProverFrame, MaxVerifierFrame} {
		for cut := range cuts {
			frameReaderMatchesPbio(t, stream, cut, max)
		}
	}
	oddities := [][]byte{
		{},
		{0x00},       // empty frame: no body
		{0x80, 0x00}, // not minimal
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, // overflow
		binary.AppendUvarint(nil, 1<<63),
		binary.AppendUvarint(nil, MaxProverFrame+1),
		binary.AppendUvarint(nil, MaxVerifierFrame+1),
		append(binary.AppendUvarint(nil, MaxProverFrame), make([]byte, MaxProverFrame)...), // zeros: field 0
		{0x04, 0x0a, 0x02, 0x0a, 0x00},                                                     // a hello with an empty... hello
		{0x03, 0x42, 0x01, 0xff},                                                           // a string field with invalid UTF-8
		{0x02, 0x0a},                                                                       // truncated inside the body
		append(binary.AppendUvarint(nil, 6000), bytes.Repeat([]byte{0x0a}, 10)...),         // a large body cut short
	}
	for _, in := range oddities {
		for _, max := range []int{MaxProverFrame, MaxVerifierFrame} {
			frameReaderMatchesPbio(t, in, len(in), max)
			frameReaderMatchesPbio(t, append(append([]byte{}, in...), stream...), len(in)+len(stream), max)
		}
	}
}

// deadlineStream records the read deadline in force.
type deadlineStream struct {
	pipeStream
	mu     sync.Mutex
	readBy time.Time
	sets   int
}

func (s *deadlineStream) SetReadDeadline(t time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readBy = t
	s.sets++
	return nil
}

// TestProverReadDeadlineNotRearmed: the exchange loop leaves the stream's
// read deadline alone only when it is the one asked for, and sets it again
// after a watch (whose reader sets its own).
func TestProverReadDeadlineNotRearmed(t *testing.T) {
	s := &deadlineStream{}
	p := &proverRun{str: s}
	p.feed = newFrameFeed(p)
	t1 := time.Now().Add(time.Second)
	t2 := t1.Add(time.Millisecond)
	check := func(want time.Time, sets int) {
		t.Helper()
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.readBy.Equal(want) || s.sets != sets {
			t.Fatalf("deadline %v after %d sets, want %v after %d", s.readBy, s.sets, want, sets)
		}
	}
	p.setReadDeadline(t1)
	check(t1, 1)
	p.setReadDeadline(t1)
	check(t1, 1)
	p.setReadDeadline(t2)
	check(t2, 2)
	p.setReadDeadline(t1)
	check(t1, 3)
	// A watch that the reader took over: it set the stream's deadline.
	p.feed.viaReader = true
	p.feed.watch(t2)
	check(t2, 4)
	p.feed.unwatch()
	p.setReadDeadline(t1)
	check(t1, 5)
	p.setReadDeadline(t1)
	check(t1, 5)
	// A watch armed and withdrawn before the reader started.
	p.feed.viaReader = false
	p.feed.watch(t2)
	p.feed.unwatch()
	p.feed.watch(t2) // the same timer, re-armed
	p.feed.unwatch()
	if p.feed.viaReader {
		t.Skip("the machine is too slow for readerAfter")
	}
	p.setReadDeadline(t1)
	check(t1, 6)
	p.feed.stop()
}

type deadlineCounter struct{ sets []time.Time }

func (d *deadlineCounter) SetWriteDeadline(t time.Time) error {
	d.sets = append(d.sets, t)
	return nil
}

// armWriteDeadline leaves a write deadline with at least half its span
// alone and re-arms one with less; every write starts with at least d/2.
func TestArmWriteDeadline(t *testing.T) {
	const d = 200 * time.Millisecond
	var (
		str deadlineCounter
		by  time.Time
	)
	check := func(wantSets int) {
		t.Helper()
		if len(str.sets) != wantSets {
			t.Fatalf("%d deadlines set, want %d", len(str.sets), wantSets)
		}
		if left := time.Until(by); left < d/2-10*time.Millisecond || left > d {
			t.Fatalf("write starts with %v left, want %v..%v", left, d/2, d)
		}
		if !str.sets[len(str.sets)-1].Equal(by) {
			t.Fatal("the deadline set is not the one remembered")
		}
	}
	armWriteDeadline(&str, &by, d)
	check(1)
	armWriteDeadline(&str, &by, d)
	check(1)
	time.Sleep(d/2 + 20*time.Millisecond)
	armWriteDeadline(&str, &by, d)
	check(2)
}
