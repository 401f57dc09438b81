package procedural

import (
	"fmt"
	"strconv"

	"github.com/acaptcha/acaptcha/skill"
)

// buildQuestions derives every question and its answers from the world
// model. From part 2 on, every question is scoped to the candidates tied
// to the previous part's standout, so it needs the earlier answers.
func (g *gen) buildQuestions(ps *partState) error {
	ps.questions = make([]skill.Question, 0, len(ps.qk))
	ps.keyCands = ps.keyCands[:0]
	var dep []int
	switch ps.idx {
	case 1:
		dep = []int{1}
	case 2:
		dep = []int{1, 2}
	}
	for _, k := range ps.qk {
		q, keys, err := g.question(ps, k)
		if err != nil {
			return err
		}
		q.ReasoningType, q.AnswerType = k.rt, k.at
		if dep != nil {
			q.DependsOn = append([]int(nil), dep...)
		}
		if q.Answer != q.Answers[0] {
			return fmt.Errorf("%w: canonical answer is not the first variant", errInternal)
		}
		ps.questions = append(ps.questions, q)
		ps.keyCands = append(ps.keyCands, keys)
	}
	for i := len(ps.questions) - 1; i > 0; i-- {
		j := g.intn(i + 1)
		ps.questions[i], ps.questions[j] = ps.questions[j], ps.questions[i]
		ps.keyCands[i], ps.keyCands[j] = ps.keyCands[j], ps.keyCands[i]
	}
	return nil
}

type phrases struct {
	kind, kinds, sig, rep, siteNoun, metric, catDim, recheck string
	truthRef, truthNeg, group, prevRef                       string
}

func (g *gen) phrases(ps *partState) phrases {
	st := ps.st
	p := phrases{
		kind: st.kind, kinds: st.kinds, sig: st.sig[ps.sigQ], rep: st.rep[ps.repIdx],
		siteNoun: st.siteNoun, metric: st.metric.name, catDim: st.catDim, recheck: st.recheck[ps.recheckIdx],
	}
	if ps.idx == 0 {
		switch g.intn(3) {
		case 0:
			p.truthRef = "the " + p.kind + " whose " + p.sig + " persisted over time, replicated in " + p.rep + ", appeared at every " + p.siteNoun + " and had no outside cause"
		case 1:
			p.truthRef = "the " + p.kind + " that passed all four checks (its " + p.sig + " persisted, replicated in " + p.rep + ", was seen at every " + p.siteNoun + ", and had no external explanation)"
		default:
			p.truthRef = "the " + p.kind + " whose " + p.sig + " held up on every count: persistent, reproducible, present at every " + p.siteNoun + ", and not explained by anything external"
		}
		if g.intn(2) == 0 {
			p.truthNeg = "whose " + p.sig + " neither faded over time, nor failed to replicate, nor stayed confined to one " + p.siteNoun + ", nor turned out to have an outside cause"
		} else {
			p.truthNeg = "that was not tripped up by fading, by a failed replication, by confinement to one " + p.siteNoun + ", or by an external cause"
		}
		return p
	}
	prev := ps.prev.st
	var prevRef string
	if ps.idx == 1 {
		switch g.intn(3) {
		case 0:
			prevRef = "that held up under every check in the first report"
		case 1:
			prevRef = "that stood apart from the rest of its panel in the first report"
		default:
			prevRef = "whose " + prev.sig[0] + " survived every check in the first report"
		}
	} else {
		if g.intn(2) == 0 {
			prevRef = "that, in the second report, passed every check and " + prev.linkSg + " the " + ps.prev.prev.st.kind + " singled out in the first"
		} else {
			prevRef = "that came through every check in the second report while being tied to the first report's standout " + ps.prev.prev.st.kind
		}
	}
	p.prevRef = prevRef
	p.group = "the " + p.kinds + " that " + st.linkPl + " the " + prev.kind + " " + prevRef
	p.truthRef = "the " + p.kind + " that passed all four checks (persistence, replication in " + p.rep + ", presence at every " + p.siteNoun +
		", no outside cause) and " + st.linkSg + " the " + prev.kind + " " + prevRef
	return p
}

// question builds one question of kind k and returns the candidates whose
// facts it rests on.
func (g *gen) question(ps *partState, k qkind) (skill.Question, []int, error) {
	p := g.phrases(ps)
	cs := ps.cands
	st := ps.st
	first := ps.idx == 0
	hl, highest := "highest", true
	if g.intn(2) == 0 {
		hl, highest = "lowest", false
	}
	early, earliest := "earliest", true
	if g.intn(2) == 0 {
		early, earliest = "latest", false
	}
	// scope: the candidates a comparison or ordering question ranges over.
	var scope []int
	if first {
		for i := range cs {
			if cs[i].fails&bit(crRepl) == 0 {
				scope = append(scope, i)
			}
		}
	} else {
		scope = ps.group
	}
	var all []int
	for i := range cs {
		all = append(all, i)
	}
	tscope := all
	if !first {
		tscope = ps.group
	}
	var q skill.Question
	var keys []int
	switch k {
	case qkind{skill.Negation, skill.EntityAnswer}:
		if first {
			if g.intn(2) == 0 {
				q.Question = "Which " + p.kind + " is the only one whose " + p.sig + " did not fade over time, did not fail to replicate in " + p.rep + ", was not confined to a single " + p.siteNoun + ", and was not traced to an outside cause?"
			} else {
				q.Question = "Leaving aside every " + p.kind + " whose " + p.sig + " faded, failed to replicate, stayed at one " + p.siteNoun + " or had an outside explanation, which " + p.kind + " is left?"
			}
		} else {
			q.Question = "Among " + p.group + ", which one's " + p.sig + " did not fade, did not fail to replicate, was not confined to one " + p.siteNoun + " and was not traced to an outside cause?"
		}
		setEntity(&q, &cs[ps.truth])
		keys = []int{ps.truth}
	case qkind{skill.MultiHop, skill.EntityAnswer}:
		if first {
			q.Question = "The " + p.truthRef[4:] + " shares its " + p.catDim + " with exactly one other " + p.kind + ". Which " + p.kind + " is that?"
			setEntity(&q, &cs[ps.twin])
			keys = []int{ps.truth, ps.twin}
		} else {
			q.Question = "Which " + p.kind + " " + st.linkSg + " the " + ps.prev.st.kind + " " + p.prevRef +
				" and also passed all four checks: persistence over time, replication in " + p.rep + ", presence at every " + p.siteNoun + ", and no outside cause?"
			setEntity(&q, &cs[ps.truth])
			keys = []int{ps.truth}
		}
	case qkind{skill.Comparison, skill.EntityAnswer}:
		w := extreme(cs, scope, highest)
		if first {
			q.Question = "Among the " + p.kinds + " whose " + p.sig + " replicated in " + p.rep + ", whatever else was found about them, which had the " + hl + " " + p.metric + "?"
		} else {
			q.Question = "Among " + p.group + ", which had the " + hl + " " + p.metric + "?"
		}
		setEntity(&q, &cs[w])
		keys = scope
	case qkind{skill.Temporal, skill.EntityAnswer}:
		w := firstRecheck(cs, tscope, earliest)
		if first {
			q.Question = "Which " + p.kind + " had the " + early + " " + p.recheck + ", the follow-up that showed whether its " + p.sig + " had lasted?"
		} else {
			q.Question = "Among " + p.group + ", which had the " + early + " " + p.recheck + ", the follow-up that showed whether its " + p.sig + " had lasted?"
		}
		setEntity(&q, &cs[w])
		keys = tscope
	case qkind{skill.Causal, skill.EntityAnswer}:
		if first {
			q.Question = "Which " + p.kind + "'s " + p.sig + " persisted, replicated and appeared at every " + p.siteNoun + ", yet turned out to have an outside cause?"
		} else {
			q.Question = "Among " + p.group + ", which one's " + p.sig + " turned out to have an outside cause even though it persisted, replicated and appeared at every " + p.siteNoun + "?"
		}
		setEntity(&q, &cs[ps.attrib])
		keys = []int{ps.attrib}

	case qkind{skill.MultiHop, skill.NumericAnswer}:
		q.Question = "What " + p.metric + " was recorded for " + p.truthRef + "?"
		setNumber(&q, &st.metric, cs[ps.truth].val)
		keys = []int{ps.truth}
	case qkind{skill.Comparison, skill.NumericAnswer}:
		other := ps.misled
		if first {
			q.Question = "By how much does the " + p.metric + " of " + p.truthRef + " differ from that of the " + p.kind + " favoured in the early assessment that was later revised?"
		} else {
			other = ps.attrib
			q.Question = "Among " + p.group + ", by how much does the " + p.metric + " of the one that passed all four checks differ from that of the one whose " + p.sig + " had an outside cause?"
		}
		d := cs[ps.truth].val - cs[other].val
		if d < 0 {
			d = -d
		}
		setNumber(&q, &st.metric, d)
		keys = []int{ps.truth, other}
	case qkind{skill.Temporal, skill.NumericAnswer}:
		q.Question = "How many days passed between the early assessment that was later revised and the " + p.recheck + " at which the " + p.sig + " of " + p.truthRef + " was still present?"
		setInt(&q, cs[ps.truth].recheck-ps.prelimDay, "days")
		keys = []int{ps.truth}
	case qkind{skill.Negation, skill.NumericAnswer}:
		if first {
			cr, verb := g.countCriterion(ps, p)
			n := 0
			for i := range cs {
				if cs[i].fails&bit(cr) != 0 {
					n++
					keys = append(keys, i)
				}
			}
			q.Question = "How many of the " + p.kinds + " did not " + verb + "?"
			setCount(&q, n)
		} else {
			q.Question = "Among " + p.group + ", what " + p.metric + " belongs to the one whose " + p.sig + " neither faded, nor failed to replicate, nor stayed at one " + p.siteNoun + ", nor had an outside cause?"
			setNumber(&q, &st.metric, cs[ps.truth].val)
			keys = []int{ps.truth}
		}
	case qkind{skill.Conditional, skill.NumericAnswer}:
		q.Question = "Under the " + st.tierDim + " rule set out in the " + docNames[ps.fmt] + ", what " + st.intervalNoun + ", in days, applies to " + p.truthRef + "?"
		setInt(&q, ps.intervals[tierOf(&st.metric, cs[ps.truth].val, ps.t1, ps.t2)], "days")
		keys = []int{ps.truth}
	case qkind{skill.Causal, skill.NumericAnswer}:
		if first {
			q.Question = "What " + p.metric + " was recorded for the " + p.kind + " whose " + p.sig + " persisted, replicated and appeared at every " + p.siteNoun + " but was traced to an outside cause?"
		} else {
			q.Question = "Among " + p.group + ", what " + p.metric + " was recorded for the one whose " + p.sig + " had an outside cause?"
		}
		setNumber(&q, &st.metric, cs[ps.attrib].val)
		keys = []int{ps.attrib}

	case qkind{skill.Conditional, skill.LabelAnswer}:
		q.Question = "Applying the " + st.tierDim + " rule stated in the " + docNames[ps.fmt] + ", which " + st.tierDim + " applies to " + p.truthRef + "?"
		setLabel(&q, &st.tiers[tierOf(&st.metric, cs[ps.truth].val, ps.t1, ps.t2)])
		keys = []int{ps.truth}
	case qkind{skill.Causal, skill.LabelAnswer}:
		if first {
			q.Question = "What outside factor explained the " + p.sig + " of the " + p.kind + " that otherwise persisted, replicated and appeared at every " + p.siteNoun + "?"
		} else {
			q.Question = "Among " + p.group + ", one " + p.kind + "'s " + p.sig + " had an outside explanation. What was that explanation?"
		}
		setLabel(&q, &st.causes[cs[ps.attrib].cause])
		keys = []int{ps.attrib}
	case qkind{skill.MultiHop, skill.LabelAnswer}:
		q.Question = "What " + p.catDim + " was recorded for " + p.truthRef + "?"
		setLabel(&q, &st.cats[cs[ps.truth].cat])
		keys = []int{ps.truth}
	case qkind{skill.Negation, skill.LabelAnswer}:
		if first {
			q.Question = "What " + p.catDim + " was recorded for the " + p.kind + " " + p.truthNeg + "?"
		} else {
			q.Question = "Among " + p.group + ", what " + p.catDim + " was recorded for the one whose " + p.sig + " neither faded, nor failed to replicate, nor stayed at one " + p.siteNoun + ", nor had an outside cause?"
		}
		setLabel(&q, &st.cats[cs[ps.truth].cat])
		keys = []int{ps.truth}
	case qkind{skill.Comparison, skill.LabelAnswer}:
		w := extreme(cs, scope, highest)
		if first {
			q.Question = "What " + p.catDim + " was recorded for the " + p.kind + " with the " + hl + " " + p.metric + " among those whose " + p.sig + " replicated in " + p.rep + "?"
		} else {
			q.Question = "What " + p.catDim + " was recorded for the one with the " + hl + " " + p.metric + " among " + p.group + "?"
		}
		setLabel(&q, &st.cats[cs[w].cat])
		keys = scope
	case qkind{skill.Temporal, skill.LabelAnswer}:
		w := firstRecheck(cs, tscope, earliest)
		if first {
			q.Question = "What " + p.catDim + " was recorded for the " + p.kind + " with the " + early + " " + p.recheck + " (the follow-up on whether its " + p.sig + " had lasted)?"
		} else {
			q.Question = "What " + p.catDim + " was recorded for the one with the " + early + " " + p.recheck + " among " + p.group + "?"
		}
		setLabel(&q, &st.cats[cs[w].cat])
		keys = tscope
	default:
		return q, nil, fmt.Errorf("%w: no question for %s/%s", errInternal, k.rt, k.at)
	}
	return q, keys, nil
}

// countCriterion picks a check (persistence, replication or spread) that
// at least one candidate failed, for "how many did not ..." questions.
func (g *gen) countCriterion(ps *partState, p phrases) (criterion, string) {
	crs := []criterion{crPersist, crRepl, crWide}
	start := g.intn(3)
	for k := range 3 {
		cr := crs[(start+k)%3]
		for i := range ps.cands {
			if ps.cands[i].fails&bit(cr) != 0 {
				switch cr {
				case crPersist:
					return cr, "keep their " + p.sig + " through to the " + p.recheck
				case crRepl:
					return cr, "reproduce their " + p.sig + " in " + p.rep
				default:
					return cr, "show their " + p.sig + " at more than one " + p.siteNoun
				}
			}
		}
	}
	// Unreachable: some distractor always fails one of the three.
	return crRepl, "reproduce their " + p.sig + " in " + p.rep
}

func extreme(cs []cand, scope []int, highest bool) int {
	w := scope[0]
	for _, i := range scope[1:] {
		if (highest && cs[i].val > cs[w].val) || (!highest && cs[i].val < cs[w].val) {
			w = i
		}
	}
	return w
}

func firstRecheck(cs []cand, scope []int, earliest bool) int {
	w := scope[0]
	for _, i := range scope[1:] {
		if (earliest && cs[i].recheck < cs[w].recheck) || (!earliest && cs[i].recheck > cs[w].recheck) {
			w = i
		}
	}
	return w
}

func setEntity(q *skill.Question, c *cand) {
	q.Answers = append([]string(nil), c.e.variants...)
	q.Answer = q.Answers[0]
}

func setLabel(q *skill.Question, l *label) {
	q.Answers = variants(l.variants...)
	q.Answer = q.Answers[0]
}

func setNumber(q *skill.Question, m *metricSpec, v int64) {
	s := fixedString(v, m.dec)
	vs := []string{s}
	if m.unit != "" {
		vs = append(vs, s+m.unit)
	}
	for _, u := range m.unitAlt {
		vs = append(vs, s+u)
	}
	for _, pre := range m.prefixAlt {
		vs = append(vs, pre+s)
	}
	q.Answers = variants(vs...)
	q.Answer = s
}

func setInt(q *skill.Question, n int, unit string) {
	s := strconv.Itoa(n)
	q.Answers = variants(s, s+" "+unit)
	q.Answer = s
}

func setCount(q *skill.Question, n int) {
	s := strconv.Itoa(n)
	vs := []string{s}
	if n < len(smallWords) {
		vs = append(vs, smallWords[n])
	}
	q.Answers = variants(vs...)
	q.Answer = s
}
