package skill

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// words returns n words of neutral filler so a narrative reaches a token
// count the default policy accepts.
func words(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString("assay ")
	}
	return b.String()
}

func testSet() *Set {
	return &Set{Domain: "biochemistry", Parts: []Part{
		{Narrative: "PFK1 persisted. " + words(400), Questions: []Question{
			{Question: "Which enzyme persisted?", Answer: "PFK1", Answers: []string{"PFK1", "phosphofructokinase 1"}, ReasoningType: Negation, AnswerType: EntityAnswer},
			{Question: "How many replicates?", Answer: "3", Answers: []string{"3", "three"}, ReasoningType: Comparison, AnswerType: NumericAnswer},
		}},
		{Narrative: "The enzyme from before was inhibited by compound K-77. " + words(400), Questions: []Question{
			{Question: "Which compound inhibited the earlier enzyme?", Answer: "K-77", ReasoningType: MultiHop, AnswerType: EntityAnswer, DependsOn: []int{1}},
		}},
		{Narrative: "Tier amber. " + words(400), Questions: []Question{
			{Question: "Which tier?", Answer: "amber", ReasoningType: Conditional, AnswerType: LabelAnswer, DependsOn: []int{1, 2}},
		}},
	}}
}

func TestNormalizeAndMatch(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{" PFK1 ", "pfk1", true},
		{"Pfk1", "PFK1", true},
		{"LDH-γ", "ldh-Γ", true},
		{"e\u0301", "\u00e9", true}, // NFC: decomposed equals composed
		{"STRASSE", "straße", true}, // full case folding
		{"PFK2", "PFK1", false},
		{"", "x", false},
	}
	for _, c := range cases {
		if got := Match(c.a, c.b); got != c.want {
			t.Errorf("Match(%q,%q)=%v want %v", c.a, c.b, got, c.want)
		}
	}
	long := strings.Repeat("a", MaxAnswerBytes+1)
	if Match(long, long) || MatchAny(long, []string{long}) {
		t.Fatal("an answer over the byte cap must never match")
	}
	if !MatchAny("three", []string{"3", "three"}) {
		t.Fatal("variant not matched")
	}
}

func TestDecodeSetSchema(t *testing.T) {
	// Appendix C style: no answers array, no depends_on.
	js := `{"domain":"biochemistry","parts":[` +
		`{"narrative":"a","questions":[{"question":"q","answer":"PFK1","reasoning_type":"negation","answer_type":"entity"}]},` +
		`{"narrative":"b","questions":[{"question":"q","answer":"amber","answers":["amber","Amber tier"],"reasoning_type":"multi_hop","answer_type":"label","depends_on":[1]}]},` +
		`{"narrative":"c","questions":[{"question":"q","answer":"3","reasoning_type":"comparison","answer_type":"numeric"}]}]}`
	s, err := DecodeSet([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	if s.ID == "" || s.ID != s.ContentID() {
		t.Fatalf("ID not derived: %q", s.ID)
	}
	if got := s.Parts[0].Questions[0].Variants(); len(got) != 1 || got[0] != "PFK1" {
		t.Fatalf("variants default: %v", got)
	}
	bad := map[string]string{
		"unknown field":   strings.Replace(js, `"domain"`, `"dom":1,"domain"`, 1),
		"two parts":       `{"domain":"x","parts":[{"narrative":"a","questions":[]},{"narrative":"b","questions":[]}]}`,
		"bad reasoning":   strings.Replace(js, `"negation"`, `"vibes"`, 1),
		"canonical":       strings.Replace(js, `["amber","Amber tier"]`, `["red"]`, 1),
		"forward depends": strings.Replace(js, `"depends_on":[1]`, `"depends_on":[2]`, 1),
		"trailing":        js + `{}`,
		"long answer":     strings.Replace(js, `"answer":"3"`, `"answer":"`+strings.Repeat("9", 21)+`"`, 1),
	}
	for name, in := range bad {
		if _, err := DecodeSet([]byte(in)); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

func TestHumanLowerBoundMatchesPaper(t *testing.T) {
	lb := DefaultHumanModel().LowerBound(682)
	if lb < 147*time.Second || lb > 149*time.Second {
		t.Fatalf("lower bound for L=682: %s, want about 148 s (Eq. 14)", lb)
	}
}

func TestPolicyBudget(t *testing.T) {
	p := DefaultPolicy()
	if tau, err := p.Budget(682); err != nil || tau != DefaultTau {
		t.Fatalf("fixed budget: %v %v", tau, err)
	}
	// 15 s is more than a quarter of the lower bound of a 40-token text.
	if _, err := p.Budget(40); !errors.Is(err, ErrPolicy) {
		t.Fatalf("short narrative accepted: %v", err)
	}
	p.DeriveTau = true
	tau, err := p.Budget(682)
	if err != nil {
		t.Fatal(err)
	}
	if tau < 14*time.Second || tau > 15*time.Second {
		t.Fatalf("derived tau for L=682 with alpha 0.1: %s", tau)
	}
	p.Alpha = 0.5 // beyond MaxHumanFraction
	if _, err := p.Budget(682); !errors.Is(err, ErrPolicy) {
		t.Fatal("alpha above the human fraction accepted")
	}
	for name, mut := range map[string]func(*Policy){
		"rounds": func(p *Policy) { p.Rounds = 4 },
		"tau":    func(p *Policy) { p.Tau = 0 },
		"total":  func(p *Policy) { p.Total = time.Second },
		"frac":   func(p *Policy) { p.MaxHumanFraction = 1 },
	} {
		q := DefaultPolicy()
		mut(&q)
		if err := q.Check(); !errors.Is(err, ErrPolicy) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestPolicyBudgetWireRange: a budget the wire cannot carry (budget_ms 0,
// or above the Hello's total_ms) is refused when the session is created,
// like one too close to the human lower bound, so that no honest prover
// is ever sent a Challenge it must refuse as a protocol violation
// (spec/protocol.md §3, §6 step 7).
func TestPolicyBudgetWireRange(t *testing.T) {
	// A second implementer's example: alpha 0.2 and a 20 s total; a
	// 450-word (600-token) narrative derives 26.292 s, within the human
	// fraction (Budget allows it) but above the total.
	p := DefaultPolicy()
	p.DeriveTau, p.Alpha, p.Total = true, 0.2, 20*time.Second
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	if n := CountTokens(words(450)); n != 600 {
		t.Fatalf("%d tokens", n)
	}
	b, err := p.Budget(600)
	if err != nil || b != 26292*time.Millisecond {
		t.Fatalf("derived budget %s %v, want 26.292 s", b, err)
	}
	if err := p.CheckBudget(b); !errors.Is(err, ErrPolicy) {
		t.Fatalf("budget %s above the 20 s total: %v", b, err)
	}
	set := testSet() // parts of about 540 tokens: 23.7 s budgets
	if _, err := NewSession(set, p, nil); !errors.Is(err, ErrPolicy) {
		t.Fatalf("session with budgets above its total: %v", err)
	}
	// At the total exactly it is served; a nanosecond above, not.
	q := p
	q.Total = b
	if err := q.CheckBudget(b); err != nil {
		t.Fatalf("budget equal to the total: %v", err)
	}
	if err := q.CheckBudget(b + time.Nanosecond); !errors.Is(err, ErrPolicy) {
		t.Fatalf("budget 1 ns above the total: %v", err)
	}
	q.Total = 2 * time.Minute
	if _, err := NewSession(set, q, nil); err != nil {
		t.Fatal(err)
	}

	// A derived budget that rounds to 0 ms (budget_ms 0); 1 ms is the
	// least a round can have.
	tiny := DefaultPolicy()
	tiny.DeriveTau, tiny.Alpha = true, 1e-6
	if err := tiny.Check(); err != nil {
		t.Fatal(err)
	}
	if b, err := tiny.Budget(600); err != nil || b != 0 {
		t.Fatalf("derived budget %s %v, want 0", b, err)
	}
	if _, err := NewSession(set, tiny, nil); !errors.Is(err, ErrPolicy) {
		t.Fatalf("session with 0 ms budgets: %v", err)
	}
	for b, ok := range map[time.Duration]bool{0: false, time.Millisecond - 1: false, time.Millisecond: true} {
		if err := tiny.CheckBudget(b); (err == nil) != ok {
			t.Errorf("budget %s: %v, want ok=%v", b, err, ok)
		}
	}
	tiny.Alpha = 1e-4 // 11.9 ms and up: served
	if _, err := NewSession(set, tiny, nil); err != nil {
		t.Fatal(err)
	}

	// A fixed tau under 1 ms is refused by Check (budget_ms would be 0),
	// and so is a total under 1 ms.
	for _, c := range []struct {
		tau, total time.Duration
		ok         bool
	}{
		{999 * time.Microsecond, time.Second, false},
		{time.Nanosecond, time.Second, false},
		{time.Millisecond, time.Second, true},
		{time.Millisecond, time.Millisecond, true},
		{time.Millisecond, 999 * time.Microsecond, false},
	} {
		f := DefaultPolicy()
		f.Tau, f.Total = c.tau, c.total
		if err := f.Check(); (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrPolicy)) {
			t.Errorf("fixed tau %s, total %s: %v, want ok=%v", c.tau, c.total, err, c.ok)
		}
	}
	d := DefaultPolicy()
	d.DeriveTau, d.Total = true, 999*time.Microsecond
	if err := d.Check(); !errors.Is(err, ErrPolicy) {
		t.Errorf("derived policy with a total under 1 ms: %v", err)
	}
}

// truth answers from the set, optionally forgetting earlier rounds.
func truth(set *Set, memory bool) Answerer {
	seen := map[int]bool{}
	return AnswerFunc(func(ctx context.Context, c Challenge) (string, error) {
		p := set.Parts[c.Round-1]
		seen[c.Round] = true
		for _, q := range p.Questions {
			if q.Question != c.Question {
				continue
			}
			for _, d := range q.DependsOn {
				if !memory || !seen[d] {
					return "unknown", nil
				}
			}
			return q.Answer, nil
		}
		return "", errors.New("question not in set")
	})
}

func TestSessionAcceptAndReject(t *testing.T) {
	set := testSet()
	s, err := NewSession(set, DefaultPolicy(), nil)
	if err != nil {
		t.Fatal(err)
	}
	v := Run(context.Background(), s, truth(set, true), nil)
	if !v.Accepted || v.Reason != ReasonOK || len(v.Rounds) != 3 {
		t.Fatalf("oracle: %+v", v)
	}
	s, _ = NewSession(set, DefaultPolicy(), nil)
	v = Run(context.Background(), s, truth(set, false), nil)
	if v.Accepted || v.Reason != ReasonWrongAnswer || v.FailedRound != 2 {
		t.Fatalf("memoryless: %+v", v)
	}
}

func TestSessionTiming(t *testing.T) {
	set := testSet()
	s, err := NewSession(set, DefaultPolicy(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := s.Current()
	ans := s.Expected()[0]
	// RTT credit is capped at 500 ms: an inflated 10 s RTT buys 500 ms.
	rec, _ := s.Submit(ans, Timing{Elapsed: c.Budget + 400*time.Millisecond, RTT: 10 * time.Second, SinceStart: time.Second})
	if !rec.Correct || s.Done() {
		t.Fatalf("credit within cap should pass: %+v", rec)
	}
	c, _ = s.Current()
	rec, _ = s.Submit(s.Expected()[0], Timing{Elapsed: c.Budget + 600*time.Millisecond, RTT: 10 * time.Second, SinceStart: 20 * time.Second})
	v, done := s.Verdict()
	if !done || v.Reason != ReasonTimeout || v.FailedRound != 2 || rec.Effective != c.Budget+100*time.Millisecond {
		t.Fatalf("late answer: %+v %+v", v, rec)
	}
	// Total budget.
	s, _ = NewSession(set, DefaultPolicy(), nil)
	_, _ = s.Submit(s.Expected()[0], Timing{Elapsed: time.Second, SinceStart: 121 * time.Second})
	if v, _ := s.Verdict(); v.Reason != ReasonTotalTimeout {
		t.Fatalf("total: %+v", v)
	}
	// Oversized answers are wrong without matching.
	s, _ = NewSession(set, DefaultPolicy(), nil)
	rec, _ = s.Submit(strings.Repeat("x", 200), Timing{Elapsed: time.Second})
	if v, _ := s.Verdict(); v.Reason != ReasonWrongAnswer || len(rec.Answer) != MaxAnswerBytes {
		t.Fatalf("oversized: %+v", v)
	}
	if _, err := s.Submit("x", Timing{}); err == nil {
		t.Fatal("submit after verdict accepted")
	}
}

func TestSessionPicksUniformly(t *testing.T) {
	set := testSet()
	counts := map[int]int{}
	for i := 0; i < 400; i++ {
		s, err := NewSession(set, DefaultPolicy(), nil)
		if err != nil {
			t.Fatal(err)
		}
		counts[s.picks[0]]++
	}
	if counts[0] < 120 || counts[1] < 120 {
		t.Fatalf("question picks not uniform: %v", counts)
	}
	// A deterministic reader gives deterministic picks.
	a, _ := NewSession(set, DefaultPolicy(), bytes.NewReader(make([]byte, 64)))
	b, _ := NewSession(set, DefaultPolicy(), bytes.NewReader(make([]byte, 64)))
	if a.picks[0] != b.picks[0] {
		t.Fatal("picks differ for the same randomness")
	}
}

func TestTranscriptDigestBindsContent(t *testing.T) {
	r := []RoundRecord{{Round: 1, Narrative: "n", Question: "q", Answer: "a"}}
	d1 := TranscriptDigest(r)
	r[0].Answer = "b"
	if d1 == TranscriptDigest(r) {
		t.Fatal("digest ignores the answer")
	}
	// Length prefixes keep field boundaries: ("ab","") differs from ("a","b").
	x := TranscriptDigest([]RoundRecord{{Round: 1, Narrative: "ab", Question: ""}})
	y := TranscriptDigest([]RoundRecord{{Round: 1, Narrative: "a", Question: "b"}})
	if x == y {
		t.Fatal("digest is ambiguous across field boundaries")
	}
}

func TestCorpusServesOnce(t *testing.T) {
	a, b := testSet(), testSet()
	b.Domain = "cybersecurity"
	a.ID, b.ID = a.ContentID(), b.ContentID()
	l := NewMemLedger()
	c, err := NewCorpus("t", []*Set{a, b}, l, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for i := 0; i < 2; i++ {
		s, err := c.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got[s.ID] = true
	}
	if len(got) != 2 {
		t.Fatal("a set was served twice")
	}
	if _, err := c.Next(context.Background()); !errors.Is(err, ErrExhausted) {
		t.Fatalf("want exhausted, got %v", err)
	}
	// A second corpus over the same ledger (a restart) serves nothing.
	c2, _ := NewCorpus("t", []*Set{a, b}, l, 1)
	if _, err := c2.Next(context.Background()); !errors.Is(err, ErrExhausted) {
		t.Fatal("restart re-served a used set")
	}
}

// A set given back unseen (Returner) is served again; the ledger undoes
// exactly one serve.
func TestCorpusReturn(t *testing.T) {
	a := testSet()
	a.ID = a.ContentID()
	l := NewMemLedger()
	c, err := NewCorpus("t", []*Set{a}, l, 1)
	if err != nil {
		t.Fatal(err)
	}
	var _ Returner = c
	got, err := c.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(context.Background()); !errors.Is(err, ErrExhausted) {
		t.Fatalf("served twice: %v", err)
	}
	if err := c.Return(got); err != nil {
		t.Fatal(err)
	}
	if again, err := c.Next(context.Background()); err != nil || again.ID != a.ID {
		t.Fatalf("after return: %v %v", again, err)
	}
	if _, err := c.Next(context.Background()); !errors.Is(err, ErrExhausted) {
		t.Fatalf("one return undid more than one serve: %v", err)
	}
	// Returning a set with no serves leaves the count at zero, not below.
	if err := l.Unserve("unknown"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := l.TryServe("unknown", 1); !ok {
		t.Fatal("fresh id refused")
	}
	if ok, _ := l.TryServe("unknown", 1); ok {
		t.Fatal("an unserve of an unserved id went below zero")
	}
}

func TestRunDeclineAndTimeout(t *testing.T) {
	set := testSet()
	s, _ := NewSession(set, DefaultPolicy(), nil)
	v := Run(context.Background(), s, AnswerFunc(func(context.Context, Challenge) (string, error) {
		return "", ErrDeclined
	}), nil)
	if v.Reason != ReasonDeclined || v.FailedRound != 1 {
		t.Fatalf("decline: %+v", v)
	}
	p := DefaultPolicy()
	p.MaxHumanFraction = 0.99
	p.Tau = 20 * time.Millisecond
	p.Total = time.Second
	s, _ = NewSession(set, p, nil)
	v = Run(context.Background(), s, AnswerFunc(func(ctx context.Context, c Challenge) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}), nil)
	if v.Reason != ReasonTimeout {
		t.Fatalf("slow answerer: %+v", v)
	}
}

func TestCapBytes(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 5, "hello"},
		{"hello", 3, "hel"},
		{"héllo", 2, "h"},  // é is 2 bytes: never split
		{"héllo", 3, "hé"}, // whole é fits
		{"日本", 4, "日"},     // 3-byte runes
		{"日本", 2, ""},      // nothing whole fits
		{"a", 0, ""},
		{"a", -1, ""},
	} {
		if got := CapBytes(tc.s, tc.n); got != tc.want {
			t.Errorf("CapBytes(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

// TestCorpusReproducible: a corpus made reproducible draws the same
// sequence for one seed (another sequence for another), and still serves
// every set at most maxServes times.
func TestCorpusReproducible(t *testing.T) {
	var sets []*Set
	for _, d := range []string{"clinical", "cybersecurity", "aviation", "finance", "energy", "logistics"} {
		s := testSet()
		s.Domain = d
		s.ID = s.ContentID()
		sets = append(sets, s)
	}
	draws := func(seed uint64, n, maxServes int) []string {
		c, err := NewCorpus("t", sets, nil, maxServes)
		if err != nil {
			t.Fatal(err)
		}
		c.Reproducible(seed)
		var out []string
		for range n {
			s, err := c.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, s.Domain)
		}
		return out
	}
	a, b := draws(9, 40, 100), draws(9, 40, 100)
	if !slices.Equal(a, b) {
		t.Fatalf("seed 9 drew %v, then %v", a, b)
	}
	if c := draws(10, 40, 100); slices.Equal(a, c) {
		t.Errorf("seeds 9 and 10 drew the same sequence %v", a)
	}
	once := draws(9, len(sets), 1)
	slices.Sort(once)
	if len(slices.Compact(once)) != len(sets) {
		t.Errorf("served once each: %v", once)
	}
}
