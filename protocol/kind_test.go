package protocol

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// wireKind is a test-only second kind: short puzzles with one-word
// answers, a human model of two minutes per round, a case-sensitive judge.
const wireKind = "glyph-wire"

func init() {
	if err := skill.RegisterKind(skill.Kind{
		Name:         wireKind,
		LowerBound:   func(skill.Policy, *skill.Part, *skill.Question) time.Duration { return 2 * time.Minute },
		Judge:        func(q *skill.Question, a string, _ []string) bool { return a == q.Answer },
		SolverPrompt: "GLYPH: one lower-case word.",
	}); err != nil {
		panic(err)
	}
}

func wireKindSet(seed string) *skill.Set {
	part := func(text, answer string) skill.Part {
		return skill.Part{Narrative: text + " [" + seed + "]", Questions: []skill.Question{{Question: "Which word? [" + text + "]", Answer: answer}}}
	}
	s := &skill.Set{Kind: wireKind, Domain: "wordplay", Parts: []skill.Part{
		part("sun + flower", "sunflower"), part("rain + bow", "rainbow"), part("star + fish", "starfish"),
	}}
	s.ID = s.ContentID()
	return s
}

// kindRecorder answers from an oracle and records the kinds it was asked.
type kindRecorder struct {
	answers map[string]string
	refuse  string // a kind AnswersKind says no to

	mu    sync.Mutex
	kinds []string
}

func (k *kindRecorder) NewSession() skill.Answerer { return k }

func (k *kindRecorder) AnswersKind(name string) bool { return name != k.refuse }

func (k *kindRecorder) Answer(_ context.Context, c skill.Challenge) (string, error) {
	k.mu.Lock()
	k.kinds = append(k.kinds, c.Kind)
	k.mu.Unlock()
	a, ok := k.answers[c.Question]
	if !ok {
		return "", errors.New("unknown question")
	}
	return a, nil
}

func (k *kindRecorder) seen() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.kinds...)
}

// TestKindTravels: a set of a registered second kind is served, its
// challenges carry the kind on the wire and to the prover's answerer, it
// is judged and timed by its own model, and the signed record names it
// and commits to it in the transcript digest.
func TestKindTravels(t *testing.T) {
	a, b := newHost(t), newHost(t)
	set := wireKindSet("travels")
	rec := &kindRecorder{answers: oracle(set)}
	pr := newProved()
	va := newService(t, a, Config{Source: &staticSource{sets: []*skill.Set{set}}, Policy: skill.DefaultPolicy()})
	newService(t, b, Config{Prover: rec, OnProved: pr.fn})
	connect(t, a, b, "tcp")
	res, err := va.Verify(testCtx(t, 20*time.Second), b.ID(), false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verdict.Accepted || res.Verdict.Kind != wireKind {
		t.Fatalf("verdict %+v", res.Verdict)
	}
	if got := rec.seen(); len(got) != 3 || got[0] != wireKind || got[2] != wireKind {
		t.Fatalf("answerer saw kinds %v", got)
	}
	at := res.Attestation
	if at == nil || at.Kind != wireKind || at.KindName() != wireKind || at.SetID != set.ContentID() {
		t.Fatalf("attestation %+v", at)
	}
	d := skill.TranscriptDigestKind(wireKind, res.Verdict.Rounds)
	if string(at.TranscriptDigest) != string(d[:]) {
		t.Fatal("transcript digest does not commit to the kind")
	}
	if narr := skill.TranscriptDigest(res.Verdict.Rounds); string(at.TranscriptDigest) == string(narr[:]) {
		t.Fatal("a glyph transcript digests like a narrative one")
	}
	if v, _, err := VerifyAttestation(res.Envelope, VerifyOptions{Subject: b.ID(), Issuer: a.ID()}); err != nil || v.Kind != wireKind {
		t.Fatalf("sealed record: %v kind %q", err, v.Kind)
	}
	p := pr.next(t)
	if p.Err != nil || !p.Accepted || p.Attestation == nil || p.Attestation.Kind != wireKind {
		t.Fatalf("prover side: %+v", p)
	}
	// The budgets are those of the kind's model: tau 15 s is allowed only
	// because 15 s <= 25 % of its two minutes (Eq. 6 would allow no tau for
	// three-word texts).
	for _, r := range res.Verdict.Rounds {
		if r.Budget != skill.DefaultTau {
			t.Errorf("round %d budget %s", r.Round, r.Budget)
		}
	}
}

// TestKindOnTheWire: narrative challenges carry no kind (their 1.0.0
// bytes); a second kind's challenges carry its name.
func TestKindOnTheWire(t *testing.T) {
	for _, c := range []struct {
		set  *skill.Set
		want string
	}{{testSet("wire-narrative"), ""}, {wireKindSet("wire"), wireKind}} {
		a, m := newHost(t), newHost(t)
		va := newService(t, a, Config{Source: &staticSource{sets: []*skill.Set{c.set}}})
		got := make(chan *pb.Challenge, 1)
		m.SetStreamHandler(ID, func(s network.Stream) {
			defer s.Reset()
			_ = s.SetDeadline(time.Now().Add(10 * time.Second))
			in := &rawPeer{t: t, s: s, r: newFrameReader(s, MaxVerifierFrame), max: MaxProverFrame}
			f, err := in.recv()
			if err != nil {
				got <- nil
				return
			}
			ack(in, f.GetHello())
			got <- echoProbes(t, in)
			_ = writeFrame(s, declineFrame(pb.DeclineReason_DECLINE_REASON_REFUSED, "test"), MaxProverFrame)
			drain(in)
		})
		connect(t, a, m, "tcp")
		if _, err := va.Verify(testCtx(t, 15*time.Second), m.ID(), false); err != nil {
			t.Fatal(err)
		}
		ch := <-got
		if ch == nil || ch.GetKind() != c.want || len(ch.ProtoReflect().GetUnknown()) != 0 {
			t.Fatalf("challenge kind %q, want %q", ch.GetKind(), c.want)
		}
		m.Close()
	}
}

// TestKindUnsupportedDeclined: a prover whose answerer does not take the
// kind, and a prover that has never heard of it, decline the challenge
// with UNSUPPORTED_KIND; the verifier signs declined.
func TestKindUnsupportedDeclined(t *testing.T) {
	t.Run("answerer refuses the kind", func(t *testing.T) {
		a, b := newHost(t), newHost(t)
		set := wireKindSet("refused")
		rec := &kindRecorder{answers: oracle(set), refuse: wireKind}
		pr := newProved()
		va := newService(t, a, Config{Source: &staticSource{sets: []*skill.Set{set}}})
		newService(t, b, Config{Prover: rec, OnProved: pr.fn})
		connect(t, a, b, "tcp")
		res, err := va.Verify(testCtx(t, 15*time.Second), b.ID(), false)
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict.Reason != skill.ReasonDeclined || !strings.Contains(res.Verdict.Detail, "UNSUPPORTED_KIND") {
			t.Fatalf("verdict %s (%s)", res.Verdict.Reason, res.Verdict.Detail)
		}
		if at := res.Attestation; at == nil || at.Reason != skill.ReasonDeclined || at.FailedRound != 1 || at.Kind != wireKind {
			t.Fatalf("attestation %+v", at)
		}
		if got := rec.seen(); len(got) != 0 {
			t.Fatalf("the answerer was asked: %v", got)
		}
		p := pr.next(t)
		if !errors.Is(p.Err, ErrUnsupportedKind) || p.Reason != skill.ReasonDeclined || p.Attestation == nil {
			t.Fatalf("prover side: err %v reason %s attestation %v (%v)", p.Err, p.Reason, p.Attestation != nil, p.AttestationErr)
		}
	})
	t.Run("unknown kind", func(t *testing.T) {
		m, b, pr := proverUnderTest(t, "tcp", Config{Prover: constProver("x")})
		r := openRaw(t, m, b.ID())
		r.send(helloFrame(m.ID(), b.ID(), nil))
		if f, err := r.recv(); err != nil || f.GetHelloAck() == nil {
			t.Fatalf("hello ack: %v", err)
		}
		c := challengeFrame(1, "sun + flower", "Which word?")
		c.GetChallenge().Kind = "rebus-unregistered"
		r.send(c)
		f, err := r.recv()
		if err != nil || f.GetDecline().GetReason() != pb.DeclineReason_DECLINE_REASON_UNSUPPORTED_KIND {
			t.Fatalf("got %s %v, want Decline{UNSUPPORTED_KIND}", frameKind(f), err)
		}
		_ = r.s.CloseWrite()
		drain(r)
		if p := pr.next(t); !errors.Is(p.Err, ErrUnsupportedKind) {
			t.Fatalf("prover result %v", p.Err)
		}
	})
	t.Run("malformed or changing kind", func(t *testing.T) {
		for _, kinds := range [][]string{{"Bad Kind!"}, {"", wireKind}} {
			m, b, pr := proverUnderTest(t, "tcp", Config{Prover: constProver("x")})
			r := openRaw(t, m, b.ID())
			r.send(helloFrame(m.ID(), b.ID(), nil))
			if f, err := r.recv(); err != nil || f.GetHelloAck() == nil {
				t.Fatalf("hello ack: %v", err)
			}
			for i, k := range kinds {
				c := challengeFrame(uint32(i+1), "sun + flower "+k, "Which word?")
				c.GetChallenge().Kind = k
				r.send(c)
				if i < len(kinds)-1 {
					if f, err := r.recv(); err != nil || f.GetAnswer() == nil {
						t.Fatalf("%v: round %d: %s %v", kinds, i+1, frameKind(f), err)
					}
				}
			}
			expectReset(t, r, ErrCodeProtocolViolation)
			if p := pr.next(t); !errors.Is(p.Err, ErrProtocolViolation) {
				t.Fatalf("%v: prover result %v", kinds, p.Err)
			}
		}
	})
}
