package skill

import (
	"strings"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// fold is safe for concurrent use: cases.Caser is not, so Normalize builds
// one per call (it is cheap) rather than sharing state.
func fold(s string) string {
	return cases.Fold().String(s)
}

// Normalize prepares an answer for comparison as the verification spec
// prescribes: trim surrounding white space, Unicode NFC, then full case
// folding (so "PFK1", " pfk1 " and "Pfk1" compare equal, and so do "ß" and
// "SS").
func Normalize(s string) string {
	return fold(norm.NFC.String(strings.TrimSpace(s)))
}

// Match reports whether answer equals want after normalisation. Answers
// longer than MaxAnswerBytes never match: they are rejected before any
// normalisation work is spent on them.
func Match(answer, want string) bool {
	if len(answer) > MaxAnswerBytes {
		return false
	}
	return Normalize(answer) == Normalize(want)
}

// MatchAny reports whether answer matches any of the accepted variants.
func MatchAny(answer string, variants []string) bool {
	if len(answer) > MaxAnswerBytes {
		return false
	}
	a := Normalize(answer)
	for _, v := range variants {
		if a == Normalize(v) {
			return true
		}
	}
	return false
}
