package generate

import (
	"fmt"
	"slices"

	"github.com/acaptcha/acaptcha/skill"
)

// DistractorsUnlisted records a question whose model-written distractors
// the validator removed (Report.Unlisted): an accepted variant is made of
// description words, so the judge's description-word freedom would rest
// on the model having listed every other candidate (generation.md stage
// 1b).
const DistractorsUnlisted Reason = "worded_answer"

// modelListed reports whether s's distractor lists were written by a
// model: every source but procedural and hybrid, whose lists the code
// computes from the world model (sets without provenance included).
func modelListed(s *skill.Set) bool {
	if s.Provenance == nil {
		return true
	}
	switch s.Provenance.Source {
	case skill.SourceProcedural, skill.SourceHybrid:
		return false
	}
	return true
}

// unlistWorded returns s with the distractors of every question that has
// a worded variant (skill.WordedVariant) or a label answer removed, when a model wrote the lists,
// and one Drop record per question changed. s itself is not modified: a
// changed set is a copy.
func unlistWorded(s *skill.Set) (*skill.Set, []Drop) {
	if s == nil || !modelListed(s) {
		return s, nil
	}
	var recs []Drop
	out := s
	for pi := range s.Parts {
		var shown []string
		for k := 0; k <= pi; k++ {
			shown = append(shown, s.Parts[k].Narrative)
		}
		for qi := range s.Parts[pi].Questions {
			q := &s.Parts[pi].Questions[qi]
			if len(q.Distractors) == 0 {
				continue
			}
			v, ok := skill.WordedVariant(q, shown)
			if q.AnswerType == skill.LabelAnswer {
				v, ok = "label answer "+q.Answer, true
			}
			if !ok {
				continue
			}
			if out == s {
				out = copySet(s)
			}
			out.Parts[pi].Questions[qi].Distractors = nil
			recs = append(recs, Drop{Part: pi + 1, Question: qi + 1, Reason: DistractorsUnlisted,
				Detail: fmt.Sprintf("variant %q is made of description words; %d distractors removed", v, len(q.Distractors))})
		}
	}
	return out, recs
}

// copySet copies s deeply enough to change its questions' distractors.
func copySet(s *skill.Set) *skill.Set {
	c := *s
	c.Parts = slices.Clone(s.Parts)
	for pi := range c.Parts {
		c.Parts[pi].Questions = slices.Clone(c.Parts[pi].Questions)
	}
	return &c
}
