package protocol

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// TestSpecReflectionDeclineNeverLost is the shared-corpus case of spec §7
// against a peer M that follows the 1.0.0 text (Decline, then an immediate
// reset): A verifies M; M drew the same challenge and sends it to A as its
// own verifier, so A's prover refuses it (REFLECTION) and marks A's session
// reflected; M, seeing A's challenge is one it issued, declines it with
// REFLECTION and resets at once. A must record declined every time, never
// protocol_error, and M must always read A's own Decline (A's prover
// lingers after an in-session decline).
func TestSpecReflectionDeclineNeverLost(t *testing.T) {
	const runs = 20
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			a := newHost(t)
			src := sourceOf("decline-lost-" + tr)
			va := newService(t, a, Config{Source: src, Prover: oracleProver(0, src.sets...)})
			counts := map[string]int{}
			for i := range runs {
				m := newHost(t)
				mDone := make(chan string, 1)
				m.SetStreamHandler(ID, func(s network.Stream) {
					defer s.Reset()
					_ = s.SetDeadline(time.Now().Add(10 * time.Second))
					in := &rawPeer{t: t, s: s, r: newFrameReader(s, MaxVerifierFrame), max: MaxProverFrame}
					f, err := in.recv()
					if err != nil {
						mDone <- "hello: " + err.Error()
						return
					}
					ack(in, f.GetHello())
					c := echoProbes(t, in)
					if c == nil {
						mDone <- "no challenge"
						return
					}
					// M's own session on A, with the same challenge.
					out := openRaw(t, m, a.ID())
					out.send(helloFrame(m.ID(), a.ID(), nil))
					if f, err := out.recv(); err != nil || f.GetHelloAck() == nil {
						mDone <- "A's hello ack missing"
						return
					}
					out.send(&pb.Frame{Body: &pb.Frame_Challenge{Challenge: c}})
					f, err = out.recv()
					if err != nil || f.GetDecline().GetReason() != pb.DeclineReason_DECLINE_REASON_REFLECTION {
						mDone <- "A's decline lost: " + frameKind(f) + " " + errString(err)
						return
					}
					_ = out.s.CloseWrite()
					// A's session on M is marked reflected by now; M declines
					// A's challenge as its own and resets at once.
					if err := writeFrame(s, declineFrame(pb.DeclineReason_DECLINE_REASON_REFLECTION, "this challenge is one I issued"), MaxProverFrame); err != nil {
						mDone <- "A ended its session before M's decline: " + err.Error()
						return
					}
					_ = s.ResetWithError(ErrCodeReflection)
					mDone <- ""
				})
				connect(t, a, m, tr)
				res, err := va.Verify(testCtx(t, 15*time.Second), m.ID(), false)
				select {
				case msg := <-mDone:
					if msg != "" {
						t.Fatalf("run %d: M: %s", i, msg)
					}
				case <-time.After(15 * time.Second):
					t.Fatalf("run %d: M's handler did not finish", i)
				}
				if err != nil {
					t.Fatalf("run %d: %v", i, err)
				}
				counts[string(res.Verdict.Reason)]++
				if res.Verdict.Reason != skill.ReasonDeclined || res.Attestation == nil || res.Attestation.Reason != skill.ReasonDeclined {
					t.Errorf("run %d: %s (%s), want a signed declined", i, res.Verdict.Reason, res.Verdict.Detail)
				}
				if got := res.Attestation; got != nil && (got.FailedRound != 1 || len(got.Rounds) != 1 || got.Rounds[0].Correct) {
					t.Errorf("run %d: failed_round %d with rounds %+v", i, got.FailedRound, got.Rounds)
				}
				m.Close()
			}
			t.Logf("%s: %v over %d runs", tr, counts, runs)
		})
	}
}

// TestSpecReflectedSilentSubject: a subject that relays the challenge and
// does not decline it ends protocol_error within the reflection grace,
// not at the end of the round's budget.
func TestSpecReflectedSilentSubject(t *testing.T) {
	a, m := newHost(t), newHost(t)
	src := sourceOf("reflected-silent")
	va := newService(t, a, Config{Source: src, Prover: oracleProver(0, src.sets...)})
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
		if c == nil {
			return
		}
		out := openRaw(t, m, a.ID())
		out.send(helloFrame(m.ID(), a.ID(), nil))
		out.recv()
		out.send(&pb.Frame{Body: &pb.Frame_Challenge{Challenge: c}})
		out.recv()
		_ = out.s.CloseWrite()
		drain(in)
	})
	connect(t, a, m, "tcp")
	start := time.Now()
	res, err := va.Verify(testCtx(t, 20*time.Second), m.ID(), false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict.Reason != skill.ReasonProtocolError {
		t.Fatalf("verdict %s (%s), want protocol_error", res.Verdict.Reason, res.Verdict.Detail)
	}
	// The default tau is 15 s: the session must end well before it.
	if d := time.Since(start); d > skill.DefaultTau/2 {
		t.Fatalf("reflected session took %s", d)
	}
	if r := res.Attestation.Rounds; len(r) != 1 || r[0].Effective <= 0 || r[0].Effective > reflectionGrace+2*time.Second {
		t.Fatalf("unanswered round timing %+v: want the time waited", r)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
