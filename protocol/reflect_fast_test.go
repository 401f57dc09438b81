package protocol

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	lpeer "github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

// The fast path of challengeDigest gives the general path's digest and
// sketch, byte for byte, on prose, edge cases and random text of ASCII,
// simple runes and runes that NFC or case folding change in context.
func TestChallengeDigestFastPath(t *testing.T) {
	t.Parallel() // pure computation on its own values, no package state written
	cases := [][2]string{
		{"", ""},
		{"   ", "\t\n"},
		{"One", "two"},
		{"  Loop LOOP-0042 persisted\tacross\n3 runs.  ", "Which LOOP?"},
		{"a b c d", "e"},
		{"!!! ???", "..."},
		{"x_y z.w 10.4.28.30\v\f\r end", "Q\x00R"},
		{testSet("fast").Parts[0].Narrative, testSet("fast").Parts[0].Questions[0].Question},
		{"Held at 37 °C, 5 µM of α-synuclein; Ångström, Łódź, STRASSE straße", "ΣΊΣΥΦΟΣ σίσυφος?"},
		{"e\u0301 vs \u00e9, A\u030a vs \u212b, \u2000gap\u00a0nbsp\u0085nel", "\u0130stanbul \u2028"},
		{"\xff\xfe invalid", "q"},
	}
	r := rand.New(rand.NewPCG(1, 2))
	ascii := []rune("aAbBzZ09 -.,\t\n\r\v\f\x00\x7f!_")
	simple := []rune("°²µéÉßÅåłŁΣσςΐΰİıſ\u00a0\u0085\u2028\u2029\u2013\u201c")
	tricky := []rune("\u0301\u0308\u030a\u0345\u212b\u2126\u2000\u3000\u1100\u1161\uac00\ufb01\U0001d400")
	pick := func(b *strings.Builder, n int) {
		for range n {
			switch k := r.IntN(10); {
			case k < 6:
				b.WriteRune(ascii[r.IntN(len(ascii))])
			case k < 9:
				b.WriteRune(simple[r.IntN(len(simple))])
			default:
				b.WriteRune(tricky[r.IntN(len(tricky))])
			}
		}
	}
	for range 3000 {
		var n, q strings.Builder
		pick(&n, r.IntN(200))
		pick(&q, r.IntN(20))
		cases = append(cases, [2]string{n.String(), q.String()})
	}
	for r := range rune(0x3000) {
		// Every rune alone and between letters.
		cases = append(cases, [2]string{string(r), "a" + string(r) + "b c"})
	}
	// The 8-byte blocks of the ASCII path: every ASCII byte at every
	// offset of two blocks and a tail, alone and between white space;
	// white space runs and simple runes at every offset; every length
	// around a block; and random text of all ASCII bytes.
	const base = "The quick Brown fox, 09 AZ az"
	for p := range 18 {
		for c := range byte(utf8.RuneSelf) {
			cases = append(cases,
				[2]string{base[:p] + string(c) + base[p:], base[p:]},
				[2]string{base[:p] + " " + string(c) + " " + base[p:], string(c)})
		}
		for _, mid := range []string{"  ", " \n\n ", "\t", "\r\n", "é", " µ ", "Σ", "\u00a0 ", "\u2013", "ß"} {
			cases = append(cases, [2]string{base[:p] + mid + base[p:], mid + base[:p]})
		}
	}
	for n := range 26 {
		cases = append(cases, [2]string{base[:n], base[len(base)-n:]}, [2]string{" " + base[:n] + " ", ""})
	}
	var all [utf8.RuneSelf]rune
	for c := range all {
		all[c] = rune(c)
	}
	for range 1000 {
		var b strings.Builder
		for range r.IntN(60) {
			if r.IntN(2) == 0 {
				b.WriteRune(all[r.IntN(len(all))])
			} else {
				b.WriteByte(" aZ\n"[r.IntN(4)])
			}
		}
		cases = append(cases, [2]string{b.String(), b.String()[:b.Len()/2]})
	}
	for _, c := range cases {
		got, want := challengeDigest(c[0], c[1]), challengeDigestGeneral(c[0], c[1])
		if got.digest != want.digest || !slices.Equal(got.sketch, want.sketch) {
			t.Fatalf("%q / %q: fast %x %x, general %x %x", c[0], c[1], got.digest, got.sketch, want.digest, want.sketch)
		}
		if len(got.sketch) > SketchSize || cap(got.sketch) > SketchSize {
			t.Fatalf("sketch of len %d cap %d", len(got.sketch), cap(got.sketch))
		}
		checkNarrativePrint(t, c[0], c[1], want)
	}
}

// checkNarrativePrint: a narrative fingerprinted ahead (a prepared set's)
// gives with each question the general path's digest and sketch.
func checkNarrativePrint(t testing.TB, n, q string, want *challengePrint) {
	t.Helper()
	got := newNarrativePrint(n).print(q)
	if got.digest != want.digest || !slices.Equal(got.sketch, want.sketch) {
		t.Fatalf("%q / %q: narrative print %x %x, general %x %x", n, q, got.digest, got.sketch, want.digest, want.sketch)
	}
	if len(got.sketch) > SketchSize || cap(got.sketch) > SketchSize {
		t.Fatalf("narrative print: sketch of len %d cap %d", len(got.sketch), cap(got.sketch))
	}
}

// TestNarrativePrint: every question of generated sets, with its part's
// narrative prepared once, gets the fingerprint challengeDigest gives;
// and a prepared set's challenges are fingerprinted from it.
func TestNarrativePrint(t *testing.T) {
	g, err := procedural.New(procedural.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		set, err := g.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		v, ok := set.PreparedValue(narrativePrints{})
		if !ok {
			t.Fatal("a generated set has no narrative prints")
		}
		for pi, p := range set.Parts {
			np := v.([]*narrativePrint)[pi]
			if !np.simple {
				t.Fatalf("part %d of a generated set takes the general path", pi+1)
			}
			for _, q := range p.Questions {
				want := challengeDigestGeneral(p.Narrative, q.Question)
				got := np.print(q.Question)
				if got.digest != want.digest || !slices.Equal(got.sketch, want.sketch) {
					t.Fatalf("set %s part %d %q: prepared print differs", set.ID, pi+1, q.Question)
				}
				c := skill.Challenge{Round: pi + 1, Narrative: p.Narrative, Question: q.Question}
				if got := issuedPrint(set, c); got.digest != want.digest || !slices.Equal(got.sketch, want.sketch) {
					t.Fatalf("set %s part %d: issuedPrint differs", set.ID, pi+1)
				}
			}
		}
	}
	// Long narratives and questions (every path of mergeSketch), few words.
	long := strings.Repeat("alpha beta gamma delta epsilon zeta eta theta iota kappa ", 200)
	for _, c := range [][2]string{{long, long}, {long, ""}, {"", long}, {"a b", "c d e f"}, {"a b", "c"}, {"", ""}, {"x", ""}, {"...", "a b c d e f g"}} {
		checkNarrativePrint(t, c[0], c[1], challengeDigestGeneral(c[0], c[1]))
	}
}

func FuzzChallengeDigestFastPath(f *testing.F) {
	f.Add("Loop LOOP-0042 persisted across 3 runs.", "Which loop?")
	f.Add(" \t", "a")
	f.Add("37 °C, 5 µM α-Syn", "ΣΊΣΥΦΟΣ e\u0301")
	// Word runs across 8-byte blocks, white space runs at their edges, a
	// short tail, simple runes between ASCII letters, an empty question,
	// fewer than ShingleWords words.
	f.Add("Abcdefghijklmnopqrstuvwxyz0123456789 ABCDEFG\n\nHIJ  KLMNOPQ\t\tRS", "")
	f.Add("abcdefgµhijklmnoßpqrstuvΣwxyz", "x")
	f.Add("a b c", "")
	f.Add("@[`{/:\x00\x08\x0e\x1f\x7f AZaz09", "Which?")
	f.Fuzz(func(t *testing.T, n, q string) {
		got, want := challengeDigest(n, q), challengeDigestGeneral(n, q)
		if got.digest != want.digest || !slices.Equal(got.sketch, want.sketch) {
			t.Fatalf("%q / %q: fast and general paths differ", n, q)
		}
		checkNarrativePrint(t, n, q, want)
	})
}

func BenchmarkChallengeDigest(b *testing.B) {
	g, err := procedural.New(procedural.Config{})
	if err != nil {
		b.Fatal(err)
	}
	var texts [][2]string
	for range 20 {
		set, err := g.Next(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range set.Parts {
			texts = append(texts, [2]string{p.Narrative, p.Questions[0].Question})
		}
	}
	// A prepared set's challenge: the narrative's print made beforehand.
	nps := map[string]*narrativePrint{}
	for _, t := range texts {
		nps[t[0]] = newNarrativePrint(t[0])
	}
	prepared := func(n, q string) *challengePrint { return nps[n].print(q) }
	// A relay's rewriting that the word key undoes (§7): a Cyrillic
	// look-alike in every second word (fast path), and a combining accent
	// in every third (general path).
	homo, marks := map[string]string{}, map[string]string{}
	for _, t := range texts {
		homo[t[0]] = perturbWords(t[0], 2, homoglyphOne)
		marks[t[0]] = perturbWords(t[0], 3, insideWord("\u0301"))
	}
	homoglyph := func(n, q string) *challengePrint { return challengeDigest(homo[n], q) }
	accents := func(n, q string) *challengePrint { return challengeDigest(marks[n], q) }
	// A verifier's worst case: 32 KiB of supplementary letters whose keys
	// were computed on every use (Osage, a Cyrillic extension and a
	// mathematical letter, about 1 µs each), in words of three.
	crafted := strings.Repeat("\U000104EB\U0001E06C\U0001D716 ", skill.MaxNarrativeBytes/13)
	worst := func(_, q string) *challengePrint { return challengeDigest(crafted, q) }
	runeKeys()
	for _, path := range []struct {
		name   string
		digest func(n, q string) *challengePrint
	}{{"fast", challengeDigest}, {"general", challengeDigestGeneral}, {"prepared", prepared},
		{"homoglyphs", homoglyph}, {"combining", accents}, {"crafted-32KiB", worst}} {
		b.Run(path.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				t := texts[i%len(texts)]
				path.digest(t[0], t[1])
				i++
			}
		})
	}
}

// bottomK's heap gives the sorted, de-duplicated SketchSize smallest
// values, duplicates among them included.
func TestBottomK(t *testing.T) {
	var shared bottomKScratch
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, SketchSize, 2*SketchSize + 1, 500, 3000} {
		for _, dupRange := range []uint64{0, 50, 1 << 62, 3} {
			hs := make([]uint64, n)
			for i := range hs {
				hs[i] = r.Uint64()
				switch {
				case dupRange == 3 && i >= 3:
					// Every value three times: the prefilter sees a third
					// as many distinct values as it gathers.
					hs[i] = hs[i-i%3]
				case dupRange > 0:
					hs[i] %= dupRange
				}
			}
			want := slices.Clone(hs)
			slices.Sort(want)
			want = slices.Compact(want)
			want = want[:min(len(want), SketchSize)]
			if got := bottomK(slices.Clone(hs)); !slices.Equal(got, want) {
				t.Fatalf("n=%d range=%d: %v, want %v", n, dupRange, got, want)
			}
			// In one scratch, used by every case before (the heap's
			// filter left as the last call's).
			if got := bottomKIn(slices.Clone(hs), &shared); !slices.Equal(got, want) {
				t.Fatalf("n=%d range=%d, reused scratch: %v, want %v", n, dupRange, got, want)
			}
		}
	}
}

// sortUnder sorts, whatever the values under its bound.
func TestSortUnder(t *testing.T) {
	var at [256]uint16 // reused: each call clears it
	r := rand.New(rand.NewPCG(7, 8))
	for _, bound := range []uint64{1, 2, 255, 256, 257, 1 << 20, 1<<63 + 12345, math.MaxUint64} {
		for _, n := range []int{0, 1, 2, 100, 4 * SketchSize} {
			src := make([]uint64, n)
			for i := range src {
				src[i] = r.Uint64N(bound)
				if i%3 == 2 {
					src[i] = src[i-1] // equal values
				}
			}
			want := slices.Sorted(slices.Values(src))
			if got := sortUnder(make([]uint64, n), src, bound, &at); !slices.Equal(got, want) {
				t.Fatalf("bound %d, n %d: %v, want %v", bound, n, got, want)
			}
		}
	}
}

// The fast path covers the generators' non-ASCII runes.
func TestSimpleRunes(t *testing.T) {
	m := simpleRunes()
	for _, r := range "°²µéßαΣς\u00a0" {
		if _, ok := m[r]; !ok {
			t.Errorf("%q (%U) is not simple", r, r)
		}
	}
	for _, r := range "\u0301\u212b\u2000" {
		if _, ok := m[r]; ok {
			t.Errorf("%q (%U) is simple", r, r)
		}
	}
}

// Entries whose sketches share hashes are all found, and all unindexed
// when they expire.
func TestReflectionGuardSharedHashes(t *testing.T) {
	base := strings.Repeat("the coolant loop deviation persisted across runs while valve isolation held ", 6)
	now := time.Unix(1000, 0)
	g := newReflectionGuard(10 * time.Second)
	var prints []*challengePrint
	for i := range 3 {
		cp := challengeDigest(base+fmt.Sprint("variant ", i), "which loop?")
		prints = append(prints, cp)
		g.issue(cp, lpeer.ID(fmt.Sprint("p", i)), nil, now.Add(time.Duration(i)*time.Second))
	}
	shared := 0
	g.index.each(func(h uint64) {
		if len(g.postingSlots(h)) > 1 {
			shared++
		}
	})
	if shared == 0 {
		t.Fatal("near-duplicates share no sketch hash")
	}
	if to, _, ok := g.check(challengeDigest(base+"variant 9", "which loop?"), now.Add(3*time.Second)); !ok || to == "" {
		t.Fatal("near-duplicate not found")
	}
	// The first expires; nothing in the index points at it any more.
	g.check(prints[2], now.Add(10500*time.Millisecond))
	g.index.each(func(h uint64) {
		for _, slot := range g.postingSlots(h) {
			if g.slots[slot].digest == prints[0].digest || g.slots[slot].seq == 0 {
				t.Fatalf("hash %x still indexes the expired entry", h)
			}
		}
	})
	g.check(prints[2], now.Add(13*time.Second))
	if g.index.len() != 0 || g.len() != 0 {
		t.Fatalf("%d index hashes, %d entries after all expired", g.index.len(), g.len())
	}
	if len(g.free) != len(g.slots) {
		t.Fatalf("%d of %d slots free after all expired", len(g.free), len(g.slots))
	}
	for slot := range g.slots {
		if len(g.sketchOf(uint32(slot))) != 0 {
			t.Fatalf("slot %d keeps its sketch after it expired", slot)
		}
	}
}

// postingsOf lists the postings of h, newest first: as many as its list
// is long.
func (g *reflectionGuard) postingsOf(h uint64) []uint32 {
	var posts []uint32
	q, n, ok := g.index.list(h)
	if !ok {
		return nil
	}
	for range n {
		posts = append(posts, q)
		q = g.post(q).next
	}
	return posts
}

// post returns posting q (tests).
func (g *reflectionGuard) post(q uint32) *posting {
	b, i := g.data(postingSlot(q))
	return &b.posts[i][q%SketchSize]
}

// postingSlots lists the slots the postings of h belong to.
func (g *reflectionGuard) postingSlots(h uint64) []uint32 {
	var slots []uint32
	for _, q := range g.postingsOf(h) {
		slots = append(slots, postingSlot(q))
	}
	return slots
}

// check finds a match exactly when the best estimate over every issued
// challenge reaches the threshold, and returns one with that estimate.
func TestReflectionGuardCheckMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	vocab := strings.Fields("loop valve batch lot tier alert coolant deviation run replicate report isolated quarantined reagent framework level")
	text := func(words int) string {
		var b strings.Builder
		for range words {
			b.WriteString(vocab[r.IntN(len(vocab))])
			b.WriteByte(' ')
		}
		return b.String()
	}
	now := time.Unix(1000, 0)
	g := newReflectionGuard(time.Hour)
	type entry struct {
		cp *challengePrint
		to lpeer.ID
	}
	var all []entry
	bases := []string{text(80), text(80), text(30), text(6)}
	for i := range 200 {
		// Variants of a few bases: many candidates share hashes.
		n := bases[r.IntN(len(bases))] + text(r.IntN(40))
		cp := challengeDigest(n, "q")
		to := lpeer.ID(fmt.Sprint("p", i))
		g.issue(cp, to, nil, now)
		all = append(all, entry{cp, to})
	}
	var found, missed int
	for range 300 {
		q := challengeDigest(bases[r.IntN(len(bases))]+text(r.IntN(60)), "q")
		bestJ := 0.0
		exact := false
		for _, e := range all {
			if e.cp.digest == q.digest {
				exact = true
			}
			if j := sketchJaccard(q.sketch, e.cp.sketch); j >= ReflectionJaccard && j > bestJ {
				bestJ = j
			}
		}
		to, _, ok := g.check(q, now)
		if exact {
			continue
		}
		if ok {
			found++
		} else {
			missed++
		}
		if ok != (bestJ > 0) {
			t.Fatalf("check found %v, brute force best %.3f", ok, bestJ)
		}
		if ok {
			for _, e := range all {
				if e.to == to {
					if j := sketchJaccard(q.sketch, e.cp.sketch); j != bestJ {
						t.Fatalf("check returned an entry at %.3f, best is %.3f", j, bestJ)
					}
				}
			}
		}
	}
	if found == 0 || missed == 0 {
		t.Fatalf("%d found, %d missed: the cases do not cover both", found, missed)
	}
}
