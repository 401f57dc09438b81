package procedural

import (
	"errors"
	"math/rand/v2"
	"slices"

	"github.com/acaptcha/acaptcha/skill"
)

// The four implicit checks every candidate is judged on.
type criterion uint8

const (
	crPersist   criterion = iota // the deviation persisted over time
	crRepl                       // it replicated in independent runs
	crIntrinsic                  // no external cause explains it
	crWide                       // it appeared at every site, not one
	nCrit
)

func bit(c criterion) uint8 { return 1 << c }

type factKind uint8

const (
	fkPersistPos factKind = iota
	fkPersistNeg
	fkReplPos
	fkReplNeg
	fkIntrinsic
	fkAttrib
	fkWide
	fkLocal
	fkValue
	fkFirst
	fkTag
	fkLink
	fkCat
	fkNeutral
	fkPrelim
	fkRevise
	fkRule
	fkBridge
	fkProfile // value, plus the category and flag date when present
	fkNone    factKind = 255
)

// positive/negative fact kind for each criterion.
var critFacts = [nCrit][2]factKind{
	{fkPersistPos, fkPersistNeg},
	{fkReplPos, fkReplNeg},
	{fkIntrinsic, fkAttrib},
	{fkWide, fkLocal},
}

// fact is one statement; kind2 != fkNone makes it a compound sentence
// stating two checks of the same candidate.
type fact struct {
	kind, kind2 factKind
	cand        int8
}

type cand struct {
	e         entity
	fails     uint8
	val       int64
	first     int // day offsets from the part's start date
	recheck   int // distinct per candidate: temporal questions order them
	attribDay int
	cause     int
	site      int
	nRep      int
	cat       int
	tag       string
	tagVerb   int
	tagInline bool
	link      int
	linkInline bool // the link is a relative clause at the first mention
	profile    bool // value/category/flag date in one sentence
	refStyle  uint8
	extra     int
	mentions  int
}

type needs struct {
	cat, rule, intervals, twin bool
}

type qkind struct {
	rt skill.ReasoningType
	at skill.AnswerType
}

type partState struct {
	idx  int
	st   *stage
	prev *partState

	n                                            int
	cands                                        []cand
	truth, attrib, decoy, zed, misled, twin      int
	group                                        []int
	misledFact                                   int
	fmt                                          formatID
	dateStyle, start, kSites                     int
	sites                                        []int
	sigQ, repIdx, recheckIdx                     int
	t1, t2                                       int64
	prelimDay                                    int
	flagDates                                    bool
	intervals                                    [3]int
	qk                                           []qkind
	need                                         needs
	facts                                        []fact
	paras                                        [][]int
	target                                       int // sampled length in tokens
	effTarget                                    int // raised when the content alone is longer
	level                                        int
	narrative                                    string
	questions                                    []skill.Question
	keyCands                                     [][]int
	prelimFact, reviseFact, ruleFact, bridgeFact int
}

type fixedNum struct {
	v   int64
	dec int
}

type gen struct {
	r      *rand.Rand
	gtor   *Generator
	dom    *domain
	year   int
	parts  [3]partState
	tr     *trace
	forbid []fixedNum
}

func newGen(gt *Generator, seed uint64, tr *trace) *gen {
	return &gen{r: rand.New(rand.NewPCG(seed, seed^0xda3e39cb94b95bdb)), gtor: gt, tr: tr}
}

func (g *gen) intn(n int) int {
	if n <= 1 {
		return 0
	}
	return g.r.IntN(n)
}

func (g *gen) int64n(n int64) int64 {
	if n <= 1 {
		return 0
	}
	return g.r.Int64N(n)
}

func (g *gen) pick(ss []string) string { return ss[g.intn(len(ss))] }

func (g *gen) perm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := g.intn(i + 1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}

func (g *gen) forbidden(v int64, dec int) bool {
	for _, f := range g.forbid {
		if f.v == v && f.dec == dec {
			return true
		}
	}
	return false
}

var errInternal = errors.New("internal consistency check failed")

// levelWords are the target word counts from which density levels 1..3
// apply; compoundPercent is each level's share of compound sentences.
var (
	levelWords      = [4]int{0, 360, 520, 700}
	compoundPercent = [4]int{100, 60, 30, 10}
)

func (g *gen) run() (*skill.Set, error) {
	g.dom = g.gtor.domains[g.intn(len(g.gtor.domains))]
	g.year = 2019 + g.intn(8)
	var targets [skill.Parts]int
	for p := range targets {
		targets[p] = g.gtor.minTok + g.intn(g.gtor.maxTok-g.gtor.minTok+1)
	}
	plan := g.planQuestions(g.gtor.qpp, targets)
	fp := g.perm(int(nFormats))
	set := &skill.Set{Domain: g.dom.name, Parts: make([]skill.Part, skill.Parts)}
	if g.tr != nil {
		g.tr.domain = g.dom
	}
	for p := range skill.Parts {
		ps := &g.parts[p]
		ps.idx = p
		ps.st = &g.dom.stages[p]
		if p > 0 {
			ps.prev = &g.parts[p-1]
		}
		ps.fmt = formatID(fp[p])
		ps.qk = plan[p]
		ps.target = targets[p]
		if err := g.buildPart(ps); err != nil {
			return nil, err
		}
		set.Parts[p] = skill.Part{Narrative: ps.narrative, Questions: ps.questions}
		for _, q := range ps.questions {
			if q.AnswerType == skill.NumericAnswer {
				if v, dec, ok := parseFixed(q.Answer); ok && dec > 0 {
					g.forbid = append(g.forbid, fixedNum{v, dec})
				}
			}
		}
		if g.tr != nil {
			g.tracePart(ps)
		}
	}
	return set, nil
}

func parseFixed(s string) (v int64, dec int, ok bool) {
	seenDot := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			v = v*10 + int64(c-'0')
			if seenDot {
				dec++
			}
		case c == '.' && !seenDot:
			seenDot = true
		default:
			return 0, 0, false
		}
	}
	return v, dec, len(s) > 0
}

// planQuestions assigns reasoning and answer types: distinct reasoning
// types within a part, all six across the set (when qpp >= 2), one entity,
// one numeric and one label answer per part (when qpp >= 3) or across the
// set (when qpp < 3). Conditional questions never ask for an entity.
//
// Temporal questions need flag dates, conditional ones a stated rule and
// most label questions category facts; the part with the longest target
// takes the costliest reasoning types, so short parts stay short.
func (g *gen) planQuestions(qpp int, targets [skill.Parts]int) [skill.Parts][]qkind {
	var plan [skill.Parts][]qkind
	rts := skill.ReasoningTypes
	ats := skill.AnswerTypes
	order := g.perm(len(rts))
	byLength := g.perm(skill.Parts)
	slices.SortStableFunc(byLength, func(a, b int) int { return targets[b] - targets[a] })
	short := func(p int) bool { return wordsFor(targets[p]) < levelWords[2] }
	if qpp >= 2 {
		// Pair up the six types, costliest pair to the longest part.
		pairs := [][2]skill.ReasoningType{{rts[order[0]], rts[order[1]]}, {rts[order[2]], rts[order[3]]}, {rts[order[4]], rts[order[5]]}}
		slices.SortStableFunc(pairs, func(a, b [2]skill.ReasoningType) int { return rtCost(b) - rtCost(a) })
		for i, p := range byLength {
			plan[p] = append(plan[p], qkind{rt: pairs[i][0]}, qkind{rt: pairs[i][1]})
		}
	} else {
		for i, p := range byLength {
			plan[p] = append(plan[p], qkind{rt: rts[order[i]]})
		}
	}
	for p := range skill.Parts {
		for _, k := range g.perm(len(rts)) {
			if len(plan[p]) >= qpp {
				break
			}
			rt := rts[k]
			if short(p) && rtCost([2]skill.ReasoningType{rt}) > 0 {
				continue
			}
			if !slices.ContainsFunc(plan[p], func(q qkind) bool { return q.rt == rt }) {
				plan[p] = append(plan[p], qkind{rt: rt})
			}
		}
		for _, k := range g.perm(len(rts)) { // long parts, or qpp > 4
			if len(plan[p]) >= qpp {
				break
			}
			if rt := rts[k]; !slices.ContainsFunc(plan[p], func(q qkind) bool { return q.rt == rt }) {
				plan[p] = append(plan[p], qkind{rt: rt})
			}
		}
	}
	valid := func(k qkind) bool { return !(k.rt == skill.Conditional && k.at == skill.EntityAnswer) }
	if qpp >= 3 {
		perms := [6][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
		for p := range skill.Parts {
			start := g.intn(6)
			best, bestCost := -1, 1<<30
			for t := range 6 {
				pm := perms[(start+t)%6]
				ok := true
				ks := make([]qkind, 3)
				for i := range 3 {
					ks[i] = qkind{plan[p][i].rt, ats[pm[i]]}
					ok = ok && valid(ks[i])
				}
				if !ok {
					continue
				}
				c := 0
				if short(p) {
					c = needsOf(p, ks).cost()
				}
				if c < bestCost {
					best, bestCost = (start+t)%6, c
				}
			}
			for i := range 3 {
				plan[p][i].at = ats[perms[best][i]]
			}
			for i := 3; i < len(plan[p]); i++ {
				plan[p][i].at = ats[g.intn(3)]
				if !valid(plan[p][i]) {
					plan[p][i].at = skill.LabelAnswer
				}
			}
		}
		return plan
	}
	// Fewer than three per part: spread the three answer types over the
	// set's slots, entity first so it avoids the conditional slot.
	type slot struct{ p, i int }
	var slots []slot
	for p := range skill.Parts {
		for i := range plan[p] {
			slots = append(slots, slot{p, i})
		}
	}
	for i := len(slots) - 1; i > 0; i-- {
		j := g.intn(i + 1)
		slots[i], slots[j] = slots[j], slots[i]
	}
	done := make([]bool, len(slots))
	for _, at := range []skill.AnswerType{skill.EntityAnswer, skill.NumericAnswer, skill.LabelAnswer} {
		for si, s := range slots {
			if !done[si] && valid(qkind{plan[s.p][s.i].rt, at}) {
				plan[s.p][s.i].at = at
				done[si] = true
				break
			}
		}
	}
	for si, s := range slots {
		if !done[si] {
			plan[s.p][s.i].at = ats[g.intn(3)]
			if !valid(plan[s.p][s.i]) {
				plan[s.p][s.i].at = skill.LabelAnswer
			}
		}
	}
	return plan
}

// rtCost is the extra text a pair of reasoning types makes a part carry.
func rtCost(rs [2]skill.ReasoningType) int {
	c := 0
	for _, r := range rs {
		switch r {
		case skill.Conditional:
			c += 40
		}
	}
	return c
}

// needsOf lists the optional facts a part's questions require.
func needsOf(part int, ks []qkind) needs {
	var n needs
	for _, k := range ks {
		if k.rt == skill.Conditional {
			n.rule = true
			n.intervals = n.intervals || k.at == skill.NumericAnswer
		}
		if k.at == skill.LabelAnswer && k.rt != skill.Conditional && k.rt != skill.Causal {
			n.cat = true
		}
		if k.rt == skill.MultiHop && k.at == skill.EntityAnswer && part == 0 {
			n.cat, n.twin = true, true
		}
	}
	return n
}

// cost estimates the words the optional facts add.
func (n needs) cost() int {
	c := 0
	if n.rule {
		c += 25
	}
	if n.intervals {
		c += 12
	}
	if n.cat {
		c += 20
	}
	return c
}

// buildPart plans the world of one part, its questions and its text.
func (g *gen) buildPart(ps *partState) error {
	ps.need = needsOf(ps.idx, ps.qk)
	// Density levels trade world size against length: level 0 states two
	// checks per sentence for four candidates; level 3 has up to six
	// candidates, mostly one check per sentence and extra mentions.
	words := wordsFor(ps.target)
	level := 3
	switch {
	case words < levelWords[1]:
		level = 0
	case words < levelWords[2]:
		level = 1
	case words < levelWords[3]:
		level = 2
	}
	for attempt := 0; ; attempt++ {
		ps.level = level
		ps.n = 4
		switch {
		case level == 2:
			ps.n = 4 + g.intn(2)
		case level == 3 && words < levelWords[3]+150:
			ps.n = 5
		case level == 3:
			ps.n = 5 + g.intn(2)
		}
		g.planWorld(ps)
		g.planFacts(ps)
		g.layout(ps)
		over, err := g.renderPart(ps)
		if err != nil {
			return err
		}
		if !over || level == 0 || attempt > 2 {
			break
		}
		level--
	}
	return g.buildQuestions(ps)
}

func (g *gen) randFails(notOnlyIntrinsic bool) uint8 {
	for {
		f := bit(criterion(g.intn(int(nCrit))))
		if g.intn(10) < 3 {
			f |= bit(criterion(g.intn(int(nCrit))))
		}
		if notOnlyIntrinsic && f == bit(crIntrinsic) {
			continue
		}
		return f
	}
}

func (g *gen) randFailsNoIntrinsic() uint8 {
	others := [3]criterion{crPersist, crRepl, crWide}
	f := bit(others[g.intn(3)])
	if g.intn(10) < 3 {
		f |= bit(others[g.intn(3)])
	}
	return f
}

func (g *gen) planWorld(ps *partState) {
	st := ps.st
	n := ps.n
	ps.cands = make([]cand, n)
	cs := ps.cands
	var used usedSet
	for i := range cs {
		for try := 0; ; try++ {
			e := st.names(g, &used)
			if try > 8 || !codeTaken(cs[:i], e.code) {
				cs[i].e = e
				break
			}
		}
		cs[i].cause, cs[i].link = -1, -1
	}
	perm := g.perm(n)
	ps.truth, ps.attrib = perm[0], perm[1]
	cs[ps.attrib].fails = bit(crIntrinsic)
	ps.decoy, ps.zed, ps.group = -1, -1, nil
	if ps.idx == 0 {
		for _, i := range perm[2:] {
			cs[i].fails = g.randFails(true)
		}
	} else {
		ps.decoy, ps.zed = perm[2], perm[3]
		cs[ps.zed].fails = bit(crIntrinsic)
		ps.group = []int{ps.truth, ps.attrib}
		for _, i := range perm[4:] {
			if len(ps.group) < 3 && g.intn(2) == 0 {
				cs[i].fails = g.randFailsNoIntrinsic()
				ps.group = append(ps.group, i)
			} else {
				cs[i].fails = g.randFails(false)
			}
		}
		g.planLinks(ps)
	}
	// The candidate the misleading preliminary conclusion favours.
	var pool []int
	for i := range cs {
		if cs[i].fails != 0 {
			pool = append(pool, i)
		}
	}
	ps.misled = pool[g.intn(len(pool))]

	// Timeline (day offsets): first flags 0..20, the interim view 21..28,
	// persistence re-checks (distinct, so they can be ordered) and
	// attributions afterwards, all within 90 days.
	ps.start = g.intn(365 - 100)
	ps.dateStyle = g.intn(nDateStyles)
	if ps.level == 0 {
		ps.dateStyle = dateISO
	}
	firsts := g.perm(21)
	rechecks := g.perm(50)
	ps.prelimDay = 21 + g.intn(8)
	ps.flagDates = ps.level >= 2 && g.intn(10) < 6
	ps.kSites = 3 + g.intn(3)
	ps.sites = g.perm(len(st.sites))[:ps.kSites]
	ps.sigQ = g.intn(len(st.sig))
	ps.repIdx = g.intn(len(st.rep))
	ps.recheckIdx = g.intn(len(st.recheck))
	causes := g.perm(len(st.causes))
	nc := 0
	for i := range cs {
		c := &cs[i]
		c.first = firsts[i]
		c.recheck = 35 + rechecks[i]
		c.attribDay = 32 + g.intn(50)
		c.nRep = 3 + g.intn(3)
		c.site = ps.sites[g.intn(ps.kSites)]
		if c.fails&bit(crIntrinsic) != 0 {
			c.cause = causes[nc%len(causes)]
			nc++
		}
		c.cat = g.intn(len(st.cats))
		if ps.idx < 2 {
			c.tag = g.tagCode(st, cs[:i])
			c.tagVerb = g.intn(len(st.tagVerbs))
			c.tagInline = ps.level == 0 || g.intn(2) == 0
		}
		c.linkInline = ps.idx > 0 && (ps.level == 0 || g.intn(10) < 4)
		c.profile = ps.level == 0 || g.intn(10) < 3
	}
	ps.twin = -1
	if ps.need.twin {
		t := cs[ps.truth].cat
		var others []int
		for i := range cs {
			if i != ps.truth {
				others = append(others, i)
			}
		}
		ps.twin = others[g.intn(len(others))]
		for _, i := range others {
			if i == ps.twin {
				cs[i].cat = t
			} else if cs[i].cat == t {
				cs[i].cat = (t + 1 + g.intn(len(st.cats)-1)) % len(st.cats)
			}
		}
	}
	g.sampleValues(ps)
	if ps.need.rule {
		g.planRule(ps)
	}
	// Neutral extra mentions keep mention counts uninformative: every
	// candidate draws from the same distribution, and the misled one's
	// interim/revision mentions count towards its draw.
	maxExtra := ps.level
	if w := wordsFor(ps.target); w > 1000 {
		maxExtra += min((w-1000)/300, 4)
	}
	for i := range cs {
		e := g.intn(maxExtra + 1)
		if i == ps.misled {
			e -= 2
		}
		cs[i].extra = max(e, 0)
	}
}

func codeTaken(cs []cand, code string) bool {
	for i := range cs {
		if cs[i].e.code == code {
			return true
		}
	}
	return false
}

func (g *gen) tagCode(st *stage, prev []cand) string {
	for {
		code := g.pick(st.tagPrefixes) + "-" + g.digits(st.tagDigits)
		dup := false
		for i := range prev {
			if prev[i].tag == code {
				dup = true
			}
		}
		if !dup {
			return code
		}
	}
}

// planLinks ties each candidate of a later part to a candidate of the
// previous part. The standout's group links to the previous standout; a
// decoy that passes every local check links elsewhere, so the part cannot
// be solved without the earlier answer.
func (g *gen) planLinks(ps *partState) {
	prev := ps.prev
	cs := ps.cands
	var others []int
	for _, i := range g.perm(prev.n) {
		if i != prev.truth {
			others = append(others, i)
		}
	}
	for _, i := range ps.group {
		cs[i].link = prev.truth
	}
	if ps.idx == 1 {
		cs[ps.decoy].link = others[0]
	} else {
		cs[ps.decoy].link = prev.decoy
	}
	k := 1
	for i := range cs {
		if cs[i].link < 0 {
			cs[i].link = others[k%len(others)]
			k++
		}
	}
	for i := range cs {
		cs[i].refStyle = uint8(g.intn(2))
	}
}

// sampleValues draws distinct metric values that never sit on a threshold
// step, never end in zero, and avoid earlier numeric answers.
func (g *gen) sampleValues(ps *partState) {
	m := &ps.st.metric
	span := m.hi - m.lo
	gap := max(span/30, 1)
	for i := range ps.cands {
		var v int64
		for try := 0; try < 200; try++ {
			v = m.lo + g.int64n(span+1)
			if v%10 == 0 || v%m.step == 0 || g.forbidden(v, m.dec) {
				continue
			}
			ok := true
			for j := range i {
				if d := v - ps.cands[j].val; d < gap && d > -gap {
					ok = false
					break
				}
			}
			if ok {
				break
			}
		}
		ps.cands[i].val = v
	}
}

// planRule picks tier thresholds around the standout's value so that each
// tier is equally likely to be the answer.
func (g *gen) planRule(ps *partState) {
	m := &ps.st.metric
	v := ps.cands[ps.truth].val
	step := m.step
	down := func(x int64) int64 { return x / step * step }
	up := func(x int64) int64 { return (x/step + 1) * step }
	frac := func(x int64, lo, hi int) int64 { return x * int64(lo+g.intn(hi-lo+1)) / 1000 }
	start := g.intn(3)
	for k := range 3 {
		tier := (start + k) % 3
		var t1, t2 int64
		if !m.lowSevere {
			switch tier {
			case 2:
				t2 = down(frac(v, 550, 900))
				t1 = down(frac(t2, 400, 750))
			case 1:
				t1 = down(frac(v, 500, 900))
				t2 = up(frac(v, 1100, 1600))
			default:
				t1 = up(frac(v, 1100, 1500))
				t2 = up(frac(t1, 1300, 1800))
			}
		} else {
			switch tier {
			case 2:
				t2 = up(frac(v, 1100, 1600))
				t1 = up(frac(t2, 1400, 2200))
			case 1:
				t2 = down(frac(v, 500, 900))
				t1 = up(frac(v, 1100, 1600))
			default:
				t1 = down(frac(v, 500, 900))
				t2 = down(frac(t1, 300, 700))
			}
		}
		if t1 < step || t2 < step || t1 == t2 || tierOf(m, v, t1, t2) != tier ||
			g.forbidden(t1, m.dec) || g.forbidden(t2, m.dec) {
			continue
		}
		ps.t1, ps.t2 = t1, t2
		ps.intervals = [3]int{28 + g.intn(33), 10 + g.intn(12), 2 + g.intn(6)}
		return
	}
	// Fallback for values too close to the range floor: tier 0 always
	// fits, with thresholds moved off any earlier answer.
	if !m.lowSevere {
		ps.t1 = up(v)
		for g.forbidden(ps.t1, m.dec) {
			ps.t1 += step
		}
		ps.t2 = ps.t1 + 2*step
		for g.forbidden(ps.t2, m.dec) {
			ps.t2 += step
		}
	} else {
		ps.t1 = down(v)
		ps.t2 = ps.t1 - 2*step
		for ps.t2 >= step && g.forbidden(ps.t2, m.dec) {
			ps.t2 -= step
		}
		ps.t2 = max(ps.t2, step)
		for ps.t1 <= ps.t2 || g.forbidden(ps.t1, m.dec) {
			ps.t1 += step
		}
	}
	ps.intervals = [3]int{28 + g.intn(33), 10 + g.intn(12), 2 + g.intn(6)}
}

// tierOf applies the stated rule: 2 = most severe.
func tierOf(m *metricSpec, v, t1, t2 int64) int {
	if !m.lowSevere {
		switch {
		case v > t2:
			return 2
		case v > t1:
			return 1
		}
		return 0
	}
	switch {
	case v < t2:
		return 2
	case v < t1:
		return 1
	}
	return 0
}

// planFacts lists every statement of the part. Each candidate gets one
// statement per check (positive or negative), its value, its tag or link,
// and the optional dates and categories the questions need.
func (g *gen) planFacts(ps *partState) {
	ps.facts = ps.facts[:0]
	ps.prelimFact, ps.reviseFact, ps.ruleFact, ps.bridgeFact = -1, -1, -1, -1
	ps.misledFact = -1
	add := func(k factKind, c int) int {
		ps.facts = append(ps.facts, fact{kind: k, kind2: fkNone, cand: int8(c)})
		return len(ps.facts) - 1
	}
	compound := compoundPercent[ps.level]
	// The misled candidate's revision cites one of its failed checks.
	var mfails []criterion
	for cr := range nCrit {
		if ps.cands[ps.misled].fails&bit(cr) != 0 {
			mfails = append(mfails, cr)
		}
	}
	mcrit := mfails[g.intn(len(mfails))]
	for i := range ps.cands {
		c := &ps.cands[i]
		kindOf := func(cr criterion) factKind {
			if c.fails&bit(cr) != 0 {
				return critFacts[cr][1]
			}
			return critFacts[cr][0]
		}
		order := g.perm(int(nCrit))
		for j := 0; j < int(nCrit); j += 2 {
			a, b := criterion(order[j]), criterion(order[j+1])
			misA, misB := i == ps.misled && a == mcrit, i == ps.misled && b == mcrit
			if !misA && !misB && g.intn(100) < compound {
				ps.facts = append(ps.facts, fact{kind: kindOf(a), kind2: kindOf(b), cand: int8(i)})
				continue
			}
			ka, kb := add(kindOf(a), i), add(kindOf(b), i)
			if misA {
				ps.misledFact = ka
			}
			if misB {
				ps.misledFact = kb
			}
		}
		if c.profile {
			add(fkProfile, i)
		} else {
			add(fkValue, i)
			if ps.flagDates {
				add(fkFirst, i)
			}
			if ps.need.cat {
				add(fkCat, i)
			}
		}
		if ps.idx < 2 && !c.tagInline {
			add(fkTag, i)
		}
		if ps.idx > 0 && !c.linkInline {
			add(fkLink, i)
		}
		for range c.extra {
			add(fkNeutral, i)
		}
	}
	ps.prelimFact = add(fkPrelim, ps.misled)
	ps.reviseFact = add(fkRevise, ps.misled)
	if ps.need.rule {
		ps.ruleFact = add(fkRule, -1)
	}
	if ps.idx > 0 && (ps.level > 0 || g.intn(2) == 0) {
		ps.bridgeFact = add(fkBridge, -1)
	}
}
