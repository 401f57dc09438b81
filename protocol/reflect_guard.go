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

// minShared is the fewest hashes a sketch of q hashes shares with any
// sketch it matches: of the union's SketchSize smallest hashes, at least
// half are in both, and there are at least q of them (q <= SketchSize).
// A sketch of no hashes matches none (its estimate is 0).
func minShared(q int) int { return max(1, (q+1)/2) }

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
//
// The merge steps without branches on the values (a shared hash moves
// both sides): the guard compares dozens of candidates per check whose
// hashes interleave at random, where a branch per step mispredicts about
// half the time.
func sketchCompare(a, b []uint64, apart int) (float64, bool) {
	var union, both, i, j int
	for union < SketchSize && i < len(a) && j < len(b) {
		x, y := a[i], b[j]
		le, ge := b2i(x <= y), b2i(x >= y)
		i += le
		j += ge
		both += le & ge
		union++
		if union-both > apart {
			return 0, false
		}
	}
	// One side is used up: the rest of the other is in it only.
	rest := min(len(a)-i+len(b)-j, SketchSize-union)
	union += rest
	if union-both > apart {
		return 0, false
	}
	if union == 0 {
		return 0, true
	}
	return float64(both) / float64(union), true
}

// b2i is 1 for true and 0 for false (compiled to a flag set, no branch).
func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

// reflectionGuard remembers the challenges this node issued as a
// verifier. A challenge that arrives at the prover side and matches one in
// the registry (same normalised text, or a near-duplicate by shingle
// sketch) is a reflection: the peer that sent it wants this node's own
// answerer to solve this node's challenge for it (or for a third peer it
// is relaying to). The issuing session, if still running, is ended with a
// protocol_error verdict.
//
// Its index is flat and free of pointers: entries live in a slab of
// slots, the postings of each sketch hash in a singly linked list, newest
// first, the digest map maps to slot numbers and the hash index
// (hashIndex) to each list's first posting and length. Entries leave
// only in the order they came (expiry, eviction at the bound), so the
// entry that leaves is the last of each of its lists: it leaves them by
// shortening their lengths, and a walk follows a list for its length
// only, never reaching the postings that left (whose slots may hold
// other entries by then). An entry whose digest is issued again is only
// marked dead (deadMark), skipped by checks, and leaves in its turn. So
// an issue writes its own postings and one bucket a hash, and an expiry
// one bucket a hash: no posting of another entry is touched, where the
// doubly linked lists before cost a cache miss a hash for the list's
// previous head and two for an expiry's neighbours. A check walks the
// postings without touching the entries it passes over, and the
// collector scans none of the index. Each slot's sketch and a 512-bit
// filter of it sit in flat arrays too: most candidates are ruled out by
// the filter (mayMatch), and the rest compared, without a pointer chase.
//
// Challenges written from one template share phrases, and with them
// some of their smallest hashes: those lists hold most entries. A check
// walks only the lists of the query's rarest hashes, as many as a match
// cannot avoid (see check). Before, it walked the lists of the first 33
// hashes, template ones included, and compared every entry met there:
// a check that found no match (a prover's every check) cost 150 µs
// against 1,024 procedural entries and 200 µs against a full guard; now
// issue plus check cost 5-8 µs at either size (BenchmarkReflectionGuard),
// and a mutual attestation's CPU fell by a fifth when nodes hold about
// a thousand entries (BenchmarkMutualAttestConcurrent, repeat order).
type reflectionGuard struct {
	mu     sync.Mutex
	window time.Duration
	exact  map[[32]byte]uint32 // digest -> slot
	index  hashIndex           // sketch hash -> first posting, list length
	slots  []guardSlot
	// blocks holds the slots' pointer-free data, guardBlockSlots slots a
	// block (see guardBlock).
	blocks []*guardBlock
	free   []uint32    // free slots
	order  []issuedRef // insertion order = expiry order (constant window)
	head   int
	next   uint64
	checks uint64   // check calls, to mark the entries one has met
	cands  []uint32 // check's candidates (reused)
	// touched keeps what hashIndex.touch read, so that the reads stay.
	touched uint64
	lists   []uint64 // check's lists: length << 32 | first posting (reused)
}

// guardSlot is one issued challenge; seq 0 marks a free slot.
type guardSlot struct {
	to      peer.ID
	expires time.Time
	run     *VerifierSession // nil once the session has ended
	seq     uint64
	digest  [32]byte
}

// guardBlockSlots is the number of slots whose data a guardBlock holds.
const guardBlockSlots = 64

// guardBlock is the pointer-free data of guardBlockSlots slots: each
// one's sketch (sketchLen long) and filter of it (see mayMatch), the mark
// of the last check that met it (deadMark: a dead entry), and the
// postings of its sketch's hashes, in the sketch's order: posting number
// slot*SketchSize + position, so postings need no free list of their
// own. The guard grows a block at a time and never copies what it holds;
// the collector scans none of it.
type guardBlock struct {
	seen      [guardBlockSlots]uint64
	sketchLen [guardBlockSlots]uint8
	blooms    [guardBlockSlots][bloomWords]uint64
	sketches  [guardBlockSlots][SketchSize]uint64
	posts     [guardBlockSlots][SketchSize]posting
}

// posting is one hash of one slot's sketch, in the list of that hash's
// postings: next is the posting of the entry issued before it (or
// noPosting); the list's length in the index says where it ends.
type posting struct {
	next uint32
}

const noPosting = ^uint32(0)

// deadMark in guardBlock.seen marks an entry whose digest was issued
// again: checks pass over it until it leaves in its turn.
const deadMark = ^uint64(0)

// postingSlot is the slot a posting number belongs to.
func postingSlot(q uint32) uint32 { return q / SketchSize }

// data returns the block holding slot's data and the slot's place in it.
func (g *reflectionGuard) data(slot uint32) (*guardBlock, uint32) {
	return g.blocks[slot/guardBlockSlots], slot % guardBlockSlots
}

// sketchOf is the guard's copy of slot's sketch.
func (g *reflectionGuard) sketchOf(slot uint32) []uint64 {
	b, i := g.data(slot)
	return b.sketches[i][:b.sketchLen[i]]
}

// bloomWords is the size in words of a slot's filter: one bit per hash,
// the hash's low 9 bits choosing it (sketch hashes are the smallest of
// their texts, so their high bits are not uniform; their low bits are).
const bloomWords = 8

// mayMatch is false only when the sketch q cannot match an entry whose
// sketch has n hashes and the filter bloom. A match has at least half
// of the union's smallest SketchSize hashes in both sketches, and that
// union holds at least min(SketchSize, max(len(q), n)) hashes; the
// hashes of q whose bits are set in bloom include every hash the two
// share. So fewer than half of that many set bits rule a match out,
// without reading the entry's sketch. Challenges written from one
// template share a few hashes, so the lists a check walks can still name
// entries that share nothing else with it; a real reflection shares
// half.
//
// It gives up once the misses alone rule a match out: a template's
// entries share a few hashes, so most calls end about halfway.
func mayMatch(q []uint64, n int, bloom *[bloomWords]uint64) bool {
	need := (min(SketchSize, max(len(q), n)) + 1) / 2 // 2*hits >= union
	misses, allowed := 0, len(q)-need
	for i, h := range q {
		misses += int(^bloom[h>>6%bloomWords] >> (h & 63) & 1)
		if i&7 == 7 && misses > allowed {
			return false
		}
	}
	return misses <= allowed
}

type issuedRef struct {
	slot uint32
	seq  uint64
}

func newReflectionGuard(window time.Duration) *reflectionGuard {
	// The general path's table of word keys, made before a challenge
	// that is neither ASCII nor simple needs it.
	go warmRuneKeys()
	return &reflectionGuard{window: window, exact: map[[32]byte]uint32{}}
}

// warmRuneKeys makes the reflection guard's table of word keys (once per
// process). A Service makes it in a goroutine of this name when it
// starts, which ends when the table is made: the packages whose tests
// check for leaked goroutines after a short run ignore it by this name.
func warmRuneKeys() { runeKeys() }

// issue records a challenge about to be sent to peer p by run.
func (g *reflectionGuard) issue(cp *challengePrint, p peer.ID, run *VerifierSession, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expireLocked(now)
	// The slots in use, dead ones included (each has one ref in the
	// queue), stay bounded: the oldest leave first.
	for len(g.order)-g.head >= maxReflectionEntries {
		g.popLocked()
	}
	if old, ok := g.exact[cp.digest]; ok {
		// The old entry stays in its lists until its turn to leave.
		delete(g.exact, cp.digest)
		g.slots[old].run = nil
		b, i := g.data(old)
		b.seen[i] = deadMark
	}
	slot, reused := popFree(&g.free)
	if !reused {
		slot = uint32(len(g.slots))
		g.slots = append(g.slots, guardSlot{})
		if int(slot/guardBlockSlots) == len(g.blocks) {
			g.blocks = append(g.blocks, new(guardBlock))
		}
	}
	b, i := g.data(slot)
	b.seen[i] = 0
	b.sketchLen[i] = uint8(copy(b.sketches[i][:], cp.sketch))
	bloom := &b.blooms[i]
	clear(bloom[:])
	for _, h := range cp.sketch {
		bloom[h>>6%bloomWords] |= 1 << (h & 63)
	}
	g.next++
	g.slots[slot] = guardSlot{to: p, expires: now.Add(g.window), run: run, seq: g.next, digest: cp.digest}
	g.exact[cp.digest] = slot
	g.touched += g.index.touch(cp.sketch)
	for alpha, h := range cp.sketch {
		q := slot*SketchSize + uint32(alpha)
		at, found := g.index.slot(h)
		first := noPosting
		if found {
			first = g.index.value(at)
		}
		b.posts[i][alpha] = posting{next: first}
		g.index.push(at, q)
	}
	g.order = append(g.order, issuedRef{slot, g.next})
}

// popFree takes the last number off a free list, if any.
func popFree(free *[]uint32) (uint32, bool) {
	n := len(*free)
	if n == 0 {
		return 0, false
	}
	v := (*free)[n-1]
	*free = (*free)[:n-1]
	return v, true
}

// removeLocked forgets the entry in slot, the oldest there is: its
// digest (unless a later entry holds it), its postings (the last of
// their lists) and the slot itself.
func (g *reflectionGuard) removeLocked(slot uint32) {
	if s, ok := g.exact[g.slots[slot].digest]; ok && s == slot {
		delete(g.exact, g.slots[slot].digest)
	}
	// The slot's copy of the sketch: the guard keeps no pointer to the
	// issuing session's fingerprints.
	b, i := g.data(slot)
	g.touched += g.index.touch(b.sketches[i][:b.sketchLen[i]])
	for _, h := range b.sketches[i][:b.sketchLen[i]] {
		g.index.drop(h)
	}
	b.sketchLen[i] = 0
	b.seen[i] = 0
	g.slots[slot] = guardSlot{}
	g.free = append(g.free, slot)
}

// release detaches a finished session from its challenges; they stay
// remembered until they expire.
func (g *reflectionGuard) release(run *VerifierSession) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, cp := range run.digests {
		if slot, ok := g.exact[cp.digest]; ok && g.slots[slot].run == run {
			g.slots[slot].run = nil
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
	slot, ok := g.exact[cp.digest]
	if !ok {
		if slot = g.matchLocked(cp.sketch); slot == noPosting {
			return "", nil, false
		}
	}
	return g.slots[slot].to, g.slots[slot].run, true
}

// checkLazy is check of a challenge with this sketch and digest, which
// it calls only when the sketch is empty or matches. The two come from
// one text (challengeDigest), so an entry with the same digest has the
// same sketch, and a sketch that matches nothing leaves no entry with
// that digest either; a match by digest is preferred to the best by
// sketch, as in check.
func (g *reflectionGuard) checkLazy(sketch []uint64, digest func() [32]byte, now time.Time) (to peer.ID, run *VerifierSession, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expireLocked(now)
	slot := noPosting
	if len(sketch) > 0 {
		if slot = g.matchLocked(sketch); slot == noPosting {
			return "", nil, false
		}
	}
	if s, ok := g.exact[digest()]; ok {
		slot = s
	}
	if slot == noPosting {
		return "", nil, false
	}
	return g.slots[slot].to, g.slots[slot].run, true
}

// matchLocked returns the slot of the entry whose sketch matches sketch
// best (noPosting when none does).
func (g *reflectionGuard) matchLocked(sketch []uint64) uint32 {
	// Prefix filtering, rarest first: a match shares at least
	// need = ceil(len(sketch)/2) of the query's hashes (see minShared),
	// so it is on at least one of any len(sketch)-need+1 of their lists. The lists
	// walked are the shortest: the need-1 longest, which for challenges
	// written from one template are the template's phrases, shared by
	// most entries, are passed over. Each entry met is a candidate once
	// (marked with this check's number); the candidates are compared,
	// and the best estimate wins.
	g.checks++
	g.touched += g.index.touch(sketch)
	lists := g.lists[:0]
	for _, h := range sketch {
		if first, n, ok := g.index.list(h); ok {
			lists = append(lists, uint64(n)<<32|uint64(first))
		}
	}
	// The query's hashes no entry holds have empty lists, walked for
	// nothing: of the lists there are, all but the need-1 longest are.
	walk := len(lists) - (minShared(len(sketch)) - 1)
	cands := g.cands[:0]
	if walk > 0 {
		slices.Sort(lists)
		for _, l := range lists[:walk] {
			// A list's length ends it (see reflectionGuard).
			q := uint32(l)
			for range l >> 32 {
				slot := postingSlot(q)
				b, i := g.data(slot)
				if s := b.seen[i]; s != g.checks && s != deadMark {
					b.seen[i] = g.checks
					cands = append(cands, slot)
				}
				q = b.posts[i][q%SketchSize].next
			}
		}
	}
	g.lists = lists[:0]
	best := noPosting
	bestJ := 0.0
	for _, slot := range cands {
		b, i := g.data(slot)
		n := int(b.sketchLen[i])
		if !mayMatch(sketch, n, &b.blooms[i]) {
			continue
		}
		if j, ok := sketchMatch(sketch, b.sketches[i][:n]); ok && j > bestJ {
			best, bestJ = slot, j
		}
	}
	g.cands = cands[:0]
	return best
}

func (g *reflectionGuard) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.exact)
}

func (g *reflectionGuard) expireLocked(now time.Time) {
	for g.head < len(g.order) {
		ref := g.order[g.head]
		if e := &g.slots[ref.slot]; e.seq == ref.seq && now.Before(e.expires) {
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
	if g.slots[ref.slot].seq == ref.seq {
		g.removeLocked(ref.slot)
	}
	if g.head > 1024 && g.head*2 > len(g.order) {
		g.order = append([]issuedRef(nil), g.order[g.head:]...)
		g.head = 0
	}
}
