package attack

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/acaptcha/acaptcha/skill"
)

// loadCorpus returns the fixture sets plus the example corpus in
// spec/examples when it holds any.
func loadCorpus(t testing.TB) []*skill.Set {
	t.Helper()
	sets, err := skill.LoadDir("testdata")
	if err != nil {
		t.Fatalf("load fixtures: %v", err)
	}
	ex := filepath.Join("..", "..", "spec", "examples")
	if m, _ := filepath.Glob(filepath.Join(ex, "*.json")); len(m) > 0 {
		more, err := skill.LoadDir(ex)
		if err != nil {
			t.Fatalf("load example corpus: %v", err)
		}
		sets = append(sets, more...)
	}
	return sets
}

func TestRegistry(t *testing.T) {
	want := []string{Random, FirstEntity, LastEntity, MostFrequent, KeywordOverlap, CueProximity,
		NegationElim, NearestNumber, LabelPattern, RuleClause, RuleListFirst, RuleListSecond, RuleListPenult, RuleListLast, Router, StatefulRouter}
	got := Names()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	if len(All()) < 8 {
		t.Fatalf("only %d attackers", len(All()))
	}
	for _, n := range All() {
		if n.Prover == nil || n.Description == "" {
			t.Errorf("%s: missing prover or description", n.Name)
		}
		if b, ok := ByName(n.Name); !ok || b.Name != n.Name {
			t.Errorf("ByName(%q) failed", n.Name)
		}
		if p, ok := n.Prover.(*Prover); !ok || p.Name() != n.Name {
			t.Errorf("%s: prover name mismatch", n.Name)
		}
	}
	if _, ok := ByName("no-such"); ok {
		t.Error("ByName found an unknown attacker")
	}
}

func candTexts(d *doc) map[string]candKind {
	m := map[string]candKind{}
	for _, c := range d.cands {
		m[c.text] = c.kind
	}
	return m
}

func TestCandidateExtraction(t *testing.T) {
	text := "SECTION A - SCREENING\n\nThe panel flagged PFK1, TYR_K3, GST_pi and LDH-γ alongside MAP2K1. " +
		"The Lazarus Group exploited CVE-2024-3094 while EUR/USD drifted. Reagent lot AB-342 was used, " +
		"and Compound ZN-3305 was tested by Meridian Clearing. Analysts at Northbridge noted it twice."
	d := analyse(text)
	c := candTexts(d)
	for _, want := range []string{"PFK1", "TYR_K3", "GST_pi", "LDH-γ", "MAP2K1", "CVE-2024-3094", "EUR/USD", "AB-342", "ZN-3305", "Lazarus Group", "Meridian Clearing"} {
		if _, ok := c[want]; !ok {
			t.Errorf("candidate %q not extracted; got %v", want, c)
		}
	}
	for _, bad := range []string{"SECTION", "SCREENING", "The", "Compound ZN-3305", "Reagent"} {
		if _, ok := c[bad]; ok {
			t.Errorf("%q wrongly extracted as a candidate", bad)
		}
	}
	for _, cd := range d.cands {
		if cd.text == "AB-342" && cd.coded == 0 {
			t.Error("AB-342 after 'lot' not marked as a reference code")
		}
	}
}

func TestNumbersAndUnits(t *testing.T) {
	d := analyse("The deviation held across three independent replicate assays. The IC50 was 18.6 µM, " +
		"recovery was 6.3% and the run took 4.7-minute cycles at 3.8 degrees C. Turnover rose 2.6-fold. Registry 7821 in 2024.")
	got := map[string]unitClass{}
	for _, n := range d.nums {
		got[n.answer] = n.unit
	}
	want := map[string]unitClass{"3": unitCount, "18.6": unitConc, "6.3": unitPercent, "4.7": unitTime, "3.8": unitTemp, "2.6": unitFold}
	for a, u := range want {
		if g, ok := got[a]; !ok || g != u {
			t.Errorf("number %s: unit %v (found %v), want %v; all %v", a, g, ok, u, got)
		}
	}
	for _, n := range d.nums {
		if n.answer == "2024" && !n.weak {
			t.Error("a year must be a weak number")
		}
	}
}

func TestLabels(t *testing.T) {
	d := analyse(`The enzyme was assigned to alert tier "amber"; the others stay at grade slate and are classified as benign.`)
	var got []string
	for _, l := range d.labels {
		got = append(got, l.text)
	}
	for _, want := range []string{"amber", "slate", "benign"} {
		if !strings.Contains(strings.Join(got, ","), want) {
			t.Errorf("label %q not found in %v", want, got)
		}
	}
}

func TestQuestionKinds(t *testing.T) {
	cases := map[string]qkind{
		"Which enzyme in the report exhibited a deviation that persisted across replicates?": qEntity,
		"What alert tier classification was assigned to the enzyme?":                         qLabel,
		"How many independent replicate assays confirmed the deviation?":                     qNumeric,
		"What IC50, in µM, was established for the inhibitor?":                               qNumeric,
		"By what fold factor did the turnover exceed the control band?":                      qNumeric,
		"What confidence level is recorded for the attribution?":                             qLabel,
		"What type of inhibition was observed for the compound?":                             qLabel,
		"In which week did the pattern appear on a third host?":                              qNumeric,
		"Which counterparty tightened terms repeatedly?":                                     qEntity,
		"Who signed the memo that revised the preliminary finding?":                          qEntity,
	}
	for q, want := range cases {
		if got := analyseQuestion(q).kind; got != want {
			t.Errorf("%q: kind %v, want %v", q, got, want)
		}
	}
	q := analyseQuestion("Which enzyme persisted, unlike the others whose anomalies were attributed to interference?")
	if q.polarity != 1 {
		t.Error("a contrast clause must not flip the question's polarity")
	}
	contrast := 0
	for _, k := range q.keys {
		if k.contrast {
			contrast++
		}
	}
	if contrast == 0 {
		t.Error("contrast clause not detected")
	}
	if q := analyseQuestion("Which candidate's signal was attributed to matrix interference?"); q.polarity != -1 {
		t.Error("a question about an explained-away signal must have negative polarity")
	}
}

// filler returns neutral sentences (no cue words, no candidates) so that a
// narrative reaches a length the default policy accepts.
func filler(n int) string {
	parts := []string{
		"The laboratory kept its usual schedule during the week.",
		"Staff rotated between the two benches as planned.",
		"Ambient conditions in the building were logged by the facilities team.",
		"The data were archived on the shared drive at the end of each day.",
		"Meeting notes were circulated to the group by email.",
		"The freezer inventory was updated on the spreadsheet.",
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(parts[i%len(parts)])
		b.WriteByte(' ')
	}
	return b.String()
}

// simpleSet is a set written the way the paper's Appendix C example is:
// one candidate is described with replication cues, the others are
// explained away; part 2 refers back to it without naming it.
func simpleSet() *skill.Set {
	p1 := "SCREENING SUMMARY\n\nThe pipeline flagged five enzymes. TYR_K3 showed elevated readings in a single assay run, " +
		"but the pattern did not replicate in later trials. MAP2K1 exhibited a transient deviation that self-corrected. " +
		"PFK1 exhibited a persistent deviation across three independent replicate assays. GST_pi was flagged early; however, " +
		"replication across three labs yielded baseline-normal results. IDO1 produced a signal later attributed to matrix interference.\n\n" +
		"The enzyme whose deviation was reproducible across independent replicates was assigned to alert tier \"amber\".\n\n" + filler(30)
	p2 := "FOLLOW-UP\n\nThe enzyme flagged in the first report was studied further by the kinetics team. " + filler(34)
	return &skill.Set{Domain: "biochemistry", Parts: []skill.Part{
		{Narrative: p1, Questions: []skill.Question{
			{Question: "Which enzyme exhibited a deviation that persisted across independent replicates, unlike the others whose anomalies were explained away?", Answer: "PFK1", ReasoningType: skill.Negation, AnswerType: skill.EntityAnswer},
		}},
		{Narrative: p2, Questions: []skill.Question{
			{Question: "Which enzyme identified earlier was studied further by the kinetics team?", Answer: "PFK1", ReasoningType: skill.MultiHop, AnswerType: skill.EntityAnswer, DependsOn: []int{1}},
		}},
		{Narrative: p2 + " " + filler(2), Questions: []skill.Question{
			{Question: "What alert tier was the enzyme from the first report given?", Answer: "amber", ReasoningType: skill.MultiHop, AnswerType: skill.LabelAnswer, DependsOn: []int{1}},
		}},
	}}
}

func answerOne(t *testing.T, name, narrative, question string) string {
	t.Helper()
	n, ok := ByName(name)
	if !ok {
		t.Fatalf("no attacker %s", name)
	}
	a, err := n.Prover.NewSession().Answer(context.Background(), skill.Challenge{Round: 1, Rounds: 3, Narrative: narrative, Question: question})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestCueAttackersSolveExplicitCues(t *testing.T) {
	s := simpleSet()
	q := s.Parts[0].Questions[0].Question
	for _, name := range []string{CueProximity, NegationElim, Router, StatefulRouter} {
		if got := answerOne(t, name, s.Parts[0].Narrative, q); got != "PFK1" {
			t.Errorf("%s answered %q, want PFK1: cue words this explicit must be caught", name, got)
		}
	}
	if got := answerOne(t, FirstEntity, s.Parts[0].Narrative, q); got != "TYR_K3" {
		t.Errorf("first-entity answered %q, want TYR_K3", got)
	}
	if got := answerOne(t, LastEntity, s.Parts[0].Narrative, q); got != "IDO1" {
		t.Errorf("last-entity answered %q, want IDO1", got)
	}
	if got := answerOne(t, LabelPattern, s.Parts[0].Narrative, "What alert tier was the enzyme with the reproducible deviation assigned to?"); got != "amber" {
		t.Errorf("label-pattern answered %q, want amber", got)
	}
	if got := answerOne(t, NearestNumber, s.Parts[0].Narrative, "How many independent replicate assays showed the persistent deviation?"); got != "3" {
		t.Errorf("nearest-number answered %q, want 3", got)
	}
}

func TestStatefulRouterUsesMemory(t *testing.T) {
	s := simpleSet()
	run := func(name string) skill.Verdict {
		n, _ := ByName(name)
		sess, err := skill.NewSession(s, skill.DefaultPolicy(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return skill.Run(context.Background(), sess, n.Prover.NewSession(), nil)
	}
	v := run(StatefulRouter)
	if len(v.Rounds) < 2 || !v.Rounds[1].Correct {
		t.Fatalf("stateful router failed the memory round: %+v", v.Rounds)
	}
	if v2 := run(Router); len(v2.Rounds) >= 2 && v2.Rounds[1].Correct {
		t.Errorf("the memoryless router answered a memory-only round correctly (%q): the fixture leaks the answer", v2.Rounds[1].Answer)
	}
}

func runSession(t testing.TB, set *skill.Set, p skill.Prover, pick int) skill.Verdict {
	t.Helper()
	var seed [32]byte
	seed[0] = byte(pick)
	sess, err := skill.NewSession(set, skill.DefaultPolicy(), rand.NewChaCha8(seed))
	if err != nil {
		t.Fatalf("new session on %s: %v", set.ID, err)
	}
	return skill.Run(context.Background(), sess, p.NewSession(), nil)
}

func TestAttackersOnCorpus(t *testing.T) {
	sets := loadCorpus(t)
	for _, n := range All() {
		for _, set := range sets {
			for pick := 0; pick < 6; pick++ {
				v1 := runSession(t, set, n.Prover, pick)
				v2 := runSession(t, set, n.Prover, pick)
				if v1.Reason != skill.ReasonOK && v1.Reason != skill.ReasonWrongAnswer {
					t.Fatalf("%s on %s: verdict %s (%s)", n.Name, set.ID, v1.Reason, v1.Detail)
				}
				if len(v1.Rounds) != len(v2.Rounds) {
					t.Fatalf("%s on %s: not deterministic", n.Name, set.ID)
				}
				for i := range v1.Rounds {
					a := v1.Rounds[i].Answer
					if a != v2.Rounds[i].Answer {
						t.Fatalf("%s on %s round %d: %q then %q", n.Name, set.ID, i+1, a, v2.Rounds[i].Answer)
					}
					if a == "" || len(a) > skill.MaxAnswerBytes || !utf8.ValidString(a) {
						t.Fatalf("%s: bad answer %q", n.Name, a)
					}
				}
			}
		}
	}
}

// TestRouterAccuracy measures per-question accuracy on the fixtures and
// checks the combined router is at least as strong as every single
// heuristic (it is the project's strongest honest script).
func TestRouterAccuracy(t *testing.T) {
	sets := loadCorpus(t)
	acc := map[string]int{}
	total := 0
	for _, set := range sets {
		for _, p := range set.Parts {
			for _, q := range p.Questions {
				total++
				for _, n := range All() {
					a, err := n.Prover.NewSession().Answer(context.Background(), skill.Challenge{Round: 1, Narrative: p.Narrative, Question: q.Question})
					if err != nil {
						t.Fatal(err)
					}
					if skill.MatchAny(a, q.Variants()) {
						acc[n.Name]++
					}
				}
			}
		}
	}
	var lines []string
	for _, n := range All() {
		lines = append(lines, fmt.Sprintf("%s=%d/%d", n.Name, acc[n.Name], total))
		if n.Name != Router && n.Name != StatefulRouter && acc[n.Name] > acc[Router] {
			t.Errorf("%s (%d) beats the router (%d)", n.Name, acc[n.Name], acc[Router])
		}
	}
	t.Log(strings.Join(lines, " "))
	if acc[Router] <= acc[FirstEntity] || acc[Router] <= acc[Random] {
		t.Errorf("router no better than position/random baselines: %v", acc)
	}
}

func TestHostileInput(t *testing.T) {
	long := strings.Repeat("PFK1 persisted. 18.6 µM tier \"amber\". ", 20000)
	inputs := []struct{ narrative, question string }{
		{"", ""},
		{"   \n\n\t", "?"},
		{"\xff\xfe\xfd invalid utf8 \x00", "Which \xff?"},
		{long, "Which enzyme persisted?"},
		{"\"\"\"'''```", "What tier \"\"?"},
		{strings.Repeat("-", 5000), strings.Repeat("how many ", 2000)},
		{"A-B-C-D_E/F.G:H,I 1,2,3,,4..5", "What value?"},
	}
	for _, n := range All() {
		for _, in := range inputs {
			a, err := n.Prover.NewSession().Answer(context.Background(), skill.Challenge{Round: 1, Narrative: in.narrative, Question: in.question})
			if err != nil {
				t.Fatalf("%s: %v", n.Name, err)
			}
			if a == "" || len(a) > skill.MaxAnswerBytes || !utf8.ValidString(a) {
				t.Fatalf("%s: bad answer %q", n.Name, a)
			}
		}
	}
}

func TestCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, n := range All() {
		if _, err := n.Prover.NewSession().Answer(ctx, skill.Challenge{Narrative: "x", Question: "y"}); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: err %v, want context.Canceled", n.Name, err)
		}
	}
}

func FuzzAnswer(f *testing.F) {
	f.Add("PFK1 persisted across three labs; tier \"amber\".", "Which enzyme persisted?")
	f.Add("18.6 µM vs 7.9 µM", "What IC50, in µM?")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, narrative, question string) {
		for _, n := range All() {
			a, err := n.Prover.NewSession().Answer(context.Background(), skill.Challenge{Round: 2, Narrative: narrative, Question: question})
			if err != nil || a == "" || len(a) > skill.MaxAnswerBytes {
				t.Fatalf("%s: %q, %v", n.Name, a, err)
			}
		}
	})
}

func BenchmarkAnswer(b *testing.B) {
	sets := loadCorpus(b)
	p := sets[0].Parts[0]
	for _, n := range All() {
		b.Run(n.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := n.Prover.NewSession().Answer(context.Background(), skill.Challenge{Round: 1, Narrative: p.Narrative, Question: p.Questions[0].Question}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAnalyse(b *testing.B) {
	sets := loadCorpus(b)
	text := sets[0].Parts[0].Narrative
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		analyse(text)
	}
}

func BenchmarkSession(b *testing.B) {
	sets := loadCorpus(b)
	n, _ := ByName(StatefulRouter)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		set := sets[i%len(sets)]
		i++
		sess, err := skill.NewSession(set, skill.DefaultPolicy(), nil)
		if err != nil {
			b.Fatal(err)
		}
		if v := skill.Run(context.Background(), sess, n.Prover.NewSession(), nil); v.Reason == skill.ReasonProtocolError {
			b.Fatal(v.Detail)
		}
	}
}
