package attack

import (
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Text helpers of the white-box attackers: sentences, clauses, codes,
// dates and numbers as the generators write them.

// wbSentences splits a narrative into sentences: at line breaks and at
// . ! ? followed by white space and an upper-case letter, a digit or a
// bracket.
func wbSentences(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		start := 0
		for i := 0; i < len(line); i++ {
			c := line[i]
			if c != '.' && c != '!' && c != '?' {
				continue
			}
			j := i + 1
			if j < len(line) && line[j] != ' ' {
				continue
			}
			for j < len(line) && line[j] == ' ' {
				j++
			}
			if j >= len(line) {
				continue
			}
			r, _ := utf8.DecodeRuneInString(line[j:])
			if unicode.IsUpper(r) || unicode.IsDigit(r) || r == '[' || r == '(' || r == '"' {
				if s := strings.TrimSpace(line[start : i+1]); s != "" {
					out = append(out, s)
				}
				start = j
			}
		}
		if s := strings.TrimSpace(line[start:]); s != "" {
			out = append(out, s)
		}
	}
	return out
}

var wbClauseSplit = regexp.MustCompile(`(?i);\s+|,\s+(?:and|but|while|whereas|yet|though|although)\s+|\s+but also\s+|\s+not only\s+|,\s+however,?\s+|\bwhile\b`)

// wbClauses splits a sentence at clause joints (";", ", and", ", but",
// "however", "not only ... but also").
func wbClauses(s string) []string {
	locs := wbClauseSplit.FindAllStringIndex(s, -1)
	if len(locs) == 0 {
		return []string{s}
	}
	var out []string
	prev := 0
	for _, l := range locs {
		if t := strings.TrimSpace(s[prev:l[0]]); t != "" {
			out = append(out, t)
		}
		prev = l[1]
	}
	if t := strings.TrimSpace(s[prev:]); t != "" {
		out = append(out, t)
	}
	return out
}

// wbTok is one token of a sentence with its byte span.
type wbTok struct {
	text       string
	start, end int
}

// wbTokens splits s into word tokens: runs of letters, digits and marks,
// with - * : / . + ' kept when they stand between two such characters.
func wbTokens(s string) []wbTok {
	var out []wbTok
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !wbWordRune(r) {
			i += n
			continue
		}
		j := i + n
		for j < len(s) {
			r2, n2 := utf8.DecodeRuneInString(s[j:])
			if wbWordRune(r2) {
				j += n2
				continue
			}
			if strings.ContainsRune("-*:/.+'’,", r2) && j+n2 < len(s) {
				r3, _ := utf8.DecodeRuneInString(s[j+n2:])
				r1, _ := utf8.DecodeLastRuneInString(s[:j])
				// a comma joins only digits ("O:5,27", "1,250")
				if wbWordRune(r3) && (r2 != ',' || (unicode.IsDigit(r1) && unicode.IsDigit(r3))) {
					j += n2
					continue
				}
			}
			break
		}
		out = append(out, wbTok{text: s[i:j], start: i, end: j})
		i = j
	}
	return out
}

func wbWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}

// wbIsCode reports whether a token looks like an identifier the generator
// or a model would use for an entity or a tag: an upper-case letter plus a
// digit or a second upper-case letter, and no long lower-case segment.
func wbIsCode(t string) bool {
	upper, digit, letters := 0, 0, 0
	for _, r := range t {
		switch {
		case unicode.IsUpper(r):
			upper++
			letters++
		case unicode.IsDigit(r):
			digit++
		case unicode.IsLetter(r):
			letters++
		}
	}
	if upper == 0 || (upper < 2 && digit == 0) {
		return false
	}
	if wbIsDateTok(t) {
		return false
	}
	// "PARP-directed", "GLP-1-based": a lower-case segment of three or
	// more letters makes a word, not a code.
	for _, seg := range strings.FieldsFunc(t, func(r rune) bool { return strings.ContainsRune("-*:/.+'’", r) }) {
		low := 0
		for _, r := range seg {
			if unicode.IsLower(r) {
				low++
			} else {
				low = -100
			}
		}
		if low >= 3 {
			return false
		}
	}
	// Mixed-case words with a single capital and no digit ("Tampere") are
	// excluded above; camel-case names ("CobaltGecko") are codes.
	return true
}

var wbDateTokRe = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$|^\d{1,2}:\d{2}$`)

func wbIsDateTok(t string) bool { return wbDateTokRe.MatchString(t) }

// Dates as the generators write them.
var (
	wbMonths = map[string]time.Month{
		"january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
		"august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
		"jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9,
		"oct": 10, "nov": 11, "dec": 12,
	}
	wbDateRe = regexp.MustCompile(`(?i)\b(\d{4})-(\d{2})-(\d{2})\b|\b(\d{1,2})\s+(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?,?\s+(\d{4})\b|\b(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b`)
)

// wbDate is a date found in a text: its span and its day number.
type wbDate struct {
	start, end int
	day        int
}

// wbDates finds every date in s, as days since 1 January 1970.
func wbDates(s string) []wbDate {
	if !wbHasDigitRun(s, 4) {
		return nil // every form of wbDateRe writes a four-digit year
	}
	var out []wbDate
	for _, m := range wbDateRe.FindAllStringSubmatchIndex(s, -1) {
		var y, d int
		var mo time.Month
		g := func(i int) string {
			if m[2*i] < 0 {
				return ""
			}
			return s[m[2*i]:m[2*i+1]]
		}
		switch {
		case g(1) != "":
			y, _ = strconv.Atoi(g(1))
			mi, _ := strconv.Atoi(g(2))
			mo = time.Month(mi)
			d, _ = strconv.Atoi(g(3))
		case g(4) != "":
			d, _ = strconv.Atoi(g(4))
			mo = wbMonths[strings.ToLower(g(5))]
			y, _ = strconv.Atoi(g(6))
		default:
			mo = wbMonths[strings.ToLower(g(7))]
			d, _ = strconv.Atoi(g(8))
			y, _ = strconv.Atoi(g(9))
		}
		if mo < 1 || mo > 12 || d < 1 || d > 31 || y < 1000 || y > 9999 {
			continue
		}
		day := int(time.Date(y, mo, d, 0, 0, 0, 0, time.UTC).Unix() / 86400)
		out = append(out, wbDate{start: m[0], end: m[1], day: day})
	}
	return out
}

// wbHasDigitRun reports whether s holds n ASCII digits in a row (the
// digits \d matches): a cheap test before the date and number patterns.
func wbHasDigitRun(s string, n int) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			if run++; run >= n {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

// wbNum is a number found in a text.
type wbNum struct {
	start, end int
	text       string // digits as written, without grouping commas
	val        *big.Rat
	dec        int
}

var wbNumRe = regexp.MustCompile(`(?:^|[^\w.\-/*:])(-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?)`)

// wbNumbers finds plain numbers in s (not inside codes or dates).
func wbNumbers(s string) []wbNum {
	if !wbHasDigitRun(s, 1) {
		return nil // wbNumRe matches a digit
	}
	var out []wbNum
	dates := wbDates(s)
	for _, m := range wbNumRe.FindAllStringSubmatchIndex(s, -1) {
		a, b := m[2], m[3]
		if b < len(s) {
			r, _ := utf8.DecodeRuneInString(s[b:])
			if unicode.IsLetter(r) && !strings.HasPrefix(s[b:], "pp") && !strings.HasPrefix(s[b:], "x") && !strings.HasPrefix(s[b:], "σ") {
				continue // a code such as 3A4
			}
			if r == '-' || r == '*' || r == '/' || r == ':' {
				continue
			}
			if r == '.' && b+1 < len(s) && s[b+1] >= '0' && s[b+1] <= '9' {
				continue // a dotted address such as 10.74.163.136
			}
		}
		inDate := false
		for _, d := range dates {
			if a >= d.start && b <= d.end {
				inDate = true
			}
		}
		if inDate {
			continue
		}
		t := strings.ReplaceAll(s[a:b], ",", "")
		v, ok := new(big.Rat).SetString(t)
		if !ok {
			continue
		}
		dec := 0
		if k := strings.IndexByte(t, '.'); k >= 0 {
			dec = len(t) - k - 1
		}
		out = append(out, wbNum{start: a, end: b, text: t, val: v, dec: dec})
	}
	return out
}

var wbNumberWords = map[string]int{
	"zero": 0, "no": 0, "none": 0, "one": 1, "a single": 1, "single": 1, "two": 2, "three": 3, "four": 4, "five": 5,
	"six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
	"both": 2, "all": -1, "every": -1, "each": -1,
}

// wbRatFmt formats v with dec decimals.
func wbRatFmt(v *big.Rat, dec int) string {
	if v == nil {
		return ""
	}
	return v.FloatString(dec)
}

// wbLowerWords returns the lower-case words of s.
func wbLowerWords(s string) []string {
	var out []string
	for _, t := range wbTokens(s) {
		out = append(out, strings.ToLower(t.text))
	}
	return out
}

// wbFunctionWords never start or end a name.
var wbFunctionWords = toSet("a an the of at in on by from for to with via per its their this that which who whose is was were are be been being and or nor not no but as into onto than then so it its it's after before over under between among across during while when where also around about against behind within without through towards toward upon beyond near up down off out only both each every all any same other another more most less least very had has have did do does one two three four five six")

// wbContainsWord reports whether hay contains needle as whole words
// (case-insensitive). Both are expected lower case.
func wbContainsWord(hay, needle string) bool {
	return wbIndexWord(hay, needle) >= 0
}

// wbIndexWord finds needle in hay at word boundaries.
func wbIndexWord(hay, needle string) int {
	if needle == "" {
		return -1
	}
	off := 0
	for {
		i := strings.Index(hay[off:], needle)
		if i < 0 {
			return -1
		}
		i += off
		j := i + len(needle)
		okL := i == 0 || !wbWordByteAt(hay, i-1, true)
		okR := j >= len(hay) || !wbWordByteAt(hay, j, false)
		if okL && okR {
			return i
		}
		off = i + 1
		if off >= len(hay) {
			return -1
		}
	}
}

func wbWordByteAt(s string, i int, before bool) bool {
	var r rune
	if before {
		r, _ = utf8.DecodeLastRuneInString(s[:i+1])
	} else {
		r, _ = utf8.DecodeRuneInString(s[i:])
	}
	return wbWordRune(r)
}
