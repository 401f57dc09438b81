package secondimpl2

import (
	"bufio"
	"errors"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/libp2p/go-libp2p/core/network"
)

// protocol.md §5 step 4's table (what ends a session at the probe), which
// §5b leans on (an unpaid verifier gets Decline{BUSY} there and nothing
// is signed), read alone against the reference verifier: my prover acks
// the hello and answers probe 1 as each row says.
func TestSpec119ProbeStepOutcomes(t *testing.T) {
	t.Parallel()
	type want int
	const (
		noSessionBusy want = iota
		noSession
		signedDeclined
		signedProtocolError
	)
	for _, c := range []struct {
		name  string
		reply func(s network.Stream, pr *probe)
		want  want
	}{
		{"Decline BUSY", func(s network.Stream, _ *probe) {
			writeFrame(s, &frame{Body: bDecline, Decline: &decline{Reason: drBusy, Detail: "payment of 12 bits asked"}})
			s.CloseWrite()
		}, noSessionBusy},
		{"reset ErrCodeBusy", func(s network.Stream, _ *probe) { s.ResetWithError(codeBusy) }, noSessionBusy},
		{"Decline PROVER_ERROR", func(s network.Stream, _ *probe) {
			writeFrame(s, &frame{Body: bDecline, Decline: &decline{Reason: drProverError, Detail: "x"}})
			s.CloseWrite()
		}, signedDeclined},
		{"reset ErrCodeDeclined", func(s network.Stream, _ *probe) { s.ResetWithError(codeDeclined) }, signedDeclined},
		{"reset ErrCodeProtocolViolation", func(s network.Stream, _ *probe) { s.ResetWithError(codePV) }, signedDeclined},
		{"ProbeAck of another seq", func(s network.Stream, pr *probe) {
			writeFrame(s, &frame{Body: bProbeAck, Probe: &probe{Seq: pr.Seq + 1, Nonce: pr.Nonce}})
		}, signedProtocolError},
		{"an Answer", func(s network.Stream, _ *probe) {
			writeFrame(s, &frame{Body: bAnswer, Answer: &answer{Round: 1, Answer: "x"}})
		}, signedProtocolError},
		{"reset ErrCodeTimeout", func(s network.Stream, _ *probe) { s.ResetWithError(codeTimeout) }, noSession},
		{"close", func(s network.Stream, _ *probe) { s.Close() }, noSession},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := newPairDialing(t, "tcp", protocol.Config{}, true)
			p.mine.h.SetStreamHandler(protoID, func(s network.Stream) {
				defer s.Reset()
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
				s.SetReadDeadline(time.Now().Add(idleTimeout))
				f, err = readFrame(r, capVerifier)
				if err != nil || f.Body != bProbe {
					t.Errorf("first frame after the ack: %v %+v", err, f)
					return
				}
				c.reply(s, f.Probe)
				s.SetReadDeadline(time.Now().Add(5 * time.Second))
				for i := 0; i < 8; i++ {
					if _, err := readFrame(r, capVerifier); err != nil {
						return
					}
				}
			})
			res, err := p.ours.Verify(p.ctx, p.mine.h.ID(), false)
			switch c.want {
			case noSessionBusy, noSession:
				if err == nil || (res != nil && res.Envelope != nil) {
					t.Fatalf("want no session: %v %+v", err, res)
				}
				if busy := errors.Is(err, protocol.ErrBusy); busy != (c.want == noSessionBusy) {
					t.Fatalf("want busy %v: %v", c.want == noSessionBusy, err)
				}
			case signedDeclined, signedProtocolError:
				reason := map[want]string{signedDeclined: "declined", signedProtocolError: "protocol_error"}[c.want]
				if err != nil || res == nil || res.Envelope == nil || string(res.Verdict.Reason) != reason || len(res.Verdict.Rounds) != 0 {
					t.Fatalf("want signed %s without rounds: %v %+v", reason, err, res)
				}
				if _, err := verifyAttestation(res.Envelope, verifyOpts{Subject: []byte(p.mine.h.ID()), Now: time.Now().Unix()}); err != nil {
					t.Fatalf("the record: %v", err)
				}
			}
		})
	}
}
