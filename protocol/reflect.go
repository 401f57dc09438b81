package protocol

import (
	"crypto/sha256"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
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

// challengeWords splits normalised text into words: maximal runs of
// letters, digits and marks.
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
	return strings.FieldsFunc(s, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.IsMark(r)
	})
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
// smallest FNV-1a-64 hashes of the word shingles of the narrative's words
// followed by the question's (one shingle of all words when there are
// fewer than ShingleWords).
//
// It runs before every challenge a node sends and on every challenge its
// prover receives while it has issued any, so text made of ASCII and of
// simpleRunes (all of the generators' output) takes a path that
// normalises, hashes and shingles in one reused buffer;
// challengeDigestGeneral is the definition, and
// TestChallengeDigestFastPath and FuzzChallengeDigestFastPath hold the two
// equal.
func challengeDigest(narrative, question string) *challengePrint {
	sc := digestScratchPool.Get().(*digestScratch)
	defer sc.put()
	// text = norm(narrative) 0x00 norm(question): exactly the bytes the
	// SHA-256 covers. The zero byte is no word byte, so the words of text
	// are the narrative's followed by the question's.
	t, w, ok := appendNormalizedSimple(sc.text[:0], sc.words[:0], narrative)
	if ok {
		t = append(t, 0)
		t, w, ok = appendNormalizedSimple(t, w, question)
	}
	sc.text = t
	if !ok {
		sc.words = w
		return challengeDigestGeneral(narrative, question)
	}
	cp := &challengePrint{digest: sha256.Sum256(t)}
	sc.words = w
	if len(w) == 0 {
		return cp
	}
	sc.hashes = shingleHashes(sc.hashes[:0], t, w)
	cp.sketch = bottomK(sc.hashes)
	return cp
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

// appendNormalizedSimple appends NormalizeChallengeText(s) to b when s
// consists of ASCII and simpleRunes only, and reports whether it did: each
// rune is replaced by its full case folding, white space runs collapse
// to one space, none leading or trailing. Such text is NFC already (every
// simple rune is a stable starter that composes with nothing before it,
// and no ASCII byte composes with what precedes it). It appends to w the
// words of what it appended (challengeWords: maximal runs of letters,
// digits and marks).
func appendNormalizedSimple(b []byte, w []wordSpan, s string) ([]byte, []wordSpan, bool) {
	first := len(b)
	b = slices.Grow(b, len(s))
	pending := false // a space is owed before the next non-space
	start := -1      // of the word being appended
	for i := 0; i < len(s); {
		var class uint8
		var fold string
		if c := s[i]; c < utf8.RuneSelf {
			i++
			class = asciiClass[c]
			if class != classSpace {
				if pending {
					b = append(b, ' ')
					pending = false
				}
				if class == classWord {
					if start < 0 {
						start = len(b)
					}
					// The rest of an ASCII word run at once (most of
					// the text): copied, then lowered in place.
					j := i
					for j < len(s) && s[j] < utf8.RuneSelf && asciiClass[s[j]] == classWord {
						j++
					}
					n := len(b)
					b = append(b, s[i-1:j]...)
					for k := n; k < len(b); k++ {
						b[k] = asciiLower[b[k]]
					}
					i = j
					continue
				} else if start >= 0 {
					w = append(w, wordSpan{int32(start), int32(len(b))})
					start = -1
				}
				b = append(b, asciiLower[c])
				continue
			}
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			i += size
			sr, ok := simpleRunes()[r]
			if !ok {
				return b, w, false
			}
			class, fold = sr.class, sr.fold
		}
		switch {
		case class == classSpace:
			pending = len(b) > first
			if start >= 0 {
				w = append(w, wordSpan{int32(start), int32(len(b))})
				start = -1
			}
			continue
		case pending:
			b = append(b, ' ')
			pending = false
		}
		if class == classWord {
			if start < 0 {
				start = len(b)
			}
		} else if start >= 0 {
			w = append(w, wordSpan{int32(start), int32(len(b))})
			start = -1
		}
		b = append(b, fold...)
	}
	if start >= 0 {
		w = append(w, wordSpan{int32(start), int32(len(b))})
	}
	return b, w, true
}

// Classes of normalised text: white space, word runes (letters, digits,
// marks) and the rest.
const (
	classOther uint8 = iota
	classSpace
	classWord
)

// simpleRune is how normalisation treats one simple rune: its full case
// folding and the class of every rune of it.
type simpleRune struct {
	fold  string
	class uint8
}

// simpleRunes are the non-ASCII runes of Latin-1, Latin Extended-A and -B,
// Greek and Coptic, and General Punctuation that NFC leaves alone wherever
// they stand (NFC-stable starters that compose with no preceding rune;
// what follows one is ASCII or another of them, and composes with
// nothing) and whose case folding is of one class; the generators'
// narratives use a few of them (degree and micro signs, accented names,
// Greek letters).
var simpleRunes = sync.OnceValue(func() map[rune]simpleRune {
	m := map[rune]simpleRune{}
	fold := cases.Fold()
	for _, rg := range [][2]rune{{0x80, 0x24F}, {0x370, 0x3FF}, {0x2000, 0x206F}} {
		for r := rg[0]; r <= rg[1]; r++ {
			s := string(r)
			p := norm.NFC.PropertiesString(s)
			if !utf8.ValidRune(r) || !p.BoundaryBefore() || norm.NFC.String(s) != s {
				continue
			}
			f := fold.String(s)
			var n [3]int
			for _, fr := range f {
				switch {
				case unicode.IsSpace(fr):
					n[classSpace]++
				case unicode.IsLetter(fr) || unicode.IsDigit(fr) || unicode.IsMark(fr):
					n[classWord]++
				default:
					n[classOther]++
				}
			}
			for class, k := range n {
				if k > 0 && k == utf8.RuneCountInString(f) {
					m[r] = simpleRune{fold: f, class: uint8(class)}
				}
			}
		}
	}
	return m
})

// wordSpan is one word of a digestScratch's text.
type wordSpan struct{ start, end int32 }

// digestScratch is the memory one challengeDigest call works in.
type digestScratch struct {
	text   []byte
	words  []wordSpan
	hashes []uint64
}

var digestScratchPool = sync.Pool{New: func() any { return new(digestScratch) }}

// put returns sc to the pool unless a very long text grew it.
func (sc *digestScratch) put() {
	if cap(sc.text) > 1<<20 {
		return
	}
	digestScratchPool.Put(sc)
}

// FNV-1a 64 (hash/fnv's, written out: no allocation per write).
const fnvOffset64, fnvPrime64 = 14695981039346656037, 1099511628211

// shingleHashes hashes with exactly ShingleWords = 5 lanes.
var (
	_ [ShingleWords - 5]struct{}
	_ [5 - ShingleWords]struct{}
)

// shingleHashes appends the FNV-1a-64 hash of every shingle of the words
// w of t (ShingleWords words joined by single spaces; one shingle of all
// words when there are fewer). The ShingleWords shingles a word belongs
// to are hashed side by side over its bytes: five independent multiply
// chains instead of one five times as long.
func shingleHashes(hs []uint64, t []byte, w []wordSpan) []uint64 {
	if len(w) < ShingleWords {
		h := uint64(fnvOffset64)
		for j, sp := range w {
			if j > 0 {
				h ^= ' '
				h *= fnvPrime64
			}
			for _, c := range t[sp.start:sp.end] {
				h ^= uint64(c)
				h *= fnvPrime64
			}
		}
		return append(hs, h)
	}
	// Before word m, h1..h4 hold the shingles that started at words
	// m-4..m-1 (meaningless for negative starts, never emitted); h5
	// starts at word m. After word m, h1 is complete.
	var h1, h2, h3, h4 uint64
	for m, sp := range w {
		h1 = (h1 ^ ' ') * fnvPrime64
		h2 = (h2 ^ ' ') * fnvPrime64
		h3 = (h3 ^ ' ') * fnvPrime64
		h4 = (h4 ^ ' ') * fnvPrime64
		h5 := uint64(fnvOffset64)
		for _, c := range t[sp.start:sp.end] {
			x := uint64(c)
			h1 = (h1 ^ x) * fnvPrime64
			h2 = (h2 ^ x) * fnvPrime64
			h3 = (h3 ^ x) * fnvPrime64
			h4 = (h4 ^ x) * fnvPrime64
			h5 = (h5 ^ x) * fnvPrime64
		}
		if m >= ShingleWords-1 {
			hs = append(hs, h1)
		}
		h1, h2, h3, h4 = h2, h3, h4, h5
	}
	return hs
}

// asciiClass classes ASCII bytes (strings.Fields' white space, letters
// and digits); asciiLower maps ASCII to lower case.
var asciiClass, asciiLower = func() (class [utf8.RuneSelf]uint8, lo [utf8.RuneSelf]byte) {
	for _, c := range " \t\n\v\f\r" {
		class[c] = classSpace
	}
	for i := range lo {
		lo[i] = byte(i)
		if isASCIIAlnum(byte(i)) {
			class[i] = classWord
		}
		if 'A' <= i && i <= 'Z' {
			lo[i] = byte(i + 'a' - 'A')
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
		h := uint64(fnvOffset64)
		for j, w := range words[i : i+k] {
			if j > 0 {
				h ^= ' '
				h *= fnvPrime64
			}
			for b := 0; b < len(w); b++ {
				h ^= uint64(w[b])
				h *= fnvPrime64
			}
		}
		hs = append(hs, h)
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
	if len(hs) <= 2*SketchSize {
		slices.Sort(hs)
		hs = slices.Compact(hs)
		return slices.Clone(hs[:min(len(hs), SketchSize)])
	}
	// Shingle hashes are spread evenly over 64 bits: the SketchSize
	// smallest of n lie below about SketchSize/n of the range. Values
	// under twice that bound are gathered (one comparison each) and, when
	// SketchSize distinct ones are among them, they hold the answer
	// exactly (every value left out is larger than all of them). Otherwise
	// (clustered values) the heap below decides.
	bound := uint64(math.MaxUint64/uint64(len(hs))) * (2 * SketchSize)
	if bound/(2*SketchSize) == math.MaxUint64/uint64(len(hs)) { // no overflow
		var buf [4 * SketchSize]uint64
		c := buf[:0]
		for _, x := range hs {
			if x < bound {
				if len(c) == cap(c) {
					c = nil // too many: the bound is no filter here
					break
				}
				c = append(c, x)
			}
		}
		if c != nil {
			slices.Sort(c)
			c = slices.Compact(c)
			if len(c) >= SketchSize {
				return slices.Clone(c[:SketchSize])
			}
		}
	}
	const slots = 1024
	var in [slots]uint8 // how many heap values have these low bits
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
