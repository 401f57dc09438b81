package protocol

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pprotocol "github.com/libp2p/go-libp2p/core/protocol"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// A hostile prover against the verifier's clock (helper-98's audit):
// what it can do with the RTT probes, the clock points of an answer and
// the chain of rounds. The figures asserted are the verifier's own
// (Result.RTT, Result.Credit, each round's Elapsed and Effective), so
// that a loaded machine only makes them larger.

func probeAckFrame(seq uint32, nonce []byte) *pb.Frame {
	return &pb.Frame{Body: &pb.Frame_ProbeAck{ProbeAck: &pb.ProbeAck{Seq: seq, Nonce: nonce}}}
}

func answerFrame(round uint32, answer string) *pb.Frame {
	return &pb.Frame{Body: &pb.Frame_Answer{Answer: &pb.Answer{Round: round, Answer: answer}}}
}

// Probe acks out of the script: each ends the session protocol_error
// (signed), never in more credit; a duplicated ack that the verifier
// reads in round 1's place still costs the prover the round it saw.
func TestHostileProbeAcks(t *testing.T) {
	type want struct {
		reason skill.Reason
		detail string
		rounds int // round entries: 1 when round 1 was delivered
	}
	cases := []struct {
		name   string
		probes int
		fp     fakeProver
		want   want
	}{
		{"duplicate ack", 1, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			ack(r, h)
			f, _ := r.recv()
			p := f.GetProbe()
			r.send(probeAckFrame(p.GetSeq(), p.GetNonce()))
			r.send(probeAckFrame(p.GetSeq(), p.GetNonce()))
			drain(r)
		}, want{skill.ReasonProtocolError, "expected answer, got probe_ack", 1}},
		{"ack naming the next probe", 1, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			ack(r, h)
			f, _ := r.recv()
			r.send(probeAckFrame(f.GetProbe().GetSeq()+1, f.GetProbe().GetNonce()))
			drain(r)
		}, want{skill.ReasonProtocolError, "does not match", 0}},
		{"ack before the probe", 1, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			ack(r, h)
			r.send(probeAckFrame(1, make([]byte, probeNonceBytes)))
			drain(r)
		}, want{skill.ReasonProtocolError, "does not match", 0}},
		{"first ack repeated, three probes", 3, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			ack(r, h)
			f, _ := r.recv()
			p := f.GetProbe()
			r.send(probeAckFrame(p.GetSeq(), p.GetNonce()))
			r.send(probeAckFrame(p.GetSeq(), p.GetNonce()))
			drain(r)
		}, want{skill.ReasonProtocolError, "does not match", 0}},
	}
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					res, err := verifierUnderTest(t, tr, Config{Probes: c.probes}, c.fp)
					if err != nil {
						t.Fatal(err)
					}
					v := res.Verdict
					if v.Accepted || v.Reason != c.want.reason || !strings.Contains(v.Detail, c.want.detail) || len(v.Rounds) != c.want.rounds || v.FailedRound != 1 {
						t.Fatalf("verdict %s %q, %d rounds, failed round %d; want %s containing %q, %d rounds, failed round 1",
							v.Reason, v.Detail, len(v.Rounds), v.FailedRound, c.want.reason, c.want.detail, c.want.rounds)
					}
					if res.Attestation == nil {
						t.Fatal("not signed")
					}
				})
			}
		})
	}
}

// A prover that holds its probe acks and answers the rounds at once: the
// RTT it makes the verifier measure is whatever it held, the credit is
// exactly the cap (Policy.RTTCredit, 500 ms), and every round's effective
// time is its elapsed time less that cap and no more. Probes answered
// slowly first and fast later buy only the fastest: the minimum.
func TestHeldProbeAcksBuyTheCapOnly(t *testing.T) {
	// Every hold that buys the cap is above it (500 ms) by 100 ms or
	// more, and think is above it too: any such figures assert the same
	// (they were 1.5 s, 1.2/0.8/0.6 s, 1.2 s and 700 ms: 25 s in all).
	const think = 600 * time.Millisecond
	cases := []struct {
		name   string
		probes int
		hold   []time.Duration // per probe seq (1-based); missing: none
		// cap: the credit is the cap; otherwise it is the (small) RTT
		// of an ack not held.
		cap bool
	}{
		{"one probe held 1 s", 1, []time.Duration{time.Second}, true},
		{"three probes held 0.9 s, 0.7 s, 0.6 s", 3, []time.Duration{900 * time.Millisecond, 700 * time.Millisecond, 600 * time.Millisecond}, true},
		{"slow then fast", 3, []time.Duration{800 * time.Millisecond, 300 * time.Millisecond, 0}, false},
	}
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					src := sourceOf("held-probes-" + tr + "-" + c.name)
					answers := oracle(src.sets...)
					var acked []uint32
					res, err := verifierUnderTest(t, tr, Config{Source: src, Probes: c.probes, ProbeTimeout: 3 * time.Second}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
						ack(r, h)
						for range 16 + skill.Parts { // probes, then the rounds
							f, err := r.recv()
							if err != nil {
								return
							}
							switch b := f.GetBody().(type) {
							case *pb.Frame_Probe:
								seq := b.Probe.GetSeq()
								if int(seq) <= len(c.hold) {
									time.Sleep(c.hold[seq-1])
								}
								acked = append(acked, seq)
								r.send(probeAckFrame(seq, b.Probe.GetNonce()))
							case *pb.Frame_Challenge:
								time.Sleep(think)
								r.send(answerFrame(b.Challenge.GetRound(), answers[b.Challenge.GetQuestion()]))
							default:
								r.s.Close()
								drain(r)
								return
							}
						}
					})
					if err != nil {
						t.Fatal(err)
					}
					v := res.Verdict
					if !v.Accepted || len(v.Rounds) != skill.Parts {
						t.Fatalf("verdict %+v", v)
					}
					if len(acked) != c.probes {
						t.Fatalf("probes acked %v, want %d", acked, c.probes)
					}
					capC := skill.DefaultRTTCredit
					switch {
					case c.cap && (res.RTT < c.hold[len(c.hold)-1] || res.Credit != capC):
						t.Fatalf("rtt %s credit %s: want rtt at least the shortest hold %s and credit exactly %s", res.RTT, res.Credit, c.hold[len(c.hold)-1], capC)
					case !c.cap && (res.Credit != res.RTT || res.RTT >= capC):
						t.Fatalf("rtt %s credit %s: want the minimum (the ack not held), under the cap", res.RTT, res.Credit)
					}
					for _, rd := range v.Rounds {
						// The verifier's own figures: effective is elapsed
						// less the credit, the credit at most the cap.
						// The round's clock starts when the challenge's
						// write returned, which on a loaded machine can be
						// after the prover read it: elapsed falls short of
						// think by that lag (seen: 3-41 ms with a busy
						// loop beside -race, where elapsed >= think
						// failed), and an elapsed without the think would
						// be a few ms.
						const writeLag = 100 * time.Millisecond
						if rd.Effective != max(rd.Elapsed-res.Credit, 0) || rd.Elapsed-rd.Effective > capC || rd.Elapsed < think-writeLag {
							t.Errorf("round %d: elapsed %s effective %s credit %s; want effective = elapsed - credit, at most %s below it, elapsed at least %s",
								rd.Round, rd.Elapsed, rd.Effective, res.Credit, capC, think-writeLag)
						}
					}
				})
			}
		})
	}
}

// The round's clock stops when the whole answer frame was read, not its
// first byte: a prover that sends the frame's prefix and half of it at
// once and the rest later is timed to the last byte, and one whose last
// byte comes after the deadline has given no answer (timeout).
func TestAnswerTimedAtItsLastByte(t *testing.T) {
	const late = 800 * time.Millisecond
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			for _, tail := range []time.Duration{late, 2 * time.Second} {
				src := sourceOf("answer-pieces-" + tr + tail.String())
				answers := oracle(src.sets...)
				p := fastPolicy(time.Second, 30*time.Second)
				p.Rounds = 1
				res, err := verifierUnderTest(t, tr, Config{Source: src, Policy: p}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
					ack(r, h)
					c := echoProbes(t, r)
					if c == nil {
						return
					}
					b, err := appendFrame(nil, answerFrame(c.GetRound(), answers[c.GetQuestion()]), MaxProverFrame)
					if err != nil {
						t.Error(err)
						return
					}
					if _, err := r.s.Write(b[:len(b)/2]); err != nil {
						t.Error(err)
						return
					}
					time.Sleep(tail)
					_, _ = r.s.Write(b[len(b)/2:])
					drain(r)
				})
				if err != nil {
					t.Fatal(err)
				}
				v := res.Verdict
				if len(v.Rounds) != 1 {
					t.Fatalf("tail after %s: verdict %+v", tail, v)
				}
				rd := v.Rounds[0]
				t.Logf("tail after %s: %s, elapsed %s, effective %s", tail, v.Reason, rd.Elapsed, rd.Effective)
				switch {
				case rd.Elapsed < min(tail, p.Tau+res.Credit+answerGrace):
					t.Errorf("tail after %s: elapsed %s, timed before the last byte", tail, rd.Elapsed)
				case tail == late && (!v.Accepted || !rd.Answered):
					t.Errorf("tail after %s: %s, want accepted (in time)", tail, v.Reason)
				case tail > p.Tau+time.Second && (v.Reason != skill.ReasonTimeout || rd.Answered):
					t.Errorf("tail after %s: %s, answered %v; want timeout, unanswered (only the first half was in time)", tail, v.Reason, rd.Answered)
				}
			}
		})
	}
}

// Chaining: round 2 is written only after round 1 passed. A prover whose
// round-1 answer is wrong, or right but late (read within the grace, or
// not at all), reads the Verdict next, never the second part; the
// Verdict carries neither the expected answer nor any later part.
func TestFailedRoundOneRevealsNoMore(t *testing.T) {
	p := fastPolicy(300*time.Millisecond, 30*time.Second)
	cases := []struct {
		name   string
		delay  time.Duration
		wrong  bool
		reason skill.Reason
	}{
		{"wrong at once", 0, true, skill.ReasonWrongAnswer},
		{"right within the grace", p.Tau + 120*time.Millisecond, false, skill.ReasonTimeout},
		{"right after the grace", p.Tau + time.Second, false, skill.ReasonTimeout},
	}
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					src := sourceOf("chain-" + tr + "-" + c.name)
					set := src.sets[0]
					answers := oracle(set)
					var next *pb.Frame
					res, err := verifierUnderTest(t, tr, Config{Source: src, Policy: p}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
						ack(r, h)
						ch := echoProbes(t, r)
						if ch == nil {
							return
						}
						time.Sleep(c.delay)
						ans := answers[ch.GetQuestion()]
						if c.wrong {
							ans = "not it"
						}
						r.send(answerFrame(1, ans))
						f, err := r.recv()
						if err != nil {
							t.Errorf("after round 1: %v", err)
							return
						}
						next = f
						drain(r)
					})
					if err != nil {
						t.Fatal(err)
					}
					v := res.Verdict
					if v.Accepted || v.Reason != c.reason || v.FailedRound != 1 || len(v.Rounds) != 1 {
						t.Fatalf("verdict %s failed round %d, %d rounds; want %s in round 1", v.Reason, v.FailedRound, len(v.Rounds), c.reason)
					}
					if next.GetVerdict() == nil {
						t.Fatalf("after a failed round 1 the prover read %s, want the verdict", frameKind(next))
					}
					raw, err := appendFrame(nil, next, MaxVerifierFrame)
					if err != nil {
						t.Fatal(err)
					}
					for i, part := range set.Parts[1:] {
						if bytes.Contains(raw, []byte(part.Narrative[:64])) {
							t.Errorf("the verdict carries part %d's narrative", i+2)
						}
					}
					for _, q := range set.Parts[0].Questions {
						if len(q.Answer) >= 6 && bytes.Contains(raw, []byte(q.Answer)) {
							t.Errorf("the verdict carries round 1's expected answer %q", q.Answer)
						}
					}
				})
			}
		})
	}
}

// headHoldingHost is a's host whose streams write a frame over 1 KiB (a
// challenge) as a QUIC write that a prover holds by its flow-control
// credit: all but the last tail bytes at once (the narrative and the
// question reach the prover), the tail after hold. The Write returns
// once the tail went.
type headHoldingHost struct {
	host.Host
	hold time.Duration
	tail int
	// heads records when each head was written (the prover has the text
	// one way later).
	heads *[]time.Time
}

func (h headHoldingHost) NewStream(ctx context.Context, p peer.ID, pids ...libp2pprotocol.ID) (network.Stream, error) {
	s, err := h.Host.NewStream(ctx, p, pids...)
	if err != nil {
		return nil, err
	}
	return headHoldingStream{Stream: s, h: h}, nil
}

type headHoldingStream struct {
	network.Stream
	h headHoldingHost
}

func (s headHoldingStream) Write(b []byte) (int, error) {
	if len(b) <= 1<<10 {
		return s.Stream.Write(b)
	}
	n, err := s.Stream.Write(b[:len(b)-s.h.tail])
	if err != nil {
		return n, err
	}
	*s.h.heads = append(*s.h.heads, time.Now())
	time.Sleep(s.h.hold)
	m, err := s.Stream.Write(b[len(b)-s.h.tail:])
	return n + m, err
}

// The most a prover gains per round on the verifier's clock, both ways
// at once (spec §10): it holds its probe acks (the credit: at most
// rtt_credit, 500 ms) and, over QUIC, holds the challenge's write open
// by its flow-control credit with all but the frame's last bytes in
// hand (at most maxChallengeWrite, 1 s, is not charged). In virtual
// time: the prover has each question 3 s before its answer leaves, and
// the verifier records an effective time 1.5 s less the real round trip
// (80 ms) below that, never more.
func TestSimHeldWriteAndProbeAcksBound(t *testing.T) {
	const (
		hold  = 3 * time.Second
		delay = 2 * time.Second
	)
	simPair(t, func(t *testing.T, a, b host.Host) {
		src := sourceOf("sim-held-both")
		answers := oracle(src.sets...)
		var heads []time.Time
		va, err := NewService(headHoldingHost{Host: a, hold: hold, tail: 3, heads: &heads}, Config{Source: src, ProbeTimeout: 10 * time.Second, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		defer va.Close()
		done := rawTimedProver(t, b, answers, func(uint32) { time.Sleep(delay) }, 0)
		res, err := va.Verify(context.Background(), b.ID(), false)
		<-done
		if err != nil {
			t.Fatal(err)
		}
		v := res.Verdict
		if !v.Accepted || len(v.Rounds) != skill.Parts || len(heads) != skill.Parts {
			t.Fatalf("verdict %+v, %d heads", v, len(heads))
		}
		bound := skill.DefaultRTTCredit + maxChallengeWrite
		for _, r := range v.Rounds {
			// The prover had the question from one way after the head
			// was written and answered as the tail came, hold later.
			had := hold
			gain := had - r.Effective
			t.Logf("round %d: question in hand %s, elapsed %s, effective %s: gain %s", r.Round, had, r.Elapsed, r.Effective, gain)
			if gain > bound || gain < bound-2*simOneWay-5*time.Millisecond {
				t.Errorf("round %d: gain %s, want at most %s (rtt_credit + the uncharged write), about %s", r.Round, gain, bound, bound-2*simOneWay)
			}
		}
	})
}
