package attack_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

// TestMeasureWindowPairs (WINDOW_PAIRS_MEASURE=1; skipped without the LLM
// corpus) measures what the judge's clause window (M5) and described-code
// (M6) rules give a script on the questions the offline validator keeps:
// every run of two to ten words of a shown narrative, cut at clause marks,
// sentence ends (a window across one is judged by its head, the
// Explanation rule, so the words after it cover nothing) and at 64 bytes,
// that the judge accepts, and among them those that also
// hold another candidate (any accepted variant of another question of
// the set, a capitalised run or a code of the narratives: an upper bound
// on a script's pool). A window that holds two candidates would let a
// script cover two with one answer. Printed: accepted windows and windows
// holding a second candidate, per source, and each of the latter (-v).
func TestMeasureWindowPairs(t *testing.T) {
	if os.Getenv("WINDOW_PAIRS_MEASURE") == "" {
		t.Skip("set WINDOW_PAIRS_MEASURE=1 to measure")
	}
	stop := map[string]bool{}
	for _, w := range strings.Fields("the to at for of in on a an and or by with from one two three four five six after before during this that these those it its all both each every no not as is was were be but if when while where which who what under over into across between among") {
		stop[w] = true
	}
	word := regexp.MustCompile(`[\p{L}\p{N}][\p{L}\p{N}'’/.-]*`)
	forKeptCorpusSets(t, func(pat string, kind skill.SourceKind, kept []*skill.Set) {
		accepted, paired, questions := 0, 0, map[string]bool{}
		for _, set := range kept {
			var pool []string
			for k := range set.Parts {
				for j := range set.Parts[k].Questions {
					pool = append(pool, set.Parts[k].Questions[j].Variants()...)
				}
				pool = append(pool, capRun.FindAllString(set.Parts[k].Narrative, -1)...)
				pool = append(pool, codeRe.FindAllString(set.Parts[k].Narrative, -1)...)
			}
			for k := range set.Parts {
				var narr []string
				for r := 0; r <= k; r++ {
					narr = append(narr, set.Parts[r].Narrative)
				}
				for j := range set.Parts[k].Questions {
					q := &set.Parts[k].Questions[j]
					for _, n := range narr {
						locs := word.FindAllStringIndex(n, -1)
						for a := range locs {
							for b := a + 1; b < len(locs) && b < a+10; b++ {
								w := n[locs[a][0]:locs[b][1]]
								if len(w) > skill.MaxAnswerBytes || strings.ContainsAny(w, ",;:()\n") || sentenceEnd.MatchString(w) {
									break
								}
								if !skill.Judge(q, w, narr) {
									continue
								}
								accepted++
								if c := otherCandidate(w, q, pool, stop); c != "" {
									paired++
									questions[set.Domain+q.Question] = true
									t.Logf("%s %s p%d q%d: %q accepted, holds %q (want %v)", pat, set.Domain, k+1, j+1, w, c, q.Variants())
								}
							}
						}
					}
				}
			}
		}
		t.Logf("%-24s windows accepted %d, holding a second candidate %d (%d questions)", pat, accepted, paired, len(questions))
	})
}

// sentenceEnd is a sentence end inside a window.
var sentenceEnd = regexp.MustCompile(`[.!?]\s`)

// otherCandidate returns a candidate of pool that w holds as whole words
// and that no accepted variant of q holds, or "".
func otherCandidate(w string, q *skill.Question, pool []string, stop map[string]bool) string {
	lw := " " + strings.ToLower(w) + " "
	for _, c := range pool {
		if len(c) < 3 || skill.MatchAny(c, q.Variants()) {
			continue
		}
		f := strings.Fields(strings.ToLower(c))
		if len(f) == 0 || stop[f[0]] {
			continue
		}
		lc := strings.ToLower(c)
		covered := false
		for _, v := range q.Variants() {
			covered = covered || strings.Contains(strings.ToLower(v), lc)
		}
		if !covered && strings.Contains(lw, " "+lc+" ") {
			return c
		}
	}
	return ""
}
