package attack

import (
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

// TestMeasureJudgeWords prints (JUDGE_WORDS_MEASURE=N, N procedural sets
// besides the LLM-written sample sets and hybrids, which are skipped
// when absent) what the matcher does with two answer forms of
// verification.md 1.5.21 and 1.5.22, from both sides:
//
//   - agents: every integer numeric target 21-999 whose spelling has a
//     ten and a unit, written as two words ("thirty one", "one hundred
//     thirty one", with and without the question's first unit variant)
//     and every non-numeric accepted variant in the possessive ("X's",
//     "the X’s"): how many are accepted;
//   - attackers: every attacker of All(), WhiteBox and Listing answers
//     every question: the questions it answers bare, and with its
//     answer's words put in the possessive, its numbers spelled with a
//     space, or (1.5.24) "the" before it or the question's noun after it:
//     the questions answered only in such a form are what a script could
//     gain by writing it (a rule change must not raise any of these
//     figures; "X noun" gains where the variant is the question's own
//     noun, as any echo of the question's words does);
//   - two candidates: every ordered pair of distinct candidates
//     (variants, distractors, attackers' answers) joined as "X Y's",
//     "X (Y's)" and "X — Y's", and for a numeric target the target's
//     ten and unit with another candidate's number: accepted strings
//     whose second candidate is a distractor (must be 0);
//   - abbreviations (verification.md 1.5.24): every accepted variant
//     with a . and white space inside it ("B. cereus ST1382") written
//     as "the X", "The X." and "X N" where N is the question's word
//     after which/what ("strain"): how many are accepted; the attackers'
//     answers in the forms "the X" and "X N" count as formed, and two
//     candidates are joined as "the X Y" and "X. Y" too.
func TestMeasureJudgeWords(t *testing.T) {
	n := 0
	fmt.Sscan(os.Getenv("JUDGE_WORDS_MEASURE"), &n)
	if n == 0 {
		t.Skip("set JUDGE_WORDS_MEASURE=<procedural sets> to measure")
	}
	measureWords(t, "procedural", procSets(t, n, 20261124))
	if d := corpusDir(); d != "" {
		for _, pat := range []string{"/sets/*.json", "/hybrid/*-hybrid.json", "/hybrid/*-hybrid-q.json"} {
			files, _ := filepath.Glob(d + pat)
			var sets []*skill.Set
			for _, f := range files {
				if set, err := skill.LoadFile(f); err == nil {
					sets = append(sets, set)
				}
			}
			measureWords(t, pat, sets)
		}
	}
}

// spelledWords spells 21-999 with a ten and a unit as separate words
// ("one hundred thirty one"); ok is false for other values.
func spelledWords(v int) (string, bool) {
	units := strings.Fields("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen")
	tens := strings.Fields("twenty thirty forty fifty sixty seventy eighty ninety")
	if v < 21 || v > 999 || v%100 < 21 || v%10 == 0 {
		return "", false
	}
	s := tens[v%100/10-2] + " " + units[v%10]
	if v >= 100 {
		s = units[v/100] + " hundred " + s
	}
	return s, true
}

// respell writes every integer 21-999 of a with a ten and a unit in
// words ("31 hosts" is "thirty one hosts").
func respell(a string) string {
	fs := strings.Fields(a)
	for i, f := range fs {
		var v int
		if _, err := fmt.Sscanf(f, "%d", &v); err == nil && fmt.Sprint(v) == f {
			if s, ok := spelledWords(v); ok {
				fs[i] = s
			}
		}
	}
	return strings.Join(fs, " ")
}

// possessive puts the last word of a in the possessive.
func possessive(a string) string {
	a = strings.TrimRight(strings.TrimSpace(a), ".")
	if a == "" {
		return a
	}
	return a + "'s"
}

// innerDot reports whether s writes a . and white space between two of
// its words ("B. cereus ST1382", "Dr. Okafor").
func innerDot(s string) bool {
	for i := strings.Index(s, ". "); i >= 0; i = strings.Index(s, ". ") {
		if strings.TrimSpace(s[i+1:]) != "" && i > 0 {
			return true
		}
		s = s[i+2:]
	}
	return false
}

// askedNoun returns the question's word after "which" or "what" ("strain"
// of "Which strain caused ..."), or "".
func askedNoun(question string) string {
	fs := strings.Fields(strings.ToLower(question))
	for i := 0; i+1 < len(fs); i++ {
		if fs[i] == "which" || fs[i] == "what" {
			w := strings.Trim(fs[i+1], "?,.;:")
			switch w {
			case "", "is", "was", "are", "were", "the", "a", "an", "of", "did", "does", "do":
				return ""
			}
			return w
		}
	}
	return ""
}

func measureWords(t *testing.T, label string, sets []*skill.Set) {
	var compN, compOK, possN, possOK, pairsN, pairsOK, pairsDistractor int
	var abbrN, abbrOK int
	attackers := append(append(All(), WhiteBox("")...), Listing())
	bare, formed, gained := map[string]int{}, map[string]int{}, map[string]int{}
	verbose := os.Getenv("JUDGE_WORDS_VERBOSE") != ""
	for _, set := range sets {
		for k := range set.Parts {
			narr := narrativesUpTo(set, k)
			for j := range set.Parts[k].Questions {
				q := &set.Parts[k].Questions[j]
				if v, ok := new(big.Rat).SetString(strings.ReplaceAll(strings.TrimSpace(q.Answer), ",", "")); ok && v.IsInt() && v.Num().IsInt64() {
					if s, ok := spelledWords(int(v.Num().Int64())); ok {
						forms := []string{s, "The answer is " + s + "."}
						for _, x := range q.Variants() {
							if w := strings.Fields(x); len(w) == 2 && w[0] == strings.TrimSpace(q.Answer) {
								forms = append(forms, s+" "+w[1])
							}
						}
						for _, f := range forms {
							compN++
							if skill.Judge(q, f, narr) {
								compOK++
							} else if verbose {
								t.Logf("compound refused: %q for %q", f, q.Answer)
							}
						}
					}
				} else {
					for _, x := range q.Variants() {
						for _, f := range []string{possessive(x), "the " + strings.TrimSuffix(possessive(x), "'s") + "’s"} {
							possN++
							if skill.Judge(q, f, narr) {
								possOK++
							} else if verbose {
								t.Logf("possessive refused: %q for %v", f, q.Variants())
							}
						}
					}
				}
				noun := askedNoun(q.Question)
				for _, x := range q.Variants() {
					if !innerDot(x) {
						continue
					}
					forms := []string{"the " + x, "The " + x + "."}
					if noun != "" {
						forms = append(forms, x+" "+noun)
					}
					for _, f := range forms {
						abbrN++
						if skill.Judge(q, f, narr) {
							abbrOK++
						} else if verbose {
							t.Logf("abbreviation refused: %q for %v", f, q.Variants())
						}
					}
				}
				cands := candidates(q)
				for _, a := range attackers {
					ans := answerAt(t, set, a.Prover, k, j)
					cands = append(cands, ans)
					if skill.Judge(q, ans, narr) {
						bare[a.Name]++
					}
					forms := []string{possessive(ans), respell(ans), "the " + ans}
					if noun != "" {
						forms = append(forms, ans+" "+noun)
					}
					for _, f := range forms {
						if f != ans && skill.Judge(q, f, narr) {
							formed[a.Name]++
							if !skill.Judge(q, ans, narr) {
								gained[a.Name]++
								t.Logf("%s: %q accepted where %q is not (%v)", a.Name, f, ans, q.Variants())
							}
							break
						}
					}
				}
				cands = dedupe(cands)
				for _, x := range cands {
					for _, y := range cands {
						if strings.EqualFold(x, y) {
							continue
						}
						for _, f := range []string{"%s %s's", "%s (%s's)", "%s — %s's", "%s %s", "%s (%s)", "the %s %s", "%s. %s"} {
							a := fmt.Sprintf(f, x, respell(y))
							if f == "the %s %s" || f == "%s. %s" {
								if !innerDot(x) && !innerDot(y) {
									continue
								}
								a = fmt.Sprintf(f, x, y)
							} else if strings.Count(f, "'") == 0 && respell(y) == y {
								continue
							}
							if len(a) > skill.MaxAnswerBytes {
								continue
							}
							pairsN++
							if !skill.Judge(q, a, narr) {
								continue
							}
							pairsOK++
							if names(q.Distractors, y) {
								pairsDistractor++
								t.Logf("ACCEPTED naming a distractor: %q for %v", a, q.Variants())
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%s (%d sets) agents: a ten and a unit as two words %d/%d; possessive variants %d/%d; abbreviations (the X, The X., X noun) %d/%d", label, len(sets), compOK, compN, possOK, possN, abbrOK, abbrN)
	for _, a := range attackers {
		t.Logf("%s attacker %-22s questions answered bare %d, in a form (possessive, respelled, the X, X noun) %d, only in a form %d", label, a.Name, bare[a.Name], formed[a.Name], gained[a.Name])
	}
	t.Logf("%s two candidates: %d strings, accepted %d, naming a distractor %d", label, pairsN, pairsOK, pairsDistractor)
}
