package skill

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// glyphKind is a test-only second kind, shaped like the rebus puzzles of
// the Reasoning Gates seed: each part's text is a short puzzle, its answer
// one lower-case word. Its human model is a fixed minute of thought plus a
// second per token (far above Eq. 6 for such short texts), its validator
// wants one-word lower-case answers, its judge is case-sensitive, and its
// producer makes a fixed set.
const glyphKind = "glyph-test"

const glyphPrompt = "GLYPH SOLVER: reply with one lower-case word."

func glyphLowerBound(_ Policy, part *Part, _ *Question) time.Duration {
	return time.Minute + time.Duration(CountTokens(part.Narrative))*time.Second
}

func glyphSet() *Set {
	part := func(text, answer string) Part {
		return Part{Narrative: text, Questions: []Question{{Question: "Which word does the puzzle spell?", Answer: answer}}}
	}
	return &Set{Kind: glyphKind, Domain: "wordplay", Parts: []Part{
		part("sun + flower", "sunflower"),
		part("rain + bow", "rainbow"),
		part("star + fish", "starfish"),
	}}
}

func init() {
	err := RegisterKind(Kind{
		Name:       glyphKind,
		LowerBound: glyphLowerBound,
		Validate: func(s *Set) error {
			for i, p := range s.Parts {
				for _, q := range p.Questions {
					if strings.ContainsAny(q.Answer, " ") || strings.ToLower(q.Answer) != q.Answer {
						return fmt.Errorf("part %d: answer %q is not one lower-case word", i+1, q.Answer)
					}
				}
			}
			return nil
		},
		Judge:        func(q *Question, answer string, _ []string) bool { return strings.TrimSpace(answer) == q.Answer },
		SolverPrompt: glyphPrompt,
		Producer:     func(context.Context) (*Set, error) { return glyphSet(), nil },
	})
	if err != nil {
		panic(err)
	}
}

func TestKindRegistry(t *testing.T) {
	n, ok := LookupKind("")
	if !ok || n.Name != NarrativeKind || n.SolverPrompt != NarrativeSolverPrompt || n.Validate == nil {
		t.Fatalf("the empty name does not find the narrative kind: %+v %v", n.Name, ok)
	}
	if g, ok := LookupKind(glyphKind); !ok || g.SolverPrompt != glyphPrompt {
		t.Fatalf("test kind not found: %v", ok)
	}
	if _, ok := LookupKind("rebus"); ok {
		t.Fatal("an unregistered kind is found")
	}
	names := KindNames()
	if len(names) < 2 || names[0] > names[1] {
		t.Fatalf("kinds %v: want both kinds, sorted", names)
	}
	lb := func(Policy, *Part, *Question) time.Duration { return time.Second }
	for name, k := range map[string]Kind{
		"duplicate":   {Name: NarrativeKind, LowerBound: lb, SolverPrompt: "x"},
		"upper case":  {Name: "Rebus", LowerBound: lb, SolverPrompt: "x"},
		"empty":       {Name: "", LowerBound: lb, SolverPrompt: "x"},
		"too long":    {Name: strings.Repeat("a", MaxKindBytes+1), LowerBound: lb, SolverPrompt: "x"},
		"digit first": {Name: "1rebus", LowerBound: lb, SolverPrompt: "x"},
		"no model":    {Name: "nomodel", SolverPrompt: "x"},
		"no prompt":   {Name: "noprompt", LowerBound: lb, SolverPrompt: "  "},
	} {
		if err := RegisterKind(k); !errors.Is(err, ErrKind) {
			t.Errorf("%s: RegisterKind = %v, want ErrKind", name, err)
		}
	}
	if _, ok := LookupKind("nomodel"); ok {
		t.Error("a refused kind was registered")
	}
	if WireKind(NarrativeKind) != "" || WireKind(glyphKind) != glyphKind || CanonicalKind("") != NarrativeKind {
		t.Error("WireKind/CanonicalKind do not map narrative to and from the empty name")
	}
}

// TestKindSetID: a narrative set's ID is the same whether it names its
// kind or not (the 1.0.0 framing); another kind's ID prefixes the framing
// with eight 0xff bytes and the framed kind name.
func TestKindSetID(t *testing.T) {
	plain := testSet()
	named := testSet()
	named.Kind = NarrativeKind
	if plain.ContentID() != named.ContentID() {
		t.Fatal("naming the narrative kind changes the set ID")
	}
	g := glyphSet()
	frame := func(b []byte, s string) []byte { return append(binary.BigEndian.AppendUint64(b, uint64(len(s))), s...) }
	var body []byte
	body = frame(body, g.Domain)
	for _, p := range g.Parts {
		body = frame(body, p.Narrative)
		for _, q := range p.Questions {
			body = frame(frame(body, q.Question), q.Answer)
		}
	}
	in := frame([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, glyphKind)
	sum := sha256.Sum256(append(in, body...))
	if got := g.ContentID(); got != hex.EncodeToString(sum[:16]) {
		t.Fatalf("glyph set ID %s, want %x", got, sum[:16])
	}
	asNarrative := *g
	asNarrative.Kind = ""
	narrSum := sha256.Sum256(body)
	if asNarrative.ContentID() != hex.EncodeToString(narrSum[:16]) || asNarrative.ContentID() == g.ContentID() {
		t.Fatal("the same content under the narrative kind must keep the 1.0.0 ID and differ from the glyph ID")
	}
}

func TestKindValidate(t *testing.T) {
	if err := glyphSet().Validate(); err != nil {
		t.Fatalf("glyph set: %v", err)
	}
	// The glyph set has no reasoning types: the narrative kind's validator
	// refuses it, the glyph kind's does not ask for them.
	asNarrative := glyphSet()
	asNarrative.Kind = ""
	if err := asNarrative.Validate(); !errors.Is(err, ErrInvalidSet) || !strings.Contains(err.Error(), "reasoning_type") {
		t.Fatalf("narrative validation of a glyph set: %v", err)
	}
	bad := glyphSet()
	bad.Parts[1].Questions[0].Answer = "Rain Bow"
	if err := bad.Validate(); !errors.Is(err, ErrInvalidSet) || !strings.Contains(err.Error(), "lower-case word") {
		t.Fatalf("glyph validator not run: %v", err)
	}
	for _, k := range []string{"rebus", "Glyph", "x y"} {
		s := glyphSet()
		s.Kind = k
		if err := s.Validate(); !errors.Is(err, ErrInvalidSet) {
			t.Errorf("kind %q: %v, want ErrInvalidSet", k, err)
		}
	}
	// The shape checks apply to every kind.
	short := glyphSet()
	short.Parts = short.Parts[:2]
	if err := short.Validate(); !errors.Is(err, ErrInvalidSet) {
		t.Fatalf("two-part glyph set: %v", err)
	}
	// The domain must fit the wire's cap, which a prover enforces on
	// every Challenge (protocol.md §3, §6 step 7).
	// provenance (generation.md "Format"): a known source or none, a
	// model of at most MaxModelBytes.
	for _, pv := range []Provenance{{Source: "human"}, {Source: SourceLLM, Model: strings.Repeat("m", MaxModelBytes+1)}} {
		s := glyphSet()
		s.Provenance = &pv
		if err := s.Validate(); !errors.Is(err, ErrInvalidSet) || !strings.Contains(err.Error(), "provenance") {
			t.Errorf("provenance %+v: %v, want ErrInvalidSet", pv, err)
		}
	}
	for _, pv := range []Provenance{{}, {Source: SourceLLM, Model: strings.Repeat("m", MaxModelBytes)}} {
		s := glyphSet()
		s.Provenance = &pv
		if err := s.Validate(); err != nil {
			t.Errorf("provenance %+v: %v, want valid", pv, err)
		}
	}
	for _, d := range []string{strings.Repeat("d", MaxDomainBytes+1), "bad\xffutf8"} {
		long := glyphSet()
		long.Domain = d
		if err := long.Validate(); !errors.Is(err, ErrInvalidSet) || !strings.Contains(err.Error(), "domain") {
			t.Errorf("domain of %d bytes: %v, want ErrInvalidSet", len(d), err)
		}
	}
	fits := glyphSet()
	fits.Domain = strings.Repeat("d", MaxDomainBytes)
	if err := fits.Validate(); err != nil {
		t.Fatalf("domain of %d bytes: %v", MaxDomainBytes, err)
	}
}

func TestKindDecodeSet(t *testing.T) {
	in := `{"kind":"glyph-test","domain":"wordplay","parts":[` +
		`{"narrative":"sun + flower","questions":[{"question":"q","answer":"sunflower"}]},` +
		`{"narrative":"rain + bow","questions":[{"question":"q","answer":"rainbow"}]},` +
		`{"narrative":"star + fish","questions":[{"question":"q","answer":"starfish"}]}]}`
	s, err := DecodeSet([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if s.KindName() != glyphKind || s.ID != s.ContentID() {
		t.Fatalf("kind %q id %q", s.Kind, s.ID)
	}
	if _, err := DecodeSet([]byte(strings.Replace(in, "glyph-test", "rebus", 1))); !errors.Is(err, ErrInvalidSet) {
		t.Fatalf("unknown kind decoded: %v", err)
	}
}

// TestKindSessionTimedAndJudgedByItsModel: budgets come from the kind's
// human model, the challenge and verdict carry the kind, answers are
// judged by the kind's judge.
func TestKindSessionTimedAndJudgedByItsModel(t *testing.T) {
	p := DefaultPolicy()
	// Under Eq. 6 a three-token puzzle allows no 15 s tau; under the
	// glyph model (a minute and more) it does.
	n := glyphSet()
	n.Kind = ""
	for i := range n.Parts {
		n.Parts[i].Questions[0].ReasoningType = Negation
	}
	if _, err := NewSession(n, p, nil); !errors.Is(err, ErrPolicy) {
		t.Fatalf("narrative session over three-token texts: %v, want ErrPolicy", err)
	}
	s, err := NewSession(glyphSet(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind().Name != glyphKind {
		t.Fatalf("session kind %q", s.Kind().Name)
	}
	dp := p
	dp.DeriveTau, dp.Alpha = true, 0.1
	ds, err := NewSession(glyphSet(), dp, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range ds.Budgets() {
		part := &glyphSet().Parts[i]
		want := time.Duration(0.1 * float64(glyphLowerBound(dp, part, nil))).Round(time.Millisecond)
		if b != want {
			t.Errorf("round %d derived budget %s, want %s (alpha x the glyph model)", i+1, b, want)
		}
	}

	c, ok := s.Current()
	if !ok || c.Kind != glyphKind {
		t.Fatalf("challenge kind %q", c.Kind)
	}
	// The narrative judge would accept "SUNFLOWER"; the glyph judge not.
	if !Judge(&s.Set().Parts[0].Questions[0], "SUNFLOWER", nil) {
		t.Fatal("narrative judge premise")
	}
	rec, err := s.Submit("SUNFLOWER", Timing{Elapsed: time.Second, SinceStart: time.Second})
	if err != nil || rec.Correct {
		t.Fatalf("glyph judge accepted a wrong-case answer: %+v %v", rec, err)
	}
	v, _ := s.Verdict()
	if v.Kind != glyphKind || v.Reason != ReasonWrongAnswer {
		t.Fatalf("verdict %+v", v)
	}

	s2, _ := NewSession(glyphSet(), p, nil)
	v2 := Run(context.Background(), s2, AnswerFunc(func(_ context.Context, c Challenge) (string, error) {
		return strings.ReplaceAll(strings.ReplaceAll(c.Narrative, " + ", ""), " ", ""), nil
	}), nil)
	if !v2.Accepted || v2.Kind != glyphKind {
		t.Fatalf("glyph session with right answers: %+v", v2)
	}
	narr, _ := NewSession(testSet(), p, nil)
	if c, _ := narr.Current(); c.Kind != NarrativeKind {
		t.Fatalf("narrative challenge kind %q", c.Kind)
	}
}

// TestTranscriptDigestKind: the narrative digest is unchanged; another
// kind's inserts 0xffffffff and the framed kind name after the tag.
func TestTranscriptDigestKind(t *testing.T) {
	rounds := []RoundRecord{{Round: 1, Narrative: "sun + flower", Question: "q", Answer: "sunflower"}}
	if TranscriptDigestKind("", rounds) != TranscriptDigest(rounds) || TranscriptDigestKind(NarrativeKind, rounds) != TranscriptDigest(rounds) {
		t.Fatal("narrative digest changed")
	}
	var in []byte
	in = append(in, "acaptcha/transcript/v1"...)
	in = binary.BigEndian.AppendUint32(in, 0xffffffff)
	in = binary.BigEndian.AppendUint32(in, uint32(len(glyphKind)))
	in = append(in, glyphKind...)
	in = binary.BigEndian.AppendUint32(in, 1)
	for _, f := range []string{"sun + flower", "q", "sunflower"} {
		in = binary.BigEndian.AppendUint32(in, uint32(len(f)))
		in = append(in, f...)
	}
	if TranscriptDigestKind(glyphKind, rounds) != sha256.Sum256(in) {
		t.Fatal("glyph digest does not follow the framing")
	}
	// With no delivered round (a rejection before round 1) the kind
	// prefix is still there: the digest is of the tag and the prefix, not
	// of the tag alone (attestation.md §4).
	prefix := in[:len("acaptcha/transcript/v1")+4+4+len(glyphKind)]
	for _, none := range [][]RoundRecord{nil, {}} {
		if TranscriptDigestKind(glyphKind, none) != sha256.Sum256(prefix) {
			t.Fatal("glyph digest with no round is not of the tag and the kind prefix")
		}
		if TranscriptDigestKind("", none) != sha256.Sum256([]byte("acaptcha/transcript/v1")) || TranscriptDigest(none) != TranscriptDigestKind(NarrativeKind, none) {
			t.Fatal("narrative digest with no round is not of the tag alone")
		}
	}
}

func TestKindSourceAndAnswers(t *testing.T) {
	src, err := NewKindSource(glyphKind)
	if err != nil {
		t.Fatal(err)
	}
	set, err := src.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if set.Kind != glyphKind || set.ID != set.ContentID() || src.Name() != "kind:"+glyphKind {
		t.Fatalf("set kind %q id %q name %q", set.Kind, set.ID, src.Name())
	}
	if _, err := NewKindSource(NarrativeKind); !errors.Is(err, ErrKind) {
		t.Fatalf("narrative has no producer here: %v", err)
	}
	if _, err := NewKindSource("rebus"); !errors.Is(err, ErrKind) {
		t.Fatalf("unknown kind: %v", err)
	}
	plain := AnswerFunc(func(context.Context, Challenge) (string, error) { return "", nil })
	if !Answers(plain, glyphKind) || !Answers(plain, "") || Answers(plain, "rebus") {
		t.Fatal("Answers: a plain answerer takes every registered kind and no other")
	}
	if Answers(onlyNarrative{}, glyphKind) || !Answers(onlyNarrative{}, "") {
		t.Fatal("Answers ignores KindAnswerer")
	}
}

type onlyNarrative struct{}

func (onlyNarrative) AnswersKind(name string) bool { return name == NarrativeKind }
