package protocol

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

func encodeFrames(t testing.TB, frames ...*pb.Frame) []byte {
	var out []byte
	for _, f := range frames {
		b, err := appendFrame(nil, f, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// FuzzReadFrame feeds raw and varint-prefixed garbage to the frame reader
// with both caps: it must never panic, never return a frame above its cap,
// and classify every failure.
func FuzzReadFrame(f *testing.F) {
	set := testSet("fuzz")
	f.Add(encodeFrames(f, helloFrame("a", "b", nil)), true)
	f.Add(encodeFrames(f, challengeFrame(1, set.Parts[0].Narrative, set.Parts[0].Questions[0].Question)), true)
	f.Add(encodeFrames(f, &pb.Frame{Body: &pb.Frame_Answer{Answer: &pb.Answer{Round: 1, Answer: "LOOP-1"}}},
		&pb.Frame{Body: &pb.Frame_ProbeAck{ProbeAck: &pb.ProbeAck{Seq: 1}}}), true)
	f.Add(encodeFrames(f, &pb.Frame{Body: &pb.Frame_Verdict{Verdict: &pb.Verdict{Reason: "ok", Rounds: []*pb.RoundResult{{Round: 1}}}}}), true)
	f.Add([]byte{}, true)
	f.Add([]byte{0x00}, true)
	f.Add([]byte{0x80, 0x00}, true)
	f.Add(binary.AppendUvarint(nil, 1<<63), true)
	f.Add(binary.AppendUvarint(nil, MaxProverFrame+1), true)
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00}, false)
	f.Add([]byte("\xff\xff\xff\xff"), false)
	f.Fuzz(func(t *testing.T, data []byte, raw bool) {
		input := data
		if !raw {
			input = append(binary.AppendUvarint(nil, uint64(len(data))), data...)
		}
		for _, max := range []int{MaxProverFrame, MaxVerifierFrame} {
			r := newFrameReader(bytes.NewReader(input), max)
			for i := 0; ; i++ {
				var fr pb.Frame
				err := readFrame(r, &fr)
				if err != nil {
					var fe *frameError
					if !errors.As(err, &fe) {
						t.Fatalf("unclassified error %T %v", err, err)
					}
					if fe.code == 0 && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
						t.Fatalf("uncoded error from a byte reader: %v", err)
					}
					if i == 0 {
						if n, k := binary.Uvarint(input); k > 0 && n > uint64(max) && !errors.Is(err, ErrFrameTooLarge) && fe.code != ErrCodeProtocolViolation {
							t.Fatalf("length %d > cap %d gave %v", n, max, err)
						}
					}
					break
				}
				if n := proto.Size(&fr); n > max {
					t.Fatalf("frame of %d bytes accepted under cap %d", n, max)
				}
				_ = frameKind(&fr)
				if i > len(input) {
					t.Fatal("reader does not make progress")
				}
			}
		}
	})
}

// pipeStream adapts one end of net.Pipe to the stream interface.
type pipeStream struct{ net.Conn }

func (p pipeStream) CloseWrite() error                            { return nil }
func (p pipeStream) Reset() error                                 { return p.Close() }
func (p pipeStream) ResetWithError(network.StreamErrorCode) error { return p.Close() }

// fuzzNode is a service on a host with a fixed identity, so that corpus
// entries stay valid across runs, and the fixed identity of its peer.
type fuzzNode struct {
	h      host.Host
	svc    *Service
	remote peer.ID
	set    *skill.Set
}

func fixedKey(t testing.TB, seed byte) crypto.PrivKey {
	k, _, err := crypto.GenerateEd25519Key(bytes.NewReader(bytes.Repeat([]byte{seed}, 64)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newFuzzNode(f testing.TB) *fuzzNode {
	h, err := libp2p.New(libp2p.NoListenAddrs, libp2p.Identity(fixedKey(f, 1)), libp2p.DisableRelay(), libp2p.DisableMetrics())
	if err != nil {
		f.Fatal(err)
	}
	remote, err := peer.IDFromPrivateKey(fixedKey(f, 2))
	if err != nil {
		f.Fatal(err)
	}
	set := testSet("fuzz-live")
	svc, err := NewService(h, Config{
		Source: &staticSource{sets: []*skill.Set{set}}, Prover: oracleProver(0, set),
		Policy:           fastPolicy(time.Second, 3*time.Second),
		HandshakeTimeout: 200 * time.Millisecond, ProbeTimeout: 200 * time.Millisecond,
		Logger: testLogger(f),
	})
	if err != nil {
		f.Fatal(err)
	}
	svc.random = zeroReader{}
	f.Cleanup(func() { svc.Close(); h.Close() })
	return &fuzzNode{h: h, svc: svc, remote: remote, set: set}
}

type zeroReader struct{}

func (zeroReader) Read(b []byte) (int, error) { clear(b); return len(b), nil }

// feed runs serve against a peer that writes input and then closes, while
// draining what serve writes. It returns when both sides are done.
func feed(t *testing.T, input []byte, serve func(stream)) {
	local, remote := net.Pipe()
	var wg sync.WaitGroup
	wg.Go(func() { io.Copy(io.Discard, remote) })
	wg.Go(func() {
		remote.Write(input)
		remote.Close()
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		serve(pipeStream{local})
		local.Close()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("session did not end")
	}
	wg.Wait()
}

// FuzzProverStream drives the prover's state machine over a live stream
// with what a (possibly hostile) verifier sends.
func FuzzProverStream(f *testing.F) {
	n := newFuzzNode(f)
	hello := helloFrame(n.remote, n.h.ID(), func(h *pb.Hello) { h.TotalMs = 3000; h.TauMs = 1000; h.Nonce = make([]byte, NonceBytes) })
	p := n.set.Parts
	probe := &pb.Frame{Body: &pb.Frame_Probe{Probe: &pb.Probe{Seq: 1, Nonce: make([]byte, 8)}}}
	f.Add(encodeFrames(f, hello, probe, challengeFrame(1, p[0].Narrative, p[0].Questions[0].Question),
		challengeFrame(2, p[1].Narrative, p[1].Questions[0].Question), challengeFrame(3, p[2].Narrative, p[2].Questions[0].Question),
		&pb.Frame{Body: &pb.Frame_Verdict{Verdict: &pb.Verdict{Accepted: true, Reason: "ok"}}}))
	f.Add(encodeFrames(f, hello, &pb.Frame{Body: &pb.Frame_Verdict{Verdict: &pb.Verdict{Reason: "inconclusive"}}}))
	f.Add(encodeFrames(f, hello, probe, probe, &pb.Frame{Body: &pb.Frame_Verdict{Verdict: &pb.Verdict{Reason: "bogus", FailedRound: 99}}}))
	f.Add([]byte{0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, input []byte) {
		if !n.svc.enter() {
			t.Skip("closed")
		}
		defer n.svc.wg.Done()
		var res ProverResult
		feed(t, input, func(s stream) {
			pr := &proverRun{svc: n.svc, str: s, remote: n.remote, res: &res, log: n.svc.log}
			pr.serve()
		})
		if res.Err == nil && res.Reason == "" {
			t.Fatalf("session ended without a verdict or an error: %+v", res)
		}
		if res.Attestation != nil && res.AttestationErr != nil {
			t.Fatal("attestation both accepted and refused")
		}
	})
}

// FuzzVerifierStream drives the verifier's state machine over a live
// stream with what a (possibly hostile) prover sends. Nonces are zero so
// that the fuzzer can echo them.
func FuzzVerifierStream(f *testing.F) {
	n := newFuzzNode(f)
	zero8 := make([]byte, 8)
	ack := &pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: make([]byte, NonceBytes)}}}
	var probes []*pb.Frame
	for i := range DefaultProbes {
		probes = append(probes, &pb.Frame{Body: &pb.Frame_ProbeAck{ProbeAck: &pb.ProbeAck{Seq: uint32(i + 1), Nonce: zero8}}})
	}
	answers := []*pb.Frame{}
	for i, part := range n.set.Parts {
		answers = append(answers, &pb.Frame{Body: &pb.Frame_Answer{Answer: &pb.Answer{Round: uint32(i + 1), Answer: part.Questions[0].Answer}}})
	}
	f.Add(encodeFrames(f, append(append([]*pb.Frame{ack}, probes...), answers...)...))
	f.Add(encodeFrames(f, append([]*pb.Frame{ack}, probes...)...))
	f.Add(encodeFrames(f, ack, declineFrame(pb.DeclineReason_DECLINE_REASON_BUSY, "x")))
	f.Add(encodeFrames(f, append(append([]*pb.Frame{ack}, probes...), declineFrame(pb.DeclineReason_DECLINE_REASON_REFUSED, "no"))...))
	f.Add([]byte{0x05, 0xff})
	f.Add([]byte("\x000"))            // an empty hello ack: unpaid
	f.Add([]byte("\b:\x06002\x0200")) // a Decline instead of the hello ack: declined
	f.Fuzz(func(t *testing.T, input []byte) {
		if !n.svc.enter() {
			t.Skip("closed")
		}
		defer n.svc.wg.Done()
		sess, err := skill.NewSession(n.set, n.svc.cfg.Policy, zeroReader{})
		if err != nil {
			t.Fatal(err)
		}
		var (
			res  *Result
			verr error
		)
		feed(t, input, func(s stream) {
			r := &Result{Peer: n.remote, Started: time.Now(), Nonce: make([]byte, NonceBytes)}
			vs := &VerifierSession{svc: n.svc, peer: n.remote, sess: sess, res: r, rtt: -1}
			v := &verifierRun{svc: n.svc, vs: vs, str: s, peer: n.remote, ctx: context.Background(), log: n.svc.log, res: r}
			res, verr = v.run()
		})
		if verr != nil {
			// A peer that does not pay (a hello ack without the proof of
			// work, or any other frame first) or declines at the hello
			// (a seed above, found by the fuzzer) ends the session
			// unsigned (spec §5 step 3, §5a).
			if !errors.Is(verr, ErrNetwork) && !errors.Is(verr, ErrBusy) && !errors.Is(verr, ErrUnpaid) && !errors.Is(verr, ErrDeclined) {
				t.Fatalf("unexpected error %v", verr)
			}
			return
		}
		if !res.Verdict.Reason.Valid() {
			t.Fatalf("verdict %+v", res.Verdict)
		}
		if res.Verdict.Accepted && len(res.Verdict.Rounds) != n.svc.cfg.Policy.Rounds {
			t.Fatalf("accepted after %d rounds", len(res.Verdict.Rounds))
		}
		if res.Verdict.Reason != skill.ReasonInconclusive && res.Attestation == nil {
			t.Fatal("verdict not attested")
		}
	})
}
