package procedural

// trace records the world model behind a generated set so tests can check
// its properties against the text. Generation never builds one unless asked.
type trace struct {
	domain *domain
	parts  [3]partTrace
	// scratch for the part being rendered
	factText []string
	factPara []int
	// wordings names the wording each question was drawn with (case and
	// index), in generation order.
	wordings []string
	// curNums records the numbers the polarity-neutral numeric phrasings
	// of the part being rendered showed.
	curNums []numObs
}

// numObs is one number a numeric check phrasing showed: the check, whether
// the candidate failed it, the number, and whether the phrasing counts
// what is missing (lost, clean, absent) rather than what is present.
type numObs struct {
	crit    criterion
	neg     bool
	n       int
	missing bool
}

type candTrace struct {
	e          entity
	fails      uint8
	link       int
	tag        string
	tagVerb    string
	refStyle   uint8
	linkInline bool
	val        int64
}

type factTrace struct {
	kind  factKind
	kind2 factKind // fkNone unless the sentence is compound
	cand  int
	other int       // the candidate an fkSame fact relates to, or -1
	rel   criterion // the check it relates
	text  string
	para  int // block index in the narrative ("\n\n"-separated, 0 = header)
}

type partTrace struct {
	format                       formatID
	target, effTarget            int
	level                        int
	stage                        *stage
	truth, attrib, misled, decoy int
	group                        []int
	cands                        []candTrace
	facts                        []factTrace
	prelimFact, reviseFact       int
	misledFact                   int
	keyCands                     [][]int
	t1, t2                       int64
	rule                         bool
	nums                         []numObs
	causalPass                   uint8
	thr                          [nCrit]int
}

func (g *gen) tracePart(ps *partState) {
	pt := &g.tr.parts[ps.idx]
	pt.format, pt.target, pt.effTarget, pt.level, pt.stage = ps.fmt, ps.target, ps.effTarget, ps.level, ps.st
	pt.truth, pt.attrib, pt.misled, pt.decoy = ps.truth, ps.attrib, ps.misled, ps.decoy
	pt.group = append([]int(nil), ps.group...)
	for i := range ps.cands {
		c := &ps.cands[i]
		ct := candTrace{e: c.e, fails: c.fails, link: c.link, tag: c.tag, refStyle: c.refStyle, linkInline: c.linkInline, val: c.val}
		if ps.idx < 2 {
			ct.tagVerb = ps.st.tagVerbs[c.tagVerb]
		}
		pt.cands = append(pt.cands, ct)
	}
	for i, f := range ps.facts {
		pt.facts = append(pt.facts, factTrace{kind: f.kind, kind2: f.kind2, cand: int(f.cand), other: int(f.other) - 1, rel: f.rel, text: g.tr.factText[i], para: g.tr.factPara[i]})
	}
	pt.prelimFact, pt.reviseFact, pt.misledFact = ps.prelimFact, ps.reviseFact, ps.misledFact
	pt.keyCands = ps.keyCands
	pt.t1, pt.t2, pt.rule = ps.t1, ps.t2, ps.need.rule
	pt.nums = append([]numObs(nil), g.tr.curNums...)
	pt.causalPass = ps.causalPass
	pt.thr = ps.thr
}

func (g *gen) traceNum(cr criterion, neg bool, n int, missing bool) {
	if g.tr != nil {
		g.tr.curNums = append(g.tr.curNums, numObs{crit: cr, neg: neg, n: n, missing: missing})
	}
}
