package protocol

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

func TestVerifyAccepted(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			a, b := newHost(t), newHost(t)
			src := sourceOf("accept-" + tr)
			va := newService(t, a, Config{Source: src})
			pr := newProved()
			newService(t, b, Config{Prover: oracleProver(0, src.sets...), OnProved: pr.fn})
			connect(t, a, b, tr)

			res, err := va.Verify(testCtx(t, 20*time.Second), b.ID(), false)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Verdict.Accepted || res.Verdict.Reason != skill.ReasonOK {
				t.Fatalf("verdict %+v", res.Verdict)
			}
			if len(res.Verdict.Rounds) != 3 {
				t.Fatalf("%d rounds", len(res.Verdict.Rounds))
			}
			if res.Credit > skill.DefaultRTTCredit || res.Credit != min(res.RTT, skill.DefaultRTTCredit) {
				t.Fatalf("rtt %s credit %s", res.RTT, res.Credit)
			}
			if res.Attestation == nil || len(res.Envelope) == 0 {
				t.Fatal("no attestation")
			}
			att, _, err := VerifyAttestation(res.Envelope, VerifyOptions{Subject: b.ID(), Issuer: a.ID()})
			if err != nil {
				t.Fatal(err)
			}
			if !att.Accepted || string(att.Nonce) != string(res.Nonce) {
				t.Fatalf("attestation %+v", att)
			}

			got := pr.next(t)
			if got.Err != nil || !got.Accepted || got.Reason != skill.ReasonOK || got.Rounds != 3 || got.Verifier != a.ID() {
				t.Fatalf("prover result %+v", got)
			}
			if got.Attestation == nil || got.AttestationErr != nil {
				t.Fatalf("prover attestation %v: %v", got.Attestation, got.AttestationErr)
			}
		})
	}
}

func TestVerifySlowAnswerer(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			a, b := newHost(t), newHost(t)
			src := sourceOf("slow-" + tr)
			va := newService(t, a, Config{Source: src, Policy: fastPolicy(200*time.Millisecond, 2*time.Second)})
			pr := newProved()
			newService(t, b, Config{Prover: oracleProver(time.Second, src.sets...), OnProved: pr.fn})
			connect(t, a, b, tr)

			start := time.Now()
			res, err := va.Verify(testCtx(t, 20*time.Second), b.ID(), false)
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict.Accepted || res.Verdict.Reason != skill.ReasonTimeout || res.Verdict.FailedRound != 1 {
				t.Fatalf("verdict %+v", res.Verdict)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("Verify took %s", d)
			}
			if _, _, err := VerifyAttestation(res.Envelope, VerifyOptions{Subject: b.ID(), Issuer: a.ID()}); err != nil {
				t.Fatal(err)
			}
			got := pr.next(t)
			if got.Err != nil || got.Reason != skill.ReasonTimeout {
				t.Fatalf("prover result %+v", got)
			}
			if got.Attestation == nil {
				t.Fatalf("prover did not get the attestation: %v", got.AttestationErr)
			}
		})
	}
}

// An answerer that ignores its context and answers late: the late answer
// is judged (or drained), never accepted.
func TestVerifyLateAnswerIgnoringContext(t *testing.T) {
	a, b := newHost(t), newHost(t)
	src := sourceOf("late")
	answers := oracle(src.sets...)
	va := newService(t, a, Config{Source: src, Policy: fastPolicy(200*time.Millisecond, 2*time.Second)})
	pr := newProved()
	newService(t, b, Config{OnProved: pr.fn, Prover: skill.ProverFunc(func() skill.Answerer {
		return skill.AnswerFunc(func(_ context.Context, c skill.Challenge) (string, error) {
			time.Sleep(400 * time.Millisecond)
			return answers[c.Question], nil
		})
	})})
	connect(t, a, b, "tcp")
	res, err := va.Verify(testCtx(t, 20*time.Second), b.ID(), false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict.Reason != skill.ReasonTimeout {
		t.Fatalf("verdict %+v", res.Verdict)
	}
	if got := pr.next(t); got.Reason != skill.ReasonTimeout {
		t.Fatalf("prover result %+v", got)
	}
}

func TestVerifyWrongAnswer(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			a, b := newHost(t), newHost(t)
			va := newService(t, a, Config{Source: sourceOf("wrong-" + tr)})
			pr := newProved()
			newService(t, b, Config{Prover: constProver("definitely not it"), OnProved: pr.fn})
			connect(t, a, b, tr)
			res, err := va.Verify(testCtx(t, 20*time.Second), b.ID(), false)
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict.Accepted || res.Verdict.Reason != skill.ReasonWrongAnswer || res.Verdict.FailedRound != 1 || len(res.Verdict.Rounds) != 1 {
				t.Fatalf("verdict %+v", res.Verdict)
			}
			if got := pr.next(t); got.Reason != skill.ReasonWrongAnswer || got.Attestation == nil || got.Rounds != 1 {
				t.Fatalf("prover result %+v", got)
			}
		})
	}
}

func TestVerifyNoProver(t *testing.T) {
	a, b := newHost(t), newHost(t)
	va := newService(t, a, Config{Source: sourceOf("noprover")})
	pr := newProved()
	newService(t, b, Config{OnProved: pr.fn})
	connect(t, a, b, "tcp")
	// A decline at the hello comes before any payment: no set is drawn
	// and nothing is signed (spec §5a).
	res, err := va.Verify(testCtx(t, 10*time.Second), b.ID(), false)
	if !errors.Is(err, ErrDeclined) || res != nil {
		t.Fatalf("err %v, result %+v; want ErrDeclined and no session", err, res)
	}
	if got := pr.next(t); !errors.Is(got.Err, ErrNoProver) {
		t.Fatalf("prover result %+v", got)
	}
}

func TestVerifyNoSource(t *testing.T) {
	a := newHost(t)
	va := newService(t, a, Config{})
	if _, err := va.Verify(context.Background(), "whoever", false); !errors.Is(err, ErrNoSource) {
		t.Fatalf("err %v", err)
	}
}

func TestVerifyUnsupportedPeer(t *testing.T) {
	a, b := newHost(t), newHost(t)
	va := newService(t, a, Config{Source: sourceOf("unsupported")})
	connect(t, a, b, "tcp")
	_, err := va.Verify(testCtx(t, 10*time.Second), b.ID(), false)
	if !errors.Is(err, ErrNetwork) {
		t.Fatalf("err %v", err)
	}
}

func TestVerifySourceFailureIsInconclusive(t *testing.T) {
	a, b := newHost(t), newHost(t)
	src := &staticSource{err: skill.ErrExhausted}
	va := newService(t, a, Config{Source: src})
	pr := newProved()
	newService(t, b, Config{Prover: constProver("x"), OnProved: pr.fn})
	connect(t, a, b, "tcp")
	res, err := va.Verify(testCtx(t, 10*time.Second), b.ID(), false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict.Reason != skill.ReasonInconclusive || res.Attestation != nil || res.Envelope != nil {
		t.Fatalf("result %+v", res)
	}
	got := pr.next(t)
	if got.Err != nil || got.Reason != skill.ReasonInconclusive || got.Envelope != nil || got.AttestationErr != nil {
		t.Fatalf("prover result %+v", got)
	}
}

func TestVerifyCancelMidRound(t *testing.T) {
	a, b := newHost(t), newHost(t)
	src := sourceOf("cancel")
	va := newService(t, a, Config{Source: src})
	pr := newProved()
	started := make(chan struct{})
	var once sync.Once
	newService(t, b, Config{OnProved: pr.fn, Prover: skill.ProverFunc(func() skill.Answerer {
		return skill.AnswerFunc(func(ctx context.Context, _ skill.Challenge) (string, error) {
			once.Do(func() { close(started) })
			<-ctx.Done()
			return "", ctx.Err()
		})
	})})
	connect(t, a, b, "tcp")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	res, err := va.Verify(ctx, b.ID(), false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict.Reason != skill.ReasonInconclusive || res.Attestation != nil {
		t.Fatalf("verdict %+v", res.Verdict)
	}
	if got := pr.next(t); got.Err == nil {
		t.Fatalf("prover result %+v", got)
	}
}

// Both directions at once on one connection, and the reciprocal hello
// that asks the prover to verify back.
func TestMutual(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			a, b := newHost(t), newHost(t)
			srcA, srcB := sourceOf("mutual-a-"+tr), sourceOf("mutual-b-"+tr)
			va := newService(t, a, Config{Source: srcA, Prover: oracleProver(0, srcB.sets...)})
			vb := newService(t, b, Config{Source: srcB, Prover: oracleProver(0, srcA.sets...)})
			connect(t, a, b, tr)
			var wg sync.WaitGroup
			results := make([]*Result, 2)
			errs := make([]error, 2)
			for i, pair := range []struct {
				s *Service
				p peer.ID
			}{{va, b.ID()}, {vb, a.ID()}} {
				wg.Go(func() { results[i], errs[i] = pair.s.Verify(testCtx(t, 20*time.Second), pair.p, false) })
			}
			wg.Wait()
			for i := range results {
				if errs[i] != nil {
					t.Fatal(errs[i])
				}
				if !results[i].Verdict.Accepted {
					t.Fatalf("direction %d: %+v", i, results[i].Verdict)
				}
			}
			if n := len(a.Network().ConnsToPeer(b.ID())); n != 1 {
				t.Fatalf("%d connections", n)
			}
		})
	}
}

func TestReciprocal(t *testing.T) {
	a, b := newHost(t), newHost(t)
	srcA, srcB := sourceOf("recip-a"), sourceOf("recip-b")
	va := newService(t, a, Config{Source: srcA, Prover: oracleProver(0, srcB.sets...)})
	back := make(chan *Result, 1)
	var vb *Service
	vb = newService(t, b, Config{Source: srcB, Prover: oracleProver(0, srcA.sets...), OnReciprocal: func(p peer.ID, drawsLeft bool) pb.Reciprocal {
		if !drawsLeft {
			t.Error("OnReciprocal: no draws left for a fresh peer")
		}
		go func() {
			r, err := vb.Verify(context.Background(), p, false)
			if err != nil {
				t.Error(err)
			}
			back <- r
		}()
		return pb.Reciprocal_RECIPROCAL_WILL
	}})
	connect(t, a, b, "tcp")
	res, err := va.Verify(testCtx(t, 20*time.Second), b.ID(), true)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verdict.Accepted {
		t.Fatalf("a->b %+v", res.Verdict)
	}
	if res.Reciprocal != pb.Reciprocal_RECIPROCAL_WILL {
		t.Errorf("the ack answered the reciprocal request %v, want WILL", res.Reciprocal)
	}
	select {
	case r := <-back:
		if r == nil || !r.Verdict.Accepted || r.Peer != a.ID() {
			t.Fatalf("b->a %+v", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no reciprocal verification")
	}
}

// The HelloAck carries the prover's answer to a reciprocal request (spec
// §1a): what its hook answers, told whether the verifier has draws left
// (false once its share is spent), NOT_OFFERED without a hook,
// UNSPECIFIED when not asked, and a value the verifier does not know
// reads as UNSPECIFIED.
func TestReciprocalAnswer(t *testing.T) {
	answer := func(r pb.Reciprocal) func(*testing.T, peer.ID, bool) pb.Reciprocal {
		return func(t *testing.T, _ peer.ID, drawsLeft bool) pb.Reciprocal {
			if !drawsLeft {
				t.Error("hook told no draws are left for a fresh peer")
			}
			return r
		}
	}
	for _, tc := range []struct {
		name   string
		hook   func(*testing.T, peer.ID, bool) pb.Reciprocal
		noHook bool
		limits func(*Config)
		ask    bool
		want   pb.Reciprocal
	}{
		{name: "attested", hook: answer(pb.Reciprocal_RECIPROCAL_ATTESTED), ask: true, want: pb.Reciprocal_RECIPROCAL_ATTESTED},
		{name: "admitted", hook: answer(pb.Reciprocal_RECIPROCAL_ADMITTED), ask: true, want: pb.Reciprocal_RECIPROCAL_ADMITTED},
		{name: "no-hook", noHook: true, ask: true, want: pb.Reciprocal_RECIPROCAL_NOT_OFFERED},
		{name: "not-asked", hook: func(t *testing.T, _ peer.ID, _ bool) pb.Reciprocal {
			t.Error("hook called without a request")
			return pb.Reciprocal_RECIPROCAL_WILL
		}, want: pb.Reciprocal_RECIPROCAL_UNSPECIFIED},
		{name: "unknown-value", hook: answer(99), ask: true, want: pb.Reciprocal_RECIPROCAL_UNSPECIFIED},
		{name: "share-spent", hook: func(t *testing.T, _ peer.ID, drawsLeft bool) pb.Reciprocal {
			if drawsLeft {
				t.Error("hook told draws are left with the share spent")
				return pb.Reciprocal_RECIPROCAL_WILL
			}
			return pb.Reciprocal_RECIPROCAL_BUSY
		}, ask: true, limits: func(c *Config) { c.MaxDrawsPerPeer = 1 }, want: pb.Reciprocal_RECIPROCAL_BUSY},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newHost(t), newHost(t)
			srcA, srcB := sourceOf("answer-a-"+tc.name), sourceOf("answer-b-"+tc.name)
			va := newService(t, a, Config{Source: srcA, Prover: oracleProver(0, srcB.sets...)})
			cfg := Config{Source: srcB, Prover: oracleProver(0, srcA.sets...)}
			if !tc.noHook {
				cfg.OnReciprocal = func(p peer.ID, drawsLeft bool) pb.Reciprocal { return tc.hook(t, p, drawsLeft) }
			}
			if tc.limits != nil {
				tc.limits(&cfg)
			}
			vb := newService(t, b, cfg)
			connect(t, a, b, "tcp")
			if tc.limits != nil {
				// Spend a's one draw at b: b verifies a once.
				if _, err := vb.Verify(testCtx(t, 20*time.Second), a.ID(), false); err != nil {
					t.Fatal(err)
				}
			}
			res, err := va.Verify(testCtx(t, 20*time.Second), b.ID(), tc.ask)
			if err != nil {
				t.Fatal(err)
			}
			if res.Reciprocal != tc.want {
				t.Fatalf("reciprocal answer %v, want %v", res.Reciprocal, tc.want)
			}
			if why, dropped := ReciprocalDropped(res.Reciprocal); dropped != (tc.want > pb.Reciprocal_RECIPROCAL_WILL) || dropped && why == "" {
				t.Errorf("ReciprocalDropped(%v) = %q, %v", res.Reciprocal, why, dropped)
			}
		})
	}
}

func TestBusy(t *testing.T) {
	a, b := newHost(t), newHost(t)
	src := sourceOf("busy-1", "busy-2")
	va := newService(t, a, Config{Source: src})
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	pr := newProved()
	newService(t, b, Config{MaxInboundPerPeer: 1, OnProved: pr.fn, Prover: skill.ProverFunc(func() skill.Answerer {
		return skill.AnswerFunc(func(ctx context.Context, _ skill.Challenge) (string, error) {
			entered <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return "", skill.ErrDeclined
		})
	})})
	connect(t, a, b, "tcp")
	first := make(chan *Result, 1)
	go func() {
		r, err := va.Verify(testCtx(t, 20*time.Second), b.ID(), false)
		if err != nil {
			t.Error(err)
		}
		first <- r
	}()
	<-entered
	_, err := va.Verify(testCtx(t, 10*time.Second), b.ID(), false)
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("second session: %v", err)
	}
	if got := pr.next(t); !errors.Is(got.Err, ErrBusy) {
		t.Fatalf("prover result %+v", got)
	}
	close(release)
	r := <-first
	if r == nil || r.Verdict.Reason != skill.ReasonDeclined {
		t.Fatalf("first session %+v", r)
	}
	if got := pr.next(t); got.Reason != skill.ReasonDeclined || got.Err != nil {
		t.Fatalf("prover result %+v", got)
	}
}

func TestCloseAbortsSessions(t *testing.T) {
	a, b := newHost(t), newHost(t)
	src := sourceOf("close")
	va := newService(t, a, Config{Source: src})
	entered := make(chan struct{}, 1)
	sb := newService(t, b, Config{Prover: skill.ProverFunc(func() skill.Answerer {
		return skill.AnswerFunc(func(ctx context.Context, _ skill.Challenge) (string, error) {
			entered <- struct{}{}
			<-ctx.Done()
			return "", ctx.Err()
		})
	})})
	connect(t, a, b, "tcp")
	done := make(chan *Result, 1)
	go func() {
		r, _ := va.Verify(testCtx(t, 20*time.Second), b.ID(), false)
		done <- r
	}()
	<-entered
	closed := make(chan struct{})
	go func() { sb.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	r := <-done
	if r == nil || r.Verdict.Accepted || r.Verdict.Reason != skill.ReasonProtocolError {
		t.Fatalf("result %+v", r)
	}
	va.Close()
	if _, err := va.Verify(context.Background(), b.ID(), false); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
}

func TestNewServiceRejectsBadConfig(t *testing.T) {
	h := newHost(t)
	bad := []Config{
		{Policy: skill.Policy{Rounds: 5}},
		{Probes: MaxProbes + 1},
		{HandshakeTimeout: -1},
		{Policy: fastPolicy(time.Second, 2*MaxTotal)},
	}
	for i, cfg := range bad {
		if s, err := NewService(h, cfg); err == nil {
			s.Close()
			t.Errorf("config %d accepted", i)
		}
	}
}

// The HelloAck is due within the handshake timeout of reading the hello,
// the reciprocal decision included (spec §5a): a prover whose hook
// overruns declines BUSY rather than ack after the verifier's wait.
func TestHelloAckDueWithinHandshake(t *testing.T) {
	a, b := newHost(t), newHost(t)
	srcA, srcB := sourceOf("late-ack-a"), sourceOf("late-ack-b")
	va := newService(t, a, Config{Source: srcA})
	newService(t, b, Config{Source: srcB, Prover: oracleProver(0, srcA.sets...), HandshakeTimeout: 300 * time.Millisecond,
		OnReciprocal: func(peer.ID, bool) pb.Reciprocal {
			time.Sleep(400 * time.Millisecond)
			return pb.Reciprocal_RECIPROCAL_NOT_OFFERED
		}})
	connect(t, a, b, "tcp")
	if _, err := va.Verify(testCtx(t, 20*time.Second), b.ID(), true); !errors.Is(err, ErrBusy) {
		t.Fatalf("verify with the ack overdue: %v, want ErrBusy", err)
	}
}

// stallSource never has a set: it waits for its context.
type stallSource struct{}

func (stallSource) Next(ctx context.Context) (*skill.Set, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (stallSource) Name() string { return "stall" }

// A verifier's wait for its source ends in time for the prover's wait for
// the first frame after the ack, min(45 s, total_ms + 10 s) (spec §5
// step 1): the session ends inconclusive, told to the prover, instead of
// the prover resetting for a timeout (the source's own timeout is 30 s).
func TestSourceWaitWithinProverWait(t *testing.T) {
	t.Parallel()
	a, b := newHost(t), newHost(t)
	p := skill.DefaultPolicy()
	p.Tau, p.Total = time.Second, 3*time.Second
	va := newService(t, a, Config{Source: stallSource{}, Policy: p})
	pr := newProved()
	newService(t, b, Config{Prover: constProver("x"), OnProved: pr.fn})
	connect(t, a, b, "tcp")
	res, err := va.Verify(testCtx(t, 40*time.Second), b.ID(), false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict.Reason != skill.ReasonInconclusive || res.Attestation != nil {
		t.Fatalf("result %+v", res.Verdict)
	}
	if got := pr.next(t); got.Err != nil || got.Reason != skill.ReasonInconclusive {
		t.Fatalf("prover result %+v", got)
	}
}

// downProver is a prover whose answerer is known to be unreachable
// (skill.GuardedProver's Unavailable).
type downProver struct{ skill.Prover }

func (downProver) Unavailable() error { return errors.New("connection refused") }

// A prover whose answerer is known down declines at the hello, BUSY:
// the verifier draws nothing and signs nothing (spec §6 step 2), where
// accepting would have got it signed declined.
func TestVerifyAnswererDown(t *testing.T) {
	a, b := newHost(t), newHost(t)
	va := newService(t, a, Config{Source: sourceOf("down")})
	pr := newProved()
	answered := skill.ProverFunc(func() skill.Answerer {
		return skill.AnswerFunc(func(context.Context, skill.Challenge) (string, error) { return "x", nil })
	})
	newService(t, b, Config{OnProved: pr.fn, Prover: downProver{answered}})
	connect(t, a, b, "tcp")
	res, err := va.Verify(testCtx(t, 10*time.Second), b.ID(), false)
	if !errors.Is(err, ErrBusy) || res != nil {
		t.Fatalf("err %v, result %+v; want BUSY and no session", err, res)
	}
	if !strings.Contains(err.Error(), "answerer unavailable") || strings.Contains(err.Error(), "connection refused") {
		t.Errorf("decline %q: want the reason without the local cause", err)
	}
	if strings.Count(err.Error(), ErrBusy.Error()) != 1 || !strings.HasSuffix(err.Error(), ": answerer unavailable") {
		t.Errorf("decline %q: want the detail `answerer unavailable` once after the sentinel", err)
	}
	if got := pr.next(t); !errors.Is(got.Err, ErrBusy) {
		t.Fatalf("prover result %+v", got)
	}
	if u := va.PeerUsage(b.ID()); u.Drawn != 0 {
		t.Fatalf("%d sets drawn for a prover that declined at the hello", u.Drawn)
	}
}

// TestProvingUntilReported: a prover session counts for Proving until its
// result is reported (OnProved returned), not only while it holds its
// inbound slot. The slot was freed first, so a node waiting for the
// verifier's verdict (peer.Node.Attest) could see no session running
// and give up while the verdict was being checked and stored (CI, on a
// loaded machine: "peer did not verify us within 2.372s").
func TestProvingUntilReported(t *testing.T) {
	a, b := newHost(t), newHost(t)
	src := sourceOf("proving-until-reported")
	va := newService(t, a, Config{Source: src})
	var svcB *Service
	seen := make(chan bool, 1)
	svcB = newService(t, b, Config{Prover: oracleProver(0, src.sets...), OnProved: func(r ProverResult) {
		seen <- svcB.Proving(r.Verifier)
	}})
	connect(t, a, b, "tcp")
	res, err := va.Verify(testCtx(t, 10*time.Second), b.ID(), false)
	if err != nil || !res.Verdict.Accepted {
		t.Fatalf("verify: %v %+v", err, res)
	}
	select {
	case during := <-seen:
		if !during {
			t.Fatal("Proving was false while the session's result was being reported")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no prover result")
	}
	for deadline := time.Now().Add(5 * time.Second); svcB.Proving(a.ID()); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Proving still true 5 s after the report")
		}
	}
}
