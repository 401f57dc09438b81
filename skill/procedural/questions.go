package procedural

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

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

// passedPhrase lists, in a random order, the checks in s (bits of the
// persistence, replication and spread checks) as passed: "persisted,
// replicated in re-tests and appeared at every lab".
func (g *gen) passedPhrase(p phrases, s uint8) string {
	var cl []string
	for _, i := range g.perm(3) {
		cr := [3]criterion{crPersist, crRepl, crWide}[i]
		if s&bit(cr) == 0 {
			continue
		}
		switch cr {
		case crPersist:
			cl = append(cl, "persisted")
		case crRepl:
			cl = append(cl, "replicated in "+p.rep)
		default:
			cl = append(cl, "appeared at every "+p.siteNoun)
		}
	}
	switch len(cl) {
	case 0:
		return "was flagged"
	case 1:
		return cl[0]
	case 2:
		return cl[0] + " and " + cl[1]
	}
	return cl[0] + ", " + cl[1] + " and " + cl[2]
}

// question builds one question of kind k and returns the candidates whose
// facts it rests on. Every case has several wordings, drawn per question.
func (g *gen) question(ps *partState, k qkind) (skill.Question, []int, error) {
	p := g.phrases(ps)
	cs := ps.cands
	st := ps.st
	first := ps.idx == 0
	wording := -1
	pick := func(ws ...string) string {
		wording = g.intn(len(ws))
		return ws[wording]
	}
	hl, highest := "highest", true
	if g.intn(2) == 0 {
		hl, highest = "lowest", false
	}
	early, earliest, order := "earliest", true, "first"
	if g.intn(2) == 0 {
		early, earliest, order = "latest", false, "last"
	}
	doc := docNames[ps.fmt]
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
	causal := g.passedPhrase(p, ps.causalPass)
	var q skill.Question
	var keys []int
	var others []int // the other candidates an entity question weighs
	var labels []label
	var labelAns *label
	switch k {
	case qkind{skill.Negation, skill.EntityAnswer}:
		if first {
			q.Question = pick(
				"Which "+p.kind+" is the only one whose "+p.sig+" did not fade over time, did not fail to replicate in "+p.rep+", was not confined to a single "+p.siteNoun+", and was not traced to an outside cause?",
				"Leaving aside every "+p.kind+" whose "+p.sig+" faded, failed to replicate, stayed at one "+p.siteNoun+" or had an outside explanation, which "+p.kind+" is left?",
				"Which "+p.kind+" is it whose "+p.sig+" neither faded, nor failed to replicate, nor stayed at one "+p.siteNoun+", nor turned out to have an outside cause?")
		} else {
			q.Question = pick(
				"Among "+p.group+", which one's "+p.sig+" did not fade, did not fail to replicate, was not confined to one "+p.siteNoun+" and was not traced to an outside cause?",
				"Which of "+p.group+" had its "+p.sig+" not transient, not a one-off in "+p.rep+", not limited to one "+p.siteNoun+" and not explained by an outside factor?")
		}
		setEntity(&q, &cs[ps.truth])
		keys = []int{ps.truth}
	case qkind{skill.MultiHop, skill.EntityAnswer}:
		if first {
			q.Question = pick(
				"The "+p.truthRef[4:]+" shares its "+p.catDim+" with exactly one other "+p.kind+". Which "+p.kind+" is that?",
				"Exactly one other "+p.kind+" has the same "+p.catDim+" as "+p.truthRef+". Which one?")
			setEntity(&q, &cs[ps.twin])
			keys = []int{ps.truth, ps.twin}
		} else {
			q.Question = pick(
				"Which "+p.kind+" "+st.linkSg+" the "+ps.prev.st.kind+" "+p.prevRef+
					" and also passed all four checks: persistence over time, replication in "+p.rep+", presence at every "+p.siteNoun+", and no outside cause?",
				"Of the "+p.kinds+" that "+st.linkPl+" the "+ps.prev.st.kind+" "+p.prevRef+", which one passed all four checks (persistence, replication in "+p.rep+", presence at every "+p.siteNoun+", no outside cause)?")
			setEntity(&q, &cs[ps.truth])
			keys = []int{ps.truth}
		}
	case qkind{skill.Comparison, skill.EntityAnswer}:
		w := extreme(cs, scope, highest)
		if first {
			q.Question = pick(
				"Among the "+p.kinds+" whose "+p.sig+" replicated in "+p.rep+", whatever else was found about them, which had the "+hl+" "+p.metric+"?",
				"Considering only the "+p.kinds+" whose "+p.sig+" replicated in "+p.rep+", regardless of the other checks, which one had the "+hl+" "+p.metric+"?")
		} else {
			q.Question = pick(
				"Among "+p.group+", which had the "+hl+" "+p.metric+"?",
				"Which of "+p.group+" recorded the "+hl+" "+p.metric+"?")
		}
		setEntity(&q, &cs[w])
		keys = scope
	case qkind{skill.Temporal, skill.EntityAnswer}:
		w := firstRecheck(cs, tscope, earliest)
		if first {
			q.Question = pick(
				"Which "+p.kind+" had the "+early+" "+p.recheck+", the follow-up that showed whether its "+p.sig+" had lasted?",
				"Of all the "+p.kinds+", which one was the "+order+" to have its "+p.recheck+" (the follow-up on whether its "+p.sig+" had lasted)?")
		} else {
			q.Question = pick(
				"Among "+p.group+", which had the "+early+" "+p.recheck+", the follow-up that showed whether its "+p.sig+" had lasted?",
				"Which of "+p.group+" was the "+order+" to have its "+p.recheck+", the follow-up on whether its "+p.sig+" had lasted?")
		}
		setEntity(&q, &cs[w])
		keys = tscope
	case qkind{skill.Causal, skill.EntityAnswer}:
		if first {
			q.Question = pick(
				"Which "+p.kind+"'s "+p.sig+" "+causal+", yet turned out to have an outside cause?",
				"One "+p.kind+"'s "+p.sig+" "+causal+" but was then traced to an outside cause. Which "+p.kind+" was it?")
		} else {
			q.Question = pick(
				"Among "+p.group+", which one's "+p.sig+" turned out to have an outside cause even though it "+causal+"?",
				"Which of "+p.group+" had its "+p.sig+" explained by an outside cause, although it "+causal+"?")
		}
		setEntity(&q, &cs[ps.attrib])
		keys = []int{ps.attrib}

	case qkind{skill.MultiHop, skill.NumericAnswer}:
		// Arithmetic over two facts: the standout's value against the
		// extreme value among all the other candidates.
		y := extreme(cs, without(all, ps.truth), highest)
		q.Question = pick(
			"By how much does the "+p.metric+" recorded for "+p.truthRef+" differ from the "+hl+" "+p.metric+" among the other "+p.kinds+"?",
			"Take "+p.truthRef+" and, among the other "+p.kinds+", the one with the "+hl+" "+p.metric+". What is the difference between their "+p.metric+" values?")
		setNumber(&q, &st.metric, absDiff(cs[ps.truth].val, cs[y].val))
		keys = []int{ps.truth, y}
	case qkind{skill.Comparison, skill.NumericAnswer}:
		other := ps.misled
		if first {
			q.Question = pick(
				"By how much does the "+p.metric+" of "+p.truthRef+" differ from that of the "+p.kind+" favoured in the early assessment that was later revised?",
				"What is the difference in "+p.metric+" between "+p.truthRef+" and the "+p.kind+" the early assessment favoured before it was revised?")
		} else {
			other = ps.attrib
			q.Question = pick(
				"Among "+p.group+", by how much does the "+p.metric+" of the one that passed all four checks differ from that of the one whose "+p.sig+" had an outside cause?",
				"Within "+p.group+", what is the gap in "+p.metric+" between the one that passed all four checks and the one whose "+p.sig+" was traced to an outside cause?")
		}
		setNumber(&q, &st.metric, absDiff(cs[ps.truth].val, cs[other].val))
		keys = []int{ps.truth, other}
	case qkind{skill.Temporal, skill.NumericAnswer}:
		q.Question = pick(
			"How many days passed between the early assessment that was later revised and the "+p.recheck+" at which the "+p.sig+" of "+p.truthRef+" was still present?",
			"Counting from the early assessment that was later revised, how many days later came the "+p.recheck+" that still found the "+p.sig+" of "+p.truthRef+"?")
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
			q.Question = pick(
				"How many of the "+p.kinds+" did not "+verb+"?",
				"Of the "+p.kinds+", how many failed to "+verb+"?")
			setCount(&q, n)
		} else {
			y := extreme(cs, without(all, ps.truth), highest)
			q.Question = pick(
				"Among "+p.group+", take the one whose "+p.sig+" neither faded, nor failed to replicate, nor stayed at one "+p.siteNoun+", nor had an outside cause. By how much does its "+p.metric+" differ from the "+hl+" "+p.metric+" among the other "+p.kinds+" of this "+doc+"?",
				"Within "+p.group+", one "+p.kind+"'s "+p.sig+" did not fade, did not fail to replicate, was not confined to one "+p.siteNoun+" and had no outside cause. What is the gap between its "+p.metric+" and the "+hl+" "+p.metric+" among the other "+p.kinds+" of this "+doc+"?")
			setNumber(&q, &st.metric, absDiff(cs[ps.truth].val, cs[y].val))
			keys = []int{ps.truth, y}
		}
	case qkind{skill.Conditional, skill.NumericAnswer}:
		q.Question = pick(
			"Under the "+st.tierDim+" rule set out in the "+doc+", what "+st.intervalNoun+", in days, applies to "+p.truthRef+"?",
			"Applying the "+doc+"'s "+st.tierDim+" rule to "+p.truthRef+", how many days is its "+st.intervalNoun+"?")
		setInt(&q, ps.intervals[tierOf(&st.metric, cs[ps.truth].val, ps.t1, ps.t2)], "days")
		keys = []int{ps.truth}
	case qkind{skill.Causal, skill.NumericAnswer}:
		y := extreme(cs, without(all, ps.attrib), highest)
		if first {
			q.Question = pick(
				"By how much does the "+p.metric+" of the "+p.kind+" whose "+p.sig+" "+causal+" but was traced to an outside cause differ from the "+hl+" "+p.metric+" among the other "+p.kinds+"?",
				"One "+p.kind+"'s "+p.sig+" "+causal+", yet had an outside cause. What is the gap between its "+p.metric+" and the "+hl+" "+p.metric+" among the other "+p.kinds+"?")
		} else {
			q.Question = pick(
				"Among "+p.group+", take the one whose "+p.sig+" had an outside cause. By how much does its "+p.metric+" differ from the "+hl+" "+p.metric+" among the other "+p.kinds+" of this "+doc+"?",
				"Within "+p.group+", one "+p.kind+"'s "+p.sig+" was traced to an outside cause. What is the gap between its "+p.metric+" and the "+hl+" "+p.metric+" among the other "+p.kinds+" of this "+doc+"?")
		}
		setNumber(&q, &st.metric, absDiff(cs[ps.attrib].val, cs[y].val))
		keys = []int{ps.attrib, y}

	case qkind{skill.Conditional, skill.LabelAnswer}:
		q.Question = pick(
			"Applying the "+st.tierDim+" rule stated in the "+doc+", which "+st.tierDim+" applies to "+p.truthRef+"?",
			"Under the "+doc+"'s "+st.tierDim+" rule, which "+st.tierDim+" does "+p.truthRef+" fall into?")
		labelAns = &st.tiers[tierOf(&st.metric, cs[ps.truth].val, ps.t1, ps.t2)]
		labels = st.tiers[:]
		keys = []int{ps.truth}
	case qkind{skill.Causal, skill.LabelAnswer}:
		if first {
			q.Question = pick(
				"What outside factor explained the "+p.sig+" of the "+p.kind+" that otherwise "+causal+"?",
				"One "+p.kind+"'s "+p.sig+" "+causal+" yet had an outside explanation. What was that explanation?")
		} else {
			q.Question = pick(
				"Among "+p.group+", one "+p.kind+"'s "+p.sig+" had an outside explanation. What was that explanation?",
				"Which outside factor accounted for the "+p.sig+" of one of "+p.group+"?")
		}
		labelAns = &st.causes[cs[ps.attrib].cause]
		labels = st.causes
		keys = []int{ps.attrib}
	case qkind{skill.MultiHop, skill.LabelAnswer}:
		q.Question = pick(
			"What "+p.catDim+" was recorded for "+p.truthRef+"?",
			"Which "+p.catDim+" is logged for "+p.truthRef+"?")
		labelAns = &st.cats[cs[ps.truth].cat]
		keys = []int{ps.truth}
	case qkind{skill.Negation, skill.LabelAnswer}:
		if first {
			q.Question = pick(
				"What "+p.catDim+" was recorded for the "+p.kind+" "+p.truthNeg+"?",
				"Which "+p.catDim+" is logged for the "+p.kind+" "+p.truthNeg+"?")
		} else {
			q.Question = pick(
				"Among "+p.group+", what "+p.catDim+" was recorded for the one whose "+p.sig+" neither faded, nor failed to replicate, nor stayed at one "+p.siteNoun+", nor had an outside cause?",
				"Within "+p.group+", which "+p.catDim+" is logged for the one whose "+p.sig+" did not fade, did not fail to replicate, was not confined to one "+p.siteNoun+" and had no outside cause?")
		}
		labelAns = &st.cats[cs[ps.truth].cat]
		keys = []int{ps.truth}
	case qkind{skill.Comparison, skill.LabelAnswer}:
		w := extreme(cs, scope, highest)
		if first {
			q.Question = pick(
				"What "+p.catDim+" was recorded for the "+p.kind+" with the "+hl+" "+p.metric+" among those whose "+p.sig+" replicated in "+p.rep+"?",
				"Of the "+p.kinds+" whose "+p.sig+" replicated in "+p.rep+", take the one with the "+hl+" "+p.metric+". What "+p.catDim+" was recorded for it?")
		} else {
			q.Question = pick(
				"What "+p.catDim+" was recorded for the one with the "+hl+" "+p.metric+" among "+p.group+"?",
				"Of "+p.group+", take the one with the "+hl+" "+p.metric+". Which "+p.catDim+" is logged for it?")
		}
		labelAns = &st.cats[cs[w].cat]
		keys = scope
	case qkind{skill.Temporal, skill.LabelAnswer}:
		w := firstRecheck(cs, tscope, earliest)
		if first {
			q.Question = pick(
				"What "+p.catDim+" was recorded for the "+p.kind+" with the "+early+" "+p.recheck+" (the follow-up on whether its "+p.sig+" had lasted)?",
				"Take the "+p.kind+" that was the "+order+" to have its "+p.recheck+" (the follow-up on whether its "+p.sig+" had lasted). What "+p.catDim+" was recorded for it?")
		} else {
			q.Question = pick(
				"What "+p.catDim+" was recorded for the one with the "+early+" "+p.recheck+" among "+p.group+"?",
				"Of "+p.group+", take the one that was the "+order+" to have its "+p.recheck+". Which "+p.catDim+" is logged for it?")
		}
		labelAns = &st.cats[cs[w].cat]
		keys = tscope
	default:
		return q, nil, fmt.Errorf("%w: no question for %s/%s", errInternal, k.rt, k.at)
	}
	switch k.at {
	case skill.EntityAnswer:
		win := -1
		for i := range cs {
			if cs[i].e.code == q.Answer {
				win = i
			}
		}
		for i := range cs {
			if i != win {
				others = append(others, i)
			}
		}
		setEntityDistractors(&q, cs, others)
	case skill.LabelAnswer:
		setLabel(&q, labelAns)
		if labels == nil {
			labels = st.cats
		}
		setLabelDistractors(&q, labels, labelAns)
	}
	q.Question += " " + g.formHint(ps, k, labelAns)
	if g.tr != nil {
		g.tr.wordings = append(g.tr.wordings, wordingKey(k, first, wording))
	}
	return q, keys, nil
}

// formHint tells the prover what form the answer takes (issue 13): the
// label as the document names it, a number without its unit, a code or a
// name for an entity.
func (g *gen) formHint(ps *partState, k qkind, l *label) string {
	st := ps.st
	doc := docNames[ps.fmt]
	switch k.at {
	case skill.EntityAnswer:
		return g.pick([]string{
			"Answer with its code or name.",
			"Name the " + st.kind + " as the " + doc + " refers to it.",
			"Give the " + st.kind + "'s identifier or name.",
		})
	case skill.LabelAnswer:
		switch {
		case k.rt == skill.Conditional:
			return g.pick([]string{
				"Give the " + st.tierDim + " as the rule names it.",
				"Answer with the " + st.tierDim + " as the " + doc + " names it.",
			})
		case k.rt == skill.Causal:
			return g.pick([]string{
				"Name the factor as the " + doc + " does.",
				"Answer with the factor as the " + doc + " names it.",
			})
		}
		return g.pick([]string{
			"Give the " + st.catDim + " as recorded.",
			"Answer with the " + st.catDim + " as the " + doc + " records it.",
		})
	}
	switch {
	case k.rt == skill.Negation && ps.idx == 0:
		return g.pick([]string{"Answer with a number.", "Give the count as a number."})
	case k.rt == skill.Temporal || k.rt == skill.Conditional:
		return g.pick([]string{"Answer with the number of days only.", "Give the number of days as a plain number."})
	case st.metric.unit == "":
		return g.pick([]string{"Answer with the number only.", "Give the value as a plain number."})
	}
	return g.pick([]string{"Answer with the number only, without the unit.", "Give the number alone, without its unit."})
}

func wordingKey(k qkind, first bool, w int) string {
	pos := "later"
	if first {
		pos = "first"
	}
	return string(k.rt) + "/" + string(k.at) + "/" + pos + "#" + strconv.Itoa(w)
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

// without returns xs less x, in a new slice.
func without(xs []int, x int) []int {
	out := make([]int, 0, len(xs))
	for _, v := range xs {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}

func absDiff(a, b int64) int64 {
	if a < b {
		return b - a
	}
	return a - b
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
	q.Answers = entityAnswers(&c.e)
	q.Answer = q.Answers[0]
}

// entityAnswers lists an entity's accepted forms: the code (canonical),
// its full name, its description (the alias the narrative uses, without
// the article) and the other spellings of its code.
func entityAnswers(e *entity) []string {
	vs := make([]string, 0, len(e.variants)+2)
	vs = append(vs, e.code)
	if e.full != "" {
		vs = append(vs, e.full)
	}
	vs = append(vs, e.desc)
	vs = append(vs, e.variants...)
	return answerVariants(vs...)
}

func setLabel(q *skill.Question, l *label) {
	q.Answers = labelAnswers(l)
	q.Answer = q.Answers[0]
}

// labelAnswers lists a label's accepted forms: the label, its listed
// variants and, for causes, the phrase the narrative states it with (also
// without its leading article).
func labelAnswers(l *label) []string {
	vs := make([]string, 0, len(l.variants)+2)
	vs = append(vs, l.variants...)
	if l.phrase != l.text {
		vs = append(vs, l.phrase, stripArticle(l.phrase))
	}
	return answerVariants(vs...)
}

func stripArticle(s string) string {
	for _, a := range [...]string{"a ", "an ", "the "} {
		if strings.HasPrefix(s, a) {
			return s[len(a):]
		}
	}
	return s
}

// answerVariants keeps the accepted forms: non-empty, at most
// skill.MaxAnswerBytes, distinct after normalisation, at most
// skill.MaxVariants (the first, canonical, form must also fit
// skill.MaxAnswerChars, which the tables guarantee).
func answerVariants(vs ...string) []string {
	out := make([]string, 0, min(len(vs), skill.MaxVariants))
	keys := make([]string, 0, cap(out))
	for _, v := range vs {
		if v == "" || len(v) > skill.MaxAnswerBytes {
			continue
		}
		k := normKey(v)
		if slices.Contains(keys, k) {
			continue
		}
		out, keys = append(out, v), append(keys, k)
		if len(out) == skill.MaxVariants {
			break
		}
	}
	return out
}

// normKey is skill.Normalize, with a fast path for ASCII (where the
// normalisation is trimming and lower-casing).
func normKey(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return skill.Normalize(s)
		}
	}
	return strings.ToLower(strings.TrimSpace(s))
}

// distractors collects a question's distractors: every form of every
// other candidate it weighs, none equal to an accepted answer after
// normalisation, at most skill.MaxDistractors.
type distractors struct {
	out, keys, answers []string
}

func newDistractors(q *skill.Question) *distractors {
	d := &distractors{}
	for _, v := range q.Variants() {
		d.answers = append(d.answers, normKey(v))
	}
	return d
}

func (d *distractors) add(s string) {
	if s == "" || len(s) > skill.MaxAnswerBytes || len(d.out) == skill.MaxDistractors {
		return
	}
	k := normKey(s)
	if slices.Contains(d.answers, k) || slices.Contains(d.keys, k) {
		return
	}
	d.out, d.keys = append(d.out, s), append(d.keys, k)
}

// setEntityDistractors lists the other candidates: codes first, then
// full names, descriptions and the other spellings, so the cap drops the
// least likely forms.
func setEntityDistractors(q *skill.Question, cs []cand, others []int) {
	d := newDistractors(q)
	for _, i := range others {
		d.add(cs[i].e.code)
	}
	for _, i := range others {
		d.add(cs[i].e.full)
	}
	for _, i := range others {
		d.add(cs[i].e.desc)
	}
	for _, i := range others {
		for _, v := range cs[i].e.variants {
			d.add(v)
		}
	}
	q.Distractors = d.out
}

// setLabelDistractors lists every other label of the family (the other
// causes, categories or tiers), labels and narrative phrases first.
func setLabelDistractors(q *skill.Question, ls []label, right *label) {
	d := newDistractors(q)
	for i := range ls {
		if &ls[i] != right {
			d.add(ls[i].text)
		}
	}
	for i := range ls {
		if &ls[i] != right && ls[i].phrase != ls[i].text {
			d.add(ls[i].phrase)
		}
	}
	for i := range ls {
		if &ls[i] != right {
			for _, v := range ls[i].variants {
				d.add(v)
			}
		}
	}
	q.Distractors = d.out
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
