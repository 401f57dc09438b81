package procedural

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

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
	fkProfile              // value, plus the category and flag date when present
	fkEarly                // a neutral early mention, of any candidate
	fkSame                 // the candidate's outcome on check rel equals that of candidate other-1
	fkCritPersist          // the part's bar for persistence
	fkCritRepl             // the part's bar for replication
	fkNone        factKind = 255
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
	other       int8      // 1 + a second candidate the sentence names ({y}), or 0
	rel         criterion // the check an fkSame fact relates
}

type cand struct {
	e          entity
	fails      uint8
	val        int64
	first      int // day offsets from the part's start date
	recheck    int // distinct per candidate: temporal questions order them
	attribDay  int
	cause      int
	site       int
	nRep       int
	cat        int
	tag        string
	tagVerb    int
	tagInline  bool
	link       int
	linkInline bool // the link is a relative clause at the first mention
	profile    bool // value/category/flag date in one sentence
	refStyle   uint8
	extra      int
	mentions   int
	// The mention plan (see mention): how many times the part names the
	// candidate, at which mention the full name and the description are
	// paired with the code, where an inline tag goes, and which of the
	// forms the text has paired so far.
	nMentions, fullAt, descAt, tagAt int
	shown                            uint8
}

// Forms of a candidate's name, as bits of cand.shown.
const (
	formFull uint8 = 1 << iota
	formDesc
)

type needs struct {
	cat, rule, intervals, twin bool
}

type qkind struct {
	rt skill.ReasoningType
	at skill.AnswerType
}

// partState is the world model and output of one part.
type partState struct {
	idx  int // 0-based part index
	st   *stage
	prev *partState

	// World: candidates and their roles (indices into cands). truth passes
	// every check; attrib fails the external-cause check (and, in a third
	// of parts, one more); misled, favoured by the interim view, is any
	// candidate failing a check. From part 2 on, group is tied to the
	// previous truth and mirror (decoy passing every check, zed failing
	// only the external-cause check) to another previous candidate.
	n                                       int
	cands                                   []cand
	causalPass                              uint8 // checks besides the external-cause one that attrib passed
	truth, attrib, decoy, zed, misled, twin int
	group, mirror                           []int

	// thr[cr] is the stated bar for persistence (percent retained) or
	// replication (positive runs), 0 when the part states none.
	thr [nCrit]int

	// Timeline, sites and the tier rule.
	start, prelimDay, dateStyle, kSites int
	sites                               []int
	flagDates                           bool
	t1, t2                              int64
	intervals                           [3]int

	// Vocabulary choices fixed for the part.
	sigQ, repIdx, recheckIdx int
	fmt                      formatID

	// Questions and the facts they need.
	qk        []qkind
	need      needs
	questions []skill.Question
	keyCands  [][]int

	// Text: facts, their layout and the rendered narrative.
	facts                                                    []fact
	paras                                                    [][]int
	misledFact, prelimFact, reviseFact, ruleFact, bridgeFact int
	target, effTarget                                        int // sampled and achieved length in tokens
	level                                                    int // density level 0..3
	inlineLinks                                              bool
	neutralUsed                                              uint64
	narrative                                                string
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
		case level == 3 && words < levelWords[3]+60:
			ps.n = 5
		case level == 3:
			ps.n = 5 + g.intn(2)
		}
		if err := g.planWorld(ps); err != nil {
			return err
		}
		g.planFacts(ps)
		if level > 0 && attempt < 3 && estimateWords(ps) > words+words/50 {
			level--
			continue
		}
		g.layout(ps)
		if over := g.renderPart(ps); !over || level == 0 || attempt > 2 {
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

// randBit returns one of the bits set in mask, uniformly.
func (g *gen) randBit(mask uint8) uint8 {
	var bs [8]uint8
	n := 0
	for i := range 8 {
		if mask&(1<<i) != 0 {
			bs[n] = 1 << i
			n++
		}
	}
	return bs[g.intn(n)]
}

func (g *gen) randFailsNoIntrinsic() uint8 {
	others := [3]criterion{crPersist, crRepl, crWide}
	f := bit(others[g.intn(3)])
	if g.intn(10) < 3 {
		f |= bit(others[g.intn(3)])
	}
	return f
}

func (g *gen) planWorld(ps *partState) error {
	st := ps.st
	n := ps.n
	ps.cands = make([]cand, n)
	ps.inlineLinks, ps.neutralUsed = false, 0
	cs := ps.cands
	var used usedSet
	for i := range cs {
		for try := 0; ; try++ {
			e := st.names(g, &used)
			if !nameTaken(cs[:i], &e) {
				cs[i].e = e
				break
			}
			if try == maxNameTries {
				return fmt.Errorf("%w: %s: no distinct name for candidate %d", errInternal, st.kind, i+1)
			}
		}
		cs[i].cause, cs[i].link = -1, -1
	}
	perm := g.perm(n)
	ps.truth, ps.attrib = perm[0], perm[1]
	// The candidate with the outside cause fails that check and, in a
	// third of parts, one more; causal questions name the checks it passed.
	cs[ps.attrib].fails = bit(crIntrinsic)
	if g.intn(3) == 0 {
		cs[ps.attrib].fails |= bit([3]criterion{crPersist, crRepl, crWide}[g.intn(3)])
	}
	ps.causalPass = ^cs[ps.attrib].fails & (bit(crPersist) | bit(crRepl) | bit(crWide))
	ps.decoy, ps.zed, ps.group, ps.mirror = -1, -1, nil, nil
	if ps.idx == 0 {
		for _, i := range perm[2:] {
			cs[i].fails = g.randFails(true)
			// No other candidate with an outside cause passes every
			// check the causal questions name.
			if f := cs[i].fails; f&bit(crIntrinsic) != 0 && f&ps.causalPass == 0 {
				cs[i].fails |= g.randBit(ps.causalPass)
			}
		}
	} else {
		// Two clusters of the same shape: the standout's group, tied to
		// the previous standout, and a mirror group tied to another
		// previous candidate. Each has one candidate passing every check
		// and one failing only the external-cause check, so without the
		// earlier answer the clusters are indistinguishable.
		ps.decoy, ps.zed = perm[2], perm[3]
		cs[ps.zed].fails = cs[ps.attrib].fails
		ps.group = []int{ps.truth, ps.attrib}
		ps.mirror = []int{ps.decoy, ps.zed}
		rest := perm[4:]
		if n >= 6 && g.intn(2) == 0 {
			cs[perm[4]].fails = g.randFailsNoIntrinsic()
			cs[perm[5]].fails = g.randFailsNoIntrinsic()
			ps.group = append(ps.group, perm[4])
			ps.mirror = append(ps.mirror, perm[5])
			rest = perm[6:]
		}
		for _, i := range rest {
			cs[i].fails = g.randFails(false)
		}
		g.planLinks(ps, rest)
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
	// Parts follow each other: each starts 95 to 125 days after the
	// previous one (dates roll over into the next year when needed).
	if ps.prev == nil {
		ps.start = g.intn(300)
	} else {
		ps.start = ps.prev.start + 95 + g.intn(31)
	}
	ps.dateStyle = g.intn(nDateStyles)
	if ps.level == 0 {
		ps.dateStyle = dateISO
	}
	firsts := g.perm(21)
	rechecks := g.perm(50)
	ps.prelimDay = 21 + g.intn(8)
	ps.flagDates = ps.level >= 2 && g.intn(10) < 6
	// Stated bars: where a part has one, its persistence or replication
	// statements are measurements that only the bar turns into outcomes.
	// The densest parts (level 0) have no room for the bars.
	ps.thr = [nCrit]int{}
	if ps.level > 0 && g.intn(2) == 0 {
		ps.thr[crPersist] = 40 + 5*g.intn(9)
	}
	if ps.level > 0 && g.intn(2) == 0 {
		ps.thr[crRepl] = 2 + g.intn(2)
	}
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
		ps.inlineLinks = ps.inlineLinks || c.linkInline
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
	return nil
}

// maxNameTries bounds the redraws of a candidate whose name collides with
// an earlier one's; the smallest name space (funds' full names, 96 per
// description) makes a failure after 64 draws practically impossible.
const maxNameTries = 64

// nameTaken reports whether any form of e (code, full name, description,
// accepted variant) equals, ignoring case, a form of an earlier candidate:
// within a part every name must point at one candidate only.
func nameTaken(cs []cand, e *entity) bool {
	for i := range cs {
		o := &cs[i].e
		for _, a := range [3]string{e.code, e.full, e.desc} {
			if a != "" && (strings.EqualFold(a, o.code) || strings.EqualFold(a, o.full) || strings.EqualFold(a, o.desc) || containsFold(o.variants, a)) {
				return true
			}
		}
		for _, a := range e.variants {
			if strings.EqualFold(a, o.code) || strings.EqualFold(a, o.full) || strings.EqualFold(a, o.desc) || containsFold(o.variants, a) {
				return true
			}
		}
	}
	return false
}

func containsFold(ss []string, s string) bool {
	for _, x := range ss {
		if strings.EqualFold(x, s) {
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
// previous part: the standout's group to the previous standout, the
// mirror group to another previous candidate (in part 3, the part-2
// candidate that passed every check but was tied to the wrong part-1
// candidate), and the rest to further previous candidates, so that no
// previous candidate stands out by how often it is referred to.
func (g *gen) planLinks(ps *partState, rest []int) {
	prev := ps.prev
	cs := ps.cands
	var others []int
	for _, i := range g.perm(prev.n) {
		if i != prev.truth {
			others = append(others, i)
		}
	}
	x := others[0]
	if ps.idx == 2 {
		x = prev.decoy
	}
	for _, i := range ps.group {
		cs[i].link = prev.truth
	}
	for _, i := range ps.mirror {
		cs[i].link = x
	}
	var pool []int
	for _, i := range others {
		if i != x {
			pool = append(pool, i)
		}
	}
	w := pool[g.intn(len(pool))]
	for k, i := range rest {
		if k > 0 && g.intn(2) == 0 {
			w = pool[g.intn(len(pool))]
		}
		cs[i].link = w
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
	gap := max(span/30, 3) // room for a threshold strictly between any two values
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

// planRule places the two tier thresholds in gaps between the sorted
// candidate values, at round numbers, choosing gaps so that each tier is
// equally likely for the standout. Thresholds depend on the whole value
// distribution, not on the standout's value.
func (g *gen) planRule(ps *partState) {
	m := &ps.st.metric
	n := len(ps.cands)
	order := g.perm(n)
	slices.SortFunc(order, func(a, b int) int { return cmpInt64(ps.cands[a].val, ps.cands[b].val) })
	r := slices.Index(order, ps.truth)
	// gapBounds(i) is the open interval below sorted value i (i = n: above
	// the largest).
	gapBounds := func(i int) (int64, int64) {
		lo, hi := m.lo-m.step, m.hi+m.step
		if i > 0 {
			lo = ps.cands[order[i-1]].val
		}
		if i < n {
			hi = ps.cands[order[i]].val
		}
		return lo, hi
	}
	// Gap indices a <= b split the sorted values into three bands: below
	// gap a, between the gaps, from gap b on. Higher-is-severe maps bands
	// to tiers 0, 1, 2; lower-is-severe to 2, 1, 0. Splits that put every
	// candidate in one band are excluded, since the rule alone would then
	// give the answer.
	type split struct{ a, b int }
	var byBand [3][]split
	for a := 0; a <= n; a++ {
		for b := a; b <= n; b++ {
			if (a == 0 && b == 0) || a == n || (a == 0 && b == n) {
				continue
			}
			band := 1
			switch {
			case r < a:
				band = 0
			case r >= b:
				band = 2
			}
			byBand[band] = append(byBand[band], split{a, b})
		}
	}
	var bands []int
	for b := range byBand {
		if len(byBand[b]) > 0 {
			bands = append(bands, b)
		}
		// Prefer thresholds in different gaps; one gap holding both is
		// kept only when nothing else fits the band.
		var apart []split
		for _, sp := range byBand[b] {
			if sp.a < sp.b {
				apart = append(apart, sp)
			}
		}
		if len(apart) > 0 {
			byBand[b] = apart
		}
	}
	for try := 0; try < 8 && len(bands) > 0; try++ {
		ss := byBand[bands[g.intn(len(bands))]]
		sp := ss[g.intn(len(ss))]
		aLo, aHi := gapBounds(sp.a)
		ta, okA := g.roundIn(m, aLo, aHi)
		if !okA {
			continue
		}
		bLo, bHi := gapBounds(sp.b)
		if sp.a == sp.b {
			bLo = ta
		}
		tb, okB := g.roundIn(m, bLo, bHi)
		if !okB {
			continue
		}
		if m.lowSevere {
			ps.t2, ps.t1 = ta, tb
		} else {
			ps.t1, ps.t2 = ta, tb
		}
		ps.intervals = [3]int{28 + g.intn(33), 10 + g.intn(12), 2 + g.intn(6)}
		return
	}
	// Unreachable with four or more distinct values; keep a valid rule.
	ps.t1, ps.t2 = m.lo, m.hi
	if m.lowSevere {
		ps.t1, ps.t2 = m.hi, m.lo
	}
	ps.intervals = [3]int{28 + g.intn(33), 10 + g.intn(12), 2 + g.intn(6)}
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// roundIn picks the roundest number strictly inside (lo, hi) that is not
// an earlier answer: a multiple of the metric's step if one fits, else of
// a fifth of it, else of one unit in the last decimal.
func (g *gen) roundIn(m *metricSpec, lo, hi int64) (int64, bool) {
	for _, q := range []int64{m.step, max(m.step/5, 1), 1} {
		first := lo/q*q + q
		var cands []int64
		for v := first; v < hi && len(cands) < 16; v += q {
			if v > 0 && !g.forbidden(v, m.dec) {
				cands = append(cands, v)
			}
		}
		if len(cands) > 0 {
			return cands[g.intn(len(cands))], true
		}
	}
	return 0, false
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

// factWords is the mean rendered length of each fact kind, mention
// expansions included (measured over many sets).
var factWords = [...]int{
	fkPersistPos: 19, fkPersistNeg: 19, fkReplPos: 15, fkReplNeg: 19, fkIntrinsic: 17, fkAttrib: 20,
	fkWide: 14, fkLocal: 15, fkValue: 9, fkFirst: 11, fkTag: 9, fkLink: 15, fkCat: 10, fkNeutral: 12,
	fkPrelim: 21, fkRevise: 12, fkRule: 38, fkBridge: 17, fkProfile: 12, fkEarly: 11,
	fkSame: 16, fkCritPersist: 22, fkCritRepl: 19,
}

// estimateWords predicts a part's length without rendering it, so the
// density level can be lowered before any text is produced.
func estimateWords(ps *partState) int {
	w := 12
	for _, f := range ps.facts {
		switch {
		case f.kind2 != fkNone:
			w += 25
		case f.kind == fkRule && !ps.need.intervals:
			w += 22
		default:
			w += factWords[f.kind]
		}
	}
	for i := range ps.cands {
		if ps.cands[i].linkInline {
			w += 12
		}
	}
	w += 3 * len(ps.facts) / 4 // decorations, about one stamp or heading per paragraph
	if ps.level == 0 {
		w = w * 85 / 100
	}
	return w
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
	if ps.thr[crPersist] > 0 {
		add(fkCritPersist, -1)
	}
	if ps.thr[crRepl] > 0 {
		add(fkCritRepl, -1)
	}
	g.planRelations(ps)
	ps.prelimFact = add(fkPrelim, ps.misled)
	if g.intn(2) == 0 {
		// The interim view also names a candidate it weighed and set
		// aside (the standout as likely as any other).
		y := (ps.misled + 1 + g.intn(len(ps.cands)-1)) % len(ps.cands)
		ps.facts[ps.prelimFact].other = int8(y + 1)
	}
	ps.reviseFact = add(fkRevise, ps.misled)
	if ps.need.rule {
		ps.ruleFact = add(fkRule, -1)
	}
	if ps.idx > 0 && (ps.level > 0 || g.intn(2) == 0) {
		ps.bridgeFact = add(fkBridge, -1)
	}
	// A neutral early mention of a random candidate (the standout
	// included), so being named early says nothing by itself.
	if ps.level > 0 && g.intn(10) < 6 {
		add(fkEarly, g.intn(len(ps.cands)))
	}
}

// planRelations turns some single-check statements into relations with
// another candidate whose outcome on that check is the same and stated
// directly ("X fared in the re-tests exactly as Y did"): the outcome is
// then implied by two sentences, never stated. An outside cause or a
// single site is shared along with the outcome. The misled candidate's
// revised check stays stated, and a relation never points at another
// relation.
func (g *gen) planRelations(ps *partState) {
	if ps.level == 0 {
		return
	}
	n := len(ps.cands)
	// direct[c] has bit cr when candidate c's outcome on cr is stated.
	direct := make([]uint8, n)
	for _, f := range ps.facts {
		for cr := range nCrit {
			for _, k := range [2]factKind{f.kind, f.kind2} {
				if f.cand >= 0 && (k == critFacts[cr][0] || k == critFacts[cr][1]) {
					direct[f.cand] |= bit(cr)
				}
			}
		}
	}
	pinned := make([]uint8, n) // outcomes a relation points at
	for _, fi := range g.perm(len(ps.facts)) {
		f := &ps.facts[fi]
		if f.kind2 != fkNone || f.cand < 0 || fi == ps.misledFact || g.intn(100) >= 30 {
			continue
		}
		cr, ok := critOf(f.kind)
		if !ok || pinned[f.cand]&bit(cr) != 0 {
			continue
		}
		x := int(f.cand)
		var ys []int
		for y := range n {
			if y != x && direct[y]&bit(cr) != 0 && (ps.cands[y].fails^ps.cands[x].fails)&bit(cr) == 0 {
				// y must keep a direct statement of its own.
				if cnt := directCount(ps, y, cr); cnt > 0 {
					ys = append(ys, y)
				}
			}
		}
		if len(ys) == 0 {
			continue
		}
		y := ys[g.intn(len(ys))]
		*f = fact{kind: fkSame, kind2: fkNone, cand: int8(x), other: int8(y + 1), rel: cr}
		direct[x] &^= bit(cr)
		pinned[y] |= bit(cr)
		if ps.cands[x].fails&bit(cr) != 0 {
			switch cr {
			case crIntrinsic:
				ps.cands[x].cause = ps.cands[y].cause
			case crWide:
				ps.cands[x].site = ps.cands[y].site
			}
		}
	}
}

// directCount counts the facts stating candidate c's outcome on cr.
func directCount(ps *partState, c int, cr criterion) int {
	n := 0
	for _, f := range ps.facts {
		if int(f.cand) != c || f.kind == fkSame {
			continue
		}
		if f.kind == critFacts[cr][0] || f.kind == critFacts[cr][1] || f.kind2 == critFacts[cr][0] || f.kind2 == critFacts[cr][1] {
			n++
		}
	}
	return n
}

// critOf reports the check a single-check fact kind states.
func critOf(k factKind) (criterion, bool) {
	for cr := range nCrit {
		if k == critFacts[cr][0] || k == critFacts[cr][1] {
			return cr, true
		}
	}
	return 0, false
}
