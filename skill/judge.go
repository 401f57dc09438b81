package skill

import (
	"math/big"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// This file is the normative answer matcher of spec/verification.md
// ("Correctness", rules M0-M6). Every rule here is stated there, with test
// vectors in spec/vectors/matching.json; change both together.

// Judge reports whether answer is an accepted answer to q. narratives are
// the narratives the prover has been shown in this session, up to and
// including the part of q: they supply the words an answer may add to a
// variant (the narrative's own description of the item, a unit).
//
// The rules, in order (spec/verification.md):
//
//	M0 an answer over MaxAnswerBytes is wrong;
//	M1 exact: the normalised answer equals a normalised variant;
//	M2 guard: an answer that names a distractor (outside the matched
//	   variant) is wrong under M3 and M4, and under M4 so is one with a
//	   distractor's word outside the matched variant (unless that word is
//	   a function word, a variant's word or a question word); when the
//	   canonical answer is a number, so is one that puts a numbered label
//	   the texts use before a number ("Priority 3" for a count of 3);
//	M3 numeric: when the canonical answer is a number (or a numbered label
//	   such as "grade 3" whose label word the question uses), the answer
//	   holds exactly one number, equal in value, and otherwise only allowed
//	   words, the precision words exactly, precisely and total, or names
//	   of a unit the texts use ("10.6 kilometres" where a text has "km",
//	   "EUR 206,220" where one has "€");
//	M4 containment: the answer holds a variant as whole consecutive words
//	   and otherwise only allowed words; description words from the
//	   narratives are allowed only when the question lists distractors,
//	   the question's own lower-case words always (unless the question
//	   names an accepted variant);
//	M5 clause window, for questions without distractors: the answer is the
//	   narrative's own words around a variant, verbatim within one clause
//	   of one sentence (less the question's words and pronouns around
//	   them: "Mycoplasma in the working stock explained it");
//	M6 described code, for questions without distractors or a numeric
//	   target: description words before a variant that holds a code
//	   ("the fragment CLV-5649"), each written in a sentence that holds
//	   a variant, none written before a variant in one clause nor with a
//	   capital (so never a word of another candidate's name: "parental
//	   clone 17" is not "daughter clone 17", "Kiln" is Kiln Line B's).
//
// An answer none of them accepts that begins with a lead-in ("Answer:",
// "The answer is", "It's", and before a numeric target a hedge such as
// "approximately") or ends with a tail frame ("is the answer", "is
// correct") is judged again on the text between them; one with an
// explanation after a separator ("X — because ...") by its head, when
// its tail names no distractor (as written, and by the word key of
// key.go for a tail other than ASCII: "X — ｅｍｅｒｇｅｎｃｙ"); and one
// holding a possessive ("the central lab's") all over again as its
// plain form, the endings removed.
func Judge(q *Question, answer string, narratives []string) bool {
	ok, _ := JudgeRule(q, answer, narratives)
	return ok
}

// The rule names JudgeRule reports (spec/verification.md).
const (
	RuleTooLong   = "M0"
	RuleExact     = "M1"
	RuleNumeric   = "M3"
	RuleContains  = "M4"
	RuleWindow    = "M5"
	RuleDescribed = "M6"
	RuleNone      = "none"
)

// JudgeRule is Judge that also names the rule that decided: the rule that
// accepted the answer, RuleTooLong for an oversized answer, or RuleNone.
func JudgeRule(q *Question, answer string, narratives []string) (bool, string) {
	if q == nil {
		return false, RuleNone
	}
	if len(answer) > MaxAnswerBytes {
		return false, RuleTooLong
	}
	answer = unwrap(asciiForms(answer))
	q, narratives = asciiTexts(q, narratives)
	cands := candidatesOf(q)
	if ok, rule := judgeExplained(q, answer, narratives, cands); ok {
		return true, rule
	}
	if plain, ok := dropPossessives(answer, cands); ok {
		return judgeExplained(q, plain, narratives, cands)
	}
	return false, RuleNone
}

// judgeExplained judges an answer by M1-M6, after a lead-in and before a
// tail frame, then by its head before an explanation whose tail the
// guard passes.
func judgeExplained(q *Question, answer string, narratives []string, cands *candidateForms) (bool, string) {
	if ok, rule := judgeFramed(q, answer, narratives, cands); ok {
		return true, rule
	}
	if head, tail, ok := explained(answer, cands); ok && !(&judgement{q: q}).tailNamesCandidate(tail) && !keyedTailNamesCandidate(q, tail) {
		return judgeFramed(q, head, narratives, cands)
	}
	return false, RuleNone
}

// dropPossessives returns the answer with the possessive ending 's or ’s
// (S upper-case too) removed from every raw word that ends so, holds
// more and is no raw word of a candidate (after norm): "the central
// lab's" is "the central lab", "St John's" stays where a candidate
// writes it; ok is false when no raw word does
// (spec/verification.md, "Possessives").
func dropPossessives(answer string, cands *candidateForms) (string, bool) {
	if !strings.ContainsAny(answer, "'’") {
		return answer, false
	}
	var b strings.Builder
	last, changed := 0, false
	for _, sp := range rawWordSpans(answer) {
		raw := answer[sp[0]:sp[1]]
		base, ok := strings.CutSuffix(raw, "s")
		if !ok {
			base, ok = strings.CutSuffix(raw, "S")
		}
		if ok {
			if b2, ok2 := strings.CutSuffix(base, "'"); ok2 {
				base = b2
			} else if b2, ok2 := strings.CutSuffix(base, "’"); ok2 {
				base = b2
			} else {
				ok = false
			}
		}
		if !ok || base == "" || cands.hasWord(raw) {
			continue
		}
		b.WriteString(answer[last:sp[0]])
		b.WriteString(base)
		last, changed = sp[1], true
	}
	if !changed {
		return answer, false
	}
	b.WriteString(answer[last:])
	return b.String(), true
}

// asciiRead are the characters every text Judge reads has replaced by
// their ASCII form first (spec/verification.md, "Hyphens"): U+2010 HYPHEN
// and U+2011 NON-BREAKING HYPHEN, which language models write in codes
// and compounds ("FL‑0417" with U+2011), read as "-"; the subscript
// digits U+2080..U+2089, which they write in formulas ("CO₂"), read as
// 0..9. Superscript digits are not among them: "m²" and
// "10³" are exponents, and 10³ is no 103.
const asciiRead = "\u2010\u2011\u2080\u2081\u2082\u2083\u2084\u2085\u2086\u2087\u2088\u2089"

var asciiReplacer = strings.NewReplacer("\u2010", "-", "\u2011", "-",
	"\u2080", "0", "\u2081", "1", "\u2082", "2", "\u2083", "3", "\u2084", "4",
	"\u2085", "5", "\u2086", "6", "\u2087", "7", "\u2088", "8", "\u2089", "9")

// asciiForms returns s with the characters of asciiRead replaced by their
// ASCII forms (s itself when it holds none).
func asciiForms(s string) string {
	if !hasASCIIRead(s) {
		return s
	}
	return asciiReplacer.Replace(s)
}

// hasASCIIRead reports whether s holds one of asciiRead. It is
// strings.ContainsAny(s, asciiRead) at the speed of a byte search: the
// hyphens are E2 80 followed by 90 or 91 in UTF-8, the subscript digits
// E2 82 followed by 80..89, and ContainsAny decodes every rune of s (the
// judge looks at every narrative of a session for each answer: 0.6 ms of
// a mutual attestation's CPU, 13 %, went here).
func hasASCIIRead(s string) bool {
	for {
		i := strings.IndexByte(s, 0xe2)
		if i < 0 || i+2 >= len(s) {
			return false
		}
		switch c := s[i+2]; s[i+1] {
		case 0x80:
			if c == 0x90 || c == 0x91 {
				return true
			}
		case 0x82:
			if c >= 0x80 && c <= 0x89 {
				return true
			}
		}
		s = s[i+1:]
	}
}

// asciiTexts returns q and narratives with asciiForms applied to the
// question's text, its canonical answer, variants and distractors and to
// every narrative: copies where one holds a character of asciiRead, else
// the arguments themselves.
func asciiTexts(q *Question, narratives []string) (*Question, []string) {
	texts := func(ss []string) bool {
		for _, s := range ss {
			if hasASCIIRead(s) {
				return true
			}
		}
		return false
	}
	if texts([]string{q.Question, q.Answer}) || texts(q.Answers) || texts(q.Distractors) {
		c := *q
		c.Question, c.Answer = asciiForms(q.Question), asciiForms(q.Answer)
		c.Answers = mapStrings(q.Answers, asciiForms)
		c.Distractors = mapStrings(q.Distractors, asciiForms)
		q = &c
	}
	if texts(narratives) {
		narratives = mapStrings(narratives, asciiForms)
	}
	return q, narratives
}

func mapStrings(ss []string, f func(string) string) []string {
	if ss == nil {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}

// judgeFramed applies rules M1-M6 to an answer, then, when none accepts
// it, to its rest after a lead-in and before a tail frame.
// cands are the question's candidateForms (candidatesOf).
func judgeFramed(q *Question, answer string, narratives []string, cands *candidateForms) (bool, string) {
	if ok, rule := judgeText(q, answer, narratives, cands); ok {
		return true, rule
	}
	if rest, ok := leadIn(q, answer, cands); ok {
		return judgeText(q, rest, narratives, cands)
	}
	return false, RuleNone
}

// explained splits an answer at its first explanation separator into the
// head before it and the tail from it (spec/verification.md,
// "Explanation"): an em dash (U+2014) or an arrow (-> => → ⇒); an en
// dash (U+2013) or one or two hyphen-minus characters with white space
// on both sides; ( or ; a line break (LF or CR); a sentence end (. ! or ?
// followed by white space, the . not after an abbreviation that is no
// candidate's word, a hedge, or an initial where a candidate holds one:
// "e.g.", "approx.", "P. Okonjo"; nor between two raw words that a
// candidate writes with a . and white space between them: "the B.
// cereus ST1382" where a candidate is "B. cereus ST1382"; after a number
// it is one: "9.4. That ..."); a ":" or "," followed by white space after an answer word (a
// raw word before it that is no function word and is a candidate's word
// or holds a digit: "Kessler Lime Works: the only one left", never
// "Operator: Kessler"), the "," only before a raw word without
// upper-case letters and digits ("X, the only one left", never "amber,
// AChE-α"); the raw word "because" or "since" after white
// space, when no candidate holds it; or a comma followed by white space
// and one of commaExplanations (because, since, as, according, based,
// given, per, which), at the end of the answer or before a character
// that is no letter, mark or number. Both the head and the tail must
// hold a raw word; ok is false when the answer has no such separator.
func explained(answer string, cands *candidateForms) (head, tail string, ok bool) {
	spans := rawWordSpans(answer)
	if len(spans) < 2 {
		return "", "", false
	}
	// prevWord is the raw word ending at byte i, or "".
	prevWord := func(i int) string {
		for k := len(spans) - 1; k >= 0; k-- {
			if spans[k][1] == i {
				return answer[spans[k][0]:spans[k][1]]
			}
			if spans[k][1] < i {
				return ""
			}
		}
		return ""
	}
	space := func(i int) bool { // white space at byte i
		r, _ := utf8.DecodeRuneInString(answer[i:])
		return i < len(answer) && unicode.IsSpace(r)
	}
	spaceBefore := func(i int) bool {
		r, n := utf8.DecodeLastRuneInString(answer[:i])
		return n > 0 && unicode.IsSpace(r)
	}
	// A ": " or ", " separates only after an answer word: a raw word
	// before it that is no function word and is a candidate's word or
	// holds a digit ("Kessler Lime Works: the only one left"), never after
	// a label alone ("Operator: Kessler", "Therefore, Kessler").
	named := len(answer) + 1
	for _, sp := range spans {
		if w := Normalize(answer[sp[0]:sp[1]]); !functionWords[w] && (cands.word(w) || hasDigit(w)) {
			named = sp[1]
			break
		}
	}
	// The word because or since, white space before it, no candidate's
	// word, and not the first raw word ("X because the wind ...").
	wordSep := -1
	for k := 1; k < len(spans); k++ {
		w := Normalize(answer[spans[k][0]:spans[k][1]])
		if (w == "because" || w == "since") && !cands.word(w) && spaceBefore(spans[k][0]) {
			wordSep = spans[k][0]
			break
		}
	}
	sep := -1
	for i, r := range answer {
		switch r {
		case '—', '(', ';', '\n', '\r', '→', '⇒':
			sep = i
		case '=':
			if i+1 < len(answer) && answer[i+1] == '>' {
				sep = i
			}
		case ':':
			if space(i+1) && named <= i {
				sep = i
			}
		case '–':
			if spaceBefore(i) && space(i+len("–")) {
				sep = i
			}
		case '-':
			if i+1 < len(answer) && answer[i+1] == '>' {
				sep = i
				break
			}
			j := i + 1
			if j < len(answer) && answer[j] == '-' {
				j++
			}
			if spaceBefore(i) && space(j) {
				sep = i
			}
		case '.', '!', '?':
			if !space(i + 1) {
				continue
			}
			// A . after an abbreviation, a hedge or an initial ends no
			// sentence. Which words are abbreviations and whether a
			// letter may be an initial follow from the question's
			// candidates (variants and distractors), never from which
			// one is right: "NoV-GII.2" is a candidate's word, so
			// "NoV-GII.2. That ..." is cut; "class I. That ..." is cut
			// unless a candidate holds an initial ("P. Okonjo").
			if w := prevWord(i); r == '.' && (strings.Contains(w, ".") && !digitsAndDots(w) && !cands.hasWord(w) || hedges[Normalize(w)] || cands.hasInitials() && initial(w, answer[i+1:])) {
				continue
			}
			// A . that a candidate writes between the same two raw
			// words ("B. cereus", "Dr. Okafor", "U.S. site") ends no
			// sentence either: "the B. cereus ST1382" is judged whole.
			if w := prevWord(i); r == '.' && w != "" && cands.dotPair(w, nextWordAfterDot(answer, i)) {
				continue
			}
			sep = i
		case ',':
			if !space(i + 1) {
				continue
			}
			if named <= i && plainWordAfter(answer[i+1:]) {
				sep = i
				break
			}
			rest := strings.TrimLeftFunc(answer[i+1:], unicode.IsSpace)
			for _, w := range commaExplanations {
				if len(rest) >= len(w) && asciiEqualFold(rest[:len(w)], w) {
					if nr, _ := utf8.DecodeRuneInString(rest[len(w):]); !wordRune(nr) {
						sep = i
					}
				}
			}
		}
		if sep >= 0 {
			break
		}
	}
	if wordSep >= 0 && (sep < 0 || wordSep < sep) {
		sep = wordSep
	}
	if sep < 0 || len(rawWordSpans(answer[:sep])) == 0 || len(rawWordSpans(answer[sep:])) == 0 {
		return "", "", false
	}
	return answer[:sep], answer[sep:], true
}

// plainWordAfter reports whether the first raw word of rest holds no
// upper-case or title-case letter and no ASCII digit: after ", " an
// explanation goes on in lower case ("X, the only one left"), while a
// list goes on with names and codes ("amber, AChE-α, ADA3").
func plainWordAfter(rest string) bool {
	sp := rawWordSpans(rest)
	if len(sp) == 0 {
		return false
	}
	w := rest[sp[0][0]:sp[0][1]]
	return !hasUpper(w) && !hasDigit(w)
}

// commaExplanations are the words that, after a comma and white space,
// open an explanation ("X, because ...", "X, according to the report").
var commaExplanations = []string{"because", "since", "as", "according", "based", "given", "per", "which"}

// digitsAndDots reports whether w is ASCII digits and dots only (a
// number such as 9.4, which a sentence-ending . may follow).
func digitsAndDots(w string) bool {
	for i := 0; i < len(w); i++ {
		if (w[i] < '0' || w[i] > '9') && w[i] != '.' {
			return false
		}
	}
	return true
}

// nextWordAfterDot returns the raw word that follows the . at byte i of
// answer after white space only ("cereus" of "B. cereus"), or "" when
// something else stands between them.
func nextWordAfterDot(answer string, i int) string {
	rest := answer[i+1:]
	t := strings.TrimLeftFunc(rest, unicode.IsSpace)
	if len(t) == len(rest) {
		return ""
	}
	sp := rawWordSpans(t)
	if len(sp) == 0 || sp[0][0] != 0 {
		return ""
	}
	return t[:sp[0][1]]
}

// dotGap reports whether gap, the text between two raw words, is a .
// followed by one or more white-space characters and nothing else.
func dotGap(gap string) bool {
	rest, ok := strings.CutPrefix(gap, ".")
	return ok && rest != "" && strings.TrimLeftFunc(rest, unicode.IsSpace) == ""
}

// initial reports whether w, a raw word a . follows, is one upper-case
// letter and rest (the text after that .) opens, after white space, with
// an upper-case letter: a name's initial (P. Okonjo), not a sentence end.
func initial(w, rest string) bool {
	r, n := utf8.DecodeRuneInString(w)
	if n == 0 || n != len(w) || !unicode.IsUpper(r) {
		return false
	}
	nr, _ := utf8.DecodeRuneInString(strings.TrimLeftFunc(rest, unicode.IsSpace))
	return unicode.IsUpper(nr)
}

// candidateForms is what explained reads of a question's candidates (its
// accepted variants and its distractors): their raw words, normalised,
// and whether one holds an initial (one upper-case letter directly
// followed by a .). They are read on first use: an answer equal to a
// variant (MatchAny), most of what agents send, needs none of them, and
// building the word set was 3 % of a mutual attestation's CPU
// (BenchmarkMutualAttestConcurrent). Not safe for concurrent use; one
// judgement builds its own.
type candidateForms struct {
	q        *Question
	built    bool
	words    map[string]bool
	initials bool
	// dotPairs are the pairs of consecutive raw words of a candidate
	// with a . and white space between them ("B. cereus"), normalised.
	dotPairs map[[2]string]bool
}

func candidatesOf(q *Question) *candidateForms { return &candidateForms{q: q} }

func (c *candidateForms) build() {
	if c.built {
		return
	}
	c.built, c.words = true, map[string]bool{}
	for _, t := range append(c.q.Variants(), c.q.Distractors...) {
		spans := rawWordSpans(t)
		for k, sp := range spans {
			w := t[sp[0]:sp[1]]
			c.words[Normalize(w)] = true
			if r, n := utf8.DecodeRuneInString(w); n == len(w) && unicode.IsUpper(r) && strings.HasPrefix(t[sp[1]:], ".") {
				c.initials = true
			}
			if k+1 < len(spans) && dotGap(t[sp[1]:spans[k+1][0]]) {
				if c.dotPairs == nil {
					c.dotPairs = map[[2]string]bool{}
				}
				c.dotPairs[[2]string{Normalize(w), Normalize(t[spans[k+1][0]:spans[k+1][1]])}] = true
			}
		}
	}
}

// word reports whether the normalised word w is a word of a candidate.
func (c *candidateForms) word(w string) bool {
	c.build()
	return c.words[w]
}

// hasInitials reports whether a candidate holds an initial.
func (c *candidateForms) hasInitials() bool {
	c.build()
	return c.initials
}

// dotPairNorm is dotPair of two raw words already normalised.
func (c *candidateForms) dotPairNorm(p [2]string) bool {
	c.build()
	return c.dotPairs[p]
}

// dotPair reports whether a candidate holds the raw words w and next
// (compared after norm) consecutively with a . and white space only
// between them ("B. cereus" of "B. cereus ST1382").
func (c *candidateForms) dotPair(w, next string) bool {
	if next == "" {
		return false
	}
	c.build()
	return c.dotPairs[[2]string{Normalize(w), Normalize(next)}]
}

// hasWord reports whether w (a raw word) is, normalised, a word of a
// candidate.
func (c *candidateForms) hasWord(w string) bool { return c.word(Normalize(w)) }

// asciiEqualFold reports whether a and b are equal up to ASCII case.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// tailNamesCandidate applies the explanation guard to the tail after an
// answer's head: the tail must not name a distractor (as M2: its words in
// order), hold a word of a distractor that is no function word, no word
// of an accepted variant and no question word (M2's word guard), nor
// start, after function words, with a joining word ("(or 30)", "— not
// sample swap") or a hedging word ("(perhaps 30)", ", maybe Lowmoor").
// A tail that does may add a second candidate or a hedge.
//
// With a numeric target the tail is read twice, as words reads it and
// with its spelled-out numbers as numbers, and refused when either
// reading names a distractor or holds a distractor's word: "3 — four"
// names the distractor "four", "3 — two" the distractor "2".
func (j *judgement) tailNamesCandidate(tail string) bool {
	plain := Words(tail)
	for _, v := range j.q.Variants() {
		// variants too: questionWord's rule that a question naming an
		// accepted variant has no question words reads them (it found
		// none here, and "assay drift — lot change" passed beside the
		// distractor "reagent lot change" in a question that names both).
		wv := cachedWords(v)
		j.variants = append(j.variants, wv)
		j.variantWords = append(j.variantWords, wv...)
	}
	_, numeric := numericTarget(j.q)
	for _, d := range j.q.Distractors {
		if dw := cachedWords(d); len(dw) > 0 && !allFunctionWords(dw) {
			j.distractors = append(j.distractors, dw)
			// A distractor spelled in words is also met by its digits
			// in the tail ("3 — 4" beside the distractor "four").
			if numeric {
				if sw := cachedAnswerWords(d); !slices.EqualFunc(sw, dw, func(a, b Word) bool { return a.Text == b.Text }) {
					j.distractors = append(j.distractors, sw)
				}
			}
		}
	}
	readings := [][]Word{plain}
	if numeric {
		readings = append(readings, answerWords(tail))
	}
	for _, wa := range readings {
		j.wa = wa
		if j.namesDistractor(-1, -1) {
			return true
		}
		for _, w := range j.wa {
			// A pronoun refers back, it names nothing: "the record shows
			// it" beside the distractor "Singapore IT machine" holds no
			// word of it (a distractor that is only "IT" still occurs in
			// that tail, above).
			if b, ok := possessiveBase(w); (ok && pronouns[b.Text]) || pronouns[w.Text] {
				continue
			}
			if j.distractorWord(w) {
				return true
			}
		}
	}
	for _, w := range plain {
		if !functionWords[w.Text] {
			return joinWords[w.Text] || tailHedges[w.Text]
		}
	}
	return false
}

// The parts of a lead-in (spec/verification.md, "Lead-in"), as
// normalised raw words, in the order they are read, each list longest
// first within each start: a connective ("So", "Therefore"), an opinion
// ("I think"), a frame ("The answer is", "My answer", "Result:", "It's"),
// a likelihood ("Most likely") and, before a numeric target, a hedge
// ("approximately"). A frame ending in ":" is taken only when the
// character directly after its last raw word is ":" ("Result: X").
var (
	leadConnectives = [][]string{{"so"}, {"thus"}, {"therefore"}, {"hence"}}
	leadOpinions    = [][]string{
		{"i", "think"}, {"i", "believe"}, {"i'd", "say"}, {"i’d", "say"}, {"i", "would", "say"},
		{"i'd", "go", "with"}, {"i’d", "go", "with"}, {"i", "would", "go", "with"},
	}
	leadIns = [][]string{
		{"the", "final", "answer", "is"}, {"the", "final", "answer"},
		{"the", "correct", "answer", "is"}, {"the", "correct", "answer"},
		{"correct", "answer", "is"}, {"correct", "answer"},
		{"the", "answer", "is"}, {"the", "answer"},
		{"final", "answer", "is"}, {"final", "answer"},
		{"answer", "is"}, {"answer"},
		{"my", "final", "answer", "is"}, {"my", "final", "answer"},
		{"my", "answer", "is"}, {"my", "answer"},
		{"the", "result", "is"}, {"the", "result", ":"}, {"result", "is"}, {"result", ":"},
		{"the", "value", "is"}, {"value", "is"}, {"the", "figure", "is"}, {"figure", "is"},
		{"the", "amount", "is"}, {"amount", "is"}, {"the", "number", "is"}, {"number", "is"},
		{"the", "total", "is"}, {"total", "is"}, {"the", "count", "is"}, {"count", "is"},
		{"it", "is"}, {"it", "was"}, {"it's"}, {"it’s"},
		{"it", "should", "be"}, {"it", "would", "be"}, {"it", "must", "be"}, {"that", "would", "be"},
	}
	leadLikelihoods = [][]string{{"most", "likely"}, {"likely"}, {"probably"}, {"definitely"}, {"certainly"}, {"clearly"}}
	// leadSources open an attribution ("According to the narrative,"):
	// one of them, then optionally a determiner of leadSourceDets, then
	// one or two words of leadSourceNouns, the last directly followed by
	// "," or ":".
	leadSources     = [][]string{{"according", "to"}, {"based", "on"}, {"per"}, {"from"}}
	leadSourceDets  = toWordSet("the this these")
	leadSourceNouns = toWordSet("narrative narratives text passage report reports document documents record records notes memo email thread log context information evidence data story")
	hedges          = toWordSet("about approx approximately around circa roughly")
	// tailFrames are the frames an agent puts after its answer ("X is
	// the answer"), longest first.
	tailFrames = [][]string{
		{"is", "the", "final", "answer"}, {"is", "the", "correct", "answer"}, {"is", "the", "answer"},
		{"is", "my", "final", "answer"}, {"is", "my", "answer"}, {"is", "correct"},
	}
)

// leadIn returns the rest of an answer after its lead-in and before its
// tail frame. The lead-in is read in parts, each optional and taken only
// when a raw word follows it: a list mark ("1." for a question without a
// numeric target none of whose candidates holds the word 1), a connective, an attribution ("According to the
// narrative,": leadSources, a determiner, one or two leadSourceNouns that are no candidate's word, then "," or
// ":"), an opinion, a frame, a likelihood and,
// when the question has a numeric target (rule M3), a hedge; each is the
// first sequence of its list that the next raw words (normalised) are.
// The tail frame is the first of tailFrames that the answer's last raw
// words are, taken only when a raw word of the answer stands between it
// and the lead-in. At least one of them. The rest is the answer's text
// after the last character of the lead-in and before the first of the
// tail frame ("Answer: -3.2" leaves ": -3.2", keeping the sign; "assay
// drift is the answer." leaves "assay drift "); ok is false when there
// is none.
func leadIn(q *Question, answer string, cands *candidateForms) (rest string, ok bool) {
	spans := rawWordSpans(answer)
	word := func(k int) string {
		if k >= len(spans) {
			return ""
		}
		return Normalize(answer[spans[k][0]:spans[k][1]])
	}
	numeric := func() bool { _, ok := numericTarget(q); return ok }
	k := 0
	if listMark(answer, spans) && !cands.word("1") && !numeric() {
		k = 1
	}
	part := func(list [][]string) {
		for _, li := range list {
			n := len(li)
			colon := li[n-1] == ":"
			if colon {
				n--
			}
			if k+n >= len(spans) {
				continue
			}
			match := true
			for i := 0; i < n; i++ {
				if word(k+i) != li[i] {
					match = false
					break
				}
			}
			if match && colon {
				match = strings.HasPrefix(answer[spans[k+n-1][1]:], ":")
			}
			if match {
				k += n
				return
			}
		}
	}
	part(leadConnectives)
	// An attribution: a source opening, an optional determiner, one or
	// two source nouns that are no raw word of a candidate, the last
	// directly followed by "," or ":" and then by a raw word.
	for _, src := range leadSources {
		i := k + len(src)
		match := i < len(spans)
		for n := 0; match && n < len(src); n++ {
			match = word(k+n) == src[n]
		}
		if !match {
			continue
		}
		if leadSourceDets[word(i)] {
			i++
		}
		for n := 1; n <= 2 && i+n < len(spans); n++ {
			nouns := true
			for m := i; m < i+n; m++ {
				nouns = nouns && leadSourceNouns[word(m)] && !cands.word(word(m))
			}
			if !nouns {
				break
			}
			if after := answer[spans[i+n-1][1]:]; strings.HasPrefix(after, ",") || strings.HasPrefix(after, ":") {
				k = i + n
				break
			}
		}
		break
	}
	part(leadOpinions)
	part(leadIns)
	part(leadLikelihoods)
	if k+1 < len(spans) && hedges[word(k)] && numeric() {
		k++
	}
	if k >= len(spans) {
		return "", false
	}
	end, tail := len(answer), false
	for _, tf := range tailFrames {
		first := len(spans) - len(tf)
		if first <= k {
			continue
		}
		match := true
		for i, w := range tf {
			if word(first+i) != w {
				match = false
				break
			}
		}
		if match {
			end, tail = spans[first][0], true
			break
		}
	}
	if k == 0 && !tail {
		return "", false
	}
	start := 0
	if k > 0 {
		start = spans[k-1][1]
	}
	return answer[start:end], true
}

// listMark reports whether an answer opens with a list mark: its first
// raw word is "1", nothing but white space before it, directly followed
// by "." or ")" and then white space ("1. X").
func listMark(answer string, spans [][2]int) bool {
	if len(spans) < 2 {
		return false
	}
	a, b := spans[0][0], spans[0][1]
	if answer[a:b] != "1" || strings.TrimFunc(answer[:a], unicode.IsSpace) != "" {
		return false
	}
	if b+1 >= len(answer) || (answer[b] != '.' && answer[b] != ')') {
		return false
	}
	r, _ := utf8.DecodeRuneInString(answer[b+1:])
	return unicode.IsSpace(r)
}

// answerWrappers are the markup an agent may put around its whole
// answer: an opening and a closing text (spec/verification.md,
// "Wrappers"); the first compares ASCII case-insensitively.
var answerWrappers = [][2]string{{"<answer>", "</answer>"}, {"$$\\boxed{", "}$$"}, {"$\\boxed{", "}$"}, {"\\boxed{", "}"}}

// unwrap returns the text inside an answer's wrapper: the answer, less
// leading and trailing white space, begins with a wrapper's opening and
// ends with its closing ("<answer>X</answer>", "\\boxed{X}"); else the
// answer itself.
func unwrap(answer string) string {
	t := strings.TrimFunc(answer, unicode.IsSpace)
	for _, w := range answerWrappers {
		if len(t) >= len(w[0])+len(w[1]) && asciiEqualFold(t[:len(w[0])], w[0]) && asciiEqualFold(t[len(t)-len(w[1]):], w[1]) {
			return t[len(w[0]) : len(t)-len(w[1])]
		}
	}
	return answer
}

// judgeText applies rules M1-M6 to an answer of at most MaxAnswerBytes.
func judgeText(q *Question, answer string, narratives []string, cands *candidateForms) (bool, string) {
	vs := q.Variants()
	if MatchAny(answer, vs) {
		return true, RuleExact
	}
	_, numeric := numericTarget(q)
	var wa []Word
	if numeric {
		wa = answerWords(answer)
	} else {
		wa = Words(answer)
	}
	if len(wa) == 0 {
		return false, RuleNone
	}
	j := judgement{q: q, wa: wa, narratives: narratives, head: len(wa), cands: cands}
	if head, _, ok := explained(answer, cands); ok {
		// An answer with an explanation gives its answer first: M3's
		// number and M4's (so M5's) variant must lie in the head ("Tier
		// A — Tier C" must not answer Tier C where its head answers Tier
		// A). Words reads the head as the answer's first words.
		var hw []Word
		if numeric {
			hw = answerWords(head)
		} else {
			hw = Words(head)
		}
		j.head = min(len(hw), len(wa))
	}
	for _, v := range vs {
		wv := cachedWords(v)
		j.variants = append(j.variants, wv)
		j.variantWords = append(j.variantWords, wv...)
	}
	for _, d := range q.Distractors {
		dw := cachedWords(d)
		if len(dw) == 0 || allFunctionWords(dw) {
			continue
		}
		j.distractors = append(j.distractors, dw)
		// The answer's number readings apply to a distractor too, so
		// that it occurs in the answer read so ("3-MCPD" as 3 and mcpd).
		if numeric {
			if nw := cachedAnswerWords(d); !slices.EqualFunc(nw, dw, func(a, b Word) bool { return a.Text == b.Text }) {
				j.distractors = append(j.distractors, nw)
			}
		}
	}
	if j.labelledNumber() {
		return false, RuleNone // M2: "Priority 3" for a count of 3
	}
	if j.numeric() {
		return true, RuleNumeric
	}
	if j.contains(vs, len(j.distractors) > 0) {
		return true, RuleContains
	}
	if len(j.distractors) == 0 && j.window(vs) {
		return true, RuleWindow
	}
	if len(j.distractors) == 0 && !numeric && j.described(vs) {
		return true, RuleDescribed
	}
	return false, RuleNone
}

type judgement struct {
	q          *Question
	cands      *candidateForms // the question's (candidatesOf); nil in the tail guard
	wa         []Word
	narratives []string
	// head is the number of the answer's first words that lie before its
	// first explanation separator (len(wa) when it has none): M3's number
	// and M4's variant occurrence must lie among them.
	head         int
	variants     [][]Word // the words of each accepted variant
	variantWords []Word
	distractors  [][]Word
	vocab        map[string]bool // lower-case description words, lazily
	caps         map[string]bool // words written with a capital, lazily (M6)
	// qwords are the question words, lazily (qwordsSet): none when an
	// accepted variant occurs in the question's text (a question that
	// lists the candidates must not let an answer list them too).
	qwords    map[string]bool
	qwordsSet bool
	// units are the rows of unitTable the question, its variants and
	// the narratives use, lazily (unitsSet).
	units    uint64
	unitsSet bool
}

// questionWord reports whether w is a question word: a description word
// of the question's own text (spelled there in lower case at least once,
// no digit), or such a word less a final possessive 's or ’s ("container"
// for "which container's"), when the question names no accepted variant.
func (j *judgement) questionWord(w Word) bool {
	if w.Number != nil || hasDigit(w.Text) {
		return false
	}
	qv := j.questionWords()
	if qv[w.Text] {
		return true
	}
	for _, s := range []string{"'s", "’s"} {
		if qv[w.Text+s] {
			return true
		}
	}
	return false
}

// questionWords returns the description words of the question's own
// text, none when the question names an accepted variant (lazily).
func (j *judgement) questionWords() map[string]bool {
	if !j.qwordsSet {
		j.qwordsSet = true
		if !j.variantInQuestion() {
			j.qwords = lowerVocab(j.q.Question)
		}
	}
	return j.qwords
}

// variantInQuestion reports whether an accepted variant (whose words are
// not all function words) occurs in the question's text.
func (j *judgement) variantInQuestion() bool {
	wq := cachedWords(j.q.Question)
	for _, wv := range j.variants {
		if len(wv) > 0 && !allFunctionWords(wv) && occurs(wq, wv) {
			return true
		}
	}
	return false
}

// occurs reports whether phrase occurs in ws as whole consecutive words.
func occurs(ws, phrase []Word) bool {
	for i := 0; i+len(phrase) <= len(ws); i++ {
		if sameWords(ws[i:i+len(phrase)], phrase) {
			return true
		}
	}
	return false
}

// window applies rule M5, for questions that list no distractors: the
// answer, less leading and trailing function words, is a run of
// consecutive words of one shown narrative inside one clause (no clause
// mark between them in the narrative's text), it holds a variant as in M4,
// and every other word is allowed with description words permitted. A
// description the narrative itself gives of the item is accepted; a run
// across a list ("green, amber, red") or one naming a code is not.
//
// When the answer less its end function words is no such run, the answer
// less its leading and trailing function words, pronouns and question
// words is tried ("Mycoplasma in the working stock explained it" where
// the question asks "What explained it?"), and then the variant must
// occur among those remaining words: the answer is then accepted exactly
// when that run, sent alone, is.
func (j *judgement) window(vs []string) bool {
	a, b := j.trimmed(func(w Word) bool { return functionWords[w.Text] })
	if b-a >= 2 && j.inNarrative(j.wa[a:b]) {
		return j.contains(vs, true)
	}
	c, d := j.trimmed(func(w Word) bool {
		return functionWords[w.Text] || pronouns[w.Text] || j.questionWord(w)
	})
	if (c == a && d == b) || d-c < 2 || !j.inNarrative(j.wa[c:d]) {
		return false
	}
	return j.containsIn(vs, c, min(d, j.head), true)
}

// trimmed returns the bounds of the answer's words less its leading and
// trailing words that drop reports.
func (j *judgement) trimmed(drop func(Word) bool) (a, b int) {
	a, b = 0, len(j.wa)
	for a < b && drop(j.wa[a]) {
		a++
	}
	for b > a && drop(j.wa[b-1]) {
		b--
	}
	return a, b
}

// inNarrative reports whether run is a clause run of a shown narrative.
func (j *judgement) inNarrative(run []Word) bool {
	for _, n := range j.narratives {
		if clauseRun(n, run, j.cands) {
			return true
		}
	}
	return false
}

// described applies rule M6, for questions that list no distractors and
// have no numeric target: a variant that holds a code (a word with an
// ASCII digit: "CLV-5649", "CO2") occurs, every answer word after it is
// allowed as under M4 without distractors, and every word before it is
// allowed with description words permitted, each description word among
// them attached and not bound (variantSentences) nor capitalized: a shown
// narrative or the question's text writes it in a sentence that holds a
// variant, none writes it before a variant in one clause, and none with
// an upper-case or title-case letter. "the fragment CLV-5649"
// is accepted where a narrative writes "CLV-5649, a nucleotide-mimetic
// fragment"; "parental clone 17" is not for the variant "clone 17" (of
// "daughter clone 17") where a narrative writes "the parental line's
// clone 17": the word would be another candidate's, around the code they
// share.
func (j *judgement) described(vs []string) bool {
	for _, v := range vs {
		wv := cachedWords(v)
		if !holdsCode(wv) {
			continue
		}
		for i := 0; i+len(wv) <= j.head; i++ {
			if sameWords(j.wa[i:i+len(wv)], wv) && j.describedAt(i, wv) {
				return true
			}
		}
	}
	return false
}

// holdsCode reports whether a variant's words include a code: a word
// that holds an ASCII digit ("CLV-5649", "CO2", "5649" of "CLV 5649").
func holdsCode(wv []Word) bool {
	for _, w := range wv {
		if hasDigit(w.Text) {
			return true
		}
	}
	return false
}

// describedAt reports whether the answer, with the variant wv occurring
// at its word i, passes M6: words after the variant allowed without
// description words, words before it allowed with them, each description
// word there attached, not bound (variantSentences) and not capitalized.
func (j *judgement) describedAt(i int, wv []Word) bool {
	for _, w := range j.wa[i+len(wv):] {
		if !j.allowed(w, false) {
			return false
		}
	}
	var attached, bound map[string]bool
	for _, w := range j.wa[:i] {
		if j.allowed(w, false) {
			continue
		}
		if !j.allowed(w, true) {
			return false
		}
		if bound == nil {
			attached, bound = j.variantSentences()
		}
		if !attached[w.Text] || bound[w.Text] || j.capitalized()[w.Text] {
			return false
		}
	}
	return true
}

// variantSentences returns, over the shown narratives and the question's
// text, the words of the sentences that hold an occurrence of an
// accepted variant (attached: no sentence end or line break between the
// word and the occurrence) and the words written before an occurrence
// of an accepted variant in one clause (bound: from the word through the
// occurrence's first word, no clause mark between two consecutive
// words). Both read a . and white space between two raw words that a
// candidate writes so ("P. Okonjo") as M5 does: no mark. Variants whose
// words are all function words are passed over.
func (j *judgement) variantSentences() (attached, bound map[string]bool) {
	attached, bound = map[string]bool{}, map[string]bool{}
	for _, text := range append(slices.Clip(j.narratives), j.q.Question) {
		e := clauseCache.get(text, clauseWordsOf)
		ws := e.words
		// mark reports whether a mark of marks stands before word k.
		mark := func(marks []bool, k int) bool {
			p, dot := e.dots[k]
			return marks[k] && !(dot && j.cands != nil && j.cands.dotPairNorm(p))
		}
		for _, wv := range j.variants {
			if len(wv) == 0 || allFunctionWords(wv) {
				continue
			}
			for i := 0; i+len(wv) <= len(ws); i++ {
				if !sameWords(ws[i:i+len(wv)], wv) {
					continue
				}
				clause := true
				for k := i - 1; k >= 0 && !mark(e.stops, k+1); k-- {
					clause = clause && !mark(e.breaks, k+1)
					attached[ws[k].Text] = true
					if clause {
						bound[ws[k].Text] = true
					}
				}
				for k := i + len(wv); k < len(ws) && !mark(e.stops, k); k++ {
					attached[ws[k].Text] = true
				}
			}
		}
	}
	return attached, bound
}

// clauseRun reports whether run occurs as consecutive words of text with
// no clause mark (, ; : ( ) [ ] | a line break, an en or em dash, or a
// sentence end) between any two of them. A . and white space alone
// between two raw words that a candidate of cands (nil: none) writes so
// ("P. Okonjo") is no sentence end.
func clauseRun(text string, run []Word, cands *candidateForms) bool {
	e := clauseCache.get(text, clauseWordsOf)
	ws, breaks := e.words, e.breaks
	for i := 0; i+len(run) <= len(ws); i++ {
		if !sameWords(ws[i:i+len(run)], run) {
			continue
		}
		ok := true
		for k := i + 1; k < i+len(run); k++ {
			if p, dot := e.dots[k]; breaks[k] && !(dot && cands != nil && cands.dotPairNorm(p)) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// clauseWords splits text into words (as Words does) and marks for each
// word whether a clause mark stands between it and the previous word.
func clauseWords(text string) ([]Word, []bool) {
	e := clauseCache.get(text, clauseWordsOf)
	return e.words, e.breaks
}

func clauseWordsOf(text string) clauseEntry {
	a := wordList{withMarks: true}
	raw := rawWordSpans(text)
	prevStart, prevEnd := 0, 0
	var dots map[int][2]string
	var stops []bool
	for _, sp := range raw {
		gap, prev := text[prevEnd:sp[0]], text[prevStart:prevEnd]
		brk := clauseGap(gap, prev)
		r, size := utf8.DecodeRuneInString(gap)
		sep := size == len(gap) && groupSep(r)
		prevStart, prevEnd = sp[0], sp[1]
		// The sign of a number stands before its span: Words of the
		// span alone cannot see it, so it is read here by the same rule
		// (a - or U+2212 that follows no letter, mark or number).
		neg, lead := false, false
		if r1, s1 := utf8.DecodeLastRuneInString(text[:sp[0]]); r1 == '-' || r1 == '\u2212' {
			r2, s2 := utf8.DecodeLastRuneInString(text[:sp[0]-s1])
			neg = s2 == 0 || !wordRune(r2)
		} else if r1 == '.' {
			// A leading point, and the sign before it (wordsOf).
			r2, s2 := utf8.DecodeLastRuneInString(text[:sp[0]-s1])
			if lead = s2 == 0 || !wordRune(r2) && r2 != '.'; lead && (r2 == '-' || r2 == '\u2212') {
				r3, s3 := utf8.DecodeLastRuneInString(text[:sp[0]-s1-s2])
				neg = s3 == 0 || !wordRune(r3)
			}
		}
		stop := brk && sentenceGap(gap, prev)
		span := text[sp[0]:sp[1]]
		if lead {
			span = "." + span
		}
		for k, w := range Words(span) {
			if k == 0 && neg && w.Number != nil {
				w.Number = new(big.Rat).Neg(w.Number)
			}
			n := len(a.ws)
			a.add(w, k == 0 && sep, k == 0 && brk)
			if len(a.ws) > n {
				stops = append(stops, k == 0 && stop)
			}
			if k == 0 && brk && prev != "" && dotGap(gap) {
				if dots == nil {
					dots = map[int][2]string{}
				}
				dots[len(a.ws)-1] = [2]string{Normalize(prev), Normalize(text[sp[0]:sp[1]])}
			}
		}
	}
	return clauseEntry{a.ws, a.marks, stops, dots}
}

// clauseGap reports whether gap, the text between two words of a
// narrative (prev is the word before it), holds a clause mark: one of
// , ; : ( ) [ ] |, a line break (LF or CR), an en or em dash, or a
// sentence end. A sentence end is ? ! or … (U+2026), or a . that is not
// directly followed by a letter, mark or number (".5" keeps its point;
// a decimal point inside a number is part of the word, never in a gap)
// and that does not directly follow a word holding a . and no ASCII
// digit (the abbreviations "e.g.", "i.e.", "U.S.").
func clauseGap(gap, prev string) bool {
	for i, r := range gap {
		switch r {
		case ',', ';', ':', '(', ')', '[', ']', '|', '\n', '\r', '—', '–', '?', '!', '…':
			return true
		case '.':
			if endsSentence(gap, i, prev) {
				return true
			}
		}
	}
	return false
}

// sentenceGap reports whether gap, the text between two words of a text
// (prev is the word before it), holds a sentence end as clauseGap reads
// it (? ! … or a . that ends a sentence) or a line break (LF or CR).
func sentenceGap(gap, prev string) bool {
	for i, r := range gap {
		switch r {
		case '\n', '\r', '?', '!', '…':
			return true
		case '.':
			if endsSentence(gap, i, prev) {
				return true
			}
		}
	}
	return false
}

// endsSentence reports whether the . at gap[i] ends a sentence: not when
// it directly precedes the next word (".5" keeps its point), nor when it
// directly follows a word holding a . and no ASCII digit (the
// abbreviations "e.g.", "i.e.", "U.S.").
func endsSentence(gap string, i int, prev string) bool {
	if i+1 == len(gap) {
		return false
	}
	return i != 0 || !strings.Contains(prev, ".") || hasDigit(prev)
}

type clauseEntry struct {
	words  []Word
	breaks []bool
	// stops marks, for each word, whether a sentence end or a line break
	// (sentenceGap) stands between it and the previous word: M6 reads
	// the sentences that hold a variant.
	stops []bool
	// dots holds, for a word whose gap before it is a . and white space
	// only (a sentence end by clauseGap), the normalised raw words on
	// either side ("p", "okonjo"): M5 reads no sentence end there where
	// a candidate writes them so.
	dots map[int][2]string
}

var clauseCache textCache[clauseEntry]

// numeric applies rule M3.
func (j *judgement) numeric() bool {
	target, ok := numericTarget(j.q)
	if !ok {
		return false
	}
	found := false
	for k, w := range j.wa {
		if w.Number == nil {
			continue
		}
		if found || w.Number.Cmp(target) != 0 || k >= j.head {
			return false // a second number, the wrong one, or one after an explanation separator
		}
		found = true
	}
	if !found || j.namesDistractor(-1, -1) {
		return false
	}
	for _, w := range j.wa {
		if w.Number != nil {
			continue
		}
		if !j.allowed(w, true) && !j.unitName(w) && !j.compoundUnit(w) && !precisionWords[w.Text] && !dimensionWords[w.Text] {
			return false
		}
	}
	return true
}

// compoundUnit reports whether w, a non-number word beside a numeric
// answer's number, is a compound unit the question's text writes: a word
// of the question's text that begins with a letter and holds a / and an
// ASCII digit ("ml/min/1.73" of "in mL/min/1.73 m² per year"). The
// question fixes it; M3 judges the one number all the same.
func (j *judgement) compoundUnit(w Word) bool {
	r, _ := utf8.DecodeRuneInString(w.Text)
	if w.Number != nil || !unicode.IsLetter(r) || !strings.Contains(w.Text, "/") || !hasDigit(w.Text) {
		return false
	}
	for _, q := range cachedWords(j.q.Question) {
		if q.Number == nil && q.Text == w.Text {
			return true
		}
	}
	return false
}

// unitTable lists, per unit, its spellings (normalised): its symbol and
// the names and codes an answer may give it (spec/verification.md, "Unit
// names"). A spelling of one rune that is not a letter is a symbol: words
// never hold it, texts are searched for it.
var unitTable = [][]string{
	{"%", "percent", "pct", "cent"},
	{"pp", "pts", "percentage", "point", "points"},
	{"€", "eur", "euro", "euros"},
	{"£", "gbp", "pound", "pounds", "sterling"},
	{"$", "usd", "dollar", "dollars"},
	{"×", "x", "times", "fold", "factor"},
	{"°", "c", "celsius", "degree", "degrees"},
	{"km", "kilometre", "kilometres", "kilometer", "kilometers"},
	{"m", "metre", "metres", "meter", "meters"},
	{"cm", "centimetre", "centimetres", "centimeter", "centimeters"},
	{"mm", "millimetre", "millimetres", "millimeter", "millimeters"},
	{"μm", "um", "micromolar", "micrometre", "micrometres", "micrometer", "micrometers"},
	{"s", "sec", "secs", "second", "seconds"},
	{"ms", "millisecond", "milliseconds"},
	{"min", "mins", "minute", "minutes"},
	{"h", "hr", "hrs", "hour", "hours"},
	{"kg", "kilogram", "kilograms"},
	{"g", "gram", "grams"},
	{"mg", "milligram", "milligrams"},
	{"μg", "ug", "microgram", "micrograms"},
	{"t", "tonne", "tonnes"},
	{"l", "litre", "litres", "liter", "liters"},
	{"ml", "millilitre", "millilitres", "milliliter", "milliliters"},
	{"ha", "hectare", "hectares"},
}

// unitRow maps a word spelling of unitTable to the bit of its row;
// unitSymbol does so for the symbols.
var unitRow, unitSymbol = func() (map[string]uint64, map[rune]uint64) {
	words, symbols := map[string]uint64{}, map[rune]uint64{}
	for i, row := range unitTable {
		for _, sp := range row {
			if r, n := utf8.DecodeRuneInString(sp); n == len(sp) && !unicode.IsLetter(r) {
				symbols[r] |= 1 << i
				continue
			}
			words[sp] |= 1 << i
		}
	}
	return words, symbols
}()

// unitName reports whether w, a word beside a numeric answer's number
// that no other rule allows, is a spelling of a unit the question's text,
// an accepted variant or a shown narrative uses in any spelling
// ("kilometres" when a text has "km", "EUR" when one has "€" or
// "euros"). A unit no text uses is refused ("10.6 metres" for a depth in
// km).
func (j *judgement) unitName(w Word) bool {
	row := unitRow[w.Text]
	if row == 0 {
		return false
	}
	if j.units&row != 0 {
		return true
	}
	if !j.unitsSet {
		j.unitsSet = true
		j.units = unitsUsed(j.q.Question)
		for _, v := range j.q.Variants() {
			j.units |= unitsUsed(v)
		}
		for _, n := range j.narratives {
			j.units |= unitsUsed(n)
		}
		// A difference of two percentages is in percentage points: a
		// text that uses percent uses the percentage-point row too
		// ("0.33 percentage points" beside "2.36%" and "2.03%").
		if j.units&unitRow["percent"] != 0 {
			j.units |= unitRow["pp"]
		}
	}
	return j.units&row != 0
}

// unitsUsed returns the rows of unitTable that text uses: a word of it,
// or a part of a word between / or - characters, is a word spelling of
// the row ("mg" and "l" of "mg/l", "fold" of "4-fold"), or the text holds
// the row's symbol. The result is cached by text.
func unitsUsed(text string) uint64 { return unitCache.get(text, unitsUsedBy) }

func unitsUsedBy(text string) uint64 {
	var m uint64
	for _, r := range text {
		m |= unitSymbol[r]
	}
	for _, w := range Words(text) {
		m |= unitRow[w.Text]
		if strings.ContainsAny(w.Text, "/-") {
			for _, part := range strings.FieldsFunc(w.Text, func(r rune) bool { return r == '/' || r == '-' }) {
				m |= unitRow[part]
			}
		}
	}
	return m
}

var unitCache textCache[uint64]

// labelledNumber applies rule M2's number-label guard: when the canonical
// answer is one number, an answer in which a number directly follows a
// numbered label the texts use is wrong ("Priority 3" for a count of 3
// where a narrative writes "Priority 1"; "priority 3" at the answer's
// start where a narrative writes "priority 1 ... priority 2").
func (j *judgement) labelledNumber() bool {
	for i := 1; i < len(j.wa); i++ {
		if j.wa[i].Number == nil || j.wa[i-1].Number != nil {
			continue
		}
		if wc := cachedWords(j.q.Answer); len(wc) != 1 || wc[0].Number == nil {
			return false // a numbered label's number ("3" for "grade 3")
		}
		if j.numberLabel(j.wa[i-1], allFunctionWords(j.wa[:i-1])) {
			return true
		}
	}
	return false
}

// labelUnits are unit spellings that stay number labels where the texts
// write them so ("Point 3" beside a narrative's "Point 1"): a
// percentage point's names that are also words of labels.
var labelUnits = toWordSet("point points")

// quantityWords are never lower-case number labels: they quantify the
// number after them ("all 5 labs", "within 10 days").
var quantityWords = toWordSet("all only exactly just nearly almost over under above below within beyond up total some least most")

// numberLabel reports whether w is a numbered label the texts use: w is
// no function word, variant word, hedge or unit spelling, and in a shown
// narrative or the question's text it is a raw word with an upper-case or
// title-case first letter followed, after white space only, by a number;
// or, when first (only function words before it in the answer), it is no
// quantity word and one such text writes it with no upper-case letter
// before numbers of two or more values ("priority 1 ... priority 2").
func (j *judgement) numberLabel(w Word, first bool) bool {
	if functionWords[w.Text] || hedges[w.Text] || unitRow[w.Text] != 0 && !labelUnits[w.Text] || j.variantWord(w) {
		return false
	}
	lower := first && !quantityWords[w.Text]
	for _, text := range append([]string{j.q.Question}, j.narratives...) {
		l := numberLabels(text)
		if l.upper[w.Text] || lower && l.lower[w.Text] {
			return true
		}
	}
	return false
}

// labelEntry is what numberLabels finds in one text.
type labelEntry struct {
	// upper holds the raw words without ASCII digits whose first letter
	// is upper-case or title-case and that are one word, followed, after
	// white space only, by a raw word whose first word is a number
	// ("Priority 1", "Level 2"); normalised.
	upper map[string]bool
	// lower holds the raw words without ASCII digits and without an
	// upper-case or title-case letter that are one word and that the
	// text writes so before numbers of at least two values ("priority 1
	// ... priority 3").
	lower map[string]bool
}

// numberLabels returns the words text uses as numbered labels, cached by
// text.
func numberLabels(text string) labelEntry { return labelCache.get(text, numberLabelsOf) }

func numberLabelsOf(text string) labelEntry {
	e := labelEntry{upper: map[string]bool{}, lower: map[string]bool{}}
	values := map[string]string{} // a lower-case label's first value
	spans := rawWordSpans(text)
	for k := 0; k+1 < len(spans); k++ {
		raw := text[spans[k][0]:spans[k][1]]
		if hasDigit(raw) {
			continue
		}
		if strings.TrimFunc(text[spans[k][1]:spans[k+1][0]], unicode.IsSpace) != "" || spans[k+1][0] == spans[k][1] {
			continue
		}
		next := Words(text[spans[k+1][0]:spans[k+1][1]])
		if len(next) == 0 || next[0].Number == nil {
			continue
		}
		ws := Words(raw)
		if len(ws) != 1 || ws[0].Number != nil {
			continue
		}
		r, _ := utf8.DecodeRuneInString(raw)
		switch {
		case unicode.IsUpper(r) || unicode.IsTitle(r):
			e.upper[ws[0].Text] = true
		case !hasUpper(raw):
			v := next[0].Number.RatString()
			if first, ok := values[ws[0].Text]; !ok {
				values[ws[0].Text] = v
			} else if first != v {
				e.lower[ws[0].Text] = true
			}
		}
	}
	return e
}

var labelCache textCache[labelEntry]

// spelledNumber maps the spelled-out integers 0 to 99 to their values
// (spec/verification.md, "Spelled-out numbers"): zero to nineteen, the
// tens twenty to ninety, and a ten joined to a unit by a hyphen
// ("forty-two"), which words reads as one word.
var spelledNumber = func() map[string]int64 {
	m := map[string]int64{}
	for i, w := range strings.Fields("zero one two three four five six seven eight nine ten eleven twelve " +
		"thirteen fourteen fifteen sixteen seventeen eighteen nineteen") {
		m[w] = int64(i)
	}
	units := strings.Fields("one two three four five six seven eight nine")
	for i, w := range strings.Fields("twenty thirty forty fifty sixty seventy eighty ninety") {
		t := int64(20 + 10*i)
		m[w] = t
		for u, uw := range units {
			m[w+"-"+uw] = t + int64(u+1)
		}
	}
	return m
}()

// numberReadings returns ws as an answer to a question with a numeric
// target reads it: spelled-out numbers as numbers (spelledNumbers), then
// a word that is a number or a spelled-out number, one `-` and a rest
// that begins with a letter as two words, that number and the rest
// (hyphenNumbers: "4-fold", "10.6-km", "four-fold").
func numberReadings(ws []Word) []Word {
	return scaleNumbers(hyphenNumbers(spelledNumbers(foldNumbers(ws))))
}

// answerWords returns the words of s as an answer to a question with a
// numeric target reads them: decimal commas ("2,9"), then numberReadings.
func answerWords(s string) []Word { return numberReadings(wordsOf(s, true)) }

// foldNumbers reads a word that is a spelled-out number of the table
// directly followed by "fold" ("fourfold", "twenty-fourfold") as that
// number and the word "fold" (spec/verification.md, "Spelled-out
// numbers"); a new slice when one is, ws otherwise.
func foldNumbers(ws []Word) []Word {
	var out []Word
	for i, w := range ws {
		head, ok := strings.CutSuffix(w.Text, "fold")
		n, isNum := spelledNumber[head]
		if !ok || !isNum || w.Number != nil {
			if out != nil {
				out = append(out, w)
			}
			continue
		}
		if out == nil {
			out = append(make([]Word, 0, len(ws)+1), ws[:i]...)
		}
		out = append(out, Word{Text: big.NewInt(n).String(), Number: new(big.Rat).SetInt64(n), spaced: w.spaced}, Word{Text: "fold", spaced: true})
	}
	if out == nil {
		return ws
	}
	return out
}

// scales are the multiplier words of a number in an answer ("125k",
// "125 thousand", "1.2 million"); wordScales those after which a
// smaller number may follow ("one thousand two hundred").
var (
	scales     = map[string]int64{"k": 1e3, "thousand": 1e3, "million": 1e6, "mn": 1e6, "billion": 1e9, "bn": 1e9}
	wordScales = map[string]bool{"thousand": true, "million": true, "billion": true}
)

// scaleNumbers merges number phrases of an answer (spec/verification.md,
// "Number phrases"): a whole number 1-99, "hundred", optionally "and" and
// a whole number 1-99 ("one hundred sixty-eight" is 168); then a number
// and a scale word (k, thousand, million, mn, billion, bn: "125k" is
// 125000), after thousand, million or billion and a positive whole
// number optionally "and" and a smaller positive whole number phrase
// ("one thousand two hundred" is 1200). Only words that are spaced (one
// raw word, or spaces between) merge. A new slice when one merges, ws
// otherwise.
func scaleNumbers(ws []Word) []Word {
	isWord := func(i int, t string) bool {
		return i < len(ws) && ws[i].Number == nil && ws[i].Text == t && ws[i].spaced
	}
	small := func(i int, max int64) bool { // a whole number 1..max at i
		if i >= len(ws) || ws[i].Number == nil || !ws[i].spaced || !ws[i].Number.IsInt() {
			return false
		}
		n := ws[i].Number.Num()
		return n.Sign() > 0 && n.IsInt64() && n.Int64() <= max
	}
	var out []Word
	changed := false
	// hundreds
	for i := 0; i < len(ws); i++ {
		w := ws[i]
		if w.Number != nil && w.Number.IsInt() && w.Number.Sign() > 0 && w.Number.Num().IsInt64() && w.Number.Num().Int64() <= 99 && isWord(i+1, "hundred") {
			v := new(big.Rat).Mul(w.Number, big.NewRat(100, 1))
			j := i + 2
			if small(j, 99) {
				v.Add(v, ws[j].Number)
				j++
			} else if isWord(j, "and") && small(j+1, 99) {
				v.Add(v, ws[j+1].Number)
				j += 2
			}
			out = append(out, Word{Text: v.RatString(), Number: v, spaced: w.spaced})
			i = j - 1
			changed = true
			continue
		}
		out = append(out, w)
	}
	if changed {
		ws = out
	}
	// scales, read from the right so that a smaller scaled remainder
	// ("two hundred thousand" after "five million") is merged first.
	var scaled func(i int) (*big.Rat, int)
	scaled = func(i int) (*big.Rat, int) { // the phrase at number word i and the index after it
		w := ws[i]
		if i+1 >= len(ws) || ws[i+1].Number != nil || !ws[i+1].spaced {
			return w.Number, i + 1
		}
		s, ok := scales[ws[i+1].Text]
		if !ok {
			return w.Number, i + 1
		}
		v := new(big.Rat).Mul(w.Number, new(big.Rat).SetInt64(s))
		j := i + 2
		if wordScales[ws[i+1].Text] && w.Number.IsInt() && w.Number.Sign() > 0 {
			k := j
			if isWord(k, "and") {
				k++
			}
			if k < len(ws) && small(k, s-1) {
				if r, next := scaled(k); r.IsInt() && r.Sign() > 0 && r.Cmp(new(big.Rat).SetInt64(s)) < 0 {
					v.Add(v, r)
					j = next
				}
			}
		}
		return v, j
	}
	out = nil
	merged := false
	for i := 0; i < len(ws); i++ {
		w := ws[i]
		if w.Number == nil {
			out = append(out, w)
			continue
		}
		v, j := scaled(i)
		if j == i+1 {
			out = append(out, w)
			continue
		}
		out = append(out, Word{Text: v.RatString(), Number: v, spaced: w.spaced})
		i = j - 1
		merged = true
	}
	if merged {
		return out
	}
	return ws
}

// hyphenNumbers returns ws with every word that is a number (ASCII, as
// words reads numbers, never negative) or a word of the spelled-number
// table, then one -, then a rest beginning with a letter, read as two
// words: the number and the rest (a new slice when one is; ws
// otherwise). Judge applies it to the answer of a question with a
// numeric target only, after spelledNumbers: "4-fold" is 4 and "fold",
// "forty-two" stays the one number 42, and the number is the longest one
// before a hyphen ("forty-six-fold" is 46 and "fold"). The rest is read
// with both readings again ("3-four" is 3 and 4).
func hyphenNumbers(ws []Word) []Word {
	var out []Word
	for i, w := range ws {
		var num Word
		// The longest number before a hyphen: "forty-six-fold" is 46 and
		// "fold", never 40 and "six-fold".
		k := len(w.Text)
		for w.Number == nil && num.Number == nil {
			k = strings.LastIndexByte(w.Text[:k], '-')
			if k <= 0 {
				break
			}
			if k+1 >= len(w.Text) {
				continue
			}
			r, _ := utf8.DecodeRuneInString(w.Text[k+1:])
			if !unicode.IsLetter(r) {
				continue
			}
			head := w.Text[:k]
			if v, ok := parseNumber(head); ok {
				num = Word{Text: head, Number: v, spaced: w.spaced}
			} else if n, ok := spelledNumber[head]; ok {
				num = Word{Text: big.NewInt(n).String(), Number: new(big.Rat).SetInt64(n), spaced: w.spaced}
			}
		}
		if num.Number == nil {
			if out != nil {
				out = append(out, w)
			}
			continue
		}
		if out == nil {
			out = append(make([]Word, 0, len(ws)+1), ws[:i]...)
		}
		// The rest is read so too: "3-four" is 3 and 4, two numbers as
		// "3 four" is, and "3-four-fold" 3, 4 and "fold".
		out = append(out, num)
		out = append(out, numberReadings([]Word{{Text: w.Text[k+1:]}})...)
	}
	if out == nil {
		return ws
	}
	return out
}

// spelledNumbers returns ws with every word of the spelled-number table
// read as the number it spells (a new slice when one is; ws otherwise).
// Judge applies it to the answer of a question with a numeric target only.
// A ten ("thirty") and a unit one to nine ("one") that are both whole
// words, the unit close to the ten (spaces only between them), are one
// number, their sum: "thirty one" is 31 as "thirty-one" is
// (spec/verification.md, "Spelled-out numbers").
func spelledNumbers(ws []Word) []Word {
	var out []Word
	for i := 0; i < len(ws); i++ {
		w := ws[i]
		n, ok := spelledNumber[w.Text]
		if !ok || w.Number != nil {
			if out != nil {
				out = append(out, w)
			}
			continue
		}
		if out == nil {
			out = append(make([]Word, 0, len(ws)), ws[:i]...)
		}
		if spelledTens[w.Text] && i+1 < len(ws) && ws[i+1].Number == nil && ws[i+1].spaced {
			if u, ok := spelledNumber[ws[i+1].Text]; ok && u >= 1 && u <= 9 {
				n += u
				i++
			}
		}
		v := new(big.Rat).SetInt64(n)
		// A decimal spelled digit by digit: "seven point six" is 7.6,
		// "thirty-eight point six" 38.6, "zero point seven" 0.7 (every
		// word close to the one before it; at least one digit word).
		if i+2 < len(ws) && ws[i+1].Number == nil && ws[i+1].spaced && ws[i+1].Text == "point" {
			frac, k := "", i+2
			for ; k < len(ws) && ws[k].Number == nil && ws[k].spaced; k++ {
				d, ok := spelledDigit[ws[k].Text]
				if !ok {
					break
				}
				frac += string(rune('0' + d))
			}
			if frac != "" {
				v, _ = new(big.Rat).SetString(big.NewInt(n).String() + "." + frac)
				i = k - 1
			}
		}
		out = append(out, Word{Text: v.RatString(), Number: v, spaced: w.spaced})
	}
	if out == nil {
		return ws
	}
	return out
}

// spelledTens are the tens of the spelled-number table, which a spelled
// unit may follow as a separate word ("thirty one").
var spelledTens = toWordSet("twenty thirty forty fifty sixty seventy eighty ninety")

// spelledDigit are the words of a spelled decimal's digits after
// "point" ("seven point six").
var spelledDigit = map[string]int{"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9}

// numericTarget is the number a numeric answer must state: the canonical
// answer's value when it is one number word, or the number of a numbered
// label ("grade 3") whose label word the question uses.
func numericTarget(q *Question) (*big.Rat, bool) {
	wc := cachedWords(q.Answer)
	switch {
	case len(wc) == 1 && wc[0].Number != nil:
		return wc[0].Number, true
	case len(wc) == 2 && wc[1].Number != nil && wc[0].Number == nil && !hasDigit(wc[0].Text):
		for _, w := range cachedWords(q.Question) {
			if w.Text == wc[0].Text {
				return wc[1].Number, true
			}
		}
	}
	return nil, false
}

// contains applies rule M4 (and the last step of M5): a variant occurs
// and every other word is allowed, description words only when
// descriptions is set.
func (j *judgement) contains(vs []string, descriptions bool) bool {
	return j.containsIn(vs, 0, j.head, descriptions)
}

// containsIn is contains with the variant's occurrence among the answer's
// words lo to hi (exclusive).
func (j *judgement) containsIn(vs []string, lo, hi int, descriptions bool) bool {
	for _, v := range vs {
		wv := cachedWords(v)
		if len(wv) == 0 || allFunctionWords(wv) {
			continue
		}
		for i := lo; i+len(wv) <= hi; i++ {
			if !sameWords(j.wa[i:i+len(wv)], wv) {
				continue
			}
			if j.spanOK(i, i+len(wv), descriptions) {
				return true
			}
		}
	}
	return false
}

func (j *judgement) spanOK(a, b int, descriptions bool) bool {
	if j.namesDistractor(a, b) {
		return false
	}
	for k, w := range j.wa {
		if k >= a && k < b {
			continue
		}
		if !j.allowed(w, descriptions) || j.distractorWord(w) {
			return false
		}
	}
	return true
}

// distractorWord reports whether w, an answer word outside the matched
// variant, is the same as a word of a (non-ignored) distractor and is
// neither a function word, nor the same as a word of an accepted variant,
// nor a question word (rule M2's word guard under M4: "red amber green"
// names the distractor "amber status" by its word "amber").
func (j *judgement) distractorWord(w Word) bool {
	if functionWords[w.Text] || j.variantWord(w) {
		return false
	}
	// A possessive names what it owns: "annex's" is the distractor "the
	// annex"'s word "annex" (spec/verification.md, "Possessives").
	if b, ok := possessiveBase(w); ok && j.distractorWordAs(b) {
		return true
	}
	return j.distractorWordAs(w)
}

// distractorWordAs is distractorWord for w as written: the same as a word
// of a distractor and no function word, variant's word or question word.
func (j *judgement) distractorWordAs(w Word) bool {
	if functionWords[w.Text] || j.variantWord(w) {
		return false
	}
	for _, d := range j.distractors {
		for _, dw := range d {
			if dw.Same(w) {
				return !j.questionWord(w)
			}
		}
	}
	return false
}

// possessiveBase returns w less a final 's or ’s (a possessive: "lab's"
// is "lab", "1's" the number 1), when w is a word with that ending and
// more (spec/verification.md, "Possessives").
func possessiveBase(w Word) (Word, bool) {
	if w.Number != nil {
		return Word{}, false
	}
	for _, e := range []string{"'s", "’s"} {
		if b, ok := strings.CutSuffix(w.Text, e); ok && b != "" {
			base := Word{Text: b, spaced: w.spaced}
			if v, num := parseNumber(b); num {
				base.Number = v
			}
			return base, true
		}
	}
	return Word{}, false
}

// guardSame reports whether the answer word w is, for M2's guards, the
// distractor word d: the same, or a possessive that is no variant's word
// whose base is the same ("annex's" and "annex", "1's" and "1").
func (j *judgement) guardSame(w, d Word) bool {
	if w.Same(d) {
		return true
	}
	b, ok := possessiveBase(w)
	return ok && b.Same(d) && !j.variantWord(w)
}

func (j *judgement) variantWord(w Word) bool {
	for _, v := range j.variantWords {
		if v.Same(w) {
			return true
		}
	}
	return false
}

// namesDistractor reports whether a distractor occurs in the answer as
// whole consecutive words, other than entirely inside [a, b); a
// possessive that is no variant's word is read as its base too ("grade
// 1's" names the distractor "grade 1").
func (j *judgement) namesDistractor(a, b int) bool {
	for _, d := range j.distractors {
		for i := 0; i+len(d) <= len(j.wa); i++ {
			if i >= a && i+len(d) <= b {
				continue
			}
			if slices.EqualFunc(j.wa[i:i+len(d)], d, j.guardSame) {
				return true
			}
		}
	}
	return false
}

// allowed reports whether an answer word outside the matched variant (or
// beside the number) may stand there: never a joining word, else a
// function word, a pronoun, a word of an accepted variant, a question word (a
// description word of the question's own text, when the question names
// no accepted variant), or, when descriptions are allowed, a description
// word (a word without digits that the narratives or the question spell
// in lower case at least once).
func (j *judgement) allowed(w Word, descriptions bool) bool {
	if joinWords[w.Text] {
		return false
	}
	// A pronoun refers back and names nothing ("It had loader recorded as
	// its family type"); a distractor's word all the same under M2.
	if functionWords[w.Text] || pronouns[w.Text] || j.variantWord(w) || legalSuffixes[w.Text] {
		return true
	}
	if !descriptions || hasDigit(w.Text) {
		return j.questionWord(w) || j.inflectedQuestionWord(w)
	}
	return j.descriptionWords()[w.Text] || j.questionWord(w) || j.inflectedQuestionWord(w)
}

// capitalized returns the words that a shown narrative or the question's
// text writes, at least once, with an upper-case or title-case letter
// (and no ASCII digit), lazily: M6 takes none of them for a description
// word, which may be a word of a name ("Kiln" of "Kiln Line B").
func (j *judgement) capitalized() map[string]bool {
	if j.caps == nil {
		j.caps = map[string]bool{}
		for _, n := range append(slices.Clip(j.narratives), j.q.Question) {
			for k := range upperVocab(n) {
				j.caps[k] = true
			}
		}
	}
	return j.caps
}

// descriptionWords returns the description words of the session (the
// shown narratives' and the question's), lazily.
func (j *judgement) descriptionWords() map[string]bool {
	if j.vocab == nil {
		j.vocab = map[string]bool{}
		for _, n := range j.narratives {
			for k := range lowerVocab(n) {
				j.vocab[k] = true
			}
		}
		for k := range lowerVocab(j.q.Question) {
			j.vocab[k] = true
		}
	}
	return j.vocab
}

// inflectedQuestionWord reports whether w is an inflection of a question
// word: less at most one of the endings of inflections each, the two are
// the same text of at least three characters ("remaining" and "remains"
// are both "remain"). It allows the word only: the word guards read
// question words as written.
func (j *judgement) inflectedQuestionWord(w Word) bool {
	if w.Number != nil || hasDigit(w.Text) {
		return false
	}
	for q := range j.questionWords() {
		// the question words include those less a possessive 's or ’s
		// ("container" of "container's")
		if b, ok := strings.CutSuffix(q, "'s"); ok {
			q = b
		} else if b, ok := strings.CutSuffix(q, "’s"); ok {
			q = b
		}
		for _, a := range stems(w.Text) {
			for _, b := range stems(q) {
				if a == b && utf8.RuneCountInString(a) >= 3 {
					return true
				}
			}
		}
	}
	return false
}

// stems returns w and w less each of inflections it ends in.
func stems(w string) []string {
	out := []string{w}
	for _, e := range inflections {
		if s, ok := strings.CutSuffix(w, e); ok {
			out = append(out, s)
		}
	}
	return out
}

// functionWords may surround an answer; joinWords never may (they turn an
// answer into a list, a hedge or a negation).
var (
	functionWords = toWordSet("a an the of at in on by from for to with via per its their this that which is was were are be as")
	joinWords     = toWordSet("and or nor not no none neither either both versus vs plus also but than except")
	// tailHedges may not open a tail either ("X (maybe Y)", "X,
	// perhaps Y"): a second answer after the first, hedged.
	tailHedges = toWordSet("maybe perhaps possibly alternatively")
	// precisionWords may stand beside M3's one number ("a total of 29",
	// "exactly 29"): they name no candidate.
	precisionWords = toWordSet("exactly precisely total")
	// dimensionWords may stand beside M3's one number too ("9.4 km
	// deep"): they name no candidate.
	dimensionWords = toWordSet("deep long high tall wide thick")
	// legalSuffixes are allowed words ("Kessler Lime Works Ltd"); a
	// distractor's word all the same under M2.
	legalSuffixes = toWordSet("ltd limited inc plc llc corp gmbh")
	// inflections are the endings an inflected question word may differ
	// by ("remaining" for "remains").
	inflections = []string{"ing", "ed", "es", "s", "d"}
	// pronouns are words of a tail that the tail guard's word check
	// passes over (spec/verification.md, "Explanation"), and allowed
	// words of every rule: they refer back and name nothing ("It is
	// classed as competitive", "the Hollin segment hosts it").
	pronouns = toWordSet("it they them he him she her these those")
)

func toWordSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

func allFunctionWords(ws []Word) bool {
	for _, w := range ws {
		if !functionWords[w.Text] {
			return false
		}
	}
	return true
}

func sameWords(a, b []Word) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Same(b[i]) {
			return false
		}
	}
	return true
}

// Same reports whether two words are the same word: numbers of equal value
// (sign included), or two non-numbers with equal text.
func (w Word) Same(o Word) bool {
	if w.Number != nil || o.Number != nil {
		return w.Number != nil && o.Number != nil && w.Number.Cmp(o.Number) == 0
	}
	return w.Text == o.Text
}

func hasDigit(s string) bool {
	for _, r := range s {
		if r >= '0' && r <= '9' {
			return true
		}
	}
	return false
}

// Word is one word of a normalised text (spec/verification.md, "Words").
type Word struct {
	// Text is the word as it stands in the normalised (trimmed, NFC,
	// case-folded) text.
	Text string
	// Number is the word's value when the word is a number, else nil.
	Number *big.Rat
	// spaced is set when only spaces (U+0020, U+00A0, U+202F) or
	// nothing stand between the word and the one before it in the text
	// Words read (scaleNumbers merges only such words).
	spaced bool
}

// Words splits s into words as the verification spec defines them: s is
// normalised (Normalize); a word is a maximal run of letters, marks and
// digits, where one of the joiners - . , / ' ’ _ : standing between two
// such characters belongs to the word. A word is a number when it is
// ASCII digits with at most one decimal point, or digits grouped by commas
// in threes ("125,000", "1,250.5"); a number directly preceded by a minus
// sign (- or U+2212) that does not itself follow a letter, mark or
// number (wordRune: Unicode L, M, N) is negative; digits alone directly
// after a . that starts the text or follows no letter, mark, number or .
// are read with that . as their decimal point (".7" is 0.7, "-.5" is
// -0.5: a leading point). A word whose part
// before its first letter is a number is read as that number and the rest
// ("10.6km": 10.6 and "km"), and digit groups after one space, U+00A0 or
// U+202F are one number ("125 000"; mergeGroups).
func Words(s string) []Word { return wordsOf(s, false) }

// wordsOf is Words; with answer set it also reads a decimal comma
// (decimalComma: "2,9" is 2.9), as an answer to a question with a numeric
// target is read.
func wordsOf(s string, answer bool) []Word {
	n := Normalize(s)
	a := wordList{answer: answer}
	rs := []rune(n)
	i, prevEnd := 0, 0
	for i < len(rs) {
		if !wordRune(rs[i]) {
			i++
			continue
		}
		start := i
		for i < len(rs) {
			switch {
			case wordRune(rs[i]):
				i++
				continue
			case joiner(rs[i]) && i+1 < len(rs) && wordRune(rs[i+1]) && i > start:
				i++
				continue
			}
			break
		}
		neg := start > 0 && (rs[start-1] == '-' || rs[start-1] == '\u2212') && (start < 2 || !wordRune(rs[start-2]))
		// A leading point (".7", "-.5"): a . that starts the text or
		// follows no letter, mark, number or . is the number's decimal
		// point, and the sign stands before it.
		lead := start > 0 && rs[start-1] == '.' && (start < 2 || !wordRune(rs[start-2]) && rs[start-2] != '.')
		if lead {
			neg = start > 1 && (rs[start-2] == '-' || rs[start-2] == '\u2212') && (start < 3 || !wordRune(rs[start-3]))
		}
		a.lead = lead
		spaced := true
		for _, r := range rs[prevEnd:start] {
			spaced = spaced && groupSep(r)
		}
		a.spaced = spaced
		a.addRaw(string(rs[start:i]), neg, start == prevEnd+1 && groupSep(rs[prevEnd]), false)
		prevEnd = i
	}
	return a.ws
}

// wordList collects words as Words reads them, applying the number and
// unit split and the digit-group merge (marks: M5's clause marks, one per
// word, kept alongside when used).
type wordList struct {
	ws        []Word
	marks     []bool
	withMarks bool
	answer    bool   // read decimal commas (wordsOf)
	spaced    bool   // the next raw word's spaced (Word.spaced)
	run       string // the digits of an open digit-group run, "" when none
	lead      bool   // the next raw word follows a leading point (".7")
}

// addRaw adds the word(s) of one maximal run text: a number, or a number
// and its unit when the part before text's first letter is a number
// ("10.6km" is 10.6 and "km"), or a plain word. neg is set when a minus
// sign stands directly before text, sep when exactly one space, no-break
// space or narrow no-break space does.
func (a *wordList) addRaw(text string, neg, sep, mark bool) {
	parse := parseNumber
	if a.answer {
		parse = parseAnswerNumber
	}
	num, rest := splitUnitBy(text, parse)
	if a.lead && allDigits(num) {
		// ".7" is 0.7, ".5km" 0.5 and "km" (spec/verification.md,
		// "Leading point").
		num = "0." + num
	}
	a.lead = false
	w := Word{Text: num, spaced: a.spaced}
	if v, ok := parse(num); ok {
		if neg {
			v.Neg(v)
		}
		w.Number = v
	}
	a.add(w, sep, mark)
	if rest != "" {
		a.add(Word{Text: rest, spaced: true}, false, false)
	}
}

// add appends w, or merges it into the open digit-group run: a number of
// one to three ASCII digits not starting with 0 ("125"), then numbers of
// exactly three ASCII digits, the last of which may have a decimal part
// ("000", "250.5"), each after exactly one separator (sep). The merged
// number has the first group's sign and keeps its mark.
func (a *wordList) add(w Word, sep, mark bool) {
	if a.run != "" && sep && laterGroup(w) {
		a.run += w.Text
		last := &a.ws[len(a.ws)-1]
		v, _ := new(big.Rat).SetString(a.run)
		if last.Number.Sign() < 0 {
			v.Neg(v)
		}
		last.Text, last.Number = a.run, v
		if strings.Contains(w.Text, ".") {
			a.run = ""
		}
		return
	}
	a.ws = append(a.ws, w)
	if a.withMarks {
		a.marks = append(a.marks, mark)
	}
	a.run = ""
	if firstGroup(w) {
		a.run = w.Text
	}
}

// splitUnit splits a word whose part before its first letter (Unicode L)
// is a number into that number and the rest ("1.6mg/l": "1.6", "mg/l");
// any other word is returned whole, with rest empty.
func splitUnit(text string) (num, rest string) { return splitUnitBy(text, parseNumber) }

func splitUnitBy(text string, parse func(string) (*big.Rat, bool)) (num, rest string) {
	i := strings.IndexFunc(text, unicode.IsLetter)
	if i <= 0 {
		return text, ""
	}
	if _, ok := parse(text[:i]); !ok {
		return text, ""
	}
	return text[:i], text[i:]
}

func firstGroup(w Word) bool {
	return w.Number != nil && len(w.Text) <= 3 && w.Text[0] != '0' && allDigits(w.Text)
}

func laterGroup(w Word) bool {
	if w.Number == nil || len(w.Text) < 3 || !allDigits(w.Text[:3]) {
		return false
	}
	return len(w.Text) == 3 || (w.Text[3] == '.' && allDigits(w.Text[4:]))
}

// groupSep reports whether r may separate digit groups: a space, a
// no-break space or a narrow no-break space.
func groupSep(r rune) bool {
	return r == ' ' || r == '\u00a0' || r == '\u202f'
}

func wordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || unicode.IsNumber(r)
}

func joiner(r rune) bool {
	switch r {
	case '-', '.', ',', '/', '\'', '\u2019', '_', ':':
		return true
	}
	return false
}

// parseNumber parses a number word: ASCII digits with at most one decimal
// point, or comma-grouped thousands with an optional decimal part.
func parseNumber(s string) (*big.Rat, bool) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return nil, false
	}
	intPart, frac, hasFrac := strings.Cut(s, ".")
	if hasFrac && (frac == "" || !allDigits(frac)) {
		return nil, false
	}
	if strings.Contains(intPart, ",") {
		groups := strings.Split(intPart, ",")
		if len(groups[0]) < 1 || len(groups[0]) > 3 || !allDigits(groups[0]) {
			return nil, false
		}
		for _, g := range groups[1:] {
			if len(g) != 3 || !allDigits(g) {
				return nil, false
			}
		}
		intPart = strings.Join(groups, "")
	} else if !allDigits(intPart) {
		return nil, false
	}
	lit := intPart
	if hasFrac {
		lit += "." + frac
	}
	v, ok := new(big.Rat).SetString(lit)
	return v, ok
}

// parseAnswerNumber is parseNumber with the decimal comma of an answer
// (spec/verification.md, "Decimal commas"): ASCII digits, one "," and
// one, two, or four or more ASCII digits ("2,9", "12,50", "1,2345"): a
// comma so followed is never a thousands separator, so it is a decimal
// point.
func parseAnswerNumber(s string) (*big.Rat, bool) {
	if v, ok := parseNumber(s); ok {
		return v, ok
	}
	ip, frac, ok := strings.Cut(s, ",")
	if !ok || !allDigits(ip) || !allDigits(frac) || len(frac) == 3 {
		return nil, false
	}
	return new(big.Rat).SetString(ip + "." + frac)
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// lowerVocab returns the description words of a text: its words that
// contain no digit and that the text spells, at least once, with no
// upper-case letter (so codes and proper names never qualify). The result
// is cached by text: sessions of one set share their narratives.
func lowerVocab(text string) map[string]bool { return vocabCache.get(text, lowerVocabOf) }

func lowerVocabOf(text string) map[string]bool {
	m := map[string]bool{}
	for _, raw := range rawWords(text) {
		if _, rest := splitUnit(raw); rest != "" {
			raw = rest // "km" of "10.6km"
		}
		if hasDigit(raw) || hasUpper(raw) {
			continue
		}
		m[Normalize(raw)] = true
	}
	return m
}

var vocabCache textCache[map[string]bool]

// upperVocab returns the words of a text (as lowerVocab reads them: of a
// raw word that the number and unit reading splits, its rest) that hold
// no digit and that the text spells, at least once, with an upper-case
// or title-case letter. Cached by text.
func upperVocab(text string) map[string]bool { return upperCache.get(text, upperVocabOf) }

func upperVocabOf(text string) map[string]bool {
	m := map[string]bool{}
	for _, raw := range rawWords(text) {
		if _, rest := splitUnit(raw); rest != "" {
			raw = rest
		}
		if hasDigit(raw) || !hasUpper(raw) {
			continue
		}
		m[Normalize(raw)] = true
	}
	return m
}

var upperCache textCache[map[string]bool]

// cachedWords is Words of a question's own texts (its text, canonical
// answer, variants and distractors), which every answer to it reads
// again; cachedAnswerWords is answerWords of a distractor. The slices
// are shared: callers must not modify them.
func cachedWords(s string) []Word       { return wordsCache.get(s, Words) }
func cachedAnswerWords(s string) []Word { return answerWordsCache.get(s, answerWords) }

var wordsCache, answerWordsCache textCache[[]Word]

// maxTextCache bounds each textCache: its texts are narratives and
// questions (a few per set), which sessions of one set judge against
// over and over.
const maxTextCache = 1024

// textCache memoises one analysis of a text (clause words, units,
// numbered labels, description words). A full cache forgets every text
// at once, so it never holds more than maxTextCache. Values are shared:
// callers must not modify them.
type textCache[V any] struct {
	mu sync.Mutex
	m  map[string]V
}

// get returns the cached analysis of text, running build on a miss.
// Two callers missing at once both build; the results are equal.
func (c *textCache[V]) get(text string, build func(string) V) V {
	c.mu.Lock()
	v, ok := c.m[text]
	c.mu.Unlock()
	if ok {
		return v
	}
	v = build(text)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxTextCache {
		c.m = make(map[string]V)
	}
	c.m[text] = v
	c.mu.Unlock()
	return v
}

// rawWords splits text into words by the rule of Words, without
// normalising, so the original spelling (case) can be inspected.
func rawWords(text string) []string {
	var out []string
	for _, sp := range rawWordSpans(text) {
		out = append(out, text[sp[0]:sp[1]])
	}
	return out
}

// rawWordSpans returns the byte spans of the words of text.
func rawWordSpans(text string) [][2]int {
	var out [][2]int
	i := 0
	for i < len(text) {
		r, size := utf8.DecodeRuneInString(text[i:])
		if !wordRune(r) {
			i += size
			continue
		}
		start := i
		for i < len(text) {
			r, size = utf8.DecodeRuneInString(text[i:])
			if wordRune(r) {
				i += size
				continue
			}
			if joiner(r) && i > start && i+size < len(text) {
				if nr, _ := utf8.DecodeRuneInString(text[i+size:]); wordRune(nr) {
					i += size
					continue
				}
			}
			break
		}
		out = append(out, [2]int{start, i})
	}
	return out
}

func hasUpper(s string) bool {
	for _, r := range s {
		if unicode.IsUpper(r) || unicode.IsTitle(r) {
			return true
		}
	}
	return false
}
