package generate

import (
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

// TestUnlistWorded: stage 1b of generation.md removes a model's
// distractors from a question with a label answer or a worded variant
// (the audit's case: a list that misses the label "unrelated" let
// "unrelated foreshock" through for "foreshock"), keeps them on a
// question whose answer is a code, and leaves procedural and hybrid
// lists alone.
func TestUnlistWorded(t *testing.T) {
	narr := "Sequence roles: the largest event is the mainshock; events before it are foreshocks; " +
		"events after it are aftershocks; an event more than 10 km away is unrelated. The slicer and the drain " +
		"were swabbed; station KS-4 and station FH-2 logged the event."
	mk := func(src skill.SourceKind) *skill.Set {
		s := &skill.Set{Domain: "seismology", Parts: []skill.Part{{Narrative: narr, Questions: []skill.Question{
			{Question: "What role does the event have?", Answer: "foreshock", Answers: []string{"foreshock"},
				AnswerType: skill.LabelAnswer, Distractors: []string{"mainshock", "aftershock"}},
			{Question: "Which sampling point persisted?", Answer: "the slicer", Answers: []string{"the slicer"},
				AnswerType: skill.EntityAnswer, Distractors: []string{"the drain"}},
			{Question: "Which station logged it first?", Answer: "KS-4", Answers: []string{"KS-4"},
				AnswerType: skill.EntityAnswer, Distractors: []string{"FH-2"}},
		}}}}
		if src != skill.SourceUnknown {
			s.Provenance = &skill.Provenance{Source: src}
		}
		return s
	}
	shown := []string{narr}
	in := mk(skill.SourceLLM)
	q := &in.Parts[0].Questions[0]
	if !skill.Judge(q, "unrelated foreshock", shown) {
		t.Fatal("precondition: the judge accepts the hedge when the list misses \"unrelated\"")
	}
	out, recs := unlistWorded(in)
	if len(recs) != 2 || recs[0].Question != 1 || recs[1].Question != 2 || recs[0].Reason != DistractorsUnlisted {
		t.Fatalf("records %+v, want questions 1 and 2", recs)
	}
	if len(in.Parts[0].Questions[0].Distractors) != 2 {
		t.Fatal("the input set was modified")
	}
	got := out.Parts[0].Questions
	if got[0].Distractors != nil || got[1].Distractors != nil || len(got[2].Distractors) != 1 {
		t.Fatalf("distractors after stage 1b: %q %q %q", got[0].Distractors, got[1].Distractors, got[2].Distractors)
	}
	for _, c := range []struct {
		qi  int
		ans string
		ok  bool
	}{{0, "unrelated foreshock", false}, {0, "foreshock", true}, {0, "a foreshock", true},
		{1, "the slicer drain", false}, {1, "the slicer", true}, {2, "KS-4 FH-2", false}, {2, "station KS-4", true}} {
		if ok := skill.Judge(&got[c.qi], c.ans, shown); ok != c.ok {
			t.Errorf("%q for %q: %v, want %v", c.ans, got[c.qi].Answer, ok, c.ok)
		}
	}
	for _, src := range []skill.SourceKind{skill.SourceProcedural, skill.SourceHybrid} {
		s := mk(src)
		if out, recs := unlistWorded(s); out != s || recs != nil {
			t.Errorf("%s: lists changed", src)
		}
	}
	if _, recs := unlistWorded(mk(skill.SourceUnknown)); len(recs) != 2 {
		t.Errorf("no provenance: %d records, want 2", len(recs))
	}
}
