package generate

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/acaptcha/acaptcha/skill"
)

// Fact survival. A hybrid set keeps the questions and answers of its
// procedural skeleton, so its reworded narratives must state exactly the
// facts the skeleton's did. The check works on the surface of the text,
// per paragraph (the skeleton scatters the facts behind an answer over
// non-adjacent paragraphs on purpose, so a fact must stay in its
// paragraph):
//
//   - identifiers (codes, acronyms, mixed-case names, anything mixing
//     letters and digits) must all still be there;
//   - aliases — the names an entity is introduced with in parentheses and
//     the descriptions it is called by ("the zinc-dependent hydratase
//     CA2") — must all still be there, in every part that uses them;
//   - numbers must keep their value and unit (units normalised: "38.1
//     percent" is "38.1%", "five" is "5"; ratios too: "four of the four
//     labs" is "all four labs"), and measurements, ratios, numbers above
//     ten, dates and times must not occur fewer times than before (a bare
//     small count only has to occur);
//   - every answer string or accepted variant the paragraph held must
//     still be there;
//   - nothing new: no identifier, written number or date the part did not
//     have, and no answer of an earlier part where the skeleton did not
//     name it;
//   - relations stay stated: two names (identifiers or aliases) that a
//     skeleton sentence states together must still be stated together in
//     the paragraph, in one sentence or in two adjacent ones (a model
//     splits "X, logged with macOS as its platform, registered 92.6"
//     into "X registered 92.6. Its platform was logged as macOS."). The
//     skeleton implies some facts through a relation ("X fared in the
//     re-tests exactly as Y did", "X was isolated from sample SP-1", "the
//     interim view favoured X over Y"); a rewording that drops the
//     relation or moves its ends apart loses the fact even when both
//     names survive elsewhere.
//
// What this cannot see — a negation flipped, a cause moved to another
// candidate with every word kept — is left to the validation pipeline's
// cross-check, whose solvers must reproduce the skeleton's answers from
// the reworded text.

// termKind says what kind of fact a term is.
type termKind uint8

const (
	termID termKind = iota
	termAlias
	termAnswer
	termNumber
	termDate
	termTime
)

func (k termKind) String() string {
	switch k {
	case termID:
		return "identifier"
	case termAlias:
		return "alias"
	case termAnswer:
		return "answer"
	case termNumber:
		return "number"
	case termDate:
		return "date"
	case termTime:
		return "time"
	}
	return "term"
}

// term is one fact-bearing piece of text.
type term struct {
	kind termKind
	// key compares terms: kind, then the normalised value.
	key string
	// text is the term as the original wrote it (first occurrence).
	text string
	// counted terms must not occur fewer times in the rewording (numbers
	// that are measurements or large, dates, times); the others only
	// have to occur.
	counted bool
	// value is the numeric value of a number, as a string ("38.1").
	value string
}

// facts are the terms of one paragraph: counts by key and the first term
// seen for each key.
type facts struct {
	count map[string]int
	terms map[string]term
	order []string // keys in order of first appearance
}

func newFacts() *facts { return &facts{count: map[string]int{}, terms: map[string]term{}} }

func (f *facts) add(t term) {
	if _, ok := f.terms[t.key]; !ok {
		f.terms[t.key] = t
		f.order = append(f.order, t.key)
	}
	f.count[t.key]++
}

// --- paragraphs --------------------------------------------------------

var blankLine = regexp.MustCompile(`\n[ \t\r]*\n`)

// paragraphs splits text into its blank-line separated blocks, without
// empty ones.
func paragraphs(text string) []string {
	var out []string
	for _, p := range blankLine.Split(strings.ReplaceAll(text, "\r\n", "\n"), -1) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// --- dates and times ---------------------------------------------------

var months = map[string]int{
	"january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
	"august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
	"jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9,
	"oct": 10, "nov": 11, "dec": 12,
}

const monthRe = `(January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?`

var (
	isoDate   = regexp.MustCompile(`\b(\d{4})-(\d{2})-(\d{2})\b`)
	dayMonth  = regexp.MustCompile(`\b(\d{1,2})(?:st|nd|rd|th)? ` + monthRe + `(?:,? (\d{4}))?\b`)
	monthDay  = regexp.MustCompile(`\b` + monthRe + ` (\d{1,2})(?:st|nd|rd|th)?(?:,? (\d{4}))?\b`)
	monthYear = regexp.MustCompile(`\b` + monthRe + ` (\d{4})\b`)
	clockTime = regexp.MustCompile(`\b([01]?\d|2[0-3]):([0-5]\d)\b`)
)

// dateKey builds the comparison key of a date; year or day may be empty.
func dateKey(year, month, day string) (string, bool) {
	m, ok := months[strings.ToLower(strings.TrimSuffix(month, "."))]
	if !ok {
		if n, err := strconv.Atoi(month); err == nil && n >= 1 && n <= 12 {
			m, ok = n, true
		}
	}
	if !ok {
		return "", false
	}
	d := 0
	if day != "" {
		n, err := strconv.Atoi(day)
		if err != nil || n < 1 || n > 31 {
			return "", false
		}
		d = n
	}
	if year == "" {
		year = "----"
	}
	if d == 0 {
		return fmt.Sprintf("%s:%s-%02d", "date", year, m), true
	}
	return fmt.Sprintf("%s:%s-%02d-%02d", "date", year, m, d), true
}

// maskDates records the dates and clock times of s and returns s with
// them blanked out, so that their digits are not read as numbers.
func maskDates(s string, f *facts) string {
	b := []byte(s)
	blank := func(i, j int) {
		for k := i; k < j; k++ {
			if b[k] != '\n' {
				b[k] = ' '
			}
		}
	}
	type hit struct {
		i, j int
		t    term
	}
	var hits []hit
	taken := func(i, j int) bool {
		for _, h := range hits {
			if i < h.j && h.i < j {
				return true
			}
		}
		return false
	}
	add := func(m []int, key string) {
		if key == "" || taken(m[0], m[1]) {
			return
		}
		hits = append(hits, hit{m[0], m[1], term{kind: termDate, key: key, text: s[m[0]:m[1]], counted: true}})
	}
	sub := func(m []int, g int) string {
		if m[2*g] < 0 {
			return ""
		}
		return s[m[2*g]:m[2*g+1]]
	}
	for _, m := range isoDate.FindAllStringSubmatchIndex(s, -1) {
		k, _ := dateKey(sub(m, 1), sub(m, 2), sub(m, 3))
		add(m, k)
	}
	for _, m := range dayMonth.FindAllStringSubmatchIndex(s, -1) {
		k, _ := dateKey(sub(m, 3), sub(m, 2), sub(m, 1))
		add(m, k)
	}
	for _, m := range monthDay.FindAllStringSubmatchIndex(s, -1) {
		k, _ := dateKey(sub(m, 3), sub(m, 1), sub(m, 2))
		add(m, k)
	}
	for _, m := range monthYear.FindAllStringSubmatchIndex(s, -1) {
		k, _ := dateKey(sub(m, 2), sub(m, 1), "")
		add(m, k)
	}
	for _, m := range clockTime.FindAllStringSubmatchIndex(s, -1) {
		if taken(m[0], m[1]) {
			continue
		}
		// Not part of a code such as "O3:K6" or "12:30:00".
		if wordBefore(s, m[0]) || (m[1] < len(s) && (isWordByte(s[m[1]]) || s[m[1]] == ':')) {
			continue
		}
		hits = append(hits, hit{m[0], m[1], term{kind: termTime, key: "time:" + sub(m, 1) + ":" + sub(m, 2), text: s[m[0]:m[1]], counted: true}})
	}
	slices.SortFunc(hits, func(a, b hit) int { return a.i - b.i })
	for _, h := range hits {
		if h.t.kind == termTime {
			h.t.key = "time:" + strings.TrimLeft(h.t.key[len("time:"):], "0")
		}
		f.add(h.t)
		blank(h.i, h.j)
	}
	return string(b)
}

func isWordByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c >= 0x80
}

func wordBefore(s string, i int) bool { return i > 0 && isWordByte(s[i-1]) }

// --- numbers and units -------------------------------------------------

// unitAliases maps the ways a unit is written (after a number, with or
// without a space) to one canonical spelling. Word units match case
// insensitively, symbols exactly.
var unitAliases = map[string]string{
	"%": "%", "percent": "%", "per cent": "%", "pct": "%",
	"pp": "pp", "points": "pp", "point": "pp", "percentage points": "pp", "percentage point": "pp", "pts": "pp",
	"µM": "µM", "μM": "µM", "uM": "µM", "micromolar": "µM",
	"nM": "nM", "nanomolar": "nM", "mM": "mM", "millimolar": "mM",
	"GB": "GB", "gigabytes": "GB", "gigabyte": "GB", "MB": "MB", "megabytes": "MB", "TB": "TB", "terabytes": "TB",
	"log CFU/g": "log CFU/g", "log CFU": "log CFU/g", "log": "log CFU/g",
	"CFU/g": "CFU/g", "CFU/mL": "CFU/mL", "CFU/ml": "CFU/mL",
	"standard deviations": "sd", "standard deviation": "sd", "sd": "sd", "SD": "sd", "sigma": "sd", "σ": "sd",
	"days": "d", "day": "d", "d": "d",
	"hours": "h", "hour": "h", "h": "h", "hr": "h", "hrs": "h",
	"minutes": "min", "minute": "min", "min": "min", "mins": "min",
	"seconds": "s", "second": "s", "s": "s", "sec": "s", "secs": "s",
	"weeks": "wk", "week": "wk", "months": "mo", "month": "mo", "years": "yr", "year": "yr",
	"°C": "°C", "ºC": "°C", "degrees C": "°C", "degrees Celsius": "°C", "degrees": "°C", "C": "°C",
	"mg/kg": "mg/kg", "µg/kg": "µg/kg", "μg/kg": "µg/kg", "ug/kg": "µg/kg",
	"mg/L": "mg/L", "mg/l": "mg/L", "µg/L": "µg/L", "μg/L": "µg/L", "ug/L": "µg/L", "ng/mL": "ng/mL", "ng/ml": "ng/mL",
	"mg": "mg", "g": "g", "kg": "kg", "µg": "µg", "μg": "µg", "ng": "ng", "mL": "mL", "ml": "mL", "L": "L",
	"ppm": "ppm", "ppb": "ppb", "mAU": "mAU", "kDa": "kDa",
	"bp": "bp", "bps": "bp", "basis points": "bp", "basis point": "bp", "pips": "pip", "pip": "pip",
	"ms": "ms", "milliseconds": "ms", "millisecond": "ms",
	"thousand": "e3", "million": "e6", "billion": "e9", "k": "e3", "m": "e6", "bn": "e9",
}

// unitWordsMax is the most words a unit alias has.
const unitWordsMax = 2

var numberWords = map[string]int{
	"zero": 0, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
	"nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
	"sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
}

var numberToken = regexp.MustCompile(`^([+\-−]?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(.*)$`)

// lookupUnit returns the canonical unit for s ("" when s is no unit).
func lookupUnit(s string) string {
	if u, ok := unitAliases[s]; ok {
		return u
	}
	// Word units ("Percent", "Days") match case-insensitively.
	if utf8.RuneCountInString(s) >= 3 {
		if u, ok := unitAliases[strings.ToLower(s)]; ok {
			return u
		}
	}
	return ""
}

// canonNumber formats a parsed number: "1,200" and "1200.0" are "1200".
func canonNumber(sign, whole, frac string) (string, bool) {
	v, err := strconv.ParseFloat(strings.ReplaceAll(whole, ",", "")+frac, 64)
	if err != nil {
		return "", false
	}
	if sign == "-" || sign == "−" {
		v = -v
	}
	return strconv.FormatFloat(v, 'f', -1, 64), true
}

// numberTerm builds the term of a number with its canonical unit.
// Measurements (a fraction or a unit) and numbers above ten are counted;
// bare small counts only have to occur.
func numberTerm(value, unit, text string, small bool) term {
	return term{kind: termNumber, key: "num:" + value + "|" + unit, text: text, value: value, counted: !small || unit != ""}
}

// --- tokens ------------------------------------------------------------

// token is one white-space separated word with surrounding punctuation
// removed; end reports punctuation after it that ends a phrase.
type token struct {
	raw  string // as in the text
	word string // trimmed
	end  bool   // followed by , ; : . ! ? ) or a line break
}

const (
	leadPunct  = "([{\"'“‘«$€£¥"
	trailPunct = ".,;:!?)]}\"'”’»"
)

func tokenize(s string) []token {
	var out []token
	for _, line := range strings.Split(s, "\n") {
		fields := strings.Fields(line)
		for i, raw := range fields {
			w := strings.TrimLeft(raw, leadPunct)
			trimmed := strings.TrimRight(w, trailPunct)
			end := len(trimmed) < len(w) || i == len(fields)-1
			for _, suf := range []string{"'s", "’s"} {
				trimmed = strings.TrimSuffix(trimmed, suf)
			}
			out = append(out, token{raw: raw, word: trimmed, end: end})
		}
	}
	return out
}

// isIdentifier reports whether w names something exactly: it mixes
// letters with digits, has a Greek letter, or has a second capital
// ("PK4", "CVE-2023-3615", "NQO-III", "LNCaP", "BeaconLock", "qPCR",
// "TNF-α", "UK"). All-capital words longer than five letters are taken
// for headings ("LABORATORY"), not names.
func isIdentifier(w string) bool {
	letters, upper, digits, greek, inner := 0, 0, 0, 0, false
	for i, r := range w {
		switch {
		case unicode.IsDigit(r):
			digits++
		case unicode.Is(unicode.Greek, r):
			greek++
			letters++
		case unicode.IsLetter(r):
			letters++
			if unicode.IsUpper(r) {
				upper++
			}
		default:
			if i > 0 && i < len(w)-1 {
				inner = true
			}
		}
	}
	switch {
	case letters == 0:
		// Digits with inner punctuation ("192.168.4.20", "2025-7382")
		// that are not plain numbers; plain numbers never get here.
		return digits > 0 && inner
	case digits > 0 || greek > 0:
		return true
	case upper >= 2:
		return !(upper == letters && !inner && letters > 5)
	}
	// A capital after a lower-case start: "pH", "qPCR", "mAU".
	first, _ := utf8.DecodeRuneInString(w)
	return upper == 1 && unicode.IsLower(first)
}

// scan reads the identifiers, numbers, dates and times of one paragraph.
func scan(s string, f *facts) {
	s = maskDates(s, f)
	toks := tokenize(s)
	consumed := map[int]bool{} // numerators read by ratioLead
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		w := t.word
		if w == "" || consumed[i] {
			continue
		}
		var value, unit string
		small := false
		if m := numberToken.FindStringSubmatch(w); m != nil {
			v, ok := canonNumber(m[1], m[2], m[3])
			if !ok {
				continue
			}
			switch rest := m[4]; {
			case rest == "":
			case rest == "st" || rest == "nd" || rest == "rd" || rest == "th":
				f.add(numberTerm(v, "ord", w, false))
				continue
			case strings.HasPrefix(rest, "-") && lookupUnit(rest[1:]) != "":
				unit = lookupUnit(rest[1:]) // "72-hour"
			case lookupUnit(rest) != "":
				unit = lookupUnit(rest) // "38.1%", "15.5GB"
			default:
				if isIdentifier(w) { // "96-well", "2025-7382", "192.168.4.20"
					f.add(term{kind: termID, key: "id:" + skill.Normalize(w), text: w})
				}
				continue
			}
			value = v
			if n, err := strconv.Atoi(v); err == nil && n >= 0 && n <= 10 && m[3] == "" {
				small = true
			}
		} else if n, ok := numberWords[strings.ToLower(w)]; ok {
			value, small = strconv.Itoa(n), n <= 10
		} else if strings.EqualFold(w, "both") {
			// "both labs" is "2 of 2"; "both A and B" only joins.
			if !joinsPair(toks, i) {
				f.add(ratioTerm("2", "2", toks[i:i+1]))
			}
			continue
		} else if strings.EqualFold(w, "one") {
			// "one of four", "one out of five", "one in three"; not the
			// pronoun ("the one whose").
			if t.end || i+1 >= len(toks) {
				continue
			}
			switch strings.ToLower(toks[i+1].word) {
			case "of", "out", "in":
				value, small = "1", true
			default:
				continue
			}
			// "every one of the five": all of them.
			if i > 0 && !toks[i-1].end && strings.EqualFold(toks[i-1].word, "every") {
				if den, n, ok := ratioAfter(toks, i); ok {
					f.add(ratioTerm(den, den, toks[i-1:i+n+1]))
					i += n
					continue
				}
			}
			// "not one of the five", "not a single one of the five": none.
			if notBefore(toks, i) {
				if den, n, ok := ratioAfter(toks, i); ok {
					f.add(ratioTerm("0", den, toks[i:i+n+1]))
					i += n
					continue
				}
			}
		} else {
			if isIdentifier(w) {
				f.add(term{kind: termID, key: "id:" + skill.Normalize(w), text: w})
			}
			continue
		}
		if small && unit == "" {
			// A ratio: "3 of 4", "one out of five", "all four", "each of
			// the 5", "none of the three" (the last two as N/N and 0/N).
			if den, n, ok := ratioAfter(toks, i); ok {
				f.add(ratioTerm(value, den, toks[i:i+n+1]))
				i += n
				continue
			}
			if num, ok := ratioBefore(toks, i, value); ok {
				f.add(ratioTerm(num, value, toks[i:i+1]))
				continue
			}
			if num, j, ok := ratioLead(toks, i, value); ok {
				f.add(ratioTerm(num, value, toks[i:j+1]))
				consumed[j] = true
				continue
			}
		}
		text := w
		if unit == "" && !t.end {
			// A unit in the next words: "22.9 µM", "12.3 points", "3.3
			// standard deviations", "five days".
			for n := min(unitWordsMax, len(toks)-1-i); n >= 1; n-- {
				parts := make([]string, 0, n)
				for k := 1; k <= n; k++ {
					parts = append(parts, toks[i+k].word)
				}
				if n > 1 && toks[i+1].end {
					continue
				}
				if u := lookupUnit(strings.Join(parts, " ")); u != "" {
					unit, text = u, w+" "+strings.Join(parts, " ")
					i += n
					break
				}
			}
		}
		f.add(numberTerm(value, unit, text, small))
	}
}

// smallCount reads a count of at most two digits or a number word.
func smallCount(w string) (string, bool) {
	if n, ok := numberWords[strings.ToLower(w)]; ok {
		return strconv.Itoa(n), true
	}
	if strings.EqualFold(w, "one") {
		return "1", true
	}
	if n, err := strconv.Atoi(w); err == nil && n >= 0 && n < 100 && len(w) <= 2 {
		return strconv.Itoa(n), true
	}
	return "", false
}

// ratioAfter reads "of [the] M" or "out of [the] M" after the count at
// toks[i]: the denominator and how many tokens it took.
func ratioAfter(toks []token, i int) (string, int, bool) {
	j := i + 1
	if toks[i].end || j >= len(toks) {
		return "", 0, false
	}
	if strings.EqualFold(toks[j].word, "out") && !toks[j].end {
		j++
	}
	if j >= len(toks) || !strings.EqualFold(toks[j].word, "of") || toks[j].end {
		return "", 0, false
	}
	j++
	if j < len(toks) && !toks[j].end && (strings.EqualFold(toks[j].word, "the") || strings.EqualFold(toks[j].word, "its") || strings.EqualFold(toks[j].word, "their")) {
		j++
	}
	if j >= len(toks) {
		return "", 0, false
	}
	den, ok := smallCount(toks[j].word)
	return den, j - i, ok
}

// ratioBefore reads "all", "all of the", "each of [the]", "every one of
// [the]" (numerator N) or "none of [the]" (numerator 0) before the count
// N at toks[i].
func ratioBefore(toks []token, i int, n string) (string, bool) {
	var ws []string
	for k := i - 1; k >= 0 && k >= i-4; k-- {
		if toks[k].end {
			break
		}
		ws = append(ws, strings.ToLower(toks[k].word))
	}
	if len(ws) > 0 && (ws[0] == "the" || ws[0] == "its" || ws[0] == "their") {
		ws = ws[1:]
	}
	has := func(p ...string) bool {
		if len(ws) < len(p) {
			return false
		}
		for k, w := range p {
			if ws[k] != w {
				return false
			}
		}
		return true
	}
	switch {
	case has("all"), has("of", "all"), has("of", "each"), has("of", "one", "every"):
		return n, true
	case has("of", "both") && n == "2":
		return n, true
	case has("of", "none"), has("of", "one", "not"), has("of", "neither"), has("of", "one", "single", "a", "not"):
		return "0", true
	}
	return "", false
}

// ratioLead reads a count that opens its sentence or clause and is
// resolved after the comma: "Of the 5 assays, none came back", "Of the
// four labs, all saw it", "of the five sites, two reported", "Of the two
// runs, not one held". It returns the numerator and the index of the
// token that gave it.
func ratioLead(toks []token, i int, n string) (string, int, bool) {
	k := i - 1
	if k >= 0 && !toks[k].end && isDeterminer(toks[k].word) {
		k--
	}
	if k < 0 || toks[k].end || !strings.EqualFold(toks[k].word, "of") || (k > 0 && !toks[k-1].end) {
		return "", 0, false
	}
	j := i
	for j < len(toks) && j < i+6 && !toks[j].end {
		j++
	}
	if j >= len(toks)-1 || !strings.HasSuffix(strings.TrimRight(toks[j].raw, "\"'”’)"), ",") {
		return "", 0, false
	}
	j++
	switch w := strings.ToLower(toks[j].word); w {
	case "none", "neither":
		return "0", j, true
	case "all", "each", "every":
		return n, j, true
	case "both":
		return "2", j, n == "2"
	case "not":
		if j+1 < len(toks) && (strings.EqualFold(toks[j+1].word, "one") || strings.EqualFold(toks[j+1].word, "a")) {
			return "0", j + 1, true
		}
	default:
		if num, ok := smallCount(w); ok {
			return num, j, true
		}
	}
	return "", 0, false
}

// notBefore reports whether the "one" at toks[i] is negated: "not one",
// "not a single one", "no single one".
func notBefore(toks []token, i int) bool {
	var ws []string
	for k := i - 1; k >= 0 && k >= i-3; k-- {
		if toks[k].end {
			break
		}
		ws = append(ws, strings.ToLower(toks[k].word))
	}
	switch {
	case len(ws) >= 1 && ws[0] == "not":
		return true
	case len(ws) >= 3 && ws[0] == "single" && ws[1] == "a" && ws[2] == "not":
		return true
	case len(ws) >= 2 && ws[0] == "single" && ws[1] == "no":
		return true
	}
	return false
}

func isDeterminer(w string) bool {
	return strings.EqualFold(w, "the") || strings.EqualFold(w, "its") || strings.EqualFold(w, "their")
}

// joinsPair reports whether the "both" at toks[i] joins two things ("both
// the lab and the field team"): an "and" follows in the same clause.
func joinsPair(toks []token, i int) bool {
	if toks[i].end {
		return true // "... were both." refers back: no count of its own
	}
	for j := i + 1; j < len(toks) && j <= i+10; j++ {
		if strings.EqualFold(toks[j].word, "and") {
			return true
		}
		if toks[j].end {
			break
		}
	}
	return false
}

// ratioTerm is the counted fact "num of den".
func ratioTerm(num, den string, toks []token) term {
	ws := make([]string, len(toks))
	for k, t := range toks {
		ws[k] = t.word
	}
	return term{kind: termNumber, key: "ratio:" + num + "/" + den, text: strings.Join(ws, " "), counted: true}
}

// --- aliases and answers -----------------------------------------------

// aliasStop are words an alias description never contains: they mark a
// clause ("the enzyme run from reagent lot AB-342"), not a name.
var aliasStop = map[string]bool{
	"the": true, "a": true, "an": true, "from": true, "for": true, "on": true, "in": true, "at": true,
	"by": true, "with": true, "to": true, "into": true, "of": true, "was": true, "were": true, "is": true,
	"are": true, "be": true, "been": true, "had": true, "has": true, "have": true, "and": true, "or": true,
	"but": true, "as": true, "than": true, "that": true, "which": true, "whose": true, "its": true,
	"their": true, "this": true, "these": true, "those": true, "same": true, "not": true, "no": true,
	"under": true, "against": true, "after": true, "before": true, "over": true, "per": true,
	"around": true, "about": true, "across": true, "between": true, "through": true, "during": true,
	"since": true, "until": true, "within": true, "without": true, "via": true, "near": true,
	"toward": true, "towards": true, "onto": true, "upon": true, "among": true, "along": true,
	"behind": true, "beyond": true, "below": true, "above": true, "like": true, "despite": true,
	// Verbs that put a code after "the <noun>" without naming it ("the
	// paperwork shows PDK1", "the platform entry reads macOS").
	"shows": true, "show": true, "showed": true, "lists": true, "listed": true, "puts": true, "put": true,
	"reads": true, "notes": true, "noted": true, "records": true, "recorded": true, "logs": true,
	"logged": true, "gives": true, "gave": true, "places": true, "placed": true, "names": true,
	"named": true, "cites": true, "cited": true, "flags": true, "flagged": true, "mentions": true,
	"marks": true, "marked": true, "assigns": true, "assigned": true, "ties": true, "tied": true,
	"links": true, "linked": true, "carries": true, "holds": true, "keeps": true, "kept": true,
	"sets": true, "reports": true, "reported": true, "describes": true, "calls": true, "called": true,
	"labels": true, "labelled": true, "pairs": true, "paired": true, "says": true, "states": true,
	"stated": true, "files": true, "filed": true, "ranks": true, "rates": true, "scores": true,
	"sees": true, "saw": true, "attributes": true, "attributed": true, "blames": true, "credits": true,
	"points": true, "pointed": true, "singles": true, "picks": true, "picked": true, "chose": true,
}

// maxAliasWords bounds a descriptive alias.
const maxAliasWords = 5

// aliasPhrases finds the names an entity is introduced with: the words in
// parentheses after a name or code ("CA2 (carbonic anhydrase 2)",
// "Soratafenib (RX-390)"), and the description before a code ("the
// zinc-dependent hydratase CA2"). Tags in parentheses ("reagent lot
// RG-477") leave only their identifier, which is checked anyway.
func aliasPhrases(text string, add func(string)) {
	toks := tokenize(text)
	idAt := make([]bool, len(toks))
	for i, t := range toks {
		idAt[i] = t.word != "" && isIdentifier(t.word) && !numberToken.MatchString(t.word)
	}
	// Descriptions: "the <words> <identifier>".
	for i := range toks {
		if !idAt[i] || i == 0 {
			continue
		}
		var words []string
		for j := i - 1; j >= 0 && len(words) <= maxAliasWords; j-- {
			t := toks[j]
			if t.end || strings.ContainsAny(t.raw, "()") {
				break
			}
			lw := strings.ToLower(t.word)
			if lw == "the" {
				if n := len(words); n >= 1 && n <= maxAliasWords && slices.ContainsFunc(words, plainWord) {
					slices.Reverse(words)
					add(strings.Join(words, " "))
				}
				break
			}
			// An identifier right before the anchor is a name of its own
			// ("UK CPI"); inside a description it is part of it ("the
			// PI3K-delta agent KRX-656").
			if aliasStop[lw] || idAt[j] && len(words) == 0 || !idAt[j] && !plainWord(t.word) {
				break
			}
			words = append(words, t.word)
		}
	}
	// Parentheses.
	for i := 0; i < len(text); {
		open := strings.IndexByte(text[i:], '(')
		if open < 0 {
			break
		}
		open += i
		closeIdx := strings.IndexByte(text[open:], ')')
		if closeIdx < 0 {
			break
		}
		closeIdx += open
		i = closeIdx + 1
		inner := text[open+1 : closeIdx]
		if strings.ContainsAny(inner, "(\n") || len(inner) > 160 {
			continue
		}
		pieces := strings.FieldsFunc(inner, func(r rune) bool { return r == ',' || r == ';' })
		pre := nameBefore(text[:open])
		entity := len(pre) == 1 && isIdentifier(pre[0])
		onlyCodes := true // every piece is a code or a tagged code
		var names []string
		for _, p := range pieces {
			ws := strings.Fields(p)
			for _, w := range ws {
				if isIdentifier(strings.Trim(w, trailPunct)) {
					entity = true
				}
			}
			if len(ws) == 0 || len(ws) > 4 {
				onlyCodes = false
				continue
			}
			last := strings.Trim(ws[len(ws)-1], trailPunct)
			tag := len(ws) > 1 && isIdentifier(last)
			for _, w := range ws[:len(ws)-1] {
				if first, _ := utf8.DecodeRuneInString(w); !unicode.IsLower(first) {
					tag = false
				}
			}
			if tag || (len(ws) == 1 && isIdentifier(last)) {
				continue // "reagent lot RG-477", "RX-390": the identifier is checked
			}
			onlyCodes = false
			names = append(names, strings.Join(ws, " "))
		}
		if !entity {
			continue
		}
		for _, n := range names {
			add(n)
		}
		// The name before the parentheses: a run of capitalised words
		// ("Meridian Vale Fund (MEVC)"), or one lower-case word when the
		// parentheses hold only codes ("lubaparib (ZX-684, randomisation
		// block RB-1776)"), not the end of a noun phrase ("EZ producer
		// prices (EZ PPI)").
		switch {
		case len(pre) == 0 || len(pre) == 1 && isIdentifier(pre[0]):
		case len(pre) > 1 || unicode.IsUpper([]rune(pre[0])[0]) || onlyCodes:
			add(strings.Join(pre, " "))
		}
	}
}

// nameBefore returns the name that ends text: the last word when it is a
// plain lower-case word or an identifier, or the run of capitalised words
// and identifiers before it (at most four, not starting with an article).
func nameBefore(text string) []string {
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[i+1:] // a name does not span lines
	}
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return nil
	}
	clean := func(w string) (string, bool) {
		t := strings.TrimLeft(w, leadPunct)
		c := strings.TrimRight(t, trailPunct)
		return c, len(c) == len(t) && c != ""
	}
	last, ok := clean(fields[len(fields)-1])
	if !ok {
		return nil
	}
	first, _ := utf8.DecodeRuneInString(last)
	if isIdentifier(last) || !unicode.IsUpper(first) {
		if isIdentifier(last) || plainWord(last) && utf8.RuneCountInString(last) >= 3 && !aliasStop[strings.ToLower(last)] {
			return []string{last}
		}
		return nil
	}
	run := []string{last}
	for k := len(fields) - 2; k >= 0 && len(run) < 4; k-- {
		w, ok := clean(fields[k])
		if !ok {
			break
		}
		r, _ := utf8.DecodeRuneInString(w)
		if aliasStop[strings.ToLower(w)] || !(isIdentifier(w) && strings.ContainsFunc(w, unicode.IsLetter) || unicode.IsUpper(r) && plainWord(w)) {
			break
		}
		run = append(run, w)
	}
	slices.Reverse(run)
	if !plainWord(run[len(run)-1]) {
		return nil
	}
	return run
}

// plainWord reports whether w is a word of letters, hyphens and
// apostrophes (a description's word, not a code or a number).
func plainWord(w string) bool {
	if w == "" {
		return false
	}
	for _, r := range w {
		if !unicode.IsLetter(r) && r != '-' && r != '\'' && r != '’' {
			return false
		}
	}
	return true
}

// inventory holds what a set's fact check needs beyond the text of one
// paragraph: the aliases of the whole set (a later part refers to an
// earlier part's entity by its alias) and every part's answers.
type inventory struct {
	set     *skill.Set
	aliases []term   // normalised alias phrases of the whole set
	answers [][]term // per part: its questions' answer variants
	orig    [][]*facts
	paras   [][]string
	// pairs[part][paragraph] are the name pairs its sentences state.
	pairs [][][]namePair
}

// namePair is two names one sentence states together: term keys and the
// names as the skeleton wrote them.
type namePair struct {
	a, b         string
	aText, bText string
}

// newInventory reads the skeleton's facts.
func newInventory(s *skill.Set) *inventory {
	inv := &inventory{set: s}
	seen := map[string]bool{}
	for _, p := range s.Parts {
		aliasPhrases(p.Narrative, func(a string) {
			k := "alias:" + skill.Normalize(a)
			if !seen[k] {
				seen[k] = true
				inv.aliases = append(inv.aliases, term{kind: termAlias, key: k, text: a})
			}
		})
	}
	for _, p := range s.Parts {
		var ans []term
		seenAns := map[string]bool{}
		for qi := range p.Questions {
			for _, v := range p.Questions[qi].Variants() {
				k := "ans:" + skill.Normalize(v)
				if seenAns[k] || strings.TrimSpace(v) == "" {
					continue
				}
				seenAns[k] = true
				ans = append(ans, term{kind: termAnswer, key: k, text: strings.TrimSpace(v)})
			}
		}
		inv.answers = append(inv.answers, ans)
	}
	for _, p := range s.Parts {
		ps := paragraphs(p.Narrative)
		inv.paras = append(inv.paras, ps)
		var fs []*facts
		var prs [][]namePair
		for _, para := range ps {
			fs = append(fs, inv.facts(para))
			prs = append(prs, inv.namePairs(para))
		}
		inv.orig = append(inv.orig, fs)
		inv.pairs = append(inv.pairs, prs)
	}
	return inv
}

// sentenceEnd ends a sentence: a full stop, question or exclamation mark
// before white space, or a line break.
var sentenceEnd = regexp.MustCompile(`[.!?]\s+|\n+`)

// sentenceNames returns, per sentence of para, the keys of the names
// (identifiers and the set's aliases) it holds, with their texts.
func (inv *inventory) sentenceNames(para string) []map[string]string {
	var out []map[string]string
	for _, sen := range sentenceEnd.Split(para, -1) {
		if strings.TrimSpace(sen) == "" {
			continue
		}
		f := inv.facts(sen)
		names := map[string]string{}
		for _, k := range f.order {
			if t := f.terms[k]; t.kind == termID || t.kind == termAlias {
				names[k] = t.text
			}
		}
		out = append(out, names)
	}
	return out
}

// namePairs lists the pairs of names the sentences of para state
// together, each pair once.
func (inv *inventory) namePairs(para string) []namePair {
	var out []namePair
	seen := map[[2]string]bool{}
	for _, names := range inv.sentenceNames(para) {
		keys := make([]string, 0, len(names))
		for k := range names {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i := range keys {
			for j := i + 1; j < len(keys); j++ {
				if pk := [2]string{keys[i], keys[j]}; !seen[pk] {
					seen[pk] = true
					out = append(out, namePair{a: keys[i], b: keys[j], aText: names[keys[i]], bText: names[keys[j]]})
				}
			}
		}
	}
	return out
}

// facts reads the terms of one paragraph: its identifiers, numbers, dates
// and times, and the set's aliases and answers it contains.
func (inv *inventory) facts(para string) *facts {
	f := newFacts()
	scan(para, f)
	norm := skill.Normalize(strings.Join(strings.Fields(para), " "))
	for _, a := range inv.aliases {
		for range termIndexes(norm, a.key[len("alias:"):]) {
			f.add(a)
		}
	}
	for _, ans := range inv.answers {
		for _, a := range ans {
			if numericVariant(a.text) {
				continue // numbers are checked with their units
			}
			for range termIndexes(norm, a.key[len("ans:"):]) {
				f.add(a)
			}
		}
	}
	return f
}

// numericVariant reports whether an answer variant starts with a digit or
// sign: a number, checked as one.
func numericVariant(v string) bool {
	r, _ := utf8.DecodeRuneInString(strings.TrimSpace(v))
	return unicode.IsDigit(r) || r == '-' || r == '+' || r == '−'
}

// keepTerms lists the terms of part pi a rewording must copy, in order of
// appearance, without duplicates: what the prompt asks the model to keep.
// Answers are among them but not marked as such. Left out, though still
// checked: ratios and bare small counts, whose text is a fragment ("one of
// 4") the model may reword (the system prompt's rule on counts covers
// them), and all-capital words of heading lines ("AUDIT LOG"), which the
// system prompt has copied with their line.
func (inv *inventory) keepTerms(pi int) []string {
	var out []string
	seen := map[string]bool{}
	heads := map[string]bool{}
	for _, para := range inv.paras[pi] {
		headingWords(para, heads)
	}
	for _, f := range inv.orig[pi] {
		for _, k := range f.order {
			t := f.terms[k]
			switch {
			case seen[t.text]:
				continue
			case t.kind == termNumber && (strings.HasPrefix(t.key, "ratio:") || !t.counted):
				continue
			case t.kind == termID && heads[t.text]:
				continue
			}
			seen[t.text] = true
			out = append(out, t.text)
		}
	}
	return out
}

// headingWords adds to heads the all-capital words of the letters-only
// lines of para in which every letter is a capital ("AUDIT LOG — CASE
// FILE"): a heading, not a name.
func headingWords(para string, heads map[string]bool) {
	for _, line := range strings.Split(para, "\n") {
		letters := 0
		heading := true
		for _, r := range line {
			if unicode.IsLetter(r) {
				letters++
				if !unicode.IsUpper(r) {
					heading = false
					break
				}
			}
		}
		if !heading || letters < 3 {
			continue
		}
		for _, w := range strings.Fields(line) {
			w = strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
			if w != "" && !strings.ContainsFunc(w, unicode.IsDigit) {
				heads[w] = true
			}
		}
	}
}

// --- reworded questions ------------------------------------------------

// Why a question keeps its skeleton wording (Stats.QuestionsKept keys).
const (
	// QuestionKeptMalformed: the question-rewording reply did not decode.
	QuestionKeptMalformed = "malformed"
	// QuestionKeptMissing: the reply had no rewording for the question.
	QuestionKeptMissing = "missing"
	// QuestionKeptUnchanged: the rewording is the original wording.
	QuestionKeptUnchanged = "unchanged"
	// QuestionKeptShape: empty, more than one line, or over
	// skill.MaxQuestionBytes.
	QuestionKeptShape = "shape"
	// QuestionKeptLength: the word count left the window of
	// QuestionLengthDrift.
	QuestionKeptLength = "length"
	// QuestionKeptAnswer: the rewording names the question's answer or
	// a variant, an earlier part's answer, or one of its distractors,
	// which the original did not.
	QuestionKeptAnswer = "states_answer"
	// QuestionKeptFactLost: an identifier, alias, number, ratio or date
	// of the original is missing.
	QuestionKeptFactLost = "fact_lost"
	// QuestionKeptFactAdded: an identifier, written number or date the
	// original did not have.
	QuestionKeptFactAdded = "fact_added"
	// QuestionKeptDuplicate: the rewording repeats another question of
	// its part.
	QuestionKeptDuplicate = "duplicate"
)

// QuestionLengthDrift is the accepted relative change of a reworded
// question's word count (at least questionLengthSlack words either way).
const QuestionLengthDrift = 0.3

const questionLengthSlack = 4

// questionKeep lists the terms question qi of part pi refers to, which its
// rewording must copy: identifiers, aliases of the set, numbers, ratios,
// dates and times, in order of appearance.
func (inv *inventory) questionKeep(pi, qi int) []string {
	f := inv.facts(inv.set.Parts[pi].Questions[qi].Question)
	var out []string
	seen := map[string]bool{}
	for _, k := range f.order {
		t := f.terms[k]
		if seen[t.text] || t.kind == termAnswer || t.kind == termNumber && !t.counted && !strings.HasPrefix(t.key, "ratio:") {
			continue
		}
		seen[t.text] = true
		out = append(out, t.text)
	}
	return out
}

// checkQuestion checks a rewording of question qi of part pi: one line,
// within the length window, not naming its own answer, an earlier answer
// or a distractor the original did not name (the validator's leakage
// rule: whole words, bare numbers of at most two digits exempt, as they
// are checked as numbers), and with the same facts as the original: every
// identifier, alias, number, ratio, date and time it refers to, and no
// identifier, written number or date it did not have. It returns the
// cleaned text, or "" with a QuestionKept* reason and a detail. What the
// question asks (a direction, a condition) is the cross-check's to test:
// its solvers must reproduce the skeleton's answer to the reworded
// question.
func (inv *inventory) checkQuestion(pi, qi int, text string) (string, string, string) {
	q := &inv.set.Parts[pi].Questions[qi]
	t := strings.Join(strings.Fields(text), " ")
	switch {
	case t == "" || strings.ContainsAny(strings.TrimSpace(text), "\n\r") || len(t) > skill.MaxQuestionBytes || !utf8.ValidString(t):
		return "", QuestionKeptShape, fmt.Sprintf("%d bytes", len(text))
	}
	orig := strings.Join(strings.Fields(q.Question), " ")
	normO, normN := skill.Normalize(orig), skill.Normalize(t)
	if normO == normN {
		return "", QuestionKeptUnchanged, ""
	}
	wo, wn := len(strings.Fields(orig)), len(strings.Fields(t))
	if slack := max(questionLengthSlack, int(QuestionLengthDrift*float64(wo)+0.5)); wn < wo-slack || wn > wo+slack {
		return "", QuestionKeptLength, fmt.Sprintf("%d words from %d", wn, wo)
	}
	named := func(v string) bool {
		k := skill.Normalize(strings.TrimSpace(v))
		return k != "" && !trivialNumber(v) && containsTerm(normN, k) && !containsTerm(normO, k)
	}
	for _, v := range q.Variants() {
		if named(v) {
			return "", QuestionKeptAnswer, fmt.Sprintf("names its answer %q", v)
		}
	}
	for pj := 0; pj < pi; pj++ {
		for _, a := range inv.answers[pj] {
			if named(a.text) {
				return "", QuestionKeptAnswer, fmt.Sprintf("names part %d's answer %q", pj+1, a.text)
			}
		}
	}
	for _, d := range q.Distractors {
		if named(d) {
			return "", QuestionKeptAnswer, fmt.Sprintf("names the distractor %q", d)
		}
	}
	of, nf := inv.facts(orig), inv.facts(t)
	for _, key := range of.order {
		if ot := of.terms[key]; ot.kind != termAnswer && nf.count[key] == 0 {
			return "", QuestionKeptFactLost, fmt.Sprintf("%s %q is missing", ot.kind, ot.text)
		}
	}
	values := map[string]bool{}
	for _, ot := range of.terms {
		if ot.kind == termNumber {
			values[ot.value] = true
		}
	}
	for _, key := range nf.order {
		nt := nf.terms[key]
		switch {
		case of.count[key] > 0:
		case nt.kind == termID || nt.kind == termDate || nt.kind == termTime || nt.kind == termAlias:
			return "", QuestionKeptFactAdded, fmt.Sprintf("new %s %q", nt.kind, nt.text)
		case nt.kind == termNumber && strings.HasPrefix(key, "num:") && firstDigit(nt.text) && !values[nt.value]:
			return "", QuestionKeptFactAdded, fmt.Sprintf("new number %q", nt.text)
		case strings.HasPrefix(key, "ratio:"):
			return "", QuestionKeptFactAdded, fmt.Sprintf("new count %q", nt.text)
		}
	}
	return t, "", ""
}

// checkRewording compares the rewording of part pi with the skeleton's
// narrative. maxDrift is the accepted relative change of length.
func (inv *inventory) checkRewording(pi int, text string, maxDrift float64) (Reason, string) {
	orig := inv.set.Parts[pi].Narrative
	no, nr := skill.CountTokens(orig), skill.CountTokens(text)
	if no > 0 {
		if d := float64(nr-no) / float64(no); d > maxDrift || d < -maxDrift {
			return RejectLengthDrift, fmt.Sprintf("part %d: %d tokens reworded from %d (%+.0f%%, at most ±%.0f%%)", pi+1, nr, no, 100*d, 100*maxDrift)
		}
	}
	paras := paragraphs(text)
	if len(paras) != len(inv.paras[pi]) {
		return RejectParagraphs, fmt.Sprintf("part %d: %d paragraphs reworded from %d", pi+1, len(paras), len(inv.paras[pi]))
	}
	got := make([]*facts, len(paras))
	for k, para := range paras {
		got[k] = inv.facts(para)
	}
	// Every fact stays in its paragraph.
	for k, of := range inv.orig[pi] {
		for _, key := range of.order {
			t := of.terms[key]
			n, want := got[k].count[key], of.count[key]
			if n == 0 || (t.counted && n < want) {
				return RejectFactLost, fmt.Sprintf("part %d paragraph %d: %s %q %s", pi+1, k+1, t.kind, t.text, lostHow(n, want))
			}
		}
	}
	// Every relation stays stated in one sentence of its paragraph.
	for k, prs := range inv.pairs[pi] {
		if len(prs) == 0 {
			continue
		}
		sens := inv.sentenceNames(paras[k])
		for _, pr := range prs {
			if !statedTogether(sens, pr.a, pr.b) {
				return RejectFactLost, fmt.Sprintf("part %d paragraph %d: the relation between %q and %q is no longer stated together", pi+1, k+1, pr.aText, pr.bText)
			}
		}
	}
	// No earlier answer where the skeleton did not name it.
	normOrig := skill.Normalize(strings.Join(strings.Fields(orig), " "))
	normNew := skill.Normalize(strings.Join(strings.Fields(text), " "))
	for pj := 0; pj < pi; pj++ {
		for _, a := range inv.answers[pj] {
			if trivialNumber(a.text) {
				continue
			}
			k := a.key[len("ans:"):]
			if n, m := len(termIndexes(normNew, k)), len(termIndexes(normOrig, k)); n > m {
				return RejectLeakage, fmt.Sprintf("part %d names part %d's answer %q %d time(s), the skeleton %d", pi+1, pj+1, a.text, n, m)
			}
		}
	}
	// Nothing new: identifiers, written numbers and dates of the part.
	have := map[string]bool{}
	values := map[string]bool{}
	for _, of := range inv.orig[pi] {
		for key, t := range of.terms {
			have[key] = true
			if t.kind == termNumber {
				values[t.value] = true
			}
			if t.kind == termDate {
				for _, x := range strings.FieldsFunc(key[len("date:"):], func(r rune) bool { return r == '-' }) {
					if v, err := strconv.Atoi(x); err == nil {
						values[strconv.Itoa(v)] = true
					}
				}
			}
		}
	}
	for k, gf := range got {
		for _, key := range gf.order {
			t := gf.terms[key]
			switch t.kind {
			case termID, termDate, termTime:
				if !have[key] {
					return RejectFactAdded, fmt.Sprintf("part %d paragraph %d: new %s %q", pi+1, k+1, t.kind, t.text)
				}
			case termNumber:
				if strings.HasPrefix(key, "num:") && firstDigit(t.text) && !values[t.value] {
					return RejectFactAdded, fmt.Sprintf("part %d paragraph %d: new number %q", pi+1, k+1, t.text)
				}
			}
		}
	}
	return "", ""
}

func lostHow(n, want int) string {
	if n == 0 {
		return "is missing"
	}
	return fmt.Sprintf("occurs %d time(s), was %d", n, want)
}

func firstDigit(s string) bool {
	r, _ := utf8.DecodeRuneInString(strings.TrimLeft(s, "+-−"))
	return unicode.IsDigit(r)
}

// statedTogether reports whether names a and b share a sentence, or sit
// in two adjacent sentences.
func statedTogether(sens []map[string]string, a, b string) bool {
	has := func(i int, k string) bool {
		if i < 0 || i >= len(sens) {
			return false
		}
		_, ok := sens[i][k]
		return ok
	}
	for i := range sens {
		if has(i, a) && (has(i, b) || has(i-1, b) || has(i+1, b)) {
			return true
		}
	}
	return false
}
