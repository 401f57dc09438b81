package skill

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mtibben/confusables"
	"golang.org/x/text/unicode/norm"
)

// The tail guard's key (spec/verification.md, "Explanation"): a tail
// that holds a character other than ASCII is judged by the guard a
// second time with every character other than ASCII of the tail and of
// the question's texts replaced by its word key K of spec/protocol.md §7
// (ASCII left as written). K undoes the rewritings a script makes at no
// cost to hide a distractor in a tail from the guard while a reader
// reads it straight through: look-alike letters of other scripts
// ("СVЕ-2019-3402" in Cyrillic), fullwidth forms ("ｅｍｅｒｇｅｎｃｙ"),
// zero-width and other invisible characters inside a word
// ("Ke\u200bssler"), added diacritics, digits of other scripts.
//
// The definition is the protocol's (its Go code is protocol.wordKey,
// which skill cannot import); TestKeyMatchesProtocol compares the two.

// maxJudgeKeyDepth bounds K's recursion (no rune needs more than three
// levels, spec/protocol.md §7).
const maxJudgeKeyDepth = 6

// keyRune is K(r) for a rune that is not ASCII. It is computed on each
// use, not cached: a tail is at most 64 bytes, and a cache filled from
// the runes of remote peers' answers would grow with every code point
// they send (the protocol's table of every rune costs 0.2 s to build).
func keyRune(r rune) string { return computeJudgeKey(r, 0) }

// computeJudgeKey is K(r) of spec/protocol.md §7, from the Unicode tables.
func computeJudgeKey(r rune, depth int) string {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return string(r)
	}
	if depth > maxJudgeKeyDepth {
		return string(r)
	}
	switch {
	case unicode.In(r, unicode.M, unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point):
		return ""
	case unicode.Is(unicode.Nd, r):
		return string(rune('0' + nd10(r)))
	}
	s := string(r)
	if d := norm.NFKD.String(s); d != s {
		return computeJudgeKeys(d, depth+1)
	}
	if !unicode.IsLetter(r) {
		return s
	}
	own := ""
	if k := confusables.Skeleton(s); k != s {
		if own = computeJudgeKeys(k, depth+1); isASCII(own) {
			return own
		}
	}
	if u := unicode.ToUpper(r); u != r {
		if k := confusables.Skeleton(string(u)); k != string(u) {
			if up := computeJudgeKeys(k, depth+1); isASCII(up) {
				return up
			}
		}
	}
	if own != "" {
		return own
	}
	return s
}

func computeJudgeKeys(s string, depth int) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteString(computeJudgeKey(r, depth))
	}
	return b.String()
}

// nd10 is the value of a decimal digit (Nd): each script's digits are a
// run of ten from zero, and unicode.Nd's ranges are such runs end to end.
func nd10(r rune) int {
	for _, rg := range unicode.Nd.R16 {
		if r >= rune(rg.Lo) && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10
		}
	}
	for _, rg := range unicode.Nd.R32 {
		if r >= rune(rg.Lo) && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10
		}
	}
	return 0
}

// keyText is s, after NFC, with every character other than ASCII
// replaced by the key K of its full case folding (K is defined on folded
// text); ASCII stays as written, its case included, so that a text of
// ASCII is its own key and the guard reads it as before (the question
// words of a question's text depend on its capitals).
func keyText(s string) string {
	if isASCII(s) {
		return s
	}
	var b strings.Builder
	for _, r := range norm.NFC.String(s) {
		if r < utf8.RuneSelf {
			b.WriteRune(r)
			continue
		}
		for _, f := range fold(string(r)) {
			if f < utf8.RuneSelf {
				b.WriteRune(f)
			} else {
				b.WriteString(keyRune(f))
			}
		}
	}
	return b.String()
}

// keyedQuestion is q with its texts (question, canonical answer,
// variants, distractors) through keyText, or q itself when they are all
// ASCII.
func keyedQuestion(q *Question) *Question {
	texts := append(append([]string{q.Question, q.Answer}, q.Answers...), q.Distractors...)
	all := true
	for _, t := range texts {
		all = all && isASCII(t)
	}
	if all {
		return q
	}
	k := *q
	k.Question, k.Answer = keyText(q.Question), keyText(q.Answer)
	k.Answers = make([]string, len(q.Answers))
	for i, a := range q.Answers {
		k.Answers[i] = keyText(a)
	}
	k.Distractors = make([]string, len(q.Distractors))
	for i, d := range q.Distractors {
		k.Distractors[i] = keyText(d)
	}
	return &k
}

// keyedTailNamesCandidate is the tail guard's second reading: for a tail
// holding a character other than ASCII, whether the guard refuses the
// tail's key with the question's texts keyed.
func keyedTailNamesCandidate(q *Question, tail string) bool {
	if isASCII(tail) {
		return false
	}
	return (&judgement{q: keyedQuestion(q)}).tailNamesCandidate(keyText(tail))
}
