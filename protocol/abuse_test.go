package protocol

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// Issue 10, findings 4-7: these tests use only the API of 1.0.0 (they
// fail on 5fa0aa1 and pass with the payment step and the budgets).

// Finding 4, slot pinning: hellos with total_ms = 1 h must not hold the
// prover's inbound slots; an honest verifier still gets its session.
func TestAbuseSlotPinning(t *testing.T) {
	p := newHost(t)
	src := sourceOf("pinning")
	newService(t, p, Config{Prover: oracleProver(0, src.sets...), MaxInbound: 4, MaxInboundPerPeer: 2, HandshakeTimeout: 2 * time.Second})
	for range 2 {
		m := newHost(t)
		connect(t, m, p, "tcp")
		for range 2 {
			r := openRaw(t, m, p.ID())
			r.send(helloFrame(m.ID(), p.ID(), func(h *pb.Hello) { h.TotalMs = 3600_000 }))
			f, err := r.recv()
			if err == nil && f.GetHelloAck() != nil {
				t.Errorf("prover accepted a hello with total_ms = 1 h")
			}
			// The attacker keeps its stream open and says nothing more.
		}
	}
	v := newHost(t)
	vs := newService(t, v, Config{Source: src})
	connect(t, v, p, "tcp")
	res, err := vs.Verify(testCtx(t, 20*time.Second), p.ID(), false)
	if err != nil {
		t.Fatalf("honest verifier: %v (slots pinned)", err)
	}
	if !res.Verdict.Accepted {
		t.Fatalf("honest verifier: %+v", res.Verdict)
	}
}

// Finding 5, set exhaustion: a peer that acks without paying, peeks at
// round 1 and resets must not use up the verifier's finite source; an
// honest prover verified afterwards still gets a set.
func TestAbuseSetExhaustion(t *testing.T) {
	a, m, b := newHost(t), newHost(t), newHost(t)
	sets := []*skill.Set{testSet("exhaust-1"), testSet("exhaust-2"), testSet("exhaust-3")}
	corpus, err := skill.NewCorpus("three", sets, skill.NewMemLedger(), 1)
	if err != nil {
		t.Fatal(err)
	}
	va := newService(t, a, Config{Source: corpus})
	var peeked atomic.Int32
	m.SetStreamHandler(ID, func(s network.Stream) {
		defer s.Reset()
		_ = s.SetDeadline(time.Now().Add(10 * time.Second))
		r := &rawPeer{t: t, s: s, r: newFrameReader(s, MaxVerifierFrame), max: MaxProverFrame}
		f, err := r.recv()
		if err != nil {
			return
		}
		// A 1.0.0-style ack: no proof of work.
		r.send(&pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: f.GetHello().GetNonce()}}})
		for {
			f, err := r.recv()
			if err != nil {
				return
			}
			if p := f.GetProbe(); p != nil {
				r.send(&pb.Frame{Body: &pb.Frame_ProbeAck{ProbeAck: &pb.ProbeAck{Seq: p.GetSeq(), Nonce: p.GetNonce()}}})
				continue
			}
			if f.GetChallenge() != nil {
				peeked.Add(1)
			}
			return // peeked: reset
		}
	})
	newService(t, b, Config{Prover: oracleProver(0, sets...)})
	connect(t, a, m, "tcp")
	connect(t, a, b, "tcp")
	for range 3 {
		_, _ = va.Verify(testCtx(t, 10*time.Second), m.ID(), false)
	}
	res, err := va.Verify(testCtx(t, 10*time.Second), b.ID(), false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verdict.Accepted {
		t.Fatalf("honest prover after %d peeks by an attacker: %s %s", peeked.Load(), res.Verdict.Reason, res.Verdict.Detail)
	}
}

// Finding 6, perturbed reflection: a relay that perturbs A's challenge
// (a leading space, case, white space, one word changed) is still caught.
func TestAbusePerturbedReflection(t *testing.T) {
	perturb := map[string]func(string) string{
		"leading space": func(s string) string { return " " + s },
		"upper case":    strings.ToUpper,
		"white space":   func(s string) string { return strings.ReplaceAll(s, " ", " \n\t ") },
		"one word": func(s string) string {
			w := strings.Fields(s)
			w[len(w)/2] = "zebra"
			return strings.Join(w, " ")
		},
	}
	for name, f := range perturb {
		t.Run(name, func(t *testing.T) {
			a, m := newHost(t), newHost(t)
			src := sourceOf("perturb-" + name)
			va := newService(t, a, Config{Source: src, Prover: oracleProver(0, src.sets...)})
			replies := make(chan *pb.Frame, 1)
			m.SetStreamHandler(ID, func(s network.Stream) {
				defer s.Reset()
				_ = s.SetDeadline(time.Now().Add(10 * time.Second))
				in := &rawPeer{t: t, s: s, r: newFrameReader(s, MaxVerifierFrame), max: MaxProverFrame}
				fr, err := in.recv()
				if err != nil {
					t.Errorf("M: hello: %v", err)
					return
				}
				ack(in, fr.GetHello())
				c := echoProbes(t, in)
				if c == nil {
					return
				}
				out := openRaw(t, m, a.ID())
				out.send(helloFrame(m.ID(), a.ID(), nil))
				if fr, err := out.recv(); err != nil || fr.GetHelloAck() == nil {
					t.Errorf("M: A's hello ack: %v %v", fr, err)
					return
				}
				c.Narrative = f(c.Narrative)
				c.Question = f(c.Question)
				out.send(&pb.Frame{Body: &pb.Frame_Challenge{Challenge: c}})
				fr, err = out.recv()
				if err != nil {
					t.Errorf("M: reply to the relayed challenge: %v", err)
					return
				}
				replies <- fr
				out.s.Reset()
			})
			connect(t, a, m, "tcp")
			res, err := va.Verify(testCtx(t, 20*time.Second), m.ID(), false)
			if err != nil {
				t.Fatal(err)
			}
			fr := <-replies
			if fr.GetDecline().GetReason() != pb.DeclineReason_DECLINE_REASON_REFLECTION {
				t.Fatalf("A answered its own perturbed challenge: %s %v", frameKind(fr), fr)
			}
			if res.Verdict.Accepted {
				t.Fatalf("relay accepted: %+v", res.Verdict)
			}
		})
	}
}

// Finding 7, prover cost: one hostile verifier cannot make the prover
// call its answerer without limit.
func TestAbuseProverCallBudget(t *testing.T) {
	p, m := newHost(t), newHost(t)
	var calls atomic.Int32
	newService(t, p, Config{Prover: skill.ProverFunc(func() skill.Answerer {
		return skill.AnswerFunc(func(context.Context, skill.Challenge) (string, error) {
			calls.Add(1)
			return "x", nil
		})
	})})
	connect(t, m, p, "tcp")
	const sessions = 50
	busy := 0
	for i := range sessions {
		if hostileSession(t, m, p, i) {
			busy++
		}
	}
	if n := calls.Load(); n > 120 || busy == 0 { // 120: DefaultMaxCallsPerVerifier
		t.Fatalf("%d answerer calls for %d sessions of one verifier (%d refused)", n, sessions, busy)
	}
}

// hostileSession runs one three-round session from m as a raw verifier;
// it reports whether the prover refused it at the hello.
func hostileSession(t *testing.T, m, p host.Host, i int) (refused bool) {
	t.Helper()
	r := openRaw(t, m, p.ID())
	defer r.s.Reset()
	r.send(helloFrame(m.ID(), p.ID(), nil))
	f, err := r.recv()
	if err != nil || f.GetHelloAck() == nil {
		return true
	}
	for round := uint32(1); round <= 3; round++ {
		r.send(challengeFrame(round, strings.Repeat(fmt.Sprintf("hostile narrative number %d ", i), 20), "Which?"))
		if f, err := r.recv(); err != nil || f.GetAnswer() == nil {
			return false
		}
	}
	return false
}
