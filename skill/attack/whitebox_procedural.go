package attack

import (
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The procedural inverter: it parses a narrative written by
// skill/procedural back into the generator's world model (candidates and
// their aliases, the four checks and their polarity, values, categories,
// recheck dates, the cause of the attributed candidate, the revised
// interim view, the tier rule, links to the previous part) and answers a
// question by the generator's own semantics (the standout passes all four
// checks, the outside-cause candidate fails only that one, later parts
// are scoped to the candidates tied to the previous standout).

// The four checks.
const (
	pcPersist = iota
	pcRepl
	pcIntrinsic
	pcWide
	pcN
)

type pEnt struct {
	codes      map[string]int  // code spellings and their counts
	tags       map[string]bool // lower-case codes seen as tags
	names      []string        // every alias, lower case
	descCode   string          // the code a "the <desc> <code>" mention pairs
	st         [pcN]int
	val        *big.Rat
	valText    string
	valDec     int
	cat        string
	recheck    int
	hasRecheck bool
	cause      string
	link       int
	mentions   int
}

type pRule struct {
	t1, t2     *big.Rat // t2 is the more severe threshold
	low        bool     // lower values are more severe
	tiers      [3]string
	intervals  [3]string
	hasTiers   bool
	hasInterva bool
}

type pWorld struct {
	ents      []*pEnt
	cand      []int // indices of candidates (entities with check facts)
	alias     []pAlias
	prelimDay int
	hasPrelim bool
	misled    int
	rule      *pRule
	truth     int
	attrib    int
	group     []int
	dec       int
	vocab     *pVocab
	tagKeys   map[string]bool
	// bars are the part's stated bars for persistence (percent retained)
	// and replication (positive runs), 0 when not stated.
	bars [pcN]int
	// rels are the relations "X fared as Y did" on one check.
	rels []pRel
}

// pRel says two candidates share their outcome on one check; the first
// is the one the sentence states it of (its re-check date is given).
type pRel struct {
	a, b, cr int
}

type pAlias struct {
	key string // lower case
	ent int
}

var (
	reTagCode = regexp.MustCompile(`\d`)
	wbCodeRe  = regexp.MustCompile(`[A-Za-z][\w]*[-*:/]?\d|\d[-*:/]?[A-Za-z]`)
)

// parseProcedural builds the world model of one part.
func parseProcedural(text string, v *pVocab, prev *pWorld) *pWorld {
	w := &pWorld{vocab: v, misled: -1, truth: -1, attrib: -1, tagKeys: map[string]bool{}}
	sents := wbSentences(text)
	prevKeys := map[string]bool{}
	if prev != nil {
		for _, a := range prev.alias {
			prevKeys[a.key] = true
		}
	}
	isLabel := func(low string) bool {
		return slices.Contains(v.cats, low) || slices.Contains(v.causes, low) || slices.Contains(v.tiers, low)
	}

	// 1. Aliases: union-find over lower-case alias keys.
	nctx := &wbNameCtx{names: v.names, low: strings.ToLower(text)}
	uf := newWbUF()
	codeSpell := map[string]map[string]int{} // key -> spelling -> count
	descOf := map[string]string{}            // code key -> desc key
	sentToks := make([][]wbTok, len(sents))
	isCode := make([][]bool, len(sents))
	for si, s := range sents {
		toks := wbCodeTokens(s)
		sentToks[si] = toks
		isCode[si] = make([]bool, len(toks))
		masked := wbNameSpans(strings.ToLower(s), v.names)
		for k, t := range toks {
			if !wbCodeLike(t.text) || isLabel(strings.ToLower(t.text)) || wbInSpans(masked, t.start, t.end) {
				continue
			}
			key := strings.ToLower(t.text)
			if prevKeys[key] {
				continue
			}
			isCode[si][k] = true
			uf.add(key)
			if codeSpell[key] == nil {
				codeSpell[key] = map[string]int{}
			}
			codeSpell[key][t.text]++
		}
	}
	// A code named three times or more is an entity's own code: no union
	// may put two of them in one cluster.
	uf.strong = map[string]bool{}
	for k, m := range codeSpell {
		if sumCounts(m) >= 3 {
			uf.strong[k] = true
		}
	}
	for si, s := range sents {
		toks := sentToks[si]
		for k := range toks {
			if !isCode[si][k] {
				continue
			}
			key := strings.ToLower(toks[k].text)
			// "the <desc> <code>"
			if d := wbDescBefore(s, toks, k); d != "" && !prevKeys[d] {
				uf.union(key, d)
				descOf[key] = d
			}
		}
		// Parenthesised appositions: "A (B, the desc; tagNoun TAG)".
		grps, tags := wbParenGroups(s, toks, nctx)
		for _, t := range tags {
			w.tagKeys[t] = true
		}
		for _, grp := range grps {
			var keys []string
			for _, e := range grp {
				if wbWeakAlias(e) {
					continue
				}
				if e != "" && !prevKeys[e] && !isLabel(e) {
					keys = append(keys, e)
				}
			}
			for i := 1; i < len(keys); i++ {
				uf.union(keys[0], keys[i])
			}
		}
	}
	// Known names seen in the text join the cluster of the code they
	// stand next to in "the <name> <code>" or "<name> (<code>": handled
	// above; names met alone become their own keys so mentions find them.
	for _, nm := range v.names {
		if !prevKeys[nm] && wbContainsWord(nctx.low, nm) {
			if _, ok := uf.parent[nm]; !ok {
				uf.add(nm)
			}
		}
	}
	// Tag sentences: one entity named, one stray code with a digit that
	// is seen at most twice.
	{
		tmp := w.buildEnts(uf, codeSpell, descOf)
		for _, s := range sents {
			low := strings.ToLower(s)
			if !wbCodeRe.MatchString(s) || wbHasCheckCue(low) {
				continue
			}
			cur, _ := tmp.mentions(low, prev)
			cur = wbUniq(cur)
			var stray []int
			for _, e := range cur {
				en := tmp.ents[e]
				if len(en.names) == 1 && len(en.codes) == 1 && sumCounts(en.codes) <= 2 && reTagCode.MatchString(en.names[0]) {
					stray = append(stray, e)
				}
			}
			if len(cur) == 2 && len(stray) == 1 {
				other := cur[0]
				if other == stray[0] {
					other = cur[1]
				}
				uf.union(tmp.ents[other].names[0], tmp.ents[stray[0]].names[0])
				w.tagKeys[tmp.ents[stray[0]].names[0]] = true
			}
		}
	}
	w.ents, w.alias = nil, nil
	// 2. Entities from clusters.
	bw := w.buildEnts(uf, codeSpell, descOf)
	w.ents, w.alias = bw.ents, bw.alias

	// 3. Facts, sentence by sentence.
	var ruleSent string
	revised := false
	checkSents := make([]int, len(w.ents))
	// Pass A: entities named in sentences with check cues are the
	// candidates; codes of other things ("week-24", a report number) are
	// ignored from here on.
	cueCount := make([]int, len(w.ents))
	lows := make([]string, len(sents))
	curs := make([][]int, len(sents))
	prevss := make([][]int, len(sents))
	hitss := make([][]pHit, len(sents))
	for i, s := range sents {
		lows[i] = strings.ToLower(s)
		hitss[i] = w.mentionHits(lows[i], prev)
		for _, h := range hitss[i] {
			if h.prev {
				prevss[i] = append(prevss[i], h.ent)
			} else {
				curs[i] = append(curs[i], h.ent)
			}
		}
		if wbHasCheckCue(lows[i]) {
			for _, e := range wbUniq(curs[i]) {
				cueCount[e]++
			}
		}
	}
	// The stated bars, wherever they sit: sentences naming no candidate.
	for si := range sents {
		if len(curs[si]) == 0 && !wbRuleCue(lows[si]) {
			w.parseBar(lows[si])
		}
	}
	for si, s := range sents {
		low := lows[si]
		// The interim view's date: the first date after its cue (a log
		// line's own timestamp comes before it).
		if !w.hasPrelim {
			if wbPrelimCue.MatchString(low) {
				off := 0
				if m := wbLogPrefix.FindStringIndex(s); m != nil {
					off = m[1]
				}
				for _, d := range wbDates(s) {
					if d.start >= off {
						w.prelimDay, w.hasPrelim = d.day, true
						break
					}
				}
			}
		}
		var cur []int
		for _, e := range curs[si] {
			if cueCount[e] >= 2 {
				cur = append(cur, e)
			}
		}
		prevs := prevss[si]
		for _, e := range cur {
			w.ents[e].mentions++
		}
		if len(cur) == 0 {
			if ruleSent == "" && wbRuleCue(low) {
				ruleSent = s
				// The intervals may follow in the next sentence.
				if si+1 < len(sents) && strings.Contains(lows[si+1], "days") && !wbRuleCue(lows[si+1]) {
					ruleSent += " " + sents[si+1]
				}
			}
			continue
		}

		uniq := wbUniq(cur)
		if len(uniq) == 0 {
			continue
		}
		// Links: a previous part's candidate is named right after the
		// current candidate it ties ("X, which was delivered through the
		// <ref>"): the nearest candidate mentioned before it.
		last := -1
		for _, h := range hitss[si] {
			switch {
			case !h.prev && cueCount[h.ent] >= 2:
				last = h.ent
			case h.prev && last >= 0:
				w.ents[last].link = h.ent
				last = -1
			}
		}
		if len(uniq) == 1 && len(prevs) > 0 && w.ents[uniq[0]].link < 0 {
			w.ents[uniq[0]].link = prevs[0]
		}
		// The revision names only the candidate the interim view favoured;
		// the interim view may name others too ("X rather than Y", "X and
		// Y ..., settled on the latter", "Although Y was also discussed").
		if wbReviseCue.MatchString(low) && !wbPrelimCue.MatchString(low) {
			if len(uniq) == 1 {
				w.misled, revised = uniq[0], true
			}
			continue
		}
		if wbPrelimCue.MatchString(low) {
			if !revised {
				// The candidate named first after the last cue ("set X
				// aside and singled out Y"; "favoured X rather than Y").
				m := uniq[0]
				locs := wbPrelimCue.FindAllStringIndex(low, -1)
				at := locs[len(locs)-1][0]
				for _, h := range hitss[si] {
					if !h.prev && cueCount[h.ent] >= 2 && h.pos >= at {
						m = h.ent
						break
					}
				}
				if len(uniq) > 1 && strings.Contains(low, "the latter") {
					m = uniq[len(uniq)-1]
				}
				w.misled = m
			}
			continue
		}
		if len(uniq) == 2 {
			if cr, ok := wbSameCheck(low, v); ok {
				a, b := uniq[0], uniq[1]
				if hs := hitss[si]; len(hs) > 0 && !hs[0].prev && hs[0].ent == b {
					a, b = b, a
				}
				w.rels = append(w.rels, pRel{a, b, cr})
				checkSents[a]++
				checkSents[b]++
				if cr == pcPersist {
					if ds := wbDates(s); len(ds) > 0 {
						w.ents[a].recheck, w.ents[a].hasRecheck = ds[len(ds)-1].day, true
					}
				}
			}
			continue
		}
		if len(uniq) != 1 {
			continue
		}
		e := w.ents[uniq[0]]
		// Checks, clause by clause.
		found := false
		for _, cl := range wbClauses(s) {
			cll := strings.ToLower(cl)
			res := wbClassifyClause(cll, v, w.bars)
			for cr := range pcN {
				if res[cr] != 0 {
					e.st[cr] += res[cr]
					found = true
				}
			}
			if res[pcPersist] != 0 {
				ds := wbDates(cl)
				if len(ds) == 0 {
					ds = wbDates(s)
				}
				if len(ds) > 0 {
					e.recheck, e.hasRecheck = ds[len(ds)-1].day, true
				}
			}
			if res[pcIntrinsic] < 0 && e.cause == "" {
				e.cause = wbCauseOf(cll, v)
			}
		}
		if found {
			checkSents[uniq[0]]++
		}
		// Value: a number with decimals, not a threshold.
		if e.val == nil {
			for _, n := range wbNumbers(s) {
				if n.dec == 0 || wbThresholdBefore(low, n.start) {
					continue
				}
				if strings.HasPrefix(low[n.end:], "%") && strings.HasPrefix(strings.TrimLeft(low[n.end+1:], " "), "of ") {
					continue
				}
				e.val, e.valText, e.valDec = n.val, n.text, n.dec
				break
			}
		}
		if e.cat == "" {
			e.cat = wbCatOf(s, low, v)
		}
	}
	// Relations copy the stated outcome (and an outside cause) across;
	// two rounds resolve a relation to a relation.
	for range 2 {
		for _, r := range w.rels {
			ea, eb := w.ents[r.a], w.ents[r.b]
			switch {
			case ea.st[r.cr] == 0 && eb.st[r.cr] != 0:
				ea.st[r.cr] = eb.st[r.cr]
				if r.cr == pcIntrinsic && ea.cause == "" {
					ea.cause = eb.cause
				}
			case eb.st[r.cr] == 0 && ea.st[r.cr] != 0:
				eb.st[r.cr] = ea.st[r.cr]
				if r.cr == pcIntrinsic && eb.cause == "" {
					eb.cause = ea.cause
				}
			}
		}
	}
	for i, e := range w.ents {
		if checkSents[i] > 0 && (abs(e.st[0])+abs(e.st[1])+abs(e.st[2])+abs(e.st[3]) >= 2) {
			w.cand = append(w.cand, i)
		}
	}
	if w.misled >= 0 && !slices.Contains(w.cand, w.misled) {
		w.misled = -1
	}
	decs := map[int]int{}
	for _, i := range w.cand {
		if w.ents[i].val != nil {
			decs[w.ents[i].valDec]++
		}
	}
	for d, n := range decs {
		if n > decs[w.dec] || (n == decs[w.dec] && d > w.dec) {
			w.dec = d
		}
	}
	if ruleSent != "" {
		w.rule = wbParseRule(ruleSent, v)
	}
	w.roles(prev)
	return w
}

// buildEnts turns the alias clusters into entities and the alias list,
// longest alias first.
func (w *pWorld) buildEnts(uf *wbUF, codeSpell map[string]map[string]int, descOf map[string]string) *pWorld {
	out := &pWorld{vocab: w.vocab, tagKeys: w.tagKeys}
	clusters := map[string][]string{}
	for k := range uf.parent {
		r := uf.find(k)
		clusters[r] = append(clusters[r], k)
	}
	roots := make([]string, 0, len(clusters))
	for r := range clusters {
		roots = append(roots, r)
	}
	slices.Sort(roots)
	for _, r := range roots {
		e := &pEnt{codes: map[string]int{}, link: -1, tags: map[string]bool{}}
		ks := clusters[r]
		slices.Sort(ks)
		for _, k := range ks {
			e.names = append(e.names, k)
			for sp, n := range codeSpell[k] {
				e.codes[sp] += n
			}
			if w.tagKeys[k] {
				e.tags[k] = true
			}
			if _, ok := descOf[k]; ok {
				for sp := range codeSpell[k] {
					if e.descCode == "" || sp < e.descCode {
						e.descCode = sp
					}
				}
			}
			out.alias = append(out.alias, pAlias{key: k, ent: len(out.ents)})
		}
		out.ents = append(out.ents, e)
	}
	slices.SortFunc(out.alias, func(a, b pAlias) int {
		if len(a.key) != len(b.key) {
			return len(b.key) - len(a.key)
		}
		return strings.Compare(a.key, b.key)
	})
	return out
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// mentions finds the current part's entities and the previous part's
// entities named in a lower-case sentence, longest alias first.
func (w *pWorld) mentions(low string, prev *pWorld) (cur, prevs []int) {
	for _, h := range w.mentionHits(low, prev) {
		if h.prev {
			prevs = append(prevs, h.ent)
		} else {
			cur = append(cur, h.ent)
		}
	}
	return cur, prevs
}

// pHit is one mention: its byte position, entity and part.
type pHit struct {
	pos, ent int
	prev     bool
}

// mentionHits finds the mentions of a lower-case sentence, in order.
func (w *pWorld) mentionHits(low string, prev *pWorld) []pHit {
	mask := []byte(low)
	type hit = pHit
	var hits []hit
	scan := func(as []pAlias, isPrev bool) {
		for _, a := range as {
			off := 0
			for {
				i := wbIndexWord(string(mask[off:]), a.key)
				if i < 0 {
					break
				}
				i += off
				hits = append(hits, hit{i, a.ent, isPrev})
				for j := i; j < i+len(a.key); j++ {
					mask[j] = 0
				}
				off = i + len(a.key)
				if off >= len(mask) {
					break
				}
			}
		}
	}
	// Longest aliases first across both parts.
	var all []pAlias
	var isPrev []bool
	all = append(all, w.alias...)
	for range w.alias {
		isPrev = append(isPrev, false)
	}
	if prev != nil {
		all = append(all, prev.alias...)
		for range prev.alias {
			isPrev = append(isPrev, true)
		}
	}
	idx := make([]int, len(all))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return len(all[b].key) - len(all[a].key) })
	for _, i := range idx {
		scan([]pAlias{all[i]}, isPrev[i])
	}
	slices.SortFunc(hits, func(a, b hit) int { return a.pos - b.pos })
	return hits
}

func wbUniq(xs []int) []int {
	var out []int
	for _, x := range xs {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// roles finds the standout (passes all four checks; from part 2 on,
// among the candidates tied to the previous standout) and the
// outside-cause candidate (fails only that check).
func (w *pWorld) roles(prev *pWorld) {
	scope := w.cand
	if prev != nil && prev.truth >= 0 {
		var g []int
		for _, i := range w.cand {
			if w.ents[i].link == prev.truth {
				g = append(g, i)
			}
		}
		if len(g) > 0 {
			scope = g
		}
	}
	w.group = scope
	score := func(i int, skipIntrinsic bool) int {
		s := 0
		for cr := range pcN {
			if skipIntrinsic && cr == pcIntrinsic {
				continue
			}
			switch x := w.ents[i].st[cr]; {
			case x > 0:
				s += 2
			case x < 0:
				s -= 3
			}
		}
		return s
	}
	best, bs := -1, -1<<30
	for _, i := range scope {
		if s := score(i, false); s > bs {
			best, bs = i, s
		}
	}
	w.truth = best
	best, bs = -1, -1<<30
	for _, i := range scope {
		if i == w.truth || w.ents[i].st[pcIntrinsic] >= 0 {
			continue
		}
		if s := score(i, true); s > bs {
			best, bs = i, s
		}
	}
	w.attrib = best
	if w.attrib < 0 {
		for _, i := range scope {
			if i != w.truth && w.ents[i].cause != "" {
				w.attrib = i
				break
			}
		}
	}
}

// wbCodeLike extends wbIsCode to lower-case codes with digits and hyphens
// ("mad-hr-731") and dotted numbers ("10.74.163.136").
func wbCodeLike(t string) bool {
	if wbIsCode(t) {
		return true
	}
	if wbIsDateTok(t) {
		return false
	}
	digits, letters, hy, dots := 0, 0, 0, 0
	for _, r := range t {
		switch {
		case r >= '0' && r <= '9':
			digits++
		case r == '-':
			hy++
		case r == '.':
			dots++
		case r >= 'a' && r <= 'z':
			letters++
		}
	}
	if digits > 0 && letters > 0 && hy > 0 {
		for _, seg := range strings.Split(t, "-") {
			if len(seg) > 3 && strings.IndexFunc(seg, func(r rune) bool { return r >= '0' && r <= '9' }) < 0 {
				return false
			}
		}
		return true
	}
	return dots >= 3 && letters == 0 && digits >= 4
}

// wbDescBefore returns the lower-case description in "the <desc> <code>"
// ending at toks[k], or "".
func wbDescBefore(s string, toks []wbTok, k int) string {
	for j := k - 1; j >= 0 && j >= k-6; j-- {
		// only single spaces between the words
		if gap := s[toks[j].end:toks[j+1].start]; gap != " " {
			return ""
		}
		low := strings.ToLower(toks[j].text)
		if low == "the" {
			if j == k-1 {
				return ""
			}
			return strings.ToLower(s[toks[j+1].start:toks[k-1].end])
		}
		if wbFunctionWords[low] || wbNumRe.MatchString(" "+low) && strings.IndexFunc(low, func(r rune) bool { return r < '0' || r > '9' }) < 0 {
			return ""
		}
	}
	return ""
}

// wbParenGroups returns, for each "X (a, b; c)" in s, the lower-case alias
// keys it equates: X (a code, or the words before the bracket) and each
// element (a code, a full name, "the <desc>" as <desc>, a tag's code). A
// group counts only when it holds a code.
func wbParenGroups(s string, toks []wbTok, ctx *wbNameCtx) (out [][]string, tags []string) {
	for i := 0; i < len(s); i++ {
		if s[i] != '(' {
			continue
		}
		j := strings.IndexByte(s[i:], ')')
		if j < 0 {
			break
		}
		inner := s[i+1 : i+j]
		var grp []string
		hasCode := false
		// left of the bracket
		k := -1
		for t := range toks {
			if toks[t].end <= i {
				k = t
			}
		}
		if k >= 0 && strings.TrimSpace(s[toks[k].end:i]) == "" {
			d := wbDescBefore(s, toks, k)
			joined := k > 0 && s[toks[k-1].end:toks[k].start] == " " && !wbFunctionWords[strings.ToLower(toks[k-1].text)]
			if wbCodeLike(toks[k].text) && (d != "" || !joined) {
				grp = append(grp, strings.ToLower(toks[k].text))
				hasCode = true
				if d != "" {
					grp = append(grp, d)
				}
			} else {
				grp = append(grp, wbNameBefore(s, toks, k, ctx)...)
			}
		}
		for _, el := range strings.FieldsFunc(inner, func(r rune) bool { return r == ',' || r == ';' }) {
			el = strings.TrimSpace(el)
			low := strings.ToLower(el)
			et := wbCodeTokens(el)
			switch {
			case len(et) == 0:
			case strings.HasPrefix(low, "the ") && len(et) >= 2:
				grp = append(grp, strings.TrimSpace(low[4:]))
			case len(et) == 1:
				grp = append(grp, low)
				hasCode = hasCode || wbCodeLike(et[0].text)
			case wbCodeLike(et[len(et)-1].text) && !wbHasUpperStart(et[0].text) && reTagCode.MatchString(et[len(et)-1].text):
				// "tagNoun TAG"
				grp = append(grp, strings.ToLower(et[len(et)-1].text))
				tags = append(tags, strings.ToLower(et[len(et)-1].text))
				hasCode = true
			case len(et) <= 4 && !wbNumRe.MatchString(" "+low):
				grp = append(grp, low)
			case len(et) <= 4:
				grp = append(grp, low)
			}
		}
		if hasCode && len(grp) >= 2 {
			out = append(out, grp)
		}
		i += j
	}
	return out, tags
}

func wbHasUpperStart(s string) bool {
	return s != "" && s[0] >= 'A' && s[0] <= 'Z'
}

// wbNameBefore returns the name directly before a bracket: of the words
// back to a function word or punctuation (at most five), the longest
// ending that is a known name, else the longest ending the text also uses
// on its own (not after the same word), else the words after a leading
// "the" when there are at most three, else the last word.
func wbNameBefore(s string, toks []wbTok, k int, ctx *wbNameCtx) []string {
	start := k
	the := false
	for j := k; j >= 0 && j > k-8; j-- {
		low := strings.ToLower(toks[j].text)
		if low == "the" {
			the = true
			break
		}
		if wbFunctionWords[low] {
			break
		}
		start = j
		if j > 0 && s[toks[j-1].end:toks[j].start] != " " {
			break
		}
	}
	if start > k {
		return nil
	}
	words := make([]string, 0, k-start+1)
	for j := start; j <= k; j++ {
		words = append(words, strings.ToLower(toks[j].text))
	}
	var out []string
	if ctx != nil {
		phrase := strings.Join(words, " ")
		for _, nm := range ctx.names {
			if wbContainsWord(phrase, nm) {
				out = append(out, nm)
			}
		}
		for i := 1; i < len(words); i++ {
			ph := strings.Join(words[i:], " ")
			if wbFunctionWords[words[i]] {
				continue
			}
			if slices.Contains(out, ph) || ctx.standalone(ph, words[i-1]) {
				if !slices.Contains(out, ph) {
					out = append(out, ph)
				}
				// "the <desc> <full> (" names the description too.
				if the && i <= 3 && !wbFunctionWords[words[0]] {
					if d := strings.Join(words[:i], " "); !slices.Contains(out, d) {
						out = append(out, d)
					}
				}
				break
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return []string{strings.Join(words, " ")}
}

// wbNameCtx is what name finding knows: the harvested names and the
// lower-case text.
type wbNameCtx struct {
	names []string
	low   string
}

// standalone reports whether phrase occurs in the text not preceded by
// the word before.
func (c *wbNameCtx) standalone(phrase, before string) bool {
	off := 0
	for off < len(c.low) {
		i := wbIndexWord(c.low[off:], phrase)
		if i < 0 {
			return false
		}
		i += off
		pre := strings.TrimRight(c.low[:i], " ")
		if !strings.HasSuffix(pre, before) {
			if len(pre) < len(c.low[:i]) {
				// the word before must be a function word
				ws := wbLowerWords(pre[max(0, len(pre)-24):])
				if len(ws) == 0 || wbFunctionWords[ws[len(ws)-1]] {
					return true
				}
			} else {
				return true // after punctuation or at the start
			}
		}
		off = i + len(phrase)
	}
	return false
}

// Check cues, as the generator's fact templates word them. Each entry is
// a pattern, the check and the polarity; the first entry that matches a
// clause for a check decides it. Specific patterns come first.
type wbCue struct {
	re  *regexp.Regexp
	cr  int
	pol int
}

func cue(p string, cr, pol int) wbCue { return wbCue{regexp.MustCompile(p), cr, pol} }

var wbCues = []wbCue{
	// persistence
	cue(`nothing about .{0,80}proved transient|was not transient|not transient`, pcPersist, 1),
	cue(`faded back|did not persist|no longer (?:show|display)|proved transient|receded before|drifted back into|nothing of the earlier|gone by|gone before|not consistent over time|corrected itself|had faded|did not last|had lapsed|wore off|died away|had cleared`, pcPersist, -1),
	cue(`still (?:present|showed|there|persisting|had|show|in place)|had not eased|through to the|persisting at|as consistent|remained in place|had not faded|had not receded|did not drift back|kept its|held steady|had not cleared|was sustained|persisted over`, pcPersist, 1),
	// replication
	cue(`none of the .{0,120}came back (?:without|clean)|not one of the .{0,120}failed to replicate|did not come back clean|not the product of a single run`, pcRepl, 1),
	cue(`in a single run|not reproducible|only the first of|none of which reproduced|not consistent with the original|appeared once|once but not|failed to replicate|came back clean in all|further .{0,60}came back clean|gave no consistent|did not replicate|could not be reproduced`, pcRepl, -1),
	cue(`returned the same .{0,60}(?:each time|across)|was reproducible|in every one of|replicated in each|replicated in every|consistent .{0,60}in all|came back the same way|replicated in all|reproduced (?:the|its) .{0,60} in (?:all|every)`, pcRepl, 1),
	// outside cause
	cue(`no external explanation|within specification|neither accounted for|without either accounting|found nothing that would produce|left nothing in its handling record|examined and found absent|offers an outside reason|nothing traced|had nothing traced|was not tied to|no check attributed|showed no sign of|came back clean|unexplained by the setup|no outside (?:cause|reason|factor)|not explained by`, pcIntrinsic, 1),
	cue(`traced to|rather than to the|accounted for the|attributed|since been explained by|explained by|linked the .{0,80} to|turned out to reflect|an outside factor|was down to|caused by`, pcIntrinsic, -1),
	// spread
	cue(`not only at .{0,60}but at|not limited to one|not confined to one|not confined to a single|at every|every participating|each of the|readings from all|consistently across|across all|at each participating|at all \w+ |every other`, pcWide, 1),
	cue(`confined to|only at|none of the other|but nowhere else|nowhere else|stayed local|only .{0,40}reported|outside .{0,40}none of`, pcWide, -1),
}

var (
	wbNOfM   = regexp.MustCompile(`\b(\d+|zero|none|one|two|three|four|five|six|seven|eight|nine|ten)\s+(?:out\s+)?of\s+(?:the\s+)?(\d+|one|two|three|four|five|six|seven|eight|nine|ten)\b`)
	wbOfKN   = regexp.MustCompile(`\bof (?:the )?(\d+|one|two|three|four|five|six|seven|eight|nine|ten) ([a-z][\w -]*?), (\d+|one|two|three|four|five|six|seven|eight|nine|ten) (?:reported|showed|carried|recorded)`)
	wbPctRe  = regexp.MustCompile(`\b(\d+)(?:%| percent)`)
	wbPctRef = regexp.MustCompile(`^\s*(?:of|on|from|below|under|against)?\s*(?:its|the)\s+(?:[\w-]+\s+){0,2}?(?:initial|starting|original|first|earlier|opening|baseline)|^\s+of (?:its|the) `)
	wbLossRe = regexp.MustCompile(`\b(?:shed|lost|losing|dropped|fell|fallen|declined|faded by|gave up|down|off|eroded|lower)\b[^,;]*$`)
)

// wbCueStems are the words check statements use; a sentence holding none
// states no check.
var wbCueStems = []string{"persist", "replicat", "reproduc", "every", "across", "confined", "only", "outside",
	"traced", "explain", "attribut", "fade", "transient", "clean", "specification", "nowhere", "absent", "still",
	"eased", "receded", "drift", "consistent", "gone", "no longer", "limited", "each", "all ", "single run",
	"once", "tied to", "reflect", "accounted", "linked", "artefact", "handling record", "sign of", " of ",
	"%", "kept", "remained", "cut-off", "returned", "local", "baseline", "lasted", "one-off", "external"}

func wbHasCheckCue(low string) bool {
	for _, st := range wbCueStems {
		if strings.Contains(low, st) {
			return true
		}
	}
	return false
}

func wbWordNum(s string) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	if n, ok := wbNumberWords[s]; ok {
		return n
	}
	return -1
}

// Bars and relations, as the generator's criterion and relation
// templates word them.
var (
	wbBarPersist = regexp.MustCompile(`(\d+)%`)
	wbBarRepl    = regexp.MustCompile(`(?:at least|in|fewer than) (\d+|two|three|four|five)\b|\b(\d+|two|three|four|five) or more`)
	wbBarCue     = regexp.MustCompile(`counts? as|treated as|fixed bar|judged against|only if|requires|agreed in advance`)
	wbSameRe     = regexp.MustCompile(`looked just as|in exactly the state|followed the course of|gone the way of|matched .{1,40} exactly|fared exactly as|came out the same way|told the same story|showed for .{1,60} as well|identical outcomes|applied equally to|gave the same result|reached the same conclusion|ended exactly as|exactly the same|matched those for|and nowhere else|identical .{1,30}coverage|were the ones that saw`)
)

// parseBar reads a stated bar from a sentence naming no candidate.
func (w *pWorld) parseBar(low string) {
	if !wbBarCue.MatchString(low) {
		return
	}
	if m := wbBarPersist.FindStringSubmatch(low); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil && n > 0 && n < 100 {
			w.bars[pcPersist] = n
		}
		return
	}
	if strings.Contains(low, "replicat") || strings.Contains(low, "reproduc") || strings.Contains(low, "one-off") {
		if m := wbBarRepl.FindStringSubmatch(low); m != nil {
			t := m[1]
			if t == "" {
				t = m[2]
			}
			if n := wbWordNum(t); n > 0 {
				w.bars[pcRepl] = n
			}
		}
	}
}

// wbSameCheck reports which check a relation sentence ties two
// candidates on.
func wbSameCheck(low string, v *pVocab) (int, bool) {
	if !wbSameRe.MatchString(low) {
		return 0, false
	}
	switch {
	case strings.Contains(low, "outside") || strings.Contains(low, "external") || strings.Contains(low, "explain"):
		return pcIntrinsic, true
	case strings.Contains(low, "showed up for") || strings.Contains(low, "coverage") || wbSiteClause(low, v):
		return pcWide, true
	case strings.Contains(low, "replicat") || wbRepClause(low, v):
		return pcRepl, true
	}
	return pcPersist, true
}

func wbSiteClause(cl string, v *pVocab) bool {
	for _, sn := range v.siteNouns {
		if wbContainsWord(cl, sn) || wbContainsWord(cl, sn+"s") || wbContainsWord(cl, strings.TrimSuffix(sn, "y")+"ies") {
			return true
		}
	}
	return false
}

// wbClassifyClause returns +1/-1/0 per check for one lower-case clause;
// bars are the part's stated bars (0 where none).
func wbClassifyClause(cl string, v *pVocab, bars [pcN]int) [pcN]int {
	var res [pcN]int
	siteClause := false
	for _, sn := range v.siteNouns {
		if wbContainsWord(cl, sn) || wbContainsWord(cl, sn+"s") || wbContainsWord(cl, strings.TrimSuffix(sn, "y")+"ies") {
			siteClause = true
		}
	}
	if !siteClause && len(v.siteNouns) == 0 && regexp.MustCompile(`\bsites?\b|centres?\b|labs?\b|offices?\b|plants?\b`).MatchString(cl) {
		siteClause = true
	}
	// Numeric forms: "n of m" and "pct% of".
	if m := wbOfKN.FindStringSubmatch(cl); m != nil {
		k, n := wbWordNum(m[1]), wbWordNum(m[3])
		if k > 0 && n >= 0 {
			pol := 1
			if n < k {
				pol = -1
			}
			if b := bars[pcRepl]; b > 0 && !siteClause {
				pol = barPol(n, b)
			}
			if siteClause {
				res[pcWide] = pol
			} else {
				res[pcRepl] = pol
			}
		}
	} else if m := wbNOfM.FindStringSubmatchIndex(cl); m != nil && !strings.Contains(cl, "only the first of") {
		n, k := wbWordNum(cl[m[2]:m[3]]), wbWordNum(cl[m[4]:m[5]])
		if pre := cl[:m[0]]; strings.HasSuffix(pre, "every ") || strings.HasSuffix(pre, "each ") {
			n = k // "every one of five"
		} else if strings.HasSuffix(pre, "not ") || strings.HasSuffix(pre, "none ") {
			n, k = -1, -1 // "not one of the four ...": the cues decide
		}
		if n >= 0 && k > 0 {
			// "0 of 3 came back without it", "absent at 0 of the 4":
			// the count is of failures.
			after := cl[m[1]:min(len(cl), m[1]+60)]
			if wbInverts(after, cl[max(0, m[0]-60):m[0]]) {
				n = k - n
			}
			pol := 1
			if n < k {
				pol = -1
			}
			if b := bars[pcRepl]; b > 0 && !siteClause {
				pol = barPol(n, b)
			}
			if siteClause {
				res[pcWide] = pol
			} else {
				res[pcRepl] = pol
			}
		}
	}
	for _, m := range wbPctRe.FindAllStringSubmatchIndex(cl, -1) {
		after := cl[m[1]:min(len(cl), m[1]+48)]
		if !wbPctRef.MatchString(after) {
			continue
		}
		n, err := strconv.Atoi(cl[m[2]:m[3]])
		if err != nil {
			continue
		}
		if wbLossRe.MatchString(cl[max(0, m[0]-30):m[0]]) {
			n = 100 - n // "had shed 31% of its starting signal", "was down 31%"
		}
		bar := 50
		if bars[pcPersist] > 0 {
			bar = bars[pcPersist]
		}
		res[pcPersist] = barPol(n, bar)
		break
	}
	for _, c := range wbCues {
		if res[c.cr] != 0 {
			continue
		}
		if c.re.MatchString(cl) {
			// Spread cues need the site noun where it is known, so "in
			// every one of the n cohorts" is not read as spread.
			if c.cr == pcWide && c.pol > 0 && len(v.siteNouns) > 0 && !siteClause {
				continue
			}
			if c.cr == pcRepl && siteClause && !strings.Contains(cl, "replic") && !strings.Contains(cl, "reprod") && !wbRepClause(cl, v) {
				continue
			}
			if c.cr == pcIntrinsic && c.pol > 0 && strings.Contains(cl, "came back clean") && wbRepClause(cl, v) {
				continue
			}
			res[c.cr] = c.pol
		}
	}
	return res
}

func wbRepClause(cl string, v *pVocab) bool {
	for _, r := range v.repNouns {
		if strings.Contains(cl, r) {
			return true
		}
	}
	return false
}

var wbCauseLead = regexp.MustCompile(`(?:traced to|explained by|attributed(?: on [^,]+?)? to|tied to|reflect|linked .{0,80}? to|showed that|down to|caused by)\s+(.+?)(?:,| rather than| accounted| an outside|\.|;|$)`)

// wbCauseOf names the outside cause in an attribution clause: the longest
// known cause label it holds, else the phrase after the attribution verb.
func wbCauseOf(cl string, v *pVocab) string {
	best := ""
	for _, c := range v.causes {
		if wbContainsWord(cl, c) && len(c) > len(best) {
			best = c
		}
	}
	if best != "" {
		return best
	}
	if m := wbCauseLead.FindStringSubmatch(cl); m != nil {
		p := strings.TrimSpace(m[1])
		for _, art := range []string{"a ", "an ", "the "} {
			p = strings.TrimPrefix(p, art)
		}
		return p
	}
	return ""
}

var wbCatPat = []*regexp.Regexp{
	regexp.MustCompile(`(?i)logged with (.+?) as its`),
	regexp.MustCompile(`(?i)carries (.+?) in the`),
	regexp.MustCompile(`(?i)(?:entry|field) (?:for [^,]+? )?(?:reads|says) (.+?)\.?$`),
	regexp.MustCompile(`(?i)recorded for .+? was (.+?)\.?$`),
}

// wbCatOf finds a category label in a sentence about one candidate.
func wbCatOf(s, low string, v *pVocab) string {
	best := ""
	for _, c := range v.cats {
		if wbContainsWord(low, c) && len(c) > len(best) {
			best = c
		}
	}
	if best != "" {
		return best
	}
	dimOK := len(v.catDims) == 0
	for _, d := range v.catDims {
		if strings.Contains(low, d) {
			dimOK = true
		}
	}
	if !dimOK {
		return ""
	}
	for _, re := range wbCatPat {
		if m := re.FindStringSubmatch(s); m != nil {
			c := strings.TrimSpace(m[1])
			if len(c) > 0 && len(c) <= 40 && len(wbNumbers(c)) == 0 {
				return c
			}
		}
	}
	return ""
}

var (
	wbLogPrefix = regexp.MustCompile(`^\s*(?:\[[^\]]{0,40}\][^:]{0,40}:|entry \d+,[^:]{0,40}:|(?i:entry) \d+,[^:]{0,40}:)`)
	wbPrelimCue = regexp.MustCompile(`interim summary|early discussion|first-pass review|preliminary note|initial consensus|pointed to .{0,80} as the source|singled out|interim ranking|interim view settled|both on the table|early favourite|first read|provisional`)
	wbReviseCue = regexp.MustCompile(`did not hold up|has since been revised|overturned|was withdrawn|early focus on|interim view of|preliminary interpretation|was dropped|no longer stands|was reversed|later revised|set aside once`)
	wbRuleRe    = regexp.MustCompile(`(?:above|below|over|under|exceeds|falls below)\s+(-?\d+(?:\.\d+)?)`)
)

func wbRuleCue(low string) bool {
	return len(wbRuleRe.FindAllString(low, -1)) >= 2
}

func wbThresholdBefore(low string, pos int) bool {
	a := max(0, pos-14)
	seg := low[a:pos]
	for _, w := range []string{"above ", "below ", "over ", "under ", "exceeds "} {
		if strings.HasSuffix(seg, w) {
			return true
		}
	}
	return false
}

// wbParseRule reads "above T2 means HI, above T1 means MID, otherwise LO"
// in any of its phrasings: thresholds in order of appearance (the severe
// one first), tiers in order of first appearance, intervals as the
// numbers left over.
func wbParseRule(s string, v *pVocab) *pRule {
	low := strings.ToLower(s)
	r := &pRule{}
	ms := wbRuleRe.FindAllStringSubmatchIndex(low, -1)
	if len(ms) < 2 {
		return nil
	}
	t2, _ := new(big.Rat).SetString(low[ms[0][2]:ms[0][3]])
	t1, _ := new(big.Rat).SetString(low[ms[1][2]:ms[1][3]])
	if t1 == nil || t2 == nil {
		return nil
	}
	r.t1, r.t2 = t1, t2
	r.low = strings.Contains(low[ms[0][0]:ms[0][1]], "below") || strings.Contains(low[ms[0][0]:ms[0][1]], "under")
	// Tiers: known labels by first position.
	type at struct {
		pos int
		l   string
	}
	var found []at
	mask := []byte(low)
	for _, t := range v.tiers {
		i := wbIndexWord(string(mask), t)
		if i < 0 {
			continue
		}
		dup := false
		for _, f := range found {
			if f.l == t {
				dup = true
			}
		}
		if dup {
			continue
		}
		found = append(found, at{i, t})
		for j := i; j < i+len(t); j++ {
			mask[j] = '#'
		}
	}
	slices.SortFunc(found, func(a, b at) int { return a.pos - b.pos })
	if len(found) >= 3 {
		r.tiers = [3]string{found[0].l, found[1].l, found[2].l}
		r.hasTiers = true
	} else {
		r.tiers, r.hasTiers = wbRuleTiersByShape(s)
	}
	// Intervals: numbers followed by "days" or listed after the
	// thresholds, that are not thresholds.
	var ivs []string
	for _, n := range wbNumbers(s) {
		if n.start == ms[0][2] || n.start == ms[1][2] || wbThresholdBefore(low, n.start) {
			continue
		}
		if n.dec > 0 {
			continue
		}
		if n.start < ms[0][3] {
			continue
		}
		ivs = append(ivs, n.text)
	}
	if len(ivs) >= 3 {
		r.intervals = [3]string{ivs[0], ivs[1], ivs[2]}
		r.hasInterva = true
	}
	return r
}

var wbTierShapes = []*regexp.Regexp{
	regexp.MustCompile(`(?i)(?:above|below|over|under|exceeds) [\d.]+\S* (?:means|is assigned|map to|goes to|to) ([^,;.(]+?)[,;.( ].*?(?:above|below|over|under|exceeds) [\d.]+\S* (?:means|is assigned|map to|goes to|to) ([^,;.(]+?)[,;.( ].*?(?:otherwise|anything else|the rest map to|or below means|or above means|any other is assigned|otherwise to|lower values to|higher values to) ([^,;.(]+?)(?:[,;.(]|$)`),
	regexp.MustCompile(`(?i): ([^,;.]+?) (?:above|below|over|under) [\d.]+\S*, ([^,;.]+?) (?:above|below|over|under) [\d.]+\S*, otherwise ([^,;.]+?)(?:[,;.]|$)`),
	regexp.MustCompile(`(?i)rule:? ([^,;.]+?) (?:if|when) the .+?, ([^,;.]+?) (?:if|when) .+?, (?:otherwise )?([^,;.]+?)(?: otherwise)?(?:[,;.]|$)`),
	regexp.MustCompile(`(?i)assigns ([^,;.]+?) to any .+?, ([^,;.]+?) to one .+?, and ([^,;.]+?) to the rest`),
}

func wbRuleTiersByShape(s string) ([3]string, bool) {
	for _, re := range wbTierShapes {
		if m := re.FindStringSubmatch(s); m != nil {
			t := [3]string{strings.TrimSpace(m[1]), strings.TrimSpace(m[2]), strings.TrimSpace(m[3])}
			for i := range t {
				t[i] = strings.TrimSuffix(strings.TrimPrefix(t[i], "is assigned "), " otherwise")
			}
			return t, true
		}
	}
	return [3]string{}, false
}

// tierOf applies the rule: 0 = most severe (listed first).
func (r *pRule) tierOf(v *big.Rat) int {
	if r.low {
		switch {
		case v.Cmp(r.t2) < 0:
			return 0
		case v.Cmp(r.t1) < 0:
			return 1
		}
		return 2
	}
	switch {
	case v.Cmp(r.t2) > 0:
		return 0
	case v.Cmp(r.t1) > 0:
		return 1
	}
	return 2
}

// wbUF is a small union-find over strings.
type wbUF struct {
	parent map[string]string
	strong map[string]bool // keys that must not share a cluster
}

// strongIn reports whether the cluster of root r holds a strong key.
func (u *wbUF) strongIn(r string) bool {
	for k := range u.strong {
		if u.find(k) == r {
			return true
		}
	}
	return false
}

func newWbUF() *wbUF { return &wbUF{parent: map[string]string{}} }

func (u *wbUF) add(k string) {
	if _, ok := u.parent[k]; !ok {
		u.parent[k] = k
	}
}

func (u *wbUF) find(k string) string {
	u.add(k)
	for u.parent[k] != k {
		u.parent[k] = u.parent[u.parent[k]]
		k = u.parent[k]
	}
	return k
}

func (u *wbUF) union(a, b string) {
	ra, rb := u.find(a), u.find(b)
	if ra != rb {
		if u.strongIn(ra) && u.strongIn(rb) {
			return
		}
		if ra < rb {
			u.parent[rb] = ra
		} else {
			u.parent[ra] = rb
		}
	}
}

// name is the entity's answer form: its most used code that is not a
// tag (longer on ties), else any alias.
func (e *pEnt) name() string {
	best, bn := "", -1
	for _, tagsOK := range []bool{false, true} {
		for sp, n := range e.codes {
			if !tagsOK && e.tags[strings.ToLower(sp)] {
				continue
			}
			if n > bn || (n == bn && (len(sp) > len(best) || (len(sp) == len(best) && sp < best))) {
				best, bn = sp, n
			}
		}
		if best != "" {
			return best
		}
	}
	if len(e.names) > 0 {
		return e.names[0]
	}
	return ""
}

// wbCodeTokens is wbTokens with adjacent short all-capital tokens joined
// into one code ("UK TB", "CA PMI").
func wbCodeTokens(s string) []wbTok {
	toks := wbTokens(s)
	short := func(t string) bool {
		if len(t) < 2 || len(t) > 5 {
			return false
		}
		for _, r := range t {
			if r < 'A' || r > 'Z' {
				return false
			}
		}
		return true
	}
	out := toks[:0:0]
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if i+1 < len(toks) && short(t.text) && short(toks[i+1].text) && s[t.end:toks[i+1].start] == " " {
			t = wbTok{text: s[t.start:toks[i+1].end], start: t.start, end: toks[i+1].end}
			i++
		}
		out = append(out, t)
	}
	return out
}

// wbNameSpans returns the byte spans of known names in a lower-case text.
func wbNameSpans(low string, names []string) [][2]int {
	var out [][2]int
	for _, nm := range names {
		off := 0
		for off < len(low) {
			i := wbIndexWord(low[off:], nm)
			if i < 0 {
				break
			}
			i += off
			out = append(out, [2]int{i, i + len(nm)})
			off = i + len(nm)
		}
	}
	return out
}

// wbInSpans reports whether [a, b) lies inside one of the spans and is
// shorter than it.
func wbInSpans(spans [][2]int, a, b int) bool {
	for _, sp := range spans {
		if a >= sp[0] && b <= sp[1] && b-a < sp[1]-sp[0] {
			return true
		}
	}
	return false
}

// wbWeakAlias reports whether a key is too weak to be an alias: a number,
// a function word, or two letters or fewer that are not a code.
func wbWeakAlias(k string) bool {
	if k == "" || wbFunctionWords[k] {
		return true
	}
	if _, err := strconv.ParseFloat(k, 64); err == nil {
		return true
	}
	return len(k) <= 2 && !wbCodeLike(strings.ToUpper(k))
}

// wbInverts reports whether an "n of m" count is a count of failures:
// "0 of 3 came back without it", "lacked it in 1 of 4", "absent at 0 of 5".
func wbInverts(after, before string) bool {
	for _, w := range []string{"without", "came back clean", "negative", "did not", "failed to", "missed"} {
		if strings.Contains(after, w) {
			return true
		}
	}
	// the nearest verb before the count
	before = before[max(0, len(before)-32):]
	for _, w := range []string{"lacked", "lacking", "absent", "missing", "failed", "missed", "no sign", "unrecorded",
		"unseen", "undetected", "not seen", "not detected", "clean", "negative", "without", "no trace", "nothing"} {
		if strings.Contains(before, w) {
			return true
		}
	}
	return false
}

// barPol is +1 when n meets the bar, -1 otherwise.
func barPol(n, bar int) int {
	if n >= bar {
		return 1
	}
	return -1
}
