package protocol

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-msgio/pbio"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// ---- a fake verifier: a raw stream from m to the real prover b ----

type rawPeer struct {
	t   testing.TB
	s   network.Stream
	r   pbio.Reader
	max int
}

func openRaw(t testing.TB, m host.Host, p peer.ID) *rawPeer {
	t.Helper()
	s, err := m.NewStream(testCtx(t, 5*time.Second), p, ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Reset() })
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawPeer{t: t, s: s, r: newFrameReader(s, MaxVerifierFrame), max: MaxVerifierFrame}
}

// rawProver makes h answer acaptcha streams with serve, given the raw
// stream and the hello read from it (streams whose hello does not come
// within 10 s are reset).
func rawProver(t testing.TB, h host.Host, serve func(r *rawPeer, hello *pb.Hello)) {
	h.SetStreamHandler(ID, func(s network.Stream) {
		defer s.Reset()
		_ = s.SetDeadline(time.Now().Add(10 * time.Second))
		r := &rawPeer{t: t, s: s, r: newFrameReader(s, MaxVerifierFrame), max: MaxProverFrame}
		f, err := r.recv()
		if err != nil || f.GetHello() == nil {
			return
		}
		serve(r, f.GetHello())
	})
}

func (r *rawPeer) send(f *pb.Frame) {
	r.t.Helper()
	if err := writeFrame(r.s, f, r.max); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawPeer) recv() (*pb.Frame, error) {
	f := new(pb.Frame)
	return f, readFrame(r.r, f)
}

func helloFrame(verifier, prover peer.ID, mutate func(*pb.Hello)) *pb.Frame {
	nonce := make([]byte, NonceBytes)
	rand.Read(nonce)
	h := &pb.Hello{SpecVersion: SpecVersion, VerifierId: []byte(verifier), ProverId: []byte(prover), Nonce: nonce,
		Rounds: 3, TauMs: 15000, TotalMs: 120000, RttCreditMs: 500}
	if mutate != nil {
		mutate(h)
	}
	return &pb.Frame{Body: &pb.Frame_Hello{Hello: h}}
}

func challengeFrame(round uint32, narrative, question string) *pb.Frame {
	return &pb.Frame{Body: &pb.Frame_Challenge{Challenge: &pb.Challenge{Round: round, Rounds: 3, Domain: "d",
		Narrative: narrative, Question: question, BudgetMs: 15000}}}
}

// proverUnderTest is a real prover b and a raw peer m.
func proverUnderTest(t *testing.T, tr string, cfg Config) (m, b host.Host, pr *proved) {
	m, b = newHost(t), newHost(t)
	pr = newProved()
	cfg.OnProved = pr.fn
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = 2 * time.Second
	}
	newService(t, b, cfg)
	connect(t, m, b, tr)
	return m, b, pr
}

func expectReset(t *testing.T, r *rawPeer, code network.StreamErrorCode) {
	t.Helper()
	for {
		f, err := r.recv()
		if err == nil {
			t.Logf("frame before reset: %s", frameKind(f))
			continue
		}
		if got, ok := resetCode(err); !ok || got != code {
			t.Fatalf("read error %v, want a remote reset with code %#x", err, uint32(code))
		}
		return
	}
}

func TestProverRejectsBadInput(t *testing.T) {
	set := testSet("bad-prover")
	p1 := set.Parts[0]
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			cases := []struct {
				name string
				run  func(r *rawPeer, m, b host.Host)
				code network.StreamErrorCode
				err  error
			}{
				{"garbage", func(r *rawPeer, _, _ host.Host) {
					r.s.Write([]byte{0x05, 0xff, 0xff, 0xff, 0xff, 0xff})
				}, ErrCodeProtocolViolation, ErrProtocolViolation},
				{"oversized", func(r *rawPeer, _, _ host.Host) {
					r.s.Write(binary.AppendUvarint(nil, MaxVerifierFrame+1))
					r.s.Write(make([]byte, 1024))
				}, ErrCodeOversized, ErrFrameTooLarge},
				{"bad varint", func(r *rawPeer, _, _ host.Host) {
					r.s.Write([]byte{0x80, 0x00})
				}, ErrCodeProtocolViolation, ErrProtocolViolation},
				{"empty frame", func(r *rawPeer, _, _ host.Host) {
					r.s.Write([]byte{0x00})
				}, ErrCodeProtocolViolation, ErrProtocolViolation},
				{"challenge before hello", func(r *rawPeer, _, _ host.Host) {
					r.send(challengeFrame(1, p1.Narrative, p1.Questions[0].Question))
				}, ErrCodeProtocolViolation, ErrProtocolViolation},
				{"answer after hello", func(r *rawPeer, m, b host.Host) {
					r.send(helloFrame(m.ID(), b.ID(), nil))
					if f, err := r.recv(); err != nil || f.GetHelloAck() == nil {
						t.Fatalf("hello ack: %v %v", f, err)
					}
					r.send(&pb.Frame{Body: &pb.Frame_Answer{Answer: &pb.Answer{Round: 1, Answer: "x"}}})
				}, ErrCodeProtocolViolation, ErrProtocolViolation},
				{"round 2 first", func(r *rawPeer, m, b host.Host) {
					r.send(helloFrame(m.ID(), b.ID(), nil))
					r.recv()
					r.send(challengeFrame(2, p1.Narrative, p1.Questions[0].Question))
				}, ErrCodeProtocolViolation, ErrProtocolViolation},
				{"probe after challenge", func(r *rawPeer, m, b host.Host) {
					r.send(helloFrame(m.ID(), b.ID(), nil))
					r.recv()
					r.send(challengeFrame(1, p1.Narrative, p1.Questions[0].Question))
					if f, err := r.recv(); err != nil || f.GetAnswer() == nil {
						t.Fatalf("answer: %v %v", f, err)
					}
					r.send(&pb.Frame{Body: &pb.Frame_Probe{Probe: &pb.Probe{Seq: 9}}})
				}, ErrCodeProtocolViolation, ErrProtocolViolation},
				{"too many probes", func(r *rawPeer, m, b host.Host) {
					r.send(helloFrame(m.ID(), b.ID(), nil))
					r.recv()
					for i := range MaxProbes + 1 {
						r.send(&pb.Frame{Body: &pb.Frame_Probe{Probe: &pb.Probe{Seq: uint32(i + 1)}}})
					}
				}, ErrCodeProtocolViolation, ErrProtocolViolation},
				{"silent verifier", func(*rawPeer, host.Host, host.Host) {}, ErrCodeTimeout, ErrNetwork},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					m, b, pr := proverUnderTest(t, tr, Config{Prover: constProver("x"), HandshakeTimeout: 300 * time.Millisecond})
					r := openRaw(t, m, b.ID())
					c.run(r, m, b)
					expectReset(t, r, c.code)
					if got := pr.next(t); !errors.Is(got.Err, c.err) {
						t.Fatalf("prover err %v, want %v", got.Err, c.err)
					}
				})
			}
		})
	}
}

func TestProverDeclinesBadHello(t *testing.T) {
	other := newHost(t).ID()
	cases := []struct {
		name   string
		mutate func(h *pb.Hello, m, b peer.ID)
		reason pb.DeclineReason
		code   network.StreamErrorCode
	}{
		{"wrong prover_id", func(h *pb.Hello, _, _ peer.ID) { h.ProverId = []byte(other) }, pb.DeclineReason_DECLINE_REASON_BAD_HELLO, ErrCodeProtocolViolation},
		{"wrong verifier_id", func(h *pb.Hello, _, _ peer.ID) { h.VerifierId = []byte(other) }, pb.DeclineReason_DECLINE_REASON_BAD_HELLO, ErrCodeProtocolViolation},
		{"garbage prover_id", func(h *pb.Hello, _, _ peer.ID) { h.ProverId = []byte("nope") }, pb.DeclineReason_DECLINE_REASON_BAD_HELLO, ErrCodeProtocolViolation},
		{"short nonce", func(h *pb.Hello, _, _ peer.ID) { h.Nonce = h.Nonce[:16] }, pb.DeclineReason_DECLINE_REASON_BAD_HELLO, ErrCodeProtocolViolation},
		{"zero rounds", func(h *pb.Hello, _, _ peer.ID) { h.Rounds = 0 }, pb.DeclineReason_DECLINE_REASON_BAD_HELLO, ErrCodeProtocolViolation},
		{"huge total", func(h *pb.Hello, _, _ peer.ID) { h.TotalMs = 1 << 31 }, pb.DeclineReason_DECLINE_REASON_BAD_HELLO, ErrCodeProtocolViolation},
		{"major version 2", func(h *pb.Hello, _, _ peer.ID) { h.SpecVersion = "2.0.0" }, pb.DeclineReason_DECLINE_REASON_UNSUPPORTED_VERSION, ErrCodeDeclined},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, b, pr := proverUnderTest(t, "tcp", Config{Prover: constProver("x")})
			r := openRaw(t, m, b.ID())
			r.send(helloFrame(m.ID(), b.ID(), func(h *pb.Hello) { c.mutate(h, m.ID(), b.ID()) }))
			f, err := r.recv()
			if err != nil {
				t.Fatal(err)
			}
			if f.GetDecline().GetReason() != c.reason {
				t.Fatalf("got %s %v", frameKind(f), f.GetDecline())
			}
			r.s.CloseWrite() // lets the prover reset at once
			// Then EOF (the prover half-closed after its Decline) or the reset.
			if _, err := r.recv(); !errors.Is(err, io.EOF) {
				if code, ok := resetCode(err); !ok || code != c.code {
					t.Fatalf("after decline: %v", err)
				}
			}
			if got := pr.next(t); !errors.Is(got.Err, ErrBadHello) {
				t.Fatalf("prover err %v", got.Err)
			}
		})
	}
}

// A verifier that disconnects in the middle of a round: the prover
// reports an error and stops its answerer.
func TestProverVerifierDisconnects(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			set := testSet("disc-prover")
			stopped := make(chan struct{})
			m, b, pr := proverUnderTest(t, tr, Config{Prover: skill.ProverFunc(func() skill.Answerer {
				return skill.AnswerFunc(func(ctx context.Context, _ skill.Challenge) (string, error) {
					<-ctx.Done()
					close(stopped)
					return "", ctx.Err()
				})
			})})
			r := openRaw(t, m, b.ID())
			r.send(helloFrame(m.ID(), b.ID(), nil))
			r.recv()
			r.send(challengeFrame(1, set.Parts[0].Narrative, set.Parts[0].Questions[0].Question))
			time.Sleep(50 * time.Millisecond)
			m.Network().ClosePeer(b.ID())
			got := pr.next(t)
			if got.Err == nil || got.Rounds != 0 {
				t.Fatalf("prover result %+v", got)
			}
			select {
			case <-stopped:
			case <-time.After(5 * time.Second):
				t.Fatal("answerer not cancelled")
			}
		})
	}
}

// The prover reads a verdict with a forged attestation and reports it.
func TestProverChecksAttestation(t *testing.T) {
	m, b, pr := proverUnderTest(t, "tcp", Config{Prover: constProver("x")})
	r := openRaw(t, m, b.ID())
	r.send(helloFrame(m.ID(), b.ID(), nil))
	r.recv()
	r.send(&pb.Frame{Body: &pb.Frame_Verdict{Verdict: &pb.Verdict{Accepted: true, Reason: "ok", Attestation: []byte("forged")}}})
	got := pr.next(t)
	if got.Err != nil || !got.Accepted || got.Attestation != nil || got.AttestationErr == nil {
		t.Fatalf("prover result %+v", got)
	}
	// An inconsistent verdict is a protocol error.
	r = openRaw(t, m, b.ID())
	r.send(helloFrame(m.ID(), b.ID(), nil))
	r.recv()
	r.send(&pb.Frame{Body: &pb.Frame_Verdict{Verdict: &pb.Verdict{Accepted: true, Reason: "wrong_answer"}}})
	if got := pr.next(t); !errors.Is(got.Err, ErrProtocolViolation) {
		t.Fatalf("prover result %+v", got)
	}
	// ... and the stream is closed as after any verdict, not reset (§6
	// step 8).
	if _, err := r.recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after an inconsistent verdict: %v, want EOF (a close, no reset)", err)
	}
}

// ---- a fake prover: m handles ID itself; the real verifier a verifies it ----

type fakeProver func(t *testing.T, r *rawPeer, hello *pb.Hello)

func verifierUnderTest(t *testing.T, tr string, cfg Config, fp fakeProver) (*Result, error) {
	t.Helper()
	a, m := newHost(t), newHost(t)
	if cfg.Source == nil {
		cfg.Source = sourceOf("fake-prover-" + tr + "-" + t.Name())
	}
	va := newService(t, a, cfg)
	done := make(chan struct{})
	m.SetStreamHandler(ID, func(s network.Stream) {
		defer close(done)
		defer s.Reset()
		_ = s.SetDeadline(time.Now().Add(15 * time.Second))
		r := &rawPeer{t: t, s: s, r: newFrameReader(s, MaxVerifierFrame), max: 1 << 20}
		f, err := r.recv()
		if err != nil {
			t.Errorf("fake prover: hello: %v", err)
			return
		}
		fp(t, r, f.GetHello())
	})
	connect(t, a, m, tr)
	res, err := va.Verify(testCtx(t, 20*time.Second), m.ID(), false)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("fake prover still running")
	}
	return res, err
}

// ack accepts the hello and pays the proof of work it asks for, as the
// peer the hello names (the stream's listener).
func ack(r *rawPeer, h *pb.Hello) {
	r.t.Helper()
	pid, err := peer.IDFromBytes(h.GetProverId())
	if err != nil {
		r.t.Fatal(err)
	}
	pow, err := SolvePow(context.Background(), h.GetNonce(), pid, int(h.GetPowDifficulty()), MaxPowDifficulty)
	if err != nil {
		r.t.Fatal(err)
	}
	r.send(&pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: h.GetNonce(), Pow: pow}}})
}

// echoProbes answers probes until the first challenge, which it returns.
func echoProbes(t *testing.T, r *rawPeer) *pb.Challenge {
	for {
		f, err := r.recv()
		if err != nil {
			t.Errorf("fake prover: %v", err)
			return nil
		}
		if p := f.GetProbe(); p != nil {
			r.send(&pb.Frame{Body: &pb.Frame_ProbeAck{ProbeAck: &pb.ProbeAck{Seq: p.GetSeq(), Nonce: p.GetNonce()}}})
			continue
		}
		return f.GetChallenge()
	}
}

func drain(r *rawPeer) {
	for {
		if _, err := r.recv(); err != nil {
			return
		}
	}
}

func TestVerifierRejectsBadProvers(t *testing.T) {
	type want struct {
		reason skill.Reason
		detail string // substring
		err    error  // Verify error instead of a verdict
		// shown: a challenge reached the wire, so the set stays used;
		// otherwise it goes back to the source.
		shown bool
		// unpaid: the session ended before a paid hello ack, so no set
		// was drawn at all (spec §5a).
		unpaid bool
	}
	cases := []struct {
		name string
		cfg  Config
		fp   fakeProver
		want want
	}{
		{"garbage", Config{}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			r.s.Write([]byte{0x03, 0xff, 0xff, 0xff})
			drain(r)
		}, want{err: ErrUnpaid, unpaid: true}},
		{"oversized", Config{}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			r.send(&pb.Frame{Body: &pb.Frame_Decline{Decline: &pb.Decline{Detail: strings.Repeat("x", 2*MaxProverFrame)}}})
			drain(r)
		}, want{err: ErrUnpaid, unpaid: true}},
		{"wrong order", Config{}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			r.send(&pb.Frame{Body: &pb.Frame_ProbeAck{ProbeAck: &pb.ProbeAck{Seq: 1}}})
			drain(r)
		}, want{err: ErrUnpaid, unpaid: true}},
		{"bad nonce echo", Config{}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			r.send(&pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: make([]byte, 32)}}})
			drain(r)
		}, want{err: ErrUnpaid, unpaid: true}},
		{"bad probe echo", Config{}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			ack(r, h)
			r.recv()
			r.send(&pb.Frame{Body: &pb.Frame_ProbeAck{ProbeAck: &pb.ProbeAck{Seq: 1, Nonce: []byte("12345678")}}})
			drain(r)
		}, want{reason: skill.ReasonProtocolError, detail: "probe ack"}},
		{"never answers", Config{Policy: fastPolicy(200*time.Millisecond, 2*time.Second)}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			ack(r, h)
			echoProbes(t, r)
			f, err := r.recv() // the verdict
			if err != nil || f.GetVerdict().GetReason() != "timeout" || len(f.GetVerdict().GetAttestation()) == 0 {
				t.Errorf("fake prover: verdict %v %v", f, err)
			}
			r.s.Close()
		}, want{reason: skill.ReasonTimeout, shown: true}},
		{"never closes after verdict", Config{Policy: fastPolicy(200*time.Millisecond, 2*time.Second)}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			ack(r, h)
			echoProbes(t, r)
			drain(r)
		}, want{reason: skill.ReasonTimeout, shown: true}},
		{"disconnects mid-round", Config{}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			ack(r, h)
			echoProbes(t, r)
			r.s.Reset()
		}, want{reason: skill.ReasonProtocolError, detail: "stream failed", shown: true}},
		{"answer over 64 bytes", Config{}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			ack(r, h)
			c := echoProbes(t, r)
			r.send(&pb.Frame{Body: &pb.Frame_Answer{Answer: &pb.Answer{Round: c.GetRound(), Answer: strings.Repeat("A", 200)}}})
			drain(r)
		}, want{reason: skill.ReasonWrongAnswer, detail: "cap", shown: true}},
		{"answer for another round", Config{}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			ack(r, h)
			echoProbes(t, r)
			r.send(&pb.Frame{Body: &pb.Frame_Answer{Answer: &pb.Answer{Round: 2, Answer: "x"}}})
			drain(r)
		}, want{reason: skill.ReasonProtocolError, detail: "round 2", shown: true}},
		{"declines at hello", Config{}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			r.send(declineFrame(pb.DeclineReason_DECLINE_REASON_NO_PROVER, "nope"))
			drain(r)
		}, want{err: ErrDeclined, unpaid: true}},
		{"declines mid-round", Config{}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			ack(r, h)
			echoProbes(t, r)
			r.send(declineFrame(pb.DeclineReason_DECLINE_REASON_REFUSED, "no thanks"))
			drain(r)
		}, want{reason: skill.ReasonDeclined, detail: "no thanks", shown: true}},
		{"busy", Config{}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			r.send(declineFrame(pb.DeclineReason_DECLINE_REASON_BUSY, "later"))
			r.s.ResetWithError(ErrCodeBusy)
		}, want{err: ErrBusy, unpaid: true}},
		{"resets at hello", Config{}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			r.s.Reset()
		}, want{err: ErrNetwork, unpaid: true}},
		// Silence before the first challenge is no session: nothing was
		// revealed, and a saturated peer must not be signed a rejection.
		{"silent at hello", Config{HandshakeTimeout: 300 * time.Millisecond}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			drain(r)
		}, want{err: ErrUnresponsive, unpaid: true}},
		{"silent at probe", Config{ProbeTimeout: 300 * time.Millisecond}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			ack(r, h)
			drain(r)
		}, want{err: ErrUnresponsive}},
	}
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					src := &returningSource{staticSource: sourceOf("fake-prover-" + tr + "-" + t.Name())}
					c.cfg.Source = src
					start := time.Now()
					res, err := verifierUnderTest(t, tr, c.cfg, c.fp)
					if d := time.Since(start); d > 10*time.Second {
						t.Errorf("took %s", d)
					}
					if got := src.returnedCount(); got != map[bool]int{true: 0, false: 1}[c.want.shown || c.want.unpaid] {
						t.Errorf("set given back %d time(s); a challenge was shown: %v, unpaid: %v", got, c.want.shown, c.want.unpaid)
					}
					if c.want.unpaid && src.i != 0 {
						t.Errorf("%d set(s) drawn for a peer that never paid", src.i)
					}
					if c.want.err != nil {
						if !errors.Is(err, c.want.err) {
							t.Fatalf("err %v, want %v", err, c.want.err)
						}
						if res != nil {
							t.Fatalf("a session that never ran returned a result: %+v", res.Verdict)
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					v := res.Verdict
					if v.Accepted || v.Reason != c.want.reason || !strings.Contains(v.Detail, c.want.detail) {
						t.Fatalf("verdict %s %q, want %s containing %q", v.Reason, v.Detail, c.want.reason, c.want.detail)
					}
					if res.Attestation == nil {
						t.Fatal("rejection not attested")
					}
				})
			}
		})
	}
}

// A fake prover that sends a Verdict-sized frame must not make the
// verifier allocate more than its cap: covered by "oversized"; here the
// prover writes a huge length prefix only.
func TestVerifierHugeLengthPrefix(t *testing.T) {
	res, err := verifierUnderTest(t, "tcp", Config{}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
		r.s.Write(binary.AppendUvarint(nil, 1<<62))
		drain(r)
	})
	// Before the paid hello ack: no session, nothing signed.
	if !errors.Is(err, ErrUnpaid) || !errors.Is(err, ErrProtocolViolation) || res != nil {
		t.Fatalf("err %v, result %+v", err, res)
	}
}

// A stream that never opens (the peer does not speak the protocol) runs
// no session; the set drawn for it goes back to the source, and the next
// session gets it.
func TestVerifierGivesBackSetWhenStreamFails(t *testing.T) {
	a, m := newHost(t), newHost(t)
	ledger := skill.NewMemLedger()
	corpus, err := skill.NewCorpus("one", []*skill.Set{testSet("give-back")}, ledger, 1)
	if err != nil {
		t.Fatal(err)
	}
	va := newService(t, a, Config{Source: corpus})
	connect(t, a, m, "tcp")
	if _, err := va.Verify(testCtx(t, 10*time.Second), m.ID(), false); !errors.Is(err, ErrNetwork) {
		t.Fatalf("err %v, want ErrNetwork", err)
	}
	// The one-set corpus still serves it: nothing was used up.
	if set, err := corpus.Next(context.Background()); err != nil || set.ID != testSet("give-back").ID {
		t.Fatalf("set not given back: %v %v", set, err)
	}
}
