package procedural

import (
	"strconv"
	"strings"
)

type formatID uint8

const (
	fmtReport formatID = iota
	fmtMemo
	fmtAuditLog
	fmtEmail
	fmtFieldNotes
	fmtIncident
	nFormats
)

// docNames is how questions and rules refer to a part's document.
var docNames = [nFormats]string{"report", "memo", "audit log", "email thread", "field notes", "incident report"}

var firstNames = [...]string{"Anna", "Tomas", "Priya", "Kwame", "Elena", "Marcus", "Yuki", "Sofia", "Lars", "Amara", "Diego", "Nadia", "Felix", "Ines", "Omar", "Hanna", "Jonas", "Leila", "Mateo", "Freya", "Ravi", "Clara", "Nikolai", "Zainab", "Pieter", "Mei", "Andre", "Lucia", "Emil", "Sana"}
var lastNames = [...]string{"Keller", "Okafor", "Lindqvist", "Moreau", "Tanaka", "Brennan", "Novak", "Haddad", "Ferreira", "Kowalski", "Andersen", "Rossi", "Mensah", "Iyer", "Petrov", "Castillo", "Nakamura", "Fischer", "Duarte", "Sato", "Volkova", "Abara", "Hughes", "Laurent", "Varga", "Quinn", "Demir", "Holm", "Ibarra", "Weiss"}
var reportHeadings = [...]string{"Scope", "Screening results", "Follow-up observations", "Controls and handling", "Coverage", "Review notes", "Supplementary data", "Discussion", "Open items", "Observations", "Data summary", "Method notes"}
var incidentHeadings = [...]string{"Summary", "Timeline", "Findings", "Analysis", "Scope", "Actions", "Open questions", "Notes", "Impact", "Follow-up"}
var fillerCodes = [...]string{"DOC-", "REF-", "ADM-", "ARC-", "QA-", "OPS-"}
var memoRoles = [...]string{"programme lead", "quality manager", "head of analysis", "review coordinator", "operations lead"}

// rctx carries the values a template's slots draw on.
type rctx struct {
	ps          *partState
	cand        int
	n, m        int
	pct         int
	d           int
	site        int
	cause       int
	causeB      int
	causePhrase bool
	numeric     bool // a polarity-neutral numeric phrasing was chosen
	missing     bool // ... one counting what is missing
	cand2       int  // the second candidate ({y}), or -1
	words       bool // spell small counts
	rel         criterion
}

// ---- layout ----

// layout distributes the facts over content paragraphs: the interim view
// early, its revision at least two paragraphs later, and every candidate's
// facts spread over non-adjacent paragraphs.
func (g *gen) layout(ps *partState) {
	fixed := func(i int) bool {
		return i == ps.prelimFact || i == ps.reviseFact || i == ps.misledFact || i == ps.bridgeFact
	}
	var movable []int
	for _, i := range g.perm(len(ps.facts)) {
		if !fixed(i) {
			movable = append(movable, i)
		}
	}
	per := 4
	if ps.level > 0 && g.intn(2) == 0 {
		per = 3
	}
	k := max(4, (len(ps.facts)+per-1)/per)
	paraOf := make([]int, len(ps.facts))
	pi := g.intn(max(1, (k-2)/2))
	ri := pi + 2 + g.intn(k-pi-2)
	off := g.intn(k)
	for j, f := range movable {
		paraOf[f] = (off + j) % k
	}
	paraOf[ps.prelimFact], paraOf[ps.reviseFact], paraOf[ps.misledFact] = pi, ri, ri
	if ps.bridgeFact >= 0 {
		paraOf[ps.bridgeFact] = 0
	}
	// The misled candidate's other failures come after the interim view.
	for _, f := range movable {
		fc := &ps.facts[f]
		if int(fc.cand) == ps.misled && isNegative(fc.kind) && paraOf[f] <= pi {
			paraOf[f] = pi + 1 + g.intn(k-pi-1)
		}
	}
	// Spread every candidate over non-adjacent paragraphs.
	for c := range ps.cands {
		lo, hi := k, -1
		for _, f := range movable {
			if int(ps.facts[f].cand) == c {
				lo, hi = min(lo, paraOf[f]), max(hi, paraOf[f])
			}
		}
		if hi < 0 || hi-lo >= 2 {
			continue
		}
		for _, f := range movable {
			if int(ps.facts[f].cand) != c {
				continue
			}
			if lo >= 2 {
				paraOf[f] = 0
				break
			}
			if paraOf[f] == hi {
				paraOf[f] = k - 1
				break
			}
		}
	}
	ps.paras = make([][]int, k)
	for _, f := range movable {
		ps.paras[paraOf[f]] = append(ps.paras[paraOf[f]], f)
	}
	insert := func(p int, fs ...int) {
		at := g.intn(len(ps.paras[p]) + 1)
		s := make([]int, 0, len(ps.paras[p])+len(fs))
		s = append(s, ps.paras[p][:at]...)
		s = append(s, fs...)
		ps.paras[p] = append(s, ps.paras[p][at:]...)
	}
	insert(pi, ps.prelimFact)
	insert(ri, ps.reviseFact, ps.misledFact)
	if ps.bridgeFact >= 0 {
		ps.paras[0] = append([]int{ps.bridgeFact}, ps.paras[0]...)
	}
}

func isNegative(k factKind) bool {
	return k == fkPersistNeg || k == fkReplNeg || k == fkAttrib || k == fkLocal
}

// ---- rendering ----

type block struct {
	content          int // content paragraph index, or -1 for filler
	body             string
	fillFrom, fillTo int // filler span in the shared buffer
}

// renderPart renders the paragraphs, pads them with filler to the part's
// target length and wraps them in the part's document format. It reports
// whether the content alone overshot the target.
func (g *gen) renderPart(ps *partState) bool {
	g.planMentions(ps)
	if g.tr != nil {
		g.tr.curNums = g.tr.curNums[:0]
		g.tr.factText = make([]string, len(ps.facts))
		g.tr.factPara = make([]int, len(ps.facts))
	}
	buf := make([]byte, 0, 2048)
	bodies := make([]string, len(ps.paras))
	contentWords := 0
	for p, items := range ps.paras {
		buf = buf[:0]
		for j, f := range items {
			if j > 0 {
				buf = append(buf, ' ')
			}
			start := len(buf)
			buf = g.renderFact(buf, ps, f)
			if g.tr != nil {
				g.tr.factText[f] = string(buf[start:])
			}
		}
		bodies[p] = string(buf)
		contentWords += spacedWords(buf)
	}
	target := wordsFor(ps.target)
	header := g.header(ps)
	hw := countWords(header)

	// Filler paragraphs go into random gaps between content paragraphs.
	k := len(ps.paras)
	est := target - contentWords - hw - 4*k
	nFill := 0
	if est > 30 {
		avg := 45 + g.intn(30)
		nFill = max(1, (est+avg/2)/avg)
	}
	gaps := make([]int, k+1)
	for range nFill {
		gaps[g.intn(k+1)]++
	}
	blocks := make([]block, 0, k+nFill)
	for p := 0; p <= k; p++ {
		for range gaps[p] {
			blocks = append(blocks, block{content: -1})
		}
		if p < k {
			blocks = append(blocks, block{content: p, body: bodies[p]})
		}
	}
	pre, suf := g.decorations(ps, len(blocks))
	decoWords := 0
	for i := range blocks {
		decoWords += countWords(pre[i]) + countWords(suf[i])
	}
	deficit := target - contentWords - hw - decoWords
	// Filler sentences accumulate in one buffer; each block records the
	// span it owns, so nothing is copied twice.
	var used [3]uint64
	fill := buf[:0]
	if nFill > 0 {
		rem := deficit
		left := nFill
		for i := range blocks {
			if blocks[i].content >= 0 {
				continue
			}
			quota := rem / left
			left--
			blocks[i].fillFrom = len(fill)
			got := 0
			for got == 0 || quota-got >= 5 {
				if got > 0 {
					fill = append(fill, ' ')
				}
				start := len(fill)
				fill = g.fillerSentence(fill, ps, &used)
				got += spacedWords(fill[start:])
			}
			blocks[i].fillTo = len(fill)
			rem -= got
		}
		deficit = rem
	}
	// Top up (or pad a filler-free part) with sentences appended to
	// random paragraphs.
	var extra [][3]int // block, span in fill
	for tries := 0; deficit >= 5 && tries < 200; tries++ {
		i := g.intn(len(blocks))
		start := len(fill)
		fill = g.fillerSentence(fill, ps, &used)
		deficit -= spacedWords(fill[start:])
		extra = append(extra, [3]int{i, start, len(fill)})
	}
	var sb strings.Builder
	sb.Grow(len(header) + 8*target)
	sb.WriteString(header)
	for i := range blocks {
		sb.WriteString("\n\n")
		sb.WriteString(pre[i])
		sb.WriteString(blocks[i].body)
		sb.Write(fill[blocks[i].fillFrom:blocks[i].fillTo])
		for _, e := range extra {
			if e[0] == i {
				sb.WriteByte(' ')
				sb.Write(fill[e[1]:e[2]])
			}
		}
		sb.WriteString(suf[i])
	}
	ps.narrative = sb.String()
	ps.effTarget = ps.target
	if over := contentWords + hw + decoWords - target; over > 0 {
		// Nothing to pad: the world model alone exceeds the sampled length.
		ps.effTarget = tokensFor(target + over)
	}
	if g.tr != nil {
		for i := range blocks {
			if c := blocks[i].content; c >= 0 {
				for _, f := range ps.paras[c] {
					g.tr.factPara[f] = i + 1 // block 0 is the header
				}
			}
		}
	}
	return contentWords+hw+decoWords > target+target/25
}

func (g *gen) renderFact(b []byte, ps *partState, f int) []byte {
	ft := &ps.facts[f]
	start := len(b)
	switch {
	case ft.kind2 != fkNone:
		b = g.renderCompound(b, ps, ft)
	case ft.kind == fkProfile:
		b = g.renderProfile(b, ps, int(ft.cand))
	default:
		rc := rctx{ps: ps, cand: int(ft.cand), words: g.intn(3) == 0, cand2: int(ft.other) - 1, rel: ft.rel}
		pool := g.factCtx(ps, ft.kind, &rc)
		b = g.render(b, g.choose(ps, pool), &rc)
	}
	capitalizeAt(b, start)
	if ps.inlineLinks {
		b = tidyCommas(b, start)
	}
	return b
}

// tidyCommas drops the comma an inline clause leaves before other
// punctuation (", ." ",," ",;" ",:" ",)").
func tidyCommas(b []byte, start int) []byte {
	w := start
	for i := start; i < len(b); i++ {
		if b[i] == ',' && i+1 < len(b) {
			switch b[i+1] {
			case '.', ',', ';', ':', ')':
				continue
			}
		}
		b[w] = b[i]
		w++
	}
	return b[:w]
}

// renderProfile states a candidate's value, with its category and flag
// date as an appositive when the part carries them.
func (g *gen) renderProfile(b []byte, ps *partState, ci int) []byte {
	c := &ps.cands[ci]
	st := ps.st
	b = g.mention(b, ps, ci)
	var parts int
	if ps.flagDates {
		b = append(b, ", first flagged on "...)
		b = appendDate(b, g.year, ps.start+c.first, ps.dateStyle)
		parts++
	}
	if ps.need.cat {
		if parts == 0 {
			b = append(b, ", "...)
		} else {
			b = append(b, " and "...)
		}
		b = append(b, "logged with "...)
		b = append(b, st.cats[c.cat].text...)
		b = append(b, " as its "...)
		b = append(b, st.catDim...)
		parts++
	}
	if parts > 0 {
		b = append(b, ',')
	}
	b = append(b, ' ')
	rc := rctx{ps: ps, cand: ci}
	b = g.render(b, g.choose(ps, tx.profileLead), &rc)
	return append(b, '.')
}

// renderCompound states two checks of one candidate in one sentence.
func (g *gen) renderCompound(b []byte, ps *partState, ft *fact) []byte {
	ka, kb := ft.kind, ft.kind2
	if g.intn(2) == 0 {
		ka, kb = kb, ka
	}
	frames := tx.anyFrames
	if g.intn(10) < 3 {
		frames = tx.sameFrames
		if isNegative(ka) != isNegative(kb) {
			frames = tx.mixedFrames
		}
	}
	fr := g.choose(ps, frames)
	words := g.intn(3) == 0
	for i := range fr.segs {
		sg := &fr.segs[i]
		b = append(b, sg.lit...)
		switch sg.slot {
		case slX:
			b = g.mention(b, ps, int(ft.cand))
		case slClauseA, slClauseB:
			k := ka
			if sg.slot == slClauseB {
				k = kb
			}
			rc := rctx{ps: ps, cand: int(ft.cand), words: words}
			g.factCtx(ps, k, &rc) // fills rc; clauses have their own pools
			pool := tx.clause[k]
			if cr, ok := numericCrit(k); ok && rc.numeric {
				pool = tx.numericClause[cr]
				if rc.missing {
					pool = tx.numericMissClause[cr]
				}
			}
			b = g.render(b, g.choose(ps, pool), &rc)
		}
	}
	return b
}

// choose picks a paraphrase; dense low-length parts prefer the shortest of
// four random draws, so every phrasing stays in use.
func (g *gen) choose(ps *partState, pool []tpl) *tpl {
	t := &pool[g.intn(len(pool))]
	if ps.level == 0 {
		for range 3 {
			if u := &pool[g.intn(len(pool))]; u.words < t.words {
				t = u
			}
		}
	}
	return t
}

// neutralTpl picks a neutral-mention template not yet used in the part
// while any remain, so no such sentence repeats verbatim.
func (g *gen) neutralTpl(ps *partState) int {
	n := len(tx.neutral)
	i := g.intn(n)
	for j := range n {
		if ps.neutralUsed&(1<<uint((i+j)%n)) == 0 {
			i = (i + j) % n
			break
		}
	}
	ps.neutralUsed |= 1 << uint(i)
	if ps.neutralUsed == 1<<uint(n)-1 {
		ps.neutralUsed = 0
	}
	return i
}

// numericCrit reports which check a fact kind states, for the kinds that
// have polarity-neutral numeric phrasings.
func numericCrit(k factKind) (criterion, bool) {
	switch k {
	case fkPersistPos, fkPersistNeg:
		return crPersist, true
	case fkReplPos, fkReplNeg:
		return crRepl, true
	case fkWide, fkLocal:
		return crWide, true
	}
	return 0, false
}

// factCtx fills rc for a fact kind and returns the kind's sentence pool.
// About a third of persistence, replication and spread statements use the
// numeric phrasings shared by both polarities.
func (g *gen) factCtx(ps *partState, k factKind, rc *rctx) []tpl {
	st := ps.st
	var c *cand
	if rc.cand >= 0 {
		c = &ps.cands[rc.cand]
		rc.site = c.site
	}
	if cr, ok := numericCrit(k); ok && (ps.thr[cr] > 0 || (cr == crWide && g.intn(3) == 0)) {
		// Persistence and replication are measurements exactly where the
		// part states a bar: the measurement falls on either side of the
		// bar, in ranges that move with it. Half the numeric phrasings
		// count what is present (retained 64%, 3 of 4), half what is
		// missing (lost 36%, clean in 1 of 4), so neither the size of a
		// number nor the wording gives the outcome without the bar.
		// Spread keeps its counts (k of k against 1 of k, or the missing
		// 0 of k against k-1 of k).
		rc.numeric = true
		rc.missing = g.intn(2) == 0
		neg := isNegative(k)
		switch cr {
		case crPersist:
			rc.d = c.recheck
			p := ps.thr[cr]
			rc.pct = p + g.intn(36)
			if neg {
				lo := max(1, p-35)
				rc.pct = lo + g.intn(p-lo)
			}
			if rc.missing && rc.pct >= 100 {
				rc.missing = false
			}
			if rc.missing {
				rc.pct = 100 - rc.pct
			}
			g.traceNum(cr, neg, rc.pct, rc.missing)
		case crRepl:
			r := ps.thr[cr]
			rc.m = c.nRep
			rc.n = r + g.intn(c.nRep-r+1)
			if neg {
				rc.n = 1 + g.intn(r-1)
			}
			if rc.missing {
				rc.n = rc.m - rc.n
			}
			g.traceNum(cr, neg, rc.n, rc.missing)
		default:
			rc.n = ps.kSites
			if neg {
				rc.n = 1
			}
			if rc.missing {
				rc.n = ps.kSites - rc.n
			}
			g.traceNum(cr, neg, rc.n, rc.missing)
		}
		if rc.missing {
			return tx.numericMiss[cr]
		}
		return tx.numeric[cr]
	}
	switch k {
	case fkPersistPos:
		rc.d = c.recheck
		return tx.persistPos
	case fkPersistNeg:
		rc.d = c.recheck
		return tx.persistNeg
	case fkReplPos:
		rc.n = c.nRep
		return tx.replPos
	case fkReplNeg:
		rc.m = c.nRep - 1
		return tx.replNeg
	case fkIntrinsic:
		rc.cause = g.intn(len(st.causes))
		rc.causeB = (rc.cause + 1 + g.intn(len(st.causes)-1)) % len(st.causes)
		rc.causePhrase = g.intn(2) == 0
		return tx.intrinsic
	case fkAttrib:
		rc.cause, rc.causePhrase, rc.d = c.cause, true, c.attribDay
		return tx.attrib
	case fkWide:
		return tx.wide
	case fkLocal:
		return tx.local
	case fkValue:
		return tx.value
	case fkFirst:
		rc.d = c.first
		return tx.first
	case fkTag:
		return tx.tag
	case fkLink:
		return tx.link
	case fkCat:
		return tx.cat
	case fkNeutral:
		return tx.neutral[g.neutralTpl(ps):][:1]
	case fkPrelim:
		rc.d = ps.prelimDay
		if rc.cand2 >= 0 {
			return tx.prelim2
		}
		return tx.prelim
	case fkRevise:
		return tx.revise
	case fkEarly:
		rc.d = g.intn(21)
		return tx.early
	case fkSame:
		rc.d = c.recheck
		rc.site = ps.cands[rc.cand2].site
		return tx.same[rc.rel]
	case fkCritPersist:
		rc.pct = ps.thr[crPersist]
		return tx.critPersist
	case fkCritRepl:
		rc.n = ps.thr[crRepl]
		return tx.critRepl
	case fkRule:
		switch {
		case !ps.need.intervals && st.metric.lowSevere:
			return tx.ruleLoShort
		case !ps.need.intervals:
			return tx.ruleHiShort
		case st.metric.lowSevere:
			return tx.ruleLo
		}
		return tx.ruleHi
	case fkBridge:
		if ps.idx == 2 {
			return tx.bridge3
		}
		return tx.bridge2
	}
	return tx.neutral
}

func (g *gen) render(b []byte, t *tpl, rc *rctx) []byte {
	ps := rc.ps
	st := ps.st
	for i := range t.segs {
		sg := &t.segs[i]
		b = append(b, sg.lit...)
		article := -1 // position of an indefinite article before this slot
		if sg.slot != slNone && endsWithArticle(b) {
			article = len(b) - 2
		}
		slotStart := len(b)
		switch sg.slot {
		case slNone:
		case slX:
			b = g.mention(b, ps, rc.cand)
		case slRef:
			b = g.ref(b, ps, ps.cands[rc.cand].link, ps.cands[rc.cand].refStyle)
		case slKind:
			b = append(b, st.kind...)
		case slKinds:
			b = append(b, st.kinds...)
		case slKindPrev:
			b = append(b, ps.prev.st.kind...)
		case slKindsPrev:
			b = append(b, ps.prev.st.kinds...)
		case slKindPrev2:
			b = append(b, ps.prev.prev.st.kind...)
		case slKindsPrev2:
			b = append(b, ps.prev.prev.st.kinds...)
		case slSig:
			b = append(b, g.pick(st.sig)...)
		case slSigPrev:
			b = append(b, ps.prev.st.sig[0]...)
		case slRep:
			b = append(b, st.rep[ps.repIdx]...)
		case slRecheck:
			b = append(b, st.recheck[ps.recheckIdx]...)
		case slSiteNoun:
			b = append(b, st.siteNoun...)
		case slSiteNouns:
			b = append(b, st.siteNouns...)
		case slSite:
			b = g.site(b, st, rc.site)
		case slN:
			b = g.count(b, rc.n, rc.words)
		case slM:
			b = g.count(b, rc.m, rc.words)
		case slM1:
			b = g.count(b, rc.m+1, rc.words)
		case slK:
			b = g.count(b, ps.kSites, rc.words)
		case slK1:
			b = g.count(b, ps.kSites-1, rc.words)
		case slDate:
			b = appendDate(b, g.year, ps.start+rc.d, ps.dateStyle)
		case slCause:
			l := &st.causes[rc.cause]
			if rc.causePhrase {
				b = append(b, l.phrase...)
			} else {
				b = append(b, l.text...)
			}
		case slCauseB:
			b = append(b, st.causes[rc.causeB].text...)
		case slVal:
			b = g.value(b, &st.metric, ps.cands[rc.cand].val)
		case slMetric:
			b = append(b, st.metric.name...)
		case slTagNoun:
			b = append(b, st.tagNoun...)
		case slTag:
			b = append(b, ps.cands[rc.cand].tag...)
		case slTagVerb:
			b = append(b, st.tagVerbs[ps.cands[rc.cand].tagVerb]...)
		case slLink:
			b = append(b, st.linkSg...)
		case slCat:
			b = append(b, st.cats[ps.cands[rc.cand].cat].text...)
		case slCatDim:
			b = append(b, st.catDim...)
		case slTierDim:
			b = append(b, st.tierDim...)
		case slTierLo:
			b = append(b, st.tiers[0].text...)
		case slTierMid:
			b = append(b, st.tiers[1].text...)
		case slTierHi:
			b = append(b, st.tiers[2].text...)
		case slT1:
			b = g.value(b, &st.metric, ps.t1)
		case slT2:
			b = g.value(b, &st.metric, ps.t2)
		case slILo:
			b = strconv.AppendInt(b, int64(ps.intervals[0]), 10)
		case slIMid:
			b = strconv.AppendInt(b, int64(ps.intervals[1]), 10)
		case slIHi:
			b = strconv.AppendInt(b, int64(ps.intervals[2]), 10)
		case slIntervalNoun:
			b = append(b, st.intervalNoun...)
		case slDoc:
			b = append(b, docNames[ps.fmt]...)
		case slCode:
			b = append(b, fillerCodes[g.intn(len(fillerCodes))]...)
			b = strconv.AppendInt(b, int64(100+g.intn(9900)), 10)
		case slPerson:
			b = append(b, g.pick(firstNames[:])...)
			b = append(b, ' ')
			b = append(b, g.pick(lastNames[:])...)
		case slTime:
			b = g.clock(b)
		case slRDate:
			b = appendDate(b, g.year, ps.start+g.intn(95), ps.dateStyle)
		case slRSite:
			b = g.site(b, st, g.intn(len(st.sites)))
		case slNum:
			v := sg.lo + g.int64n(sg.hi-sg.lo+1)
			if sg.dec > 0 && g.forbidden(v, int(sg.dec)) {
				v++
			}
			b = appendFixed(b, v, int(sg.dec))
		case slPick:
			b = append(b, sg.alts[g.intn(len(sg.alts))]...)
		case slPct:
			b = strconv.AppendInt(b, int64(rc.pct), 10)
		case slY:
			b = g.mention(b, ps, rc.cand2)
		}
		if article >= 0 && vowelSound(b[slotStart:]) {
			b = append(b, 0)
			copy(b[article+2:], b[article+1:])
			b[article+1] = 'n'
		}
	}
	return b
}

// endsWithArticle reports whether b ends with the word "a" or "A" and a
// space.
func endsWithArticle(b []byte) bool {
	n := len(b)
	if n < 2 || b[n-1] != ' ' || (b[n-2] != 'a' && b[n-2] != 'A') {
		return false
	}
	return n == 2 || b[n-3] == ' ' || b[n-3] == '('
}

// vowelSound approximates whether a word takes "an": it starts with a
// vowel letter, except u-words (US, unit), "one" and "eu" (euro).
func vowelSound(w []byte) bool {
	if len(w) == 0 {
		return false
	}
	switch w[0] {
	case 'a', 'e', 'i', 'o', 'A', 'E', 'I', 'O':
	default:
		return false
	}
	lw := strings.ToLower(string(w[:min(len(w), 3)]))
	return !strings.HasPrefix(lw, "one") && !strings.HasPrefix(lw, "eu")
}

func (g *gen) count(b []byte, n int, words bool) []byte {
	if words && n >= 0 && n < len(smallWords) {
		return append(b, smallWords[n]...)
	}
	return strconv.AppendInt(b, int64(n), 10)
}

func (g *gen) site(b []byte, st *stage, i int) []byte {
	b = append(b, "the "...)
	b = append(b, st.sites[i]...)
	b = append(b, ' ')
	return append(b, st.siteNoun...)
}

func (g *gen) clock(b []byte) []byte {
	b = append2(b, 7+g.intn(12))
	b = append(b, ':')
	return append2(b, g.intn(60))
}

func (g *gen) value(b []byte, m *metricSpec, v int64) []byte {
	b = appendFixed(b, v, m.dec)
	if m.unit == "%" && g.intn(5) == 0 {
		return append(b, " percent"...)
	}
	return append(b, m.unit...)
}

// planMentions fixes, per candidate, where the text pairs its full name
// and its description with its code and where an inline tag goes. Each
// fact names its candidate exactly once, so the facts give the number of
// mentions; the pairings fall on one of the first three, in any order, so
// no mention position has a fixed form.
func (g *gen) planMentions(ps *partState) {
	for i := range ps.cands {
		c := &ps.cands[i]
		c.mentions, c.shown, c.nMentions = 0, 0, 0
	}
	for _, f := range ps.facts {
		if f.cand >= 0 {
			ps.cands[f.cand].nMentions++
		}
		if f.other > 0 {
			ps.cands[f.other-1].nMentions++
		}
	}
	for i := range ps.cands {
		c := &ps.cands[i]
		early := max(1, min(c.nMentions, 3))
		c.descAt = 1 + g.intn(early)
		c.fullAt = 0 // never: the full name is then not used at all
		if c.e.full != "" && (ps.level > 0 || g.intn(2) == 0) {
			c.fullAt = 1 + g.intn(early)
		}
		c.tagAt = 0
		if c.tagInline && ps.idx < 2 {
			c.tagAt = 1 + g.intn(early)
		}
	}
}

// mention names a candidate. The code may appear on its own anywhere; the
// full name and the description only once a mention has paired them with
// the code ("CODE (FULL)", "FULL (CODE)", "the DESC CODE", "CODE (the
// DESC)", ...), at the mention planMentions chose. A tag given inline goes
// in parentheses at its own planned mention; a link given inline follows
// the first mention as a relative clause.
func (g *gen) mention(b []byte, ps *partState, ci int) []byte {
	c := &ps.cands[ci]
	c.mentions++
	e := &c.e
	k := c.mentions
	pairFull, pairDesc := k == c.fullAt, k == c.descAt
	var inner []byte // the parenthesised part, if any
	var tmp [96]byte
	inner = tmp[:0]
	switch {
	case pairFull && pairDesc:
		switch g.intn(3) {
		case 0: // the DESC CODE (FULL)
			b = appendDesc(b, e.desc)
			b = append(b, ' ')
			b = append(b, e.code...)
			inner = append(inner, e.full...)
		case 1: // CODE (FULL, the DESC)
			b = append(b, e.code...)
			inner = append(inner, e.full...)
			inner = append(inner, ", "...)
			inner = appendDesc(inner, e.desc)
		default: // the DESC FULL (CODE)
			b = appendDesc(b, e.desc)
			b = append(b, ' ')
			b = append(b, e.full...)
			inner = append(inner, e.code...)
		}
		c.shown |= formFull | formDesc
	case pairFull:
		if g.intn(2) == 0 {
			b = append(b, e.code...)
			inner = append(inner, e.full...)
		} else {
			b = append(b, e.full...)
			inner = append(inner, e.code...)
		}
		c.shown |= formFull
	case pairDesc:
		switch g.intn(4) {
		case 0, 1: // the DESC CODE
			b = appendDesc(b, e.desc)
			b = append(b, ' ')
			b = append(b, e.code...)
		case 2: // CODE (the DESC)
			b = append(b, e.code...)
			inner = appendDesc(inner, e.desc)
		default: // the DESC (CODE)
			b = appendDesc(b, e.desc)
			inner = append(inner, e.code...)
		}
		c.shown |= formDesc
	default:
		r := g.intn(100)
		switch {
		case r < 25 && c.shown&formFull != 0:
			b = append(b, e.full...)
		case r < 50 && c.shown&formDesc != 0:
			b = appendDesc(b, e.desc)
		default:
			b = append(b, e.code...)
		}
	}
	if k == c.tagAt {
		if len(inner) > 0 {
			if g.intn(2) == 0 {
				inner = append(inner, "; "...)
			} else {
				inner = append(inner, ", "...)
			}
		}
		inner = append(inner, ps.st.tagNoun...)
		inner = append(inner, ' ')
		inner = append(inner, c.tag...)
	}
	if len(inner) > 0 {
		b = append(b, " ("...)
		b = append(b, inner...)
		b = append(b, ')')
	}
	if k == 1 && c.linkInline {
		b = append(b, ", which "...)
		b = append(b, ps.st.linkSg...)
		b = append(b, ' ')
		b = g.ref(b, ps, c.link, c.refStyle)
		b = append(b, ',')
	}
	return b
}

func appendDesc(b []byte, desc string) []byte {
	b = append(b, "the "...)
	return append(b, desc...)
}

// ref points at a candidate of the previous part without naming it: by
// its tag ("the enzyme run from reagent lot AB-342") or by its alias.
func (g *gen) ref(b []byte, ps *partState, prevCand int, style uint8) []byte {
	prev := ps.prev
	pc := &prev.cands[prevCand]
	b = append(b, "the "...)
	if style == 0 {
		b = append(b, prev.st.kind...)
		b = append(b, ' ')
		b = append(b, prev.st.tagVerbs[pc.tagVerb]...)
		b = append(b, ' ')
		b = append(b, prev.st.tagNoun...)
		b = append(b, ' ')
		return append(b, pc.tag...)
	}
	return append(b, pc.e.desc...)
}

// fillerSentence appends one context sentence that mentions no candidate,
// avoiding repeats within the part while templates last.
func (g *gen) fillerSentence(b []byte, ps *partState, used *[3]uint64) []byte {
	pools := [3][]tpl{g.dom.filler, tx.filler, tx.fmtFiller[ps.fmt]}
	r := g.intn(100)
	k := 0
	switch {
	case r >= 88 && len(pools[2]) > 0:
		k = 2
	case r >= 55:
		k = 1
	}
	pool := pools[k]
	n := len(pool)
	i := g.intn(n)
	for j := 0; j < n; j++ {
		if used[k]&(1<<uint((i+j)%n)) == 0 {
			i = (i + j) % n
			break
		}
	}
	used[k] |= 1 << uint(i)
	if used[k] == 1<<uint(n)-1 {
		used[k] = 0
	}
	start := len(b)
	rc := rctx{ps: ps, cand: -1}
	b = g.render(b, &pool[i], &rc)
	capitalizeAt(b, start)
	return b
}

// ---- document formats ----

func (g *gen) person(b []byte) []byte {
	b = append(b, g.pick(firstNames[:])...)
	b = append(b, ' ')
	return append(b, g.pick(lastNames[:])...)
}

func (g *gen) header(ps *partState) string {
	b := make([]byte, 0, 160)
	title := g.pick(ps.st.titles)
	day := ps.start + 90 + g.intn(5)
	switch ps.fmt {
	case fmtReport:
		b = append(b, g.dom.reportWord...)
		b = append(b, ": "...)
		b = append(b, title...)
		b = append(b, "\nReference "...)
		b = append(b, "RP-"...)
		b = strconv.AppendInt(b, int64(1000+g.intn(9000)), 10)
		b = append(b, ", issued "...)
		b = appendDate(b, g.year, day, ps.dateStyle)
	case fmtMemo:
		b = append(b, "MEMORANDUM\nTo: "...)
		b = append(b, g.pick(g.dom.teams)...)
		b = append(b, "\nFrom: "...)
		b = g.person(b)
		b = append(b, ", "...)
		b = append(b, g.pick(memoRoles[:])...)
		b = append(b, "\nDate: "...)
		b = appendDate(b, g.year, day, ps.dateStyle)
		b = append(b, "\nSubject: "...)
		b = append(b, title...)
	case fmtAuditLog:
		b = append(b, "AUDIT LOG: "...)
		b = append(b, g.pick(g.dom.systems)...)
		b = append(b, " case "...)
		b = strconv.AppendInt(b, int64(10000+g.intn(90000)), 10)
		b = append(b, " ("...)
		b = append(b, title...)
		b = append(b, ")\nExported "...)
		b = appendDate(b, g.year, day, dateISO)
	case fmtEmail:
		b = append(b, "Subject: "...)
		b = append(b, title...)
		b = append(b, "\nThread exported "...)
		b = appendDate(b, g.year, day, ps.dateStyle)
	case fmtFieldNotes:
		b = append(b, g.dom.fieldWord...)
		b = append(b, ": "...)
		b = append(b, title...)
		b = append(b, "\nObserver: "...)
		b = g.person(b)
	case fmtIncident:
		b = append(b, "INCIDENT REPORT IR-"...)
		b = strconv.AppendInt(b, int64(g.year), 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, int64(100+g.intn(900)), 10)
		b = append(b, "\nOpened "...)
		b = appendDate(b, g.year, ps.start+g.intn(5), ps.dateStyle)
		b = append(b, " | Status: open | Owner: "...)
		b = g.person(b)
		b = append(b, "\nTitle: "...)
		b = append(b, title...)
	}
	return string(b)
}

// decorations returns per-block prefixes and suffixes: section headings,
// log stamps, e-mail headers and sign-offs, note entries.
func (g *gen) decorations(ps *partState, nb int) (pre, suf []string) {
	pre = make([]string, nb)
	suf = make([]string, nb)
	b := make([]byte, 0, 96)
	// A running clock in minutes keeps stamps in order however many
	// blocks there are.
	clock := (ps.start+g.intn(5))*1440 + 8*60
	step := max(30, 90*1440/max(nb, 1))
	next := func() (day, minute int) {
		clock += step/2 + g.intn(step)
		return clock / 1440, clock % 1440
	}
	stamp := func(b []byte, minute int) []byte {
		b = append2(b, minute/60)
		b = append(b, ':')
		return append2(b, minute%60)
	}
	switch ps.fmt {
	case fmtReport, fmtIncident:
		sec := 0
		heads := reportHeadings[:]
		if ps.fmt == fmtIncident {
			heads = incidentHeadings[:]
		}
		order := g.perm(len(heads))
		for i := 0; i < nb; {
			b = b[:0]
			if ps.fmt == fmtReport {
				b = append(b, "SECTION "...)
				b = append(b, byte('A'+sec%26))
				b = append(b, ": "...)
			} else {
				b = strconv.AppendInt(b, int64(sec+1), 10)
				b = append(b, ". "...)
			}
			b = append(b, heads[order[sec%len(heads)]]...)
			b = append(b, '\n')
			pre[i] = string(b)
			sec++
			i += 1 + g.intn(3)
		}
	case fmtAuditLog:
		for i := range nb {
			b = append(b[:0], '[')
			day, minute := next()
			y, doy := normDay(g.year, day)
			m, d := monthDay(y, doy)
			b = appendISO(b, y, m, d)
			b = append(b, ' ')
			b = stamp(b, minute)
			b = append(b, "] "...)
			b = append(b, g.pick(lastNames[:])...)
			b = append(b, ": "...)
			pre[i] = string(b)
		}
	case fmtEmail:
		for i := 0; i < nb; {
			first, last := g.pick(firstNames[:]), g.pick(lastNames[:])
			b = append(b[:0], "From: "...)
			b = append(b, first...)
			b = append(b, ' ')
			b = append(b, last...)
			b = append(b, " <"...)
			b = append(b, strings.ToLower(first)...)
			b = append(b, '.')
			b = append(b, strings.ToLower(last)...)
			b = append(b, '@')
			b = append(b, g.dom.emailDomain...)
			b = append(b, ">\nSent: "...)
			day, minute := next()
			b = appendDate(b, g.year, day, ps.dateStyle)
			b = append(b, ' ')
			b = stamp(b, minute)
			b = append(b, '\n')
			pre[i] = string(b)
			end := min(nb, i+1+g.intn(3))
			suf[end-1] = "\nRegards,\n" + first
			i = end
		}
	case fmtFieldNotes:
		for i := range nb {
			b = append(b[:0], "Entry "...)
			b = strconv.AppendInt(b, int64(i+1), 10)
			b = append(b, ", "...)
			day, _ := next()
			b = appendDate(b, g.year, day, ps.dateStyle)
			b = append(b, ": "...)
			pre[i] = string(b)
		}
	case fmtMemo:
		if nb > 0 {
			b = append(b[:0], "\nSigned, "...)
			b = g.person(b)
			suf[nb-1] = string(b)
		}
	}
	return pre, suf
}
