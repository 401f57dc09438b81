package protocol

import (
	"strings"
	"sync"
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

// maxKeyDepth bounds K's recursion; TestWordKeyTerminates finds every
// rune's key within it (the deepest takes 2 steps below the first).
const maxKeyDepth = 6

// computeKey is K(r) for a rune that is not ASCII, from the Unicode
// tables: the definition, which runeKeys tabulates for wordKey.
func computeKey(r rune, depth int) string {
	if r < utf8.RuneSelf {
		return string(asciiLower[r])
	}
	if depth > maxKeyDepth {
		// Not reached by any rune (TestWordKeyTerminates).
		return string(r)
	}
	switch {
	case unicode.In(r, unicode.M, unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point):
		return ""
	case unicode.Is(unicode.Nd, r):
		return string(rune('0' + decimalValue(r)))
	}
	s := string(r)
	if d := norm.NFKD.String(s); d != s {
		return computeKeys(d, depth+1)
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
		if own = computeKeys(k, depth+1); isASCII(own) {
			return own
		}
	}
	if u := unicode.ToUpper(r); u != r {
		if k := confusables.Skeleton(string(u)); k != string(u) {
			if up := computeKeys(k, depth+1); isASCII(up) {
				return up
			}
		}
	}
	if own != "" {
		return own
	}
	return s
}

func computeKeys(s string, depth int) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteString(computeKey(r, depth))
	}
	return b.String()
}

// decimalValue is the value of a decimal digit (Nd): Unicode encodes
// each script's digits as a run of ten from zero, and unicode.Nd's ranges
// are such runs end to end.
func decimalValue(r rune) int {
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

// runeKeys holds K(r) for every rune above ASCII whose key is not the
// rune itself (about 26,000 of them: 18,300 in the Basic Multilingual
// Plane, the rest mathematical letters, digits of other scripts, tags,
// variation selectors and compatibility ideographs), made on first use:
// about 0.2 s, which newReflectionGuard spends in the background, so that
// no timed round of a node's prover waits for it. Every rune is in the
// table or is its own key, so a challenge costs one look-up per rune
// above ASCII whatever it is written in: computing the keys of
// supplementary runes on each use cost a crafted 32 KiB challenge 15 ms
// against 0.9 ms before the word key; 1.1 ms now (BenchmarkChallengeDigest/crafted-32KiB).
var runeKeys = sync.OnceValue(func() map[rune]string {
	m := map[rune]string{}
	for r := rune(utf8.RuneSelf); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		if k := computeKey(r, 0); k != string(r) {
			m[r] = k
		}
	}
	return m
})

// wordKey is K(r) for a rune that is not ASCII, and whether it is the
// rune itself (then key is empty: nothing allocated).
func wordKey(r rune) (key string, same bool) {
	k, ok := runeKeys()[r]
	return k, !ok
}

// isKeyWordRune says whether a rune of a key belongs to a word: a letter
// or a decimal digit (keys hold no marks and only ASCII digits).
func isKeyWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return isASCIIAlnum(byte(r))
	}
	return unicode.IsLetter(r) || unicode.Is(unicode.Nd, r)
}

// appendKeyWords appends to ws the key of r with each rune of it that is
// no word's replaced by one space: the words of ws, separated by spaces,
// are those of the key.
func appendKeyWords(ws []byte, r rune) []byte {
	if r < utf8.RuneSelf {
		return append(ws, asciiWord[r])
	}
	k, same := wordKey(r)
	if same {
		if isKeyWordRune(r) {
			return utf8.AppendRune(ws, r)
		}
		return append(ws, ' ')
	}
	for _, kr := range k {
		if isKeyWordRune(kr) {
			ws = utf8.AppendRune(ws, kr)
		} else {
			ws = append(ws, ' ')
		}
	}
	return ws
}
