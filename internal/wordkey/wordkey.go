// Package wordkey is the word key K of spec/protocol.md §7, defined once
// for its two readers: the reflection fingerprint (protocol, which
// tabulates it for every rune) and the judge's tail guard (skill,
// spec/verification.md "Explanation"), which protocol imports and so
// cannot be imported by.
package wordkey

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mtibben/confusables"
	"golang.org/x/text/unicode/norm"
)

// The word key of spec/protocol.md §7. A relay can rewrite a challenge
// at no cost so that an LLM reads it unchanged while most of its words
// change bytes: a Latin letter for its Cyrillic or Greek look-alike,
// zero-width and bidi controls, soft hyphens or variation selectors
// inside words, fullwidth or mathematical letters and digits, diacritics
// added, digits of another script. The shingles are therefore taken not
// of the normalised text's words but of their keys, in which each of
// these rewritings maps back to the original: K, below, character by
// character of the normalised text (N of §7, which the digest covers
// unchanged).
//
// K(c) of a character c:
//   - ASCII: its lower case (the normalised text's ASCII is lower case
//     already; upper case comes only out of the steps below);
//   - a mark (M), format character (Cf), variation selector or other
//     default-ignorable code point (Unicode properties
//     Variation_Selector, Other_Default_Ignorable_Code_Point): nothing;
//   - a decimal digit (Nd) of any script: the ASCII digit of its value;
//   - otherwise, when its compatibility decomposition (NFKD) is not c
//     itself: K of each character of the decomposition;
//   - otherwise, for a letter (L), with the skeleton of a character x
//     its UTS #39 skeleton (confusables.txt of Unicode 13.0.0: NFD, each
//     character mapped by the table, NFD), and K(s) the concatenation of
//     K of each character of s:
//     - when c's skeleton is not c and K of it is all ASCII: that;
//     - otherwise, when c has a simple upper case mapping U other than
//       c, U's skeleton is not U and K of it is all ASCII: that (N folded
//       the text, and Cyrillic т, the small letter of the look-alike of
//       T, looks like no Latin letter);
//     - otherwise, when c's skeleton is not c: K of it;
//     (punctuation, symbols and other numbers are left to the next
//     case: the skeleton maps a few of them to letters, the ideographic
//     full stop to o, and they would make words);
//   - otherwise c.
//
// Words are then the maximal runs of letters (L) and decimal digits (Nd)
// of the keys: everything else K leaves separates words, what it drops
// does not. The confusables are those of github.com/mtibben/confusables
// (the table of confusables.txt, version 13.0.0); ASCII is exempt from
// them, so that the key of ASCII text is the text: the few ASCII
// look-alikes (0 and O, 1, I and l, rn and m) are edits an LLM does not
// read straight through, and the ASCII paths stay as they were.

// MaxDepth bounds K's recursion; protocol's TestWordKeyTerminates finds
// every rune's key within it (the deepest takes 2 steps below the first).
const MaxDepth = 6

// Rune is K(r) at recursion depth depth (0 for a caller), from the
// Unicode tables: the definition. ASCII is its lower case.
func Rune(r rune, depth int) string {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return string(r)
	}
	if depth > MaxDepth {
		// Not reached by any rune (protocol's TestWordKeyTerminates).
		return string(r)
	}
	switch {
	case unicode.In(r, unicode.M, unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point):
		return ""
	case unicode.Is(unicode.Nd, r):
		return string(rune('0' + DecimalValue(r)))
	}
	s := string(r)
	if d := norm.NFKD.String(s); d != s {
		return String(d, depth+1)
	}
	if !unicode.IsLetter(r) {
		// Punctuation and symbols keep separating words: the skeleton
		// maps a few to letters (the ideographic full stop to o).
		return s
	}
	// The key of its look-alike when that is ASCII; else that of its
	// capital's look-alike when that is (N folded the text: Cyrillic т,
	// the small letter of Т, looks like no Latin letter); else that of
	// its look-alike.
	own := ""
	if k := confusables.Skeleton(s); k != s {
		if own = String(k, depth+1); isASCII(own) {
			return own
		}
	}
	if u := unicode.ToUpper(r); u != r {
		if k := confusables.Skeleton(string(u)); k != string(u) {
			if up := String(k, depth+1); isASCII(up) {
				return up
			}
		}
	}
	if own != "" {
		return own
	}
	return s
}

// String is K of each rune of s, concatenated, at recursion depth depth.
func String(s string, depth int) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteString(Rune(r, depth))
	}
	return b.String()
}

// DecimalValue is the value of a decimal digit (Nd): Unicode encodes
// each script's digits as a run of ten from zero, and unicode.Nd's ranges
// are such runs end to end.
func DecimalValue(r rune) int {
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

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
