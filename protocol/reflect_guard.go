package protocol

import (
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// sketchJaccard estimates the Jaccard similarity of two shingle sets from
// their bottom-k sketches: of the k smallest hashes of the union, the
// fraction present in both.
func sketchJaccard(a, b []uint64) float64 {
	j, _ := sketchCompare(a, b, SketchSize)
	return j
}

// sketchMatch is sketchJaccard(a, b) and whether it reaches
// ReflectionJaccard, giving up (0, false) as soon as more than
// SketchSize/2 of the union's smallest hashes are in one sketch only: the
// estimate is then below the threshold whatever follows.
func sketchMatch(a, b []uint64) (float64, bool) {
	j, complete := sketchCompare(a, b, SketchSize/2)
	return j, complete && j >= ReflectionJaccard
}

// sketchCompare merges the sketches a and b (ascending) up to the
// SketchSize smallest hashes of their union and returns the fraction of
// them present in both, or (0, false) as soon as more than apart (a count)
// of them are in one sketch only.
func sketchCompare(a, b []uint64, apart int) (float64, bool) {
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
		if union-both > apart {
			return 0, false
		}
	}
	if union == 0 {
		return 0, true
	}
	return float64(both) / float64(union), true
}

// indexedHashes is how many of a sketch's smallest hashes the guard
// indexes and looks up: SketchSize/2 + 1. That is exact, not a sample.
// Let x be the smallest hash two sketches share. Every hash of either
// sketch below x is in one sketch only, and all of them are among the
// (at most SketchSize) smallest of the union whenever x is (if x is not,
// no shared hash is, and the estimate is 0). A match needs at least as
// many shared hashes there as unshared ones, so those below x number at
// most SketchSize/2: x stands at a position <= SketchSize/2 in both
// sketches, and a match always shares a hash among the first
// indexedHashes of each. Half the index entries and look-ups of indexing
// every hash (TestGuardIndexExact checks it against a full comparison).
const indexedHashes = SketchSize/2 + 1

// indexed returns the hashes of cp the guard indexes.
func (cp *challengePrint) indexed() []uint64 {
	return cp.sketch[:min(len(cp.sketch), indexedHashes)]
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
	index   map[uint64]indexed // hash among a sketch's indexedHashes -> entries
	order   []issuedRef        // insertion order = expiry order (constant window)
	head    int
	next    uint64
	checks  uint64    // check calls, to mark the entries one has seen
	cands   []*issued // check's candidates (reused)
}

// indexed are the entries whose sketches hold one hash: most hashes
// belong to one entry, kept without a slice of its own.
type indexed struct {
	one  *issued
	more []*issued
}

func (x indexed) each(f func(*issued)) {
	if x.one != nil {
		f(x.one)
	}
	for _, e := range x.more {
		f(e)
	}
}

type issued struct {
	to      peer.ID
	expires time.Time
	run     *VerifierSession // nil once the session has ended
	seq     uint64
	print   *challengePrint
	checked uint64 // the last check that listed it
}

type issuedRef struct {
	digest [32]byte
	seq    uint64
}

func newReflectionGuard(window time.Duration) *reflectionGuard {
	return &reflectionGuard{window: window, entries: map[[32]byte]*issued{}, index: map[uint64]indexed{}}
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
	for _, h := range cp.indexed() {
		x := g.index[h]
		if x.one == nil {
			x.one = e
		} else {
			x.more = append(x.more, e)
		}
		g.index[h] = x
	}
	g.order = append(g.order, issuedRef{cp.digest, g.next})
}

func (g *reflectionGuard) unindexLocked(e *issued) {
	for _, h := range e.print.indexed() {
		x := g.index[h]
		if x.one == e {
			x.one = nil
		}
		x.more = slices.DeleteFunc(x.more, func(o *issued) bool { return o == e })
		if x.one == nil && len(x.more) > 0 {
			x.one, x.more = x.more[0], x.more[1:]
		}
		if x.one == nil {
			delete(g.index, h)
		} else {
			g.index[h] = x
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
	// Every match shares a hash among the first indexedHashes of both
	// sketches: the smallest hash the two share, at positions that add up
	// to at most SketchSize/2 (see indexedHashes). The hashes are looked
	// up in ascending order, so an entry's first hit is that hash when
	// the entry matches: entries whose first hit stands further in are
	// passed over, the others compared (each entry once: marked with
	// this check's number). Challenges written from one template share
	// phrases, and with them some of the smallest hashes; this keeps
	// their comparisons few. The best estimate wins.
	g.checks++
	cands := g.cands[:0]
	for beta, h := range cp.indexed() {
		g.index[h].each(func(e *issued) {
			if e.checked == g.checks {
				return
			}
			e.checked = g.checks
			if alpha, _ := slices.BinarySearch(e.print.sketch, h); alpha+beta <= SketchSize/2 {
				cands = append(cands, e)
			}
		})
	}
	var best *issued
	bestJ := 0.0
	for _, e := range cands {
		if j, ok := sketchMatch(cp.sketch, e.print.sketch); ok && j > bestJ {
			best, bestJ = e, j
		}
	}
	clear(cands)
	g.cands = cands[:0]
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
