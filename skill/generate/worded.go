package generate

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

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
// a worded variant (wordedVariant) or a label answer removed, when a model wrote the lists,
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
			v, ok := wordedVariant(q, shown)
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

// wordedVariant returns the first accepted variant of q whose words are
// all function words or description words of the texts a prover is shown
// with q (shown narratives and q's text), not all function words and none
// a joining word (spec/verification.md "Normalisation and words"): a
// variant an answer could carry as description words beside another
// candidate's, and the other candidate's beside it.
func wordedVariant(q *skill.Question, shown []string) (string, bool) {
	vocab := map[string]bool{}
	for _, t := range append(slices.Clone(shown), q.Question) {
		descriptionWords(t, vocab)
	}
	for _, v := range q.Variants() {
		ws := skill.Words(hyphens(v))
		if len(ws) == 0 {
			continue
		}
		ok, content := true, false
		for _, w := range ws {
			switch {
			case joiningWords[w.Text]:
				ok = false
			case functionWords[w.Text]:
			case w.Number == nil && vocab[w.Text]:
				content = true
			default:
				ok = false
			}
		}
		if ok && content {
			return v, true
		}
	}
	return "", false
}

// Word lists of spec/verification.md "Normalisation and words".
var (
	functionWords = wordSet("a an the of at in on by from for to with via per its their this that which is was were are be")
	joiningWords  = wordSet("and or nor not no none neither either both versus vs plus also but than except")
)

func wordSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// hyphens replaces U+2010 and U+2011 by "-", as the judge reads texts.
func hyphens(s string) string {
	return strings.NewReplacer("\u2010", "-", "\u2011", "-").Replace(s)
}

// descriptionWords adds to m the description words of text: its words
// without an ASCII digit that it spells at least once with no upper-case
// or title-case letter (per raw word; of a raw word that starts with a
// number and goes on with a letter, the rest: "km" of "10.6km").
func descriptionWords(text string, m map[string]bool) {
	text = hyphens(text)
	for _, raw := range rawWords(text) {
		if rest := unitRest(raw); rest != "" {
			raw = rest
		}
		if strings.ContainsFunc(raw, func(r rune) bool { return r >= '0' && r <= '9' }) ||
			strings.ContainsFunc(raw, func(r rune) bool { return unicode.IsUpper(r) || unicode.IsTitle(r) }) {
			continue
		}
		for _, w := range skill.Words(raw) {
			m[w.Text] = true
		}
	}
}

// unitRest returns the part of raw after a leading number when a letter
// follows it ("km" of "10.6km"), else "".
func unitRest(raw string) string {
	k := strings.IndexFunc(raw, unicode.IsLetter)
	if k <= 0 {
		return ""
	}
	if ws := skill.Words(raw[:k]); len(ws) != 1 || ws[0].Number == nil || ws[0].Text != raw[:k] {
		return ""
	}
	return raw[k:]
}

// rawWords splits text into maximal runs of letters, marks and digits
// with the joiners between two of them, as spec/verification.md's words
// reads them, keeping their case.
func rawWords(text string) []string {
	isWord := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsNumber(r) }
	rs := []rune(text)
	var out []string
	for i := 0; i < len(rs); {
		if !isWord(rs[i]) {
			i++
			continue
		}
		j := i
		for j < len(rs) {
			if isWord(rs[j]) {
				j++
				continue
			}
			if strings.ContainsRune("-.,/'’_:", rs[j]) && j+1 < len(rs) && isWord(rs[j+1]) {
				j++
				continue
			}
			break
		}
		out = append(out, string(rs[i:j]))
		i = j
	}
	return out
}
