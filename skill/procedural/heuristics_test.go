package procedural

import (
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

// The sanity attackers below are deliberately generous: they are told the
// exact candidate set of the part, with every alias, and only have to pick
// one. A generator that leaks the answer through surface statistics would
// let them beat chance (about 1 in 4.5 here) by a wide margin.

type mentionSpan struct{ start, end, cand int }

// findMentions locates every candidate mention (code, full name or alias),
// longest forms first so that overlapping forms count once.
func findMentions(narr string, cands []candTrace) []mentionSpan {
	type form struct {
		s    string
		cand int
	}
	var forms []form
	for i, c := range cands {
		for _, f := range []string{c.e.code, c.e.full, c.e.desc} {
			if f != "" {
				forms = append(forms, form{f, i})
			}
		}
	}
	sort.SliceStable(forms, func(a, b int) bool { return len(forms[a].s) > len(forms[b].s) })
	taken := make([]bool, len(narr))
	var out []mentionSpan
	for _, f := range forms {
		for off := 0; ; {
			i := strings.Index(narr[off:], f.s)
			if i < 0 {
				break
			}
			i += off
			j := i + len(f.s)
			free := true
			for k := i; k < j; k++ {
				if taken[k] {
					free = false
					break
				}
			}
			if free {
				for k := i; k < j; k++ {
					taken[k] = true
				}
				out = append(out, mentionSpan{i, j, f.cand})
			}
			off = i + 1
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].start < out[b].start })
	return out
}

// argmax picks the highest score, breaking ties by earliest mention.
func argmax(score []float64, ms []mentionSpan) int {
	first := make([]int, len(score))
	for i := range first {
		first[i] = 1 << 30
	}
	for _, m := range ms {
		first[m.cand] = min(first[m.cand], m.start)
	}
	best := 0
	for i := range score {
		if score[i] > score[best] || (score[i] == score[best] && first[i] < first[best]) {
			best = i
		}
	}
	return best
}

// mostFrequent: the candidate mentioned most often.
func mostFrequent(narr string, cands []candTrace) int {
	ms := findMentions(narr, cands)
	score := make([]float64, len(cands))
	for _, m := range ms {
		score[m.cand]++
	}
	return argmax(score, ms)
}

var (
	sentenceSplit = regexp.MustCompile(`[.!?;]\s+|\n+`)
	wordRE        = regexp.MustCompile(`[a-z][a-z-]{2,}`)
	stopwords     = map[string]bool{"the": true, "and": true, "was": true, "were": true, "which": true, "that": true, "with": true,
		"for": true, "its": true, "one": true, "had": true, "has": true, "from": true, "this": true, "their": true, "what": true,
		"among": true, "whose": true, "not": true, "but": true, "did": true, "any": true, "all": true, "every": true, "other": true}
)

func wordSet(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range wordRE.FindAllString(strings.ToLower(s), -1) {
		if !stopwords[w] {
			out[w] = true
		}
	}
	return out
}

// questionOverlap: the first candidate of the sentence sharing the most
// words with the question.
func questionOverlap(narr, question string, cands []candTrace) int {
	ms := findMentions(narr, cands)
	qw := wordSet(question)
	bestScore, best := -1, 0
	start := 0
	for _, loc := range append(sentenceSplit.FindAllStringIndex(narr, -1), []int{len(narr), len(narr)}) {
		sent := narr[start:loc[0]]
		first := -1
		for _, m := range ms {
			if m.start >= start && m.end <= loc[0] {
				first = m.cand
				break
			}
		}
		if first >= 0 {
			score := 0
			for w := range wordSet(sent) {
				if qw[w] {
					score++
				}
			}
			if score > bestScore {
				bestScore, best = score, first
			}
		}
		start = loc[1]
	}
	return best
}

var cueRE = regexp.MustCompile(`(?i)\b(persist\w*|replicat\w*|reproduc\w*|consistent\w*)\b`)

// cueProximity: each cue word votes for the nearest candidate mention.
func cueProximity(narr string, cands []candTrace) int {
	ms := findMentions(narr, cands)
	score := make([]float64, len(cands))
	for _, loc := range cueRE.FindAllStringIndex(narr, -1) {
		bestD, bestC := 1<<30, -1
		for _, m := range ms {
			d := loc[0] - m.end
			if m.start > loc[0] {
				d = m.start - loc[1]
			}
			if d < bestD {
				bestD, bestC = d, m.cand
			}
		}
		if bestC >= 0 {
			score[bestC]++
		}
	}
	return argmax(score, ms)
}

func TestSurfaceHeuristicsNearChance(t *testing.T) {
	g := mustNew(t, Config{})
	const sets = 500
	var total int
	var chance float64
	hits := map[string]int{}
	for seed := uint64(0); seed < sets; seed++ {
		set, tr := traced(t, g, 1_000_000+seed)
		for p, part := range set.Parts {
			cands := tr.parts[p].cands
			for _, q := range part.Questions {
				if q.AnswerType != skill.EntityAnswer {
					continue
				}
				total++
				chance += 1 / float64(len(cands))
				check := func(name string, i int) {
					if skill.MatchAny(cands[i].e.code, q.Variants()) {
						hits[name]++
					}
				}
				check("most frequent entity", mostFrequent(part.Narrative, cands))
				check("question-word overlap", questionOverlap(part.Narrative, q.Question, cands))
				check("cue-word proximity", cueProximity(part.Narrative, cands))
			}
		}
	}
	t.Logf("%d entity questions over %d sets; chance %.1f%%", total, sets, 100*chance/float64(total))
	for _, name := range []string{"most frequent entity", "question-word overlap", "cue-word proximity"} {
		rate := float64(hits[name]) / float64(total)
		t.Logf("%-22s %5.1f%%", name, 100*rate)
		if rate > 0.40 {
			t.Errorf("%s answers %.1f%% of entity questions, want <= 40%%", name, 100*rate)
		}
	}
}
