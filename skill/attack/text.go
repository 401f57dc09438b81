package attack

import (
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// token flags.
const (
	fWord      uint16 = 1 << iota // letters or digits
	fNum                          // a numeric value (digits or a number word)
	fNumWord                      // spelled-out number
	fWeakNum                      // a number word that is usually not a count ("one of")
	fIdent                        // identifier-like (mixed case, digits, hyphen codes, Greek)
	fCap                          // first rune upper case
	fAllCaps                      // every letter upper case, at least two letters
	fSentStart                    // first token of its sentence
	fQuoted                       // inside a short quoted span
	fHeader                       // in a header line
	fYear                         // a plausible year
	fTime                         // clock time or date
	fQuote                        // a quotation mark
	fSentEnd                      // sentence-final punctuation
)

// token is one word or punctuation mark of a text.
type token struct {
	text  string // surface form, possessive stripped
	low   string // lower case of text
	st    string // stem of low
	off   int    // byte offset in the text
	sent  int32  // sentence index
	flags uint16
	unit  unitClass // unit following a number
	num   float64   // value of a number
	pos   float32   // positive cue weight, after negation
	neg   float32   // negative cue weight, after negation
}

func (t *token) is(f uint16) bool { return t.flags&f != 0 }

// sentence is a run of tokens ending at sentence punctuation or a line
// break.
type sentence struct {
	start, end int // token index range
	para       int
	header     bool
	prelim     bool // states a preliminary conclusion the text revises
	pos, neg   float32
}

// tokenize splits text into tokens and sentences. It never fails; odd input
// gives odd tokens.
func tokenize(text string) ([]token, []sentence) {
	toks := make([]token, 0, len(text)/5)
	var sents []sentence
	para, sentStart := 0, 0
	newSent := func(breakPara bool) {
		if len(toks) > sentStart {
			sents = append(sents, sentence{start: sentStart, end: len(toks), para: para})
			sentStart = len(toks)
		}
		if breakPara && len(sents) > 0 && sents[len(sents)-1].para == para {
			para++
		}
	}
	i := 0
	for i < len(text) {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case r == '\n':
			// Count the line breaks: one ends a sentence, two a paragraph.
			j, n := i, 0
			for j < len(text) {
				c := text[j]
				if c == '\n' {
					n++
				} else if c != ' ' && c != '\t' && c != '\r' {
					break
				}
				j++
			}
			newSent(n >= 2)
			i = j
			continue
		case unicode.IsSpace(r):
			i += size
			continue
		case isWordRune(r) || (r == '°' && i+size < len(text) && isLetterAt(text, i+size)):
			j := scanWord(text, i+size)
			toks = append(toks, token{text: text[i:j], off: i, flags: fWord})
			i = j
			continue
		}
		// Punctuation: one rune per token.
		t := token{text: text[i : i+size], off: i}
		switch r {
		case '"', '“', '”', '\'', '‘', '’', '`', '«', '»':
			t.flags |= fQuote
		case '.', '!', '?':
			t.flags |= fSentEnd
		}
		toks = append(toks, t)
		i += size
		if t.is(fSentEnd) && !abbrevBefore(toks) && nextStartsSentence(text, i) {
			newSent(false)
		}
	}
	newSent(false)
	return toks, sents
}

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || r == 'µ'
}

func isLetterAt(s string, i int) bool {
	r, _ := utf8.DecodeRuneInString(s[i:])
	return unicode.IsLetter(r)
}

// scanWord returns the end of the word whose first rune ends at i: word
// runes joined by inner hyphens, underscores, dots, slashes, apostrophes
// and, between digits, commas and colons. The word is never empty.
func scanWord(s string, i int) int {
	j := i
	for j < len(s) {
		r, size := utf8.DecodeRuneInString(s[j:])
		if isWordRune(r) || unicode.Is(unicode.Mn, r) {
			j += size
			continue
		}
		if j+size >= len(s) {
			break
		}
		prev, _ := utf8.DecodeLastRuneInString(s[:j])
		next, _ := utf8.DecodeRuneInString(s[j+size:])
		if !isWordRune(prev) || !isWordRune(next) {
			break
		}
		ok := false
		switch r {
		case '-', '_', '/', '+', '·', '–':
			ok = r != '–' || (unicode.IsDigit(prev) && unicode.IsDigit(next))
		case '.':
			ok = true
		case '\'', '’':
			ok = unicode.IsLetter(prev) && unicode.IsLetter(next)
		case ',':
			ok = unicode.IsDigit(prev) && unicode.IsDigit(next) && threeDigits(s, j+size)
		case ':':
			ok = unicode.IsDigit(prev) && unicode.IsDigit(next)
		}
		if !ok {
			break
		}
		j += size
	}
	return j
}

func threeDigits(s string, i int) bool {
	if i+3 > len(s) {
		return false
	}
	for k := i; k < i+3; k++ {
		if s[k] < '0' || s[k] > '9' {
			return false
		}
	}
	return i+3 == len(s) || s[i+3] < '0' || s[i+3] > '9'
}

var abbrevs = toSet(`e.g i.e etc vs approx dr mr mrs ms prof fig no inc ltd co corp st jr sr cf al est`)

// abbrevBefore reports whether the sentence punctuation just appended
// follows an abbreviation or a single letter.
func abbrevBefore(toks []token) bool {
	if len(toks) < 2 || toks[len(toks)-1].text != "." {
		return false
	}
	w := toks[len(toks)-2]
	if !w.is(fWord) {
		return false
	}
	if utf8.RuneCountInString(w.text) == 1 && unicode.IsUpper(rune(w.text[0])) {
		return true
	}
	return abbrevs[strings.ToLower(w.text)]
}

// nextStartsSentence reports whether the text after sentence punctuation
// begins a new sentence: end of text, or white space (possibly after
// closing quotes and brackets).
func nextStartsSentence(s string, i int) bool {
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case unicode.IsSpace(r):
			return true
		case r == '"' || r == '”' || r == '’' || r == ')' || r == '\'' || r == ']':
			i += size
		default:
			return false
		}
	}
	return true
}

// analyseTokens fills in the lexical fields of every token.
func analyseTokens(toks []token, sents []sentence) {
	for si := range sents {
		s := &sents[si]
		letterWords, capsWords := 0, 0
		for k := s.start; k < s.end; k++ {
			t := &toks[k]
			t.sent = int32(si)
			if k == s.start || (k == s.start+1 && toks[s.start].is(fQuote)) {
				t.flags |= fSentStart
			}
			if !t.is(fWord) {
				t.low = t.text
				continue
			}
			t.text = trimPossessive(t.text)
			t.low = lower(t.text)
			t.st = stem(t.low)
			classify(t)
			if hasLetter(t.text) {
				letterWords++
				if t.is(fAllCaps) {
					capsWords++
				}
			}
		}
		if capsWords >= 2 && float64(capsWords) >= 0.6*float64(letterWords) {
			s.header = true
			for k := s.start; k < s.end; k++ {
				toks[k].flags |= fHeader
			}
		}
	}
	markQuotes(toks, sents)
	markUnits(toks)
	markCues(toks, sents)
}

func trimPossessive(s string) string {
	if strings.HasSuffix(s, "'s") || strings.HasSuffix(s, "’s") {
		if t := strings.TrimSuffix(strings.TrimSuffix(s, "'s"), "’s"); t != "" {
			return t
		}
	}
	return s
}

// lower is strings.ToLower without allocating for text already in lower
// case ASCII.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			return strings.ToLower(s)
		}
	}
	return s
}

func hasLetter(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) {
			return true
		}
	}
	return false
}

// classify sets the shape flags of a word token: number, time, year,
// identifier, capitalisation.
func classify(t *token) {
	s := t.text
	var letters, uppers, lowers, digits, greek, joiners int
	first, _ := utf8.DecodeRuneInString(s)
	for _, r := range s {
		switch {
		case unicode.IsDigit(r):
			digits++
		case unicode.IsLetter(r):
			letters++
			if unicode.IsUpper(r) {
				uppers++
			} else if unicode.IsLower(r) {
				lowers++
			}
			if isGreek(r) && r != 'µ' && r != 'μ' {
				greek++
			}
		default:
			joiners++
		}
	}
	if unicode.IsUpper(first) {
		t.flags |= fCap
	}
	if letters >= 2 && uppers == letters {
		t.flags |= fAllCaps
	}
	if digits > 0 {
		if v, unit, ok := parseNumber(s); ok {
			t.flags |= fNum
			t.num = v
			t.unit = unit
			if unit == unitNone && v >= 1900 && v <= 2100 && v == math.Trunc(v) && !strings.ContainsAny(s, ".,") {
				t.flags |= fYear
			}
			return
		}
		if letters == 0 {
			// Times (14:32), dates (2024-03-12), ranges (3-5), IP
			// addresses (10.0.3.7): IP addresses and dotted versions are
			// identifiers, the rest are neither numbers nor candidates.
			if strings.Count(s, ".") == 3 {
				t.flags |= fIdent
			} else {
				t.flags |= fTime
			}
			return
		}
		if isOrdinal(t.low) {
			return
		}
		t.flags |= fIdent
		return
	}
	if v, ok := numberWords[t.low]; ok {
		t.flags |= fNum | fNumWord
		t.num = v
		if weakNumberWords[t.low] {
			t.flags |= fWeakNum
		}
		return
	}
	switch {
	case greek > 0 && (letters > greek || joiners > 0):
		t.flags |= fIdent // LDH-γ, PKC-δ
	case uppers >= 2 && lowers > 0 && uppers+lowers == letters && !unicode.IsUpper(lastRune(s)) && joiners == 0 && uppers < letters-1:
		t.flags |= fIdent // mixed case: mTOR, GlyT1 (digits handled above), IgG
	case strings.ContainsRune(s, '_'):
		t.flags |= fIdent
	case uppers >= 2 && strings.ContainsAny(s, "-/") && uppers+joiners >= len(s)/2:
		t.flags |= fIdent // HK-II, EUR/USD, LDH-B
	case joiners > 0 && shortCapPart(s):
		t.flags |= fIdent // Orvelin-B, Factor-X
	case t.is(fAllCaps) && letters <= 6:
		t.flags |= fIdent // PFK, ERK, CPI
	case joiners > 0 && hyphenGreek(t.low):
		t.flags |= fIdent // ldh-gamma
	case letters >= 2 && uppers >= 2 && unicode.IsLower(first) && joiners == 0:
		t.flags |= fIdent // mTORC
	}
}

func lastRune(s string) rune {
	r, _ := utf8.DecodeLastRuneInString(s)
	return r
}

// shortCapPart reports whether a hyphenated word ends in a part of one or
// two upper-case letters ("Orvelin-B").
func shortCapPart(s string) bool {
	parts := strings.Split(s, "-")
	if len(parts) < 2 {
		return false
	}
	p := parts[len(parts)-1]
	n := utf8.RuneCountInString(p)
	return n >= 1 && n <= 2 && strings.ToUpper(p) == p && hasLetter(p)
}

func hyphenGreek(low string) bool {
	i := strings.LastIndexByte(low, '-')
	return i > 0 && greekNames[low[i+1:]]
}

func isOrdinal(low string) bool {
	for _, suf := range []string{"st", "nd", "rd", "th"} {
		if strings.HasSuffix(low, suf) {
			if _, err := strconv.Atoi(low[:len(low)-2]); err == nil {
				return true
			}
		}
	}
	return false
}

// parseNumber parses a numeric token: an optionally signed decimal with
// thousands separators, optionally followed by "-unit" ("4.7-minute",
// "3-fold") or a glued unit ("15mg", "2.5x").
func parseNumber(s string) (float64, unitClass, bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	start := i
	dot := false
	for i < len(s) {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			i++
		case c == ',' && i > start:
			i++
		case c == '.' && !dot && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			dot = true
			i++
		default:
			goto done
		}
	}
done:
	if i == start {
		return 0, 0, false
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(s[:i], ",", ""), 64)
	if err != nil {
		return 0, 0, false
	}
	rest := s[i:]
	if rest == "" {
		return v, unitNone, true
	}
	rest = strings.TrimPrefix(rest, "-")
	low := lower(rest)
	if u, ok := unitWords[low]; ok {
		return v, u, true
	}
	if u, ok := unitWords[strings.TrimSuffix(low, "s")]; ok {
		return v, u, true
	}
	if timeNouns[low] {
		return v, unitTime, true
	}
	if strings.IndexByte(s[i:], '-') == 0 && isAllLower(rest) && !strings.ContainsAny(rest, "-0123456789") {
		// "12-point", "5-member": a number qualifying a noun.
		return v, unitCount, true
	}
	return 0, 0, false
}

var timeNouns = toSet(`second minute hour day week month year quarter session cycle decade night shift`)

func isAllLower(s string) bool {
	for _, r := range s {
		if !unicode.IsLower(r) {
			return false
		}
	}
	return s != ""
}

// markQuotes flags the words of short quoted spans ("amber").
func markQuotes(toks []token, sents []sentence) {
	for _, s := range sents {
		open := -1
		for k := s.start; k < s.end; k++ {
			t := &toks[k]
			if !t.is(fQuote) {
				continue
			}
			// An apostrophe glued to a word on its left is not an opening.
			if open < 0 {
				open = k
				continue
			}
			if n := k - open - 1; n >= 1 && n <= 4 {
				for j := open + 1; j < k; j++ {
					toks[j].flags |= fQuoted
				}
			}
			open = -1
		}
	}
}

// markUnits attaches the unit that follows a number ("3.8 degrees",
// "6.3 %", "18.6 μM", "$4.2").
func markUnits(toks []token) {
	for k := range toks {
		t := &toks[k]
		if !t.is(fNum) || t.unit != unitNone {
			continue
		}
		if k > 0 {
			switch toks[k-1].text {
			case "$", "€", "£", "¥":
				t.unit = unitMoney
				continue
			}
		}
		if k+1 < len(toks) {
			n := &toks[k+1]
			if u, ok := unitWords[n.low]; ok && n.sent == t.sent {
				t.unit = u
				if u == unitMoney && k+2 < len(toks) && (n.low == "million" || n.low == "billion") {
					t.unit = unitMoney
				}
				continue
			}
			if n.is(fWord) && n.sent == t.sent && !n.is(fNum) && timeNouns[strings.TrimSuffix(n.low, "s")] {
				t.unit = unitTime
				continue
			}
			if n.is(fWord) && n.sent == t.sent && !n.is(fIdent|fNum) && !stopwords[n.low] {
				t.unit = unitCount
			}
		}
	}
}

// markCues assigns each word its cue weights, flipping the polarity of cues
// within four words after a negator, and sums them per sentence.
func markCues(toks []token, sents []sentence) {
	for si := range sents {
		s := &sents[si]
		negAt := -100
		negTok := -1
		flipped := false
		for k := s.start; k < s.end; k++ {
			t := &toks[k]
			if !t.is(fWord) {
				continue
			}
			if prelimWords[t.low] {
				s.prelim = true
			}
			if negators[t.low] || strings.HasSuffix(t.low, "n't") {
				if negTok >= 0 && !flipped {
					toks[negTok].neg += 1
				}
				negAt, negTok, flipped = k, k, false
				continue
			}
			p, n := cueOf(t.low, t.st)
			if p == 0 && n == 0 {
				continue
			}
			// "attributed to X" explains a finding away; "the attributed
			// cluster" does not.
			if t.st == "attrib" && (k+1 >= s.end || toks[k+1].low != "to") {
				n *= 0.25
			}
			if k-negAt <= 4 {
				p, n = n, p
				flipped = true
			}
			t.pos, t.neg = p, n
		}
		if negTok >= 0 && !flipped {
			toks[negTok].neg += 1
		}
		for k := s.start; k < s.end; k++ {
			s.pos += toks[k].pos
			s.neg += toks[k].neg
		}
	}
}
