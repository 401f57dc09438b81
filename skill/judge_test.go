package skill

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

const judgeNarrative = "Early discussion blamed sample swap at the biobank. The review traced the excursion " +
	"to assay drift at the central lab; a reagent lot change was ruled out. PFK1 (phosphofructokinase 1) " +
	"and HK2 (hexokinase 2) were screened; the deviation reached 29.4 percent."

// An answer that lists the right candidate next to any other candidate is
// wrong, whatever order, separator or form the list takes.
func TestJudgeRefusesEveryListOfCandidates(t *testing.T) {
	q := &Question{Question: "Which cause held up?", Answer: "assay drift", ReasoningType: Causal, AnswerType: LabelAnswer,
		Answers:     []string{"assay drift", "assay drift at the central lab"},
		Distractors: []string{"sample swap", "sample swap at the biobank", "reagent lot change"}}
	forms := []string{"assay drift", "assay drift at the central lab", "the assay drift"}
	for _, right := range forms {
		for _, other := range q.Distractors {
			for _, sep := range []string{" ", ", ", "; ", " / ", " or ", " and ", " vs ", " (", " - "} {
				for _, a := range []string{right + sep + other, other + sep + right} {
					if len(a) > MaxAnswerBytes {
						continue
					}
					if Judge(q, a, []string{judgeNarrative}) {
						t.Errorf("list %q accepted", a)
					}
				}
			}
		}
		if !Judge(q, right, []string{judgeNarrative}) {
			t.Errorf("right answer %q refused", right)
		}
	}
}

// A numeric answer states one number: every pair of numbers is wrong.
func TestJudgeNumericOneNumberOnly(t *testing.T) {
	q := &Question{Question: "What deviation was recorded?", Answer: "29.4", ReasoningType: MultiHop, AnswerType: NumericAnswer}
	for _, a := range []string{"29.4 29.5", "29.5 29.4", "29.4 or 30", "29.4-30", "29.4 to 30", "29.4/30"} {
		if Judge(q, a, []string{judgeNarrative}) {
			t.Errorf("%q accepted", a)
		}
	}
	for _, a := range []string{"29.4", "29.40", "29.4 percent", "29.4%", "about 29.4"} {
		if !Judge(q, a, []string{judgeNarrative}) {
			t.Errorf("%q refused", a)
		}
	}
	// "about" is neither a function nor a narrative word here: it is
	// accepted only as a hedge before the answer (rule M0's lead-in).
	if Judge(q, "29.4 about", []string{judgeNarrative}) {
		t.Errorf("%q accepted", "29.4 about")
	}
}

func TestWordsNumbers(t *testing.T) {
	cases := []struct {
		in   string
		want []string // word texts; numbers as their RatString
	}{
		{"£125,000", []string{"125000"}},
		{"−3.2 points", []string{"-16/5", "points"}},
		{"x-3.2", []string{"x-3.2"}},
		{"AChE-γ (acetylcholinesterase)", []string{"ache-γ", "acetylcholinesterase"}},
		{"10.4.28.30", []string{"10.4.28.30"}},
		{"last year's drop.", []string{"last", "year's", "drop"}},
		{"1,25,000", []string{"1,25,000"}},
		// a number against its unit is the number and the unit
		{"10.6km", []string{"53/5", "km"}},
		{"1.6mg/L", []string{"8/5", "mg/l"}},
		{"−10.6km", []string{"-53/5", "km"}},
		{"3B", []string{"3", "b"}},
		{"4-fold", []string{"4-fold"}},
		{"FY2019", []string{"fy2019"}},
		// digit groups after one space, U+00A0 or U+202F
		{"125 000", []string{"125000"}},
		{"£125\u202f000", []string{"125000"}},
		{"1\u00a0250.5 kg", []string{"2501/2", "kg"}},
		{"−1 250", []string{"-1250"}},
		{"125 000km", []string{"125000", "km"}},
		{"100 200 300", []string{"100200300"}},
		{"125  000", []string{"125", "0"}},
		{"0 250", []string{"0", "250"}},
		{"2024 125 000", []string{"2024", "125000"}},
		{"1,250 000", []string{"1250", "0"}},
		{"125 0000", []string{"125", "0"}},
		{"3 250-gram", []string{"3", "250-gram"}},
	}
	for _, c := range cases {
		ws := Words(c.in)
		var got []string
		for _, w := range ws {
			if w.Number != nil {
				got = append(got, w.Number.RatString())
			} else {
				got = append(got, w.Text)
			}
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("Words(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func FuzzJudge(f *testing.F) {
	f.Add("assay drift at the central lab", "assay drift", "sample swap", judgeNarrative)
	f.Add("−3.2", "-3.2", "", "")
	f.Add("3", "grade 3", "grade 1", "which grade")
	f.Add("\xff\xfe", "x", "y", "\x00")
	f.Fuzz(func(t *testing.T, answer, want, distractor, narrative string) {
		q := &Question{Question: "Which grade or item applies?", Answer: want, Distractors: []string{distractor}}
		ok := Judge(q, answer, []string{narrative})
		if len(answer) > MaxAnswerBytes && ok {
			t.Fatalf("oversized answer accepted")
		}
		bare := &Question{Question: q.Question, Answer: want}
		if ok && utf8.ValidString(distractor) && Normalize(answer) == Normalize(distractor) && !Judge(bare, distractor, nil) && len(Words(distractor)) > 0 && !allFunctionWords(Words(distractor)) {
			t.Fatalf("distractor %q accepted as answer to %q", answer, want)
		}
		if Judge(q, want, nil) != (len(want) <= MaxAnswerBytes) {
			t.Fatalf("canonical answer %q not accepted", want)
		}
	})
}

func BenchmarkJudgeContains(b *testing.B) {
	q := &Question{Question: "Which cause held up?", Answer: "assay drift",
		Distractors: []string{"sample swap", "sample swap at the biobank", "reagent lot change"}}
	n := []string{strings.Repeat(judgeNarrative+" ", 20)}
	b.ReportAllocs()
	for b.Loop() {
		Judge(q, "assay drift at the central lab", n)
	}
}

func BenchmarkCountTokens(b *testing.B) {
	s := strings.Repeat(judgeNarrative+" ", 8)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		CountTokens(s)
	}
}

// The ASCII path of Normalize agrees with the general one.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{" PFK1 ", "Grade 1", "ß", "\u212a", "İstanbul", "a\u0301", "\tMiXeD 42 \n", "\x00\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := Normalize(s), fold(norm.NFC.String(strings.TrimSpace(s))); got != want {
			t.Fatalf("Normalize(%q) = %q, want %q", s, got, want)
		}
	})
}

// MatchAny's allocation-free ASCII comparison agrees with comparing the
// normalised forms.
func FuzzMatchAny(f *testing.F) {
	for _, c := range [][2]string{{"Grade 1", " grade 1 "}, {"k", "\u212a"}, {"SS", "ß"}, {"st", "\ufb06"}, {"a", "b"}} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, a, v string) {
		want := len(a) <= MaxAnswerBytes && Normalize(a) == Normalize(v)
		if got := MatchAny(a, []string{v}); got != want {
			t.Fatalf("MatchAny(%q, %q) = %v, want %v", a, v, got, want)
		}
	})
}

func FuzzCountFields(f *testing.F) {
	f.Add("a b  c\td\u00a0e\u2003f\n")
	f.Add("\xff x")
	// Eight-byte runs (the SWAR path) with every ASCII control next to
	// the white space range, fields across run borders, and runs broken by
	// non-ASCII bytes.
	f.Add("abcdefgh ijklmno\tpqrstuv\x08\x0e\x1c\x1f\x0b\x0c\r\nwxyz")
	f.Add("        abcdefghabcdefgh        \u00a0\u00a0abcdefg h")
	f.Add(strings.Repeat("The calibration routine\treported\u2003nominal throughput. ", 5))
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := countFields(s), len(strings.Fields(s)); got != want {
			t.Fatalf("countFields(%q) = %d, want %d", s, got, want)
		}
		if n, bound := CountTokens(s), TokenBound(len(s)); n > bound {
			t.Fatalf("CountTokens(%q) = %d above TokenBound %d", s, n, bound)
		}
	})
}

// An answer framed as a sentence ("Answer: X", "The answer is X.", "It's
// X") or a number hedged ("approximately 29") is judged as what follows
// the lead-in: accepted exactly when that rest is, so the frame gives a
// script nothing it could not send without it.
func TestJudgeLeadIns(t *testing.T) {
	label := &Question{Question: "Which cause held up?", Answer: "assay drift", ReasoningType: Causal, AnswerType: LabelAnswer,
		Answers:     []string{"assay drift", "assay drift at the central lab"},
		Distractors: []string{"sample swap", "sample swap at the biobank", "reagent lot change"}}
	num := &Question{Question: "What deviation was recorded?", Answer: "29.4", ReasoningType: MultiHop, AnswerType: NumericAnswer}
	neg := &Question{Question: "How far did the balance move?", Answer: "-3.2", ReasoningType: MultiHop, AnswerType: NumericAnswer}
	n := []string{judgeNarrative}
	cases := []struct {
		q    *Question
		a    string
		want bool
	}{
		{label, "Answer: assay drift", true},
		{label, "**Answer:** assay drift", true},
		{label, "Final answer: assay drift.", true},
		{label, "The answer is assay drift.", true},
		{label, "The final answer is: assay drift", true},
		{label, "It's assay drift", true},
		{label, "It’s assay drift.", true},
		{label, "It is assay drift at the central lab.", true},
		{label, "it was assay drift", true},
		{num, "approximately 29.4", true},
		{num, "The answer is roughly 29.4 percent.", true},
		{num, "Answer: approx. 29.4", true},
		{num, "around 29.4%", true},
		{num, "about 29.4", true},
		{neg, "Answer: -3.2", true},
		{neg, "approximately −3.2", true},
		// the rest must be accepted on its own
		{label, "Answer: sample swap", false},
		{label, "The answer is assay drift or sample swap", false},
		{label, "It is assay drift, not sample swap", false},
		{label, "Answer:", false},
		{label, "approximately assay drift", false}, // a hedge only for a numeric target
		{num, "approximately 29.4 or 30", false},
		{num, "approximately 29", false},
		{num, "approximately approximately 29.4", false}, // one hedge
		{num, "The answer is the answer is 29.4", false}, // one lead-in
		{num, "29.4 is the answer", true},                // a tail frame (1.4.0)
		{num, "29.4 is the answer, roughly", true},       // 1.5.19: ", " after the number splits; a hedge names nothing
		{label, "sample swap is correct", false},
		{neg, "Answer: 3.2", false},
	}
	for _, c := range cases {
		if got := Judge(c.q, c.a, n); got != c.want {
			t.Errorf("%q for %q: got %v, want %v", c.a, c.q.Answer, got, c.want)
		}
	}
}

// Beside a numeric target's number, a unit may be spelled out or written
// as its code ("10.6 kilometres", "EUR 206,220", "4x") when the question,
// a variant or a shown narrative uses that unit in any spelling; a unit
// nothing mentions stays refused.
func TestJudgeUnitNames(t *testing.T) {
	depth := &Question{Question: "What is the final depth in km of the event?", Answer: "10.6", Answers: []string{"10.6", "10.6 km"},
		ReasoningType: MultiHop, AnswerType: NumericAnswer}
	net := &Question{Question: "What net amount did the subsidiary pay that vendor?", Answer: "206220",
		Answers: []string{"206220", "€206,220"}, ReasoningType: MultiHop, AnswerType: NumericAnswer,
		Distractors: []string{"198,400", "USD 206,220"}}
	nitrate := &Question{Question: "By how many mg/L does the blend exceed the limit?", Answer: "1.6", Answers: []string{"1.6", "1.6 mg/L"},
		ReasoningType: Comparison, AnswerType: NumericAnswer}
	factor := &Question{Question: "By what factor is the analogue's IC50 lower?", Answer: "4", Answers: []string{"4", "4-fold"},
		ReasoningType: MultiHop, AnswerType: NumericAnswer}
	rate := &Question{Question: "What is the drug-arm rate, to one decimal?", Answer: "1.9", Answers: []string{"1.9", "1.9%"},
		ReasoningType: Comparison, AnswerType: NumericAnswer}
	n := []string{"The well reached 10.6 km before the stop."}
	cases := []struct {
		q    *Question
		a    string
		want bool
	}{
		{depth, "10.6 kilometres", true},
		{depth, "10.6 Kilometers", true},
		{depth, "The answer is 10.6 kilometres.", true},
		{depth, "10.6 metres", false}, // no text uses metres
		{depth, "10.6 kilometres 10.7", false},
		{net, "EUR 206,220", true},
		{net, "206,220 euros", true},
		{net, "206 220 EUR", true},
		{net, "GBP 206,220", false}, // no text uses pounds
		{net, "USD 206,220", false}, // names a distractor
		{net, "EUR 206,221", false},
		{nitrate, "1.6 milligrams per litre", true},
		{nitrate, "1.6 mg per liter", true},
		{nitrate, "1.6 micrograms per litre", false},
		{factor, "4x", true},
		{factor, "4 times", true},
		{factor, "4×", true},
		{rate, "1.9 per cent", true},
		{rate, "1.9 pct", true},
		{rate, "1.9 per mille", false},
	}
	for _, c := range cases {
		if got := Judge(c.q, c.a, n); got != c.want {
			t.Errorf("%q for %q: got %v, want %v", c.a, c.q.Answer, got, c.want)
		}
	}
}

// A compound unit the question writes ("in mL/min/1.73 m² per year") may
// stand beside the number; its digits are no second number, and a
// compound unit the question does not write is refused (verification.md
// 1.5.9).
func TestJudgeCompoundUnit(t *testing.T) {
	q := &Question{Question: "What benefit, in mL/min/1.73 m² per year, does the estimate give once the site is dropped?", Answer: "3.0",
		Answers: []string{"3.0", "3", "3.0 mL/min"}, ReasoningType: MultiHop, AnswerType: NumericAnswer}
	n := []string{"Dropping the site left 3.0 mL/min/1.73 m² per year of benefit; the full analysis gave 3.4 mL/min/1.73 m² per year."}
	cases := []struct {
		a    string
		want bool
	}{
		{"3.0 mL/min/1.73 m² per year", true},
		{"3 mL/min/1.73 m² per year", true},
		{"The answer is 3.0 mL/min/1.73 m² per year.", true},
		{"3.0 mL/min/1.73 m² per year — the sensitivity estimate", true},
		{"3.4 mL/min/1.73 m² per year", false},     // the wrong number
		{"3.0 mL/min/3.4 m² per year", false},      // no word of the question
		{"3.0 mL/min/1.73 m² per year 3.4", false}, // two numbers
		{"mL/min/1.73 m² per year", false},         // no number
		{"3.0 1.73", false},                        // 1.73 alone is a number
	}
	for _, c := range cases {
		if got := Judge(q, c.a, n); got != c.want {
			t.Errorf("%q: got %v, want %v", c.a, got, c.want)
		}
	}
	// Only under M3: a label question gains nothing from such a word.
	l := &Question{Question: "Which subgroup, in mL/min/1.73 m² per year, gained most?", Answer: "KIM-9-high", ReasoningType: MultiHop, AnswerType: EntityAnswer}
	if Judge(l, "KIM-9-high mL/min/1.73", n) {
		t.Error("a compound unit was allowed outside M3")
	}
}

// A line break is an explanation separator: the answer on its first line
// is judged by its head, under the tail guard (verification.md 1.5.10).
func TestJudgeLineBreakSeparator(t *testing.T) {
	node := &Question{Question: "At which node of the chain did the cartons go missing?", Answer: "Lowmoor",
		Answers: []string{"Lowmoor", "Lowmoor hub"}, ReasoningType: MultiHop, AnswerType: EntityAnswer,
		Distractors: []string{"Daventry", "Daventry DC"}}
	count := &Question{Question: "How many lots failed the second inspection?", Answer: "3", ReasoningType: MultiHop,
		AnswerType: NumericAnswer, Distractors: []string{"four"}}
	n := []string{"The cartons left Felixstowe complete. The Lowmoor hub counted 40 short; Daventry DC received what Lowmoor sent. Three lots failed the second inspection; four had failed the first."}
	cases := []struct {
		q    *Question
		a    string
		want bool
	}{
		{node, "Lowmoor\n\nExplanation: the count fell short at the hub.", true},
		{node, "Lowmoor hub\r\nThe hub counted short.", true},
		{node, "Answer:\nLowmoor", true}, // no raw word before the break: no split
		{node, "Daventry\nLowmoor", false},
		{node, "Lowmoor\nnot Daventry", false},
		{node, "Lowmoor\nDaventry DC", false},
		{count, "3\n\nThree lots failed the second inspection.", true},
		{count, "3\nfour", false},
		{count, "4\n3", false},
	}
	for _, c := range cases {
		if got := Judge(c.q, c.a, n); got != c.want {
			t.Errorf("%q: got %v, want %v", c.a, got, c.want)
		}
	}
}

// In an answer to a numeric question a number, a hyphen and a word are the
// number and the word ("3-fold"), under every rule and in the tail guard;
// a distractor is read so too (verification.md 1.5.11).
func TestJudgeHyphenatedNumbers(t *testing.T) {
	factor := &Question{Question: "By what factor did the rate fall at the plant?", Answer: "3", Answers: []string{"3", "3x"},
		ReasoningType: MultiHop, AnswerType: NumericAnswer, Distractors: []string{"4", "4x"}}
	depth := &Question{Question: "What final depth in km did the well reach?", Answer: "10.6", Answers: []string{"10.6", "10.6 km"},
		ReasoningType: MultiHop, AnswerType: NumericAnswer}
	code := &Question{Question: "Which contaminant did the screen flag?", Answer: "3-MCPD", ReasoningType: MultiHop,
		AnswerType: EntityAnswer, Distractors: []string{"glycidol"}}
	n := []string{"The rate fell 3-fold at the plant and 4-fold at the annex; the well reached 10.6 km. The screen flagged 3-MCPD, not glycidol."}
	cases := []struct {
		q    *Question
		a    string
		want bool
	}{
		{factor, "3-fold", true},
		{factor, "three-fold", true},
		{factor, "about 3-fold", true},
		{factor, "3-fold — the plant's drop", true},
		{factor, "4-fold", false},
		{factor, "3 — 4-fold", false},
		{factor, "3 — four-fold", false},
		{factor, "3-fold\n4-fold", false},
		{factor, "3-4-fold", false},
		{factor, "3-fold 4", false},
		{depth, "10.6-km", true},
		{depth, "10.6-metre", false}, // no text uses metres
		{code, "3-MCPD", true},       // no numeric target: read whole
		{code, "the 3-MCPD", true},
	}
	for _, c := range cases {
		if got := Judge(c.q, c.a, n); got != c.want {
			t.Errorf("%q for %q: got %v, want %v", c.a, c.q.Answer, got, c.want)
		}
	}
}

// A number answering a count or a measure is wrong behind a word the texts
// use as a numbered label ("Priority 3" for a count of 3 where the
// narrative ranks incidents Priority 1 to 4); a hedge, a unit or a word
// of no label passes as before.
func TestJudgeNumberLabels(t *testing.T) {
	count := &Question{Question: "How many hosts did the intruder reach?", Answer: "3", Answers: []string{"3", "3 hosts"},
		ReasoningType: MultiHop, AnswerType: NumericAnswer}
	grade := &Question{Question: "Which priority does the incident carry?", Answer: "Priority 3",
		ReasoningType: Conditional, AnswerType: LabelAnswer}
	n := []string{"The intruder reached three hosts in all. Priority 1 applies to a breach of payroll, " +
		"priority 2 to two hosts or more, and Priority 3 otherwise. Level 4 was never used; about 30 alerts fired."}
	cases := []struct {
		q    *Question
		a    string
		want bool
	}{
		{count, "Priority 3", false},
		{count, "priority 3", false},
		{count, "the Level 3", false},
		{count, "3", true},
		{count, "3 hosts", true},
		{count, "3 priority", true}, // after the number: no label reading
		{count, "It is about 3 hosts.", true},
		{count, "the hosts were 3", true},
		{grade, "3", true},
		{grade, "Priority 3", true},
		{grade, "priority 3", true},
	}
	for _, c := range cases {
		if got := Judge(c.q, c.a, n); got != c.want {
			t.Errorf("%q for %q: got %v, want %v", c.a, c.q.Answer, got, c.want)
		}
	}
}

// TestTextCacheBounded: a text cache never holds more than maxTextCache
// texts, and a hit returns what build made without calling it again.
func TestTextCacheBounded(t *testing.T) {
	var c textCache[int]
	builds := 0
	build := func(s string) int { builds++; return len(s) }
	for i := range 3 * maxTextCache {
		if got := c.get(fmt.Sprint("text ", i), build); got != len(fmt.Sprint("text ", i)) {
			t.Fatalf("get %d = %d", i, got)
		}
		if len(c.m) > maxTextCache {
			t.Fatalf("%d texts cached, bound %d", len(c.m), maxTextCache)
		}
	}
	n := builds
	last := fmt.Sprint("text ", 3*maxTextCache-1)
	if c.get(last, build) != len(last) || builds != n {
		t.Errorf("a cached text was built again (%d builds, %d before)", builds, n)
	}
}

// An answer followed by an explanation ("X — because ...", "X (…)", "X;
// …", "X. …", "X, because …") is judged by the head before the first
// separator, and only when the tail names no distractor, holds no word of
// one and does not open with a joining word (verification.md 1.5.0).
func TestJudgeExplanations(t *testing.T) {
	label := &Question{Question: "Which cause held up?", Answer: "assay drift", ReasoningType: Causal, AnswerType: LabelAnswer,
		Answers:     []string{"assay drift", "assay drift at the central lab"},
		Distractors: []string{"sample swap", "sample swap at the biobank", "reagent lot change"}}
	num := &Question{Question: "What deviation was recorded?", Answer: "29.4", ReasoningType: MultiHop, AnswerType: NumericAnswer,
		Distractors: []string{"31.2"}}
	n := []string{judgeNarrative}
	cases := []struct {
		q    *Question
		a    string
		want bool
	}{
		{label, "assay drift — the review traced the excursion to it", true},
		{label, "assay drift—confirmed by the vendor", true},
		{label, "assay drift - because the review traced it", true},
		{label, "assay drift -- because the review traced it", true},
		{label, "assay drift – the review traced it", true},
		{label, "assay drift (the review's finding)", true},
		{label, "assay drift; the review traced the excursion to it", true},
		{label, "Assay drift. The review traced the excursion to it.", true},
		{label, "assay drift, because the review traced it", true},
		{label, "Answer: assay drift — the review traced it", true},
		{label, "assay drift is the answer — the review traced it", true},
		{num, "29.4 percent — the deviation the screen reached", true},
		{num, "approx. 29.4 (as screened)", true},
		{num, "29.4. That is the deviation.", true},
		// the head alone decides
		{label, "sample swap — assay drift", false},
		{label, "sample swap (assay drift)", false},
		{label, "Vale North — assay drift", false},
		// the tail names no other candidate and opens with no joining word
		{label, "assay drift — not sample swap", false},
		{label, "assay drift (or sample swap)", false},
		{label, "assay drift; the sample was fine", false}, // a distractor's word
		{label, "assay drift — or maybe something else", false},
		{label, "assay drift — the review, not the reagent lot change", false},
		{num, "29.4 (or 31.2)", false},
		{num, "29.4 — 31.2", false},
		{num, "29.4 — or so", false},
		// no separator, or nothing on one side of it
		{label, "assay drift, the review traced it", true}, // 1.5.19: ", " after a candidate's word
		{label, "assay drift-the review", false},
		{label, "assay drift —", true}, // M4 before any split
		{label, "— assay drift", true}, // M4 before any split: "—" separates words
		{num, "29.4-31.2", false},
		{num, "29.4 – 31.2", false},
	}
	for _, c := range cases {
		if got := Judge(c.q, c.a, n); got != c.want {
			t.Errorf("%q for %q: got %v, want %v", c.a, c.q.Answer, got, c.want)
		}
	}
}

// Wrapping any string in an explanation never lets it pass where the head
// alone does not: the explanation only removes words.
func TestJudgeExplanationNeverAddsACandidate(t *testing.T) {
	q := &Question{Question: "Which cause held up?", Answer: "assay drift", ReasoningType: Causal, AnswerType: LabelAnswer,
		Answers:     []string{"assay drift", "assay drift at the central lab"},
		Distractors: []string{"sample swap", "sample swap at the biobank", "reagent lot change"}}
	cands := []string{"assay drift", "sample swap", "sample swap at the biobank", "the sample swap", "reagent lot change", "PFK1", "HK2", "29.4", "the central lab", "the biobank", "Vale North"}
	for _, x := range cands {
		for _, y := range cands {
			for _, f := range []string{"%s — %s", "%s (%s)", "%s; %s", "%s. %s", "%s - because %s", "%s, because %s", "%s—%s"} {
				a := fmt.Sprintf(f, x, y)
				ok, _ := judgeFramed(q, a, []string{judgeNarrative}, candidatesOf(q))
				if ok || !Judge(q, a, []string{judgeNarrative}) {
					continue // refused, or accepted whole as before 1.5.0
				}
				if !Judge(q, x, []string{judgeNarrative}) {
					t.Errorf("%q accepted while its head %q is refused", a, x)
				}
				if slices.Contains(q.Distractors, y) {
					t.Errorf("%q accepted: its tail names a distractor", a)
				}
			}
		}
	}
}

// One answer with an explanation covers at most one candidate: no
// separator form of two candidates is accepted in two worlds that differ
// only in which candidate is right (verification.md 1.5.5: "Tier A — Tier
// C" answered Tier C by M4 on the whole, Tier A by its head).
func TestJudgeExplanationCoversOneCandidate(t *testing.T) {
	tiers := `A reservoir whose nitrate is below 45 mg/L is "Tier A", blend only; from 45 to 50 mg/L, "Tier B"; above 50 mg/L, "Tier C". The Hollin reservoir read 52 mg/L, the Marsh reservoir 12 mg/L.`
	nodes := "The containers left the quay sealed and the drayage to the DC was clean; the cartons went missing at the Lowmoor cross-dock."
	counts := "Priority 1 covers 12 hosts; the scan found 13 hosts in the lab and twelve in the annex."
	egfr := "The decline was 3.0 mL/min/1.73 m² per year on the trial drug and 3.4 mL/min/1.73 m² per year on placebo, a 1.1-fold gap."
	type world struct {
		q *Question
		n string
	}
	label := func(question, narrative string, answers ...string) world {
		return world{&Question{Question: question, Answer: answers[0], Answers: answers, ReasoningType: Conditional, AnswerType: LabelAnswer}, narrative}
	}
	groups := []struct {
		worlds []world
		cands  []string
	}{
		{[]world{
			label("Which tier applies to the Hollin reservoir?", tiers, "Tier A", "A"),
			label("Which tier applies to the Hollin reservoir?", tiers, "Tier B", "B"),
			label("Which tier applies to the Hollin reservoir?", tiers, "Tier C", "C"),
		}, []string{"Tier A", "Tier B", "Tier C", "A", "B", "C", "tier", "the tier A", "Tier A Tier"}},
		{[]world{
			label("Was the quay at fault, and if not, at which node did the cartons go missing?", nodes, "quay", "the quay"),
			label("Was the quay at fault, and if not, at which node did the cartons go missing?", nodes, "Lowmoor", "Lowmoor cross-dock"),
			label("Was the quay at fault, and if not, at which node did the cartons go missing?", nodes, "DC"),
		}, []string{"quay", "the quay", "Lowmoor", "the node", "DC", "Lowmoor cross-dock", "cross-dock"}},
		{[]world{
			{&Question{Question: "How many hosts did the scan find?", Answer: "12", ReasoningType: MultiHop, AnswerType: NumericAnswer}, counts},
			{&Question{Question: "How many hosts did the scan find?", Answer: "13", ReasoningType: MultiHop, AnswerType: NumericAnswer}, counts},
		}, []string{"12", "13", "twelve", "thirteen", "12 hosts", "hosts", "the hosts", "thirteen hosts",
			"12-13", "12-to-13", "twelve-13", "twelve-thirteen", "13-fold", "twelve-fold", "12-hosts"}},
		// a compound unit the question writes (verification.md 1.5.9)
		{[]world{
			{&Question{Question: "What was the eGFR decline in mL/min/1.73 m² per year?", Answer: "3.0", ReasoningType: MultiHop, AnswerType: NumericAnswer}, egfr},
			{&Question{Question: "What was the eGFR decline in mL/min/1.73 m² per year?", Answer: "3.4", ReasoningType: MultiHop, AnswerType: NumericAnswer}, egfr},
		}, []string{"3.0", "3.4", "3.0 mL/min/1.73 m²", "3.4 mL/min/1.73", "mL/min/1.73", "mL/min/3.4", "3.0-mL/min/1.73", "3-fold"}},
	}
	forms := []string{"%s — %s", "%s (%s)", "%s; %s", "%s. %s", "%s - because %s", "%s, because %s", "%s—%s",
		"Answer: %s — %s", "%s — %s is the answer", "The answer is %s (%s)", "%s. %s, because of it",
		"%s\u00a0-\u00a0%s", "%s（%s）", "%s\u200b—%s", "%s, as %s", "%s ― %s", "%s is the answer — %s",
		// line breaks (verification.md 1.5.10) and hyphens (1.5.11)
		"%s\n%s", "%s\r%s", "%s\r\n%s", "%s\n\n%s", "\n%s\n%s", "\r\n%s\r\n%s", "\n%s — %s", "%s —\n%s", "%s\n— %s",
		"Answer:\n%s\n%s", "%s\u2028%s", "%s\u0085%s", "%s-%s", "%s-to-%s", "%s\u2011%s", "%s\u2212%s", " \n %s \n %s"}
	for _, g := range groups {
		for _, x := range g.cands {
			for _, y := range g.cands {
				for _, f := range forms {
					a := fmt.Sprintf(f, x, y)
					var in []string
					for _, w := range g.worlds {
						if Judge(w.q, a, []string{w.n}) {
							in = append(in, w.q.Answer)
						}
					}
					if len(in) > 1 {
						t.Errorf("%q is accepted for each of %v", a, in)
					}
				}
			}
		}
	}
}

// Spelled-out integers 0 to 99 read as their numbers under a numeric
// target, and so count as numbers everywhere in such an answer
// (verification.md 1.5.0).
func TestJudgeSpelledNumbers(t *testing.T) {
	count := &Question{Question: "How many hosts did the intruder reach?", Answer: "3", Answers: []string{"3", "3 hosts"},
		ReasoningType: MultiHop, AnswerType: NumericAnswer, Distractors: []string{"4"}}
	big := &Question{Question: "How many alerts fired?", Answer: "42", ReasoningType: MultiHop, AnswerType: NumericAnswer}
	zero := &Question{Question: "How many alerts fired?", Answer: "0", ReasoningType: MultiHop, AnswerType: NumericAnswer}
	label := &Question{Question: "Which cause held up?", Answer: "assay three", ReasoningType: Causal, AnswerType: LabelAnswer}
	n := []string{"The intruder reached 3 hosts; Priority 1 applies to a breach. About 42 alerts fired."}
	cases := []struct {
		q    *Question
		a    string
		want bool
	}{
		{count, "three", true},
		{count, "Three", true},
		{count, "three hosts", true},
		{count, "The answer is three.", true},
		{count, "It is about three hosts.", true},
		{big, "forty-two", true},
		{big, "Forty-Two alerts", true},
		{zero, "zero", true},
		{count, "four", false},           // the wrong number
		{count, "3 or four", false},      // a second number
		{count, "three 5", false},        // two numbers
		{count, "Priority three", false}, // the number-label guard
		{big, "forty two", true},         // a ten and a unit as two words (1.5.21)
		{big, "Forty Two alerts", true},
		{count, "forty two", false}, // 42, neither 40 nor 2
		{big, "forty, two", false},  // two numbers across a separator
		{big, "forty  two", true},   // spaces only
		{big, "forty one-two", false},
		{big, "forty twofold", false}, // 40, 2 and fold: the unit is no whole word
		{big, "forty zero", false},
		{big, "forty ten", false},
		{big, "twenty twenty-two", false},
		{big, "fortytwo", false}, // not in the table
		{big, "forty-ten", false},
		{label, "assay 3", false}, // no numeric target: no reading
	}
	for _, c := range cases {
		if got := Judge(c.q, c.a, n); got != c.want {
			t.Errorf("%q for %q: got %v, want %v", c.a, c.q.Answer, got, c.want)
		}
	}
	if len(spelledNumber) != 100 {
		t.Errorf("spelled-number table has %d entries, want 100 (0-99)", len(spelledNumber))
	}
}

// A lower-case numbered label that a text writes before two or more
// values ("priority 1 ... priority 2") is a label too, when it opens the
// answer; a quantity word ("all 5") and a word before one value only are
// not (verification.md 1.5.0).
func TestJudgeLowerCaseNumberLabels(t *testing.T) {
	count := &Question{Question: "How many hosts did the intruder reach?", Answer: "3", Answers: []string{"3", "3 hosts"},
		ReasoningType: MultiHop, AnswerType: NumericAnswer}
	n := []string{"The intruder reached 3 hosts, all 3 in the lab, and all 5 labs were told. priority 1 applies to a breach of payroll, " +
		"priority 2 to two hosts or more, and priority 3 otherwise. The bottle read 3 and later read 4; phase 3 began."}
	cases := []struct {
		a    string
		want bool
	}{
		{"priority 3", false},
		{"Priority 3", false},
		{"the priority 3", false},
		{"Answer: priority 3", false},
		{"3", true},
		{"3 hosts", true},
		{"all 3", true},             // a quantity word
		{"phase 3", true},           // one value only
		{"the bottle read 3", true}, // not first in the answer
		{"hosts priority 3", true},  // not first in the answer
	}
	for _, c := range cases {
		if got := Judge(count, c.a, n); got != c.want {
			t.Errorf("%q: got %v, want %v", c.a, got, c.want)
		}
	}
}

// TestJudgeUnicodeHyphens: U+2010 HYPHEN and U+2011 NON-BREAKING HYPHEN,
// which language models write in codes and compounds ("FL‑0417"), read
// as "-" in every text (verification.md 1.5.15): an agent's "FL‑0417"
// was two words, refused for the variant FL-0417 (10 of the 12 hyphenated
// variants of the LLM sample sets).
func TestJudgeUnicodeHyphens(t *testing.T) {
	code := &Question{Question: "Which fuel stock carried the sulphur?", Answer: "FL-0417", Answers: []string{"FL-0417", "FL0417"},
		ReasoningType: MultiHop, AnswerType: EntityAnswer}
	nbCode := &Question{Question: "Which fuel stock carried the sulphur?", Answer: "FL\u20110417",
		ReasoningType: MultiHop, AnswerType: EntityAnswer, Distractors: []string{"FL\u20100471"}}
	count := &Question{Question: "How many days passed?", Answer: "28", ReasoningType: MultiHop, AnswerType: NumericAnswer}
	neg := &Question{Question: "By how much did the balance move?", Answer: "-3.2", ReasoningType: MultiHop, AnswerType: NumericAnswer}
	n := []string{"Stock FL-0417 and stock FL-0471 were sampled; the cross\u2011dock logged 28 days."}
	cases := []struct {
		q    *Question
		a    string
		want bool
	}{
		{code, "FL\u20110417", true},
		{code, "FL\u20100417", true},
		{code, "the FL\u20110417 stock", true},
		{code, "FL\u20110417 \u2011 because the record shows it", true},
		{code, "FL\u20110471", false},
		{code, "FL\u20110417\u2011FL\u20110471", false},
		{nbCode, "FL-0417", true},
		{nbCode, "FL-0417 — FL-0471", false}, // the tail names the distractor written with U+2010
		{count, "twenty\u2011eight", true},
		{count, "28\u2011days", true},
		{count, "28\u2011day", true},   // 1.5.19: "day" an inflection of the question word "days"
		{count, "28\u2011week", false}, // as "28-week": no text writes "week"
		{count, "27\u201128", false},
		{neg, "\u20113.2", true},
		{neg, "3.2", false},
	}
	for _, c := range cases {
		if got := Judge(c.q, c.a, n); got != c.want {
			t.Errorf("%q for %q: got %v, want %v", c.a, c.q.Answer, got, c.want)
		}
	}
}

// TestJudgeSubscriptDigits: the subscript digits U+2080..U+2089 read as
// the ASCII digits 0..9 in every text, at the Hyphens step
// (verification.md 1.5.26): a language model's "CO₂ excursion in the
// incubator" was refused for the variant CO2 (the word co₂ is not co2).
// Superscript digits are not read so (m², 10³ stay as written).
func TestJudgeSubscriptDigits(t *testing.T) {
	co2 := &Question{Question: "Which excursion did the incubator log on day 3?", Answer: "CO2 excursion", Answers: []string{"CO2 excursion", "CO2"},
		ReasoningType: MultiHop, AnswerType: EntityAnswer, Distractors: []string{"O2 drop", "humidity drop"}}
	subVariant := &Question{Question: "Which excursion did the incubator log on day 3?", Answer: "CO\u2082 excursion",
		ReasoningType: MultiHop, AnswerType: EntityAnswer, Distractors: []string{"O\u2082 drop"}}
	count := &Question{Question: "How many flasks were discarded?", Answer: "12", ReasoningType: MultiHop, AnswerType: NumericAnswer}
	n := []string{"The incubator logged a CO2 excursion on day 3 and an O2 drop on day 5; 12 flasks were discarded."}
	nSub := []string{"The incubator logged a CO\u2082 excursion on day 3 and an O\u2082 drop on day 5; 12 flasks were discarded."}
	cases := []struct {
		q    *Question
		a    string
		n    []string
		want bool
	}{
		{co2, "CO\u2082 excursion in the incubator", n, true},
		{co2, "CO\u2082 excursion", n, true},
		{co2, "CO\u2082", n, true},
		{co2, "CO\u2082 excursion in the incubator", nSub, true},
		{co2, "CO2 excursion in the incubator", nSub, true},
		{co2, "O\u2082 drop", n, false},
		{co2, "CO\u2083 excursion", n, false},
		{co2, "CO\u00b2 excursion", n, false}, // a superscript two is not read as 2
		{subVariant, "CO2 excursion", n, true},
		{subVariant, "CO2 excursion", nSub, true},
		{subVariant, "O2 drop", nSub, false},
		{count, "\u2081\u2082", nSub, true},
		{count, "\u2081\u2083", nSub, false},
	}
	for _, c := range cases {
		if got := Judge(c.q, c.a, c.n); got != c.want {
			t.Errorf("%q for %q (narrative %.40q): got %v, want %v", c.a, c.q.Answer, c.n[0], got, c.want)
		}
	}
}

// TestJudgeCommaExplanations: a comma, white space and one of according,
// based, given, per or which opens an explanation as because, since and
// as do (verification.md 1.5.16): "Lowmoor, according to the report." was
// refused (LLM sample sets: 0 of 120 variants so explained accepted).
func TestJudgeCommaExplanations(t *testing.T) {
	node := &Question{Question: "At which node did the cartons go missing?", Answer: "Lowmoor", Answers: []string{"Lowmoor", "Lowmoor cross-dock"},
		ReasoningType: MultiHop, AnswerType: EntityAnswer, Distractors: []string{"Daventry", "the quay"}}
	count := &Question{Question: "How many days passed?", Answer: "28", ReasoningType: MultiHop, AnswerType: NumericAnswer, Distractors: []string{"27"}}
	n := []string{"The cartons left Daventry, crossed the quay and went missing at Lowmoor after 28 days; 27 were counted."}
	cases := []struct {
		q    *Question
		a    string
		want bool
	}{
		{node, "Lowmoor, according to the report.", true},
		{node, "Lowmoor, based on the scan gap", true},
		{node, "Lowmoor, given the scan gap", true},
		{node, "Lowmoor, per part 2", true},
		{node, "Lowmoor cross-dock, which the report confirms", true},
		{node, "Lowmoor, Given the record", true},
		{node, "Daventry, according to the report.", false},
		{node, "Lowmoor, according to Daventry", false},   // the tail names a distractor
		{node, "Daventry, which is not Lowmoor", false},   // the head answers Daventry
		{node, "Lowmoor, whichever", true},                // 1.5.19: ", " after a candidate's word
		{node, "Lowmoor, pertaining to the record", true}, // likewise
		{node, "Lowmoor, Daventry", false},                // the tail names a distractor
		{node, "the node, Daventry", false},               // no candidate's word before ", ": judged whole
		{count, "28, according to the record", true},
		{count, "28, given 27 before", false}, // the tail names the distractor 27
	}
	for _, c := range cases {
		if got := Judge(c.q, c.a, n); got != c.want {
			t.Errorf("%q for %q: got %v, want %v", c.a, c.q.Answer, got, c.want)
		}
	}
}

// TestJudgePrecisionWords: under M3 the words exactly, precisely and
// total may stand beside the one number (verification.md 1.5.17): "a
// total of 29", "29 in total" and "exactly 29" were refused unless a
// narrative wrote the word in lower case (LLM sample sets: 4 and 8 of 75
// numeric variants so written accepted).
func TestJudgePrecisionWords(t *testing.T) {
	count := &Question{Question: "How many valid hourly exceedances were logged?", Answer: "29", Answers: []string{"29", "29 hours"},
		ReasoningType: MultiHop, AnswerType: NumericAnswer, Distractors: []string{"31"}}
	label := &Question{Question: "Which cause held up?", Answer: "assay drift", ReasoningType: Causal, AnswerType: LabelAnswer, Distractors: []string{"sample swap"}}
	n := []string{"The analyser logged 31 hourly means above the limit; 4 were calibration gas. Tier 2 applies above 24."}
	ntot := []string{"Total 12 in March; the analyser logged 31 hourly means above the limit; 4 were calibration gas."}
	cases := []struct {
		q    *Question
		a    string
		narr []string
		want bool
	}{
		{count, "a total of 29", n, true},
		{count, "29 in total", n, true},
		{count, "29 hours in total", n, true},
		{count, "exactly 29", n, true},
		{count, "Precisely 29.", n, true},
		{count, "29 total", n, true},
		{count, "a total of 31", n, false},
		{count, "exactly 29 or 31", n, false},
		{count, "total 29", ntot, false},         // "Total 12": a numbered label the narrative uses
		{label, "exactly assay drift", n, false}, // M3 only: no numeric target here
	}
	for _, c := range cases {
		if got := Judge(c.q, c.a, c.narr); got != c.want {
			t.Errorf("%q for %q: got %v, want %v", c.a, c.q.Answer, got, c.want)
		}
	}
}

// BenchmarkJudgeRefused judges a wrong answer, which runs every rule and
// the lead-in and explanation fallbacks.
func BenchmarkJudgeRefused(b *testing.B) {
	q := &Question{Question: "Which cause held up?", Answer: "assay drift",
		Distractors: []string{"sample swap", "sample swap at the biobank", "reagent lot change"}}
	n := []string{strings.Repeat(judgeNarrative+" ", 20)}
	b.ReportAllocs()
	for b.Loop() {
		Judge(q, "So I think it's the central lab: the vendor said so", n)
	}
}

// An answer in the possessive is judged again as its plain form, and a
// possessive of a distractor's word names that distractor under M2's
// word guard and the tail guard (verification.md 1.5.22).
func TestJudgePossessives(t *testing.T) {
	n := []string{"Plates from the annex were read twice, and the annex's plates drifted. The central lab logged the outage " +
		"in the 1990s, and Kessler's kiln stayed idle. St John's Hospital and the Vale clinic reported 31 cases; it was quiet."}
	site := &Question{Question: "Which site logged the outage?", Answer: "the central lab", Answers: []string{"the central lab", "central lab"},
		ReasoningType: MultiHop, AnswerType: EntityAnswer, Distractors: []string{"the annex", "annex", "Kessler", "the IT desk"}}
	saint := &Question{Question: "Which hospital reported cases?", Answer: "St John's Hospital", Answers: []string{"St John's Hospital", "St John's"},
		ReasoningType: MultiHop, AnswerType: EntityAnswer, Distractors: []string{"the Vale clinic", "St John"}}
	count := &Question{Question: "How many cases were reported?", Answer: "31", ReasoningType: MultiHop, AnswerType: NumericAnswer}
	grade := &Question{Question: "Which grade applies?", Answer: "grade 3", Answers: []string{"grade 3", "G3"},
		ReasoningType: Conditional, AnswerType: LabelAnswer, Distractors: []string{"grade 1", "grade 2"}}
	cases := []struct {
		q    *Question
		a    string
		want bool
	}{
		{site, "the central lab's", true},
		{site, "The Central Lab’s", true},
		{site, "CENTRAL LAB'S", true},
		{site, "That's the central lab", true},
		{site, "the central lab's, it's in the log", true}, // a pronoun's possessive names nothing
		{site, "central lab's annex's", false},             // the annex, possessive
		{site, "central lab annex's", false},
		{site, "central lab (Kessler's)", false},
		{site, "central lab — the annex's", false},
		{site, "Kessler's", false},
		{site, "annex's", false},
		{site, "lab's", false}, // not the variant
		{saint, "St John's", true},
		{saint, "St John's Hospital", true},   // the distractor St John occurs inside the variant only
		{grade, "grade 3 (grade 1's)", false}, // the tail names grade 1
		{grade, "G3 — grade 2's", false},
		{grade, "grade 3's", true},
		{saint, "St John", false}, // a candidate's own possessive stays: St John is a distractor
		{count, "31's", true},     // its plain form is 31
	}
	for _, c := range cases {
		if got := Judge(c.q, c.a, n); got != c.want {
			t.Errorf("%q for %q: got %v, want %v", c.a, c.q.Answer, got, c.want)
		}
	}
	// The plain form depends on the candidates only: no answer is
	// accepted both where the central lab is right and where the annex
	// is (the same question, the candidates swapped).
	annex := &Question{Question: site.Question, Answer: "the annex", Answers: []string{"the annex", "annex"},
		ReasoningType: MultiHop, AnswerType: EntityAnswer, Distractors: []string{"the central lab", "central lab", "Kessler", "the IT desk"}}
	for _, a := range []string{"central lab's annex's", "annex's central lab", "the annex's central lab's", "central lab annex's", "annex's lab", "the annex's plates, central lab"} {
		if Judge(site, a, n) && Judge(annex, a, n) {
			t.Errorf("%q is accepted for the central lab and for the annex", a)
		}
	}
}

// A . inside a candidate ("B. cereus", "Dr. Okafor", "U.S. site", "No. 4
// line") ends no sentence in an answer that writes the candidate's two
// words around it, so an answer that adds "the" or a trailing word is
// judged whole (verification.md 1.5.24); the guards still refuse an
// answer that names a distractor as well.
func TestJudgeCandidateAbbreviations(t *testing.T) {
	n := []string{"The emetic isolate was B. cereus ST1382, typed from the rice; S. aureus t978 came from a food handler and S. sonnei ST812 from the salad. " +
		"Dr. Okafor signed the release after Dr. Mensah left; St. John's logged the outage, St. Mary's did not. The U.S. site and the EU site both ran the No. 4 line; the No. 2 line stood idle."}
	strain := &Question{Question: "Which strain caused the outbreak?", Answer: "B. cereus ST1382", ReasoningType: MultiHop, AnswerType: EntityAnswer,
		Answers:     []string{"B. cereus ST1382", "Bacillus cereus ST1382", "Bc ST1382"},
		Distractors: []string{"S. aureus t978", "Staphylococcus aureus t978", "Sa t978"}}
	signer := &Question{Question: "Who signed the release?", Answer: "Dr. Okafor", Answers: []string{"Dr. Okafor", "Okafor"},
		ReasoningType: MultiHop, AnswerType: EntityAnswer, Distractors: []string{"Dr. Mensah", "Mensah"}}
	site := &Question{Question: "Which site ran the line?", Answer: "U.S. site", ReasoningType: MultiHop, AnswerType: EntityAnswer,
		Distractors: []string{"EU site"}}
	line := &Question{Question: "Which line ran at both sites?", Answer: "No. 4 line", ReasoningType: MultiHop, AnswerType: EntityAnswer,
		Distractors: []string{"No. 2 line"}}
	saint := &Question{Question: "Which site logged the outage?", Answer: "St. John's", ReasoningType: MultiHop, AnswerType: EntityAnswer,
		Distractors: []string{"St. Mary's"}}
	cases := []struct {
		q    *Question
		a    string
		want bool
	}{
		{strain, "the B. cereus ST1382", true},
		{strain, "B. cereus ST1382 strain", true},
		{strain, "The B. cereus ST1382 strain.", true},
		{strain, "the b. cereus ST1382", true},
		{strain, "the B. cereus ST1382. It matched the rice.", true},
		{signer, "Dr. Okafor signed the release", true},
		{signer, "Dr. Okafor, who signed it", true},
		{site, "the U.S. site", true},
		{line, "the No. 4 line", true},
		{saint, "the St. John's site", true},
		{saint, "the St. Mary's site", false},
		// naming a distractor as well still fails
		{strain, "the B. cereus ST1382 and S. aureus t978", false},
		{strain, "the B. cereus ST1382 — not S. aureus t978", false},
		{strain, "B. cereus ST1382 (S. aureus t978)", false},
		{strain, "S. aureus t978. B. cereus ST1382", false},
		{strain, "the S. aureus t978", false},
		{strain, "the B. aureus ST1382", false}, // no candidate writes "B. aureus": cut after B
		{strain, "the B. cereus t978", false},
		{signer, "Dr. Okafor or Dr. Mensah", false},
		{signer, "Dr. Mensah. Dr. Okafor", false},
		{site, "the U.S. site, not the EU site", false},
		{line, "the No. 4 line and the No. 2 line", false},
		{line, "the No. 2 line", false},
	}
	for _, c := range cases {
		if got := Judge(c.q, c.a, n); got != c.want {
			t.Errorf("%q for %q: got %v, want %v", c.a, c.q.Answer, got, c.want)
		}
	}
	// The exception depends on the candidates only: with the candidates
	// swapped, no answer is accepted in both worlds.
	aureus := &Question{Question: strain.Question, Answer: "S. aureus t978", ReasoningType: MultiHop, AnswerType: EntityAnswer,
		Answers:     []string{"S. aureus t978", "Staphylococcus aureus t978", "Sa t978"},
		Distractors: []string{"B. cereus ST1382", "Bacillus cereus ST1382", "Bc ST1382"}}
	forms := []string{"the %s %s", "%s. %s", "the %s. %s", "%s %s strain", "%s — %s", "%s, %s", "%s (%s)"}
	cands := []string{"B. cereus ST1382", "S. aureus t978", "Bc ST1382", "Sa t978", "B.", "S.", "cereus", "aureus"}
	// Without distractors the candidates are the right one's variants,
	// so the exception differs between the worlds: still no answer is
	// accepted in both.
	strainAlone, aureusAlone := *strain, *aureus
	strainAlone.Distractors, aureusAlone.Distractors = nil, nil
	sonnei := Question{Question: strain.Question, Answer: "S. sonnei ST812", Answers: []string{"S. sonnei ST812", "Ss ST812"}, ReasoningType: MultiHop, AnswerType: EntityAnswer}
	cands = append(cands, "S. sonnei ST812", "sonnei", "S. sonnei")
	for _, x := range cands {
		for _, y := range cands {
			for _, f := range forms {
				a := fmt.Sprintf(f, x, y)
				if Judge(strain, a, n) && Judge(aureus, a, n) {
					t.Errorf("%q is accepted for B. cereus and for S. aureus", a)
				}
				if Judge(&strainAlone, a, n) && Judge(&aureusAlone, a, n) {
					t.Errorf("%q is accepted for B. cereus and for S. aureus (no distractors)", a)
				}
				if Judge(&sonnei, a, n) && Judge(&aureusAlone, a, n) {
					t.Errorf("%q is accepted for S. sonnei and for S. aureus (no distractors)", a)
				}
			}
		}
	}
}

// M5 reads a . that a candidate writes between two of its words as no
// sentence end in the narrative either: "P. Okonjo after the second
// review" is the narrative's own run (verification.md 1.5.24).
func TestJudgeWindowAcrossCandidateAbbreviation(t *testing.T) {
	n := []string{"The revised protocol was signed off by P. Okonjo after the second review. B. cereus ST1382 was typed from the rice at the canteen. J. Okonjo left."}
	signer := &Question{Question: "Who signed off the revised protocol?", Answer: "P. Okonjo", ReasoningType: MultiHop, AnswerType: EntityAnswer}
	strain := &Question{Question: "Which strain was typed?", Answer: "B. cereus ST1382", ReasoningType: MultiHop, AnswerType: EntityAnswer}
	cases := []struct {
		q    *Question
		a    string
		want bool
	}{
		{signer, "P. Okonjo after the second review", true},
		{strain, "B. cereus ST1382 was typed from the rice", true},
		// still one clause of one sentence, and a variant must occur
		{signer, "Okonjo after the second review", false},
		{signer, "P. Okonjo after the second review B. cereus", false},
		{strain, "the second review B. cereus ST1382", false},
		{signer, "J. Okonjo left", false},
	}
	for _, c := range cases {
		if ok, rule := JudgeRule(c.q, c.a, n); ok != c.want || ok && rule != RuleWindow {
			t.Errorf("%q for %q: got %v by %s, want %v by M5", c.a, c.q.Answer, ok, rule, c.want)
		}
	}
}

// TestJudgePercentagePoints: a difference of two percentages answered in
// percentage points ("0.33 percentage points", "0.33 pp", "0.33 points")
// is accepted where a shown text uses percent, as "0.33%" is
// (verification.md 1.5.25); a text that uses neither leaves the names
// refused, and "point" stays a number label where a narrative writes
// "Point 1" ("Point 3" for a count of 3).
func TestJudgePercentagePoints(t *testing.T) {
	diff := &Question{Question: "What is the difference in intraday range between the two pairs?", Answer: "0.33",
		Answers: []string{"0.33", "0.33%", "0.33 %", "0.33 percent"}, ReasoningType: Comparison, AnswerType: NumericAnswer}
	pct := []string{"HUF/CZK registered 2.36 percent. EUR/PLN recorded 2.03%."}
	depth := &Question{Question: "What is the final depth in km of the event?", Answer: "10.6", Answers: []string{"10.6", "10.6 km"},
		ReasoningType: MultiHop, AnswerType: NumericAnswer}
	km := []string{"The well reached 10.6 km before the stop."}
	count := &Question{Question: "How many swabs were positive?", Answer: "3", Answers: []string{"3"},
		ReasoningType: MultiHop, AnswerType: NumericAnswer}
	points := []string{"Swabs at Point 1 and Point 2 were positive; 12% of the rest were clean, and 3 swabs in all were positive."}
	cases := []struct {
		q    *Question
		n    []string
		a    string
		want bool
	}{
		{diff, pct, "0.33 percentage points", true},
		{diff, pct, "0.33 pp", true},
		{diff, pct, "0.33 points", true},
		{diff, pct, "0.33 percentage point", true},
		{diff, pct, "0.33 pts (2.36% − 2.03%)", true},
		{diff, pct, "0.33 points 0.34", false}, // two numbers
		{diff, pct, "0.34 percentage points", false},
		{depth, km, "10.6 points", false},            // no text uses percent or points
		{depth, km, "10.6 percentage points", false}, // likewise
		{count, points, "3 points", true},
		{count, points, "Point 3", false}, // a label the narrative writes
		{count, points, "the point 3", false},
	}
	for _, c := range cases {
		if got := Judge(c.q, c.a, c.n); got != c.want {
			t.Errorf("Judge(%q) = %v, want %v", c.a, got, c.want)
		}
	}
}

// TestJudgeSpelledDecimals: a decimal spelled digit by digit after "point"
// ("seven point six") is one number, its value (spec/verification.md
// 1.5.27, "Spelled-out numbers"); it was two numbers, refused. It is read
// only in an answer to a question with a numeric target, only over words
// close to each other, and names one value: never its parts.
func TestJudgeSpelledDecimals(t *testing.T) {
	score := &Question{Question: "What CVSS base score was recorded for the flaw?", Answer: "7.6", Answers: []string{"7.6", "CVSS 7.6"},
		ReasoningType: Causal, AnswerType: NumericAnswer}
	scores := []string{"A value of 7.6 was recorded for the hypervisor-console flaw; the other scored 6 and 7."}
	depth := &Question{Question: "What is the final depth in km of the event?", Answer: "10.6", Answers: []string{"10.6", "10.6 km"},
		ReasoningType: MultiHop, AnswerType: NumericAnswer, Distractors: []string{"9.4", "6"}}
	km := []string{"The well reached 10.6 km before the stop, 9.4 km before the relocation."}
	mean := &Question{Question: "What was the mean in mg/L?", Answer: "55.5", Answers: []string{"55.5", "55.5 mg/L"},
		ReasoningType: MultiHop, AnswerType: NumericAnswer}
	mg := []string{"Parcel Farm read 54, 55, 57 and 56 mg/L."}
	small := &Question{Question: "By how many t/ha did it beat the check?", Answer: "0.7", Answers: []string{"0.7", "0.7 t/ha"},
		ReasoningType: Comparison, AnswerType: NumericAnswer}
	tha := []string{"It gave 9.5, 9.2 and 8.7 t/ha."}
	entity := &Question{Question: "Which level applies?", Answer: "seven point six", Answers: []string{"seven point six"},
		ReasoningType: Conditional, AnswerType: LabelAnswer}
	cases := []struct {
		q    *Question
		n    []string
		a    string
		want bool
	}{
		{score, scores, "seven point six", true},
		{score, scores, "Seven Point Six", true},
		{score, scores, "CVSS seven point six", true},
		{score, scores, "7.6 (seven point six)", true},
		{score, scores, "seven point five", false},
		{score, scores, "seven point six six", false}, // 7.66
		{score, scores, "seven, point six", false},    // not close: 7 and 6
		{score, scores, "seven point", false},         // no digit word: 7 and a unit word
		{score, scores, "seven point ten", false},     // ten is no digit: 7 and 10
		{score, scores, "7 point 6", false},           // digits are not read so
		{score, scores, "seven point-six", false},
		{depth, km, "ten point six", true},
		{depth, km, "ten point six km", true},
		{depth, km, "ten point six or nine point four", false},
		{depth, km, "10.6 — nine point four", false}, // the tail names the distractor 9.4
		{depth, km, "ten point six — six", false},    // the tail names the distractor 6
		{mean, mg, "fifty-five point five", true},
		{mean, mg, "fifty five point five", true},
		{small, tha, "zero point seven", true},
		{small, tha, "zero point seven t/ha", true},
		{small, tha, "point seven", false},        // no whole part
		{entity, scores, "seven point six", true}, // M1, as written
		{entity, scores, "7.6", false},            // no numeric target: no reading
	}
	for _, c := range cases {
		if got := Judge(c.q, c.a, c.n); got != c.want {
			t.Errorf("Judge(%q) = %v, want %v", c.a, got, c.want)
		}
	}
}

// TestJudgePronounsAndAs: an agent's sentence that restates the question
// around the answer with a pronoun or "as" ("It is classed as
// competitive", "The Hollin segment hosts it") is accepted
// (spec/verification.md 1.5.27: "as" is a function word, pronouns are
// allowed words); both name nothing, so every guard holds: a joining
// word, another candidate's word or a distractor's word (a pronoun
// included) still refuses the answer.
func TestJudgePronounsAndAs(t *testing.T) {
	mech := &Question{Question: "Which mechanism class had that compound recorded?", Answer: "competitive",
		Answers: []string{"competitive"}, ReasoningType: Conditional, AnswerType: LabelAnswer}
	kin := []string{"An inhibitor is classed Competitive when Km rises; Mixed when both move; Noncompetitive otherwise."}
	seg := &Question{Question: "Which fault segment hosts the 17 May event?", Answer: "Hollin segment", Answers: []string{"Hollin segment", "Hollin"},
		ReasoningType: Conditional, AnswerType: EntityAnswer}
	fault := []string{"Only the Corrie and Hollin segments lie beneath the epicentre."}
	team := &Question{Question: "Which team handled the incident?", Answer: "HR desk", Answers: []string{"HR desk"},
		Distractors: []string{"IT", "facilities"}, ReasoningType: MultiHop, AnswerType: EntityAnswer}
	desk := []string{"The HR desk handled it after the IT desk and facilities passed."}
	level := &Question{Question: "Which status does the station earn?", Answer: "red", Answers: []string{"red", "red status"},
		Distractors: []string{"amber", "green"}, ReasoningType: Conditional, AnswerType: LabelAnswer}
	status := []string{"More than 24 gives red status, 19 to 24 amber, and fewer green; the station logged 29."}
	cases := []struct {
		q    *Question
		n    []string
		a    string
		want bool
	}{
		{mech, kin, "It is classed as competitive.", true},
		{mech, kin, "It had competitive recorded as its mechanism.", true},
		{mech, kin, "competitive, as recorded", true},
		{mech, kin, "as competitive", true},
		{mech, kin, "It is classed as competitive or mixed.", false}, // a joining word
		{mech, kin, "competitive as mixed", false},                   // another candidate's word
		{mech, kin, "mixed as competitive", false},
		{mech, kin, "It is classed as mixed.", false},
		{seg, fault, "The Hollin segment hosts it.", true},
		{seg, fault, "It is the Hollin segment.", true},
		{seg, fault, "They are the Hollin segment and Corrie.", false},
		{seg, fault, "Corrie hosts it.", false},
		{team, desk, "HR desk", true},
		{team, desk, "the HR desk handled it", false}, // "it" is the distractor IT's word
		{team, desk, "IT", false},
		{level, status, "The station earns red status as it logged 29", false}, // 29: a number beside a label is no allowed word
		{level, status, "red as amber", false},
		{level, status, "red, as it is", true},
	}
	for _, c := range cases {
		if got := Judge(c.q, c.a, c.n); got != c.want {
			t.Errorf("Judge(%q) = %v, want %v", c.a, got, c.want)
		}
	}
}

// TestJudgeDescribedCode: M6 (spec/verification.md 1.5.28) accepts an
// agent's description before a variant that holds a code, on a question
// without distractors ("the fragment CLV-5649", "the engineering laptop
// KA-LT-4627"): refused before. Every guard holds: each description word
// must be written in a sentence that holds a variant, no text may write
// it before a variant in one clause (there it could be another
// candidate's name around a shared code: "parental clone 17" beside
// "daughter clone 17") nor with a capital (a name's word: "Kiln" of
// "Kiln Line B"); after the variant, only the words M4 allows; a
// variant without a code (a label, a name) gains nothing; a joining word
// or a second code refuse the answer; a question with distractors is not
// judged so (M4 permits description words there, as before).
func TestJudgeDescribedCode(t *testing.T) {
	frag := &Question{Question: "Which compound's inhibition is left standing?", Answer: "CLV-5649", Answers: []string{"CLV-5649", "CLV 5649"},
		ReasoningType: Negation, AnswerType: EntityAnswer}
	frags := []string{"Five compounds were screened: CLV-4569, a small sulfonamide; CLV-5649, a nucleotide-mimetic fragment; and CLV-9465, an acrylamide. The fragment read 2.4 µM. Aggregation was ruled out for the sulfonamide."}
	host := &Question{Question: "Which host shows genuine command-and-control activity?", Answer: "KA-LT-4627", Answers: []string{"KA-LT-4627"},
		ReasoningType: Negation, AnswerType: EntityAnswer}
	hosts := []string{"VOSS: And the engineering laptop, KA-LT-4627, which sits on 10.42.76.27, was making small outbound calls. The build server KA-SV-0112 ran its nightly job."}
	cause := &Question{Question: "What explained the viability loss?", Answer: "CO2 excursion", Answers: []string{"CO2 excursion", "CO2 drop"},
		ReasoningType: Causal, AnswerType: LabelAnswer}
	causes := []string{"A CO2 excursion in the incubator has since explained the drop. The other was traced to assay drift at the central lab; mycoplasma was ruled out."}
	clone := &Question{Question: "Which line lost viability?", Answer: "daughter clone 17", Answers: []string{"daughter clone 17", "clone 17"},
		ReasoningType: MultiHop, AnswerType: EntityAnswer}
	clones := []string{"The parental line's clone 17 grew normally, while the daughter clone 17 lost viability."}
	drift := &Question{Question: "What explained the other loss?", Answer: "assay drift", Answers: []string{"assay drift"},
		ReasoningType: Causal, AnswerType: LabelAnswer}
	entry := &Question{Question: "Which candidate holds at every site?", Answer: "Tallow Gold", Answers: []string{"Tallow Gold"},
		ReasoningType: Negation, AnswerType: EntityAnswer}
	entries := []string{"Oxbury, brown-chaffed; Tallow Gold, the only red-chaffed entry; Vennick, awned."}
	slicer := &Question{Question: "Which sampling point behaves as a persistent source?", Answer: "Slicer 3", Answers: []string{"Slicer 3", "the slicer"},
		ReasoningType: Negation, AnswerType: EntityAnswer}
	points := []string{"Five areas were swabbed: the brine tank; Kiln Line B, the smoke kiln and its conveyor; Slicer 3, the high-speed slicer."}
	withDistractors := *frag
	withDistractors.Distractors = []string{"CLV-4569", "CLV-9465"}
	cases := []struct {
		q    *Question
		n    []string
		a    string
		want bool
		rule string
	}{
		{frag, frags, "the fragment CLV-5649", true, RuleDescribed},
		{frag, frags, "The nucleotide-mimetic fragment CLV-5649.", true, RuleDescribed},
		{frag, frags, "the fragment CLV 5649", true, RuleDescribed},
		{frag, frags, "the fragment CLV-5649 (the only one left)", true, RuleDescribed},
		{frag, frags, "Answer: the fragment CLV-5649", true, RuleDescribed},
		{host, hosts, "the engineering laptop KA-LT-4627", true, RuleDescribed},
		{cause, causes, "an incubator CO2 excursion", true, RuleDescribed},
		{cause, causes, "incubator CO₂ excursion", true, RuleDescribed},
		{clone, clones, "the daughter clone 17", true, RuleContains}, // M4 as before
		// one sentence lists both: the code decides
		{frag, frags, "the sulfonamide CLV-5649", true, RuleDescribed},
		// guards: a word of no sentence that holds a variant
		{host, hosts, "the nightly laptop KA-LT-4627", false, RuleNone},
		{cause, causes, "assay drift CO2 excursion", false, RuleNone},
		// a word written before a variant in one clause: another
		// candidate's name around the shared code
		{clone, clones, "parental clone 17", false, RuleNone},
		{clone, clones, "the parental clone 17", false, RuleNone},
		// a word a text also writes with a capital: a name's word
		{slicer, points, "the high-speed Slicer 3", true, RuleDescribed},
		{slicer, points, "Kiln Slicer 3", false, RuleNone},
		{slicer, points, "the smoke kiln Slicer 3", false, RuleNone},
		// after the variant, only what M4 allows
		{frag, frags, "CLV-5649 fragment", false, RuleNone},
		{clone, clones, "clone 17 parental", false, RuleNone},
		// a joining word, a second code
		{frag, frags, "the fragment or CLV-5649", false, RuleNone},
		{frag, frags, "CLV-4569 CLV-5649", false, RuleNone},
		{frag, frags, "the sulfonamide CLV-4569", false, RuleNone},
		// a variant without a code: a label, a name
		{drift, causes, "mycoplasma assay drift", false, RuleNone},
		{drift, causes, "the central assay drift", false, RuleNone},
		{entry, entries, "the red-chaffed entry Tallow Gold", false, RuleNone},
		// with distractors M4 permits description words (as before)
		{&withDistractors, frags, "the fragment CLV-5649", true, RuleContains},
		{&withDistractors, frags, "the sulfonamide CLV-5649", true, RuleContains},
	}
	for _, c := range cases {
		if ok, rule := JudgeRule(c.q, c.a, c.n); ok != c.want || rule != c.rule {
			t.Errorf("JudgeRule(%q) for %q = %v by %s, want %v by %s", c.a, c.q.Answer, ok, rule, c.want, c.rule)
		}
	}
}

// TestJudgeDescribedSharedCode is the white-box attacker of M6: it knows
// the narrative and the rule, not which candidate is right, and sends
// every candidate's variant with one or two of the narrative's lower-case
// words before it ("parental clone 17", "the quarry gauge QG-7"). Where
// two candidates share a code ("daughter clone 17", and "parental clone
// 17" written "the parental line's clone 17"), no answer that M6 accepts
// for one may be accepted for another: a word written before a variant
// in one clause is never free. (M5 accepts the narrative's own run, "the
// daughter clone 17", for the variant "clone 17" as before: that is not
// M6's.)
func TestJudgeDescribedSharedCode(t *testing.T) {
	n := []string{"The parental line's clone 17 grew normally, while the daughter clone 17 lost viability. The gauge at the old quarry, QG-7, recorded it second, and the lower gauge, QG-17, third; clone 7 was not tested."}
	world := func(answers ...string) *Question {
		return &Question{Question: "Which one lost viability first?", Answer: answers[0], Answers: answers, ReasoningType: MultiHop, AnswerType: EntityAnswer}
	}
	worlds := []*Question{
		world("daughter clone 17", "clone 17"),
		world("parental clone 17", "parental line's clone 17"),
		world("clone 7"),
		world("QG-7", "old quarry gauge"),
		world("QG-17", "lower gauge QG-17"),
	}
	var lower []string
	for _, w := range strings.FieldsFunc(n[0], func(r rune) bool { return r == ' ' || r == ',' || r == ';' || r == '.' }) {
		if strings.ToLower(w) == w {
			lower = append(lower, w)
		}
	}
	var answers []string
	for _, q := range worlds {
		for _, v := range q.Answers {
			answers = append(answers, v, "the "+v)
			for _, a := range lower {
				answers = append(answers, a+" "+v, "the "+a+" "+v, v+" "+a)
				for _, b := range lower {
					answers = append(answers, a+" "+b+" "+v)
				}
			}
		}
	}
	m6 := 0
	for _, a := range answers {
		var in, by []string
		described := false
		for _, q := range worlds {
			if ok, rule := JudgeRule(q, a, n); ok {
				in, by = append(in, q.Answer), append(by, rule)
				described = described || rule == RuleDescribed
			}
		}
		if described {
			m6++
			if len(in) > 1 {
				t.Errorf("%q is accepted for %q by %q", a, in, by)
			}
		}
	}
	if m6 == 0 {
		t.Error("no answer accepted by M6: the attacker tests nothing")
	}
	// The guard's case: "parental" is written before "clone 17" in one
	// clause.
	if ok, rule := JudgeRule(worlds[0], "parental clone 17", n); ok {
		t.Errorf("\"parental clone 17\" accepted for daughter clone 17 by %s", rule)
	}
	t.Logf("%d answers, %d accepted by M6 in some world", len(answers), m6)
}

// TestJudgeWindowQuestionWords: M5 reads the narrative's run less the
// question's words and pronouns around it (spec/verification.md 1.5.28):
// "Mycoplasma in the working stock explained it." answers "What explained
// it?", refused before. The answer is accepted exactly when that run, sent
// alone, is: the variant must lie in the run (a variant of question words
// before it names nothing the run does not), and a word that is neither a
// question word nor a pronoun still ends the run.
func TestJudgeWindowQuestionWords(t *testing.T) {
	n := []string{"Growth suppression for HEK293-c11 was later traced to mycoplasma in the working stock. Lab drift was ruled out."}
	myco := &Question{Question: "Which lab drift or outside factor explained it?", Answer: "mycoplasma", Answers: []string{"mycoplasma"},
		ReasoningType: Causal, AnswerType: LabelAnswer}
	drift := &Question{Question: "Which lab drift or outside factor explained it?", Answer: "drift lab", Answers: []string{"drift lab"},
		ReasoningType: Causal, AnswerType: LabelAnswer}
	withDistractors := *myco
	withDistractors.Distractors = []string{"lab drift"}
	cases := []struct {
		q    *Question
		a    string
		want bool
	}{
		{myco, "Mycoplasma in the working stock explained it.", true},
		{myco, "It was explained by mycoplasma in the working stock.", true},
		{myco, "mycoplasma in the working stock", true},   // M5 as before
		{myco, "the outside factor was mycoplasma", true}, // M4 as before: question words
		// the run must be the narrative's, the variant in it
		{myco, "Mycoplasma explained it in the working stock.", false},
		{myco, "It was explained by mycoplasma in the working stock or not.", false},
		{myco, "Mycoplasma in the working stock was said to explain it.", false},
		{drift, "drift lab traced to mycoplasma in the working stock", false},
		{drift, "traced to mycoplasma in the working stock drift lab", false},
		// with distractors M5 does not apply
		{&withDistractors, "Mycoplasma in the working stock explained it.", true}, // M4: description words
		{&withDistractors, "Mycoplasma, not lab drift, explained it.", false},
	}
	for _, c := range cases {
		if got, rule := JudgeRule(c.q, c.a, n); got != c.want {
			t.Errorf("JudgeRule(%q) for %q = %v by %s, want %v", c.a, c.q.Answer, got, rule, c.want)
		}
	}
}
