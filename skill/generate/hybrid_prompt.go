package generate

import (
	"fmt"
	"strings"

	"github.com/acaptcha/acaptcha/skill"
)

// The rewording request of the hybrid generator: one call per part, the
// part's narrative in, the same narrative in other words out. The model
// never sees the questions or which terms are answers.

// RewordTextStart and RewordTextEnd fence the narrative in the rewording
// request.
const (
	RewordTextStart = "<<<TEXT>>>"
	RewordTextEnd   = "<<<END TEXT>>>"
)

// rewordStyles vary the rewordings of two requests for the same skeleton
// (one is drawn per part).
var rewordStyles = []string{
	"Prefer longer sentences that join related observations with subordinate clauses.",
	"Prefer shorter, plainer sentences; split a long sentence where that stays natural.",
	"Where it reads naturally, turn active sentences into passive ones and passive ones into active ones.",
	"Open sentences differently from the original: with a time, a place, a measurement or the subject.",
	"Vary the reporting verbs (noted, logged, recorded, showed, came back) and the order of clauses.",
	"Write in the terse register of working notes, without changing any fact.",
	"Write in the measured register of a formal report, without changing any fact.",
}

// rewordSystem is the system prompt of every rewording request.
const rewordSystem = `You are a technical copy editor. You receive one section of a working document from a technical investigation and rewrite it in your own words, so that it reads as if someone else had written it, while every fact in it stays exactly as it is.

## What to change
- The wording of every sentence of prose: sentence structure, vocabulary, connectives, and whether clauses come first or last.
- The order of sentences within a paragraph, where the meaning allows it.
Do not leave sentences as they were; a reader comparing the two versions should find few identical sentences.

## What must stay exactly as written
1. Layout: the same paragraphs (separated by a blank line) in the same order. Every sentence stays in its paragraph; never move a statement into another paragraph, never merge or split paragraphs. Header and metadata lines — titles, references, "From:"/"Sent:" lines, greetings and sign-offs, timestamps, section headings, entry labels — are copied unchanged.
2. Every name, code and identifier, character for character (codes with their hyphens, letters and digits; Greek letters as written).
3. Every way an entity is referred to: if the text calls something by a description (for example "the copper-lined intake valve") or introduces a second name in parentheses, keep that description or name, in the same paragraphs. Never replace a description with the name or code it stands for, and never replace a name or code with a description.
4. Every number with its unit, every count, every date and every time. You may write a unit or a small count differently ("12 percent" or "12%", "five" or "5"), but never change, round, drop or add a number.
5. Every statement of fact: what was measured for what, when, where, in how many repeats, what explained it or did not, what was checked and found clean, what a stated rule or threshold says, and whether something did or did not happen. A preliminary reading and the later note that revises it keep their order.

## What must not appear
- Nothing new: no new fact, name, code, number, date, conclusion, summary, comment or emphasis. Do not say which candidate matters, and do not resolve what the text leaves for the reader to work out.
- No verdict labels: never "confirmed", "ruled out", "primary suspect", "prime suspect", "most likely" or "culprit", in any form.

## Output
Reply with one JSON object and nothing else — no code fence, no commentary:
{"narrative": "<the rewritten section>"}
Write paragraph breaks inside the string as \n\n and line breaks inside a paragraph as \n.`

// buildRewordPrompt writes the rewording request for part pi of s. keep
// lists the terms to copy; style is the rewording's variation; drift is
// the relative length change the fact check accepts (HybridConfig.
// LengthDrift). The prompt asks for half of it, in words: models miss a
// requested length by a few percent, and the check's margin (counted in
// skill.CountTokens units, which a rewording changes a little more than
// words) must absorb that miss, not a reply that ignored the request.
func buildRewordPrompt(s *skill.Set, pi int, keep []string, style string, drift float64) Prompt {
	narr := strings.TrimSpace(s.Parts[pi].Narrative)
	words := len(strings.Fields(narr))
	paras := len(paragraphs(narr))
	lo, hi := promptWordWindow(words, drift)
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("Rewrite the section below: part %d of %d of a case file in the field %q.\n", pi+1, len(s.Parts), strings.ReplaceAll(s.Domain, "_", " "))
	w("It has %d words in %d paragraphs. Your version must have exactly %d paragraphs and between %d and %d words.\n\n",
		words, paras, paras, lo, hi)
	if len(keep) > 0 {
		w("Copy each of these exactly as written, in the paragraphs where they occur (a number's unit may be spelled differently):\n")
		for _, k := range keep {
			w("- %s\n", k)
		}
		b.WriteString("\n")
	}
	w("Style of this rewrite: %s\n\n", style)
	w("The section is between the marker lines.\n%s\n%s\n%s\n", RewordTextStart, narr, RewordTextEnd)
	return Prompt{System: rewordSystem, User: b.String()}
}

// promptWordWindow is the word range the rewording prompt asks for: half
// the accepted drift either side of words.
func promptWordWindow(words int, drift float64) (lo, hi int) {
	d := drift / 2
	return int(float64(words) * (1 - d)), int(float64(words)*(1+d) + 0.5)
}

// The question-rewording request of the hybrid generator: one call per
// set, after every narrative passed its fact check, with all the set's
// questions in and the same questions in other words out. It is a call of
// its own rather than an extension of the narrative requests so that the
// narrative rewording never sees what is asked (it cannot make the
// answers stand out) and the question rewording never sees the narrative
// (it cannot copy an answer from it). One request for the set rather than
// one per part sends the system prompt once: about 1,000 input and 500
// output tokens for nine questions, against some 3,000 and 2,400 per
// narrative request.

// RewordQuestionsStart and RewordQuestionsEnd fence the questions in the
// question-rewording request; each question inside is one line
// "[P.Q] text", followed by its terms to keep on a line "keep: ...".
const (
	RewordQuestionsStart = "<<<QUESTIONS>>>"
	RewordQuestionsEnd   = "<<<END QUESTIONS>>>"
)

// rewordQuestionsSystem is the system prompt of the question-rewording
// request.
const rewordQuestionsSystem = `You are a technical copy editor. You receive the numbered questions of a reading-comprehension test on a case file, and you rewrite each question in your own words so that it reads as if someone else had written it, while it asks for exactly the same thing.

## Rules for every question
1. Same meaning: the rewritten question has exactly one answer and it is the same one. Keep every condition, comparison and direction (earliest/latest, highest/lowest, passed/failed, with/without), every reference to an earlier part or report, and every instruction on the answer's form (units, "in days", "as the rule names it").
2. Copy the terms listed after "keep:" exactly as written: names, codes, descriptions of entities, numbers and thresholds. Do not replace a description with a name or code, or a name with a description.
3. Nothing new: no name, code, number, date, example or hint that the question did not have, and never a guess at the answer.
4. Change the wording: sentence structure, the order of clauses, the question word, the verbs. Keep about the same length (within a third more or fewer words). One sentence or two, on one line.

## Output
Reply with one JSON object and nothing else — no code fence, no commentary — holding every question once, with its number as given:
{"questions": [{"id": "1.1", "question": "<the rewritten question>"}]}`

// buildQuestionPrompt writes the question-rewording request for s; keep
// lists, per part and question, the terms each rewording must copy.
func buildQuestionPrompt(s *skill.Set, keep [][][]string) Prompt {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	n := 0
	for _, p := range s.Parts {
		n += len(p.Questions)
	}
	w("Rewrite the %d questions below, from a case file in the field %q told in %d parts; [P.Q] numbers question Q of part P.\n", n, strings.ReplaceAll(s.Domain, "_", " "), len(s.Parts))
	w("The questions are between the marker lines.\n%s\n", RewordQuestionsStart)
	for pi, p := range s.Parts {
		for qi, q := range p.Questions {
			w("[%d.%d] %s\n", pi+1, qi+1, strings.Join(strings.Fields(q.Question), " "))
			if pi < len(keep) && qi < len(keep[pi]) && len(keep[pi][qi]) > 0 {
				w("keep: %s\n", strings.Join(keep[pi][qi], "; "))
			}
		}
	}
	w("%s\n", RewordQuestionsEnd)
	return Prompt{System: rewordQuestionsSystem, User: b.String()}
}
