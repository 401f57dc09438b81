package procedural

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Templates are parsed once into literal/slot segments, so rendering is a
// tight append loop with no formatting calls.

type slotID uint8

const (
	slNone slotID = iota
	slX
	slRef
	slKind
	slKinds
	slKindPrev
	slKindsPrev
	slKindPrev2
	slKindsPrev2
	slSig
	slSigPrev
	slRep
	slRecheck
	slSiteNoun
	slSiteNouns
	slSite
	slN
	slM
	slM1
	slK
	slK1
	slDate
	slCause
	slCauseB
	slVal
	slMetric
	slTagNoun
	slTag
	slTagVerb
	slLink
	slCat
	slCatDim
	slTierDim
	slTierLo
	slTierMid
	slTierHi
	slT1
	slT2
	slILo
	slIMid
	slIHi
	slIntervalNoun
	slDoc
	slCode
	slPerson
	slTime
	slRDate
	slRSite
	slNum
	slPick
	slClauseA
	slClauseB
	slPct
	slY
)

var slotNames = map[string]slotID{
	"x": slX, "ref": slRef,
	"kind": slKind, "kinds": slKinds, "kindPrev": slKindPrev, "kindsPrev": slKindsPrev,
	"kindPrev2": slKindPrev2, "kindsPrev2": slKindsPrev2,
	"sig": slSig, "sigPrev": slSigPrev, "rep": slRep, "recheck": slRecheck,
	"siteNoun": slSiteNoun, "siteNouns": slSiteNouns, "site": slSite,
	"n": slN, "m": slM, "m1": slM1, "k": slK, "k1": slK1, "date": slDate,
	"cause": slCause, "causeB": slCauseB, "val": slVal, "metric": slMetric,
	"tagNoun": slTagNoun, "tag": slTag, "tagVerb": slTagVerb, "link": slLink,
	"cat": slCat, "catDim": slCatDim,
	"tierDim": slTierDim, "tierLo": slTierLo, "tierMid": slTierMid, "tierHi": slTierHi,
	"t1": slT1, "t2": slT2, "iLo": slILo, "iMid": slIMid, "iHi": slIHi,
	"intervalNoun": slIntervalNoun, "doc": slDoc,
	"A": slClauseA, "B": slClauseB, "pct": slPct, "y": slY,
	"code": slCode, "person": slPerson, "time": slTime, "rdate": slRDate, "rsite": slRSite,
}

type seg struct {
	lit    string
	slot   slotID
	dec    uint8
	lo, hi int64 // slNum range, already scaled by 10^dec
	alts   []string
}

type tpl struct {
	segs  []seg
	src   string
	words int // rough length, for preferring short phrasings
}

func parseTpl(s string) (tpl, error) {
	t := tpl{src: s}
	rest := s
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			t.segs = append(t.segs, seg{lit: rest})
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return tpl{}, fmt.Errorf("template %q: unclosed slot", s)
		}
		sg := seg{lit: rest[:i]}
		name := rest[i+1 : i+j]
		switch {
		case strings.HasPrefix(name, "n:"):
			spec := name[2:]
			dec := 0
			if k := strings.IndexByte(spec, '/'); k >= 0 {
				d, err := strconv.Atoi(spec[k+1:])
				if err != nil || d < 0 || d > 3 {
					return tpl{}, fmt.Errorf("template %q: bad decimals in %q", s, name)
				}
				dec = d
				spec = spec[:k]
			}
			k := strings.IndexByte(spec, '-')
			if k <= 0 {
				return tpl{}, fmt.Errorf("template %q: bad range %q", s, name)
			}
			lo, err1 := strconv.ParseInt(spec[:k], 10, 64)
			hi, err2 := strconv.ParseInt(spec[k+1:], 10, 64)
			if err1 != nil || err2 != nil || hi < lo {
				return tpl{}, fmt.Errorf("template %q: bad range %q", s, name)
			}
			p := pow10(dec)
			sg.slot, sg.dec, sg.lo, sg.hi = slNum, uint8(dec), lo*p, hi*p
		case strings.HasPrefix(name, "pick:"):
			sg.slot = slPick
			sg.alts = strings.Split(name[5:], "|")
		default:
			id, ok := slotNames[name]
			if !ok {
				return tpl{}, fmt.Errorf("template %q: unknown slot {%s}", s, name)
			}
			sg.slot = id
		}
		t.segs = append(t.segs, sg)
		rest = rest[i+j+1:]
	}
	t.words = countWords(s)
	if strings.Contains(s, "  ") || strings.TrimSpace(s) != s || strings.ContainsAny(s, "\n\t\u00a0\u2009\u202f") {
		return tpl{}, fmt.Errorf("template %q: white space must be single ASCII spaces", s)
	}
	return t, nil
}

// tableBuilder collects parse errors while the package tables are built.
type tableBuilder struct{ errs []error }

func (tb *tableBuilder) tpls(ss ...string) []tpl {
	out := make([]tpl, 0, len(ss))
	for _, s := range ss {
		t, err := parseTpl(s)
		if err != nil {
			tb.errs = append(tb.errs, err)
			continue
		}
		out = append(out, t)
	}
	return out
}

func (tb *tableBuilder) err() error { return errors.Join(tb.errs...) }

func pow10(d int) int64 {
	p := int64(1)
	for range d {
		p *= 10
	}
	return p
}

// appendFixed appends v/10^dec with exactly dec decimals.
func appendFixed(b []byte, v int64, dec int) []byte {
	if v < 0 {
		b = append(b, '-')
		v = -v
	}
	if dec == 0 {
		return strconv.AppendInt(b, v, 10)
	}
	p := pow10(dec)
	b = strconv.AppendInt(b, v/p, 10)
	b = append(b, '.')
	frac := v % p
	for q := p / 10; q > 0; q /= 10 {
		b = append(b, byte('0'+frac/q))
		frac %= q
	}
	return b
}

func fixedString(v int64, dec int) string {
	var buf [24]byte
	return string(appendFixed(buf[:0], v, dec))
}

var smallWords = [...]string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"}

// Dates are day offsets within one calendar year (never crossing it, so
// styles without a year stay unambiguous).

var monthNames = [...]string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func normDay(year, doy int) (int, int) {
	for {
		n := 365
		if isLeap(year) {
			n = 366
		}
		if doy < n {
			return year, doy
		}
		doy -= n
		year++
	}
}

func monthDay(year, doy int) (month, day int) {
	days := [12]int{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
	if isLeap(year) {
		days[1] = 29
	}
	for m := range 12 {
		if doy < days[m] {
			return m + 1, doy + 1
		}
		doy -= days[m]
	}
	return 12, 31
}

const (
	dateLong  = iota // 14 March 2024
	dateUS           // March 14, 2024
	dateISO          // 2024-03-14
	dateShort        // 14 Mar 2024
	nDateStyles
)

// appendDate renders day doy counted from 1 January of year; days past
// the year's end roll into the next year.
func appendDate(b []byte, year, doy, style int) []byte {
	year, doy = normDay(year, doy)
	m, d := monthDay(year, doy)
	switch style {
	case dateUS:
		b = append(b, monthNames[m-1]...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(d), 10)
		b = append(b, ", "...)
		b = strconv.AppendInt(b, int64(year), 10)
	case dateISO:
		b = appendISO(b, year, m, d)
	case dateShort:
		b = strconv.AppendInt(b, int64(d), 10)
		b = append(b, ' ')
		b = append(b, monthNames[m-1][:3]...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(year), 10)
	default:
		b = strconv.AppendInt(b, int64(d), 10)
		b = append(b, ' ')
		b = append(b, monthNames[m-1]...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(year), 10)
	}
	return b
}

func appendISO(b []byte, y, m, d int) []byte {
	b = strconv.AppendInt(b, int64(y), 10)
	b = append(b, '-')
	b = append2(b, m)
	b = append(b, '-')
	return append2(b, d)
}

func append2(b []byte, v int) []byte {
	return append(b, byte('0'+v/10), byte('0'+v%10))
}

// countWords matches len(strings.Fields(s)) for the text this package
// emits, which uses ASCII white space only.
func countWords(s string) int {
	n := 0
	prevSpace := true
	for i := 0; i < len(s); i++ {
		sp := asciiSpace[s[i]]
		if prevSpace && !sp {
			n++
		}
		prevSpace = sp
	}
	return n
}

// spacedWords counts the words of a single-spaced line (no leading,
// trailing or repeated spaces, no newlines), as every rendered sentence
// and paragraph body is; bytes.Count is vectorised.
func spacedWords(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	return bytes.Count(b, space) + 1
}

var space = []byte{' '}

var asciiSpace = [256]bool{' ': true, '\n': true, '\t': true, '\r': true, '\v': true, '\f': true}

// tokensFor mirrors skill.CountTokens: round(words / 0.75).
func tokensFor(words int) int { return (words*4 + 1) / 3 }

// wordsFor is the inverse of tokensFor, rounded.
func wordsFor(tokens int) int { return (tokens*3 + 2) / 4 }

// capitalizeAt upper-cases the first letter of the sentence that starts at
// b[start], unless the first word is a code (contains a digit).
func capitalizeAt(b []byte, start int) {
	if start >= len(b) {
		return
	}
	c := b[start]
	if c < 'a' || c > 'z' {
		return
	}
	for i := start; i < len(b) && b[i] != ' '; i++ {
		if b[i] >= '0' && b[i] <= '9' {
			return
		}
	}
	b[start] = c - 'a' + 'A'
}
