package secondmatch2

import (
	"strings"
	"unicode"

	"github.com/mtibben/confusables"
	"golang.org/x/text/unicode/norm"
)

// 1.5.34: the tail guard's second reading. A tail holding a character
// other than ASCII is refused too when the guard refuses its key, read
// with the question's texts keyed: every character other than ASCII
// (after NFC) replaced by K (protocol.md §7) of its full case folding,
// ASCII kept as written.

// kOf is K(c) of protocol.md §7.
func kOf(c rune) []rune {
	if c < 0x80 {
		return []rune{unicode.ToLower(c)}
	}
	if unicode.IsMark(c) || unicode.Is(unicode.Cf, c) || unicode.Is(unicode.Variation_Selector, c) ||
		unicode.Is(unicode.Other_Default_Ignorable_Code_Point, c) {
		return nil
	}
	if unicode.Is(unicode.Nd, c) {
		v := 0
		for unicode.Is(unicode.Nd, c-rune(v)-1) {
			v++
		}
		return []rune{'0' + rune(v%10)}
	}
	all := func(s string) []rune {
		var out []rune
		for _, r := range s {
			out = append(out, kOf(r)...)
		}
		return out
	}
	isASCIIRunes := func(rs []rune) bool {
		for _, r := range rs {
			if r >= 0x80 {
				return false
			}
		}
		return true
	}
	if d := norm.NFKD.String(string(c)); d != string(c) {
		return all(d)
	}
	if !unicode.IsLetter(c) {
		return []rune{c}
	}
	own := confusables.Skeleton(string(c))
	if own != string(c) {
		if k := all(own); isASCIIRunes(k) {
			return k
		}
	}
	if up := unicode.ToUpper(c); up != c {
		if sk := confusables.Skeleton(string(up)); sk != string(up) {
			if k := all(sk); isASCIIRunes(k) {
				return k
			}
		}
	}
	if own != string(c) {
		return all(own)
	}
	return []rune{c}
}

func keyed(s string) string {
	var b strings.Builder
	for _, r := range norm.NFC.String(s) {
		if r < 0x80 {
			b.WriteRune(r)
			continue
		}
		for _, f := range folder.String(string(r)) {
			if f < 0x80 {
				b.WriteRune(f)
			} else {
				b.WriteString(string(kOf(f)))
			}
		}
	}
	return b.String()
}

func hasNonASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return true
		}
	}
	return false
}

// keyedTailOK is tailOK of the tail's key in a context of the keyed
// question (the narratives as they are: the guard does not read them).
func (c *ctx) keyedTailOK(tail string) bool {
	if !hasNonASCII(tail) {
		return true
	}
	if c.kctx == nil {
		kq := &Q{Question: keyed(c.q.Question), Answer: keyed(c.q.Answer)}
		for _, a := range c.q.Answers {
			kq.Answers = append(kq.Answers, keyed(a))
		}
		for _, d := range c.q.Distractors {
			kq.Distractors = append(kq.Distractors, keyed(d))
		}
		c.kctx = newCtx(kq, c.narr)
	}
	return c.kctx.tailOK(keyed(tail))
}
