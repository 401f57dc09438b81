package generate

import (
	"slices"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

func ratios(text string) []string {
	f := newFacts()
	scan(text, f)
	var out []string
	for _, k := range f.order {
		if strings.HasPrefix(k, "ratio:") {
			out = append(out, k)
		}
	}
	return out
}

// The ratio parser reads the forms a model writes for the same count.
func TestRatioForms(t *testing.T) {
	for _, c := range []struct {
		text string
		want string // "" for no ratio
	}{
		{"It held in 0 of 5 assays.", "ratio:0/5"},
		{"It held in none of the five assays.", "ratio:0/5"},
		{"It held in not one of the five assays.", "ratio:0/5"},
		{"It held in not a single one of the 5 assays.", "ratio:0/5"},
		{"Of the 5 assays, none came back clean.", "ratio:0/5"},
		{"Of the five assays, not one came back clean.", "ratio:0/5"},
		{"After review. Of the four labs, all saw the shift.", "ratio:4/4"},
		{"Of the four labs, two saw the shift.", "ratio:2/4"},
		{"It showed in 4 of 4 labs.", "ratio:4/4"},
		{"It showed in all four labs.", "ratio:4/4"},
		{"It showed in every one of the four labs.", "ratio:4/4"},
		{"It recurred in 2 of the 2 runs.", "ratio:2/2"},
		{"It recurred in both runs.", "ratio:2/2"},
		{"It recurred in both of the two runs.", "ratio:2/2"},
		{"Neither of the two runs showed it.", "ratio:0/2"},
		{"It touched both the lab and the field site.", ""},
		{"The one whose value rose was checked.", ""},
		{"A note on the matter of the five sites: none was flagged.", ""},
	} {
		got := ratios(c.text)
		if c.want == "" && len(got) > 0 || c.want != "" && !slices.Contains(got, c.want) {
			t.Errorf("%q: %v, want %q", c.text, got, c.want)
		}
	}
	// A ratio read from a clause-leading count does not also leave its
	// numerator behind as a new number.
	f := newFacts()
	scan("Of the 5 assays, 3 came back clean.", f)
	if f.count["num:3|"] != 0 || f.count["ratio:3/5"] != 1 {
		t.Errorf("facts %v", f.count)
	}
}

func hybridFixture() *skill.Set {
	return &skill.Set{Domain: "biochemistry", Parts: []skill.Part{
		{Narrative: "AUDIT LOG\n\nThe zinc-dependent hydratase CA2 kept its drift in 4 of 4 labs at 38.1%.\n\nKT-919 shows two peaks; RX-390 (soratafenib) faded.", Questions: []skill.Question{
			{Question: "Which enzyme kept its drift at every lab above the 30% threshold?", Answer: "CA2", Answers: []string{"CA2", "carbonic anhydrase 2"}, Distractors: []string{"KT-919"}, ReasoningType: skill.Negation, AnswerType: skill.EntityAnswer},
			{Question: "What reading did the zinc-dependent hydratase CA2 give, in percent?", Answer: "38.1", Answers: []string{"38.1", "38.1%"}, ReasoningType: skill.MultiHop, AnswerType: skill.NumericAnswer},
		}},
		{Narrative: "Part two text with KT-919.", Questions: []skill.Question{
			{Question: "Which compound acted on the enzyme singled out in the first report?", Answer: "KT-919", Answers: []string{"KT-919"}, ReasoningType: skill.MultiHop, AnswerType: skill.EntityAnswer, DependsOn: []int{1}},
		}},
		{Narrative: "Part three text.", Questions: []skill.Question{
			{Question: "Which tier applies?", Answer: "amber", Answers: []string{"amber"}, ReasoningType: skill.Conditional, AnswerType: skill.LabelAnswer},
		}},
	}}
}

// The keep list leaves out heading words, bare small counts and ratio
// fragments (all still checked), and keeps codes, aliases and measures.
func TestKeepTerms(t *testing.T) {
	inv := newInventory(hybridFixture())
	keep := inv.keepTerms(0)
	for _, no := range []string{"AUDIT", "LOG", "two", "4 of 4"} {
		if slices.Contains(keep, no) {
			t.Errorf("keep list %q has %q", keep, no)
		}
	}
	for _, yes := range []string{"CA2", "KT-919", "38.1%", "zinc-dependent hydratase", "soratafenib"} {
		if !slices.Contains(keep, yes) {
			t.Errorf("keep list %q lacks %q", keep, yes)
		}
	}
	// Still checked: dropping the heading or the ratio fails the part.
	n := inv.set.Parts[0].Narrative
	for _, bad := range []string{strings.Replace(n, "AUDIT LOG", "Audit record", 1), strings.Replace(n, "4 of 4", "3 of 4", 1)} {
		if r, _ := inv.checkRewording(0, bad, DefaultLengthDrift); r != RejectFactLost {
			t.Errorf("%q: reason %q", bad, r)
		}
	}
}

func TestCheckQuestion(t *testing.T) {
	inv := newInventory(hybridFixture())
	if got := inv.questionKeep(0, 1); !slices.Equal(got, []string{"CA2", "zinc-dependent hydratase"}) {
		t.Errorf("keep %q", got)
	}
	if got := inv.questionKeep(0, 0); !slices.Equal(got, []string{"30%"}) {
		t.Errorf("keep %q", got)
	}
	for _, c := range []struct {
		pi, qi int
		text   string
		why    string
	}{
		{0, 0, "Above the 30% threshold, which enzyme held its drift at every single lab?", ""},
		{0, 1, "In percent, which reading came from the zinc-dependent hydratase CA2?", ""},
		{2, 0, "By the stated rule, which tier?", ""},
		{0, 0, "  Which enzyme kept its drift at every lab above the 30% threshold? ", QuestionKeptUnchanged},
		{0, 0, "", QuestionKeptShape},
		{0, 0, "Which enzyme kept its drift\nat every lab above the 30% threshold?", QuestionKeptShape},
		{0, 0, "Which enzyme kept drifting?", QuestionKeptLength},
		{0, 0, "Which enzyme, across every lab and each of the repeat screens run over the whole of the period, held its drift above the stated 30% threshold, as the log shows?", QuestionKeptLength},
		{0, 0, "Was it carbonic anhydrase 2 that held its drift above the 30% threshold?", QuestionKeptAnswer},
		{0, 0, "Which enzyme, not KT-919, held its drift above the 30% threshold at every lab?", QuestionKeptAnswer},
		{1, 0, "Which compound acted on CA2, the enzyme singled out in the first report?", QuestionKeptAnswer},
		{0, 0, "Which enzyme held its drift at every lab above the threshold that was set?", QuestionKeptFactLost},
		{0, 1, "In percent, which reading came from CA2, the enzyme with the drift?", QuestionKeptFactLost},
		{0, 0, "Which enzyme held its drift at all 4 labs above the 30% threshold?", QuestionKeptFactAdded},
		{0, 0, "Which enzyme held its drift at every lab above the 30% threshold in RX-390 runs?", QuestionKeptFactAdded},
	} {
		got, why, detail := inv.checkQuestion(c.pi, c.qi, c.text)
		if why != c.why || (why == "") != (got != "") {
			t.Errorf("%q: %q %q (%s), want %q", c.text, got, why, detail, c.why)
		}
	}
}

// The rewording prompt asks for half the length drift the check accepts.
func TestRewordPromptWindow(t *testing.T) {
	s := hybridFixture()
	s.Parts[0].Narrative = strings.Repeat("word ", 200)
	p := buildRewordPrompt(s, 0, nil, rewordStyles[0], DefaultLengthDrift)
	if !strings.Contains(p.User, "between 175 and 225 words") {
		t.Errorf("prompt window: %s", p.User)
	}
	if lo, hi := promptWordWindow(200, 0.1); lo != 190 || hi != 210 {
		t.Errorf("window %d..%d", lo, hi)
	}
}

// The question prompt lists every question with its id and its terms,
// never an answer.
func TestQuestionPrompt(t *testing.T) {
	s := hybridFixture()
	inv := newInventory(s)
	keep := make([][][]string, len(s.Parts))
	for pi, p := range s.Parts {
		for qi := range p.Questions {
			keep[pi] = append(keep[pi], inv.questionKeep(pi, qi))
		}
	}
	p := buildQuestionPrompt(s, keep)
	for _, want := range []string{RewordQuestionsStart, RewordQuestionsEnd, "[1.1] Which enzyme", "[2.1] Which compound", "[3.1] Which tier applies?", "keep: 30%", "keep: CA2; zinc-dependent hydratase", "Rewrite the 4 questions"} {
		if !strings.Contains(p.User, want) {
			t.Errorf("question prompt lacks %q:\n%s", want, p.User)
		}
	}
	for _, no := range []string{"carbonic anhydrase", "amber", "38.1"} {
		if strings.Contains(p.User, no) {
			t.Errorf("question prompt shows %q", no)
		}
	}
	if !strings.Contains(p.System, `{"questions": [{"id": "1.1"`) {
		t.Errorf("system prompt lacks the output shape")
	}
}

// A relation between two names stays stated together: dropping it, or
// moving its ends into sentences apart, fails the part even though both
// names survive; splitting it into two adjacent sentences passes.
func TestRelationsStayStated(t *testing.T) {
	skel := &skill.Set{Domain: "biochemistry", Parts: []skill.Part{
		{Narrative: "REVIEW\n\nKT-919 replicated in 4 of 4 re-tests. RX-390 kept its drift. In the re-tests, RX-390 fared exactly as KT-919 did. The sampling was routine. Staff rotated on Monday. The archive closed late.", Questions: []skill.Question{
			{Question: "Which compound replicated?", Answer: "KT-919", Answers: []string{"KT-919"}, ReasoningType: skill.Negation, AnswerType: skill.EntityAnswer},
		}},
		{Narrative: "Part two.", Questions: []skill.Question{{Question: "Q?", Answer: "a", Answers: []string{"a"}, ReasoningType: skill.MultiHop, AnswerType: skill.LabelAnswer}}},
		{Narrative: "Part three.", Questions: []skill.Question{{Question: "Q?", Answer: "b", Answers: []string{"b"}, ReasoningType: skill.Causal, AnswerType: skill.LabelAnswer}}},
	}}
	inv := newInventory(skel)
	for _, c := range []struct {
		text string
		want Reason
	}{
		{"REVIEW\n\nKT-919 replicated in 4 of 4 re-tests. RX-390 kept its drift. The re-tests went for RX-390 just as they did for KT-919. The sampling was routine. Staff rotated on Monday. The archive closed late.", ""},
		{"REVIEW\n\nRX-390 kept its drift. KT-919 replicated in 4 of 4 re-tests, which set the pattern. RX-390 fared exactly the same way in them. The sampling was routine. Staff rotated on Monday. The archive closed late.", ""},
		{"REVIEW\n\nRX-390 kept its drift. The sampling was routine. Staff rotated on Monday. The archive closed late and the re-tests were filed. KT-919 replicated in 4 of 4 re-tests.", RejectFactLost},
		{"REVIEW\n\nKT-919 replicated in 4 of 4 re-tests. The sampling was routine. Staff rotated on Monday, and the re-tests were logged. The archive closed late. RX-390 kept its drift.", RejectFactLost},
	} {
		got, detail := inv.checkRewording(0, c.text, 0.5)
		if got != c.want {
			t.Errorf("%q: reason %q (%s), want %q", c.text, got, detail, c.want)
		}
		if c.want == RejectFactLost && !strings.Contains(detail, "relation") {
			t.Errorf("%q: detail %q does not name the relation", c.text, detail)
		}
	}
}
