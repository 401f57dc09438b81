package skill

import (
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/acaptcha/acaptcha/internal/wordkey"
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
// K is defined once, in internal/wordkey, for the protocol's reflection
// fingerprint and this guard.

// keyRune is K(r) for a rune that is not ASCII. It is computed on each
// use, not cached: a tail is at most 64 bytes, and a cache filled from
// the runes of remote peers' answers would grow with every code point
// they send (the protocol's table of every rune costs 0.2 s to build).
func keyRune(r rune) string { return wordkey.Rune(r, 0) }

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
