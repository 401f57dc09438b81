package skill

import (
	"strings"
	"unicode/utf8"

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
	s = strings.TrimSpace(s)
	if isASCII(s) {
		// ASCII is NFC already, and the only ASCII runes full case
		// folding changes are 'A'..'Z' (to 'a'..'z'): the result is the
		// same (FuzzNormalize), without the Unicode tables (Judge and
		// Set.Validate normalise every variant of every question).
		return strings.ToLower(s)
	}
	return fold(norm.NFC.String(s))
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
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
	asciiA := isASCII(a)
	for _, v := range variants {
		if asciiA {
			// An ASCII variant equals a exactly when its trimmed form
			// does up to ASCII case (Normalize's ASCII path), with no
			// lower-cased copy made; a non-ASCII one normalises to a
			// non-ASCII string or needs the general path.
			if t := strings.TrimSpace(v); isASCII(t) {
				if strings.EqualFold(a, t) {
					return true
				}
				continue
			}
		}
		if a == Normalize(v) {
			return true
		}
	}
	return false
}
