package protocol

import (
	"encoding/json"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/acaptcha/acaptcha/skill"
)

// Measurements of the reflection sketch (spec/protocol.md §7) over the
// LLM-written sample corpus (../../shared/llm-corpus, or
// $ACAPTCHA_LLM_CORPUS). The project never depends on it: these tests
// skip when it is absent. Run with -v to see the figures.

func reflCorpusDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ACAPTCHA_LLM_CORPUS")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "llm-corpus")
	}
	if _, err := os.Stat(filepath.Join(dir, "sets")); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("LLM corpus %s absent", dir)
	}
	return dir
}

// reflCorpusSets reads the corpus's sets: sets/*.json, and the reworded
// hybrid sets (hybrid/NN-hybrid.json, NN-hybrid-q.json) with their
// procedural skeletons (NN-skeleton.json). group names what a set was
// written from: the hybrid files of one NN share it (they are rewordings
// of one another, not distinct sets).
type reflCorpusSet struct {
	name, group string
	set         *skill.Set
}

func reflCorpusSets(t *testing.T) []reflCorpusSet {
	dir := reflCorpusDir(t)
	var out []reflCorpusSet
	for _, pat := range []string{"sets/*.json", "hybrid/*-hybrid.json", "hybrid/*-hybrid-q.json", "hybrid/*-skeleton.json"} {
		paths, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var s skill.Set
			if err := json.Unmarshal(data, &s); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			base := filepath.Base(p)
			group := p
			if strings.HasPrefix(pat, "hybrid/") {
				group = "hybrid-" + base[:2]
			}
			out = append(out, reflCorpusSet{name: base, group: group, set: &s})
		}
	}
	if len(out) == 0 {
		t.Skip("no sets in the corpus")
	}
	return out
}

// TestReflectionCorpusCrossSet: the estimate between challenges
// (narrative and question) of distinct sets, the false positives a
// threshold of ReflectionJaccard risks. Spec §7 states the sets/ figure
// (3 645 pairs); the hybrid sets and their skeletons are measured too
// (pairs of distinct NN only).
func TestReflectionCorpusCrossSet(t *testing.T) {
	sets := reflCorpusSets(t)
	type ch struct {
		group  string
		hybrid bool
		cp     *challengePrint
	}
	var chs []ch
	for _, s := range sets {
		for _, p := range s.set.Parts {
			for _, q := range p.Questions {
				chs = append(chs, ch{s.group, strings.HasPrefix(s.group, "hybrid-"), challengeDigest(p.Narrative, q.Question)})
			}
		}
	}
	var worstSets, worstAll float64
	nSets, nAll := 0, 0
	for i := range chs {
		for j := i + 1; j < len(chs); j++ {
			if chs[i].group == chs[j].group {
				continue
			}
			e := sketchJaccard(chs[i].cp.sketch, chs[j].cp.sketch)
			nAll++
			worstAll = max(worstAll, e)
			if !chs[i].hybrid && !chs[j].hybrid {
				nSets++
				worstSets = max(worstSets, e)
			}
		}
	}
	t.Logf("cross-set pairs, sets/: %d, highest estimate %.3f (threshold %.2f)", nSets, worstSets, ReflectionJaccard)
	t.Logf("cross-set pairs, sets/ and hybrid/ (distinct NN): %d, highest estimate %.3f", nAll, worstAll)
	if worstAll >= ReflectionJaccard/5 {
		t.Errorf("distinct sets reach %.3f: the margin below %.2f is gone", worstAll, ReflectionJaccard)
	}
}

// perturbWords applies f to every k-th word (of runs separated by a
// space) of s, from the first.
func perturbWords(s string, k int, f func(w string, i int) string) string {
	words := strings.Split(s, " ")
	for i := range words {
		if i%k == 0 {
			words[i] = f(words[i], i)
		}
	}
	return strings.Join(words, " ")
}

// mapRunes rewrites each rune of s by f (a rune may become any string).
func mapRunes(s string, f func(r rune) string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteString(f(r))
	}
	return b.String()
}

var (
	// Cyrillic and Greek look-alikes of Latin letters.
	reflHomoglyphs = map[rune]rune{'a': 'а', 'e': 'е', 'o': 'о', 'c': 'с', 'p': 'р', 'x': 'х', 'y': 'у',
		'i': 'і', 's': 'ѕ', 'j': 'ј', 'h': 'һ', 'A': 'Α', 'B': 'В', 'E': 'Е', 'H': 'Н', 'K': 'Κ', 'M': 'М',
		'O': 'О', 'P': 'Р', 'T': 'Т', 'X': 'Х', 'C': 'С', 'v': 'ν'}
	reflAccents = map[rune]string{'a': "á", 'e': "é", 'i': "í", 'o': "ö", 'u': "ü", 'n': "ñ", 'c': "ç", 's': "š", 'y': "ý"}
)

// homoglyphOne replaces the first letter of w that has a look-alike.
func homoglyphOne(w string, _ int) string {
	rs := []rune(w)
	for j, r := range rs {
		if h, ok := reflHomoglyphs[r]; ok {
			rs[j] = h
			break
		}
	}
	return string(rs)
}

// insideWord inserts ins after the first rune of w (when w has two).
func insideWord(ins string) func(string, int) string {
	return func(w string, _ int) string {
		if utf8.RuneCountInString(w) < 2 {
			return w
		}
		_, n := utf8.DecodeRuneInString(w)
		return w[:n] + ins + w[n:]
	}
}

// reflPerturbation is a rewriting of a challenge's text that a relay
// could apply at no cost: an LLM reads the result as the original.
type reflPerturbation struct {
	name string
	f    func(s string) string
}

// reflFreePerturbations are the character-level rewritings that cost the
// relay nothing (the class §7 closes).
func reflFreePerturbations() []reflPerturbation {
	fullwidth := func(r rune) string {
		if r > ' ' && r < 0x7f {
			return string(r - 0x21 + 0xff01)
		}
		return string(r)
	}
	mathBold := func(r rune) string {
		switch {
		case r >= 'a' && r <= 'z':
			return string(r - 'a' + 0x1d41a)
		case r >= 'A' && r <= 'Z':
			return string(r - 'A' + 0x1d400)
		case r >= '0' && r <= '9':
			return string(r - '0' + 0x1d7ce)
		}
		return string(r)
	}
	return []reflPerturbation{
		{"homoglyph, every 2nd word (the audit's)", func(s string) string { return perturbWords(s, 2, homoglyphOne) }},
		{"homoglyph, every word", func(s string) string { return perturbWords(s, 1, homoglyphOne) }},
		{"homoglyph, every letter that has one", func(s string) string {
			return mapRunes(s, func(r rune) string {
				if h, ok := reflHomoglyphs[r]; ok {
					return string(h)
				}
				return string(r)
			})
		}},
		{"zero-width space inside every word", func(s string) string { return perturbWords(s, 1, insideWord("\u200b")) }},
		{"ZWJ, ZWNJ, word joiner, BOM, soft hyphen inside words", func(s string) string {
			zs := []string{"\u200d", "\u200c", "\u2060", "\ufeff", "\u00ad"}
			return perturbWords(s, 1, func(w string, i int) string { return insideWord(zs[i%len(zs)])(w, i) })
		}},
		{"bidi controls (LRM, LRE/PDF) inside words", func(s string) string {
			return perturbWords(s, 1, func(w string, i int) string { return insideWord("\u200e\u202a\u202c")(w, i) })
		}},
		{"variation selector after a letter of every word", func(s string) string { return perturbWords(s, 1, insideWord("\ufe0f")) }},
		{"fullwidth forms", func(s string) string { return mapRunes(s, fullwidth) }},
		{"mathematical bold letters and digits", func(s string) string { return mapRunes(s, mathBold) }},
		{"diacritics added (precomposed), every letter that takes one", func(s string) string {
			return mapRunes(s, func(r rune) string {
				if a, ok := reflAccents[r]; ok {
					return a
				}
				return string(r)
			})
		}},
		{"diacritics added (combining marks), every word", func(s string) string { return perturbWords(s, 1, insideWord("\u0301\u0308")) }},
		{"case changes (alternating)", func(s string) string {
			i := 0
			return mapRunes(s, func(r rune) string {
				i++
				if i%2 == 0 {
					return strings.ToUpper(string(r))
				}
				return strings.ToLower(string(r))
			})
		}},
		{"NBSP, thin, ideographic and other spaces", func(s string) string {
			sp := []string{"\u00a0", "\u2009", "\u3000", "\u202f", "\u2002", "\u205f"}
			i := 0
			return mapRunes(s, func(r rune) string {
				if r == ' ' {
					i++
					return sp[i%len(sp)]
				}
				return string(r)
			})
		}},
		{"punctuation swaps (fullwidth, typographic, ideographic)", func(s string) string {
			p := map[rune]string{'.': "。", ',': "，", '\'': "’", '"': "“", '-': "‐", ':': "：", ';': "；", '(': "（", ')': "）", '%': "٪"}
			return mapRunes(s, func(r rune) string {
				if x, ok := p[r]; ok {
					return x
				}
				return string(r)
			})
		}},
		{"digits of other scripts (Arabic-Indic, Devanagari)", func(s string) string {
			i := 0
			return mapRunes(s, func(r rune) string {
				if r >= '0' && r <= '9' {
					i++
					if i%2 == 0 {
						return string(r - '0' + 0x0660)
					}
					return string(r - '0' + 0x0966)
				}
				return string(r)
			})
		}},
		{"all of the above at once", func(s string) string {
			s = perturbWords(s, 1, homoglyphOne)
			s = perturbWords(s, 2, insideWord("\u200b"))
			s = perturbWords(s, 3, insideWord("\u0301"))
			return strings.ReplaceAll(mapRunes(s, fullwidth), " ", "\u00a0")
		}},
	}
}

// reflEdits are the edits that still evade: each changes a word to
// another word (to the sketch), which an LLM reads through as a typo or
// a synonym.
func reflEdits() []reflPerturbation {
	letters := func(w string) bool {
		for i := 0; i < len(w); i++ {
			if c := w[i]; c < 'a' || c > 'z' {
				return false
			}
		}
		return true
	}
	swap := func(w string, _ int) string {
		if len(w) < 4 || !letters(w) {
			return w
		}
		b := []byte(w)
		m := len(b) / 2
		if b[m] == b[m-1] {
			return w
		}
		b[m-1], b[m] = b[m], b[m-1]
		return string(b)
	}
	insert := func(w string, i int) string {
		if len(w) < 2 {
			return w
		}
		m := len(w) / 2
		return w[:m] + string(rune('a'+i%26)) + w[m:]
	}
	del := func(w string, _ int) string {
		if len(w) < 4 || !letters(w) {
			return w
		}
		m := len(w) / 2
		return w[:m] + w[m+1:]
	}
	syn := map[string]string{"the": "this", "a": "one", "is": "was", "was": "is", "and": "plus", "of": "from",
		"in": "within", "to": "toward", "with": "alongside", "for": "regarding", "on": "upon", "at": "near",
		"by": "via", "from": "out of", "that": "which", "which": "that", "were": "are", "are": "were",
		"after": "following", "before": "prior to", "during": "throughout", "increased": "rose",
		"decreased": "fell", "showed": "displayed", "recorded": "logged", "measured": "gauged",
		"between": "among", "each": "every", "all": "every", "but": "yet", "while": "whereas"}
	synonym := func(w string, _ int) string {
		if s, ok := syn[strings.ToLower(w)]; ok {
			return s
		}
		return w
	}
	var out []reflPerturbation
	for _, k := range []int{1, 2, 3, 5} {
		out = append(out,
			reflPerturbation{"interior letter swap, every " + itoa(k) + " word(s)", func(s string) string { return perturbWords(s, k, swap) }},
			reflPerturbation{"one letter inserted, every " + itoa(k) + " word(s)", func(s string) string { return perturbWords(s, k, insert) }},
			reflPerturbation{"one letter deleted, every " + itoa(k) + " word(s)", func(s string) string { return perturbWords(s, k, del) }},
		)
	}
	out = append(out, reflPerturbation{"synonym swaps of common words (all of them)", func(s string) string { return perturbWords(s, 1, synonym) }})
	rng := rand.New(rand.NewPCG(1, 2))
	out = append(out, reflPerturbation{"synonym swaps of common words (half of them)", func(s string) string {
		return perturbWords(s, 1, func(w string, i int) string {
			if rng.IntN(2) == 0 {
				return synonym(w, i)
			}
			return w
		})
	}})
	return out
}

func itoa(k int) string {
	switch k {
	case 1:
		return "1st"
	case 2:
		return "2nd"
	case 3:
		return "3rd"
	}
	return string(rune('0'+k)) + "th"
}

// reflEstimates returns the lowest and the mean estimate between each
// corpus challenge and its perturbation by f (narrative and question
// both rewritten).
func reflEstimates(sets []reflCorpusSet, f func(string) string) (lowest, mean float64, n int) {
	lowest = 1
	sum := 0.0
	for _, s := range sets {
		for _, p := range s.set.Parts {
			for _, q := range p.Questions {
				a := challengeDigest(p.Narrative, q.Question)
				b := challengeDigest(f(p.Narrative), f(q.Question))
				e := sketchJaccard(a.sketch, b.sketch)
				lowest = min(lowest, e)
				sum += e
				n++
			}
		}
	}
	return lowest, sum / float64(n), n
}

// TestReflectionCorpusPerturbed: every zero-cost character-level
// rewriting of a corpus challenge is still found (estimate at least
// ReflectionJaccard against the original); the figures of the edits that
// still evade are logged.
func TestReflectionCorpusPerturbed(t *testing.T) {
	t.Parallel() // pure computation on its own values, no package state written
	sets := reflCorpusSets(t)
	for _, p := range reflFreePerturbations() {
		lowest, mean, n := reflEstimates(sets, p.f)
		t.Logf("detected? %-62s lowest %.3f mean %.3f (%d challenges)", p.name, lowest, mean, n)
		if lowest < ReflectionJaccard {
			t.Errorf("%s: estimate %.3f, below %.2f: the rewriting evades the guard", p.name, lowest, ReflectionJaccard)
		}
	}
	for _, p := range reflEdits() {
		lowest, mean, _ := reflEstimates(sets, p.f)
		caught := "evades"
		if lowest >= ReflectionJaccard {
			caught = "caught"
		} else if mean >= ReflectionJaccard {
			caught = "partly"
		}
		t.Logf("%-6s %-55s lowest %.3f mean %.3f", caught, p.name, lowest, mean)
	}
}
