package protocol

import (
	"testing"
	"unicode"
	"unicode/utf8"
)

// Every rune's key is reached within maxKeyDepth steps, holds no mark,
// format character or non-ASCII digit, and is its own key (K is
// idempotent: a key rewritten again is unchanged).
func TestWordKeyTerminates(t *testing.T) {
	t.Parallel() // pure computation on its own values, no package state written
	deepest := 0
	for r := rune(utf8.RuneSelf); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		k := computeKey(r, 0)
		// With d+1 steps fewer the key is the same: it takes at most
		// maxKeyDepth-d-1. Only a rune that takes more steps than the
		// deepest so far can change deepest, so the steps are counted
		// down to deepest+1, no further: a rune whose key is the same
		// with maxKeyDepth-deepest steps fewer takes at most deepest, as
		// the full count would find. (Counting all the way took most of
		// this test's time: seven keys per rune instead of five, over
		// all of Unicode, under -race.)
		window := maxKeyDepth - deepest
		d := 0
		for d < window && computeKey(r, d+1) == k {
			d++
		}
		if d < window {
			deepest = maxKeyDepth - d
		}
		for _, kr := range k {
			if unicode.In(kr, unicode.M, unicode.Cf) || unicode.Is(unicode.Nd, kr) && kr >= utf8.RuneSelf {
				t.Fatalf("%U: key %q holds %U", r, k, kr)
			}
		}
		if again := computeKeys(k, 0); again != k {
			t.Fatalf("%U: key %q, its key %q", r, k, again)
		}
		// The table a challenge is keyed with holds every rune whose key
		// is not itself (no key is computed on use).
		if got, same := wordKey(r); same != (k == string(r)) || !same && got != k {
			t.Fatalf("%U: table key %q (own %v), definition %q", r, got, same, k)
		}
	}
	t.Logf("the deepest key takes %d steps", deepest)
	if deepest >= maxKeyDepth-1 {
		t.Fatalf("a key takes %d steps of at most %d", deepest, maxKeyDepth)
	}
}
