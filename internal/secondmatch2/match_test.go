// Package secondmatch2 is a second, independent implementation of the
// answer matcher of spec/verification.md (document 1.5.11 onwards), written
// from the text alone, and a differential test against skill.JudgeRule.
// Test-only: nothing here is used by the runtime.
package secondmatch2

import (
	"math/big"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Q is the part of a question the matcher reads.
type Q struct {
	Question    string
	Answer      string
	Answers     []string
	Distractors []string
}

func (q *Q) variants() []string {
	if len(q.Answers) > 0 {
		return q.Answers
	}
	return []string{q.Answer}
}

var folder = cases.Fold()

func isWS(r rune) bool { return unicode.Is(unicode.White_Space, r) }

func normS(s string) string {
	s = strings.TrimFunc(s, isWS)
	s = norm.NFC.String(s)
	return folder.String(s)
}

func isLMN(r rune) bool { return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsNumber(r) }

func isJoiner(r rune) bool {
	switch r {
	case '-', '.', ',', '/', '\'', '’', '_', ':':
		return true
	}
	return false
}

// rawWord is a maximal run as words reads it, with its byte span.
type rawWord struct {
	text       string
	start, end int
}

// runs splits s (not normalised) into raw words.
func runs(s string) []rawWord {
	type rp struct {
		r   rune
		off int
	}
	var rs []rp
	for i, r := range s {
		rs = append(rs, rp{r, i})
	}
	var out []rawWord
	i := 0
	for i < len(rs) {
		if !isLMN(rs[i].r) {
			i++
			continue
		}
		j := i + 1
		for j < len(rs) {
			if isLMN(rs[j].r) {
				j++
				continue
			}
			if isJoiner(rs[j].r) && j+1 < len(rs) && isLMN(rs[j+1].r) {
				j += 2
				continue
			}
			break
		}
		end := len(s)
		if j < len(rs) {
			end = rs[j].off
		}
		out = append(out, rawWord{s[rs[i].off:end], rs[i].off, end})
		i = j
	}
	return out
}

var (
	reNum   = regexp.MustCompile(`^(?:[0-9]+(?:\.[0-9]+)?|[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?)$`)
	reLead  = regexp.MustCompile(`^[1-9][0-9]{0,2}$`)
	reGroup = regexp.MustCompile(`^[0-9]{3}$`)
	reLast  = regexp.MustCompile(`^[0-9]{3}(?:\.[0-9]+)?$`)
	// 1.5.19 decimal comma: digits, one comma, 1, 2 or 4+ digits
	reDec = regexp.MustCompile(`^[0-9]+,(?:[0-9]{1,2}|[0-9]{4,})$`)
)

func isNumText(t string, answer bool) bool {
	return reNum.MatchString(t) || answer && reDec.MatchString(t)
}

func numOf(t string) *big.Rat {
	if reDec.MatchString(t) && !reNum.MatchString(t) {
		r, _ := new(big.Rat).SetString(strings.Replace(t, ",", ".", 1))
		return r
	}
	return numVal(t)
}

func onlySpaces(g string) bool {
	if g == "" {
		return false
	}
	for _, r := range g {
		if r != ' ' && r != '\u00a0' && r != '\u202f' {
			return false
		}
	}
	return true
}

func numVal(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(strings.ReplaceAll(s, ",", ""))
	if !ok {
		panic(s)
	}
	return r
}

// W is one word.
type W struct {
	text       string
	num        bool
	val        *big.Rat
	start, end int // span in the normalised text
	raw        int // index of the raw word it comes from
	neg        bool
	close      bool // stands close to the word before it (1.5.19 number phrases)
	rest       bool // read from the rest of a hyphenated number
}

func same(a, b W) bool {
	if a.num != b.num {
		return false
	}
	if a.num {
		return a.val.Cmp(b.val) == 0
	}
	return a.text == b.text
}

var spelled = func() map[string]int {
	m := map[string]int{}
	units := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"}
	for i, u := range units {
		m[u] = i
	}
	tens := []string{"twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"}
	for i, t := range tens {
		m[t] = 20 + 10*i
		for k := 1; k <= 9; k++ {
			m[t+"-"+units[k]] = 20 + 10*i + k
		}
	}
	return m
}()

// words reads s (normalising it first). answerReadings applies the
// spelled-out and hyphenated-number readings.
func words(s string, answerReadings bool) []W {
	n := normS(s)
	return wordsN(n, answerReadings)
}

func firstLetter(s string) int {
	for i, r := range s {
		if unicode.IsLetter(r) {
			return i
		}
	}
	return -1
}

func wordsN(n string, answerReadings bool) []W {
	rw := runs(n)
	var ws []W
	for ri, r := range rw {
		neg := false
		if r.start > 0 {
			p, sz := utf8.DecodeLastRuneInString(n[:r.start])
			if p == '-' || p == '−' {
				if r.start-sz == 0 {
					neg = true
				} else {
					pp, _ := utf8.DecodeLastRuneInString(n[:r.start-sz])
					if !isLMN(pp) {
						neg = true
					}
				}
			}
		}
		// 1.5.36: a leading point, "." that starts the text or follows
		// no L, M, N or ".", is the decimal point of digits alone after
		// it; a sign then stands before the point.
		lead := false
		if r.start > 0 && n[r.start-1] == '.' {
			if r.start == 1 {
				lead = true
			} else if p, sz := utf8.DecodeLastRuneInString(n[:r.start-1]); !isLMN(p) && p != '.' {
				lead = true
				neg = false
				if p == '-' || p == '−' {
					if r.start-1-sz == 0 {
						neg = true
					} else if pp, _ := utf8.DecodeLastRuneInString(n[:r.start-1-sz]); !isLMN(pp) {
						neg = true
					}
				}
			}
		}
		cl := ri > 0 && onlySpaces(n[rw[ri-1].end:r.start])
		mk := func(t string, st, en int) W {
			if lead && t != "" && strings.Trim(t, "0123456789") == "" {
				t = "0." + t
			}
			w := W{text: t, start: st, end: en, raw: ri, close: cl}
			if isNumText(t, answerReadings) {
				w.num = true
				w.val = numOf(t)
				if neg {
					w.val.Neg(w.val)
					w.neg = true
				}
			}
			return w
		}
		fl := firstLetter(r.text)
		if fl > 0 && isNumText(r.text[:fl], answerReadings) {
			ws = append(ws, mk(r.text[:fl], r.start, r.start+fl))
			ws = append(ws, W{text: r.text[fl:], start: r.start + fl, end: r.end, raw: ri, close: true})
			continue
		}
		ws = append(ws, mk(r.text, r.start, r.end))
	}
	// digit groups
	var out []W
	for i := 0; i < len(ws); i++ {
		w := ws[i]
		if w.num && reLead.MatchString(w.text) {
			j := i
			txt := w.text
			for j+1 < len(ws) {
				nx := ws[j+1]
				gap := n[ws[j].end:nx.start]
				if !(gap == " " || gap == "\u00a0" || gap == "\u202f") || !nx.num || nx.neg {
					break
				}
				if reGroup.MatchString(nx.text) {
					txt += nx.text
					j++
					continue
				}
				if reLast.MatchString(nx.text) {
					txt += nx.text
					j++
				}
				break
			}
			if j > i {
				m := W{text: txt, num: true, val: numVal(txt), start: w.start, end: ws[j].end, raw: w.raw, neg: w.neg, close: w.close}
				if w.neg {
					m.val.Neg(m.val)
				}
				out = append(out, m)
				i = j
				continue
			}
		}
		out = append(out, w)
	}
	if !answerReadings {
		return out
	}
	// The spelled-out reading (verification.md "Spelled-out numbers",
	// rewritten by helper-116 from document 1.5.28 alone): a ten and a
	// unit, each one of the 100 words as written (never a fold word's
	// number nor the rest of a hyphenated number, which are read later),
	// the unit close to the ten, are one number; a spelled number (one
	// word or such a pair), then "point", then one or more of zero..nine,
	// each close to the word before, is one decimal. Other words go
	// through the fold-word, spelled-out and hyphenated readings, word by
	// word (readRest).
	plain := func(k int) (int, bool) {
		if k >= len(out) || out[k].num || out[k].rest {
			return 0, false
		}
		v, ok := spelled[out[k].text]
		return v, ok
	}
	var out2 []W
	for i := 0; i < len(out); i++ {
		w := out[i]
		t, ok := plain(i)
		if !ok {
			out2 = append(out2, readRest(w)...)
			continue
		}
		j := i
		val := big.NewRat(int64(t), 1)
		if t >= 20 && t%10 == 0 && !strings.Contains(w.text, "-") {
			if u, ok := plain(i + 1); ok && out[i+1].close && u >= 1 && u <= 9 {
				val = big.NewRat(int64(t+u), 1)
				j = i + 1
			}
		}
		if j+2 < len(out) && !out[j+1].num && out[j+1].text == "point" && out[j+1].close {
			k := j + 2
			digits := ""
			for k < len(out) && out[k].close {
				d, ok := plain(k)
				if !ok || d > 9 {
					break
				}
				digits += string(rune('0' + d))
				k++
			}
			if digits != "" {
				frac, _ := new(big.Rat).SetString("0." + digits)
				val = new(big.Rat).Add(val, frac)
				j = k - 1
			}
		}
		if j == i {
			out2 = append(out2, readRest(w)...)
			continue
		}
		out2 = append(out2, W{text: n[w.start:out[j].end], num: true, val: val, start: w.start, end: out[j].end, raw: w.raw, close: w.close})
		i = j
	}
	return phrases(out2)
}

var scaleOf = map[string]int64{"k": 1000, "thousand": 1000, "million": 1000000, "mn": 1000000, "billion": 1000000000, "bn": 1000000000}

func wholeIn(w W, lo, hi int64) bool {
	return w.num && w.val.IsInt() && w.val.Num().IsInt64() && w.val.Num().Int64() >= lo && w.val.Num().Int64() <= hi
}

// phrases applies 1.5.19's number phrases: hundreds, then scale words.
func phrases(ws []W) []W {
	var h []W
	for i := 0; i < len(ws); i++ {
		w := ws[i]
		if wholeIn(w, 1, 99) && i+1 < len(ws) && !ws[i+1].num && ws[i+1].text == "hundred" && ws[i+1].close {
			v := new(big.Rat).Mul(w.val, big.NewRat(100, 1))
			j := i + 2
			if j < len(ws) && ws[j].close && wholeIn(ws[j], 1, 99) {
				v.Add(v, ws[j].val)
				j++
			} else if j+1 < len(ws) && !ws[j].num && ws[j].text == "and" && ws[j].close && ws[j+1].close && wholeIn(ws[j+1], 1, 99) {
				v.Add(v, ws[j+1].val)
				j += 2
			}
			h = append(h, W{text: v.RatString(), num: true, val: v, start: w.start, end: ws[j-1].end, raw: w.raw, close: w.close})
			i = j - 1
			continue
		}
		h = append(h, w)
	}
	// phrase at i: value and next index
	var at func(i int) (*big.Rat, int)
	at = func(i int) (*big.Rat, int) {
		w := h[i]
		if i+1 >= len(h) || h[i+1].num || !h[i+1].close {
			return w.val, i + 1
		}
		sc, ok := scaleOf[h[i+1].text]
		if !ok {
			return w.val, i + 1
		}
		v := new(big.Rat).Mul(w.val, big.NewRat(sc, 1))
		next := i + 2
		word := h[i+1].text == "thousand" || h[i+1].text == "million" || h[i+1].text == "billion"
		if word && w.val.IsInt() && w.val.Sign() > 0 {
			k := next
			if k < len(h) && !h[k].num && h[k].text == "and" && h[k].close {
				k++
			}
			if k < len(h) && h[k].close && wholeIn(h[k], 1, sc-1) {
				r, n2 := at(k)
				if r.IsInt() && r.Sign() > 0 && r.Cmp(big.NewRat(sc, 1)) < 0 {
					v.Add(v, r)
					next = n2
				}
			}
		}
		return v, next
	}
	var out []W
	for i := 0; i < len(h); i++ {
		if !h[i].num {
			out = append(out, h[i])
			continue
		}
		v, j := at(i)
		if j == i+1 {
			out = append(out, h[i])
			continue
		}
		out = append(out, W{text: v.RatString(), num: true, val: v, start: h[i].start, end: h[j-1].end, raw: h[i].raw, close: h[i].close})
		i = j - 1
	}
	return out
}

// readRest applies the spelled-out and hyphenated-number readings to one word.
func readRest(w W) []W {
	var out2 []W
	{
		if !w.num {
			// 1.5.19 fold words: a spelled-out number directly followed by "fold"
			if pre, ok := strings.CutSuffix(w.text, "fold"); ok {
				if v, ok := spelled[pre]; ok {
					return []W{{text: pre, num: true, val: big.NewRat(int64(v), 1), start: w.start, end: w.start + len(pre), raw: w.raw, close: w.close},
						{text: "fold", start: w.start + len(pre), end: w.end, raw: w.raw, close: w.close || !w.rest}}
				}
			}
			if v, ok := spelled[w.text]; ok {
				w.num = true
				w.val = big.NewRat(int64(v), 1)
				return append(out2, w)
			}
			// hyphenated number: longest number prefix before a '-'
			split := -1
			for k := len(w.text) - 1; k > 0; k-- {
				if w.text[k] != '-' {
					continue
				}
				pre, rest := w.text[:k], w.text[k+1:]
				r, _ := utf8.DecodeRuneInString(rest)
				if rest == "" || !unicode.IsLetter(r) {
					continue
				}
				if reNum.MatchString(pre) {
					split = k
					break
				}
				if _, ok := spelled[pre]; ok {
					split = k
					break
				}
			}
			if split > 0 {
				pre := w.text[:split]
				var v *big.Rat
				if reNum.MatchString(pre) {
					v = numVal(pre)
				} else {
					v = big.NewRat(int64(spelled[pre]), 1)
				}
				out2 = append(out2, W{text: pre, num: true, val: v, start: w.start, end: w.start + split, raw: w.raw, close: w.close, rest: w.rest})
				// the rest is read with the answer's readings again (1.5.13); never close (1.5.19)
				return append(out2, readRest(W{text: w.text[split+1:], start: w.start + split + 1, end: w.end, raw: w.raw, rest: true})...)
			}
		}
		out2 = append(out2, w)
	}
	return out2
}

func set(s string) map[string]bool {
	m := map[string]bool{}
	for _, f := range strings.Fields(s) {
		m[f] = true
	}
	return m
}

var (
	functionWords = set("a an the of at in on by from for to with via per its their this that which is was were are be as")
	pronouns      = set("it they them he him she her these those") // 1.5.27: allowed under every rule
	tailPronouns  = set("it they them he him she her these those")
	joiningWords  = set("and or nor not no none neither either both versus vs plus also but than except")
	hedges        = set("about approx approximately around circa roughly")
	quantityWords = set("all only exactly just nearly almost over under above below within beyond up total some least most")
)

func isFn(w W) bool   { return !w.num && functionWords[w.text] }
func isJoin(w W) bool { return !w.num && joiningWords[w.text] }

var unitRows = [][]string{
	{"%", "percent", "pct", "cent"},
	{"pp", "pts", "percentage", "point", "points"}, // 1.5.19; point, points 1.5.25
	{"€", "eur", "euro", "euros"},
	{"£", "gbp", "pound", "pounds", "sterling"},
	{"$", "usd", "dollar", "dollars"},
	{"×", "x", "times", "fold", "factor"},
	{"°", "c", "celsius", "degree", "degrees"},
	{"km", "kilometre", "kilometres", "kilometer", "kilometers"},
	{"m", "metre", "metres", "meter", "meters"},
	{"cm", "centimetre", "centimetres", "centimeter", "centimeters"},
	{"mm", "millimetre", "millimetres", "millimeter", "millimeters"},
	{"μm", "um", "micromolar", "micrometre", "micrometres", "micrometer", "micrometers"},
	{"s", "sec", "secs", "second", "seconds"},
	{"ms", "millisecond", "milliseconds"},
	{"min", "mins", "minute", "minutes"},
	{"h", "hr", "hrs", "hour", "hours"},
	{"kg", "kilogram", "kilograms"},
	{"g", "gram", "grams"},
	{"mg", "milligram", "milligrams"},
	{"μg", "ug", "microgram", "micrograms"},
	{"t", "tonne", "tonnes"},
	{"l", "litre", "litres", "liter", "liters"},
	{"ml", "millilitre", "millilitres", "milliliter", "milliliters"},
	{"ha", "hectare", "hectares"},
}

var unitSpelling = func() map[string]bool {
	m := map[string]bool{}
	for _, row := range unitRows {
		for _, s := range row {
			m[normS(s)] = true
		}
	}
	return m
}()

func hasDigit(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r >= '0' && r <= '9' }) >= 0
}
func hasUpper(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsUpper(r) || unicode.IsTitle(r) }) >= 0
}

// lowerWords: words of text that contain no ASCII digit and that the text
// spells with no upper-case or title-case letter.
func lowerWords(text string, into map[string]bool) {
	for _, r := range runs(text) {
		t := r.text
		fl := firstLetter(t)
		if fl > 0 && reNum.MatchString(t[:fl]) {
			t = t[fl:]
		}
		if hasDigit(t) || hasUpper(t) {
			continue
		}
		into[normS(t)] = true
	}
}

func occursAt(hay, needle []W, i int) bool {
	if i+len(needle) > len(hay) {
		return false
	}
	for k := range needle {
		if !same(hay[i+k], needle[k]) {
			return false
		}
	}
	return true
}

func occurs(hay, needle []W) bool {
	for i := 0; i+len(needle) <= len(hay); i++ {
		if occursAt(hay, needle, i) {
			return true
		}
	}
	return false
}

func allFn(ws []W) bool {
	for _, w := range ws {
		if !isFn(w) {
			return false
		}
	}
	return true
}

// ctx holds what the matcher derives from a question and its narratives.
type ctx struct {
	q           *Q
	narr        []string
	vars        [][]W // plain
	dists       [][]W // plain, non-ignored
	distsR      [][]W // with the answer's readings, non-ignored (nil when no target)
	allDistW    [][]W // plain, every distractor
	desc        map[string]bool
	capital     map[string]bool // M6: words a text writes with an upper-case or title-case letter
	qwords      map[string]bool
	target      *big.Rat
	hasTarget   bool
	usedUnits   map[string]bool
	candRaw     map[string]bool
	kctx        *ctx // the keyed question's context (1.5.34), lazily
	candInitial bool
	// candDot: "a|b" for consecutive raw words a, b of a candidate with
	// only a . and white space between them (1.5.24)
	candDot     map[string]bool
	upLabels    map[string]bool
	lowLabels   map[string]bool
	canonOneNum bool
	qWordsAll   []W
	nnorm       []string
	nwords      [][]W
}

func newCtx(q *Q, narr []string) *ctx {
	q = &Q{Question: dehyphen(q.Question), Answer: dehyphen(q.Answer), Answers: dehyphenAll(q.Answers), Distractors: dehyphenAll(q.Distractors)}
	narr = dehyphenAll(narr)
	c := &ctx{q: q, narr: narr}
	for _, n := range narr {
		nn := normS(n)
		c.nnorm = append(c.nnorm, nn)
		c.nwords = append(c.nwords, wordsN(nn, false))
	}
	for _, v := range q.variants() {
		c.vars = append(c.vars, words(v, false))
	}
	// target
	cw := words(q.Answer, false)
	qw := words(q.Question, false)
	c.qWordsAll = qw
	if len(cw) == 1 && cw[0].num {
		c.target, c.hasTarget = cw[0].val, true
		c.canonOneNum = true
	} else if len(cw) == 2 && !cw[0].num && !hasDigit(cw[0].text) && cw[1].num {
		for _, w := range qw {
			if same(w, cw[0]) {
				c.target, c.hasTarget = cw[1].val, true
			}
		}
	}
	for _, d := range q.Distractors {
		dw := words(d, false)
		if len(dw) == 0 || allFn(dw) {
			continue
		}
		c.dists = append(c.dists, dw)
		if c.hasTarget {
			c.distsR = append(c.distsR, words(d, true))
		}
	}
	for _, d := range q.Distractors {
		c.allDistW = append(c.allDistW, words(d, false))
	}
	c.desc = map[string]bool{}
	for _, n := range narr {
		lowerWords(n, c.desc)
	}
	lowerWords(q.Question, c.desc)
	c.capital = map[string]bool{}
	for _, t := range append(append([]string{}, narr...), q.Question) {
		for _, r := range runs(t) {
			x := r.text
			if fl := firstLetter(x); fl > 0 && reNum.MatchString(x[:fl]) {
				x = x[fl:]
			}
			if hasUpper(x) {
				c.capital[normS(x)] = true
			}
		}
	}
	c.qwords = map[string]bool{}
	named := false
	for _, v := range c.vars {
		if len(v) == 0 || allFn(v) {
			continue
		}
		if occurs(qw, v) {
			named = true
		}
	}
	if !named {
		lowerWords(q.Question, c.qwords)
		for w := range c.qwords {
			for _, suf := range []string{"'s", "’s"} {
				if strings.HasSuffix(w, suf) && len(w) > len(suf) {
					c.qwords[strings.TrimSuffix(w, suf)] = true
				}
			}
		}
	}
	// used unit rows
	c.usedUnits = map[string]bool{}
	texts := append([]string{q.Question}, q.variants()...)
	texts = append(texts, narr...)
	toks := map[string]bool{}
	var joined strings.Builder
	for _, t := range texts {
		nt := normS(t)
		joined.WriteString(nt)
		joined.WriteString(" ")
		for _, w := range wordsN(nt, false) {
			toks[w.text] = true
			for _, part := range strings.FieldsFunc(w.text, func(r rune) bool { return r == '/' || r == '-' }) {
				toks[part] = true
			}
		}
	}
	all := joined.String()
	for _, row := range unitRows {
		used := false
		for _, sp := range row {
			sp = normS(sp)
			r, _ := utf8.DecodeRuneInString(sp)
			if utf8.RuneCountInString(sp) == 1 && !unicode.IsLetter(r) && strings.Contains(all, sp) {
				used = true
			}
			if toks[sp] {
				used = true
			}
		}
		if used {
			for _, sp := range row {
				c.usedUnits[normS(sp)] = true
			}
		}
	}
	// 1.5.25: a text that uses the percent row uses the percentage-point
	// row too.
	if c.usedUnits["percent"] {
		for _, sp := range unitRows[1] {
			c.usedUnits[sp] = true
		}
	}
	// candidates' raw words and initials
	c.candRaw = map[string]bool{}
	cands := append(append([]string{}, q.variants()...), q.Distractors...)
	c.candDot = map[string]bool{}
	for _, cd := range cands {
		cr := runs(cd)
		for i := 0; i+1 < len(cr); i++ {
			gap := cd[cr[i].end:cr[i+1].start]
			if len(gap) >= 2 && gap[0] == '.' && strings.TrimFunc(gap[1:], isWS) == "" {
				c.candDot[normS(cr[i].text)+"|"+normS(cr[i+1].text)] = true
			}
		}
		for _, r := range cr {
			c.candRaw[normS(r.text)] = true
			if utf8.RuneCountInString(r.text) == 1 {
				ch, _ := utf8.DecodeRuneInString(r.text)
				if unicode.Is(unicode.Lu, ch) && strings.HasPrefix(cd[r.end:], ".") {
					c.candInitial = true
				}
			}
		}
	}
	// number labels
	c.upLabels = map[string]bool{}
	c.lowLabels = map[string]bool{}
	ltexts := append(append([]string{}, narr...), q.Question)
	for _, t := range ltexts {
		rw := runs(t)
		lowVals := map[string]map[string]bool{}
		for i := 0; i+1 < len(rw); i++ {
			gap := t[rw[i].end:rw[i+1].start]
			if gap == "" || strings.TrimFunc(gap, isWS) != "" {
				continue
			}
			nw := words(rw[i+1].text, false)
			if len(nw) == 0 || !nw[0].num {
				continue
			}
			lw := words(rw[i].text, false)
			if len(lw) != 1 || hasDigit(rw[i].text) {
				continue
			}
			f, _ := utf8.DecodeRuneInString(rw[i].text)
			if unicode.IsUpper(f) || unicode.IsTitle(f) {
				c.upLabels[lw[0].text] = true
			}
			if !hasUpper(rw[i].text) {
				if lowVals[lw[0].text] == nil {
					lowVals[lw[0].text] = map[string]bool{}
				}
				lowVals[lw[0].text][nw[0].val.RatString()] = true
			}
		}
		for l, vs := range lowVals {
			if len(vs) >= 2 {
				c.lowLabels[l] = true
			}
		}
	}
	return c
}

func (c *ctx) isVarWord(w W) bool {
	for _, v := range c.vars {
		for _, x := range v {
			if same(w, x) {
				return true
			}
		}
	}
	return false
}

func (c *ctx) isQWord(w W) bool { return !w.num && c.qwords[w.text] }

var dimension = set("deep long high tall wide thick")

var legal = set("ltd limited inc plc llc corp gmbh")

// inflected: w, less at most one ending, equals a question word less at
// most one ending, at least three characters (1.5.19).
func (c *ctx) inflected(w W) bool {
	if w.num || hasDigit(w.text) {
		return false
	}
	cut := func(t string) []string {
		out := []string{t}
		for _, e := range []string{"ing", "ed", "es", "s", "d"} {
			if strings.HasSuffix(t, e) {
				out = append(out, t[:len(t)-len(e)])
			}
		}
		return out
	}
	for q := range c.qwords {
		for _, a := range cut(w.text) {
			for _, b := range cut(q) {
				if a == b && utf8.RuneCountInString(a) >= 3 {
					return true
				}
			}
		}
	}
	return false
}

// allowed ("A word is allowed", 1.5.28): not a joining word, and a
// function word, a pronoun, a variant's word, a legal suffix, a question
// word or an inflection of one, or (desc) a description word.
func (c *ctx) allowed(w W, desc bool) bool {
	if isJoin(w) {
		return false
	}
	if isFn(w) || isPronoun(w) || c.isVarWord(w) || (!w.num && legal[w.text]) || c.isQWord(w) || c.inflected(w) {
		return true
	}
	return desc && !w.num && c.desc[w.text]
}

func isPronoun(w W) bool { return !w.num && pronouns[w.text] }
func (c *ctx) isDistWord(w W, dists [][]W) bool {
	for _, d := range dists {
		for _, x := range d {
			if same(w, x) {
				return true
			}
		}
	}
	return false
}

// possBase is w less a possessive 's or ’s (1.5.22): a non-number word
// with that ending and more; "1's" is the number 1.
func possBase(w W) (W, bool) {
	if w.num {
		return W{}, false
	}
	for _, e := range []string{"'s", "’s"} {
		if strings.HasSuffix(w.text, e) && len(w.text) > len(e) {
			b := W{text: w.text[:len(w.text)-len(e)]}
			if isNumText(b.text, false) {
				b.num, b.val = true, numOf(b.text)
			}
			return b, true
		}
	}
	return W{}, false
}

// distWordGuard is M2's word guard (and the tail guard's): w is a
// distractor's word, no function word, variant's word or question word;
// a possessive that is no variant's word is read less its ending too.
func (c *ctx) distWordGuard(w W, ds [][]W) bool {
	g := func(x W) bool { return !isFn(x) && c.isDistWord(x, ds) && !c.isVarWord(x) && !c.isQWord(x) }
	if g(w) {
		return true
	}
	if b, ok := possBase(w); ok && !isFn(w) && !c.isVarWord(w) {
		return g(b)
	}
	return false
}

// labelGuard reports whether the answer words break the number-label guard.
func (c *ctx) labelGuard(aw []W) bool {
	if !c.canonOneNum {
		return false
	}
	isLabelBase := func(w W) bool {
		return !w.num && !isFn(w) && !hedges[w.text] && !(unitSpelling[w.text] && w.text != "point" && w.text != "points") && !c.isVarWord(w)
	}
	firstNonFn := -1
	for i, w := range aw {
		if !isFn(w) {
			firstNonFn = i
			break
		}
	}
	for i := 1; i < len(aw); i++ {
		if !aw[i].num {
			continue
		}
		l := aw[i-1]
		if !isLabelBase(l) {
			continue
		}
		if c.upLabels[l.text] {
			return true
		}
		if i-1 == firstNonFn && !quantityWords[l.text] && c.lowLabels[l.text] {
			return true
		}
	}
	return false
}

// distOccurs: a non-ignored distractor occurs in aw outside [lo,hi) (any
// occurrence not entirely inside it).
func (c *ctx) distOccurs(aw []W, lo, hi int) bool {
	ds := append(append([][]W{}, c.dists...), c.distsR...)
	for _, x := range [][]W{aw, c.possReading(aw)} {
		for _, d := range ds {
			for i := 0; i+len(d) <= len(x); i++ {
				if occursAt(x, d, i) && !(i >= lo && i+len(d) <= hi) {
					return true
				}
			}
		}
	}
	return false
}

// possReading is aw with every possessive that is no variant's word read
// as its base (1.5.22, for the guards).
func (c *ctx) possReading(aw []W) []W {
	out := make([]W, len(aw))
	for i, w := range aw {
		out[i] = w
		if b, ok := possBase(w); ok && !c.isVarWord(w) {
			out[i] = b
		}
	}
	return out
}

// sepInfo returns the byte index of the first separator of text (as given)
// or -1, and whether it splits (a raw word on both sides).
func (c *ctx) firstSep(text string) int {
	type rp struct {
		r   rune
		off int
	}
	var rs []rp
	for i, r := range text {
		rs = append(rs, rp{r, i})
	}
	rw := runs(text)
	rawEndingAt := func(off int) (rawWord, bool) {
		for _, r := range rw {
			if r.end == off {
				return r, true
			}
		}
		return rawWord{}, false
	}
	// 1.5.19: ": " / ", " after an answer word (a raw word before it, no
	// function word, a candidate's raw word or holding a digit)
	answerWordBefore := func(off int) bool {
		for _, r := range rw {
			if r.end > off {
				break
			}
			t := normS(r.text)
			if !functionWords[t] && (c.candRaw[t] || hasDigit(t)) {
				return true
			}
		}
		return false
	}
	// 1.5.19: the raw word because or since, not first, white space before, no candidate's word
	wordSep := -1
	for k := 1; k < len(rw); k++ {
		t := normS(rw[k].text)
		if (t == "because" || t == "since") && !c.candRaw[t] {
			if p, _ := utf8.DecodeLastRuneInString(text[:rw[k].start]); isWS(p) {
				wordSep = rw[k].start
				break
			}
		}
	}
	first := func(off int) int {
		if wordSep >= 0 && wordSep < off {
			return wordSep
		}
		return off
	}
scan:
	for i, x := range rs {
		if wordSep >= 0 && x.off >= wordSep {
			return wordSep
		}
		prevWS := i > 0 && isWS(rs[i-1].r)
		nextWS := i+1 < len(rs) && isWS(rs[i+1].r)
		switch x.r {
		case '—', '(', ';', '\n', '\r', '→', '⇒':
			return x.off
		case '>':
			if i > 0 && (rs[i-1].r == '-' || rs[i-1].r == '=') {
				return first(rs[i-1].off)
			}
		case ':':
			if nextWS && answerWordBefore(x.off) {
				return x.off
			}
		case '–':
			if prevWS && nextWS {
				return x.off
			}
		case '-':
			if prevWS && nextWS {
				return x.off
			}
			if prevWS && i+2 < len(rs) && rs[i+1].r == '-' && isWS(rs[i+2].r) {
				return x.off
			}
		case '!', '?':
			if nextWS {
				return x.off
			}
		case '.':
			if !nextWS {
				continue
			}
			if r, ok := rawEndingAt(x.off); ok {
				t := r.text
				// 1.5.24: the two raw words around ". " are consecutive
				// in a candidate with only a . and white space between
				k := i + 1
				for k < len(rs) && isWS(rs[k].r) {
					k++
				}
				if k < len(rs) {
					for _, nr := range rw {
						if nr.start == rs[k].off && c.candDot[normS(t)+"|"+normS(nr.text)] {
							continue scan
						}
					}
				}
				if strings.Contains(t, ".") && strings.IndexFunc(t, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }) >= 0 && !c.candRaw[normS(t)] {
					continue
				}
				if hedges[normS(t)] {
					continue
				}
				if utf8.RuneCountInString(t) == 1 {
					ch, _ := utf8.DecodeRuneInString(t)
					if unicode.Is(unicode.Lu, ch) && c.candInitial {
						k := i + 1
						for k < len(rs) && isWS(rs[k].r) {
							k++
						}
						if k < len(rs) && unicode.Is(unicode.Lu, rs[k].r) {
							continue
						}
					}
				}
			}
			return x.off
		case ',':
			k := i + 1
			for k < len(rs) && isWS(rs[k].r) {
				k++
			}
			if k == i+1 {
				continue
			}
			if answerWordBefore(x.off) {
				// 1.5.19: only before a raw word with no upper-case letter and no digit
				for _, r := range rw {
					if r.start > x.off {
						if !hasUpper(r.text) && !hasDigit(r.text) {
							return x.off
						}
						break
					}
				}
			}
			rest := text[rs[k-1].off+utf8.RuneLen(rs[k-1].r):]
			for _, conn := range []string{"because", "since", "as", "according", "based", "given", "per", "which"} { // 1.5.16
				if len(rest) >= len(conn) && strings.EqualFold(rest[:len(conn)], conn) {
					after, _ := utf8.DecodeRuneInString(rest[len(conn):])
					if len(rest) == len(conn) || !isLMN(after) {
						return x.off
					}
				}
			}
		}
	}
	return wordSep
}

// splitAt returns the index of the first separator when it splits text
// (a raw word before and from it), else -1.
func (c *ctx) splitAt(text string) int {
	i := c.firstSep(text)
	if i < 0 {
		return -1
	}
	if len(runs(text[:i])) == 0 || len(runs(text[i:])) == 0 {
		return -1
	}
	return i
}

// limit is the number of the text's words before its first separator.
func (c *ctx) limit(text string, aw []W) int {
	i := c.splitAt(text)
	if i < 0 {
		return len(aw)
	}
	return len(words(text[:i], c.hasTarget))
}

func (c *ctx) m1(text string) bool {
	n := normS(text)
	for _, v := range c.q.variants() {
		if n == normS(v) {
			return true
		}
	}
	return false
}

func (c *ctx) compound(w W) bool {
	if w.num {
		return false
	}
	r, _ := utf8.DecodeRuneInString(w.text)
	if !unicode.IsLetter(r) || !strings.Contains(w.text, "/") || !hasDigit(w.text) {
		return false
	}
	for _, x := range c.qWordsAll {
		if same(x, w) {
			return true
		}
	}
	return false
}

func (c *ctx) m3(text string) bool {
	if !c.hasTarget {
		return false
	}
	aw := words(text, true)
	lim := c.limit(text, aw)
	n := -1
	for i, w := range aw {
		if w.num {
			if n >= 0 {
				return false
			}
			n = i
		}
	}
	if n < 0 || n >= lim || aw[n].val.Cmp(c.target) != 0 {
		return false
	}
	if c.distOccurs(aw, 0, 0) || c.labelGuard(aw) {
		return false
	}
	for i, w := range aw {
		if i == n {
			continue
		}
		if c.allowed(w, true) || (!w.num && c.usedUnits[w.text]) || c.compound(w) || w.text == "exactly" || w.text == "precisely" || w.text == "total" || dimension[w.text] { // 1.5.17 precision words, 1.5.19 dimension words
			continue
		}
		return false
	}
	return true
}

// narrativeRun: run occurs as consecutive words of a shown narrative with
// no clause mark between two of them (M5).
func (c *ctx) narrativeRun(run []W) bool {
	found := false
	for ni, nn := range c.nnorm {
		nw := c.nwords[ni]
		for i := 0; i+len(run) <= len(nw) && !found; i++ {
			if !occursAt(nw, run, i) {
				continue
			}
			ok := true
			for k := i; k+1 < i+len(run); k++ {
				if clauseMark(nn, nw[k], nw[k+1]) && !c.dotInCandidate(nn, nw[k], nw[k+1]) {
					ok = false
					break
				}
			}
			if ok {
				found = true
			}
		}
	}
	return found
}

// dotInCandidate (1.5.24): between a and b of the normalised narrative n
// stand only a . and white space, and the raw words ending at a and
// starting at b are consecutive raw words of a candidate with only a .
// and white space between them.
func (c *ctx) dotInCandidate(n string, a, b W) bool {
	between := n[a.end:b.start]
	if len(between) < 2 || between[0] != '.' || strings.TrimFunc(between[1:], isWS) != "" {
		return false
	}
	var before, after string
	for _, r := range runs(n) {
		if r.end == a.end {
			before = r.text
		}
		if r.start == b.start {
			after = r.text
		}
	}
	return before != "" && after != "" && c.candDot[before+"|"+after]
}

func clauseMark(n string, a, b W) bool {
	between := n[a.end:b.start]
	for i, r := range between {
		switch r {
		case ',', ';', ':', '(', ')', '[', ']', '|', '\n', '\r', '–', '—', '?', '!', '…':
			return true
		case '.':
			if i == len(between)-1 {
				continue
			}
			if i == 0 && strings.Contains(a.text, ".") && !hasDigit(a.text) {
				continue
			}
			return true
		}
	}
	return false
}

// The rules M4, M5 and M6 below were written again by helper-116 from
// verification.md 1.5.28 alone (M5's second window and M6 are 1.5.28's).

// answerWords reads a text judged in the answer's place: with the
// answer's readings when the question has an M3 target.
func (c *ctx) answerWords(text string) []W { return words(text, c.hasTarget) }

// m4 is "M4 containment" with M2 inside it: desc permits description
// words outside the occurrence.
func (c *ctx) m4(text string, desc bool) bool {
	return c.m4Occ(text, desc, 0, -1)
}

// m4Occ is M4 with the variant's occurrence among the answer's words lo
// to hi (hi < 0: anywhere), as M5's second window asks.
func (c *ctx) m4Occ(text string, desc bool, lo, hi int) bool {
	aw := c.answerWords(text)
	lim := c.limit(text, aw)
	if hi < 0 || hi > lim {
		hi = lim
	}
	if c.labelGuard(aw) {
		return false
	}
	ds := append(append([][]W{}, c.dists...), c.distsR...)
	for _, v := range c.vars {
		if len(v) == 0 || allFn(v) {
			continue
		}
		for i := lo; i+len(v) <= hi; i++ {
			if !occursAt(aw, v, i) {
				continue
			}
			if c.distOccurs(aw, i, i+len(v)) {
				continue
			}
			ok := true
			for k, w := range aw {
				if k >= i && k < i+len(v) {
					continue
				}
				if !c.allowed(w, desc) || c.distWordGuard(w, ds) {
					ok = false
					break
				}
			}
			if ok {
				return true
			}
		}
	}
	return false
}

// m5 is "M5 clause window": no non-ignored distractors; the answer less
// its end function words is a run of one shown narrative within one
// clause, and the whole answer meets M4 with description words; when the
// words left are no such run, once more without the end function words,
// pronouns and question words, the variant among the words left.
func (c *ctx) m5(text string) bool {
	if len(c.dists) > 0 {
		return false
	}
	aw := c.answerWords(text)
	lo, hi := trim(aw, isFn)
	if hi-lo >= 2 && c.narrativeRun(aw[lo:hi]) {
		return c.m4(text, true)
	}
	lo, hi = trim(aw, func(w W) bool { return isFn(w) || isPronoun(w) || c.isQWord(w) })
	if hi-lo >= 2 && c.narrativeRun(aw[lo:hi]) {
		return c.m4Occ(text, true, lo, hi)
	}
	return false
}

// trim returns the bounds of ws less its leading and trailing words that
// drop reports.
func trim(ws []W, drop func(W) bool) (int, int) {
	lo, hi := 0, len(ws)
	for lo < hi && drop(ws[lo]) {
		lo++
	}
	for hi > lo && drop(ws[hi-1]) {
		hi--
	}
	return lo, hi
}

// m6 is "M6 described code".
func (c *ctx) m6(text string) bool {
	if len(c.dists) > 0 || c.hasTarget {
		return false
	}
	aw := c.answerWords(text)
	lim := c.limit(text, aw)
	for _, v := range c.vars {
		if len(v) == 0 || allFn(v) || !holdsCode(v) {
			continue
		}
		for i := 0; i+len(v) <= lim; i++ {
			if !occursAt(aw, v, i) {
				continue
			}
			ok := true
			for k := i + len(v); k < len(aw) && ok; k++ {
				ok = c.allowed(aw[k], false)
			}
			for k := 0; k < i && ok; k++ {
				w := aw[k]
				if c.allowed(w, false) {
					continue
				}
				if !c.allowed(w, true) {
					ok = false
					break
				}
				att, bnd := c.attachedBound(w)
				ok = att && !bnd && !c.capital[w.text]
			}
			if ok {
				return true
			}
		}
	}
	return false
}

func holdsCode(v []W) bool {
	for _, w := range v {
		if hasDigit(w.text) {
			return true
		}
	}
	return false
}

// describedTexts are the texts M6 reads for attached and bound words: the
// shown narratives and the question's text, normalised, with their words.
func (c *ctx) describedTexts() ([]string, [][]W) {
	ns := append([]string{}, c.nnorm...)
	ws := append([][]W{}, c.nwords...)
	return append(ns, normS(c.q.Question)), append(ws, c.qWordsAll)
}

// attachedBound reports whether a text writes w in a sentence holding an
// occurrence of an accepted variant (attached), and whether one writes it
// before such an occurrence in one clause (bound).
func (c *ctx) attachedBound(w W) (attached, bound bool) {
	ns, wss := c.describedTexts()
	for t, n := range ns {
		nw := wss[t]
		type span struct{ s, e int }
		var occs []span
		for _, v := range c.vars {
			if len(v) == 0 || allFn(v) {
				continue
			}
			for i := 0; i+len(v) <= len(nw); i++ {
				if occursAt(nw, v, i) {
					occs = append(occs, span{i, i + len(v)})
				}
			}
		}
		for k, x := range nw {
			if !same(x, w) {
				continue
			}
			for _, o := range occs {
				if k >= o.s && k < o.e {
					continue
				}
				a, b := k, o.s // gaps a..b-1 (word before the occurrence)
				if k >= o.e {
					a, b = o.e-1, k
				}
				sent, clause := false, false
				for g := a; g < b; g++ {
					dot := c.dotInCandidate(n, nw[g], nw[g+1])
					if !dot && sentenceEnd(n, nw[g], nw[g+1]) {
						sent = true
					}
					if !dot && clauseMark(n, nw[g], nw[g+1]) {
						clause = true
					}
				}
				if !sent {
					attached = true
				}
				if k < o.s && !clause {
					bound = true
				}
			}
		}
	}
	return attached, bound
}

// sentenceEnd: between a and b of the normalised text n stands a line
// break (LF, CR) or a sentence end as M5 reads one (? ! … or a . that is
// not the last character there and not the first after a word holding a
// . and no ASCII digit).
func sentenceEnd(n string, a, b W) bool {
	between := n[a.end:b.start]
	for i, r := range between {
		switch r {
		case '\n', '\r', '?', '!', '…':
			return true
		case '.':
			if i == len(between)-1 {
				continue
			}
			if i == 0 && strings.Contains(a.text, ".") && !hasDigit(a.text) {
				continue
			}
			return true
		}
	}
	return false
}

func (c *ctx) steps(text string) (bool, string) {
	if c.m1(text) {
		return true, "M1"
	}
	if c.m3(text) {
		return true, "M3"
	}
	if c.m4(text, len(c.dists) > 0) {
		return true, "M4"
	}
	if c.m5(text) {
		return true, "M5"
	}
	if c.m6(text) {
		return true, "M6"
	}
	return false, "none"
}

// 1.5.19: the lead-in's parts. A final ":" means the frame's last raw
// word must be directly followed by ':'.
var frames = [][]string{
	{"the", "final", "answer", "is"}, {"the", "final", "answer"}, {"the", "answer", "is"}, {"the", "answer"},
	{"final", "answer", "is"}, {"final", "answer"}, {"answer", "is"}, {"answer"},
	{"my", "final", "answer", "is"}, {"my", "final", "answer"}, {"my", "answer", "is"}, {"my", "answer"},
	{"the", "result", "is"}, {"the", "result", ":"}, {"result", "is"}, {"result", ":"},
	{"the", "value", "is"}, {"value", "is"}, {"the", "figure", "is"}, {"figure", "is"},
	{"the", "amount", "is"}, {"amount", "is"}, {"the", "number", "is"}, {"number", "is"},
	{"the", "total", "is"}, {"total", "is"}, {"the", "count", "is"}, {"count", "is"},
	{"it", "is"}, {"it", "was"}, {"it's"}, {"it’s"},
	// 1.5.33
	{"the", "correct", "answer", "is"}, {"the", "correct", "answer"}, {"correct", "answer", "is"}, {"correct", "answer"},
	{"it", "should", "be"}, {"it", "would", "be"}, {"it", "must", "be"}, {"that", "would", "be"},
}

var (
	connectives = [][]string{{"so"}, {"thus"}, {"therefore"}, {"hence"}}
	opinions    = [][]string{{"i", "think"}, {"i", "believe"}, {"i'd", "say"}, {"i’d", "say"}, {"i", "would", "say"}, {"i'd", "go", "with"}, {"i’d", "go", "with"}, {"i", "would", "go", "with"}}
	likelihoods = [][]string{{"most", "likely"}, {"likely"}, {"probably"}, {"definitely"}, {"certainly"}, {"clearly"}}
	// 1.5.33: an attribution's openings and source nouns.
	sourceOpenings = [][]string{{"according", "to"}, {"based", "on"}, {"per"}, {"from"}}
	sourceNouns    = strings.Fields("narrative narratives text passage report reports document documents record records notes memo email thread log context information evidence data story")
	hedgeSeqs      = [][]string{{"about"}, {"approx"}, {"approximately"}, {"around"}, {"circa"}, {"roughly"}}
)
var tailFrames = [][]string{{"is", "the", "final", "answer"}, {"is", "the", "correct", "answer"}, {"is", "the", "answer"}, {"is", "my", "final", "answer"}, {"is", "my", "answer"}, {"is", "correct"}}

func (c *ctx) rest(text string) (string, bool) {
	rw := runs(text)
	nr := make([]string, len(rw))
	for i, r := range rw {
		nr[i] = normS(r.text)
	}
	li := 0 // raw words consumed by the lead-in
	// list mark: "1" first, only white space before, then "." or ")" and white space
	if !c.hasTarget && !c.candRaw["1"] && len(rw) >= 2 && rw[0].text == "1" && strings.TrimFunc(text[:rw[0].start], isWS) == "" {
		after := text[rw[0].end:]
		if len(after) >= 2 && (after[0] == '.' || after[0] == ')') {
			if r, _ := utf8.DecodeRuneInString(after[1:]); isWS(r) {
				li = 1
			}
		}
	}
	part := func(list [][]string) {
		for _, f := range list {
			colon := f[len(f)-1] == ":"
			g := f
			if colon {
				g = f[:len(f)-1]
			}
			if li+len(g) >= len(rw) || !eqs(nr[li:li+len(g)], g) {
				continue
			}
			if colon && !strings.HasPrefix(text[rw[li+len(g)-1].end:], ":") {
				continue
			}
			li += len(g)
			return
		}
	}
	part(connectives)
	// 1.5.33: an attribution ("According to the narrative,").
	for _, o := range sourceOpenings {
		if li+len(o) >= len(rw) || !eqs(nr[li:li+len(o)], o) {
			continue
		}
		i := li + len(o)
		if nr[i] == "the" || nr[i] == "this" || nr[i] == "these" {
			i++
		}
		for n := 1; n <= 2 && i+n < len(rw); n++ {
			ok := true
			for _, w := range nr[i : i+n] {
				ok = ok && slices.Contains(sourceNouns, w) && !c.candRaw[w]
			}
			if !ok {
				break
			}
			if after := text[rw[i+n-1].end:]; strings.HasPrefix(after, ",") || strings.HasPrefix(after, ":") {
				li = i + n
				break
			}
		}
		break
	}
	part(opinions)
	part(frames)
	part(likelihoods)
	if c.hasTarget {
		part(hedgeSeqs)
	}
	ti := len(rw)
	for _, f := range tailFrames {
		if len(rw)-len(f) > li && eqs(nr[len(rw)-len(f):], f) {
			ti = len(rw) - len(f)
			break
		}
	}
	if li == 0 && ti == len(rw) {
		return "", false
	}
	start, end := 0, len(text)
	if li > 0 {
		start = rw[li-1].end
	}
	if ti < len(rw) {
		end = rw[ti].start
	}
	return text[start:end], true
}

func eqs(a, b []string) bool {
	for i := range b {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (c *ctx) withLeadIn(text string) (bool, string) {
	if ok, r := c.steps(text); ok {
		return ok, r
	}
	if rest, ok := c.rest(text); ok {
		return c.steps(rest)
	}
	return false, "none"
}

func (c *ctx) tailOK(tail string) bool {
	readings := [][]W{words(tail, false)}
	if c.hasTarget {
		readings = append(readings, words(tail, true))
	}
	ds := append(append([][]W{}, c.dists...), c.distsR...)
	for _, tw := range readings {
		for _, d := range ds {
			if occurs(tw, d) || occurs(c.possReading(tw), d) {
				return false
			}
		}
		for _, w := range tw {
			// 1.5.14: a pronoun is no distractor word of a tail.
			if b, ok := possBase(w); !w.num && (tailPronouns[w.text] || ok && tailPronouns[b.text]) {
				continue
			}
			if c.distWordGuard(w, ds) {
				return false
			}
		}
	}
	for _, w := range readings[0] {
		if isFn(w) {
			continue
		}
		// 1.5.35: nor a hedging word.
		return !isJoin(w) && !(!w.num && strings.Contains(" maybe perhaps possibly alternatively ", " "+w.text+" "))
	}
	return true
}

// Judge decides an answer and names the rule.
func Judge(q *Q, answer string, narr []string) (bool, string) {
	if len(answer) > 64 {
		return false, "M0"
	}
	return newCtx(q, narr).judge(answer)
}

// dehyphen replaces U+2010 and U+2011 by "-" (1.5.15, "Hyphens": the
// first step after M0, in every text) and, at the same step, the
// subscript digits U+2080..U+2089 by the ASCII digits of their values
// (1.5.26); superscript digits stay.
func dehyphen(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\u2010' || r == '\u2011':
			return '-'
		case r >= '\u2080' && r <= '\u2089':
			return '0' + (r - '\u2080')
		}
		return r
	}, s)
}

func dehyphenAll(ss []string) []string {
	if ss == nil {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = dehyphen(s)
	}
	return out
}

// unwrapAnswer applies 1.5.19's wrappers.
func unwrapAnswer(a string) string {
	t := strings.TrimFunc(a, isWS)
	for _, p := range [][2]string{{"<answer>", "</answer>"}, {"$$\\boxed{", "}$$"}, {"$\\boxed{", "}$"}, {"\\boxed{", "}"}} {
		if len(t) < len(p[0])+len(p[1]) {
			continue
		}
		if strings.EqualFold(t[:len(p[0])], p[0]) && strings.EqualFold(t[len(t)-len(p[1]):], p[1]) {
			return t[len(p[0]) : len(t)-len(p[1])]
		}
	}
	return a
}

func (c *ctx) judge(answer string) (bool, string) {
	if len(answer) > 64 {
		return false, "M0"
	}
	answer = unwrapAnswer(dehyphen(answer))
	if ok, r := c.judgeOnce(answer); ok {
		return ok, r
	}
	// 1.5.22 possessives: judged again without the endings.
	if p, ok := c.dropPoss(answer); ok {
		return c.judgeOnce(p)
	}
	return false, "none"
}

// dropPoss removes 's / ’s from each raw word ending so (more than the
// ending) that is no candidate's raw word.
func (c *ctx) dropPoss(answer string) (string, bool) {
	out, last, did := "", 0, false
	for _, r := range runs(answer) {
		t := r.text
		cut := 0
		if strings.HasSuffix(t, "'s") || strings.HasSuffix(t, "'S") {
			cut = 2
		} else if strings.HasSuffix(t, "’s") || strings.HasSuffix(t, "’S") {
			cut = len("’s")
		}
		if cut == 0 || len(t) == cut || c.candRaw[normS(t)] {
			continue
		}
		out += answer[last : r.end-cut]
		last, did = r.end, true
	}
	return out + answer[last:], did
}

func (c *ctx) judgeOnce(answer string) (bool, string) {
	if ok, r := c.withLeadIn(answer); ok {
		return ok, r
	}
	i := c.splitAt(answer)
	if i < 0 {
		return false, "none"
	}
	if !c.tailOK(answer[i:]) || !c.keyedTailOK(answer[i:]) {
		return false, "none"
	}
	return c.withLeadIn(answer[:i])
}
