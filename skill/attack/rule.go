package attack

import (
	"strings"

	"github.com/acaptcha/acaptcha/skill"
)

// The rule attackers read a stated rule the way a careless reader does.
// Conditional questions ask which label a rule gives a case ("which status
// does the station earn"), and the rule is usually one sentence, or a few
// lines, that map conditions to labels: "more than 24 gives red status, 19
// to 24 gives amber, and 18 or fewer gives green", "A deviation is critical
// when ...; major when ...; minor when isolated", "Closing codes are
// \"carrier fault\" where ..., \"external\" where ...". A writer who has the
// case in mind tends to state the case that applies first, so a script that
// finds the rule closest to the question and answers with the first label
// it states is right far more often than chance.
//
// rule-clause answers with the label after the first rule verb of that
// rule ("gives red status" -> "red status", "is classed competitive when"
// -> "competitive", "is reported as a control failure" -> "control
// failure"), or its first label when no verb introduces one;
// rule-list-first answers with the first label the rule states in any
// form (a quoted label, the first item of an enumeration after a colon,
// the first "Label: condition" line of a list, a label before "when").
// Both read the rules of the earlier parts of their session too. Neither
// knows any generator's templates: they read the grammar of rule
// statements, not a vocabulary of labels.

// ruleVerbs introduce the label of a rule clause.
var ruleVerbs = toSet(`is are gives give goes go gets get earns earn receives receive triggers trigger
leads lead becomes become stays stay remains remain returns return counts count carries carry ranks rank
rates rate classes class classifies classify falls fall moves move warrants warrant attracts attract merits
merit yields yield enters enter`)

// ruleParticiples follow a rule verb and come before the label ("is
// classed competitive", "is reported as a control failure", "is placed on
// watch"); they are skipped, never answered.
var ruleParticiples = toSet(`classed classified reported assessed recorded booked placed rated graded listed
labelled labeled coded closed filed logged designated categorised categorized scored assigned given treated
deemed considered counted entered put kept set returned moved sent ranked regarded judged declared called
termed named`)

// ruleSkip are words skipped between a rule verb and its label.
var ruleSkip = toSet(`as on onto to into in the a an still also then now only always automatically
normally usually simply instead straight directly immediately`)

// ruleStops end a label phrase.
var ruleStops = toSet(`when where if unless and or but while because since for with by from than so which
that who whose once after before until provided whenever wherever whereas though although except at in on
of to is are was were be otherwise more less`)

// ruleConditionStarts open a condition or an argument, not a label ("is
// under 0.1 s", "is at least 85%", "counts toward the trend").
var ruleConditionStarts = toSet(`under over above below beyond more less fewer greater higher lower at within
between from up down about around approximately roughly nearly almost exactly equal equals same similar
toward towards positive negative present absent found seen missing reproduced confirmed explained due caused
linked there it its they their this that these those he she we one two three four five six seven eight nine
ten any all each every both either some`)

// ruleCondOpeners open a clause that states a condition before its label
// ("by 1.0 to 3.0 points, a warning notice", "otherwise, no exception").
var ruleCondOpeners = toSet(`when where if unless otherwise else whenever above below under over beyond
least most more less fewer by in from at within between for with up`)

// ruleConds open an elliptical rule clause's condition ("moderate when
// ...", "low otherwise").
var ruleConds = toSet(`when where if unless once whenever wherever otherwise`)

// ruleConditionWords mark a clause as conditional.
var ruleConditionWords = toSet(`when where if unless otherwise else whenever above below under over least
most more less fewer exceeds exceed exceeding threshold thresholds cutoff between within`)

// ruleMaxLabelWords bounds a label phrase.
const ruleMaxLabelWords = 4

// ruleLabel is one label a rule states.
type ruleLabel struct {
	text string
	tok  int
	verb bool // stands after a rule verb
}

// ruleSpan is a rule: a sentence, or a run of rule lines, of one
// narrative, with its labels in text order.
type ruleSpan struct {
	d          *doc
	start, end int // token range
	labels     []ruleLabel
	score      float64
}

func ruleClauseStrategy(s *Session, d *doc, q *question, _ *skill.Challenge) (string, string) {
	r := bestRule(s, d, q)
	if r == nil {
		return fallback, ""
	}
	for _, l := range r.labels {
		if l.verb {
			return l.text, ""
		}
	}
	return r.labels[0].text, ""
}

func ruleListFirstStrategy(s *Session, d *doc, q *question, _ *skill.Challenge) (string, string) {
	r := bestRule(s, d, q)
	if r == nil {
		return fallback, ""
	}
	return r.labels[0].text, ""
}

// ruleEarlierWeight discounts the rules of earlier narratives: a part
// usually states the rule its questions apply.
const ruleEarlierWeight = 0.7

// bestRule returns the rule of the narrative, or of the session's earlier
// narratives, that best overlaps the question; nil when none states one.
func bestRule(s *Session, d *doc, q *question) *ruleSpan {
	var best *ruleSpan
	try := func(d *doc, weight float64) {
		for _, r := range rules(d, q) {
			r.score *= weight
			if best == nil || r.score > best.score {
				rr := r
				best = &rr
			}
		}
	}
	try(d, 1)
	if s != nil {
		for i := len(s.rounds) - 1; i >= 0; i-- {
			if e := s.rounds[i].d; e != nil && e.text != d.text {
				try(e, ruleEarlierWeight)
			}
		}
	}
	return best
}

// rules lists the rules of d, scored by how rule-like they are and by
// their IDF-weighted overlap with the question (and of the sentence before
// them, which often names the rule).
func rules(d *doc, q *question) []ruleSpan {
	w := map[string]float64{}
	for _, k := range q.keys {
		if x := d.idf(k.st); x > 0 {
			if _, dup := w[k.st]; !dup {
				w[k.st] = x
			}
		}
	}
	overlap := func(a, b int) float64 {
		seen := map[string]bool{}
		sc := 0.0
		for k := a; k < b; k++ {
			st := d.toks[k].st
			if x, ok := w[st]; ok && !seen[st] {
				seen[st] = true
				sc += x
			}
		}
		return sc
	}
	lead := func(si int) float64 {
		if si == 0 {
			return 0
		}
		p := d.sents[si-1]
		return 0.5 * overlap(p.start, p.end)
	}
	parses := ruleParsesShared(d, q)
	var out []ruleSpan
	for si, s := range d.sents {
		p := &parses[si]
		// A rule sentence states two cases or more, or one case under a
		// condition ("a former harbourage site returns to routine
		// swabbing when it has four negative rounds").
		if len(p.labels) >= 2 || p.line {
			out = append(out, ruleSpan{d: d, start: s.start, end: s.end, labels: p.labels,
				score: 2*float64(min(len(p.labels), 3)-1) + float64(min(p.semis, 2)) + overlap(s.start, s.end) + lead(si)})
		}
		// A run of rule lines: one case per sentence or list line ("A
		// lot above 85% is released. Between 75% and 85% it is
		// downgraded.", "- Red: more than 24").
		if !p.line || si > 0 && parses[si-1].line && d.sents[si-1].para == s.para {
			continue
		}
		e := si + 1
		for e < len(d.sents) && parses[e].line && d.sents[e].para == s.para && e-si < 8 {
			e++
		}
		if e-si < 2 {
			continue
		}
		r := ruleSpan{d: d, start: s.start, end: d.sents[e-1].end}
		best := 0.0
		for k := si; k < e; k++ {
			r.labels = append(r.labels, parses[k].labels[0])
			best = max(best, overlap(d.sents[k].start, d.sents[k].end))
		}
		if !distinctLabels(r.labels) {
			continue // a transcript's speakers, a log's hosts
		}
		r.score = float64(min(e-si, 3)+1) + best + lead(si)
		out = append(out, r)
	}
	return out
}

// ruleQuestionWords are the words of q: a label made only of question
// words names the case, not a label.
func ruleQuestionWords(q *question) map[string]bool {
	qst := map[string]bool{}
	for _, k := range q.keys {
		qst[k.low] = true
		qst[strings.TrimSuffix(k.low, "s")] = true
	}
	return qst
}

// ruleParses parses every sentence of d as a rule for question q.
func ruleParses(d *doc, q *question) []ruleParse {
	qst := ruleQuestionWords(q)
	parses := make([]ruleParse, len(d.sents))
	for si, s := range d.sents {
		parses[si] = parseRule(d, s, qst)
	}
	return parses
}

// ruleParsesShared is ruleParses, memoized by narrative and question for
// narratives up to memoMaxText: the five rule attackers read the same
// parses in every context of a question, and the survivor attacker asks
// them again. The parses are only read.
func ruleParsesShared(d *doc, q *question) []ruleParse {
	if len(d.text) > memoMaxText {
		return ruleParses(d, q)
	}
	return ruleMemo.get(docQuestion{d, q}, func() []ruleParse { return ruleParses(d, q) })
}

// ruleParse is what one sentence says as a rule.
type ruleParse struct {
	labels []ruleLabel
	semis  int
	// line: the sentence states one case with a condition (a list line
	// or a one-case sentence), a member of a run of rule lines.
	line bool
}

// parseRule reads the labels of one sentence: after rule verbs, before
// "when" at the start of a clause, after "otherwise", at the end of a
// clause that opens with a condition ("by 1.0 to 3.0 points, a warning
// notice"), quoted, enumerated after a colon, and before the colon of a
// list line ("- Red: more than 24").
func parseRule(d *doc, s sentence, qst map[string]bool) ruleParse {
	var p ruleParse
	a, b := s.start, s.end
	for a < b && !d.toks[a].is(fWord) && !d.toks[a].is(fQuote) {
		a++ // a bullet
	}
	bullet := a > s.start
	// A short label before a colon: a list line, or a lead-in ("Status
	// rules: a lot ...") to skip.
	body := a
	var head *ruleLabel
	headQuoted := false
	for k := a; k < b && k < a+12; k++ {
		if d.toks[k].text != ":" {
			continue
		}
		body = k + 1
		switch {
		case d.toks[a].is(fQuote):
			if l, next, ok := quotedAt(d, a, k, qst); ok && next == k {
				head, headQuoted = &l, true
			}
		case k-a <= ruleMaxLabelWords && !stopwords[d.toks[a].low] && plainHead(d, a, k):
			if l, ok := labelOf(d, a, k, qst, false); ok {
				head = &l
			}
		}
		break
	}
	cond := false
	for k := body; k < b; k++ {
		t := &d.toks[k]
		if t.is(fWord) && ruleConditionWords[t.low] || strings.ContainsAny(t.text, "<>≤≥") {
			cond = true
		}
		if t.text == ";" {
			p.semis++
		}
	}
	var verbs, others []ruleLabel
	clause := body // start of the current clause
	for k := body; k <= b; k++ {
		if k < b && d.toks[k].text != ";" {
			t := &d.toks[k]
			if t.is(fWord) && ruleVerbs[t.low] {
				if l, ok := verbLabel(d, k, b, qst); ok {
					verbs = append(verbs, l)
				}
			}
			continue
		}
		others = append(others, clauseLabels(d, clause, k, qst)...)
		clause = k + 1
	}
	others = append(others, quotedLabels(d, body, b, qst)...)
	others = append(others, enumLabels(d, a, b, qst)...)
	p.labels = mergeLabels(verbs, others)
	if head != nil && (headQuoted || bullet || cond && len(p.labels) == 0) {
		// "Red: more than 24 exceedances", "\"Shell vendor\": the vendor
		// supplies nothing ...": a list line, whose label is its head. A
		// transcript's "VOSS:" or a log's "Results:" states no
		// condition; a lead-in before a rule ("Status rules: a lot ... is
		// released; ...") has labels of its own.
		p.labels = mergeLabels([]ruleLabel{*head}, p.labels)
		p.line = true
	}
	if len(p.labels) == 1 && cond {
		p.line = true
	}
	return p
}

// clauseLabels reads the labels of a clause [a, b) that no verb
// introduces: "moderate when ...", "low otherwise", "otherwise, no
// exception", "by 1.0 to 3.0 points, a warning notice", "in one to three
// months, as monitor".
func clauseLabels(d *doc, a, b int, qst map[string]bool) []ruleLabel {
	for a < b && d.toks[a].is(fWord) && (d.toks[a].low == "and" || d.toks[a].low == "or") {
		a++
	}
	for b > a && !d.toks[b-1].is(fWord) && !d.toks[b-1].is(fQuote) {
		b-- // the sentence's full stop
	}
	if a >= b {
		return nil
	}
	var out []ruleLabel
	// "moderate when ...", "low otherwise"
	for j := a; j < b && j-a <= ruleMaxLabelWords; j++ {
		t := &d.toks[j]
		if !t.is(fWord) {
			break
		}
		if ruleConds[t.low] && j > a {
			if !ruleConditionStarts[d.toks[a].low] && !ruleVerbs[d.toks[a].low] && !d.toks[a].is(fNum) {
				if l, ok := labelOf(d, a, j, qst, false); ok {
					out = append(out, l)
				}
			}
			break
		}
		if ruleVerbs[t.low] || ruleStops[t.low] && j > a {
			break
		}
	}
	// "otherwise, no exception" and "<condition>, a warning notice": the
	// words after the clause's last comma, when they are short and have
	// no verb.
	last := -1
	for k := a; k < b; k++ {
		if d.toks[k].text == "," {
			last = k
		}
	}
	if last < 0 {
		return out
	}
	if first := &d.toks[a]; !first.is(fWord) || !ruleCondOpeners[first.low] {
		return out
	}
	k := last + 1
	for k < b && d.toks[k].is(fWord) && ruleSkip[d.toks[k].low] {
		k++
	}
	if k >= b || b-k > ruleMaxLabelWords || d.toks[k].is(fQuote) {
		return out
	}
	for j := k; j < b; j++ {
		t := &d.toks[j]
		if !t.is(fWord) || ruleVerbs[t.low] || auxWords[t.low] || ruleStops[t.low] || t.is(fNum) && !d.toks[max(j-1, k)].is(fCap) {
			return out
		}
	}
	if l, ok := labelOf(d, k, b, qst, false); ok {
		out = append(out, l)
	}
	return out
}

// mergeLabels merges label lists into text order, once per token.
func mergeLabels(lists ...[]ruleLabel) []ruleLabel {
	var out []ruleLabel
	for _, l := range lists {
		for _, x := range l {
			dup := false
			for i, y := range out {
				if y.tok == x.tok {
					dup = true
					out[i].verb = out[i].verb || x.verb
				}
			}
			if !dup {
				out = append(out, x)
			}
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].tok < out[j-1].tok; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// verbLabel reads the label after the rule verb at token v: "gives red
// status", "is classed competitive when", "goes on the national list",
// "is \"restricted\"", "is Priority 3".
func verbLabel(d *doc, v, b int, qst map[string]bool) (ruleLabel, bool) {
	k := v + 1
	for k < b && d.toks[k].is(fWord) && (ruleSkip[d.toks[k].low] || ruleParticiples[d.toks[k].low]) {
		k++
	}
	if k >= b {
		return ruleLabel{}, false
	}
	if d.toks[k].is(fQuote) {
		if l, _, ok := quotedAt(d, k, b, qst); ok {
			l.verb = true
			return l, true
		}
		return ruleLabel{}, false
	}
	t := &d.toks[k]
	if !t.is(fWord) || ruleConditionStarts[t.low] || ruleVerbs[t.low] || auxWords[t.low] || t.is(fNum) {
		return ruleLabel{}, false
	}
	j := k
	for j < b && j-k < ruleMaxLabelWords {
		u := &d.toks[j]
		if !u.is(fWord) || j > k && ruleStops[u.low] {
			break
		}
		// A number belongs to a label only after a capitalised label
		// word ("Level 2", "Tier C", "Priority 1").
		if u.is(fNum) && (j == k || !d.toks[j-1].is(fCap)) {
			break
		}
		j++
	}
	if j == k {
		return ruleLabel{}, false
	}
	return labelOf(d, k, j, qst, true)
}

// labelOf makes the label of tokens [a, b), refusing one made only of the
// question's own words or function words.
func labelOf(d *doc, a, b int, qst map[string]bool, verb bool) (ruleLabel, bool) {
	// Trailing function words go; "Tier A" keeps its letter.
	for b > a && d.toks[b-1].is(fWord) && stopwords[d.toks[b-1].low] && !(b-1 > a && d.toks[b-1].is(fCap) && d.toks[b-2].is(fCap)) {
		b--
	}
	for a < b && d.toks[a].is(fWord) && (d.toks[a].low == "the" || d.toks[a].low == "a" || d.toks[a].low == "an") {
		a++
	}
	if b <= a {
		return ruleLabel{}, false
	}
	own := false
	for k := a; k < b; k++ {
		t := &d.toks[k]
		if t.is(fWord) && !qst[t.low] && (!stopwords[t.low] || k > a && t.is(fCap)) {
			own = true
		}
	}
	if !own {
		return ruleLabel{}, false
	}
	last := &d.toks[b-1]
	end := last.off + len(last.text)
	if end > len(d.text) || d.toks[a].off >= end {
		return ruleLabel{}, false
	}
	text := strings.TrimSpace(d.text[d.toks[a].off:end])
	if text == "" || len(text) > skill.MaxAnswerBytes {
		return ruleLabel{}, false
	}
	return ruleLabel{text: text, tok: a, verb: verb}, true
}

// quotedAt reads a short quoted label opening at the quote token k; it
// returns the label and the token after the closing quote.
func quotedAt(d *doc, k, b int, qst map[string]bool) (ruleLabel, int, bool) {
	j := k + 1
	for j < b && j-k <= ruleMaxLabelWords+1 && d.toks[j].is(fWord) {
		j++
	}
	if j >= b || j == k+1 || !d.toks[j].is(fQuote) {
		return ruleLabel{}, k + 1, false
	}
	l, ok := labelOf(d, k+1, j, qst, false)
	return l, j + 1, ok
}

// quotedLabels lists the short quoted labels of tokens [a, b).
func quotedLabels(d *doc, a, b int, qst map[string]bool) []ruleLabel {
	var out []ruleLabel
	for k := a; k < b; {
		if !d.toks[k].is(fQuote) {
			k++
			continue
		}
		l, next, ok := quotedAt(d, k, b, qst)
		if ok {
			out = append(out, l)
		}
		k = next
	}
	return out
}

// enumLabels lists the items of an enumeration after a colon: "cause codes:
// product, sampling or laboratory".
func enumLabels(d *doc, a, b int, qst map[string]bool) []ruleLabel {
	colon := -1
	for k := a; k < b; k++ {
		if d.toks[k].text == ":" {
			colon = k
			break
		}
	}
	if colon < 0 {
		return nil
	}
	var out []ruleLabel
	k, joined := colon+1, false
	for k < b && !joined {
		j := k
		for j < b && d.toks[j].is(fWord) && j-k < 3 && d.toks[j].low != "or" && d.toks[j].low != "and" {
			if hasDigit(d.toks[j].text) || ruleVerbs[d.toks[j].low] || stopwords[d.toks[j].low] {
				return nil // a clause, not an item
			}
			j++
		}
		if j == k {
			return nil
		}
		l, ok := labelOf(d, k, j, qst, false)
		if !ok {
			return nil
		}
		out = append(out, l)
		if len(out) > 8 {
			return nil
		}
		if len(out) > 1 && d.toks[k-1].is(fWord) {
			joined = true // the item after "or"/"and" ends the list
			break
		}
		if j >= b {
			break
		}
		switch t := d.toks[j]; {
		case t.text == ",":
			k = j + 1
			if k < b && (d.toks[k].low == "or" || d.toks[k].low == "and") {
				k++
			}
		case t.low == "or" || t.low == "and":
			k = j + 1
		default:
			return nil
		}
	}
	// An enumeration ends with "or"/"and" before its last item.
	if len(out) < 2 || !joined {
		return nil
	}
	return out
}

// plainHead reports whether tokens [a, k) before a colon can be a label:
// words only, a number only after a capitalised word ("Level 2"); not a
// log entry's "Entry 4, 2020-06-12" or a mail header's "From 10.0.0.7".
func plainHead(d *doc, a, k int) bool {
	for j := a; j < k; j++ {
		t := &d.toks[j]
		if !t.is(fWord) || hasDigit(t.text) && (j == a || !d.toks[j-1].is(fCap) || t.is(fTime)) {
			return false
		}
	}
	return true
}

// distinctLabels reports whether no label repeats: the speakers of a
// transcript ("VOSS: ...", "ACHTERBERG: ...") repeat, a rule's labels do
// not.
func distinctLabels(ls []ruleLabel) bool {
	seen := map[string]bool{}
	for _, l := range ls {
		k := lower(l.text)
		if seen[k] {
			return false
		}
		seen[k] = true
	}
	return true
}

func hasDigit(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			return true
		}
	}
	return false
}

// ruleListPlaceStrategy answers with the label at a place in the rule's
// own order, counted from the start (place >= 0) or from the end (place <
// 0: -1 is the last), for rules that state at least min labels. The
// generation prompt (generate.RuleCase) puts a part's label answer at a
// place other than the first of its rule, the middle or the last, so the
// first label is not the only place a script can read: rule-list-second,
// rule-list-penultimate and rule-list-last answer with the others (with
// three cases, the middle one twice and the last).
func ruleListPlaceStrategy(place, min int) strategyFunc {
	return func(s *Session, d *doc, q *question, _ *skill.Challenge) (string, string) {
		r := bestRule(s, d, q)
		if r == nil || len(r.labels) < min {
			return fallback, ""
		}
		k := place
		if k < 0 {
			k += len(r.labels)
		}
		if k < 0 || k >= len(r.labels) {
			return fallback, ""
		}
		return r.labels[k].text, ""
	}
}
