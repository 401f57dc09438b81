package attack

import (
	"math"
	"sort"
	"strconv"
)

// span is a token range [a, b) of a doc.
type span struct{ a, b int }

// entityView is a doc seen through one question: the candidate pool that
// fits the question's head noun, each candidate's affinity to it, and the
// clause-level segments that describe each candidate.
type entityView struct {
	d    *doc
	q    *question
	pool []int
	aff  []float64 // by candidate index
	segs map[int][]span
}

// affinity scores how well each candidate fits the question's head noun:
// mentions close to the head noun (or a generic stand-in such as "a second
// candidate") count fully, mentions in a paragraph that names the head noun
// partly; reference codes ("lot AB-342") are discounted unless the head
// noun asks for codes.
func (d *doc) affinity(q *question) []float64 {
	heads := q.headSet()
	aff := make([]float64, len(d.cands))
	if len(heads) == 0 {
		for i := range aff {
			aff[i] = kindPrior(d.cands[i].kind)
		}
		return aff
	}
	paraHead := map[int]bool{}
	for _, s := range d.sents {
		for k := s.start; k < s.end; k++ {
			if heads[d.toks[k].st] {
				paraHead[s.para] = true
				break
			}
		}
	}
	for ci := range d.cands {
		c := &d.cands[ci]
		var a float64
		for _, m := range c.ments {
			s := d.sents[d.toks[m.tok].sent]
			best := 0.0
			for k := max(s.start, m.tok-8); k < min(s.end, m.end+8); k++ {
				t := &d.toks[k]
				if heads[t.st] {
					best = 1
					break
				}
				if headProxies[t.low] && best < 0.5 {
					best = 0.5
				}
			}
			if best == 0 && (paraHead[s.para] || paraHead[s.para-1]) {
				best = 0.3
			}
			a = math.Max(a, best)
		}
		aff[ci] = a
	}
	// Identifiers of the same shape as a fitting one fit too (a list of
	// CVE ids where only the first paragraph says "vulnerabilities").
	shapeAff := map[string]float64{}
	for ci := range d.cands {
		if c := &d.cands[ci]; c.shape != "" && c.coded == 0 {
			shapeAff[c.shape] = math.Max(shapeAff[c.shape], aff[ci])
		}
	}
	for ci := range d.cands {
		c := &d.cands[ci]
		if c.shape != "" {
			aff[ci] = math.Max(aff[ci], 0.6*shapeAff[c.shape])
		}
		if c.coded > 0 {
			if heads[c.codeBy] {
				aff[ci] += 2
			} else if c.coded*2 >= len(c.ments) {
				aff[ci] *= 0.2
			}
		}
		if c.attr*2 >= len(c.ments) && !heads[stem(c.key)] {
			aff[ci] *= 0.2
		}
		// A quoted identifier is a label ("B3"), not an entity.
		quoted := 0
		for _, m := range c.ments {
			if d.toks[m.tok].is(fQuoted) {
				quoted++
			}
		}
		if quoted*2 >= len(c.ments) {
			aff[ci] *= 0.2
		}
		aff[ci] *= kindPrior(c.kind)
	}
	return aff
}

func kindPrior(k candKind) float64 {
	if k == kindName1 {
		return 0.6
	}
	return 1
}

// view builds the entity view of d for q.
func (d *doc) view(q *question) *entityView {
	v := &entityView{d: d, q: q, aff: d.affinity(q)}
	best := 0.0
	for _, a := range v.aff {
		best = math.Max(best, a)
	}
	thr := math.Max(0.2, 0.25*best)
	for ci := range d.cands {
		if best == 0 || v.aff[ci] >= thr {
			v.pool = append(v.pool, ci)
		}
	}
	v.segs = d.segments(v.pool)
	return v
}

// segments assigns each pool candidate the clauses that describe it: from
// its mention to the next mention of another pool candidate in the same
// sentence, and up to two following sentences of the paragraph that name no
// pool candidate (they usually continue its description).
func (d *doc) segments(pool []int) map[int][]span {
	in := make(map[int32]bool, len(pool))
	for _, c := range pool {
		in[int32(c)] = true
	}
	segs := make(map[int][]span, len(pool))
	owner, ownerPara, carried := -1, -1, 0
	for _, s := range d.sents {
		if s.para != ownerPara {
			owner = -1
		}
		var ms []int
		other := false
		for k := s.start; k < s.end; k++ {
			if c := d.tokCand[k]; c >= 0 && (k == 0 || d.tokCand[k-1] != c) {
				if in[c] {
					ms = append(ms, k)
				} else {
					other = true
				}
			}
		}
		if len(ms) == 0 {
			if owner >= 0 && carried < 2 && !s.header && !other {
				segs[owner] = append(segs[owner], span{s.start, s.end})
				carried++
			}
			continue
		}
		for i, k := range ms {
			a, b := k, s.end
			if i == 0 {
				a = s.start
			}
			if i+1 < len(ms) {
				b = ms[i+1]
			}
			c := int(d.tokCand[k])
			segs[c] = append(segs[c], span{a, b})
		}
		owner = int(d.tokCand[ms[len(ms)-1]])
		ownerPara = s.para
		carried = 0
	}
	return segs
}

// keyWeights weighs the question's keywords by their rarity in the doc:
// head-noun words count little (every candidate is near one), words of a
// contrast clause count against. extra adds weighted stems (a stateful
// attacker's memory of earlier rounds).
func (d *doc) keyWeights(q *question, extra map[string]float64) map[string]float64 {
	w := make(map[string]float64, len(q.keys)+len(extra))
	for _, k := range q.keys {
		x := d.idf(k.st)
		if x == 0 {
			continue
		}
		switch {
		case k.contrast:
			x *= -0.7
		case k.head:
			x *= 0.3
		}
		if _, dup := w[k.st]; !dup {
			w[k.st] = x
		}
	}
	for st, x := range extra {
		if _, dup := w[st]; !dup {
			if i := d.idf(st); i > 0 {
				w[st] = x * i
			}
		}
	}
	return w
}

// evidence sums what a candidate's segments say: keyword overlap (each
// stem once), positive and negative cues, and how many of its mentions
// sit in preliminary-conclusion sentences.
type evidence struct {
	kw, pos, neg float64
	prelim       int
}

func (v *entityView) evidence(ci int, w map[string]float64) evidence {
	var e evidence
	d := v.d
	seen := map[string]bool{}
	for _, sp := range v.segs[ci] {
		prelim := d.sents[d.toks[sp.a].sent].prelim
		if prelim {
			e.prelim++
		}
		for k := sp.a; k < sp.b; k++ {
			t := &d.toks[k]
			if d.tokCand[k] == int32(ci) {
				continue
			}
			if x, ok := w[t.st]; ok && !seen[t.st] && !prelim {
				seen[t.st] = true
				e.kw += x
			}
			e.pos += float64(t.pos)
			e.neg += float64(t.neg)
		}
	}
	e.pos = math.Min(e.pos, 6)
	e.neg = math.Min(e.neg, 6)
	return e
}

// firstMention is the token index of a candidate's first mention.
func (d *doc) firstMention(ci int) int { return d.cands[ci].ments[0].tok }

// argmax returns the element of ids with the highest score, the earliest
// in the text on ties; -1 when ids is empty.
func argmax(ids []int, score func(int) float64, pos func(int) int) int {
	best, bestS, bestP := -1, math.Inf(-1), 0
	for _, id := range ids {
		s := score(id)
		p := pos(id)
		if s > bestS+1e-9 || (math.Abs(s-bestS) <= 1e-9 && p < bestP) {
			best, bestS, bestP = id, s, p
		}
	}
	return best
}

// --- numbers -----------------------------------------------------------

// numPool returns the indices of the doc's numbers that can be answers:
// not years (unless asked), not a weak number word.
func (d *doc) numPool(q *question) []int {
	var out []int
	for i, n := range d.nums {
		if n.weak && !(q.year && d.toks[n.tok].is(fYear)) {
			continue
		}
		out = append(out, i)
	}
	if len(out) == 0 {
		for i := range d.nums {
			out = append(out, i)
		}
	}
	return out
}

// proximity scores how close a token is to the question's keywords in its
// sentence (and, at half weight, the neighbouring sentences).
func (d *doc) proximity(k int, w map[string]float64) float64 {
	t := &d.toks[k]
	s := d.sents[t.sent]
	score := 0.0
	seen := map[string]float64{}
	for j := s.start; j < s.end; j++ {
		x, ok := w[d.toks[j].st]
		if !ok || j == k {
			continue
		}
		dist := math.Abs(float64(j - k))
		v := x / (1 + dist/4)
		if v > seen[d.toks[j].st] {
			seen[d.toks[j].st] = v
		}
	}
	for _, v := range seen {
		score += v
	}
	return score
}

// numScore scores a number for a numeric question (unit and counted-noun
// agreement, keyword proximity, decoy penalties).
func (d *doc) numScore(q *question, i int, w map[string]float64, polarity bool) float64 {
	n := d.nums[i]
	t := &d.toks[n.tok]
	s := 2 * d.proximity(n.tok, w)
	if q.unit != unitNone {
		switch {
		case n.unit == q.unit:
			s += 2
		case n.unit != unitNone && n.unit != unitCount:
			s -= 1.5
		}
	} else if len(q.count) == 0 && n.unit != unitNone && n.unit != unitCount {
		s -= 0.3
	}
	if len(q.count) > 0 {
		cs := map[string]bool{}
		for _, c := range q.count {
			cs[c] = true
		}
		for j := n.tok + 1; j < len(d.toks) && j <= n.tok+3 && d.toks[j].sent == t.sent; j++ {
			if cs[d.toks[j].st] {
				s += 3
				break
			}
			if preps[d.toks[j].low] || !d.toks[j].is(fWord) {
				break
			}
		}
		// "week 7", "day 3": the counted noun before the number.
		if n.tok > 0 && cs[d.toks[n.tok-1].st] {
			s += 3
		}
		if t.is(fNumWord) {
			s += 0.5
		}
	}
	if n.tok > 0 {
		p := &d.toks[n.tok-1]
		if codeNouns[p.low] || p.text == ":" || p.text == "#" {
			if w[p.st] > 0 {
				s += 3
			} else {
				s -= 2
			}
		}
	}
	if t.is(fYear) && !q.year {
		s -= 2
	}
	if n.weak {
		s -= 1
	}
	if polarity {
		sent := d.sents[t.sent]
		if sent.prelim {
			s -= 1
		}
		s += 0.2 * float64(q.polarity) * float64(sent.pos-sent.neg)
	}
	return s
}

// bestNumber answers a numeric question from d.
func (d *doc) bestNumber(q *question, w map[string]float64, full bool, about []span) (string, float64) {
	pool := d.numPool(q)
	if len(pool) == 0 {
		return "", math.Inf(-1)
	}
	score := func(i int) float64 {
		s := d.numScore(q, i, w, full)
		for _, sp := range about {
			if d.nums[i].tok >= sp.a && d.nums[i].tok < sp.b {
				s += 1.5
				break
			}
		}
		return s
	}
	pos := func(i int) int { return d.nums[i].tok }
	if full && (q.max || q.min) && !q.diff {
		// Superlative over the numbers that fit the question.
		top := topK(pool, score, 4)
		var fit []int
		s0 := score(top[0])
		for _, i := range top {
			if score(i) >= s0-1.5 && (q.unit == unitNone || d.nums[i].unit == d.nums[top[0]].unit) {
				fit = append(fit, i)
			}
		}
		if len(fit) >= 2 {
			sort.Slice(fit, func(a, b int) bool { return d.nums[fit[a]].value < d.nums[fit[b]].value })
			pick := fit[len(fit)-1]
			if q.min && !q.max {
				pick = fit[0]
			}
			return d.nums[pick].answer, s0
		}
	}
	if full && q.diff {
		top := topK(pool, score, 2)
		if len(top) == 2 {
			a, b := d.nums[top[0]], d.nums[top[1]]
			return formatNum(math.Abs(a.value - b.value)), score(top[0])
		}
	}
	best := argmax(pool, score, pos)
	return d.nums[best].answer, score(best)
}

func formatNum(v float64) string {
	return strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64)
}

func topK(ids []int, score func(int) float64, k int) []int {
	s := append([]int(nil), ids...)
	sort.SliceStable(s, func(a, b int) bool { return score(s[a]) > score(s[b]) })
	if len(s) > k {
		s = s[:k]
	}
	return s
}

// --- labels ------------------------------------------------------------

// labelPool returns the doc's label candidates for q: labels anchored on
// the question's label noun if any, else every label; plus, for "type of
// X" questions, the words right before each mention of X ("uncompetitive
// inhibition").
func (d *doc) labelPool(q *question) []label {
	var out, anchored []label
	for _, l := range d.labels {
		if q.labelHead != "" && l.anchor == q.labelHead {
			anchored = append(anchored, l)
		}
	}
	if q.labelHead != "" && !labelNouns[q.labelHead] {
		for k := 1; k < len(d.toks); k++ {
			if d.toks[k].st != q.labelHead {
				continue
			}
			if d.toks[k-1].sent == d.toks[k].sent && labelWord(&d.toks[k-1]) {
				anchored = append(anchored, label{text: d.toks[k-1].text, tok: k - 1, anchor: q.labelHead, before: true})
			}
			if k+1 < len(d.toks) && d.toks[k+1].sent == d.toks[k].sent && labelWord(&d.toks[k+1]) {
				anchored = append(anchored, label{text: d.toks[k+1].text, tok: k + 1, anchor: q.labelHead, quoted: d.toks[k+1].is(fQuoted)})
			}
		}
	}
	if len(anchored) > 0 {
		out = anchored
	} else {
		out = d.labels
	}
	return out
}

// clause returns the clause around token k: bounded by the sentence and
// by commas, semicolons and contrastive conjunctions.
func (d *doc) clause(k int) span {
	s := d.sents[d.toks[k].sent]
	a, b := k, k+1
	for a > s.start && !clauseBreak(&d.toks[a-1]) {
		a--
	}
	for b < s.end && !clauseBreak(&d.toks[b]) {
		b++
	}
	return span{a, b}
}

func clauseBreak(t *token) bool {
	switch t.low {
	case ";", "while", "whereas", "but", "however", "although", "whilst":
		return true
	}
	return false
}

// labelScore scores a label for a label question.
func (d *doc) labelScore(q *question, l label, w map[string]float64, ent string, full bool) float64 {
	s := 0.0
	if q.hasWord(lower(l.text)) {
		s -= 3 // an answer rarely repeats the question's own words
	}
	if q.labelHead != "" && l.anchor == q.labelHead {
		s += 3
	} else if l.anchor != "" {
		s += 1
	}
	if l.before && !l.quoted && !d.toks[l.tok].is(fCap|fIdent) {
		s -= 1 // "the gives severity": words before the noun are often not labels
	}
	if l.quoted {
		s += 1
	}
	if !full {
		return s
	}
	t := &d.toks[l.tok]
	sent := d.sents[t.sent]
	cl := d.clause(l.tok)
	seen := map[string]bool{}
	for k := sent.start; k < sent.end; k++ {
		x, ok := w[d.toks[k].st]
		if !ok || seen[d.toks[k].st] || k == l.tok {
			continue
		}
		seen[d.toks[k].st] = true
		if k >= cl.a && k < cl.b {
			s += x
		} else {
			s += 0.5 * x
		}
	}
	var pos, neg float64
	for k := cl.a; k < cl.b; k++ {
		pos += float64(d.toks[k].pos)
		neg += float64(d.toks[k].neg)
	}
	s += 0.5 * float64(q.polarity) * (pos - neg)
	if sent.prelim {
		s -= 2
	}
	// "after the latest revision": later statements win; "initially": earlier.
	if n := len(d.toks); n > 0 {
		rel := float64(l.tok) / float64(n)
		if q.last {
			s += rel
		} else if q.first {
			s += 1 - rel
		}
	}
	if ent != "" {
		for k := sent.start; k < sent.end; k++ {
			if c := d.tokCand[k]; c >= 0 && d.cands[c].key == ent {
				s += 2
				break
			}
		}
	}
	return s
}

// bestLabel answers a label question from d.
func (d *doc) bestLabel(q *question, w map[string]float64, ent string) (string, float64) {
	l, s, ok := d.bestLabelFull(q, w, ent)
	if !ok {
		return "", math.Inf(-1)
	}
	return l.text, s
}

func (d *doc) bestLabelFull(q *question, w map[string]float64, ent string) (label, float64, bool) {
	pool := d.labelPool(q)
	if len(pool) == 0 {
		return label{}, 0, false
	}
	ids := make([]int, len(pool))
	for i := range ids {
		ids[i] = i
	}
	score := func(i int) float64 { return d.labelScore(q, pool[i], w, ent, true) }
	best := argmax(ids, score, func(i int) int { return pool[i].tok })
	return pool[best], score(best), true
}
