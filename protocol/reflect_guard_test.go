package protocol

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/skill/procedural"
)

// The guard indexes and looks up only the first indexedHashes of every
// sketch (see indexedHashes), and compares only the entries whose first
// hit stands within the bound (see check): on sketches built to put the
// shared hashes as late as a match allows, on random ones around the
// threshold and on random sequences of the union, it finds a match
// exactly when a full comparison with every issued sketch does.
func TestGuardIndexExact(t *testing.T) {
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
// op against a guard holding 1,024 others (a verifier that also proves
// does both for every round).
func BenchmarkReflectionGuard(b *testing.B) {
	g, err := procedural.New(procedural.Config{})
	if err != nil {
		b.Fatal(err)
	}
	var prints []*challengePrint
	for len(prints) < 2048 {
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
	now := time.Unix(1000, 0)
	guard := newReflectionGuard(time.Hour)
	for _, cp := range prints[:1024] {
		guard.issue(cp, "p", nil, now)
	}
	i := 1024
	for b.Loop() {
		guard.issue(prints[i%len(prints)], "p", nil, now)
		guard.check(prints[(i+512)%len(prints)], now)
		i++
	}
}
