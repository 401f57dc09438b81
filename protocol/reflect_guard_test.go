package protocol

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/skill/procedural"
)

// The guard walks the lists of only the query's rarest hashes, all but
// minShared-1 of them (see check): on sketches built to put the shared
// hashes as late as a match allows, on random ones around the threshold
// and on random sequences of the union, it finds a match exactly when a
// full comparison with every issued sketch does.
func TestGuardIndexExact(t *testing.T) {
	t.Parallel() // pure computation on its own values, no package state written
	r := rand.New(rand.NewPCG(7, 8))
	// sketchOf makes a sorted, distinct sketch of at most SketchSize
	// values from vals.
	sketchOf := func(vals []uint64) []uint64 {
		s := slices.Clone(vals)
		slices.Sort(s)
		s = slices.Compact(s)
		return s[:min(len(s), SketchSize)]
	}
	span := func(from, n uint64) []uint64 {
		v := make([]uint64, n)
		for i := range v {
			v[i] = from + uint64(i)
		}
		return v
	}
	type pair struct{ a, b []uint64 }
	var cases []pair
	// Hand-built extremes: the shared hashes all after the unshared ones
	// of one side (J = 0.5 exactly, shared first at position 32 of a), of
	// both sides, and one short of a match.
	cases = append(cases,
		pair{sketchOf(append(span(1, 32), span(100, 32)...)), sketchOf(span(100, 64))},
		pair{sketchOf(append(span(1, 16), span(100, 48)...)), sketchOf(append(span(50, 16), span(100, 48)...))},
		pair{sketchOf(append(span(1, 33), span(100, 31)...)), sketchOf(span(100, 64))},
		pair{sketchOf(span(1, 10)), sketchOf(span(1, 10))},
		pair{sketchOf(append(span(1, 5), span(100, 5)...)), sketchOf(span(100, 5))},
	)
	// Random ones: a shared set and two private ones of random sizes,
	// with hashes drawn from a small range so that orders interleave.
	for range 3000 {
		shared := make([]uint64, r.IntN(80))
		for i := range shared {
			shared[i] = r.Uint64N(1 << 12)
		}
		own := func() []uint64 {
			v := slices.Clone(shared)
			for range r.IntN(80) {
				v = append(v, r.Uint64N(1<<12)+(1<<12)*uint64(1+r.IntN(2)))
			}
			return v
		}
		cases = append(cases, pair{sketchOf(own()), sketchOf(own())})
	}
	// Sequences: the union in ascending order, each hash in one sketch
	// or in both, the mix near the threshold and skewed to one side, so
	// that the first shared hash stands at every pair of positions.
	for range 5000 {
		var a, b []uint64
		pShared, pA := 0.3+0.4*r.Float64(), r.Float64()
		for v := range uint64(40 + r.IntN(60)) {
			switch x := r.Float64(); {
			case x < pShared:
				a, b = append(a, v+1), append(b, v+1)
			case (x-pShared)/(1-pShared) < pA:
				a = append(a, v+1)
			default:
				b = append(b, v+1)
			}
		}
		cases = append(cases, pair{sketchOf(a), sketchOf(b)}, pair{sketchOf(b), sketchOf(a)})
	}
	now := time.Unix(1000, 0)
	var matches, misses int
	for i, c := range cases {
		g := newReflectionGuard(time.Hour)
		issued := &challengePrint{sketch: c.a}
		issued.digest[0] = 1
		g.issue(issued, "p", nil, now)
		recv := &challengePrint{sketch: c.b}
		recv.digest[0] = 2
		_, _, got := g.check(recv, now)
		want := sketchJaccard(c.a, c.b) >= ReflectionJaccard
		if got != want {
			t.Fatalf("case %d: check %v, full comparison %v (J=%.3f)\na=%v\nb=%v", i, got, want, sketchJaccard(c.a, c.b), c.a, c.b)
		}
		if want {
			matches++
		} else {
			misses++
		}
	}
	if matches < 1000 || misses < 1000 {
		t.Fatalf("%d matches, %d misses: the cases do not cover both", matches, misses)
	}
}

// BenchmarkReflectionGuard issues and checks one procedural challenge per
// op against a guard holding 1,024 others, and one at its bound of
// maxReflectionEntries (a verifier that also proves does both for every
// round; a busy node's guard is full).
func BenchmarkReflectionGuard(b *testing.B) {
	g, err := procedural.New(procedural.Config{})
	if err != nil {
		b.Fatal(err)
	}
	var prints []*challengePrint
	for len(prints) < 2*maxReflectionEntries {
		set, err := g.Next(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range set.Parts {
			for _, q := range p.Questions {
				prints = append(prints, challengeDigest(p.Narrative, q.Question))
			}
		}
	}
	for _, held := range []int{1024, maxReflectionEntries} {
		b.Run(fmt.Sprintf("held=%d", held), func(b *testing.B) {
			now := time.Unix(1000, 0)
			guard := newReflectionGuard(time.Hour)
			for _, cp := range prints[:held] {
				guard.issue(cp, "p", nil, now)
			}
			// Issue the challenges after those held, check ones not
			// issued (a prover's challenges come from other verifiers).
			i := held
			for b.Loop() {
				guard.issue(prints[i%len(prints)], "p", nil, now)
				guard.check(prints[(i+held/2)%len(prints)], now)
				i++
			}
		})
	}
}

// The flat index stays consistent with the live entries through any mix
// of issues, re-issues of a digest, expiries and evictions at the bound:
// every live entry's hashes are each listed once, in lists (newest first,
// as long as the index says) that name live entries and dead ones (a
// digest issued again) only; freed postings and slots are reused, not
// leaked; and check agrees with a comparison against every live entry.
func TestReflectionGuardIndexConsistent(t *testing.T) {
	t.Parallel() // pure computation on its own values, no package state written
	r := rand.New(rand.NewPCG(11, 12))
	// Sketches from a small range of hashes, so that lists are long and
	// entries share their first hashes (as template phrases do).
	sketch := func() *challengePrint {
		v := make([]uint64, 1+r.IntN(SketchSize+20))
		for i := range v {
			v[i] = r.Uint64N(400)
		}
		slices.Sort(v)
		v = slices.Compact(v)
		cp := &challengePrint{sketch: v[:min(len(v), SketchSize)]}
		cp.digest[0], cp.digest[1] = byte(r.IntN(256)), byte(r.IntN(8))
		return cp
	}
	g := newReflectionGuard(50 * time.Second)
	now := time.Unix(1000, 0)
	live := map[[32]byte]*challengePrint{} // the model: digest -> print, with expiry below
	expires := map[[32]byte]time.Time{}
	verify := func(step int) {
		for d, at := range expires {
			if !now.Before(at) {
				delete(live, d)
				delete(expires, d)
			}
		}
		g.mu.Lock()
		g.expireLocked(now)
		g.mu.Unlock()
		if len(g.exact) != len(live) {
			t.Fatalf("step %d: %d entries, model %d", step, len(g.exact), len(live))
		}
		// Entries whose digest was issued again stay, dead, until their
		// turn to leave.
		dead := 0
		for slot := range g.slots {
			if b, i := g.data(uint32(slot)); g.slots[slot].seq != 0 && b.seen[i] == deadMark {
				dead++
			}
		}
		listed := 0
		g.index.each(func(h uint64) {
			slots := g.postingSlots(h)
			if len(slots) == 0 {
				t.Fatalf("step %d: hash %d held with no postings", step, h)
			}
			for k, slot := range slots {
				e := &g.slots[slot]
				if e.seq == 0 || !slices.Contains(g.sketchOf(slot), h) {
					t.Fatalf("step %d: hash %d lists a free slot %d or one without it", step, h, slot)
				}
				if k > 0 && e.seq >= g.slots[slots[k-1]].seq {
					t.Fatalf("step %d: hash %d: list not newest first", step, h)
				}
				if b, i := g.data(slot); b.seen[i] != deadMark {
					if cp := live[e.digest]; cp == nil || g.exact[e.digest] != slot || !slices.Equal(g.sketchOf(slot), cp.sketch) {
						t.Fatalf("step %d: hash %d lists slot %d, neither live nor dead", step, h, slot)
					}
				}
				listed++
			}
		})
		want := 0
		for d, cp := range live {
			slot, ok := g.exact[d]
			if !ok || g.slots[slot].digest != d || !slices.Equal(g.sketchOf(slot), cp.sketch) {
				t.Fatalf("step %d: live digest not in its slot", step)
			}
			for alpha, h := range cp.sketch {
				if q := slot*SketchSize + uint32(alpha); !slices.Contains(g.postingsOf(h), q) {
					t.Fatalf("step %d: slot %d hash %d (position %d) not indexed", step, slot, h, alpha)
				}
			}
		}
		inUse := 0
		for slot := range g.slots {
			b, i := g.data(uint32(slot))
			if g.slots[slot].seq == 0 && b.sketchLen[i] != 0 {
				t.Fatalf("step %d: free slot %d keeps a sketch", step, slot)
			}
			inUse += int(b.sketchLen[i])
		}
		want = inUse
		if listed != want || len(g.slots)-len(g.free) != len(live)+dead || len(g.order)-g.head != len(live)+dead {
			t.Fatalf("step %d: %d postings listed, %d in use; %d slots in use and %d queued, want %d live and %d dead",
				step, listed, want, len(g.slots)-len(g.free), len(g.order)-g.head, len(live), dead)
		}
		if len(g.blocks) != (len(g.slots)+guardBlockSlots-1)/guardBlockSlots {
			t.Fatalf("step %d: %d blocks for %d slots", step, len(g.blocks), len(g.slots))
		}
	}
	var issued []*challengePrint
	for step := range 3000 {
		switch x := r.IntN(10); {
		case x < 5 || len(issued) == 0:
			cp := sketch()
			g.issue(cp, "p", nil, now)
			live[cp.digest], expires[cp.digest] = cp, now.Add(g.window)
			issued = append(issued, cp)
		case x < 7: // the same digest again: the old entry is replaced
			old := issued[r.IntN(len(issued))]
			cp := &challengePrint{digest: old.digest, sketch: sketch().sketch}
			g.issue(cp, "p", nil, now)
			live[cp.digest], expires[cp.digest] = cp, now.Add(g.window)
		case x < 8:
			now = now.Add(time.Duration(r.IntN(20)) * time.Second)
		default:
			q := sketch()
			bestJ := 0.0
			_, exact := live[q.digest]
			for _, cp := range live {
				if j := sketchJaccard(q.sketch, cp.sketch); j >= ReflectionJaccard {
					bestJ = max(bestJ, j)
				}
			}
			if _, _, ok := g.check(q, now); ok != (exact || bestJ > 0) {
				t.Fatalf("step %d: check %v, model exact %v best %.3f", step, ok, exact, bestJ)
			}
		}
		verify(step)
	}
	if most := len(g.exact) + len(g.free); len(g.slots) != most {
		t.Fatalf("%d slots for %d entries and %d free", len(g.slots), len(g.exact), len(g.free))
	}
	// At the bound the oldest are evicted, and the slab stops growing.
	g = newReflectionGuard(time.Hour)
	for i := range maxReflectionEntries + 500 {
		cp := &challengePrint{sketch: []uint64{uint64(i), uint64(i) + 1}}
		binary.LittleEndian.PutUint64(cp.digest[:], uint64(i))
		g.issue(cp, "p", nil, now)
	}
	if len(g.slots) > maxReflectionEntries || g.len() > maxReflectionEntries {
		t.Fatalf("%d slots, %d entries at the bound", len(g.slots), g.len())
	}
}

// sketchCompare agrees with the definition, computed on sets: of the
// SketchSize smallest hashes of the union, the fraction in both, and
// (0, false) exactly when more than apart of them are in one only
// (whether the merge stops early is not observable but in its result).
func TestSketchCompareDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	ref := func(a, b []uint64) (union, both int) {
		in := map[uint64]int{}
		for _, v := range a {
			in[v] |= 1
		}
		for _, v := range b {
			in[v] |= 2
		}
		keys := slices.Sorted(maps.Keys(in))
		keys = keys[:min(len(keys), SketchSize)]
		for _, k := range keys {
			if in[k] == 3 {
				both++
			}
		}
		return len(keys), both
	}
	sketch := func(n int, span uint64) []uint64 {
		v := make([]uint64, n)
		for i := range v {
			v[i] = r.Uint64N(span)
		}
		slices.Sort(v)
		v = slices.Compact(v)
		return v[:min(len(v), SketchSize)]
	}
	for i := range 20000 {
		span := uint64(8 + r.IntN(300))
		a, b := sketch(r.IntN(SketchSize+10), span), sketch(r.IntN(SketchSize+10), span)
		apart := r.IntN(SketchSize + 2)
		union, both := ref(a, b)
		j, ok := sketchCompare(a, b, apart)
		// The merge stops once more than apart are one-sided, which
		// happens at some prefix of the union exactly when it does over
		// all of it (the one-sided count only grows).
		wantOK := union-both <= apart
		if ok != wantOK {
			t.Fatalf("case %d: ok %v, want %v (union %d, both %d, apart %d)\na=%v\nb=%v", i, ok, wantOK, union, both, apart, a, b)
		}
		want := 0.0
		if wantOK && union > 0 {
			want = float64(both) / float64(union)
		}
		if j != want {
			t.Fatalf("case %d: J %v, want %v\na=%v\nb=%v", i, j, want, a, b)
		}
	}
}

// mayMatch, which stops early, agrees with its rule counted in full: at
// least half of min(SketchSize, max(len(q), n)) of q's hashes have
// their bits set in the filter.
func TestMayMatchRule(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	for i := range 20000 {
		var bloom [bloomWords]uint64
		for range 1 + r.IntN(80) {
			h := r.Uint64()
			bloom[h>>6%bloomWords] |= 1 << (h & 63)
		}
		q := make([]uint64, r.IntN(SketchSize+1))
		for j := range q {
			if r.IntN(2) == 0 {
				q[j] = r.Uint64()
			} else { // a bit that is set
				for {
					h := r.Uint64()
					if bloom[h>>6%bloomWords]>>(h&63)&1 == 1 {
						q[j] = h
						break
					}
				}
			}
		}
		if r.IntN(50) == 0 {
			clear(bloom[:])
		}
		n := r.IntN(SketchSize + 1)
		hits := 0
		for _, h := range q {
			hits += int(bloom[h>>6%bloomWords] >> (h & 63) & 1)
		}
		want := 2*hits >= min(SketchSize, max(len(q), n))
		if got := mayMatch(q, n, &bloom); got != want {
			t.Fatalf("case %d: mayMatch %v, rule %v (hits %d of %d, n %d)", i, got, want, hits, len(q), n)
		}
	}
}

// A prover's check (checkReceived: the SHA-256 only when the sketch is
// empty or matches) finds what check of the full fingerprint finds, and
// names the same issuing entry: on procedural challenges, on copies
// changed in case, white space or punctuation only (same sketch, another
// digest: the entry with the digest wins), with a word changed, on text
// without words and on text the fast path does not take.
func TestCheckReceivedAgrees(t *testing.T) {
	seed := uint64(5)
	gen, err := procedural.New(procedural.Config{Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	type text struct{ n, q string }
	var issued []text
	for range 8 {
		set, err := gen.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range set.Parts {
			issued = append(issued, text{p.Narrative, p.Questions[0].Question})
		}
	}
	issued = append(issued, text{"!!! ???", "..."}, text{"", ""}, text{"Ünïcode narrative — with ﬁ ligatures", "Which one?"})
	variants := func(x text) []text {
		return []text{
			x,
			{strings.ToUpper(x.n), x.q},
			{"  " + strings.ReplaceAll(x.n, " ", "\t "), x.q},
			{strings.ReplaceAll(x.n, ".", ";"), x.q},
			{strings.Replace(x.n, " ", " different ", 1), x.q},
			{x.n + " tail", x.q + "?"},
			{"unrelated " + x.q, x.n},
		}
	}
	now := time.Unix(1000, 0)
	g := newReflectionGuard(time.Hour)
	for i, x := range issued {
		g.issue(challengeDigest(x.n, x.q), peer.ID(fmt.Sprint("issued-", i)), nil, now)
		// The punctuation variant issued too: same sketch, another digest.
		if i%3 == 0 {
			v := variants(x)[3]
			g.issue(challengeDigest(v.n, v.q), peer.ID(fmt.Sprint("variant-", i)), nil, now)
		}
	}
	var hits, misses int
	for _, x := range issued {
		for _, v := range append(variants(x), text{"never issued at all " + x.q, "nothing"}) {
			wantTo, _, wantOK := g.check(challengeDigest(v.n, v.q), now)
			gotTo, _, gotOK := g.checkReceived(v.n, v.q, now)
			if gotOK != wantOK || gotTo != wantTo {
				t.Fatalf("%q / %q: checkReceived (%q, %v), check (%q, %v)", v.n, v.q, gotTo, gotOK, wantTo, wantOK)
			}
			if wantOK {
				hits++
			} else {
				misses++
			}
		}
	}
	if hits < 50 || misses < 20 {
		t.Fatalf("%d hits, %d misses: the cases do not cover both", hits, misses)
	}
}

// At the bound, entries leave oldest first, dead ones (a digest issued
// again) included: the slots stay within maxReflectionEntries, each
// issue is remembered by its latest entry, the index holds the postings
// of the entries in slots and no more, and entries that left are not
// found.
func TestReflectionGuardBoundWithReissues(t *testing.T) {
	t.Parallel() // pure computation on its own values, no package state written
	now := time.Unix(1000, 0)
	g := newReflectionGuard(time.Hour)
	mk := func(i int) *challengePrint {
		cp := &challengePrint{sketch: []uint64{uint64(3 * i), uint64(3*i) + 1, uint64(3*i) + 2}}
		binary.LittleEndian.PutUint64(cp.digest[:], uint64(i))
		return cp
	}
	last := map[int]int{} // challenge -> step of its latest issue
	step := 0
	issue := func(i int) {
		g.issue(mk(i), peer.ID(fmt.Sprint("p", i)), nil, now)
		last[i] = step
		step++
	}
	total := maxReflectionEntries + 2000
	for i := range total {
		issue(i)
		if i%10 == 9 {
			issue(i - 5) // again: its old entry dies
		}
	}
	if len(g.slots) > maxReflectionEntries || len(g.order)-g.head != maxReflectionEntries {
		t.Fatalf("%d slots, %d queued; bound %d", len(g.slots), len(g.order)-g.head, maxReflectionEntries)
	}
	postings := 0
	g.index.each(func(h uint64) { postings += len(g.postingsOf(h)) })
	inUse := 0
	for slot := range g.slots {
		inUse += len(g.sketchOf(uint32(slot)))
	}
	if postings != inUse || inUse != 3*maxReflectionEntries {
		t.Fatalf("%d postings listed, %d in slots, want %d", postings, inUse, 3*maxReflectionEntries)
	}
	// Remembered exactly when the latest issue is among the last
	// maxReflectionEntries issues, and then by that issue's entry.
	for i := range total {
		to, _, ok := g.check(mk(i), now)
		want := step-last[i] <= maxReflectionEntries
		if ok != want || ok && to != peer.ID(fmt.Sprint("p", i)) {
			t.Fatalf("challenge %d (last issued %d steps ago): check %v %q, want %v", i, step-last[i], ok, to, want)
		}
		// By sketch alone too (another digest).
		cp := mk(i)
		cp.digest[31] = 1
		if _, _, ok := g.check(cp, now); ok != want {
			t.Fatalf("challenge %d by sketch: check %v, want %v", i, ok, want)
		}
	}
}
