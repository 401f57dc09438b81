package secondimpl2

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/libp2p/go-libp2p/core/network"
)

// protocol.md §5 step 3 (the verifier reading the prover's answer to its
// hello) read alone against the reference verifier, which asks 8 bits of
// proof of work: what it reports and how it resets the stream (seen by my
// prover) for each row: a wrong nonce echo or another frame
// ErrCodeProtocolViolation, an oversized frame ErrCodeOversized, a pow
// that does not pay ErrCodeDeclined, Decline{BUSY} a reset without a
// code, another Decline ErrCodeDeclined; never a signed record.
func TestSpec119VerifierReadsTheAck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		reply    func(s network.Stream, h *hello, me []byte)
		code     network.StreamErrorCode // 0: a reset without a code
		busy     bool
		declined bool
	}{
		{"wrong nonce", func(s network.Stream, h *hello, me []byte) {
			writeFrame(s, &frame{Body: bHelloAck, HelloAck: &helloAck{Nonce: randBytes(32), Pow: solvePow(h.Nonce, me, int(h.PowDifficulty))}})
		}, codePV, false, false},
		{"pow that does not pay", func(s network.Stream, h *hello, me []byte) {
			pow := solvePow(h.Nonce, me, int(h.PowDifficulty))
			for powValid(h.Nonce, me, pow, int(h.PowDifficulty)) {
				pow = binary.BigEndian.AppendUint64(nil, binary.BigEndian.Uint64(pow)+1)
			}
			writeFrame(s, &frame{Body: bHelloAck, HelloAck: &helloAck{Nonce: h.Nonce, Pow: pow}})
		}, codeDeclined, false, false},
		{"another frame", func(s network.Stream, h *hello, _ []byte) {
			writeFrame(s, &frame{Body: bProbeAck, Probe: &probe{Seq: 1, Nonce: h.Nonce[:8]}})
		}, codePV, false, false},
		{"oversized frame", func(s network.Stream, _ *hello, _ []byte) {
			s.Write(append(binary.AppendUvarint(nil, capProver+1), make([]byte, 16)...))
		}, codeOversized, false, false},
		{"Decline BUSY", func(s network.Stream, _ *hello, _ []byte) {
			writeFrame(s, &frame{Body: bDecline, Decline: &decline{Reason: drBusy, Detail: "busy"}})
			s.CloseWrite()
		}, 0, true, false},
		{"Decline NO_PROVER", func(s network.Stream, _ *hello, _ []byte) {
			writeFrame(s, &frame{Body: bDecline, Decline: &decline{Reason: 1, Detail: "no prover"}})
			s.CloseWrite()
		}, codeDeclined, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := newPairDialing(t, "tcp", protocol.Config{PowDifficulty: 8}, true)
			ended := make(chan error, 1)
			p.mine.h.SetStreamHandler(protoID, func(s network.Stream) {
				defer s.Reset()
				r := bufio.NewReader(s)
				s.SetReadDeadline(time.Now().Add(helloTimeout))
				f, err := readFrame(r, capVerifier)
				if err != nil || f.Body != bHello || f.Hello.PowDifficulty != 8 {
					ended <- errors.New("no hello asking 8 bits")
					return
				}
				c.reply(s, f.Hello, p.mine.id)
				s.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, err = io.Copy(io.Discard, r)
				ended <- err
			})
			res, err := p.ours.Verify(p.ctx, p.mine.h.ID(), false)
			if err == nil || (res != nil && res.Envelope != nil) {
				t.Fatalf("our verifier: %v %+v, want no session", err, res)
			}
			if busy := errors.Is(err, protocol.ErrBusy); busy != c.busy {
				t.Fatalf("our verifier: %v, want busy %v", err, c.busy)
			}
			if declined := errors.Is(err, protocol.ErrDeclined); declined != c.declined {
				t.Fatalf("our verifier: %v, want declined %v", err, c.declined)
			}
			rerr := <-ended
			code, remote := remoteCode(rerr)
			if c.code == 0 {
				var se *network.StreamError
				if errors.As(rerr, &se) && se.ErrorCode != 0 {
					t.Fatalf("my prover read %v, want a reset without a code", rerr)
				}
				return
			}
			if !remote || code != c.code {
				t.Fatalf("my prover read %v (code %#x), want a reset %#x", rerr, code, c.code)
			}
		})
	}
}
