package eval

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/acaptcha/acaptcha/skill"
)

// Reference brains: deterministic provers that know the ground truth. They
// bound what the matcher can do for a capable agent: the oracle answers
// every question with the canonical answer, the agent-style brain with the
// right answer in the surface forms LLM agents use (issue 13). Both answer
// at once; they say nothing about timing.
const (
	OracleClass     = "oracle"
	AgentStyleClass = "agent-style"
)

// Forms of the right answer the agent-style brain gives. Each is derived
// from the question's text and the narratives the brain has been shown,
// the way an agent words an answer, never from the matcher's rules.
const (
	// FormExact is the canonical answer as the set writes it (used only
	// when the text offers no other form).
	FormExact = "exact"
	// FormPhrase is the descriptive phrase the narrative itself uses
	// around the item: "assay drift at the central lab" for "assay
	// drift", "the choline-ester hydrolase AChE2" for "AChE2".
	FormPhrase = "phrase"
	// FormArticle is the answer with a definite article: "the PFK1".
	FormArticle = "article"
	// FormBareNumber is the number of a numbered label when the question
	// names the label word: "3" for "grade 3" asked as "what grade".
	FormBareNumber = "bare-number"
	// FormNumber is another way of writing the same number: "3.0" for
	// "3", "2.40" for "2.4", "125,000" for "125000".
	FormNumber = "number-form"
	// FormUnit is a numeric answer with the unit the narrative writes
	// after that number, or the unit the question asks in ("12.5 µM",
	// "46 days").
	FormUnit = "unit"
	// FormSpelled is a whole number from 0 to 99 written in words:
	// "twelve" for "12", "forty-two" for "42".
	FormSpelled = "spelled"
	// FormLeadIn is the canonical answer in a sentence that announces
	// it: "The answer is EI-FXC." or "Answer: EI-FXC".
	FormLeadIn = "lead-in"
	// FormExplained is the canonical answer followed by a short
	// justification that names no other candidate: "EI-FXC — as the
	// narrative states", or the justification on a line of its own.
	FormExplained = "explained"
)

// AgentForms lists the forms the agent-style brain uses, in report order.
var AgentForms = []string{FormExact, FormPhrase, FormArticle, FormBareNumber, FormNumber, FormUnit, FormSpelled, FormLeadIn, FormExplained}

// leadIns and explanations are the sentence frames of FormLeadIn and
// FormExplained (%s is the answer); one of each is used per question,
// picked by the answer's text so that a question keeps its wording.
var (
	leadIns      = []string{"The answer is %s.", "Answer: %s", "It is %s."}
	explanations = []string{"%s — as the narrative states", "%s (per the record)", "%s; the text says so", "%s, because the record shows it", "%s. That is what the report gives.", "%s\n\nExplanation: the record gives it."}
)

// AgentAnswer is one wording of the right answer.
type AgentAnswer struct {
	Form string `json:"form"`
	Text string `json:"text"`
}

// maxPhraseWords caps the words a descriptive phrase adds to the item.
const maxPhraseWords = 6

// AgentStyleForms returns every wording the agent-style brain would give
// for q, the canonical answer first, given the narratives shown so far
// (the question's own part last). Forms longer than skill.MaxAnswerBytes
// are left out: an agent told to answer briefly does not write them.
func AgentStyleForms(q *skill.Question, narratives []string) (out []AgentAnswer) {
	if q == nil || strings.TrimSpace(q.Answer) == "" {
		return nil
	}
	out = []AgentAnswer{{Form: FormExact, Text: q.Answer}}
	seen := map[string]bool{strings.ToLower(strings.TrimSpace(q.Answer)): true}
	add := func(form, text string) {
		if form == FormExplained {
			text = strings.TrimSpace(text) // keeps a frame's line break
		} else {
			text = strings.Join(strings.Fields(text), " ")
		}
		k := strings.ToLower(text)
		if text == "" || seen[k] || len(text) > skill.MaxAnswerBytes {
			return
		}
		seen[k] = true
		out = append(out, AgentAnswer{Form: form, Text: text})
	}
	toks := make([][]tok, len(narratives))
	for i, n := range narratives {
		toks[i] = tokenize(n)
	}
	ans := strings.TrimSpace(q.Answer)
	pick := func(frames []string) string {
		sum := sha256.Sum256([]byte("acaptcha/eval/agent-style/frame\x00" + ans))
		return frames[binary.BigEndian.Uint64(sum[:8])%uint64(len(frames))]
	}
	// Frames around the canonical answer, after the forms the text
	// offers (deferred: they come last in out, the named result).
	defer func() {
		add(FormLeadIn, strings.Replace(pick(leadIns), "%s", ans, 1))
		add(FormExplained, strings.Replace(pick(explanations), "%s", ans, 1))
	}()
	if num, ok := plainNumber(ans); ok {
		for _, f := range numberForms(num) {
			add(FormNumber, f)
		}
		for _, u := range units(num, q, toks) {
			add(FormUnit, u)
		}
		if w, ok := spelledNumber(num); ok {
			add(FormSpelled, w)
		}
		return out
	}
	if w, n, ok := numberedLabel(ans); ok && mentionsWord(q.Question, w) {
		add(FormBareNumber, n)
	}
	keys := mentionKeys(q)
	for _, ts := range toks {
		for _, key := range keys {
			for _, at := range findMentions(ts, key) {
				for _, p := range phrases(ts, at, at+len(key)) {
					add(FormPhrase, p)
				}
			}
		}
	}
	if q.AnswerType == skill.EntityAnswer || usesArticle(toks, tokenize(ans)) {
		add(FormArticle, "the "+ans)
	}
	return out
}

// AgentStyleAnswer is the wording the agent-style brain gives for q: one
// of the non-canonical forms (the canonical answer when there is none),
// picked by a hash of seed, the question and its answer, so a run is
// reproducible and every question keeps its form.
func AgentStyleAnswer(q *skill.Question, narratives []string, seed uint64) AgentAnswer {
	forms := AgentStyleForms(q, narratives)
	if len(forms) == 0 {
		return AgentAnswer{}
	}
	if len(forms) == 1 {
		return forms[0]
	}
	h := sha256.New()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seed)
	h.Write([]byte("acaptcha/eval/agent-style/v1\x00"))
	h.Write(b[:])
	h.Write([]byte(q.Question + "\x00" + q.Answer))
	sum := h.Sum(nil)
	i := binary.BigEndian.Uint64(sum[:8]) % uint64(len(forms)-1)
	return forms[1+i]
}

// truthIndex finds the question a challenge shows.
type truthIndex map[[2]string]*skill.Question

func newTruthIndex(sets ...*skill.Set) truthIndex {
	idx := truthIndex{}
	for _, s := range sets {
		if s == nil {
			continue
		}
		for pi := range s.Parts {
			p := &s.Parts[pi]
			for qi := range p.Questions {
				idx[[2]string{p.Narrative, p.Questions[qi].Question}] = &p.Questions[qi]
			}
		}
	}
	return idx
}

// errUnknownChallenge is returned by a reference brain shown a challenge
// it has no ground truth for.
var errUnknownChallenge = errors.New("reference brain: no ground truth for this challenge")

// referenceAnswerer is one session of the oracle or the agent-style brain:
// it remembers the narratives it was shown, as an agent's context does.
type referenceAnswerer struct {
	idx   truthIndex
	style bool
	seed  uint64
	shown []string
}

func (r *referenceAnswerer) Answer(ctx context.Context, c skill.Challenge) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if len(r.shown) == 0 || r.shown[len(r.shown)-1] != c.Narrative {
		r.shown = append(r.shown, c.Narrative)
	}
	q, ok := r.idx[[2]string{c.Narrative, c.Question}]
	if !ok {
		return "", errUnknownChallenge
	}
	if !r.style {
		return q.Answer, nil
	}
	return AgentStyleAnswer(q, r.shown, r.seed).Text, nil
}

// ReferenceProver returns the oracle (style false) or the agent-style
// brain (style true) over sets as a skill.Prover, for use outside Run.
func ReferenceProver(style bool, seed uint64, sets ...*skill.Set) skill.Prover {
	idx := newTruthIndex(sets...)
	return skill.ProverFunc(func() skill.Answerer {
		return &referenceAnswerer{idx: idx, style: style, seed: seed}
	})
}

// tok is a word or a punctuation mark of a narrative.
type tok struct {
	text string
	word bool
}

// tokenize splits text into words (letters, marks and digits, with a
// joiner - . , / ' ’ _ : kept between two such characters) and single
// punctuation marks; white space separates and is dropped.
func tokenize(text string) []tok {
	var out []tok
	i := 0
	for i < len(text) {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case unicode.IsSpace(r):
			i += size
			continue
		case !wordChar(r):
			out = append(out, tok{text: text[i : i+size]})
			i += size
			continue
		}
		start := i
		for i < len(text) {
			r, size = utf8.DecodeRuneInString(text[i:])
			if wordChar(r) {
				i += size
				continue
			}
			if strings.ContainsRune("-./,'’_:", r) && i+size < len(text) {
				if nr, _ := utf8.DecodeRuneInString(text[i+size:]); wordChar(nr) {
					i += size
					continue
				}
			}
			break
		}
		out = append(out, tok{text: text[start:i], word: true})
	}
	return out
}

func wordChar(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || unicode.IsNumber(r)
}

// mentionKeys are the word sequences the brain looks for in the text: the
// canonical answer and its accepted variants.
func mentionKeys(q *skill.Question) [][]tok {
	var keys [][]tok
	seen := map[string]bool{}
	for _, v := range append([]string{q.Answer}, q.Variants()...) {
		k := strings.ToLower(strings.Join(strings.Fields(v), " "))
		if k == "" || seen[k] {
			continue
		}
		seen[k] = true
		ts := tokenize(v)
		words := ts[:0:0]
		for _, t := range ts {
			if t.word {
				words = append(words, t)
			}
		}
		if len(words) == len(ts) && len(words) > 0 {
			keys = append(keys, words)
		}
	}
	return keys
}

// findMentions returns the token indexes where key occurs as consecutive
// words (case-insensitively).
func findMentions(ts []tok, key []tok) []int {
	var out []int
	for i := 0; i+len(key) <= len(ts); i++ {
		ok := true
		for j := range key {
			if !ts[i+j].word || !strings.EqualFold(ts[i+j].text, key[j].text) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, i)
		}
	}
	return out
}

// Word classes of the phrase extraction. A descriptive phrase after the
// item opens with a preposition or a participle ("at the central lab",
// "run by the vendor"); it ends before punctuation, a clause word (a verb
// of being, a relative pronoun, a conjunction, a negation), a name, code
// or number (an agent describing its answer does not cite another item),
// or after maxPhraseWords words, and loses dangling function words.
var (
	prepositions = wordSet("at in on from during between for of by within across under over after before near among inside outside through via with into to along around behind beyond")
	contrastive  = wordSet("over behind beyond")
	participles  = wordSet("run made done seen found held built kept sent taken given written shown known left set put read led drawn grown worn caught brought bought sold told paid laid lost met cut")
	clauseWords  = wordSet("was were is are be been being has have had will would could should may might can must did does do which that who whose whom where when while and or but so because since although though if as than then not no nor yet also it its they their there this these those whether")
	articles     = wordSet("the a an")
	danglers     = wordSet("the a an of at in on by from for to with via between during within across under over after before near among into through along around its their")
)

func wordSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// plainLower reports whether a token is a lower-case word without digits:
// a common word, not a name, code or number.
func plainLower(t tok) bool {
	if !t.word {
		return false
	}
	for _, r := range t.text {
		if unicode.IsUpper(r) || unicode.IsTitle(r) || unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

func lower(t tok) string { return strings.ToLower(t.text) }

// phrases returns the descriptive phrases around the mention ts[a:b].
// For an item named by common words ("assay drift", "EDR test harness"):
// the item with the phrase that follows it ("assay drift at the central
// lab", "EDR test harness run by the vendor"), and with the noun and
// preposition that govern it ("exposure to a contrast agent"). For an
// item named by a code or name: the description between an article and
// it ("the choline-ester hydrolase AChE2").
func phrases(ts []tok, a, b int) []string {
	item := joinToks(ts[a:b])
	var out []string
	common := false
	for _, t := range ts[a:b] {
		common = common || (plainLower(t) && !strings.ContainsAny(t.text, "-_"))
	}
	if common {
		suffix := ""
		// A preposition that ranks the item against another ("favoured
		// A over B", "behind B") opens no description: it names B.
		if b < len(ts) && plainLower(ts[b]) && !contrastive[lower(ts[b])] && (prepositions[lower(ts[b])] ||
			(participle(lower(ts[b])) && b+1 < len(ts) && lower(ts[b+1]) == "by")) {
			end := b
			for end < len(ts) && end-b < maxPhraseWords && plainLower(ts[end]) && !clauseWords[lower(ts[end])] {
				// an article not governed by a preposition opens a new
				// phrase ("for imaging | the week before")
				if articles[lower(ts[end])] && !prepositions[lower(ts[end-1])] {
					break
				}
				end++
			}
			for end > b && danglers[lower(ts[end-1])] {
				end--
			}
			if end-b >= 2 {
				suffix = joinToks(ts[b:end])
			}
		}
		if suffix != "" {
			out = append(out, item+" "+suffix)
		}
		// NOUN to|of [ARTICLE] ITEM
		k := a - 1
		if k >= 0 && plainLower(ts[k]) && articles[lower(ts[k])] {
			k--
		}
		if k >= 1 && (lower(ts[k]) == "to" || lower(ts[k]) == "of") && nounLike(ts[k-1]) && !strings.HasSuffix(lower(ts[k-1]), "s") {
			gov := joinToks(ts[k-1 : a])
			out = append(out, gov+" "+item)
			if suffix != "" {
				out = append(out, gov+" "+item+" "+suffix)
			}
		}
		return out
	}
	// the DESC ITEM, DESC being up to four plain words
	k := a
	for k > 0 && a-k < 4 && nounLike(ts[k-1]) {
		k--
	}
	if k < a && k > 0 && lower(ts[k-1]) == "the" {
		out = append(out, "the "+joinToks(ts[k:a])+" "+item)
	}
	return out
}

// nounLike reports whether a token can be a noun or an adjective of a
// description: a plain word that is no function or clause word and does
// not look like a verb form.
func nounLike(t tok) bool {
	w := lower(t)
	return plainLower(t) && !clauseWords[w] && !danglers[w] && !articles[w] && !prepositions[w] &&
		!strings.HasSuffix(w, "ed") && !strings.HasSuffix(w, "ing") && !strings.HasSuffix(w, "ly") &&
		!verbs[w]
}

// verbs are common verbs of report prose that end neither in -ed nor -ing.
var verbs = wordSet("reads read shows show gives give makes make takes take puts put sets set runs run says say lists list notes note logs log records record rates rate marks mark holds hold keeps keep finds find leaves leave")

func participle(w string) bool {
	return participles[w] || (len(w) > 4 && strings.HasSuffix(w, "ed"))
}

func joinToks(ts []tok) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.text
	}
	return strings.Join(parts, " ")
}

// usesArticle reports whether a narrative writes "the ANSWER".
func usesArticle(toks [][]tok, key []tok) bool {
	if len(key) == 0 {
		return false
	}
	for _, ts := range toks {
		for _, i := range findMentions(ts, key) {
			if i > 0 && strings.EqualFold(ts[i-1].text, "the") {
				return true
			}
		}
	}
	return false
}

// plainNumber reports whether s is a plain decimal number ("46", "2.4",
// "-3", "125,000") and returns it without grouping commas.
func plainNumber(s string) (string, bool) {
	t := strings.ReplaceAll(s, ",", "")
	neg := strings.HasPrefix(t, "-")
	t = strings.TrimPrefix(t, "-")
	if t == "" {
		return "", false
	}
	dot := false
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case c >= '0' && c <= '9':
		case c == '.' && !dot && i > 0 && i < len(t)-1:
			dot = true
		default:
			return "", false
		}
	}
	if strings.Contains(s, ",") && !groupedOK(strings.TrimPrefix(s, "-")) {
		return "", false
	}
	if neg {
		t = "-" + t
	}
	return t, true
}

func groupedOK(s string) bool {
	intPart, _, _ := strings.Cut(s, ".")
	g := strings.Split(intPart, ",")
	if len(g[0]) < 1 || len(g[0]) > 3 {
		return false
	}
	for _, x := range g[1:] {
		if len(x) != 3 {
			return false
		}
	}
	return true
}

// numberForms are other ways to write the plain number n.
func numberForms(n string) []string {
	neg := strings.HasPrefix(n, "-")
	u := strings.TrimPrefix(n, "-")
	sign := map[bool]string{true: "-", false: ""}[neg]
	intPart, frac, hasFrac := strings.Cut(u, ".")
	var out []string
	switch {
	case hasFrac:
		out = append(out, sign+intPart+"."+frac+"0")
	case len(intPart) <= 3:
		out = append(out, sign+intPart+".0")
	}
	if len(intPart) > 3 {
		var b strings.Builder
		for i, r := range intPart {
			if i > 0 && (len(intPart)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(r)
		}
		g := sign + b.String()
		if hasFrac {
			g += "." + frac
		}
		out = append(out, g)
	}
	return out
}

// units returns the number n with a unit: the unit the question asks in
// ("in µM", "how many days"), and the unit the narratives write after n
// when every mention of n carries that same unit.
func units(n string, q *skill.Question, toks [][]tok) []string {
	var out []string
	// A question that asks for a plain number (or "the number only")
	// gets none: an agent told so gives the bare value, and an equal
	// number in the narrative may measure something else ("14.7 GB" of
	// staged data for a difference of anomaly scores).
	if lq := strings.ToLower(q.Question); strings.Contains(lq, "plain number") || strings.Contains(lq, "number only") {
		return nil
	}
	qt := tokenize(q.Question)
	for i := 0; i+1 < len(qt); i++ {
		w := lower(qt[i])
		switch {
		case w == "in" && qt[i+1].word && unitLike(qt[i+1]) && (i+2 >= len(qt) || !qt[i+2].word):
			out = append(out, n+" "+qt[i+1].text)
		case w == "in" && qt[i+1].word && compoundUnit(qt[i+1].text):
			// a unit with a number in it, echoed with the words after
			// it up to the question's next mark ("in mL/min/1.73 m²
			// per year?"), at most four
			end := i + 2
			for end < len(qt) && end < i+6 && qt[end].word {
				end++
			}
			if end >= len(qt) || !qt[end].word {
				out = append(out, n+" "+joinToks(qt[i+1:end]))
			}
		case w == "how" && i+2 < len(qt) && lower(qt[i+1]) == "many" && nounLike(qt[i+2]):
			// the counted noun: through the first plural within three
			// words ("how many valid hourly exceedances"), else one word
			end := i + 3
			for j := i + 2; j < len(qt) && j < i+5 && plainLower(qt[j]) && !clauseWords[lower(qt[j])] && !danglers[lower(qt[j])]; j++ {
				if strings.HasSuffix(lower(qt[j]), "s") {
					end = j + 1
					break
				}
			}
			out = append(out, n+" "+joinToks(qt[i+2:end]))
		}
	}
	// A question that names its unit, or asks for a ratio, gets no unit
	// from the narrative: the numbers there measure other things.
	if len(out) > 0 {
		return out
	}
	for _, t := range qt {
		if ratioWords[lower(t)] {
			// a factor asked as such is given as one ("4-fold")
			if w := lower(t); w == "factor" || w == "fold" || w == "times" {
				out = append(out, n+"-fold")
			}
			return out
		}
	}
	unit, mentions, same := "", 0, true
	for _, ts := range toks {
		for i, t := range ts {
			if !t.word {
				continue
			}
			if v, ok := plainNumber(t.text); !ok || v != n {
				continue
			}
			mentions++
			u := ""
			if i+1 < len(ts) {
				switch next := ts[i+1]; {
				case next.text == "%" || next.text == "‰":
					u = t.text + next.text
				case next.word && unitLike(next):
					u = t.text + " " + next.text
				}
			}
			if u == "" || (unit != "" && !strings.EqualFold(strings.TrimPrefix(u, t.text), strings.TrimPrefix(unit, t.text))) {
				same = false
			}
			if unit == "" {
				unit = u
			}
		}
	}
	if mentions > 0 && same && unit != "" {
		out = append(out, unit)
	}
	return out
}

// unitLike reports whether a word is a unit: a symbol-bearing or short
// abbreviation ("µM", "mg/L", "ppm", "kWh") or a unit word ("days").
func unitLike(t tok) bool {
	w := lower(t)
	if clauseWords[w] || danglers[w] || articles[w] || prepositions[w] || calendarWords[w] {
		return false
	}
	letters, other := 0, false
	for _, r := range t.text {
		switch {
		case unicode.IsDigit(r):
			return false
		case unicode.IsLetter(r) && r < 0x80:
			letters++
		default:
			other = true
		}
	}
	return (other && utf8.RuneCountInString(w) <= 8) || letters <= 3 || unitWords[w]
}

// compoundUnit reports whether w is a unit written with a number in it:
// it begins with a letter and holds a / and a digit ("mL/min/1.73").
func compoundUnit(w string) bool {
	r, _ := utf8.DecodeRuneInString(w)
	return unicode.IsLetter(r) && strings.Contains(w, "/") && strings.ContainsFunc(w, unicode.IsDigit)
}

// calendarWords follow a number in a date ("3 Dec"), not as its unit.
var calendarWords = wordSet("jan feb mar apr may jun jul aug sep sept oct nov dec january february march april june july august september october november december mon tue wed thu fri sat sun")

var ratioWords = wordSet("factor ratio fold times multiple proportion share fraction")

var unitWords = wordSet("days day hours hour minutes minute seconds second weeks week months month years year percent points pounds dollars euros tonnes tons metres meters litres liters kilometres kilometers miles units times fold cycles samples")

// numberedLabel splits a label such as "grade 3" into its word and number.
func numberedLabel(s string) (word, num string, ok bool) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return "", "", false
	}
	if _, isNum := plainNumber(f[1]); !isNum {
		return "", "", false
	}
	for _, r := range f[0] {
		if !unicode.IsLetter(r) {
			return "", "", false
		}
	}
	return f[0], f[1], true
}

// mentionsWord reports whether text holds w as a whole word.
func mentionsWord(text, w string) bool {
	for _, t := range tokenize(text) {
		if t.word && strings.EqualFold(t.text, w) {
			return true
		}
	}
	return false
}

// spelledNumber writes a whole number from 0 to 99 in English words
// ("forty-two"); ok is false for any other number.
func spelledNumber(n string) (string, bool) {
	v := 0
	if n == "" || len(n) > 2 {
		return "", false
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return "", false
		}
		v = v*10 + int(n[i]-'0')
	}
	ones := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
		"ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"}
	tens := []string{"", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"}
	switch {
	case v < 20:
		return ones[v], true
	case v%10 == 0:
		return tens[v/10], true
	default:
		return tens[v/10] + "-" + ones[v%10], true
	}
}
