package attack_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/attack"
	"github.com/acaptcha/acaptcha/skill/generate"
)

// TestMeasureExplanationPairs (EXPLANATION_PAIRS_MEASURE=1; skipped
// without the LLM corpus) runs the offline validator on the LLM sample
// sets and hybrid rewordings, as acaptcha eval does, and on the questions
// it keeps measures what answers holding two candidates gain a script
// (verification.md 1.5.2): every ordered pair of the attackers' answers in
// each separator form (union over pairs and the best single pair), pairs
// of a candidate pool (the attackers' answers, the candidate list's
// items, capitalised runs, codes and lone letters of the narratives: an
// upper bound, it holds the answer where a pool string alone answers),
// and the letter-label script "Tier A — <guess>". TestH6Try judges the
// answers of H6_TRY_A (|-separated) for question H6_TRY_Q (part:index) of
// the set file H6_TRY_SET.
func TestMeasureExplanationPairs(t *testing.T) {
	if os.Getenv("EXPLANATION_PAIRS_MEASURE") == "" {
		t.Skip("set EXPLANATION_PAIRS_MEASURE=1 to measure")
	}
	forKeptCorpusSets(t, func(pat string, kind skill.SourceKind, kept []*skill.Set) {
		h6Forms(t, pat, kind, kept)
	})
}

// forKeptCorpusSets calls measure with the sets of the shared LLM-written corpus
// (the LLM sets, then the hybrid rewordings) that the offline validator
// keeps, as a node serving them would: the measurements judge only what
// a verifier sends. It skips when the corpus is absent.
func forKeptCorpusSets(t *testing.T, measure func(pat string, kind skill.SourceKind, kept []*skill.Set)) {
	t.Helper()
	dir := ""
	for _, d := range []string{"../../../shared/llm-corpus", "/work/shared/llm-corpus"} {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			dir = d
		}
	}
	if dir == "" {
		t.Skip("LLM corpus not present")
	}
	for _, src := range []struct {
		pat  string
		kind skill.SourceKind
	}{{"/sets/*.json", skill.SourceCorpus}, {"/hybrid/*-hybrid.json", skill.SourceHybrid}} {
		files, _ := filepath.Glob(dir + src.pat)
		pol := skill.DefaultPolicy()
		vr, err := generate.NewValidator(generate.ValidatorConfig{Policy: &pol, WhiteBoxKind: src.kind})
		if err != nil {
			t.Fatal(err)
		}
		var kept []*skill.Set
		for _, f := range files {
			set, err := skill.LoadFile(f)
			if err != nil {
				continue
			}
			rep := vr.Offline(context.Background(), set)
			if rep.Accepted() {
				kept = append(kept, rep.Set)
			}
		}
		measure(src.pat, src.kind, kept)
	}
}

var h6FormList = []string{
	"%s — %s", "%s - because %s", "%s (%s)", "%s; %s", "%s. %s", "%s, because %s", "%s—%s",
	"Answer: %s — %s", "%s — %s is the answer", "The answer is %s (%s) is correct",
	"%s. %s, because of it", "%s %s",
}

var (
	capRun = regexp.MustCompile(`[A-Z][\w'’-]*(?:[ ][A-Z0-9][\w'’-]*){0,3}`)
	codeRe = regexp.MustCompile(`\b[A-Za-z]*\d[\w./-]*\b`)
	letter = regexp.MustCompile(`\b[A-Z]\b`)
	// listSep splits the candidate-list attacker's answer into its items.
	listSep = regexp.MustCompile(`, | or `)
)

func h6Forms(t *testing.T, label string, kind skill.SourceKind, sets []*skill.Set) {
	attackers := append(append(attack.All(), attack.WhiteBox(kind)...), attack.Listing())
	verbose := os.Getenv("EXPLANATION_PAIRS_VERBOSE") != ""
	nq := 0
	type stat struct {
		pair     map[string]bool // questions some attacker-pair form answers
		tailOnly map[string]bool // questions answered with the head refused alone (pool)
		any      map[string]bool // questions answered by any pool pair form
		best     map[string]int
	}
	stats := map[string]*stat{}
	for _, f := range h6FormList {
		stats[f] = &stat{pair: map[string]bool{}, tailOnly: map[string]bool{}, any: map[string]bool{}, best: map[string]int{}}
	}
	bareAny := map[string]bool{}
	letterGain := map[string]bool{}
	for si, set := range sets {
		for k := range set.Parts {
			narr := attack.NarrativesUpTo(set, k)
			for j := range set.Parts[k].Questions {
				nq++
				q := &set.Parts[k].Questions[j]
				key := fmt.Sprintf("%d/%d/%d", si, k, j)
				var atk []string
				for _, a := range attackers {
					atk = append(atk, attack.AnswerAt(t, set, a.Prover, k, j))
				}
				for _, lp := range letterPairs(atk, strings.Join(narr, "\n")) {
					if skill.Judge(q, lp, narr) {
						letterGain[key] = true
						t.Logf("%s LETTER PAIR %q accepted for %v", label, lp, q.Variants())
						break
					}
				}
				pool := append([]string{}, atk...)
				pool = append(pool, listSep.Split(atk[len(atk)-1], -1)...)
				text := strings.Join(narr, "\n")
				pool = append(pool, capRun.FindAllString(text, -1)...)
				pool = append(pool, codeRe.FindAllString(text, -1)...)
				pool = append(pool, letter.FindAllString(text, -1)...)
				pool = h6Dedupe(pool)
				if len(pool) > h6PoolMax {
					pool = pool[:h6PoolMax]
				}
				alone := map[string]bool{}
				for _, x := range pool {
					alone[x] = skill.Judge(q, x, narr)
					if alone[x] {
						bareAny[key] = true
					}
				}
				for _, f := range h6FormList {
					st := stats[f]
					for ai, x := range atk {
						for bi, y := range atk {
							if x == y {
								continue
							}
							if skill.Judge(q, fmt.Sprintf(f, x, y), narr) {
								st.pair[key] = true
								st.best[fmt.Sprint(ai, ",", bi)]++
								if verbose {
									t.Logf("%s PAIR %q for %v", label, fmt.Sprintf(f, x, y), q.Variants())
								}
							}
						}
					}
					for _, x := range pool {
						for _, y := range pool {
							if x == y {
								continue
							}
							a := fmt.Sprintf(f, x, y)
							if len(a) > skill.MaxAnswerBytes || !skill.Judge(q, a, narr) {
								continue
							}
							st.any[key] = true
							if !alone[x] {
								if !st.tailOnly[key] && verbose {
									t.Logf("%s TAIL %q (head refused) for %v Q: %s", label, a, q.Variants(), q.Question)
								}
								st.tailOnly[key] = true
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%s: %d kept questions; some pool string alone answers %d (an oracle's pick, not a script)", label, nq, len(bareAny))
	for _, f := range h6FormList {
		st := stats[f]
		best := 0
		for _, n := range st.best {
			best = max(best, n)
		}
		t.Logf("%s form %-34q attacker pairs: union %d best pair %d; pool pairs: any %d, correct one after a refused head %d", label, f, len(st.pair), best, len(st.any), len(st.tailOnly))
	}
	t.Logf("%s letter-label pair (\"Tier A — <guess>\"): %d kept questions", label, len(letterGain))
}

const h6PoolMax = 12

func h6Dedupe(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		s = strings.TrimSpace(s)
		k := strings.ToLower(s)
		if s == "" || seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, s)
	}
	return out
}

var labelLetter = regexp.MustCompile(`\b([A-Z][a-z]+) ([A-Z])\b`)

// letterPairs is a script: for every "Word L" label of the narratives
// (one upper-case letter L), "Word A — <attacker answer>" when an attacker
// names another label of the same word, else "Word A — Word B".
func letterPairs(atk []string, text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range labelLetter.FindAllStringSubmatch(text, -1) {
		if seen[m[1]] {
			continue
		}
		seen[m[1]] = true
		for _, a := range atk {
			if strings.HasPrefix(a, m[1]+" ") && a != m[1]+" A" {
				out = append(out, m[1]+" A — "+a)
			}
		}
		out = append(out, m[1]+" A — "+m[1]+" B", m[1]+" A ("+m[1]+" C)")
	}
	return out
}

func TestH6Try(t *testing.T) {
	f := os.Getenv("H6_TRY_SET")
	if f == "" {
		t.Skip("set H6_TRY_SET, H6_TRY_Q and H6_TRY_A")
	}
	set, err := skill.LoadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	var p, qi int
	fmt.Sscanf(os.Getenv("H6_TRY_Q"), "%d:%d", &p, &qi)
	q := &set.Parts[p].Questions[qi]
	narr := attack.NarrativesUpTo(set, p)
	for _, a := range strings.Split(os.Getenv("H6_TRY_A"), "|") {
		ok, rule := skill.JudgeRule(q, a, narr)
		t.Logf("%v %s %q (variants %v)", ok, rule, a, q.Variants())
	}
}
