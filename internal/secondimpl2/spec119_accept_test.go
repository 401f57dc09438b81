package secondimpl2

import (
	"bufio"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// protocol.md §5c: a verify-first prover's "own acceptance counts from the
// moment it writes that verdict (the verifier asks again as soon as it
// reads it), not from when it has stored it." My verifier comes to the
// reference node (verifying first), is declined VERIFY_FIRST WILL, and
// the node's session back arrives at my prover; the moment my prover
// reads the node's accepting Verdict, before it closes that stream, my
// verifier asks again: it is answered, not declined.
func TestSpec119AcceptanceCountsFromTheVerdict(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	n := newVFNode(t, &calls)
	hm, km := newHost(t, "/ip4/127.0.0.1/tcp/0")
	mine := newNode(hm, km)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	again := make(chan *verifierResult, 1)
	hm.SetStreamHandler(protoID, func(s network.Stream) {
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
			ack.Pow = solvePow(h.Nonce, mine.id, int(h.PowDifficulty))
		}
		if writeFrame(s, &frame{Body: bHelloAck, HelloAck: ack}) != nil {
			return
		}
		for i := 0; i < 32; i++ {
			s.SetReadDeadline(time.Now().Add(idleTimeout))
			f, err := readFrame(r, capVerifier)
			if err != nil {
				return
			}
			switch f.Body {
			case bProbe:
				writeFrame(s, &frame{Body: bProbeAck, Probe: &probe{Seq: f.Probe.Seq, Nonce: f.Probe.Nonce}})
			case bChallenge:
				a, err := truth.answerMine(f.Challenge)
				if err != nil {
					return
				}
				writeFrame(s, &frame{Body: bAnswer, Answer: &answer{Round: f.Challenge.Round, Answer: cutAnswer(a)}})
			case bVerdict:
				if !f.Verdict.Accepted {
					t.Errorf("the node's verdict on mine: %+v", f.Verdict)
					return
				}
				// at once, the verdict's stream still open
				again <- mine.verify(ctx, n.ID(), defaultVerifierOpts())
				s.Close()
				return
			default:
				return
			}
		}
	})
	if err := hm.Connect(ctx, lpeer.AddrInfo{ID: n.ID(), Addrs: n.Addrs()}); err != nil {
		t.Fatal(err)
	}
	checkVerifyFirst(t, mine.verify(ctx, n.ID(), defaultVerifierOpts()), reciprocalWill)
	select {
	case vr := <-again:
		if vr.noSession != nil || !vr.accepted {
			t.Fatalf("asked again on reading the node's acceptance: %v %s", vr.noSession, vr.reason)
		}
	case <-time.After(time.Minute):
		t.Fatal("the node's session back did not end with a verdict")
	}
	if c := calls.Load(); c != 3 {
		t.Fatalf("the node's answerer called %d times, want 3", c)
	}
}
