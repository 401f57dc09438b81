package eval

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/attack"
)

func formTexts(q *skill.Question, narratives ...string) map[string][]string {
	out := map[string][]string{}
	for _, f := range AgentStyleForms(q, narratives) {
		out[f.Form] = append(out[f.Form], f.Text)
	}
	return out
}

func hasText(xs []string, want string) bool {
	for _, x := range xs {
		if x == want {
			return true
		}
	}
	return false
}

// TestAgentStyleFormsIssueExamples derives, from narrative text, the
// wordings issue 13 saw capable agents give.
func TestAgentStyleFormsIssueExamples(t *testing.T) {
	cases := []struct {
		q         skill.Question
		narrative string
		form      string
		want      []string
		notWant   []string
	}{
		{
			q:         skill.Question{Question: "Which explanation accounts for the shift?", Answer: "assay drift", AnswerType: skill.LabelAnswer},
			narrative: "The review traced the shift to assay drift at the central lab, not to the new kit. Assay drift was ruled in.",
			form:      FormPhrase,
			want:      []string{"assay drift at the central lab"},
		},
		{
			q:         skill.Question{Question: "What produced the false alert?", Answer: "EDR test harness", AnswerType: skill.EntityAnswer},
			narrative: "The alert came from the EDR test harness run by the vendor; it was later disabled.",
			form:      FormPhrase,
			want:      []string{"EDR test harness run by the vendor"},
		},
		{
			q:         skill.Question{Question: "Which exposure explains the readings?", Answer: "contrast agent", AnswerType: skill.LabelAnswer},
			narrative: "Two patients had exposure to a contrast agent for imaging the week before.",
			form:      FormPhrase,
			want:      []string{"contrast agent for imaging", "exposure to a contrast agent", "exposure to a contrast agent for imaging"},
		},
		{
			q:         skill.Question{Question: "By what factor is the analogue's IC50 lower?", Answer: "3", AnswerType: skill.NumericAnswer},
			narrative: "The analogue came in at a third of the parent's IC50; the earlier lot was off by half.",
			form:      FormUnit,
			want:      []string{"3-fold"},
		},
		{
			q:         skill.Question{Question: "What benefit, in mL/min/1.73 m² per year, does the estimate give?", Answer: "3.0", AnswerType: skill.NumericAnswer},
			narrative: "Dropping the site left 3.0 mL/min/1.73 m² per year of benefit.",
			form:      FormUnit,
			want:      []string{"3.0 mL/min/1.73 m² per year"},
		},
		{
			q:         skill.Question{Question: "Which enzyme limits the rate?", Answer: "PFK1", AnswerType: skill.EntityAnswer},
			narrative: "Flux fell as the glycolytic enzyme PFK1 saturated.",
			form:      FormPhrase,
			want:      []string{"the glycolytic enzyme PFK1"},
		},
		{
			q:         skill.Question{Question: "Which enzyme limits the rate?", Answer: "PFK1", AnswerType: skill.EntityAnswer},
			narrative: "Flux fell as PFK1 saturated.",
			form:      FormArticle,
			want:      []string{"the PFK1"},
		},
		{
			q:         skill.Question{Question: "What grade did the reviewers assign?", Answer: "grade 3", AnswerType: skill.LabelAnswer},
			narrative: "The board assigned grade 3 after the audit.",
			form:      FormBareNumber,
			want:      []string{"3"},
		},
		{
			q:         skill.Question{Question: "What was the mean IC50, in µM?", Answer: "12.5", AnswerType: skill.NumericAnswer},
			narrative: "The mean IC50 was 12.5 µM over three runs.",
			form:      FormUnit,
			want:      []string{"12.5 µM"},
		},
		{
			q:         skill.Question{Question: "How many days passed?", Answer: "3", AnswerType: skill.NumericAnswer},
			narrative: "Nothing numeric here.",
			form:      FormNumber,
			want:      []string{"3.0"},
		},
		{
			q:         skill.Question{Question: "How many days passed?", Answer: "46", AnswerType: skill.NumericAnswer},
			narrative: "Nothing numeric here.",
			form:      FormUnit,
			want:      []string{"46 days"},
		},
		{
			q:         skill.Question{Question: "How much was moved?", Answer: "125000", AnswerType: skill.NumericAnswer},
			narrative: "Transfers reached 125000 euros in May.",
			form:      FormNumber,
			want:      []string{"125,000"},
			notWant:   []string{"125000.0"},
		},
		{
			// A number the narrative writes with another unit elsewhere
			// gets no unit when the question asks for a factor.
			q:         skill.Question{Question: "By what factor did it fall?", Answer: "4", AnswerType: skill.NumericAnswer},
			narrative: "Controls stayed within 4% of baseline.",
			form:      FormUnit,
			notWant:   []string{"4%"},
		},
		{
			// The phrase stops before a clause word, punctuation and a
			// code: an agent does not cite another item.
			q:         skill.Question{Question: "Which explanation accounts for the shift?", Answer: "sample swap", AnswerType: skill.LabelAnswer},
			narrative: "A sample swap at KX-12 was suspected. A sample swap was confirmed; another sample swap occurred.",
			form:      FormPhrase,
			notWant:   []string{"sample swap at KX-12", "sample swap at", "sample swap was confirmed"},
		},
	}
	for _, c := range cases {
		got := formTexts(&c.q, c.narrative)
		for _, w := range c.want {
			if !hasText(got[c.form], w) {
				t.Errorf("%q: %s forms %q lack %q (all %v)", c.q.Answer, c.form, got[c.form], w, got)
			}
		}
		for _, w := range c.notWant {
			for _, texts := range got {
				if hasText(texts, w) {
					t.Errorf("%q: unwanted form %q (all %v)", c.q.Answer, w, got)
				}
			}
		}
		all := AgentStyleForms(&c.q, []string{c.narrative})
		if len(all) == 0 || all[0].Form != FormExact || all[0].Text != c.q.Answer {
			t.Errorf("%q: first form %v, want the canonical answer", c.q.Answer, all)
		}
		for _, f := range all {
			if len(f.Text) > skill.MaxAnswerBytes {
				t.Errorf("%q: form %q over the answer cap", c.q.Answer, f.Text)
			}
		}
	}
	// No bare number when the question does not name the label word.
	q := skill.Question{Question: "How was the finding classified?", Answer: "grade 3", AnswerType: skill.LabelAnswer}
	if got := formTexts(&q, "It was classified grade 3."); len(got[FormBareNumber]) != 0 {
		t.Errorf("bare number without the label word in the question: %v", got)
	}
	if AgentStyleForms(nil, nil) != nil || AgentStyleForms(&skill.Question{Answer: " "}, nil) != nil {
		t.Error("forms for no answer")
	}
}

func TestAgentStyleAnswerDeterministic(t *testing.T) {
	narr := "The review traced the shift to assay drift at the central lab. The drift was 12.5 µM."
	q := skill.Question{Question: "Which explanation accounts for the shift?", Answer: "assay drift", AnswerType: skill.LabelAnswer}
	a := AgentStyleAnswer(&q, []string{narr}, 7)
	if a != AgentStyleAnswer(&q, []string{narr}, 7) {
		t.Fatal("same seed, different answers")
	}
	if a.Form == FormExact {
		t.Errorf("picked the canonical answer although other forms exist: %+v", a)
	}
	// Over seeds the pick varies among the forms.
	seen := map[string]bool{}
	for seed := uint64(0); seed < 64; seed++ {
		seen[AgentStyleAnswer(&q, []string{narr}, seed).Text] = true
	}
	if len(seen) < 2 {
		t.Errorf("every seed picks the same form: %v", seen)
	}
	// Only the frames around the canonical answer are left when the
	// text offers nothing.
	q2 := skill.Question{Question: "Which one?", Answer: "competitive", AnswerType: skill.LabelAnswer}
	if got := AgentStyleAnswer(&q2, []string{"Nothing here."}, 1); got.Form != FormLeadIn && got.Form != FormExplained || !strings.Contains(got.Text, "competitive") {
		t.Errorf("got %+v", got)
	}
}

// TestAgentStyleFrames: every question gets one lead-in and one
// explained form of its canonical answer, a whole number up to 99 its
// spelling, and each is one the judge accepts.
func TestAgentStyleFrames(t *testing.T) {
	cases := []struct {
		q       skill.Question
		spelled string
	}{
		{skill.Question{Question: "How many lots failed?", Answer: "42", AnswerType: skill.NumericAnswer}, "forty-two"},
		{skill.Question{Question: "How many lots failed?", Answer: "12", AnswerType: skill.NumericAnswer}, "twelve"},
		{skill.Question{Question: "How many lots failed?", Answer: "30", AnswerType: skill.NumericAnswer}, "thirty"},
		{skill.Question{Question: "How many lots failed?", Answer: "120", AnswerType: skill.NumericAnswer}, ""},
		{skill.Question{Question: "How long was the delay?", Answer: "2.5", AnswerType: skill.NumericAnswer}, ""},
		{skill.Question{Question: "Which aircraft?", Answer: "EI-FXC", AnswerType: skill.EntityAnswer}, ""},
	}
	for _, c := range cases {
		got := formTexts(&c.q, "The report listed "+c.q.Answer+" in the end.")
		if len(got[FormLeadIn]) != 1 || len(got[FormExplained]) != 1 {
			t.Errorf("%q: lead-in %v, explained %v; want one each", c.q.Answer, got[FormLeadIn], got[FormExplained])
		}
		if c.spelled == "" && len(got[FormSpelled]) != 0 || c.spelled != "" && !hasText(got[FormSpelled], c.spelled) {
			t.Errorf("%q: spelled %v, want %q", c.q.Answer, got[FormSpelled], c.spelled)
		}
		for _, form := range []string{FormLeadIn, FormExplained, FormSpelled} {
			for _, text := range got[form] {
				if !strings.Contains(text, c.q.Answer) && form != FormSpelled {
					t.Errorf("%q: %s form %q does not hold the answer", c.q.Answer, form, text)
				}
				if !skill.Judge(&c.q, text, []string{"The report listed " + c.q.Answer + " in the end."}) {
					t.Errorf("%q: the judge refuses the %s form %q", c.q.Answer, form, text)
				}
			}
		}
	}
}

// TestReferenceBrainsInRun: the oracle passes every session; the
// agent-style brain passes exactly the sessions whose picked wordings
// skill.Judge accepts in every round, replayed here independently.
func TestReferenceBrainsInRun(t *testing.T) {
	sets := corpus(t)
	const n = 150
	cfg := baseConfig(sets, n)
	cfg.Attackers = attack.All()[:2]
	r, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := r.Class(OracleClass)
	if !ok || o.Kind != KindReference || o.Group != GroupReference || o.Pass.K != n {
		t.Fatalf("oracle: %+v", o)
	}
	as, ok := r.Class(AgentStyleClass)
	if !ok || as.Sessions != n {
		t.Fatalf("agent-style: %+v", as)
	}
	want := 0
	for i := 0; i < n; i++ {
		set := sets[i%len(sets)]
		s, err := skill.NewSession(set, cfg.Policy, pickReader(cfg.Seed, i))
		if err != nil {
			t.Fatal(err)
		}
		var shown []string
		pass := true
		for {
			c, ok := s.Current()
			if !ok {
				break
			}
			shown = append(shown, c.Narrative)
			var q *skill.Question
			for qi := range set.Parts[c.Round-1].Questions {
				if set.Parts[c.Round-1].Questions[qi].Question == c.Question {
					q = &set.Parts[c.Round-1].Questions[qi]
				}
			}
			ans := AgentStyleAnswer(q, shown, cfg.Seed).Text
			rec, err := s.Submit(ans, skill.Timing{})
			if err != nil {
				t.Fatal(err)
			}
			if !rec.Correct {
				pass = false
			}
		}
		if pass {
			want++
		}
	}
	if as.Pass.K != want {
		t.Errorf("agent-style passed %d sessions, replay says %d", as.Pass.K, want)
	}
	if r.AgentStyle == nil || r.AgentStyle.Sets == 0 || r.AgentStyle.Forms[FormExact].Judged != r.AgentStyle.Questions {
		t.Fatalf("agent-style probe: %+v", r.AgentStyle)
	}
	if r.AgentStyle.Forms[FormExact].Accepted != r.AgentStyle.Questions {
		t.Errorf("the matcher rejects a canonical answer: %+v", r.AgentStyle.Rejected)
	}
	t.Logf("agent-style %d/%d; forms %+v", as.Pass.K, n, r.AgentStyle.Forms)

	cfg.NoReference = true
	r, err = Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Class(OracleClass); ok || r.AgentStyle != nil {
		t.Error("reference brains ran with NoReference")
	}
}

// TestGroupsAndHeadlines: attackers are reported per group and the
// summary names the best of each.
func TestGroupsAndHeadlines(t *testing.T) {
	sets := corpus(t)
	cfg := baseConfig(sets, 60)
	cfg.Attackers = attack.All()[:3]
	cfg.WhiteBox = []attack.Named{{Name: "wb-truth", Description: "knows the answers", Prover: oracle{sets: sets}}}
	cfg.Listing = []attack.Named{{Name: "lister", Description: "lists candidates", Prover: skill.ProverFunc(func() skill.Answerer {
		return skill.AnswerFunc(func(context.Context, skill.Challenge) (string, error) { return "A, B or C", nil })
	})}}
	cfg.SourceKind = skill.SourceCorpus
	r, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string]string{}
	for _, c := range r.Classes {
		groups[c.Name] = c.Group
	}
	for name, g := range map[string]string{attack.Random: GroupGeneric, "wb-truth": GroupWhiteBox, "lister": GroupListing,
		OracleClass: GroupReference, AgentStyleClass: GroupReference, HumanClass: GroupHuman} {
		if groups[name] != g {
			t.Errorf("%s in group %q, want %q", name, groups[name], g)
		}
	}
	check := func(label, class string, k int) {
		t.Helper()
		h, ok := r.Headline(label)
		if !ok || h.Class != class || (k >= 0 && h.Pass.K != k) || h.Pass.N != 60 {
			t.Errorf("%s: %+v, want %s with %d passes", label, h, class, k)
		}
	}
	check(HeadBestWhiteBox, "wb-truth", 60)
	check(HeadBestScript, "wb-truth", 60)
	check(HeadListing, "lister", 0)
	check(HeadOracle, OracleClass, 60)
	check(HeadAgentStyle, AgentStyleClass, -1)
	if h, _ := r.Headline(HeadBestGeneric); h.Class == "" || groups[h.Class] != GroupGeneric {
		t.Errorf("best generic %+v", h)
	}
	if r.SourceKind != "corpus" {
		t.Errorf("source kind %q", r.SourceKind)
	}
	r.Validation = NewValidation("test filter", "because")
	r.Validation.Record("a.json", sets[0], sets[0], "", "", []string{"script:router", "script:router"})
	r.Validation.Record("b.json", sets[1], nil, "leakage", "part 2 names it", nil)
	r.Validation.Attackers, r.Validation.RandomSeed = []string{attack.Random, attack.Router}, attack.DefaultRandomSeed
	r.AttackSeed = HeldOutSeed(attack.DefaultRandomSeed)
	var buf bytes.Buffer
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"summary: session pass rate", "best white-box", "wb-truth", "60/60 = 100.00%",
		"candidate list", "validation filter (test filter): 1 of 2 sets kept", "script:router=2", "b.json: REJECTED leakage",
		"agent-style wordings judged", "white-box", "source kind: corpus",
		"random attacker: seed 2 (the validation filter's is seed 1)",
		"filter attackers (each fails the kept questions by construction): random (seed 1; this run's has seed 2, held out), router"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("text report lacks %q", want)
		}
	}
	// Without the groups the summary says they did not run.
	cfg.WhiteBox, cfg.Listing = nil, nil
	r, err = Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h, ok := r.Headline(HeadBestWhiteBox); !ok || h.Class != "" || h.Pass.N != 0 {
		t.Errorf("best white-box without white-box attackers: %+v", h)
	}
	if err := (&Config{Source: &listSource{sets: sets}, Sessions: 1, Policy: skill.DefaultPolicy(), SourceKind: "bogus"}).check(); err == nil {
		t.Error("unknown source kind accepted")
	}
}

func (c *Config) check() error {
	_, err := c.normalize()
	return err
}

// The eval's random attacker is never the validation filter's, which
// fails the questions the filter kept by construction.
func TestHeldOutSeed(t *testing.T) {
	if got := HeldOutSeed(attack.DefaultRandomSeed); got == attack.DefaultRandomSeed {
		t.Errorf("HeldOutSeed(%d) = %d, the filter's seed", attack.DefaultRandomSeed, got)
	}
	for _, s := range []uint64{0, 2, 3, 99} {
		if got := HeldOutSeed(s); got != s {
			t.Errorf("HeldOutSeed(%d) = %d, want the run's seed", s, got)
		}
	}
}

func TestValidationRecord(t *testing.T) {
	sets := corpus(t)
	v := NewValidation("f", "")
	if v.MinKeptPerPart != -1 {
		t.Fatal(v.MinKeptPerPart)
	}
	kept := *sets[0]
	kept.Parts = append([]skill.Part(nil), sets[0].Parts...)
	kept.Parts[1].Questions = kept.Parts[1].Questions[:1]
	v.Record("x", sets[0], &kept, "", "", []string{"script:random"})
	v.Record("y", sets[1], nil, "", "", nil)
	in := 0
	for _, s := range sets[:2] {
		for _, p := range s.Parts {
			in += len(p.Questions)
		}
	}
	keptQ := 0
	for _, p := range kept.Parts {
		keptQ += len(p.Questions)
	}
	if v.SetsIn != 2 || v.SetsKept != 1 || v.QuestionsIn != in || v.QuestionsKept != keptQ || v.MinKeptPerPart != 1 ||
		v.DropsBy["script:random"] != 1 || v.Rejected["rejected"] != 1 || len(v.Sets) != 2 {
		t.Errorf("%+v", v)
	}
	var nilV *Validation
	nilV.Record("z", sets[0], nil, "", "", nil) // no panic
}

func TestSecondTicks(t *testing.T) {
	ts := secondTicks{}.Ticks(1e-7, 1e3)
	var labels []string
	for _, tk := range ts {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	want := "100ns 1µs 10µs 100µs 1ms 10ms 100ms 1s 10s 100s 1000s"
	if strings.Join(labels, " ") != want {
		t.Errorf("labels %v, want %s", labels, want)
	}
	var st secondTicks
	if st.Ticks(0, 1) != nil || st.Ticks(2, 1) != nil {
		t.Error("ticks for a bad range")
	}
}

// TestLLMCorpusAgentStyle measures the reference brains on the LLM-written
// sample sets when they are present (they are not part of the project).
func TestLLMCorpusAgentStyle(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "llm-corpus", "sets")
	if _, err := os.Stat(dir); err != nil {
		t.Skip("LLM-written sample corpus absent")
	}
	sets, err := skill.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(sets, 200)
	r, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := r.Class(OracleClass)
	as, _ := r.Class(AgentStyleClass)
	if o.Pass.K != 200 {
		t.Errorf("oracle passed %d/200", o.Pass.K)
	}
	t.Logf("agent-style %s; forms %+v", rateCell(as.Pass), r.AgentStyle.Forms)
	for _, x := range r.AgentStyle.Rejected {
		t.Logf("rejected %s %q for %q", x.Form, x.Text, x.Answer)
	}
}

func TestAgentStyleNoDateUnit(t *testing.T) {
	q := skill.Question{Question: "How many checks failed?", Answer: "3", AnswerType: skill.NumericAnswer}
	got := formTexts(&q, "The audit closed on 3 Dec after review.")
	if hasText(got[FormUnit], "3 Dec") {
		t.Errorf("a date taken for a unit: %v", got)
	}
	q = skill.Question{Question: "What was the concentration?", Answer: "3", AnswerType: skill.NumericAnswer}
	if got := formTexts(&q, "The buffer held 3 mM of salt."); !hasText(got[FormUnit], "3 mM") {
		t.Errorf("unit missing: %v", got)
	}
}

// TestSummaryAllZero: when every class of a group scored 0 the summary
// names no "best" of it, only the class that got furthest.
func TestSummaryAllZero(t *testing.T) {
	r := &Report{Headlines: []Headline{
		{Label: HeadBestGeneric, Class: "router", Pass: Wilson(0, 3000)},
		{Label: HeadBestWhiteBox, Class: "whitebox-prompt", Pass: Wilson(12, 3000)},
		{Label: HeadListing, Class: "candidate-list", Pass: Wilson(0, 3000)},
	}}
	var buf bytes.Buffer
	if err := r.writeSummary(&errWriter{w: &buf}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"none passed (furthest: router)", "whitebox-prompt", "candidate-list"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "furthest: whitebox-prompt") || strings.Contains(out, "furthest: candidate-list") {
		t.Errorf("a class that passed, or a single-class group, named as furthest:\n%s", out)
	}
}

// TestAgentStylePlainNumberNoUnit: a question that asks for a plain number
// gets no unit from the narrative, whose equal number may measure
// something else (procedural eval, seed 1: "14.7 GB" for a difference of
// anomaly scores, where 14.7 GB was a host's staged data).
func TestAgentStylePlainNumberNoUnit(t *testing.T) {
	q := skill.Question{Question: "What is the gap between its anomaly score and the highest among the other hosts? Give the value as a plain number.",
		Answer: "14.7", AnswerType: skill.NumericAnswer}
	got := formTexts(&q, "Host lon-7 staged 14.7 GB for exfiltration. Its anomaly score was 52.1.")
	if len(got[FormUnit]) != 0 {
		t.Errorf("a unit for a plain number: %v", got[FormUnit])
	}
	// The same for "Answer with the number only." (procedural eval seed
	// 1, 10,000 sessions: "30.3 GB" for a difference of anomaly scores).
	q.Question = "What is the difference between their anomaly score values? Answer with the number only."
	if got := formTexts(&q, "Host lon-7 staged 14.7 GB for exfiltration."); len(got[FormUnit]) != 0 {
		t.Errorf("a unit for the number only: %v", got[FormUnit])
	}
	q.Question = "How much data did host lon-7 stage?"
	if got := formTexts(&q, "Host lon-7 staged 14.7 GB for exfiltration."); !hasText(got[FormUnit], "14.7 GB") {
		t.Errorf("unit missing: %v", got)
	}
}

// TestAgentStylePhraseNoContrast: a descriptive phrase does not run on
// into "over" (or "behind", "beyond") and the item it is ranked against:
// "favoured Cronobacter sakazakii ST126 over the multi-host serovar"
// gave "Cronobacter sakazakii ST126 over the multi-host serovar", which
// names another candidate (procedural eval, seed 1).
func TestAgentStylePhraseNoContrast(t *testing.T) {
	q := skill.Question{Question: "Which pathogen had the lowest share? Give the pathogen's identifier or name.", Answer: "Cs-ST126",
		Answers: []string{"Cs-ST126", "Cronobacter sakazakii ST126", "infant-formula opportunist"}, AnswerType: skill.EntityAnswer}
	n := "An interim summary favoured the infant-formula opportunist over the multi-host serovar, citing its re-tests. " +
		"The infant-formula opportunist behind the multi-host serovar was ranked second. The infant-formula opportunist in the sprouted seeds batch was found."
	got := formTexts(&q, n)
	for _, p := range got[FormPhrase] {
		if strings.Contains(p, "serovar") {
			t.Errorf("phrase names another candidate: %q", p)
		}
	}
	if !hasText(got[FormPhrase], "infant-formula opportunist in the sprouted seeds batch") {
		t.Errorf("phrase missing: %v", got[FormPhrase])
	}
}
