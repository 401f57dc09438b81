package protocol

import (
	"crypto/sha256"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/libp2p/go-libp2p/core/peer"
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
func challengeDigest(narrative, question string) *challengePrint {
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

func shingleSketch(words []string) []uint64 {
	if len(words) == 0 {
		return nil
	}
	k := min(ShingleWords, len(words))
	hs := make([]uint64, 0, len(words)-k+1)
	// FNV-1a 64 written out (hash/fnv's, without an allocation per write:
	// this runs on every challenge sent and received).
	const offset64, prime64 = 14695981039346656037, 1099511628211
	for i := 0; i+k <= len(words); i++ {
		h := uint64(offset64)
		for j, w := range words[i : i+k] {
			if j > 0 {
				h ^= ' '
				h *= prime64
			}
			for b := 0; b < len(w); b++ {
				h ^= uint64(w[b])
				h *= prime64
			}
		}
		hs = append(hs, h)
	}
	slices.Sort(hs)
	hs = slices.Compact(hs)
	if len(hs) > SketchSize {
		hs = hs[:SketchSize:SketchSize]
	}
	return hs
}

// sketchJaccard estimates the Jaccard similarity of two shingle sets from
// their bottom-k sketches: of the k smallest hashes of the union, the
// fraction present in both.
func sketchJaccard(a, b []uint64) float64 {
	var union, both int
	i, j := 0, 0
	for union < SketchSize && (i < len(a) || j < len(b)) {
		switch {
		case j >= len(b) || (i < len(a) && a[i] < b[j]):
			i++
		case i >= len(a) || b[j] < a[i]:
			j++
		default:
			both++
			i++
			j++
		}
		union++
	}
	if union == 0 {
		return 0
	}
	return float64(both) / float64(union)
}

// reflectionGuard remembers the challenges this node issued as a
// verifier. A challenge that arrives at the prover side and matches one in
// the registry (same normalised text, or a near-duplicate by shingle
// sketch) is a reflection: the peer that sent it wants this node's own
// answerer to solve this node's challenge for it (or for a third peer it
// is relaying to). The issuing session, if still running, is ended with a
// protocol_error verdict.
type reflectionGuard struct {
	mu      sync.Mutex
	window  time.Duration
	entries map[[32]byte]*issued
	index   map[uint64]map[*issued]struct{} // sketch hash -> entries
	order   []issuedRef                     // insertion order = expiry order (constant window)
	head    int
	next    uint64
}

type issued struct {
	to      peer.ID
	expires time.Time
	run     *VerifierSession // nil once the session has ended
	seq     uint64
	print   *challengePrint
}

type issuedRef struct {
	digest [32]byte
	seq    uint64
}

func newReflectionGuard(window time.Duration) *reflectionGuard {
	return &reflectionGuard{window: window, entries: map[[32]byte]*issued{}, index: map[uint64]map[*issued]struct{}{}}
}

// issue records a challenge about to be sent to peer p by run.
func (g *reflectionGuard) issue(cp *challengePrint, p peer.ID, run *VerifierSession, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expireLocked(now)
	// Both the map and the queue (which also holds refs superseded by a
	// re-issue of the same digest) stay bounded.
	for len(g.entries) >= maxReflectionEntries || len(g.order)-g.head >= 2*maxReflectionEntries {
		g.popLocked()
	}
	if old, ok := g.entries[cp.digest]; ok {
		g.unindexLocked(old)
	}
	g.next++
	e := &issued{to: p, expires: now.Add(g.window), run: run, seq: g.next, print: cp}
	g.entries[cp.digest] = e
	for _, h := range cp.sketch {
		m := g.index[h]
		if m == nil {
			m = map[*issued]struct{}{}
			g.index[h] = m
		}
		m[e] = struct{}{}
	}
	g.order = append(g.order, issuedRef{cp.digest, g.next})
}

func (g *reflectionGuard) unindexLocked(e *issued) {
	for _, h := range e.print.sketch {
		if m := g.index[h]; m != nil {
			delete(m, e)
			if len(m) == 0 {
				delete(g.index, h)
			}
		}
	}
}

// release detaches a finished session from its challenges; they stay
// remembered until they expire.
func (g *reflectionGuard) release(run *VerifierSession) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, cp := range run.digests {
		if e, ok := g.entries[cp.digest]; ok && e.run == run {
			e.run = nil
		}
	}
}

// check reports whether cp matches a challenge this node issued within
// the window, and if so to whom and which session (nil if finished)
// issued it.
func (g *reflectionGuard) check(cp *challengePrint, now time.Time) (to peer.ID, run *VerifierSession, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expireLocked(now)
	if e, ok := g.entries[cp.digest]; ok {
		return e.to, e.run, true
	}
	// Candidates share at least one sketch hash; the best estimate wins.
	seen := map[*issued]struct{}{}
	var best *issued
	bestJ := 0.0
	for _, h := range cp.sketch {
		for e := range g.index[h] {
			if _, dup := seen[e]; dup {
				continue
			}
			seen[e] = struct{}{}
			if j := sketchJaccard(cp.sketch, e.print.sketch); j >= ReflectionJaccard && j > bestJ {
				best, bestJ = e, j
			}
		}
	}
	if best == nil {
		return "", nil, false
	}
	return best.to, best.run, true
}

func (g *reflectionGuard) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.entries)
}

func (g *reflectionGuard) expireLocked(now time.Time) {
	for g.head < len(g.order) {
		ref := g.order[g.head]
		e, ok := g.entries[ref.digest]
		if ok && e.seq == ref.seq && now.Before(e.expires) {
			return
		}
		g.popLocked()
	}
}

// popLocked forgets the oldest entry and compacts the queue now and then.
func (g *reflectionGuard) popLocked() {
	if g.head >= len(g.order) {
		return
	}
	ref := g.order[g.head]
	g.order[g.head] = issuedRef{}
	g.head++
	if e, ok := g.entries[ref.digest]; ok && e.seq == ref.seq {
		delete(g.entries, ref.digest)
		g.unindexLocked(e)
	}
	if g.head > 1024 && g.head*2 > len(g.order) {
		g.order = append([]issuedRef(nil), g.order[g.head:]...)
		g.head = 0
	}
}
