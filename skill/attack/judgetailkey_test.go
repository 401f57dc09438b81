package attack

import (
	"fmt"
	"strings"
	"testing"
	"unicode"

	"github.com/acaptcha/acaptcha/skill"
)

// tailDisguises are the rewritings a script makes at no cost to hide a
// distractor from the tail guard while a reader reads it straight
// through (verification.md 1.5.34).
var tailDisguises = map[string]func(string) string{
	"fullwidth": jvFullWidth,
	"look-alike letters": func(s string) string {
		// every letter with a Cyrillic or Greek look-alike
		return jvHomoglyph(s)
	},
	"zero-width space": func(s string) string { return jvInsert(s, "\u200b") },
	"soft hyphen":      func(s string) string { return jvInsert(s, "\u00ad") },
	"word joiner":      func(s string) string { return jvInsert(s, "\u2060") },
	"combining acute": func(s string) string {
		var b strings.Builder
		for _, r := range s {
			b.WriteRune(r)
			if unicode.IsLetter(r) {
				b.WriteRune('\u0301')
			}
		}
		return b.String()
	},
	"Arabic-Indic digits": func(s string) string {
		var b strings.Builder
		for _, r := range s {
			if r >= '0' && r <= '9' {
				r += '٠' - '0'
			}
			b.WriteRune(r)
		}
		return b.String()
	},
}

// TestJudgeTailGuardSeesDisguisedDistractors: on procedural sets (our
// fixtures), the canonical answer followed by an explanation that names a
// distractor is refused by the tail guard however the distractor is
// disguised, as it is written plainly; and an explanation in non-ASCII
// typography that names none is accepted, as before.
func TestJudgeTailGuardSeesDisguisedDistractors(t *testing.T) {
	refused, tried := 0, 0
	for _, set := range procSets(t, 8, 20261129) {
		for k := range set.Parts {
			narr := narrativesUpTo(set, k)
			for j := range set.Parts[k].Questions {
				q := &set.Parts[k].Questions[j]
				for _, ok := range []string{q.Answer + " — per the memo’s “final” note", q.Answer + " (naïve café reading)"} {
					if len(ok) <= skill.MaxAnswerBytes && !skill.Judge(q, ok, narr) {
						t.Errorf("%q refused (answers %q)", ok, q.Variants())
					}
				}
				for _, d := range q.Distractors {
					plain := fmt.Sprintf("%s — %s", q.Answer, d)
					if len(plain) > skill.MaxAnswerBytes || skill.Judge(q, plain, narr) {
						continue // only where the plain tail is refused
					}
					for name, f := range tailDisguises {
						a := fmt.Sprintf("%s — %s", q.Answer, f(d))
						if f(d) == d || len(a) > skill.MaxAnswerBytes {
							continue
						}
						tried++
						if skill.Judge(q, a, narr) {
							t.Errorf("%s: %q accepted (distractors %q)", name, a, q.Distractors)
						} else {
							refused++
						}
					}
				}
			}
		}
	}
	if tried < 100 {
		t.Fatalf("only %d disguised tails tried", tried)
	}
	t.Logf("%d of %d disguised tails refused", refused, tried)
}
