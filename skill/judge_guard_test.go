package skill

import (
	"strings"
	"testing"
)

// A sentence end (. ? ! or … before white space) is a clause mark in M5;
// a decimal point inside a number, a point directly before a word and a
// point after an abbreviation that holds points ("e.g.") are not.
func TestClauseGapSentenceEnd(t *testing.T) {
	cases := []struct {
		gap, prev string
		want      bool
	}{
		{" ", "file", false},
		{". ", "file", true},
		{".\n", "file", true},
		{"? ", "kilns", true},
		{"! ", "kilns", true},
		{"\u2026 ", "kilns", true},
		{"\u2026", "kilns", true},
		{".\" ", "stop", true},
		{". ", "e.g", false},
		{". ", "U.S", false},
		{". ", "10.6", true}, // a sentence ending in a number
		{" .", "by", false},  // ".5": the point belongs to what follows
		{", ", "green", true},
		{" \u2013 ", "green", true},
		{"'", "year", false},
	}
	for _, c := range cases {
		if got := clauseGap(c.gap, c.prev); got != c.want {
			t.Errorf("clauseGap(%q after %q) = %v, want %v", c.gap, c.prev, got, c.want)
		}
	}
	const n = "The kilns were cold. Two more points for the file. Orchard Lane recorded 9 hours, e.g. on 12.5 percent days."
	for _, c := range []struct {
		run  string
		want bool
	}{
		{"Two more points for the file", true},
		{"for the file Orchard Lane", false},
		{"cold Two more", false},
		{"e.g. on 12.5 percent days", true},
		{"on 12.5 percent", true},
	} {
		if got := clauseRun(n, Words(c.run), nil); got != c.want {
			t.Errorf("clauseRun(%q) = %v, want %v", c.run, got, c.want)
		}
	}
}

// The white-box reviewer's repro: a verbatim run across a sentence end
// no longer passes M5.
func TestJudgeWindowStopsAtSentenceEnd(t *testing.T) {
	q := &Question{Question: "Setting aside every station explained by another source, which station corroborates the plume?",
		Answer: "Orchard Lane", Answers: []string{"Orchard Lane", "Orchard Lane station"}, ReasoningType: Negation, AnswerType: EntityAnswer}
	n := "The two kilns were cold. Two more points for the file. Orchard Lane, 5 km south-west, recorded 9 hours."
	if ok, rule := JudgeRule(q, "Two more points for the file Orchard Lane", []string{n}); ok {
		t.Errorf("run across a sentence end accepted by %s", rule)
	}
	if ok, rule := JudgeRule(q, "Two more points for the file Orchard Lane", []string{strings.Replace(n, "file.", "file", 1)}); !ok || rule != RuleWindow {
		t.Errorf("the same run inside one sentence: %v by %s, want M5", ok, rule)
	}
}

// A word of a distractor outside the matched variant names that
// distractor (the reviewer's three cases), unless it is a function word, a
// variant's word or a question word.
func TestJudgeDistractorWords(t *testing.T) {
	rule := "Under the standing rule a count above 300 earns red status, a count from 100 to 300 amber status and anything lower green status; the water safety plan calls a source with two exceedances restricted, one a watch source, none unrestricted; a lot failing once is downgraded, never a released lot, twice a withdrawn lot."
	cases := []struct {
		q       Question
		answers map[string]bool
	}{
		{Question{Question: "Under the standing rule, which status does the station's count earn?", Answer: "red",
			Answers: []string{"red", "red status"}, Distractors: []string{"amber status", "green status"}},
			map[string]bool{"red amber green": false, "green red": false, "red, amber": false, "the red status": true, "red status": true, "red count status": true, "red": true}},
		{Question{Question: "Under the water safety plan, what classification does that source receive?", Answer: "restricted",
			Answers: []string{"restricted", "restricted source"}, Distractors: []string{"watch source", "unrestricted source"}},
			map[string]bool{"restricted watch unrestricted": false, "watch restricted": false, "restricted unrestricted": false, "a restricted source": true, "restricted per the water safety plan": true}},
		{Question{Question: "What certification status does that lot receive under the laboratory's rules?", Answer: "downgraded",
			Distractors: []string{"released lot", "withdrawn lot"}},
			map[string]bool{"released downgraded withdrawn": false, "downgraded withdrawn": false, "downgraded lot": true, "the downgraded status": true}},
		// A distractor word that is neither a variant's nor a question's word.
		{Question{Question: "Under the standing rule, which tier does the station's count earn?", Answer: "red",
			Distractors: []string{"amber status", "green status"}},
			map[string]bool{"red status": false, "the red tier": true}},
	}
	for _, c := range cases {
		q := c.q
		q.ReasoningType, q.AnswerType = Conditional, LabelAnswer
		for a, want := range c.answers {
			if got, r := JudgeRule(&q, a, []string{rule}); got != want {
				t.Errorf("%q to %q: %v by %s, want %v", a, q.Question, got, r, want)
			}
		}
	}
}

// The question's own lower-case words may stand around the answer when
// the question lists no distractors (what agents write: "batch PD-4707",
// "The status is red"), but they never let an answer name a second
// candidate: not a code or number (never question words), not a word the
// question does not use, and nothing at all when the question names an
// accepted variant (a question that lists the candidates).
func TestJudgeQuestionWordsAndEcho(t *testing.T) {
	n := []string{"The slicer ran two batches: PD-4707 averaged 9.1 days over its duplicate shelf-life results and PD-4711 averaged 7.4 days. Alert tiers are green, amber, red; the station earned red after the review."}
	type tc struct {
		q       Question
		answers map[string]bool
	}
	cases := []tc{
		{Question{Question: "Which batch from the implicated slicer had the highest mean of its duplicate shelf-life results?", Answer: "PD-4707", AnswerType: EntityAnswer},
			map[string]bool{
				"batch PD-4707": true, "the PD-4707 batch": true, "The batch is PD-4707": true, "PD-4707 had the highest mean": true,
				// echo attacks: question words with a second candidate
				"batch PD-4707 batch PD-4711": false, "highest mean batch PD-4711 PD-4707": false, "PD-4707 PD-4711": false,
				"PD-4707 or PD-4711 batch": false, "which batch had the highest mean PD-4707 7.4": false,
				"PD-4707 days": false, // a narrative word the question does not use
			}},
		{Question{Question: "Which status does the station earn?", Answer: "red", AnswerType: LabelAnswer},
			map[string]bool{"The status is red": true, "red status": true, "red amber": false, "status red green": false, "the station status is red not amber": false}},
		// The question names the answer among the candidates: no question words.
		{Question{Question: "Which status, amber or red, does the station earn?", Answer: "red", AnswerType: LabelAnswer},
			map[string]bool{"red": true, "the red": true, "amber red": false, "red amber": false, "status amber red": false, "the status is red": false}},
		// A word the question only capitalises is no question word.
		{Question{Question: "Which Status does the station earn?", Answer: "red", AnswerType: LabelAnswer},
			map[string]bool{"red Status": false, "red station": true}},
		// One number only, whatever the question's words.
		{Question{Question: "What is the mean of the batch in days?", Answer: "9.1", AnswerType: NumericAnswer},
			map[string]bool{"mean 9.1 days": true, "the batch mean is 9.1": true, "mean 9.1 days batch 7.4": false, "9.1 or 7.4 days": false}},
	}
	for _, c := range cases {
		q := c.q
		q.ReasoningType = Comparison
		for a, want := range c.answers {
			if got, r := JudgeRule(&q, a, n); got != want {
				t.Errorf("%q to %q: %v by %s, want %v", a, q.Question, got, r, want)
			}
		}
	}
}

// Echoing the question never answers it: every run of the question's own
// words (up to the answer cap) is refused, for a question that names no
// variant, with or without distractors.
func TestJudgeQuestionEchoAlone(t *testing.T) {
	n := []string{judgeNarrative}
	for _, d := range [][]string{nil, {"sample swap", "reagent lot change"}} {
		q := &Question{Question: "Which cause did the review settle on for the excursion at the central lab, given the screened enzymes?",
			Answer: "assay drift", ReasoningType: Causal, AnswerType: LabelAnswer, Distractors: d}
		ws := strings.Fields(strings.Trim(q.Question, "?"))
		for i := range ws {
			for j := i + 1; j <= len(ws); j++ {
				a := strings.Join(ws[i:j], " ")
				if len(a) > MaxAnswerBytes {
					break
				}
				if ok, r := JudgeRule(q, a, n); ok {
					t.Errorf("echo %q accepted by %s", a, r)
				}
			}
		}
	}
}

// M5 reads a narrative's words as Words does: a number against its unit
// splits, digit groups merge, and the merged number keeps its sign.
func TestClauseWordsNumbersAsWords(t *testing.T) {
	n := "The fine was 125 000 euros; the well reached −10.6km, e.g. deep."
	ws, _ := clauseWords(n)
	want := Words(n)
	if len(ws) != len(want) {
		t.Fatalf("clauseWords: %d words, Words: %d", len(ws), len(want))
	}
	for i := range ws {
		if !ws[i].Same(want[i]) {
			t.Errorf("word %d: clauseWords %q, Words %q", i, ws[i].Text, want[i].Text)
		}
	}
}

// hasASCIIRead is strings.ContainsAny(s, asciiRead).
func TestHasASCIIRead(t *testing.T) {
	for _, s := range []string{"", "a-b", "FL\u20110417", "x\u2010", "\u2012\u2013\u2014 \u201c\u201d", "\xe2\x80", "a\xe2\x80\x91", "\xe2\x80\xe2\x80\x90", "€‑", "tail \xe2",
		"CO\u2082", "\u2080", "\u2089x", "\u208a\u207f\u00b2\u00b3\u2079 m\u00b2", "\xe2\x82", "\xe2\xe2\x82\x85", "€\u2082", "\u20ac\u2089", "\xe2\x82\x8a\xe2\x82\x7f"} {
		if got, want := hasASCIIRead(s), strings.ContainsAny(s, asciiRead); got != want {
			t.Errorf("%q: %v, want %v", s, got, want)
		}
	}
}
