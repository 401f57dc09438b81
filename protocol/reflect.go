package protocol

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/skill"
)

// DefaultReflectionWindow is how long a node remembers the challenges it
// issued, to refuse them when they come back to it.
const DefaultReflectionWindow = 10 * time.Minute

// maxReflectionEntries bounds the reflection registry; the oldest entries
// are forgotten first.
const maxReflectionEntries = 8192

// Near-duplicate matching of challenges (spec/protocol.md §7).
const (
	// ShingleWords is the number of consecutive words in a shingle.
	ShingleWords = 5
	// SketchSize is k of the bottom-k sketch kept per issued challenge.
	SketchSize = 64
	// ReflectionJaccard is the estimated Jaccard similarity of shingle
	// sets at or above which a challenge counts as a reflection.
	ReflectionJaccard = 0.5
)

// NormalizeChallengeText is the normalisation of §7: Unicode NFC, full
// case folding, and every run of white space collapsed to one space with
// none leading or trailing.
func NormalizeChallengeText(s string) string {
	if isASCII(s) {
		// ASCII is already NFC and full case folding of ASCII is its
		// lower case: the same result at a fraction of the cost (this runs
		// on every challenge sent and received).
		return strings.Join(strings.Fields(strings.ToLower(s)), " ")
	}
	return strings.Join(strings.Fields(cases.Fold().String(norm.NFC.String(s))), " ")
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// challengeWords splits normalised text into the words of §7: the
// maximal runs of letters and digits of its word key (reflect_key.go).
func challengeWords(s string) []string {
	if isASCII(s) {
		// Same words as the general path, scanned byte by byte: the
		// per-rune Unicode lookups cost more than the rest of a round.
		words := make([]string, 0, len(s)/5)
		start := -1
		for i := 0; i <= len(s); i++ {
			if i < len(s) && isASCIIAlnum(s[i]) {
				if start < 0 {
					start = i
				}
				continue
			}
			if start >= 0 {
				words = append(words, s[start:i])
				start = -1
			}
		}
		return words
	}
	ws := make([]byte, 0, len(s))
	for _, r := range s {
		ws = appendKeyWords(ws, r)
	}
	return strings.Fields(string(ws))
}

func isASCIIAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// challengePrint identifies an issued or received challenge: the exact
// digest of its normalised text and a bottom-k sketch of its word
// shingles.
type challengePrint struct {
	digest [32]byte
	sketch []uint64 // ascending, distinct, at most SketchSize
}

// challengeDigest fingerprints a challenge: SHA-256 over the normalised
// narrative, a zero byte and the normalised question; and the SketchSize
// smallest hashes (shingleHash) of the word shingles of the narrative's
// words followed by the question's (one shingle of all words when there
// are fewer than ShingleWords).
//
// It runs before every challenge a node sends and on every challenge its
// prover receives while it has issued any, so text made of ASCII and of
// simpleRunes (all of the generators' output) takes a path that
// normalises it mostly 8 bytes at a time into reused buffers and hashes
// each word once (shingleHashes); challengeDigestGeneral is the
// definition, and TestChallengeDigestFastPath and
// FuzzChallengeDigestFastPath hold the two equal.
func challengeDigest(narrative, question string) *challengePrint {
	sc := digestScratchPool.Get().(*digestScratch)
	defer sc.put()
	cp, ok := sc.sketch(narrative, question)
	if !ok {
		return challengeDigestGeneral(narrative, question)
	}
	cp.digest = sha256.Sum256(sc.text)
	return cp
}

// sketch is challengeDigest's work but the SHA-256, on the fast path:
// it leaves the digest's input, norm(narrative) 0x00 norm(question), in
// sc.text. ok is false when the text needs the general path.
func (sc *digestScratch) sketch(narrative, question string) (cp *challengePrint, ok bool) {
	// text = norm(narrative) 0x00 norm(question): exactly the bytes the
	// SHA-256 covers. The zero byte is no word byte, so the words of text
	// are the narrative's followed by the question's.
	t, ws, ok := appendNormalizedSimple(sc.text[:0], sc.words[:0], narrative)
	if ok {
		t, ws = append(t, 0), append(ws, ' ')
		t, ws, ok = appendNormalizedSimple(t, ws, question)
	}
	sc.text, sc.words = t, ws
	if !ok {
		return nil, false
	}
	cp = &challengePrint{}
	// Words are separated by spaces: at most len(ws)/2+1 of them.
	sc.hashes = slices.Grow(sc.hashes[:0], len(ws)/2+1)
	if hs := shingleHashes(sc.hashes[:len(ws)/2+1], ws); len(hs) > 0 {
		cp.sketch = bottomKIn(hs, &sc.bottom)
	}
	return cp, true
}

// checkReceived is guard.check(challengeDigest(narrative, question),
// now), the check a prover makes of every challenge it receives while
// it has issued any. Most find nothing, and need no digest: an entry
// with the challenge's digest has its normalised text, so its sketch
// too, and when that is not empty the sketch comparison finds it
// (estimate 1). So the SHA-256 runs only for a challenge without words
// or once the sketch found a match (which the digest then pins down as
// check does).
func (g *reflectionGuard) checkReceived(narrative, question string, now time.Time) (to peer.ID, run *VerifierSession, ok bool) {
	sc := digestScratchPool.Get().(*digestScratch)
	defer sc.put()
	cp, simple := sc.sketch(narrative, question)
	if !simple {
		return g.check(challengeDigestGeneral(narrative, question), now)
	}
	return g.checkLazy(cp.sketch, func() [32]byte { return sha256.Sum256(sc.text) }, now)
}

// challengeDigestGeneral is challengeDigest for any text.
func challengeDigestGeneral(narrative, question string) *challengePrint {
	n, q := NormalizeChallengeText(narrative), NormalizeChallengeText(question)
	cp := &challengePrint{}
	h := sha256.New()
	h.Write([]byte(n))
	h.Write([]byte{0})
	h.Write([]byte(q))
	h.Sum(cp.digest[:0])
	words := append(challengeWords(n), challengeWords(q)...)
	cp.sketch = shingleSketch(words)
	return cp
}

// appendNormalizedSimple appends NormalizeChallengeText(s) to t when s
// consists of ASCII and simpleRunes only, and reports whether it did: each
// rune is replaced by its full case folding, white space runs collapse
// to one space, none leading or trailing. Such text is NFC already (every
// simple rune is a stable starter that composes with nothing before it,
// and no ASCII byte composes with what precedes it). It appends to ws
// the word key of the same text (§7, reflect_key.go) with every rune that
// is not a word's (challengeWords: of letters and digits) replaced by a
// space, for shingleHashes: for ASCII, t's bytes so replaced; for a
// simple rune, its simpleRune.words.
func appendNormalizedSimple(t, ws []byte, s string) ([]byte, []byte, bool) {
	first := len(t)
	// A white space run appends one space unless t ends with one already
	// or holds nothing of s yet (spaced); a space left at the end is cut.
	// The 8 spare bytes are for the stores of 8 bytes at a time.
	t, ws = slices.Grow(t, len(s)+8), slices.Grow(ws, len(s)+8)
	spaced := true
	for i := 0; i < len(s); {
		if len(s) >= 8 {
			if cap(t)-len(t) < len(s)-i+8 || cap(ws)-len(ws) < len(s)-i+8 {
				// Only after folds longer than their runes.
				t, ws = slices.Grow(t, len(s)-i+8), slices.Grow(ws, len(s)-i+8)
			}
			if t, ws, i = appendASCII(t, ws, s, i, spaced); i == len(s) {
				break
			}
		}
		// One byte or rune that the above does not take.
		if c := s[i]; c < utf8.RuneSelf {
			i++
			if asciiClass[c] == classSpace {
				if len(t) > first && t[len(t)-1] != ' ' {
					t, ws = append(t, ' '), append(ws, ' ')
				}
			} else {
				t, ws = append(t, asciiLower[c]), append(ws, asciiWord[c])
			}
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			i += size
			sr, ok := simpleRunes()[r]
			if !ok {
				return t, ws, false
			}
			if sr.class == classSpace {
				if len(t) > first && t[len(t)-1] != ' ' {
					t, ws = append(t, ' '), append(ws, ' ')
				}
			} else {
				t, ws = append(t, sr.fold...), append(ws, sr.words...)
			}
		}
		spaced = len(t) == first || t[len(t)-1] == ' '
	}
	if len(t) > first && t[len(t)-1] == ' ' {
		t, ws = t[:len(t)-1], ws[:len(ws)-1]
	}
	return t, ws, true
}

// load64 reads the first 8 bytes of s, the first the lowest.
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// Bytes of 8 in a uint64, for appendASCII.
const (
	swarOnes  = 0x0101010101010101
	swarHighs = 0x8080808080808080
)

// appendASCII appends to t and ws what appendNormalizedSimple does for
// the bytes of s from i on up to the first that is not ASCII, and returns
// where that is (len(s) when there is none). spaced says whether a space
// there would be dropped. t and ws have room for len(s)-i+8 more bytes; s
// is at least 8 long.
//
// It takes 8 bytes at a time in a uint64 (the first the lowest), with
// masks that have the high bit of each byte for which a test holds: x +
// (0x80-c)*swarOnes has it for the bytes of x of at least c when x's
// bytes are ASCII (no sum carries); a byte of 0x80 or more makes at most
// the masks of itself and (by its carry) of the bytes after it wrong, and
// they are not taken. The last few bytes of s are read as the top of its
// last 8.
func appendASCII(t, ws []byte, s string, i int, spaced bool) ([]byte, []byte, int) {
	o, ow := len(t), len(ws)
	t, ws = t[:cap(t)], ws[:cap(ws)]
	after := uint64(0) // 0x80 when the byte before x is white space
	if spaced {
		after = 0x80
	}
	for i < len(s) {
		var x uint64
		if len(s)-i >= 8 {
			x = load64(s[i:])
		} else {
			// The bytes past s are taken for bytes that are not ASCII.
			k := len(s) - i
			x = load64(s[len(s)-8:])>>(8*(8-k)) | swarHighs<<(8*k)
		}
		high := x & swarHighs
		// White space: \t to \r, and the space.
		ctrlWhite := (x + (0x80-'\t')*swarOnes) &^ (x + (0x80-'\r'-1)*swarOnes) & swarHighs
		white := (x+(0x80-' ')*swarOnes)&^(x+(0x80-' '-1)*swarOnes)&swarHighs | ctrlWhite
		// Taken: the bytes before the first that is not ASCII or is white
		// space after white space.
		stop := high | white&(white<<8|after)
		// Lower case, white space as the space.
		upper := (x + (0x80-'A')*swarOnes) &^ (x + (0x80-'Z'-1)*swarOnes) & swarHighs
		lo := x + upper>>2                      // +0x20 on upper case letters
		ctrlMask := ctrlWhite<<1 - ctrlWhite>>7 // 0xFF for 0x80
		lo = lo&^ctrlMask | ' '*swarOnes&ctrlMask
		// Digits and letters (of either case in folded) kept in ws.
		folded := x | ' '*swarOnes
		alnum := ((x+(0x80-'0')*swarOnes)&^(x+(0x80-'9'-1)*swarOnes) |
			(folded+(0x80-'a')*swarOnes)&^(folded+(0x80-'z'-1)*swarOnes)) & swarHighs
		wordMask := alnum<<1 - alnum>>7
		binary.LittleEndian.PutUint64(t[o:o+8], lo)
		binary.LittleEndian.PutUint64(ws[ow:ow+8], lo&wordMask|' '*swarOnes&^wordMask)
		if stop == 0 {
			// Advancing by the constant keeps the next load independent
			// of this one's result.
			i, o, ow = i+8, o+8, ow+8
			after = white >> 63 << 7
			continue
		}
		n := bits.TrailingZeros64(stop) >> 3
		i, o, ow = i+n, o+n, ow+n
		if high>>(8*n)&0x80 != 0 {
			break // not ASCII (or past s): the caller's
		}
		// White space after white space: dropped.
		i++
		after = 0x80
	}
	return t[:o], ws[:ow], i
}

// Classes of normalised text: white space, word runes (letters, digits,
// marks) and the rest.
const (
	classOther uint8 = iota
	classSpace
	classWord
)

// simpleRune is how normalisation treats one simple rune: its full case
// folding, whether that is white space (classSpace) or holds none
// (classOther), and what it adds to the words.
type simpleRune struct {
	fold  string
	class uint8
	// words is the word key (§7, reflect_key.go) of fold with each rune
	// that is no word's as one space: what the rune adds to the words.
	words string
}

// simpleRunes are the non-ASCII runes of Latin-1, Latin Extended-A and -B,
// Greek and Coptic, Cyrillic, Latin Extended Additional, General
// Punctuation, Letterlike Symbols, the variation selectors, the byte
// order mark, Halfwidth and Fullwidth Forms and Mathematical
// Alphanumeric Symbols that NFC leaves alone wherever they stand
// (NFC-stable starters that compose with no preceding rune; what follows
// one is ASCII or another of them, and composes with nothing) and whose
// case folding is white space alone or holds none; the generators'
// narratives use a few of them (degree and micro signs, accented names,
// Greek letters), and the rewritings that the word key undoes (§7) most
// of the others: those take the fast path too.
var simpleRunes = sync.OnceValue(func() map[rune]simpleRune {
	m := map[rune]simpleRune{}
	fold := cases.Fold()
	for _, rg := range [][2]rune{{0x80, 0x24F}, {0x370, 0x52F}, {0x1E00, 0x1EFF}, {0x2000, 0x206F},
		{0x2100, 0x214F}, {0xFE00, 0xFE0F}, {0xFEFF, 0xFEFF}, {0xFF00, 0xFFEF}, {0x1D400, 0x1D7FF}} {
		for r := rg[0]; r <= rg[1]; r++ {
			s := string(r)
			p := norm.NFC.PropertiesString(s)
			if !utf8.ValidRune(r) || !p.BoundaryBefore() || norm.NFC.String(s) != s {
				continue
			}
			f := fold.String(s)
			spaces := 0
			for _, fr := range f {
				if unicode.IsSpace(fr) {
					spaces++
				}
			}
			var words []byte
			for _, fr := range f {
				for _, kr := range computeKey(fr, 0) {
					if isKeyWordRune(kr) {
						words = utf8.AppendRune(words, kr)
					} else {
						words = append(words, ' ')
					}
				}
			}
			switch spaces {
			case 0:
				m[r] = simpleRune{fold: f, class: classOther, words: string(words)}
			case utf8.RuneCountInString(f):
				m[r] = simpleRune{fold: f, class: classSpace, words: " "}
			}
		}
	}
	return m
})

// digestScratch is the memory one challengeDigest call works in.
type digestScratch struct {
	text   []byte
	words  []byte // text with the bytes that are no word's as spaces
	hashes []uint64
	bottom bottomKScratch
}

var digestScratchPool = sync.Pool{New: func() any { return new(digestScratch) }}

// put returns sc to the pool unless a very long text grew it.
func (sc *digestScratch) put() {
	if cap(sc.text) > 1<<20 || cap(sc.hashes) > 1<<17 { // 1 MiB each
		return
	}
	digestScratchPool.Put(sc)
}

// FNV-1a 64 (hash/fnv's, written out: no allocation per write).
const fnvOffset64, fnvPrime64 = 14695981039346656037, 1099511628211

// shingleHashes returns the hash of every shingle of the words of ws
// (runs of bytes other than spaces; a shingle is ShingleWords consecutive
// words; one shingle of all words when there are fewer; see shingleHash)
// in a slice of out, which has room for one per word. Each word is
// hashed once, 8 bytes at a time, and its hash taken into the
// ShingleWords shingles it belongs to: hashing the text of every shingle
// byte by byte took each byte ShingleWords times.
func shingleHashes(out []uint64, ws []byte) []uint64 {
	var st shingleState
	return st.finish(st.roll(out[:0], ws))
}

// shingleState is shingleHashes' state between words: x is the shingle
// ending with the last word before fmix64 (see shingleHash), kept
// rolling: x*P + w adds a word and w0*P^5 takes out the one that leaves
// (w0..w4 are the last five words' hashes, w4 the last; zero before the
// text). Until ShingleWords words are in, x is that of all of them. A
// narrative's state is kept (narrativePrint) and rolled on over each
// question of its part.
type shingleState struct {
	x, w0, w1, w2, w3, w4 uint64
	words                 int
}

// roll appends to out (which has room for one hash per word of ws) the
// hash of every shingle that ends with a word of ws, the words before
// ws being those st has seen.
func (st *shingleState) roll(out []uint64, ws []byte) []uint64 {
	n := len(ws)
	// Eight spaces after the text: every load of 8 bytes from a word's
	// byte on finds the word's end by then.
	ws = append(ws, "        "...)
	x, w0, w1, w2, w3, w4, words := st.x, st.w0, st.w1, st.w2, st.w3, st.w4, st.words
	for i := 0; i < n; {
		if ws[i] == ' ' {
			i++
			continue
		}
		w := uint64(fnvOffset64)
		for {
			c := binary.LittleEndian.Uint64(ws[i:])
			// The high bit of each space byte of c (exact up to the first).
			y := c ^ 0x2020202020202020
			sp := (y - swarOnes) &^ y & swarHighs
			if sp == 0 {
				w = (w ^ c) * fnvPrime64
				i += 8
				continue
			}
			if k := bits.TrailingZeros64(sp) >> 3; k > 0 {
				w = (w ^ c&(1<<(8*k)-1)) * fnvPrime64
				i += k
			}
			break
		}
		x = x*fnvPrime64 + w - w0*fnvPrime64Pow5
		w0, w1, w2, w3, w4 = w1, w2, w3, w4, w
		words++
		if words >= ShingleWords {
			out = append(out, fmix64(x))
		}
	}
	st.x, st.w0, st.w1, st.w2, st.w3, st.w4, st.words = x, w0, w1, w2, w3, w4, words
	return out
}

// finish is the shingle hashes of the whole text, given those roll
// appended to hs (empty unless ShingleWords words are in): with fewer
// words, one shingle of all of them (none for no words), in hs's array.
func (st *shingleState) finish(hs []uint64) []uint64 {
	switch {
	case st.words == 0:
		return nil
	case st.words < ShingleWords:
		return append(hs[:0], fmix64(st.x))
	}
	return hs
}

// fnvPrime64Pow5 is fnvPrime64^ShingleWords modulo 2^64.
const fnvPrime64Pow5 = fnvPrime64 * fnvPrime64 * fnvPrime64 * fnvPrime64 * fnvPrime64 % (1 << 64)

// shingleHashes rolls with exactly ShingleWords = 5 words.
var (
	_ [ShingleWords - 5]struct{}
	_ [5 - ShingleWords]struct{}
)

// shingleHash is the hash of one shingle (spec/protocol.md §7): x = 0,
// then x = x*P + wordHash(w) for each word w in order, then fmix64(x);
// P is FNV-1a 64's prime and all arithmetic is modulo 2^64.
func shingleHash(words []string) uint64 {
	var x uint64
	for _, w := range words {
		x = x*fnvPrime64 + wordHash(w)
	}
	return fmix64(x)
}

// wordHash is FNV-1a 64 over 8-byte units: h = FNV-1a 64's offset basis,
// then h = (h XOR c) * P for each 8 bytes c of w read as a little-endian
// integer, the last ones padded with zero bytes (no word holds one).
func wordHash(w string) uint64 {
	h := uint64(fnvOffset64)
	for i := 0; i < len(w); i += 8 {
		var c uint64
		for j := 0; j < 8 && i+j < len(w); j++ {
			c |= uint64(w[i+j]) << (8 * j)
		}
		h = (h ^ c) * fnvPrime64
	}
	return h
}

// fmix64 is MurmurHash3's 64-bit finaliser: every bit of x moves every
// bit of the result, so that the smallest shingle hashes (the sketch)
// are a fair sample whatever the words' hashes have in common.
func fmix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// asciiClass classes ASCII bytes (strings.Fields' white space, letters
// and digits); asciiLower maps ASCII to lower case, and asciiWord letters
// and digits to lower case and the rest to a space.
var asciiClass, asciiLower, asciiWord = func() (class [utf8.RuneSelf]uint8, lo, word [utf8.RuneSelf]byte) {
	for _, c := range " \t\n\v\f\r" {
		class[c] = classSpace
	}
	for i := range lo {
		lo[i] = byte(i)
		if 'A' <= i && i <= 'Z' {
			lo[i] = byte(i + 'a' - 'A')
		}
		word[i] = ' '
		if isASCIIAlnum(byte(i)) {
			class[i] = classWord
			word[i] = lo[i]
		}
	}
	return
}()

func shingleSketch(words []string) []uint64 {
	if len(words) == 0 {
		return nil
	}
	k := min(ShingleWords, len(words))
	hs := make([]uint64, 0, len(words)-k+1)
	for i := 0; i+k <= len(words); i++ {
		hs = append(hs, shingleHash(words[i:i+k]))
	}
	return bottomK(hs)
}

// bottomK returns the SketchSize smallest distinct values of hs (which it
// may reorder) in ascending order, in a slice of their own. A max-heap
// keeps the SketchSize smallest distinct values seen: most values cost
// one comparison with its top, and the few that enter it a look-up in a
// small counting filter of the heap's values (a scan of the heap only
// when the filter cannot rule a duplicate out).
func bottomK(hs []uint64) []uint64 {
	sc := digestScratchPool.Get().(*digestScratch)
	defer sc.put()
	return bottomKIn(hs, &sc.bottom)
}

// bottomKScratch is the memory bottomKIn works in: 3.5 KiB that would
// otherwise sit on the stack of the goroutine that fingerprints, and
// grow (copy) the stack of many a new session's goroutine.
type bottomKScratch struct {
	sorted [4 * SketchSize]uint64
	in     [1024]uint8
	at     [256]uint16 // sortUnder's
}

// bottomKIn is bottomK working in sc.
func bottomKIn(hs []uint64, sc *bottomKScratch) []uint64 {
	if len(hs) <= 2*SketchSize {
		slices.Sort(hs)
		hs = slices.Compact(hs)
		return slices.Clone(hs[:min(len(hs), SketchSize)])
	}
	// Shingle hashes are spread evenly over 64 bits: the SketchSize
	// smallest of n lie below about SketchSize/n of the range. Values
	// under twice that bound are gathered and, when SketchSize distinct
	// ones are among them, they hold the answer exactly (every value left
	// out is larger than all of them). Otherwise (clustered values, or
	// too many under the bound) the heap below decides.
	bound := uint64(math.MaxUint64/uint64(len(hs))) * (2 * SketchSize)
	if bound/(2*SketchSize) == math.MaxUint64/uint64(len(hs)) { // no overflow
		// Those under the bound are moved to the front: every value is
		// swapped there and only those under it stay, so that no branch
		// depends on the comparisons, which no predictor can guess.
		k := 0
		for i, x := range hs {
			hs[i], hs[k] = hs[k], x
			_, under := bits.Sub64(x, bound, 0)
			k += int(under)
		}
		if k <= 4*SketchSize {
			c := sortUnder(sc.sorted[:k], hs[:k], bound, &sc.at)
			c = slices.Compact(c)
			if len(c) >= SketchSize {
				return slices.Clone(c[:SketchSize])
			}
		}
	}
	const slots = uint64(len(sc.in))
	in := &sc.in // how many heap values have these low bits
	clear(in[:])
	has := func(h []uint64, x uint64) bool { return in[x%slots] != 0 && slices.Contains(h, x) }
	h := make([]uint64, 0, SketchSize)
	for _, x := range hs {
		switch {
		case len(h) < SketchSize:
			if !has(h, x) {
				in[x%slots]++
				h = append(h, x)
				heapUp(h, len(h)-1)
			}
		case x < h[0] && !has(h, x):
			in[h[0]%slots]--
			in[x%slots]++
			h[0] = x
			heapDown(h)
		}
	}
	slices.Sort(h)
	return h
}

// sortUnder sorts src, fewer than 1<<16 values under bound, into dst (as
// long): a counting sort on their top 8 bits below the bound, then an
// insertion sort of what shares a bucket. On evenly spread values
// (bottomK's) it costs a few operations per value and few mispredicted
// branches, where a comparison sort mispredicts about one comparison in
// two.
func sortUnder(dst, src []uint64, bound uint64, at *[256]uint16) []uint64 {
	shift := max(bits.Len64(bound-1)-8, 0)
	clear(at[:]) // values in the bucket, then where it starts in dst
	for _, x := range src {
		at[uint8(x>>shift)]++
	}
	n := uint16(0)
	for b, m := range at {
		at[b], n = n, n+m
	}
	for _, x := range src {
		b := uint8(x >> shift)
		dst[at[b]] = x
		at[b]++
	}
	for i := 1; i < len(dst); i++ {
		x := dst[i]
		j := i
		for ; j > 0 && dst[j-1] > x; j-- {
			dst[j] = dst[j-1]
		}
		dst[j] = x
	}
	return dst
}

// heapUp and heapDown keep h a max-heap.
func heapUp(h []uint64, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p] >= h[i] {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func heapDown(h []uint64) {
	for i := 0; ; {
		l, big := 2*i+1, i
		if l < len(h) && h[l] > h[big] {
			big = l
		}
		if r := l + 1; r < len(h) && h[r] > h[big] {
			big = r
		}
		if big == i {
			return
		}
		h[i], h[big] = h[big], h[i]
		i = big
	}
}

// narrativePrint is challengeDigest's work on a narrative alone: its
// normalised text hashed up to the zero byte, its shingle state after its
// last word, and the sketch of the shingles within it. A verifier
// fingerprints each challenge it sends (VerifierSession.Next); the
// narrative is most of the text and the same for every question of its
// part, so the source's preparation of a set (skill.Set.Prepare, through
// the preparer registered below) does it once per part, and each
// challenge then costs its question's words alone: about 4 % of a mutual
// attestation's CPU moves out of the session, to where the set is made
// or enters the pool. print gives exactly challengeDigest's result
// (TestNarrativePrint, FuzzChallengeDigestFastPath).
type narrativePrint struct {
	narrative string
	// simple is false when the narrative takes the general path: print is
	// then challengeDigest.
	simple bool
	sha    hash.Cloner // SHA-256 of norm(narrative) 0x00; cloned, never written
	st     shingleState
	sketch []uint64 // bottomK of the narrative's own shingles
}

func newNarrativePrint(narrative string) *narrativePrint {
	np := &narrativePrint{narrative: narrative}
	sc := digestScratchPool.Get().(*digestScratch)
	defer sc.put()
	t, ws, ok := appendNormalizedSimple(sc.text[:0], sc.words[:0], narrative)
	sc.text, sc.words = t, ws
	h, cloner := sha256.New().(hash.Cloner)
	if !ok || !cloner {
		return np
	}
	h.Write(t)
	h.Write([]byte{0})
	sc.hashes = slices.Grow(sc.hashes[:0], len(ws)/2+1)
	if hs := np.st.roll(sc.hashes[:0], ws); len(hs) > 0 {
		np.sketch = bottomKIn(hs, &sc.bottom)
	}
	np.sha, np.simple = h, true
	return np
}

// print is challengeDigest(np.narrative, question).
func (np *narrativePrint) print(question string) *challengePrint {
	if !np.simple {
		return challengeDigest(np.narrative, question)
	}
	sc := digestScratchPool.Get().(*digestScratch)
	defer sc.put()
	t, ws, ok := appendNormalizedSimple(sc.text[:0], sc.words[:0], question)
	sc.text, sc.words = t, ws
	if !ok {
		return challengeDigest(np.narrative, question)
	}
	h, err := np.sha.Clone()
	if err != nil {
		return challengeDigest(np.narrative, question)
	}
	cp := &challengePrint{}
	h.Write(t)
	h.Sum(cp.digest[:0])
	// The shingles that end with a question word, rolled on from the
	// narrative's state (the words of norm(n) 0x00 norm(q) are the
	// narrative's followed by the question's), then the SketchSize
	// smallest of them and of the narrative's own: the smallest of a
	// union are among the smallest of each side.
	st := np.st
	sc.hashes = slices.Grow(sc.hashes[:0], len(ws)/2+1)
	hs := st.finish(st.roll(sc.hashes[:0], ws))
	if st.words < ShingleWords {
		// One shingle of all words (none without words): the narrative
		// had no shingle of its own.
		cp.sketch = slices.Clone(hs)
		return cp
	}
	cp.sketch = mergeSketch(np.sketch, hs)
	return cp
}

// mergeSketch returns the SketchSize smallest distinct values of a
// (ascending, distinct) and hs (which it sorts), ascending, in a slice of
// their own; nil when both are empty.
func mergeSketch(a, hs []uint64) []uint64 {
	if len(a)+len(hs) == 0 {
		return nil
	}
	if len(a) == SketchSize {
		// A value not below a's largest cannot displace any of a's (a
		// value equal to it is it): most of a question's shingles, on a
		// narrative of hundreds, are not sorted at all.
		k := 0
		for _, h := range hs {
			if h < a[SketchSize-1] {
				hs[k] = h
				k++
			}
		}
		hs = hs[:k]
	}
	slices.Sort(hs)
	hs = slices.Compact(hs)
	out := make([]uint64, 0, min(SketchSize, len(a)+len(hs)))
	i, j := 0, 0
	for len(out) < SketchSize && (i < len(a) || j < len(hs)) {
		switch {
		case j == len(hs) || i < len(a) && a[i] < hs[j]:
			out = append(out, a[i])
			i++
		case i == len(a) || hs[j] < a[i]:
			out = append(out, hs[j])
			j++
		default: // in both
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	return out
}

// narrativePrints is the key of a prepared set's narrative prints, one
// per part (skill.Set.PreparedValue).
type narrativePrints struct{}

func init() {
	skill.RegisterPreparer(skill.Preparer{Key: narrativePrints{}, Prepare: func(s *skill.Set) any {
		nps := make([]*narrativePrint, len(s.Parts))
		for i := range s.Parts {
			nps[i] = newNarrativePrint(s.Parts[i].Narrative)
		}
		return nps
	}})
}

// issuedPrint is challengeDigest(c.Narrative, c.Question) for a
// challenge of set, from the set's prepared narrative prints when it has
// them.
func issuedPrint(set *skill.Set, c skill.Challenge) *challengePrint {
	if v, ok := set.PreparedValue(narrativePrints{}); ok {
		nps := v.([]*narrativePrint)
		// Round r shows part r; the narrative is compared all the same
		// (by pointer first: the same string).
		if i := c.Round - 1; i >= 0 && i < len(nps) && nps[i].narrative == c.Narrative {
			return nps[i].print(c.Question)
		}
	}
	return challengeDigest(c.Narrative, c.Question)
}
