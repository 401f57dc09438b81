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
// lists the terms to copy; style is the rewording's variation.
func buildRewordPrompt(s *skill.Set, pi int, keep []string, style string) Prompt {
	narr := strings.TrimSpace(s.Parts[pi].Narrative)
	words := len(strings.Fields(narr))
	paras := len(paragraphs(narr))
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("Rewrite the section below: part %d of %d of a case file in the field %q.\n", pi+1, len(s.Parts), strings.ReplaceAll(s.Domain, "_", " "))
	w("It has %d words in %d paragraphs. Your version must have exactly %d paragraphs and between %d and %d words.\n\n",
		words, paras, paras, words*9/10, words*11/10)
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
