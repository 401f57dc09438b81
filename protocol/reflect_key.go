package protocol

import (
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/acaptcha/acaptcha/internal/wordkey"
)

// The word key of spec/protocol.md §7 (defined in internal/wordkey, which
// the judge's tail guard in skill uses too): the shingles are taken not of
// the normalised text's words but of their keys, so that the rewritings a
// relay makes at no cost (look-alike letters of other scripts, zero-width
// and bidi controls, fullwidth or mathematical forms, added diacritics,
// other scripts' digits) map back to the original.

// maxKeyDepth bounds K's recursion (wordkey.MaxDepth);
// TestWordKeyTerminates finds every rune's key within it.
const maxKeyDepth = wordkey.MaxDepth

// computeKey is K(r), the definition (internal/wordkey), which runeKeys
// tabulates for wordKey.
func computeKey(r rune, depth int) string { return wordkey.Rune(r, depth) }

func computeKeys(s string, depth int) string { return wordkey.String(s, depth) }

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
