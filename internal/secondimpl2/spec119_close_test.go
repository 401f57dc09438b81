package secondimpl2

import (
	"bufio"
	"bytes"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/libp2p/go-libp2p/core/network"
)

// protocol.md §5 step 7 (stated in 1.13.4): after a verdict that follows
// no violation the verifier closes its write side and reads until the
// prover closes, discarding at most 4 KiB, for at most 2 s + rtt_credit
// (then ErrCodeTimeout); a prover that "sent 4 KiB (4 096 bytes, frames or
// not) without closing" is reset at once ErrCodeProtocolViolation. My
// prover declines round 1 PROVER_ERROR (no violation), reads the verdict,
// then sends 4 095 bytes and, a second later, one more: the 4 096th byte
// is reset at once; 4 095 bytes alone wait out the close and are reset
// ErrCodeTimeout.
func TestSpec119VerifierCloseWait(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		extra bool
		code  network.StreamErrorCode
		after [2]time.Duration // the reset seen, counted from the verdict's read
	}{
		{"4 096 bytes", true, codePV, [2]time.Duration{time.Second, 1800 * time.Millisecond}},
		{"4 095 bytes", false, codeTimeout, [2]time.Duration{3 * time.Second, 4 * time.Second}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := newPairDialing(t, "tcp", protocol.Config{}, true)
			type out struct {
				code    network.StreamErrorCode
				remote  bool
				after   time.Duration
				verdict *verdict
			}
			done := make(chan out, 1)
			p.mine.h.SetStreamHandler(protoID, func(s network.Stream) {
				defer s.Reset()
				var o out
				defer func() { done <- o }()
				r := bufio.NewReader(s)
				s.SetReadDeadline(time.Now().Add(helloTimeout))
				f, err := readFrame(r, capVerifier)
				if err != nil || f.Body != bHello {
					return
				}
				h := f.Hello
				ack := &helloAck{Nonce: h.Nonce}
				if h.PowDifficulty > 0 {
					ack.Pow = solvePow(h.Nonce, p.mine.id, int(h.PowDifficulty))
				}
				if writeFrame(s, &frame{Body: bHelloAck, HelloAck: ack}) != nil {
					return
				}
				var verdictAt time.Time
				for i := 0; i < 20 && o.verdict == nil; i++ {
					s.SetReadDeadline(time.Now().Add(idleTimeout))
					f, err := readFrame(r, capVerifier)
					if err != nil {
						return
					}
					switch f.Body {
					case bProbe:
						writeFrame(s, &frame{Body: bProbeAck, Probe: f.Probe})
					case bChallenge:
						writeFrame(s, &frame{Body: bDecline, Decline: &decline{Reason: drProverError, Detail: "answerer failed"}})
					case bVerdict:
						o.verdict, verdictAt = f.Verdict, time.Now()
					}
				}
				if o.verdict == nil {
					return
				}
				s.SetWriteDeadline(time.Now().Add(10 * time.Second))
				if _, err := s.Write(bytes.Repeat([]byte{0xff}, 4095)); err != nil {
					return
				}
				if !c.extra {
					// wait past 2 s + rtt_credit, then a byte tells the
					// reset's code (were the stream still open, it would
					// be the 4 096th byte, reset ErrCodeProtocolViolation)
					time.Sleep(3500*time.Millisecond - time.Since(verdictAt))
				} else {
					time.Sleep(time.Second)
				}
				for i := 0; i < 40; i++ {
					if _, err := s.Write([]byte{0xff}); err != nil {
						o.code, o.remote = remoteCode(err)
						o.after = time.Since(verdictAt)
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			})
			res, err := p.ours.Verify(p.ctx, p.mine.h.ID(), false)
			if err != nil || res.Envelope == nil || string(res.Verdict.Reason) != "declined" {
				t.Fatalf("our verifier: %v %+v", err, res)
			}
			var o out
			select {
			case o = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("my prover did not finish")
			}
			if !o.remote || o.code != c.code || o.after < c.after[0] || o.after > c.after[1] {
				t.Fatalf("reset %#x (remote %v) %v after the verdict, want %#x within %v", o.code, o.remote, o.after, c.code, c.after)
			}
		})
	}
}
