package attack

import (
	"math/big"
	"regexp"
	"slices"
	"strings"

	"github.com/acaptcha/acaptcha/skill"
)

// The prompt-aware attacker: it exploits what the generation prompt
// (skill/generate/prompt.go) and the hybrid rewording prompt promise about
// the text: one candidate that differs from the rest only in the four
// checks (it persists, independent repeats reproduce it, nothing external
// explains it, it is widespread), at least one early or provisional
// conclusion that a later paragraph corrects, a stated rule that maps
// thresholds to labels, numbers of the same kind and unit as distractors,
// and questions that say what form the answer takes. On a hybrid set, whose
// skeleton is procedural, it first tries the generator inverter.

// solvePrompt answers one round of the prompt-aware attacker.
func solvePrompt(s *wbSession, part int, c *skill.Challenge) string {
	if _, ok := procDomain(c.Domain); ok {
		w := s.procWorld(part, c.Domain)
		if len(w.cand) >= 3 && w.truth >= 0 {
			if a := w.answer(c.Question, part); a != fallback {
				return a
			}
		}
	}
	lw := s.cached("llm", part, func() any { return parseLLMShared(s.narratives[part]) }).(*lWorld)
	return lw.answer(c.Question)
}

// procDomain reports whether a domain is one of the procedural generator's
// (the hybrid skeletons use them).
func procDomain(d string) (*[skill.Parts]pVocab, bool) {
	vocabOnce.Do(harvestVocab)
	t, ok := vocabTab[d]
	return t, ok
}

type lEnt struct {
	name     string
	score    float64
	misled   bool
	mentions int
	sents    []int
}

type lWorld struct {
	sents    []string
	ents     []*lEnt
	standout int
	misled   int
	labels   []string // quoted or rule labels, in order
}

var (
	lPrelim = regexp.MustCompile(`(?i)\b(preliminary|provisional|draft|interim|early view|working view|initial(?:ly)?|first (?:reading|look|pass|impression)|at first|early (?:assessment|read|reading|conclusion)|was thought|seemed)\b`)
	lPos    = regexp.MustCompile(`(?i)\b(persist\w*|sustain\w*|steady|throughout|every (?:round|site|run|repeat|sample|week|month)|all (?:\w+ )?(?:sites|rounds|runs|repeats|samples|locations|centres|labs)|independent\w*|reproduc\w*|replicat\w*|held|consistent\w*|unchanged|remained|still|across|each of|no (?:external|outside)|nothing (?:external|outside)|ruled? out (?:contamination|artefact)|clean controls?)\b`)
	lNeg    = regexp.MustCompile(`(?i)\b(correct\w*|re-?analys\w*|recalibrat\w*|too strong|replacement|artefact\w*|artifact\w*|contaminat\w*|preservative|explain\w*|attribut\w*|traced|caused by|due to|single|one-off|only (?:at|in|on|once)|isolated|transient|faded|fell back|dropped back|returned to|normal range|typical of|washing|error|mislabel\w*|swap\w*|fault\w*|not reproduc\w*|failed|could not|did not)\b`)
	lQuoted = regexp.MustCompile(`["“']([^"”']{2,40})["”']`)
	lCapRun = regexp.MustCompile(`\b([A-Z][\w'’-]*(?:\s+(?:No\.\s*\d+|[A-Z0-9][\w'’-]*))*)`)
)

var lStopCaps = toSet("The A An This That These Those It Its In On At By For From With After Before During Under Over Of And Or But If When While Where Which Who What Summary Sources Source Analytical Results Result Notes Note Table Section Part Report Laboratory January February March April May June July August September October November December Monday Tuesday Wednesday Thursday Friday Saturday Sunday Prepared All Both Each Every No Not One Two Three Four Five Six Seven Eight Nine Ten Raw Batch Pumping Dr Mr Ms Mrs")

// parseLLM finds candidates (codes and recurring capitalised names) and
// scores each by the check vocabulary of the sentences that name it.
func parseLLM(text string) *lWorld {
	w := &lWorld{standout: -1, misled: -1}
	w.sents = wbSentences(text)
	count := map[string]int{}
	for _, s := range w.sents {
		for _, t := range wbCodeTokens(s) {
			if wbCodeLike(t.text) && !wbIsDateTok(t.text) {
				count[t.text]++
			}
		}
		for _, m := range lCapRun.FindAllStringSubmatchIndex(s, -1) {
			name := strings.TrimSpace(s[m[2]:m[3]])
			fs := strings.Fields(name)
			for len(fs) > 0 && lStopCaps[fs[0]] {
				fs = fs[1:]
			}
			if len(fs) == 0 {
				continue
			}
			name = strings.Join(fs, " ")
			if len(name) < 3 || len(name) > 40 {
				continue
			}
			count[name]++
		}
	}
	var names []string
	for n, c := range count {
		if c >= 2 {
			names = append(names, n)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	// Drop names contained in a longer name that is as frequent.
	var keep []string
	for _, n := range names {
		dup := false
		for _, k := range keep {
			if strings.Contains(k, n) && count[k] >= count[n] {
				dup = true
			}
		}
		if !dup {
			keep = append(keep, n)
		}
	}
	if len(keep) > 24 {
		keep = keep[:24]
	}
	for _, n := range keep {
		w.ents = append(w.ents, &lEnt{name: n})
	}
	for si, s := range w.sents {
		var in []int
		mask := s
		for i, e := range w.ents {
			if k := wbIndexWord(mask, e.name); k >= 0 {
				in = append(in, i)
				mask = mask[:k] + strings.Repeat(" ", len(e.name)) + mask[k+len(e.name):]
			}
		}
		for _, i := range in {
			w.ents[i].mentions++
			w.ents[i].sents = append(w.ents[i].sents, si)
		}
		if len(in) == 0 {
			for _, m := range lQuoted.FindAllStringSubmatch(s, -1) {
				if !slices.Contains(w.labels, m[1]) {
					w.labels = append(w.labels, m[1])
				}
			}
			continue
		}
		if lPrelim.MatchString(s) {
			w.ents[in[0]].misled = true
		}
		if len(in) > 2 {
			continue
		}
		pos := float64(len(lPos.FindAllString(s, -1)))
		neg := float64(len(lNeg.FindAllString(s, -1)))
		for _, cl := range wbClauses(strings.ToLower(s)) {
			r := wbClassifyClause(cl, &pVocab{}, [pcN]int{})
			for _, x := range r {
				if x > 0 {
					pos++
				} else if x < 0 {
					neg++
				}
			}
		}
		for _, i := range in {
			w.ents[i].score += (pos - 1.5*neg) / float64(len(in))
		}
	}
	best := -1
	for i, e := range w.ents {
		if e.mentions < 2 {
			continue
		}
		sc := e.score
		if e.misled {
			sc -= 3
		}
		if best < 0 || sc > w.ents[best].score-boolF(w.ents[best].misled)*3 {
			best = i
		}
	}
	w.standout = best
	for i, e := range w.ents {
		if e.misled && i != best {
			w.misled = i
			break
		}
	}
	return w
}

func boolF(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// answer answers by the form the question asks for.
func (w *lWorld) answer(question string) string {
	q := strings.ToLower(question)
	target := w.standout
	if lPrelim.MatchString(q) && w.misled >= 0 && !strings.Contains(q, "later") && !strings.Contains(q, "revised") {
		target = w.misled
	}
	if target < 0 {
		return fallback
	}
	switch {
	case reqNumIns.MatchString(q) || strings.HasPrefix(q, "how") || strings.Contains(q, "what percentage") || strings.Contains(q, "what value"):
		return w.number(q, target)
	case strings.Contains(q, " rule") || strings.Contains(q, "classif") || strings.Contains(q, "tier") || strings.Contains(q, "category") || strings.Contains(q, "status") || strings.Contains(q, "grade") || strings.Contains(q, "label"):
		if len(w.labels) > 0 {
			return w.labels[0]
		}
	}
	return w.ents[target].name
}

// number picks a number for the target: the mean or the difference when
// the question asks for one, else the first number stated with it.
func (w *lWorld) number(q string, target int) string {
	var nums []wbNum
	for _, si := range w.ents[target].sents {
		for _, n := range wbNumbers(w.sents[si]) {
			if n.val.Sign() != 0 && !(n.dec == 0 && n.val.Cmp(big.NewRat(1900, 1)) > 0) {
				nums = append(nums, n)
			}
		}
	}
	if len(nums) == 0 {
		return fallback
	}
	dec := 0
	for _, n := range nums {
		dec = max(dec, n.dec)
	}
	switch {
	case strings.Contains(q, "mean") || strings.Contains(q, "average"):
		sum := new(big.Rat)
		for _, n := range nums {
			sum.Add(sum, n.val)
		}
		sum.Quo(sum, big.NewRat(int64(len(nums)), 1))
		return strings.TrimSuffix(strings.TrimRight(sum.FloatString(2), "0"), ".")
	case strings.Contains(q, "how many") && !strings.Contains(q, "days"):
		return nums[0].text
	case reqDiff.MatchString(q) && w.misled >= 0 && w.misled != target:
		for _, si := range w.ents[w.misled].sents {
			for _, n := range wbNumbers(w.sents[si]) {
				d := new(big.Rat).Sub(nums[0].val, n.val)
				d.Abs(d)
				return wbRatFmt(d, dec)
			}
		}
	}
	return nums[0].text
}
