package attack

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

// judgeShapes is a white-box attacker written against the matcher and the
// validation filter rather than against one generator, measured by
// TestMeasureJudgeShapes. It answers in the shapes the matcher accepts
// most broadly and picks its candidate by priors the filter's attackers
// do not use:
//
//   - numeric questions: the question's unit decides the pool (pounds,
//     euros, km, mg/L, µM, %, t/ha, ...), and its wording the arithmetic
//     (mean of the numbers of the best-overlapping sentence, the
//     difference of its first two for "by how many ... exceed", their sum
//     for "total", the last value for "after reprocessing", "final",
//     "restated"), answered as a bare number so that M3 reads one number;
//   - "which X" questions: the names the narrative writes next to the
//     question's class noun ("Orchard Lane station", "station PEP"),
//     scored by mentions and persistence cues minus explanation cues,
//     answered with the class noun after the name (a question word,
//     allowed around any variant).
//
// Measured with the eval harness (hooked in for the run, not kept: it is
// no improvement over the held-out random attacker): LLM sets 0/3000
// sessions, 4.7 % of round 1 (random, seed 2: 5.3 %); hybrids 0/3000,
// 0.0 % of round 1.
func judgeShapes() Named {
	return Named{
		Name:        "judge-shapes",
		Description: "white-box against the matcher and the filter: unit-pooled arithmetic for numbers, class-noun names scored by persistence for entities",
		Prover:      &wbProver{name: "judge-shapes", solve: solveShapes},
	}
}

var (
	jsNumRe   = regexp.MustCompile(`(?:[£€$]\s?)?-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?:[£€$]\s?)?-?\d+(?:\.\d+)?`)
	jsWhichRe = regexp.MustCompile(`(?i)\b(?:which|what)\s+((?:[a-z][a-z-]*\s+){0,2}?[a-z][a-z-]*)\s+(?:had|has|holds?|shows?|is|was|were|remains?|carried|accounts?|behaves|received|does|did|corroborates|hosts|'s|’s|of|from|in|to|at|that|whose|with|under|for|behind)\b`)
	jsCapRe   = regexp.MustCompile(`\b(?:[A-Z][A-Za-z0-9]*(?:[-/][A-Za-z0-9]+)*)(?:\s+(?:[A-Z][A-Za-z0-9]*(?:[-/][A-Za-z0-9]+)*|\d+(?:/\d+)?))*`)
	jsCodeRe  = regexp.MustCompile(`\b[A-Za-z]{1,6}[-]?\d[\w/-]*\b|\b\d{3,}/\d+\b`)
	jsPos     = regexp.MustCompile(`(?i)\b(all|every|each|throughout|persist\w*|repeat\w*|again|consistent\w*|held|holds|reproduc\w*|replicat\w*|still|remain\w*|same|despite|across)\b`)
	jsNeg     = regexp.MustCompile(`(?i)\b(only|single|once|one-off|explain\w*|traced|attribut\w*|because|due|caused|after|repair\w*|fault\w*|error|artefact\w*|contaminat\w*|shutdown|offline|down|transient|faded|not|no longer|cleared|ruled)\b`)
	jsMean    = regexp.MustCompile(`(?i)\b(mean|average|averaged)\b`)
	jsDiff    = regexp.MustCompile(`(?i)\b(by how (?:many|much)|exceed\w*|beat|differ\w*|difference|higher|lower|more than|less than|off)\b`)
	jsSum     = regexp.MustCompile(`(?i)\b(total|altogether|combined|in all|across)\b`)
	jsLast    = regexp.MustCompile(`(?i)\b(after|final|revised|restated|reprocess\w*|corrected|now|updated|latest)\b`)
	jsNumQ    = regexp.MustCompile(`(?i)\b(how (?:many|much|long)|by (?:how|what)|mean|average|averaged|total|value|amount|depth|rate|factor|score|penalty|compensation|benefit|in (?:pounds|euros|dollars|km|µm|mg/l|percent|t/ha|kg/ha)|in µm)\b`)
	jsUnitQ   = regexp.MustCompile(`(?i)(pounds|euros|dollars|\bkm\b|µm|\bum\b|mg/l|percentage points|percent|t/ha|kg/ha|seconds|days|hours|units|packs|ml/min)`)
	jsEntQ    = regexp.MustCompile(`(?i)^\s*(?:\w+\s+){0,2}(?:which|what)\s+(?:[a-z-]+\s+){0,2}?(?:host|station|operator|vendor|company|lot|batch|node|container|candidate|compound|subgroup|co-medication|point|reservoir|segment|account|cluster|stock|sequence|type|outcome|role|readout|mechanism|platform|regime|family|indicator|owner)\b`)
	jsStop    = toSet("the a an of in on at by for to with and or is was were which what how many much that this those these its their it from as be has had have does did under over after before into once set aside every each any all")
)

func solveShapes(s *wbSession, part int, c *skill.Challenge) string {
	q := c.Question
	cur := s.narratives[part]
	if jsNumQ.MatchString(q) && !jsEntQ.MatchString(q) {
		if a := shapesNumber(q, cur); a != "" {
			return a
		}
	}
	if a := shapesEntity(q, cur); a != "" {
		return a
	}
	return fallback
}

// qWords are the question's content words, lower case.
func jsQWords(q string) map[string]bool {
	out := map[string]bool{}
	for _, w := range wbLowerWords(q) {
		if len(w) > 2 && !jsStop[w] {
			out[w] = true
		}
	}
	return out
}

func jsOverlap(sent string, qw map[string]bool) int {
	n := 0
	seen := map[string]bool{}
	for _, w := range wbLowerWords(sent) {
		if qw[w] && !seen[w] {
			seen[w] = true
			n++
		}
	}
	return n
}

type jsNum struct {
	v    float64
	dec  int
	text string
	unit string
}

// jsNumbers lists the numbers of a sentence with the word after each
// (its unit), dates and years left out.
func jsNumbers(sent string) []jsNum {
	var out []jsNum
	for _, loc := range jsNumRe.FindAllStringIndex(sent, -1) {
		t := sent[loc[0]:loc[1]]
		if loc[0] > 0 {
			prev := sent[loc[0]-1]
			if prev == '-' || prev == '/' || (prev >= 'A' && prev <= 'Z') || (prev >= 'a' && prev <= 'z') {
				continue // part of a code
			}
		}
		if loc[1] < len(sent) {
			next := sent[loc[1]]
			if next == '/' || next == '-' && loc[1]+1 < len(sent) && sent[loc[1]+1] >= '0' && sent[loc[1]+1] <= '9' {
				continue
			}
		}
		cur := ""
		clean := strings.TrimSpace(strings.TrimLeft(t, "£€$ "))
		if clean != t {
			cur = strings.TrimSpace(t[:len(t)-len(clean)])
		}
		clean = strings.ReplaceAll(clean, ",", "")
		v, err := strconv.ParseFloat(clean, 64)
		if err != nil {
			continue
		}
		if v >= 1900 && v <= 2100 && !strings.Contains(clean, ".") && cur == "" {
			continue
		}
		dec := 0
		if i := strings.IndexByte(clean, '.'); i >= 0 {
			dec = len(clean) - i - 1
		}
		unit := cur
		rest := strings.TrimLeft(sent[loc[1]:], " ")
		if unit == "" {
			if m := regexp.MustCompile(`^(%|[A-Za-zµμ/]+)`).FindString(rest); m != "" {
				unit = strings.ToLower(m)
			}
		}
		out = append(out, jsNum{v: v, dec: dec, text: clean, unit: unit})
	}
	return out
}

func jsUnitOK(n jsNum, qu string) bool {
	if qu == "" {
		return true
	}
	switch qu {
	case "pounds":
		return n.unit == "£" || strings.HasPrefix(n.unit, "pound") || n.v >= 100
	case "euros":
		return n.unit == "€" || strings.HasPrefix(n.unit, "euro") || n.v >= 100
	case "percent", "percentage points":
		return n.unit == "%" || strings.HasPrefix(n.unit, "percent") || strings.HasPrefix(n.unit, "point")
	case "µm", "um":
		return n.unit == "µm" || n.unit == "μm" || n.unit == "um"
	}
	return strings.HasPrefix(n.unit, qu) || strings.HasPrefix(qu, n.unit) && n.unit != ""
}

func jsFmt(v float64, dec int) string {
	if dec < 0 {
		dec = 0
	}
	s := strconv.FormatFloat(v, 'f', dec, 64)
	if strings.Contains(s, ".") && dec == 0 {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

func shapesNumber(q, text string) string {
	qu := strings.ToLower(jsUnitQ.FindString(q))
	qw := jsQWords(q)
	sents := wbSentences(text)
	type scored struct {
		i    int
		ov   int
		nums []jsNum
	}
	var ss []scored
	for i, s := range sents {
		var ns []jsNum
		for _, n := range jsNumbers(s) {
			if jsUnitOK(n, qu) {
				ns = append(ns, n)
			}
		}
		if len(ns) == 0 {
			continue
		}
		ss = append(ss, scored{i, jsOverlap(s, qw), ns})
	}
	if len(ss) == 0 {
		return ""
	}
	sort.SliceStable(ss, func(a, b int) bool { return ss[a].ov > ss[b].ov })
	best := ss[0]
	maxDec := 0
	for _, n := range best.nums {
		maxDec = max(maxDec, n.dec)
	}
	switch {
	case jsMean.MatchString(q) && len(best.nums) >= 2:
		sum := 0.0
		for _, n := range best.nums {
			sum += n.v
		}
		return jsFmt(sum/float64(len(best.nums)), maxDec+boolInt(maxDec == 0))
	case jsDiff.MatchString(q) && len(best.nums) >= 2:
		d := math.Abs(best.nums[0].v - best.nums[1].v)
		return jsFmt(d, maxDec)
	case jsSum.MatchString(q) && len(best.nums) >= 2:
		sum := 0.0
		for _, n := range best.nums {
			sum += n.v
		}
		return jsFmt(sum, maxDec)
	case jsLast.MatchString(q):
		// the last value of the unit in the text
		last := ss[0]
		for _, x := range ss {
			if x.i > last.i && x.ov > 0 {
				last = x
			}
		}
		n := last.nums[len(last.nums)-1]
		return n.text
	}
	return best.nums[0].text
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// shapesEntity answers a "which X" question with the name the narrative
// writes next to X that scores best on persistence cues.
func shapesEntity(q, text string) string {
	m := jsWhichRe.FindStringSubmatch(q)
	noun := ""
	if m != nil {
		f := strings.Fields(strings.ToLower(m[1]))
		noun = f[len(f)-1]
	}
	sents := wbSentences(text)
	type cand struct {
		name        string
		n, pos, neg int
		nearNoun    int
		first       int
	}
	cands := map[string]*cand{}
	order := 0
	for _, s := range sents {
		names := map[string]bool{}
		for _, x := range jsCapRe.FindAllString(s, -1) {
			x = strings.TrimSpace(x)
			if len(x) < 2 || lStopCaps[strings.Fields(x)[0]] {
				continue
			}
			names[x] = true
		}
		for _, x := range jsCodeRe.FindAllString(s, -1) {
			names[x] = true
		}
		low := strings.ToLower(s)
		pos := len(jsPos.FindAllString(s, -1))
		neg := len(jsNeg.FindAllString(s, -1))
		keys := make([]string, 0, len(names))
		for x := range names {
			keys = append(keys, x)
		}
		sort.Strings(keys) // a deterministic first mention
		for _, x := range keys {
			c := cands[x]
			if c == nil {
				c = &cand{name: x, first: order}
				order++
				cands[x] = c
			}
			c.n++
			c.pos += pos
			c.neg += neg
			if noun != "" {
				lx := strings.ToLower(x)
				if strings.Contains(low, lx+" "+noun) || strings.Contains(low, noun+" "+lx) {
					c.nearNoun++
				}
			}
		}
	}
	var list []*cand
	for _, c := range cands {
		list = append(list, c)
	}
	if len(list) == 0 {
		return ""
	}
	score := func(c *cand) float64 {
		return float64(c.nearNoun)*3 + float64(c.n) + 0.5*float64(c.pos) - 0.7*float64(c.neg)
	}
	sort.Slice(list, func(a, b int) bool {
		sa, sb := score(list[a]), score(list[b])
		if sa != sb {
			return sa > sb
		}
		return list[a].first < list[b].first
	})
	best := list[0]
	if noun != "" && best.nearNoun > 0 && !strings.Contains(strings.ToLower(best.name), noun) {
		return best.name + " " + noun
	}
	return best.name
}

// TestMeasureJudgeShapes measures judgeShapes and attributeValue on the LLM-written sample
// sets and hybrid rewordings (JUDGE_SHAPES_MEASURE=1; skipped when the
// corpus is absent) on the questions the filter's attackers leave: a
// question counts as kept when no attacker of All() and WhiteBox(kind)
// answers it (skill.Judge, or its one number alone) in a session that
// asked the first question of each earlier part — the validator's stage
// 3 in one context of earlier rounds, so it may keep a few questions the
// validator drops (the eval harness gives the exact figures: see
// judgeShapes). Printed: questions answered, and the round-1 and session
// pass rates of a session that draws a set, then a kept question per
// part, uniformly.
func TestMeasureJudgeShapes(t *testing.T) {
	if os.Getenv("JUDGE_SHAPES_MEASURE") == "" {
		t.Skip("set JUDGE_SHAPES_MEASURE=1 to measure")
	}
	dir := llmCorpusDir(t)
	for _, g := range []struct {
		pat  string
		kind skill.SourceKind
	}{{"/sets/*.json", skill.SourceLLM}, {"/hybrid/*-hybrid.json", skill.SourceHybrid}, {"/hybrid/*-hybrid-q.json", skill.SourceHybrid}} {
		files, _ := filepath.Glob(dir + g.pat)
		filter := append(All(), WhiteBox(g.kind)...)
		for _, js := range []Named{judgeShapes(), attributeValue()} {
			measureShapes(t, g.pat, files, filter, js)
		}
	}
}

// measureShapes measures one attacker on files, on the questions that
// no attacker of filter answers.
func measureShapes(t *testing.T, pat string, files []string, filter []Named, js Named) {
	{
		var r1, sess float64
		nsets, hits, kept := 0, 0, 0
		for _, f := range files {
			set, err := skill.LoadFile(f)
			if err != nil {
				t.Logf("%s: %v", f, err)
				continue
			}
			var frac [skill.Parts]float64
			served := true
			for k := range set.Parts {
				narr := narrativesUpTo(set, k)
				n, h := 0, 0
				for j := range set.Parts[k].Questions {
					q := &set.Parts[k].Questions[j]
					answered := false
					for _, a := range filter {
						if ans := answerAtBudget(t, set, a.Prover, k, j, skill.DefaultTau); skill.Judge(q, ans, narr) || oneNumberJudged(q, ans, narr) {
							answered = true
							break
						}
					}
					if answered {
						continue
					}
					n++
					ans := answerAtBudget(t, set, js.Prover, k, j, skill.DefaultTau)
					ok := skill.Judge(q, ans, narr)
					if ok {
						h++
					}
					if os.Getenv("JUDGE_SHAPES_VERBOSE") != "" {
						t.Logf("%s part %d: %v %q (want %q)", filepath.Base(f), k+1, ok, ans, q.Answer)
					}
				}
				if n == 0 {
					served = false
					break
				}
				kept += n
				hits += h
				frac[k] = float64(h) / float64(n)
			}
			if !served {
				continue // the validator rejects a set whose part loses every question
			}
			nsets++
			r1 += frac[0]
			sess += frac[0] * frac[1] * frac[2]
		}
		t.Logf("%-24s %-16s sets served %d, kept questions %d, answered %d; round 1 %.1f%%, sessions %.2f%%",
			pat, js.Name, nsets, kept, hits, 100*r1/float64(max(nsets, 1)), 100*sess/float64(max(nsets, 1)))
	}
}

// oneNumberJudged is the validator's second reading of a script's answer:
// its one number alone, when it holds exactly one.
func oneNumberJudged(q *skill.Question, ans string, narr []string) bool {
	num := ""
	for _, w := range skill.Words(ans) {
		if w.Number == nil {
			continue
		}
		if num != "" {
			return false
		}
		num = w.Text
		if w.Number.Sign() < 0 {
			num = "-" + num
		}
	}
	return num != "" && skill.Judge(q, num, narr)
}
