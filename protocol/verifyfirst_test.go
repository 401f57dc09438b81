package protocol

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol/pb"
)

// A prover with VerifyFirst answers a verifier that came to it only once
// it admits it (spec §5c): before, the hello is declined VERIFY_FIRST
// with whether the prover verifies the verifier now, nothing is signed
// and the answerer is not called; an admitted verifier, and one the
// prover came to, are answered.
func TestVerifyFirst(t *testing.T) {
	set := testSet("vf-1")
	for _, tc := range []struct {
		name       string
		admitted   bool
		proverCame bool
		want       error
	}{
		{"came-unadmitted", false, false, ErrVerifyFirst},
		{"came-admitted", true, false, nil},
		{"came-accepted", false, false, nil},
		{"prover-came", false, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newHost(t), newHost(t)
			va := newService(t, a, Config{Source: sourceOf("vf-1"), Policy: fastPolicy(5*time.Second, 20*time.Second)})
			prover := &countingProver{Prover: oracleProver(0, set)}
			proved := newProved()
			var asked atomic.Int32
			newService(t, b, Config{Prover: prover, VerifyFirst: true, OnProved: proved.fn,
				TrustedPeer:  func(p peer.ID) bool { return tc.admitted && p == a.ID() },
				VerifiedPeer: func(p peer.ID) bool { return tc.name == "came-accepted" && p == a.ID() },
				OnReciprocal: func(p peer.ID, _ bool) pb.Reciprocal {
					if p == a.ID() {
						asked.Add(1)
					}
					return pb.Reciprocal_RECIPROCAL_WILL
				}})
			if tc.proverCame {
				connect(t, b, a, "tcp")
			} else {
				connect(t, a, b, "tcp")
			}
			res, err := va.Verify(testCtx(t, 20*time.Second), b.ID(), false)
			if tc.want == nil {
				if err != nil || !res.Verdict.Accepted || prover.calls.Load() != 3 || asked.Load() != 0 {
					t.Fatalf("Verify: %v %+v after %d answerer calls, %d reciprocal asks", err, res, prover.calls.Load(), asked.Load())
				}
				return
			}
			var vf *VerifyFirstError
			if !errors.As(err, &vf) || !errors.Is(err, ErrVerifyFirst) || res != nil || vf.Reciprocal != pb.Reciprocal_RECIPROCAL_WILL || vf.Peer != b.ID() {
				t.Fatalf("Verify: %v %+v, want a VerifyFirstError (WILL) and no result", err, res)
			}
			if pr := proved.next(t); !errors.Is(pr.Err, ErrVerifyFirst) || prover.calls.Load() != 0 || asked.Load() != 1 {
				t.Fatalf("prover: %v after %d answerer calls and %d reciprocal asks, want ErrVerifyFirst, none and one", pr.Err, prover.calls.Load(), asked.Load())
			}
		})
	}
}

// The decline as a verifier written before document 1.13.0 reads it: a
// Decline at the hello, reason 9 and the reciprocal answer in field 3.
func TestVerifyFirstDeclineFrame(t *testing.T) {
	m, b := newHost(t), newHost(t)
	newService(t, b, Config{Prover: constProver("x"), VerifyFirst: true,
		OnReciprocal: func(peer.ID, bool) pb.Reciprocal { return pb.Reciprocal_RECIPROCAL_BACKING_OFF }})
	connect(t, m, b, "tcp")
	r := openRaw(t, m, b.ID())
	r.send(helloFrame(m.ID(), b.ID(), nil))
	f, err := r.recv()
	if err != nil || f.GetDecline().GetReason() != pb.DeclineReason_DECLINE_REASON_VERIFY_FIRST ||
		f.GetDecline().GetReciprocal() != pb.Reciprocal_RECIPROCAL_BACKING_OFF {
		t.Fatalf("%v %v, want Decline{VERIFY_FIRST, reciprocal BACKING_OFF}", f, err)
	}
}

// A script M that came to A relays A's own challenges back to A's prover
// with an inserted letter in every third word, a rewriting the
// reflection sketch does not see through (spec §7, "Still open"). With
// VerifyFirst, A does not answer M at all while it has not admitted it:
// M's relay hello is declined VERIFY_FIRST, A's answerer answers nothing
// for M, and A's session on M ends rejected. (Were the hello acked, M
// would relay every round and forward A's answers.)
func TestVerifyFirstStopsRelayWithWordEdits(t *testing.T) {
	a, m := newHost(t), newHost(t)
	src := sourceOf("vf-relay")
	prover := &countingProver{Prover: oracleProver(0, src.sets...)}
	va := newService(t, a, Config{Source: src, Policy: fastPolicy(3*time.Second, 20*time.Second), Prover: prover, VerifyFirst: true,
		OnReciprocal: func(peer.ID, bool) pb.Reciprocal { return pb.Reciprocal_RECIPROCAL_WILL }})
	replies := make(chan *pb.Frame, 1)
	m.SetStreamHandler(ID, func(s network.Stream) {
		defer s.Reset()
		_ = s.SetDeadline(time.Now().Add(20 * time.Second))
		in := &rawPeer{t: t, s: s, r: newFrameReader(s, MaxVerifierFrame), max: MaxProverFrame}
		f, err := in.recv()
		if err != nil {
			return
		}
		ack(in, f.GetHello())
		c := echoProbes(t, in)
		out := openRaw(t, m, a.ID())
		defer out.s.Reset()
		out.send(helloFrame(m.ID(), a.ID(), nil))
		r, err := out.recv()
		if err != nil {
			return
		}
		replies <- r
		if r.GetHelloAck() == nil {
			return
		}
		out.send(&pb.Frame{Body: &pb.Frame_Probe{Probe: &pb.Probe{Seq: 1, Nonce: make([]byte, 8)}}})
		if _, err := out.recv(); err != nil {
			return
		}
		edit := insideWord("q")
		for c != nil {
			out.send(&pb.Frame{Body: &pb.Frame_Challenge{Challenge: &pb.Challenge{Round: c.GetRound(), Rounds: 3, Domain: "d",
				Narrative: perturbWords(c.GetNarrative(), 3, edit), Question: perturbWords(c.GetQuestion(), 3, edit), BudgetMs: 15000}}})
			r, err := out.recv()
			if err != nil || r.GetAnswer() == nil {
				return
			}
			in.send(&pb.Frame{Body: &pb.Frame_Answer{Answer: &pb.Answer{Round: c.GetRound(), Answer: r.GetAnswer().GetAnswer()}}})
			nf, err := in.recv()
			if err != nil {
				return
			}
			c = nf.GetChallenge()
		}
	})
	connect(t, m, a, "tcp") // M comes to A
	res, err := va.Verify(testCtx(t, 30*time.Second), m.ID(), false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict.Accepted {
		t.Fatal("A accepted M, which only relays A's challenges")
	}
	select {
	case r := <-replies:
		if r.GetDecline().GetReason() != pb.DeclineReason_DECLINE_REASON_VERIFY_FIRST {
			t.Fatalf("M's relay hello got %v, want Decline{VERIFY_FIRST}", r)
		}
	default:
		t.Fatal("M's relay hello had no reply")
	}
	if n := prover.calls.Load(); n != 0 {
		t.Fatalf("A's answerer was called %d times for M", n)
	}
}
