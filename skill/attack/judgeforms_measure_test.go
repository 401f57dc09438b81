package attack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

// TestMeasureJudgeForms prints, on the LLM-written sample sets and hybrid
// rewordings (JUDGE_FORMS_MEASURE=1; skipped when the corpus is absent),
// what the matcher does with the answer forms of verification.md 1.5.0:
// an explanation after the answer ("X — because ...", "X (…)", "X; …"),
// a spelled-out number ("three"). Three figures:
//
//   - agents: every accepted variant of every question, with an
//     explanation appended (a generic one, and the narrative's own
//     sentence around the variant cut to the 64-byte cap), and every
//     integer target 0-99 spelled out: how many are accepted;
//   - attackers: every attacker of All(), WhiteBox and Listing answers
//     every question; the questions it answers bare, and with its answer
//     wrapped in each explanation form (a script gains nothing when the
//     wrapped count never exceeds the bare one);
//   - two candidates: every ordered pair of distinct candidates (accepted
//     variants, distractors, the attackers' answers, the narratives'
//     numbers for a numeric question) joined by each separator: how many
//     are accepted whose head alone is refused (must be 0), and how many
//     whose tail names a distractor (must be 0).
func TestMeasureJudgeForms(t *testing.T) {
	if os.Getenv("JUDGE_FORMS_MEASURE") == "" {
		t.Skip("set JUDGE_FORMS_MEASURE=1 to measure")
	}
	dir := llmCorpusDir(t)
	for _, pat := range []string{"/sets/*.json", "/hybrid/*-hybrid.json"} {
		files, _ := filepath.Glob(dir + pat)
		var sets []*skill.Set
		for _, f := range files {
			set, err := skill.LoadFile(f)
			if err != nil {
				t.Logf("%s: %v", f, err)
				continue
			}
			sets = append(sets, set)
		}
		measureForms(t, pat, sets)
	}
}

// explanationForms wraps an answer in the forms an agent adds a
// justification with.
var explanationForms = []string{"%s — %s", "%s - because %s", "%s (%s)", "%s; %s", "%s. %s", "%s, because %s", "%s—%s", "%s\n\n%s"}

func measureForms(t *testing.T, label string, sets []*skill.Set) {
	var (
		agentN, agentGeneric, agentSentence, spelledN, spelledOK                  int
		phraseN, phraseOK, pairsN, pairsOK, pairsHeadRefused, pairsTailDistractor int
	)
	verbose := os.Getenv("JUDGE_FORMS_VERBOSE") != ""
	attackers := append(append(All(), WhiteBox("")...), Listing())
	bare := map[string]int{}
	wrapped := map[string]int{}
	unionBare, unionWrapped := map[string]bool{}, map[string]bool{}
	for si, set := range sets {
		for k := range set.Parts {
			narr := narrativesUpTo(set, k)
			for j := range set.Parts[k].Questions {
				q := &set.Parts[k].Questions[j]
				key := fmt.Sprintf("%d/%d/%d", si, k, j)
				// agents: variants with explanations
				for _, v := range q.Variants() {
					for _, f := range explanationForms {
						agentN++
						if skill.Judge(q, fmt.Sprintf(f, v, "the narrative says so"), narr) {
							agentGeneric++
						}
						if e := sentenceAround(narr[k], v, skill.MaxAnswerBytes-len(v)-12); e != "" && skill.Judge(q, fmt.Sprintf(f, v, e), narr) {
							agentSentence++
						}
					}
				}
				if isNumber(q.Answer) {
					// the narrative's words before the target number, as an
					// agent echoing the text writes them: "priority 3",
					// "the bottle read 22"
					fs := strings.Fields(narr[k])
					for i := 1; i < len(fs); i++ {
						if strings.Trim(fs[i], ".,;:()") != strings.TrimSpace(q.Answer) {
							continue
						}
						for back := 1; back <= 3 && i-back >= 0; back++ {
							phraseN++
							a := strings.Join(fs[i-back:i], " ") + " " + strings.TrimSpace(q.Answer)
							if skill.Judge(q, a, narr) {
								phraseOK++
							} else if verbose {
								t.Logf("phrase refused: %q", a)
							}
						}
					}
				}
				if n, ok := smallInt(q.Answer); ok {
					for _, s := range []string{spelled[n], strings.ToUpper(spelled[n][:1]) + spelled[n][1:], "The answer is " + spelled[n] + "."} {
						spelledN++
						if skill.Judge(q, s, narr) {
							spelledOK++
						} else if verbose {
							t.Logf("spelled refused: %q for %q (%s)", s, q.Answer, q.Question)
						}
					}
				}
				// attackers
				cands := candidates(q)
				for _, a := range attackers {
					ans := answerAt(t, set, a.Prover, k, j)
					cands = append(cands, ans)
					if skill.Judge(q, ans, narr) {
						bare[a.Name]++
						unionBare[key] = true
					}
					for _, f := range explanationForms {
						if skill.Judge(q, fmt.Sprintf(f, ans, "the narrative says so"), narr) {
							wrapped[a.Name]++
							unionWrapped[key] = true
							break
						}
					}
				}
				if _, ok := smallInt(q.Answer); ok || isNumber(q.Answer) {
					for _, w := range strings.Fields(narr[k]) {
						if w = strings.Trim(w, ".,;:()"); isNumber(w) {
							cands = append(cands, w)
						}
					}
				}
				cands = dedupe(cands)
				for _, x := range cands {
					headOK := skill.Judge(q, x, narr)
					for _, y := range cands {
						if strings.EqualFold(x, y) {
							continue
						}
						for _, f := range explanationForms {
							a := fmt.Sprintf(f, x, y)
							if len(a) > skill.MaxAnswerBytes {
								continue
							}
							pairsN++
							if !skill.Judge(q, a, narr) {
								continue
							}
							pairsOK++
							if !headOK {
								pairsHeadRefused++
								if verbose {
									t.Logf("accepted with a refused head: %q for %v", a, q.Variants())
								}
							}
							if names(q.Distractors, y) {
								pairsTailDistractor++
								t.Logf("ACCEPTED naming a distractor: %q for %v", a, q.Variants())
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%s agents: explanation forms, generic %d/%d, the narrative's sentence %d/%d; spelled-out integer targets %d/%d; the narrative's 1-3 words before the target number %d/%d",
		label, agentGeneric, agentN, agentSentence, agentN, spelledOK, spelledN, phraseOK, phraseN)
	for _, a := range attackers {
		t.Logf("%s attacker %-22s questions answered bare %d, wrapped %d", label, a.Name, bare[a.Name], wrapped[a.Name])
	}
	t.Logf("%s attackers' union: bare %d, wrapped %d", label, len(unionBare), len(unionWrapped))
	t.Logf("%s two candidates: %d strings, accepted %d, of which with a refused head %d (the whole accepted by M3/M4 as before), naming a distractor after the head %d",
		label, pairsN, pairsOK, pairsHeadRefused, pairsTailDistractor)
}

var spelled = strings.Fields("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty")

func smallInt(s string) (int, bool) {
	var n int
	if _, err := fmt.Sscanf(strings.TrimSpace(s), "%d", &n); err != nil || fmt.Sprint(n) != strings.TrimSpace(s) || n < 0 || n >= len(spelled) {
		return 0, false
	}
	return n, true
}

func isNumber(s string) bool {
	ws := skill.Words(s)
	return len(ws) == 1 && ws[0].Number != nil
}

func names(ds []string, y string) bool {
	for _, d := range ds {
		if strings.EqualFold(strings.TrimSpace(d), strings.TrimSpace(y)) {
			return true
		}
	}
	return false
}

func dedupe(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		k := strings.ToLower(strings.TrimSpace(s))
		if k == "" || seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, s)
	}
	return out
}

// sentenceAround returns the words of the narrative's sentence holding v
// after v (or before it, when none follow), cut at a word to max bytes:
// the justification an agent quotes.
func sentenceAround(narrative, v string, max int) string {
	i := strings.Index(strings.ToLower(narrative), strings.ToLower(v))
	if i < 0 || max < 8 {
		return ""
	}
	start := strings.LastIndexAny(narrative[:i], ".!?\n") + 1
	end := len(narrative)
	if e := strings.IndexAny(narrative[i+len(v):], ".!?\n"); e >= 0 {
		end = i + len(v) + e
	}
	s := strings.TrimSpace(narrative[start:end])
	var out []string
	n := 0
	for _, w := range strings.Fields(s) {
		if n+len(w)+1 > max {
			break
		}
		out = append(out, w)
		n += len(w) + 1
	}
	return strings.Join(out, " ")
}
