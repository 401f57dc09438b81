package attack

import (
	"strings"
)

// qkind is the answer type an attacker guesses from a question's wording.
type qkind uint8

const (
	qEntity qkind = iota
	qNumeric
	qLabel
)

func (k qkind) String() string {
	switch k {
	case qNumeric:
		return "numeric"
	case qLabel:
		return "label"
	}
	return "entity"
}

// qkey is one content word of a question.
type qkey struct {
	st       string
	low      string
	contrast bool // inside a contrast clause ("unlike the others whose ...")
	head     bool // part of the head noun phrase
}

// question is the analysis of a question.
type question struct {
	text      string
	toks      []token
	kind      qkind
	head      []string // stems of the head noun phrase ("enzyme", "tier")
	labelHead string   // the label noun or, for "type of X", X
	keys      []qkey
	unit      unitClass
	count     []string // stems of the counted noun after "how many"
	max, min  bool
	first     bool
	last      bool
	diff      bool
	back      bool // refers to earlier rounds
	causal    bool
	polarity  float32 // +1: asks for the finding that held up; -1: for one explained away
	year      bool
	inner     []string // heads of the noun phrases the question describes ("the kinase with ...")
}

// withHead returns a copy of q whose head noun phrase is heads (the inner
// noun phrases of a numeric or label question name the entity it is
// about).
func (q *question) withHead(heads []string) *question {
	c := *q
	c.head = heads
	c.kind = qEntity
	c.keys = make([]qkey, len(q.keys))
	hs := map[string]bool{}
	for _, h := range heads {
		hs[h] = true
	}
	for i, k := range q.keys {
		k.head = hs[k.st]
		c.keys[i] = k
	}
	return &c
}

var (
	auxWords = toSet(`was were is are did does do has have had been be being will would could can should
may might must`)
	preps = toSet(`in on at for by with from into onto over under about as of to during after before
between among within across through per that which who whose whom where when while than`)
	numericNouns = toSet(`number count value percentage percent concentration temperature rate duration
amount price yield spread ratio total sum difference dose dosage ic50 ec50 ki km score size magnitude
proportion fraction threshold cutoff reading measurement time age length width height weight mass
volume frequency share balance cost fee margin basis half-life titer titre load gain loss drop
increase decrease change return coupon premium deficit surplus capacity quantity reduction elevation
latency delay interval figure sample-size gap factor multiple distance`)
	timeHeads = toSet(`week day month year quarter hour minute session round cycle night shift date`)
	headVerbs = toSet(`kept held showed shown saw had made produced exhibited remained stayed fell rose
drove led gave took became began ran grew went came got met set put hit cut lost won paid sold bought left
keeps holds shows has makes produces exhibits remains stays falls rises leads gives takes becomes runs grows`)
	typeOfWords = toSet(`type kind form mode mechanism class category sort manner`)
)

// analyseQuestion parses a question.
func analyseQuestion(text string) *question {
	toks, sents := tokenize(text)
	analyseTokens(toks, sents)
	q := &question{text: text, toks: toks, polarity: 1}
	var words []*token
	var wordAt []int
	for k := range toks {
		if toks[k].is(fWord) {
			words = append(words, &toks[k])
			wordAt = append(wordAt, k)
		}
	}
	lows := make([]string, len(words))
	for i, w := range words {
		lows[i] = w.low
	}
	has := func(w string) bool {
		for _, l := range lows {
			if l == w {
				return true
			}
		}
		return false
	}
	// Numeric openers.
	numeric := false
	for i := 0; i+1 < len(lows); i++ {
		if lows[i] == "how" {
			switch lows[i+1] {
			case "many", "much", "long", "far", "often", "large", "high", "low", "big", "small":
				numeric = true
				if lows[i+1] == "long" {
					q.unit = unitTime
				}
				if lows[i+1] == "many" {
					for j := i + 2; j < len(lows) && j < i+5; j++ {
						if auxWords[lows[j]] || preps[lows[j]] {
							break
						}
						q.count = append(q.count, words[j].st)
					}
				}
			}
		}
		if lows[i] == "by" && (lows[i+1] == "how" || lows[i+1] == "what") {
			numeric = true
		}
		// "in percent", "in µM", "in vol points": a unit is asked for.
		if lows[i] == "in" && i > 0 && wordAt[i]-wordAt[i-1] > 1 {
			if u, ok := unitWords[lows[i+1]]; ok && u != unitTime {
				numeric = true
				q.unit = u
			} else if i+2 < len(lows) && (lows[i+2] == "points" || lows[i+2] == "units") {
				numeric = true
			}
		}
	}
	// The head noun phrase after the wh-word.
	// The wh-word of the main clause: one at the start or after a comma,
	// else the first (a relative "which" inside a clause is skipped when a
	// clause-initial one exists).
	wh := -1
	for i, l := range lows {
		switch l {
		case "which", "what", "who", "whom", "name", "identify":
		default:
			continue
		}
		if wh < 0 {
			wh = i
		}
		if i == 0 || (i <= 2 && (lows[0] == "in" || lows[0] == "on" || lows[0] == "at" || lows[0] == "for" || lows[0] == "by" || lows[0] == "to" || lows[0] == "from")) || wordAt[i]-wordAt[i-1] > 1 {
			wh = i
			break
		}
	}
	var head []int
	if wh >= 0 {
		i := wh + 1
		if i < len(lows) && lows[i] == "of" {
			i++
		}
		for i < len(lows) && (auxWords[lows[i]] || lows[i] == "the" || lows[i] == "a" || lows[i] == "an" || lows[i] == "is" || words[i].is(fNum)) {
			i++
		}
		for i < len(lows) && len(head) < 3 {
			l := lows[i]
			if preps[l] && !(l == "of" && len(head) > 0 && typeOfWords[lows[i-1]]) {
				break
			}
			if auxWords[l] || headStop[l] && l != "of" || headVerbs[l] {
				break
			}
			if len(head) > 0 && (strings.HasSuffix(l, "ed") || strings.HasSuffix(l, "ing")) {
				break
			}
			if l != "of" {
				head = append(head, i)
			}
			i++
		}
	}
	for _, i := range head {
		q.head = append(q.head, words[i].st)
	}
	// Label or numeric by the head phrase.
	label := false
	for n, i := range head {
		l := lows[i]
		if typeOfWords[l] && n+1 < len(head) {
			label = true
			q.labelHead = words[head[len(head)-1]].st
			break
		}
		if labelNouns[l] && !numericNouns[l] && l != "type" && l != "kind" && l != "signal" && l != "pattern" && l != "profile" {
			label = true
			if q.labelHead == "" {
				q.labelHead = words[i].st
			}
		}
		if numericNouns[l] && !labelNouns[l] {
			numeric = true
		}
		if n == 0 && timeHeads[l] && len(head) <= 2 {
			numeric = true
			q.count = append(q.count, words[i].st)
		}
	}
	if !label && (has("classified") || has("categorized") || has("categorised") || has("designated") || has("rated")) && (has("how") || has("as")) && !numeric {
		label = true
	}
	switch {
	case numeric && !label:
		q.kind = qNumeric
	case label:
		q.kind = qLabel
	default:
		q.kind = qEntity
	}
	// Keywords, contrast clauses and polarity.
	inHead := map[int]bool{}
	for _, i := range head {
		inHead[i] = true
	}
	// A contrast clause before the main wh-word ("Setting aside X, Y and
	// Z, which ...") runs up to it; one after it ends at a comma.
	contrast, before := false, false
	var pol float32
	for i, w := range words {
		l := w.low
		if contrast && before && i == wh {
			contrast = false
		}
		if i > 0 && contrast && !before {
			for k := wordAt[i-1] + 1; k < wordAt[i]; k++ {
				if t := toks[k].text; t == "," || t == ";" || t == ":" {
					contrast = false
				}
			}
		}
		trigger := false
		switch l {
		case "unlike", "except", "excluding", "instead", "whereas", "opposed", "ignoring", "disregarding",
			"discounting", "besides", "aside", "apart":
			trigger = true
		case "rather", "other":
			trigger = i+1 < len(lows) && lows[i+1] == "than"
		}
		if trigger {
			contrast, before = true, i < wh
			continue
		}
		if u, ok := questionUnits[l]; ok && q.unit == unitNone && (q.kind == qNumeric || numeric) {
			q.unit = u
		}
		if maxWords[l] {
			q.max = true
		}
		if minWords[l] {
			q.min = true
		}
		if l == "first" || l == "earliest" {
			q.first = true
		}
		if l == "last" || l == "latest" || l == "final" || l == "most-recent" {
			q.last = true
		}
		if backWords[l] && l != "first" && l != "before" {
			q.back = true
		}
		if causeWords[l] {
			q.causal = true
		}
		if l == "year" || l == "years" && q.unit != unitTime {
			q.year = true
		}
		if l == "difference" || (l == "more" || l == "fewer" || l == "higher" || l == "lower" || l == "less") && i > 0 && (lows[i-1] == "many" || lows[i-1] == "much") {
			q.diff = true
		}
		if contrast {
			pol -= w.pos - w.neg
		} else {
			pol += w.pos - w.neg
		}
		if stopwords[l] || questionWords[l] || w.is(fNum) {
			continue
		}
		q.keys = append(q.keys, qkey{st: w.st, low: l, contrast: contrast, head: inHead[i]})
	}
	if pol <= -1.5 {
		q.polarity = -1
	}
	// Inner noun phrases: "the kinase with the durable elevation",
	// "that counterparty", "the compound's effect".
	last := -1
	if len(head) > 0 {
		last = head[len(head)-1]
	}
	for i := last + 1; i < len(words); i++ {
		switch lows[i] {
		case "the", "that", "this", "these", "those", "its":
		default:
			continue
		}
		noun := -1
		for j := i + 1; j < len(words) && j <= i+4; j++ {
			if innerStop[lows[j]] || wordAt[j]-wordAt[j-1] > 1 && j > i+1 {
				break
			}
			noun = j
			if possessiveAt(text, toks[wordAt[j]]) {
				break
			}
		}
		if noun >= 0 && !stopwords[lows[noun]] && !words[noun].is(fNum) {
			q.inner = append(q.inner, words[noun].st)
		}
	}
	// "Which ... was not ..." style negation questions ask for the one that
	// did not hold up only when the negated word is a positive cue, which
	// markCues already flipped.
	if q.kind == qLabel && q.labelHead == "" && len(q.head) > 0 {
		q.labelHead = q.head[len(q.head)-1]
	}
	return q
}

var innerStop = toSet(`with whose that which where who whom in of from against to for by on at was were is
are did had has does do across over during after before than under within whereas while`)

// possessiveAt reports whether the word token t is followed by 's in the
// raw text (t.text has the possessive stripped).
func possessiveAt(raw string, t token) bool {
	end := t.off + len(t.text)
	return strings.HasPrefix(raw[end:], "'s") || strings.HasPrefix(raw[end:], "’s")
}

// hasWord reports whether the question contains the lower-cased word.
func (q *question) hasWord(low string) bool {
	for k := range q.toks {
		if q.toks[k].low == low {
			return true
		}
	}
	return false
}

// headSet returns the head stems as a set.
func (q *question) headSet() map[string]bool {
	m := make(map[string]bool, len(q.head))
	for _, h := range q.head {
		m[h] = true
		if strings.HasSuffix(h, "s") {
			m[strings.TrimSuffix(h, "s")] = true
		}
	}
	return m
}
