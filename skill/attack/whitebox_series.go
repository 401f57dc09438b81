package attack

import (
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/acaptcha/acaptcha/skill"
)

// The series attacker: a script that knows what the generation prompt
// (skill/generate/prompt.go) asks of numbers and of the candidate that
// matters. The prompt asks for numbers "woven into the prose" and for a
// candidate whose effect "persists over time" and that "independent
// repeats reproduce", while the others fade or come from one place; the
// questions it asks for "say what form the answer takes" and, for an
// aggregate, how many values go into it ("the mean of the four site
// estimates", "over the three detergent-free runs"). So a numeric question
// that asks for a mean, a total or a gap is answered from the lists of
// numbers of the narratives: every run of numbers one sentence lists
// ("read 54, 55, 57 and 56 mg/L"), of the count the question names and
// the unit it asks in, is a candidate, and the steadiest run (the smallest
// spread for its size, never a run that only falls or only rises, the
// shape of a fading effect) is taken for the candidate that persists. The
// mean or the sum of that run is the answer; for a gap the question
// states one side ("exceed the 50 mg/L limit"), and the run's mean less
// that number is the answer.

// WhiteBoxSeries is the series attacker's name.
const WhiteBoxSeries = "whitebox-series"

// Series returns the series attacker.
func Series() Named {
	return Named{
		Name:        WhiteBoxSeries,
		Description: "answers a mean, total or gap question from the steadiest list of numbers a sentence gives, of the count and unit the question names (the prompt's persisting candidate)",
		Prover:      &wbProver{name: WhiteBoxSeries, solve: solveSeries},
	}
}

var (
	srMean  = regexp.MustCompile(`(?i)\b(mean|average|averaged|averaging)\b`)
	srTotal = regexp.MustCompile(`(?i)\b(total|in all|altogether|combined|sum|across the|over the)\b`)
	srGap   = regexp.MustCompile(`(?i)\b(by how (?:many|much)|exceed\w*|above|below|short of|over the)\b`)
	// srCount is the count an aggregate question names: "over the four
	// February rounds", "its first three checks".
	srCount = regexp.MustCompile(`(?i)\b(two|three|four|five|six|seven|eight|nine|ten|both|\d{1,2})\s+(?:[a-z-]+\s+){0,2}?[a-z-]+s\b`)
	// srUnitAfter is the unit written right after a number.
	srUnitAfter = regexp.MustCompile(`^\s?(%|[A-Za-zµμ°][A-Za-zµμ°²³/.0-9]*)`)
	// srGapText is what may stand between two numbers of one list.
	srGapText = regexp.MustCompile(`(?i)^\s*(?:(?:at|in|on|for|from|by|with)\s+[^,;:.!?0-9]{1,25})?\s*,?\s*(?:and|then|or|and then|to)?\s*$`)
	// srAside is a bracketed aside between two numbers of one list:
	// "4.1 µM (J-12) and 4.5 µM (J-14)".
	srAside = regexp.MustCompile(`\s*\([^()]{0,20}\)\s*`)
	srQUnit = regexp.MustCompile(`(?i)\bin\s+([A-Za-zµμ°%][A-Za-zµμ°²³/.0-9]*)`)
)

// srEntityQ is a question that asks for an item, not a number.
var srEntityQ = regexp.MustCompile(`(?i)^\s*(?:\w+\s+){0,2}?(?:which|who)\b`)

var srCountWords = map[string]int{"two": 2, "both": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}

type srRun struct {
	nums    []wbNum
	unit    string
	sent    string
	part    int
	order   int
	spread  *big.Rat
	overlap int
}

// srMaxCands bounds the lists one question weighs, so hostile text stays
// cheap.
const srMaxCands = 256

func solveSeries(s *wbSession, part int, c *skill.Challenge) string {
	q := c.Question
	ql := strings.ToLower(q)
	mean, total := srMean.MatchString(q), srTotal.MatchString(q) && !srMean.MatchString(q)
	gap := srGap.MatchString(q)
	if srEntityQ.MatchString(q) {
		return fallback // an entity question, even one that speaks of a mean
	}
	if !mean && !total && !gap {
		return fallback
	}
	want := 0
	if m := srCount.FindStringSubmatch(q); m != nil {
		if n, ok := srCountWords[strings.ToLower(m[1])]; ok {
			want = n
		} else {
			want = atoiSmall(m[1])
		}
	}
	qunit := ""
	if m := srQUnit.FindStringSubmatch(q); m != nil {
		qunit = srNormUnit(m[1])
	}
	// The question's own number is one side of a gap ("exceed the 50
	// mg/L limit").
	qnums := wbNumbers(q)
	var runs []srRun
	for p := 0; p <= part && p < len(s.narratives); p++ {
		for _, r := range s.cached("series", p, func() any { return srRunsShared(s.narratives[p]) }).([]srRun) {
			r.part = p
			runs = append(runs, r)
		}
	}
	var cand []srRun
	for _, r := range runs {
		if want > 0 && len(r.nums) != want {
			continue
		}
		if want == 0 && len(r.nums) < 2 {
			continue
		}
		if qunit != "" && r.unit != "" && r.unit != qunit {
			continue
		}
		if srMonotone(r.nums) && len(r.nums) >= 4 {
			// Four or more readings that only fall or only rise: a
			// fading effect, not the persisting candidate (three are
			// often monotone by chance).
			continue
		}
		cand = append(cand, r)
	}
	if len(cand) == 0 {
		return fallback
	}
	if len(cand) > srMaxCands {
		cand = cand[:srMaxCands]
	}
	qw := srContentWords(ql)
	for i := range cand {
		cand[i].spread = srSpread(cand[i].nums)
		cand[i].overlap = srOverlap(cand[i].sent, qw)
	}
	sort.SliceStable(cand, func(a, b int) bool {
		// The current part first: a question asks about its own
		// narrative unless it says otherwise.
		if (cand[a].part == part) != (cand[b].part == part) {
			return cand[a].part == part
		}
		if c := cand[a].spread.Cmp(cand[b].spread); c != 0 {
			return c < 0
		}
		if cand[a].overlap != cand[b].overlap {
			return cand[a].overlap > cand[b].overlap
		}
		// Then the latest part, then the text's order.
		if cand[a].part != cand[b].part {
			return cand[a].part > cand[b].part
		}
		return cand[a].order < cand[b].order
	})
	best := cand[0]
	dec := 0
	sum := new(big.Rat)
	for _, n := range best.nums {
		sum.Add(sum, n.val)
		dec = max(dec, n.dec)
	}
	val := sum
	if mean || !total {
		val = new(big.Rat).Quo(sum, big.NewRat(int64(len(best.nums)), 1))
	}
	if gap && !total && len(qnums) == 1 {
		val = new(big.Rat).Sub(val, qnums[0].val)
		val.Abs(val)
	}
	return srFormat(val, dec)
}

// srRuns lists every run of numbers one sentence of text lists.
func srRuns(text string) []srRun {
	var out []srRun
	for _, sent := range wbSentences(text) {
		nums := wbNumbers(sent)
		var cur []wbNum
		flush := func() {
			if len(cur) >= 2 {
				unit := ""
				for _, n := range cur {
					if u := srUnitOf(sent, n); u != "" {
						unit = u
					}
				}
				out = append(out, srRun{nums: append([]wbNum(nil), cur...), unit: unit, sent: sent, order: len(out)})
			}
			cur = cur[:0]
		}
		for _, n := range nums {
			if n.dec == 0 && n.val.Cmp(big.NewRat(1900, 1)) >= 0 && n.val.Cmp(big.NewRat(2100, 1)) <= 0 {
				flush()
				continue // a year
			}
			if len(cur) > 0 {
				prev := cur[len(cur)-1]
				between := sent[prev.end:n.start]
				if u := srUnitOf(sent, prev); u != "" {
					between = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(between), u))
				}
				between = srAside.ReplaceAllString(between, " ")
				if !srGapText.MatchString(between) {
					flush()
				}
			}
			cur = append(cur, n)
		}
		flush()
	}
	return out
}

func srUnitOf(sent string, n wbNum) string {
	if m := srUnitAfter.FindStringSubmatch(sent[n.end:]); m != nil {
		u := strings.TrimRight(m[1], ".")
		if wbFunctionWords[strings.ToLower(u)] {
			return ""
		}
		return srNormUnit(u)
	}
	return ""
}

func srNormUnit(u string) string {
	u = strings.ToLower(strings.TrimRight(u, ".,"))
	u = strings.NewReplacer("µ", "u", "μ", "u").Replace(u)
	switch u {
	case "percent", "per":
		return "%"
	}
	return u
}

// srMonotone reports a run that only falls or only rises.
func srMonotone(ns []wbNum) bool {
	up, down := true, true
	for i := 1; i < len(ns); i++ {
		c := ns[i].val.Cmp(ns[i-1].val)
		if c <= 0 {
			up = false
		}
		if c >= 0 {
			down = false
		}
	}
	return up || down
}

// srSpread is a run's range relative to its mean magnitude.
func srSpread(ns []wbNum) *big.Rat {
	lo, hi, sum := ns[0].val, ns[0].val, new(big.Rat)
	for _, n := range ns {
		if n.val.Cmp(lo) < 0 {
			lo = n.val
		}
		if n.val.Cmp(hi) > 0 {
			hi = n.val
		}
		sum.Add(sum, new(big.Rat).Abs(n.val))
	}
	if sum.Sign() == 0 {
		return new(big.Rat)
	}
	r := new(big.Rat).Sub(hi, lo)
	r.Mul(r, big.NewRat(int64(len(ns)), 1))
	return r.Quo(r, sum)
}

func srContentWords(ql string) map[string]bool {
	out := map[string]bool{}
	for _, w := range wbLowerWords(ql) {
		if len(w) > 2 && !wbFunctionWords[w] {
			out[w] = true
		}
	}
	return out
}

func srOverlap(sent string, qw map[string]bool) int {
	n := 0
	for _, w := range wbLowerWords(sent) {
		if qw[w] {
			n++
		}
	}
	return n
}

// srFormat writes v exactly when it has at most dec+1 decimals, else
// rounded to the precision of the numbers it came from, at least one
// decimal (a mean of whole numbers is given to one decimal).
func srFormat(v *big.Rat, dec int) string {
	for d := 0; d <= dec+1; d++ {
		s := v.FloatString(d)
		if r, ok := new(big.Rat).SetString(s); ok && r.Cmp(v) == 0 {
			return s
		}
	}
	return v.FloatString(max(dec, 1))
}

func atoiSmall(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// Structure returns the attackers that exploit what the generation
// prompt forces a narrative and its questions to hold: Series, Scatter
// and Chain (the chained rounds).
func Structure() []Named { return []Named{Series(), Scatter(), Chain()} }

var srRunsMemo parseMemo[string, []srRun]

// srRunsShared is srRuns, memoized for narratives up to memoMaxText: the
// validator runs the series attacker, and the survivor runs it again, for
// every question and context of a set, each in a fresh session. The runs
// are only read (a caller's copy of a run sets its part).
func srRunsShared(text string) []srRun {
	if len(text) > memoMaxText {
		return srRuns(text)
	}
	return srRunsMemo.get(text, func() []srRun { return slices.Clip(srRuns(text)) })
}
