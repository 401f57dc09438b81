package attack

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// candKind is the shape of a candidate entity.
type candKind uint8

const (
	kindIdent candKind = iota // identifier-like token (PFK1, CVE-2024-3094, EUR/USD)
	kindName                  // capitalised multiword name (Lazarus Group)
	kindName1                 // single capitalised word or suffix-marked name (weak)
)

// mention is one occurrence of a candidate: tokens [tok, end).
type mention struct {
	tok, end int
}

// candidate is a possible entity answer.
type candidate struct {
	text   string
	key    string
	kind   candKind
	ments  []mention
	coded  int    // mentions right after a code noun ("lot AB-342")
	codeBy string // stem of the code noun seen first
	prelim int    // mentions in preliminary-conclusion sentences
	attr   int    // mentions used as a measured attribute ("an IC50 of 18.6")
	shape  string // character-class signature of identifiers ("A-9")
}

// number is a numeric value in the text.
type number struct {
	tok    int
	value  float64
	answer string // the string to answer with
	unit   unitClass
	weak   bool // a number word that is usually not a count, or a year
}

// label is a classification-like word or short phrase.
type label struct {
	text   string
	tok    int    // first token
	anchor string // stem of the label noun or verb it hangs on ("tier"), "" for quotes
	quoted bool
	before bool // stands before its label noun ("amber tier")
}

// doc is the analysis of one narrative, computed once per narrative per
// session and shared by every strategy.
type doc struct {
	text    string
	toks    []token
	sents   []sentence
	cands   []candidate
	tokCand []int32 // candidate whose mention covers each token, -1 if none
	nums    []number
	labels  []label
	df      map[string]int32 // stem -> number of sentences containing it
}

// analyse builds the analysis of a narrative.
func analyse(text string) *doc {
	toks, sents := tokenize(text)
	analyseTokens(toks, sents)
	d := &doc{text: text, toks: toks, sents: sents}
	d.tokCand = make([]int32, len(toks))
	for i := range d.tokCand {
		d.tokCand[i] = -1
	}
	d.df = make(map[string]int32, len(toks)/3)
	seen := make(map[string]int, 32)
	for si, s := range sents {
		for k := s.start; k < s.end; k++ {
			st := toks[k].st
			if st == "" || stopwords[toks[k].low] {
				continue
			}
			if last, ok := seen[st]; ok && last == si+1 {
				continue
			}
			seen[st] = si + 1
			d.df[st]++
		}
	}
	d.findCandidates()
	d.mergeAliases()
	d.findNumbers()
	d.findLabels()
	return d
}

// idf is the inverse sentence frequency of a stem (0 when absent).
func (d *doc) idf(st string) float64 {
	n := d.df[st]
	if n == 0 {
		return 0
	}
	return math.Log(1 + float64(len(d.sents))/float64(n))
}

func (d *doc) addMention(key, text string, kind candKind, tok, end int, idx map[string]int) {
	ci, ok := idx[key]
	if !ok {
		ci = len(d.cands)
		idx[key] = ci
		d.cands = append(d.cands, candidate{text: text, key: key, kind: kind})
	}
	c := &d.cands[ci]
	if kind < c.kind {
		c.kind = kind
	}
	c.ments = append(c.ments, mention{tok: tok, end: end})
	for k := tok; k < end; k++ {
		d.tokCand[k] = int32(ci)
	}
	if tok > 0 {
		p := &d.toks[tok-1]
		if codeNouns[p.low] || (p.low == "and" || p.low == ",") && tok > 1 && d.tokCand[tok-2] >= 0 && d.cands[d.tokCand[tok-2]].coded > 0 {
			c.coded++
			if c.codeBy == "" {
				c.codeBy = p.st
				if !codeNouns[p.low] {
					c.codeBy = d.cands[d.tokCand[tok-2]].codeBy
				}
			}
		}
	}
	if d.sents[d.toks[tok].sent].prelim {
		c.prelim++
	}
	// "IC50 of 18.6", "an IC50 = 3", "IC50 values near 2": the mention
	// names a quantity.
	for j := end; j < len(d.toks) && j <= end+3; j++ {
		t := &d.toks[j]
		if t.is(fNum) && !t.is(fNumWord) {
			c.attr++
			break
		}
		if !attrGlue[t.low] {
			break
		}
	}
}

// attrGlue may stand between a quantity's name and its value.
var attrGlue = toSet(`of was were = : at near around about reached stood value values is are fell rose to from ~ ≈ of`)

// findCandidates extracts entity candidates: identifier-like tokens,
// capitalised multiword names, and single capitalised or suffix-marked
// words.
func (d *doc) findCandidates() {
	idx := make(map[string]int, 16)
	toks := d.toks
	// Words seen in lower case are common nouns: a capitalised one opening
	// a name ("Compound ZN-3305", "Cluster Copper Mantis") is dropped.
	lowerSeen := map[string]bool{}
	for k := range toks {
		t := &toks[k]
		if t.is(fWord) && !t.is(fCap) && !t.is(fIdent) {
			lowerSeen[t.st] = true
		}
	}
	// Pass 1: identifiers and multiword names.
	for _, s := range d.sents {
		if s.header {
			continue
		}
		k := s.start
		for k < s.end {
			t := &toks[k]
			if !t.is(fWord) {
				k++
				continue
			}
			if end := d.nameSpan(k, s.end); end > k {
				if lowerSeen[toks[k].st] && !toks[k].is(fIdent) {
					k++ // the rest is a name or identifier on its own
					continue
				}
				text := d.text[toks[k].off : toks[end-1].off+len(toks[end-1].text)]
				d.addMention(lower(text), text, kindName, k, end, idx)
				k = end
				continue
			}
			if t.is(fIdent) && !notCandidate[t.low] && !unitLike(t.low) {
				d.addMention(t.low, t.text, kindIdent, k, k+1, idx)
			}
			k++
		}
	}
	// Aliases: the first word of a multiword name stands for the name.
	alias := map[string]int{}
	for ci := range d.cands {
		if d.cands[ci].kind == kindIdent {
			d.cands[ci].shape = shapeOf(d.cands[ci].text)
		}
	}
	for ci, c := range d.cands {
		if c.kind == kindName {
			if sp := strings.IndexByte(c.key, ' '); sp > 0 {
				if _, dup := alias[c.key[:sp]]; !dup {
					alias[c.key[:sp]] = ci
				} else {
					alias[c.key[:sp]] = -1
				}
			}
		}
	}
	// Pass 2: single capitalised words and lower-case technical names.
	for _, s := range d.sents {
		if s.header {
			continue
		}
		for k := s.start; k < s.end; k++ {
			t := &toks[k]
			if !t.is(fWord) || d.tokCand[k] >= 0 || t.is(fNum|fTime) || notCandidate[t.low] {
				continue
			}
			if ci, ok := alias[t.low]; ok && ci >= 0 {
				d.addMention(d.cands[ci].key, d.cands[ci].text, kindName, k, k+1, idx)
				continue
			}
			n := utf8.RuneCountInString(t.text)
			switch {
			case t.is(fCap) && !t.is(fSentStart) && !t.is(fAllCaps) && n >= 3 && !stopwords[t.low]:
				d.addMention(t.low, t.text, kindName1, k, k+1, idx)
			case !t.is(fCap) && n >= 6 && hasStrongSuffix(t.low):
				d.addMention(t.low, t.text, kindName1, k, k+1, idx)
			case t.is(fCap) && t.is(fSentStart) && n >= 3 && !stopwords[t.low]:
				// A sentence-initial capitalised word is a candidate only
				// if it is seen capitalised elsewhere too.
				if _, ok := idx[t.low]; ok {
					d.addMention(t.low, t.text, kindName1, k, k+1, idx)
				}
			}
		}
	}
}

// shapeOf returns the character-class signature of an identifier: runs of
// upper-case letters, lower-case letters and digits collapse to A, a and 9;
// joiners stay ("CVE-2024-3400" gives "A-9-9").
func shapeOf(s string) string {
	var b strings.Builder
	var last byte
	for _, r := range s {
		var c byte
		switch {
		case unicode.IsUpper(r):
			c = 'A'
		case unicode.IsLower(r):
			c = 'a'
		case unicode.IsDigit(r):
			c = '9'
		case r == '_' || r == '/':
			c = byte(r)
		default:
			c = '-'
		}
		if c != last {
			b.WriteByte(c)
			last = c
		}
	}
	return b.String()
}

func unitLike(low string) bool {
	_, ok := unitWords[low]
	return ok
}

func hasStrongSuffix(low string) bool {
	for _, s := range strongNameSuffixes {
		if strings.HasSuffix(low, s) {
			return true
		}
	}
	return false
}

var nameConnectors = toSet(`of de la du van von der del di and &`)

// functionWords never continue a multiword name.
var functionWords = toSet(`the a an this that these those in on at for of by with from after before during
while however finally additionally meanwhile subsequently moreover furthermore although though when where
which what who and or but if as section part appendix table figure note
january february march april may june july august september october november december
monday tuesday wednesday thursday friday saturday sunday`)

// nameSpan returns the end of a capitalised multiword name starting at k,
// or k when there is none: two or more capitalised words (connectors such
// as "of" allowed inside), at least one of them an ordinary title-case
// word. A "<Type> <identifier>" pair ("Compound ZN-3305") is not a name:
// the identifier stands alone.
func (d *doc) nameSpan(k, end int) int {
	toks := d.toks
	capWord := func(t *token) bool {
		if !t.is(fWord) || t.is(fNum) || t.is(fTime) {
			return false
		}
		return t.is(fCap) || t.is(fIdent)
	}
	first := &toks[k]
	if !capWord(first) || notCandidate[first.low] || first.is(fAllCaps) && !first.is(fIdent) || first.is(fIdent) && !first.is(fCap) {
		return k
	}
	j := k + 1
	caps := 1
	last := k
	for j < end {
		t := &toks[j]
		if capWord(t) && !functionWords[t.low] {
			caps++
			last = j
			j++
			continue
		}
		if nameConnectors[t.low] && t.low != "and" && j+1 < end && capWord(&toks[j+1]) && !functionWords[toks[j+1].low] {
			j++
			continue
		}
		break
	}
	if caps < 2 {
		return k
	}
	title, idents := 0, 0
	for i := k; i <= last; i++ {
		t := &toks[i]
		switch {
		case t.is(fIdent):
			idents++
		case t.is(fCap) && !t.is(fAllCaps):
			title++
		}
	}
	if title == 0 || (title == 1 && idents >= 1 && toks[last].is(fIdent) && !toks[k].is(fIdent) && strings.ContainsAny(toks[last].text, "0123456789")) {
		return k
	}
	return last + 1
}

// mergeAliases unites candidates written as "A (B)" or "A (B, ...)",
// the usual way a text introduces a short code for a long name
// ("Campylobacter jejuni ST1936 (Cj-ST1936)"), so the evidence about
// either spelling counts for one entity. The merged candidate answers
// with its identifier spelling when it has one.
func (d *doc) mergeAliases() {
	if len(d.cands) < 2 {
		return
	}
	parent := make([]int, len(d.cands))
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	merged := false
	for _, c := range d.cands {
		for _, m := range c.ments {
			k := m.end
			if k+1 >= len(d.toks) || d.toks[k].text != "(" {
				continue
			}
			b := d.tokCand[k+1]
			if b < 0 || d.toks[k+1].sent != d.toks[m.tok].sent {
				continue
			}
			a := d.tokCand[m.tok]
			ra, rb := find(int(a)), find(int(b))
			if ra != rb {
				parent[rb] = ra
				merged = true
			}
		}
	}
	if !merged {
		return
	}
	groups := map[int][]int{}
	var roots []int
	for i := range d.cands {
		r := find(i)
		if _, ok := groups[r]; !ok {
			roots = append(roots, r)
		}
		groups[r] = append(groups[r], i)
	}
	out := make([]candidate, 0, len(roots))
	remap := make([]int32, len(d.cands))
	for _, r := range roots {
		g := groups[r]
		best := g[0]
		for _, i := range g[1:] {
			if d.cands[i].kind < d.cands[best].kind || d.cands[i].kind == d.cands[best].kind && len(d.cands[i].text) < len(d.cands[best].text) {
				best = i
			}
		}
		c := d.cands[best]
		c.ments = nil
		c.coded, c.prelim, c.attr = 0, 0, 0
		for _, i := range g {
			o := &d.cands[i]
			c.ments = append(c.ments, o.ments...)
			c.coded += o.coded
			c.prelim += o.prelim
			c.attr += o.attr
			if c.codeBy == "" {
				c.codeBy = o.codeBy
			}
			remap[i] = int32(len(out))
		}
		sort.Slice(c.ments, func(x, y int) bool { return c.ments[x].tok < c.ments[y].tok })
		out = append(out, c)
	}
	for k, ci := range d.tokCand {
		if ci >= 0 {
			d.tokCand[k] = remap[ci]
		}
	}
	d.cands = out
}

// findNumbers collects numeric values with their answer strings.
func (d *doc) findNumbers() {
	for k := range d.toks {
		t := &d.toks[k]
		if !t.is(fNum) || t.is(fHeader) {
			continue
		}
		n := number{tok: k, value: t.num, unit: t.unit, weak: t.is(fWeakNum | fYear)}
		if t.is(fNumWord) {
			n.answer = strconv.FormatFloat(t.num, 'f', -1, 64)
		} else {
			n.answer = numericSurface(t.text)
		}
		// "one of the", "a single": not counts.
		if t.is(fNumWord) && k+1 < len(d.toks) && d.toks[k+1].low == "of" {
			n.weak = true
		}
		d.nums = append(d.nums, n)
	}
}

// numericSurface strips a glued unit from a numeric token: "4.7-minute"
// gives "4.7", "15mg" gives "15".
func numericSurface(s string) string {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	for i < len(s) {
		c := s[i]
		if (c >= '0' && c <= '9') || c == ',' || (c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9') {
			i++
			continue
		}
		break
	}
	return s[:i]
}

// findLabels collects label-like words: short quoted spans, words next to
// a label noun ("tier amber", "amber tier") and words after a label verb
// ("classified as moderate").
func (d *doc) findLabels() {
	toks := d.toks
	seen := map[int]bool{}
	add := func(k int, anchor string, quoted bool) {
		if k < 0 || k >= len(toks) || seen[k] {
			return
		}
		t := &toks[k]
		if !labelWord(t) {
			return
		}
		seen[k] = true
		before := k+1 < len(toks) && toks[k+1].st == anchor && anchor != ""
		d.labels = append(d.labels, label{text: t.text, tok: k, anchor: anchor, quoted: quoted || t.is(fQuoted), before: before})
	}
	for k := 0; k < len(toks); k++ {
		t := &toks[k]
		if t.is(fQuoted) && (k == 0 || !toks[k-1].is(fQuoted)) {
			end := k
			for end < len(toks) && toks[end].is(fQuoted) {
				end++
			}
			if end-k == 1 {
				add(k, quoteAnchor(toks, k), true)
			} else if end-k <= 3 && allWords(toks[k:end]) {
				text := d.text[toks[k].off : toks[end-1].off+len(toks[end-1].text)]
				if utf8.RuneCountInString(text) <= 20 && !seen[k] {
					seen[k] = true
					d.labels = append(d.labels, label{text: text, tok: k, anchor: quoteAnchor(toks, k), quoted: true})
				}
			}
			continue
		}
		if !t.is(fWord) {
			continue
		}
		switch {
		case labelNouns[t.low]:
			// "tier amber", "tier: amber", "tier of amber", "amber tier".
			j := k + 1
			for j < len(toks) && j <= k+3 && (toks[j].text == ":" || toks[j].is(fQuote) || toks[j].low == "of" || toks[j].low == "level" || toks[j].low == "-") {
				j++
			}
			if j < len(toks) && toks[j].sent == t.sent {
				add(j, t.st, false)
			}
			if k > 0 && toks[k-1].sent == t.sent {
				add(k-1, t.st, false)
			}
		case labelVerbs[t.low]:
			j := k + 1
			for j < len(toks) && j <= k+4 && (toks[j].low == "as" || toks[j].low == "to" || toks[j].low == "a" || toks[j].low == "an" || toks[j].low == "the" || toks[j].low == "into" || toks[j].is(fQuote)) {
				j++
			}
			if j < len(toks) && toks[j].sent == t.sent {
				add(j, t.st, false)
			}
		}
	}
}

func quoteAnchor(toks []token, k int) string {
	for j := k - 1; j >= 0 && j >= k-4; j-- {
		if labelNouns[toks[j].low] || labelVerbs[toks[j].low] {
			return toks[j].st
		}
	}
	return ""
}

func allWords(ts []token) bool {
	for i := range ts {
		if !ts[i].is(fWord) {
			return false
		}
	}
	return true
}

// labelWord reports whether a token can be a label: a word that is not a
// stop word, a label noun itself, a number (other than a short level
// such as "3" or "II") or a long identifier.
func labelWord(t *token) bool {
	if !t.is(fWord) || stopwords[t.low] || labelNouns[t.low] || labelVerbs[t.low] && !t.is(fQuoted) {
		return false
	}
	n := utf8.RuneCountInString(t.text)
	if n > 20 {
		return false
	}
	if t.is(fNum) {
		return !t.is(fNumWord) && n <= 2
	}
	if t.is(fTime | fYear) {
		return false
	}
	if t.is(fIdent) && n > 4 {
		return false
	}
	return unicode.IsLetter(firstRune(t.text)) || n <= 3
}

func firstRune(s string) rune {
	r, _ := utf8.DecodeRuneInString(s)
	return r
}
