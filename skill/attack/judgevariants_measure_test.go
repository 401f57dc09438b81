package attack

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/acaptcha/acaptcha/skill"
)

// TestMeasureJudgeVariants prints (JUDGE_VARIANTS_MEASURE=N: N procedural
// sets for each of three seeds, besides the LLM-written sample sets and
// hybrids, skipped when absent) a table of answer variants and the share
// of questions on which the judge accepts each, with the canonical
// answer right: the rewordings a capable agent writes (must be accepted)
// and the answers a script that read the judge writes (shotguns,
// echoes, negations, hedges, stuffing, Unicode tricks: must be
// refused). JUDGE_VARIANTS_VERBOSE=1 logs the first failures of each.
func TestMeasureJudgeVariants(t *testing.T) {
	n := 0
	fmt.Sscan(os.Getenv("JUDGE_VARIANTS_MEASURE"), &n)
	if n == 0 {
		t.Skip("set JUDGE_VARIANTS_MEASURE=<procedural sets per seed> to measure")
	}
	for _, seed := range []uint64{1, 20261124, 777} {
		measureVariants(t, fmt.Sprintf("procedural seed %d (%d sets)", seed, n), procSets(t, n, seed))
	}
	if d := corpusDir(); d != "" {
		for _, pat := range []string{"/sets/*.json", "/hybrid/*-hybrid.json", "/hybrid/*-hybrid-q.json"} {
			files, _ := filepath.Glob(d + pat)
			var sets []*skill.Set
			for _, f := range files {
				if set, err := skill.LoadFile(f); err == nil {
					sets = append(sets, set)
				}
			}
			measureVariants(t, "llm-corpus "+pat, sets)
		}
	}
}

// jvCase is one question as a variant builder sees it.
type jvCase struct {
	q    *skill.Question
	narr []string
	a    string // canonical answer
	num  bool   // canonical answer is one number
}

type jvVariant struct {
	name  string
	legit bool
	// build returns the answers to try (none: not applicable).
	build func(c jvCase) []string
}

var (
	jvNumRe   = regexp.MustCompile(`^-?\d+(\.\d+)?$`)
	jvLabelRe = regexp.MustCompile(`^([A-Za-z]+) (\d+)$`)
	jvNumsRe  = regexp.MustCompile(`\d[\d,]*(\.\d+)?`)
	jvCapsRe  = regexp.MustCompile(`[A-Z][\w'’-]*(?: [A-Z0-9][\w'’-]*){0,3}`)
)

func jvSpell(v int) string {
	units := strings.Fields("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen")
	tens := strings.Fields("twenty thirty forty fifty sixty seventy eighty ninety")
	switch {
	case v < 20:
		return units[v]
	case v < 100:
		s := tens[v/10-2]
		if v%10 != 0 {
			s += "-" + units[v%10]
		}
		return s
	case v < 1000:
		s := units[v/100] + " hundred"
		if v%100 != 0 {
			s += " " + jvSpell(v%100)
		}
		return s
	case v < 1000000:
		s := jvSpell(v/1000) + " thousand"
		if v%1000 != 0 {
			s += " " + jvSpell(v%1000)
		}
		return s
	}
	return ""
}

// jvOthers returns the other candidates: the distractors, or for a
// question without them (the LLM-written sets) up to 8 of the
// narratives' capitalised runs (a name question) or numbers (a numeric
// one) that share no word with an accepted variant.
func jvOthers(c jvCase) []string {
	var out []string
	for _, d := range c.q.Distractors {
		if strings.TrimSpace(d) != "" {
			out = append(out, d)
		}
	}
	if len(out) > 0 {
		return out
	}
	vw := map[string]bool{}
	for _, v := range c.q.Variants() {
		for _, w := range skill.Words(v) {
			vw[w.Text] = true
		}
	}
	re := jvCapsRe
	if c.num {
		re = jvNumsRe
	}
	seen := map[string]bool{}
	for _, n := range c.narr {
		for _, m := range re.FindAllString(n, -1) {
			shared := false
			for _, w := range skill.Words(m) {
				shared = shared || vw[w.Text]
			}
			if !shared && !seen[m] && len(out) < 8 {
				seen[m] = true
				out = append(out, m)
			}
		}
	}
	return out
}

// jvFit joins parts with sep, keeping the answer's part and as many
// others as fit in the 64-byte cap (a script keeps within it).
func jvFit(a string, others []string, sep string, first bool) string {
	out := []string{}
	if first {
		out = append(out, a)
	}
	for _, o := range others {
		if skill.Normalize(o) == skill.Normalize(a) {
			continue
		}
		if len(strings.Join(append(append([]string{}, out...), o, a), sep)) > skill.MaxAnswerBytes {
			break
		}
		out = append(out, o)
	}
	if !first {
		out = append(out, a)
	}
	if len(out) < 2 {
		return ""
	}
	return strings.Join(out, sep)
}

func jvHomoglyph(s string) string {
	m := map[rune]rune{'a': 'а', 'e': 'е', 'o': 'о', 'p': 'р', 'c': 'с', 'x': 'х', 'y': 'у', 'A': 'А', 'E': 'Е', 'O': 'О', 'P': 'Р', 'C': 'С', 'T': 'Т', 'K': 'К', 'M': 'М', 'H': 'Н', 'B': 'В', 'i': 'і', 'I': 'І', 'S': 'Ѕ', 's': 'ѕ'}
	var b strings.Builder
	for _, r := range s {
		if h, ok := m[r]; ok {
			b.WriteRune(h)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func jvInsert(s, ins string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && unicode.IsLetter(r) {
			b.WriteString(ins)
		}
		b.WriteRune(r)
	}
	return b.String()
}

func jvFullWidth(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r - '0' + '０')
		} else if r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' {
			b.WriteRune(r - 'A' + 'Ａ')
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func jvTitle(s string) string {
	fs := strings.Fields(strings.ToLower(s))
	for i, f := range fs {
		r, n := utf8.DecodeRuneInString(f)
		fs[i] = string(unicode.ToUpper(r)) + f[n:]
	}
	return strings.Join(fs, " ")
}

func jvOne(s string) []string {
	if s == "" || len(s) > skill.MaxAnswerBytes {
		return nil
	}
	return []string{s}
}

func jvVariants() []jvVariant {
	each := func(c jvCase, f func(string) string) []string {
		var out []string
		for _, v := range c.q.Variants() {
			if s := f(v); s != "" && len(s) <= skill.MaxAnswerBytes {
				out = append(out, s)
			}
		}
		return out
	}
	nonNum := func(c jvCase, f func(string) string) []string {
		if c.num {
			return nil
		}
		return jvOne(f(c.a))
	}
	num := func(c jvCase, f func(float64, string) string) []string {
		if !c.num {
			return nil
		}
		v, err := strconv.ParseFloat(c.a, 64)
		if err != nil {
			return nil
		}
		return jvOne(f(v, c.a))
	}
	return []jvVariant{
		// legitimate
		{"every accepted variant", true, func(c jvCase) []string { return each(c, func(s string) string { return s }) }},
		{"upper case", true, func(c jvCase) []string { return each(c, strings.ToUpper) }},
		{"lower case", true, func(c jvCase) []string { return each(c, strings.ToLower) }},
		{"title case", true, func(c jvCase) []string { return each(c, jvTitle) }},
		{"X.", true, func(c jvCase) []string { return jvOne(c.a + ".") }},
		{"\"X\"", true, func(c jvCase) []string { return jvOne(`"` + c.a + `"`) }},
		{"“X”", true, func(c jvCase) []string { return jvOne("“" + c.a + "”") }},
		{"'X'", true, func(c jvCase) []string { return jvOne("'" + c.a + "'") }},
		{"**X**", true, func(c jvCase) []string { return jvOne("**" + c.a + "**") }},
		{"`X`", true, func(c jvCase) []string { return jvOne("`" + c.a + "`") }},
		{"white space around", true, func(c jvCase) []string { return jvOne("  " + c.a + " \n") }},
		{"X!", true, func(c jvCase) []string { return jvOne(c.a + "!") }},
		{"The answer is X.", true, func(c jvCase) []string { return jvOne("The answer is " + c.a + ".") }},
		{"Answer: X", true, func(c jvCase) []string { return jvOne("Answer: " + c.a) }},
		{"It is X.", true, func(c jvCase) []string { return jvOne("It is " + c.a + ".") }},
		{"It was X.", true, func(c jvCase) []string { return jvOne("It was " + c.a + ".") }},
		{"the X", true, func(c jvCase) []string { return nonNum(c, func(s string) string { return "the " + s }) }},
		{"The <noun> is X.", true, func(c jvCase) []string {
			n := askedNoun(c.q.Question)
			if n == "" {
				return nil
			}
			return jvOne("The " + n + " is " + c.a + ".")
		}},
		{"X (explanation)", true, func(c jvCase) []string { return jvOne(c.a + " (per the narrative)") }},
		{"X, because ...", true, func(c jvCase) []string { return jvOne(c.a + ", because the narrative says so") }},
		{"X — explanation", true, func(c jvCase) []string { return jvOne(c.a + " — the narrative says so") }},
		{"X\\n\\nexplanation", true, func(c jvCase) []string { return jvOne(c.a + "\n\nThe narrative says so.") }},
		{"U+2011 for -", true, func(c jvCase) []string {
			if !strings.Contains(c.a, "-") {
				return nil
			}
			return jvOne(strings.ReplaceAll(c.a, "-", "\u2011"))
		}},
		{"NBSP for space", true, func(c jvCase) []string {
			if !strings.Contains(c.a, " ") {
				return nil
			}
			return jvOne(strings.ReplaceAll(c.a, " ", "\u00a0"))
		}},
		{"no hyphen (space)", true, func(c jvCase) []string {
			if !strings.Contains(c.a, "-") || c.num {
				return nil
			}
			return jvOne(strings.ReplaceAll(c.a, "-", " "))
		}},
		{"numbered label: number alone", true, func(c jvCase) []string {
			m := jvLabelRe.FindStringSubmatch(c.a)
			if m == nil {
				return nil
			}
			return jvOne(m[2])
		}},
		{"numbered label: spelled", true, func(c jvCase) []string {
			m := jvLabelRe.FindStringSubmatch(c.a)
			if m == nil {
				return nil
			}
			v, _ := strconv.Atoi(m[2])
			return jvOne(m[1] + " " + jvSpell(v))
		}},
		{"number spelled (integer)", true, func(c jvCase) []string {
			return num(c, func(v float64, _ string) string {
				if v != float64(int(v)) || v < 0 || v >= 1000000 {
					return ""
				}
				return jvSpell(int(v))
			})
		}},
		{"number Spelled capitalised", true, func(c jvCase) []string {
			return num(c, func(v float64, _ string) string {
				if v != float64(int(v)) || v < 0 || v >= 100 {
					return ""
				}
				return jvTitle(jvSpell(int(v)))
			})
		}},
		{"number with thousands commas", true, func(c jvCase) []string {
			return num(c, func(v float64, a string) string {
				if v < 1000 || strings.Contains(a, ".") {
					return ""
				}
				s := a
				for i := len(s) - 3; i > 0; i -= 3 {
					s = s[:i] + "," + s[i:]
				}
				return s
			})
		}},
		{"number trailing zero", true, func(c jvCase) []string {
			return num(c, func(_ float64, a string) string {
				if strings.Contains(a, ".") {
					return a + "0"
				}
				return a + ".0"
			})
		}},
		{"approximately X", true, func(c jvCase) []string {
			return num(c, func(_ float64, a string) string { return "approximately " + a })
		}},
		{"~X", true, func(c jvCase) []string {
			return num(c, func(_ float64, a string) string { return "~" + a })
		}},
		{"≈ X", true, func(c jvCase) []string {
			return num(c, func(_ float64, a string) string { return "≈ " + a })
		}},
		{"X with each unit variant", true, func(c jvCase) []string {
			if !c.num {
				return nil
			}
			var out []string
			for _, v := range c.q.Variants() {
				if !jvNumRe.MatchString(v) {
					out = append(out, v)
				}
			}
			return out
		}},
		{"unit respelled", true, func(c jvCase) []string {
			if !c.num {
				return nil
			}
			alt := map[string][]string{
				"%": {" percent", " per cent", " pct", "pc"}, "percent": {"%", " pct"}, "days": {" d", "-day", " day(s)"},
				"hours": {" h", " hrs", " hr"}, "km": {" kilometres", " kilometers"}, "gb": {" gigabytes", "GB"},
				"points": {" pp", " percentage points", " pts"}, "pp": {" points", " percentage points"},
				"minutes": {" min", " mins"}, "years": {" yr", " yrs"}, "mg/l": {" mg/L", " milligrams per litre"},
				"£": {" GBP", " pounds"}, "€": {" EUR", " euros"}, "$": {" USD", " dollars"},
			}
			var out []string
			for _, v := range c.q.Variants() {
				lv := strings.ToLower(v)
				for u, as := range alt {
					if strings.HasSuffix(lv, u) || strings.HasPrefix(lv, u) {
						for _, a := range as {
							out = append(out, c.a+a)
						}
					}
				}
			}
			return out
		}},
		{"bullet - X", true, func(c jvCase) []string { return jvOne("- " + c.a) }},
		{"bullet * X", true, func(c jvCase) []string { return jvOne("* " + c.a) }},
		{"bullet • X", true, func(c jvCase) []string { return jvOne("• " + c.a) }},
		{"X [1]", true, func(c jvCase) []string { return jvOne(c.a + " [1]") }},
		{"A: X", true, func(c jvCase) []string { return jvOne("A: " + c.a) }},
		{"X (final)", true, func(c jvCase) []string { return jvOne(c.a + " (final)") }},
		{"X in total", true, func(c jvCase) []string {
			return num(c, func(_ float64, a string) string { return a + " in total" })
		}},
		{"X, which is the answer", true, func(c jvCase) []string { return jvOne(c.a + ", which is the answer") }},
		{"Final answer: **X**", true, func(c jvCase) []string { return jvOne("Final answer: **" + c.a + "**") }},
		{"### Answer LF X", true, func(c jvCase) []string { return jvOne("### Answer\n" + c.a) }},
		{"Answer: LF X", true, func(c jvCase) []string { return jvOne("Answer:\n" + c.a) }},
		{"trailing ZWSP / BOM", true, func(c jvCase) []string { return []string{c.a + "\u200b", "\ufeff" + c.a} }},
		{"X is the <noun>.", true, func(c jvCase) []string {
			n := askedNoun(c.q.Question)
			if n == "" || strings.ToUpper(n) == n {
				return nil
			}
			return jvOne(strings.NewReplacer("<noun>", n, "X", c.a).Replace("X is the <noun>."))
		}},
		{"The <noun> was X.", true, func(c jvCase) []string {
			n := askedNoun(c.q.Question)
			if n == "" || strings.ToUpper(n) == n {
				return nil
			}
			return jvOne(strings.NewReplacer("<noun>", n, "X", c.a).Replace("The <noun> was X."))
		}},
		{"X was the <noun>.", true, func(c jvCase) []string {
			n := askedNoun(c.q.Question)
			if n == "" || strings.ToUpper(n) == n {
				return nil
			}
			return jvOne(strings.NewReplacer("<noun>", n, "X", c.a).Replace("X was the <noun>."))
		}},
		{"That would be X.", true, func(c jvCase) []string { return jvOne(strings.Replace("That would be X.", "X", c.a, 1)) }},
		{"I'd go with X.", true, func(c jvCase) []string { return jvOne(strings.Replace("I'd go with X.", "X", c.a, 1)) }},
		{"Definitely X.", true, func(c jvCase) []string { return jvOne(strings.Replace("Definitely X.", "X", c.a, 1)) }},
		{"X is correct.", true, func(c jvCase) []string { return jvOne(strings.Replace("X is correct.", "X", c.a, 1)) }},
		{"X is my answer.", true, func(c jvCase) []string { return jvOne(strings.Replace("X is my answer.", "X", c.a, 1)) }},
		{"It should be X.", true, func(c jvCase) []string { return jvOne(strings.Replace("It should be X.", "X", c.a, 1)) }},
		{"The correct answer is X.", true, func(c jvCase) []string { return jvOne(strings.Replace("The correct answer is X.", "X", c.a, 1)) }},
		{"X, according to the narrative.", true, func(c jvCase) []string { return jvOne(strings.Replace("X, according to the narrative.", "X", c.a, 1)) }},
		{"Based on the narrative, X.", true, func(c jvCase) []string { return jvOne(strings.Replace("Based on the narrative, X.", "X", c.a, 1)) }},
		{"According to the narrative, X.", true, func(c jvCase) []string { return jvOne(strings.Replace("According to the narrative, X.", "X", c.a, 1)) }},
		{"From the narrative: X", true, func(c jvCase) []string { return jvOne(strings.Replace("From the narrative: X", "X", c.a, 1)) }},
		{"X (from part 1)", true, func(c jvCase) []string { return jvOne(strings.Replace("X (from part 1)", "X", c.a, 1)) }},
		{"X. LF Reasoning: the narrative says so.", true, func(c jvCase) []string {
			return jvOne(strings.Replace("X.\nReasoning: the narrative says so.", "X", c.a, 1))
		}},
		{"Answer - X", true, func(c jvCase) []string { return jvOne(strings.Replace("Answer - X", "X", c.a, 1)) }},
		{"ANSWER: X", true, func(c jvCase) []string { return jvOne(strings.Replace("ANSWER: X", "X", c.a, 1)) }},
		{"answer=X", true, func(c jvCase) []string { return jvOne(strings.Replace("answer=X", "X", c.a, 1)) }},
		{"Answer: `X`", true, func(c jvCase) []string { return jvOne(strings.Replace("Answer: `X`", "X", c.a, 1)) }},
		{"leading zero dropped (.7)", true, func(c jvCase) []string {
			return num(c, func(_ float64, a string) string {
				if !strings.HasPrefix(a, "0.") {
					return ""
				}
				return a[1:]
			})
		}},
		{"full-width digits", true, func(c jvCase) []string {
			return num(c, func(_ float64, a string) string { return jvFullWidth(a) })
		}},

		// gaming
		{"G shotgun: candidates, comma", false, func(c jvCase) []string { return jvOne(jvFit(c.a, jvOthers(c), ", ", true)) }},
		{"G shotgun: candidates, space", false, func(c jvCase) []string { return jvOne(jvFit(c.a, jvOthers(c), " ", false)) }},
		{"G shotgun: candidates, slash", false, func(c jvCase) []string { return jvOne(jvFit(c.a, jvOthers(c), " / ", true)) }},
		{"G shotgun: candidates, lines", false, func(c jvCase) []string { return jvOne(jvFit(c.a, jvOthers(c), "\n", true)) }},
		{"G shotgun: narrative numbers", false, func(c jvCase) []string {
			if !c.num {
				return nil
			}
			var ns []string
			for _, n := range c.narr {
				ns = append(ns, jvNumsRe.FindAllString(n, -1)...)
			}
			return []string{jvFit(c.a, ns, " ", true), jvFit(c.a, ns, ", ", false)}
		}},
		{"G shotgun: narrative names", false, func(c jvCase) []string {
			if c.num {
				return nil
			}
			var ns []string
			for _, n := range c.narr {
				ns = append(ns, jvCapsRe.FindAllString(n, -1)...)
			}
			return []string{jvFit(c.a, ns, ", ", true), jvFit(c.a, ns, " ", false)}
		}},
		{"G echo question", false, func(c jvCase) []string { return jvOne(jvCut(c.q.Question)) }},
		{"G echo narrative start", false, func(c jvCase) []string { return jvOne(jvCut(c.narr[len(c.narr)-1])) }},
		{"G too long (X + padding)", false, func(c jvCase) []string {
			return []string{c.a + " " + strings.Repeat("according to the narrative ", 3)}
		}},
		{"G not X", false, func(c jvCase) []string { return jvOne("not " + c.a) }},
		{"G X is not correct", false, func(c jvCase) []string { return jvOne(c.a + " is not correct") }},
		{"G hedge: X or D", false, func(c jvCase) []string { return jvPairs(c, "%s or %s") }},
		{"G hedge: D or X", false, func(c jvCase) []string { return jvPairsRev(c, "%s or %s") }},
		{"G hedge: X/D", false, func(c jvCase) []string { return jvPairs(c, "%s/%s") }},
		{"G hedge: X (or D)", false, func(c jvCase) []string { return jvPairs(c, "%s (or %s)") }},
		{"G hedge: X, maybe D", false, func(c jvCase) []string { return jvPairs(c, "%s, maybe %s") }},
		{"G hedge: X (perhaps D)", false, func(c jvCase) []string { return jvPairs(c, "%s (perhaps %s)") }},
		{"G hedge: X — possibly D", false, func(c jvCase) []string { return jvPairs(c, "%s — possibly %s") }},
		{"G hedge: X; alternatively D", false, func(c jvCase) []string { return jvPairs(c, "%s; alternatively %s") }},
		{"G hedge: X and D", false, func(c jvCase) []string { return jvPairs(c, "%s and %s") }},
		{"G hedge: X D", false, func(c jvCase) []string { return jvPairs(c, "%s %s") }},
		{"G hedge: D X", false, func(c jvCase) []string { return jvPairsRev(c, "%s %s") }},
		{"G hedge: X - D", false, func(c jvCase) []string { return jvPairs(c, "%s - %s") }},
		{"G hedge: X; D", false, func(c jvCase) []string { return jvPairs(c, "%s; %s") }},
		{"G hedge: X & D", false, func(c jvCase) []string { return jvPairs(c, "%s & %s") }},
		{"G hedge: X + D", false, func(c jvCase) []string { return jvPairs(c, "%s + %s") }},
		{"G hedge: X | D", false, func(c jvCase) []string { return jvPairs(c, "%s | %s") }},
		{"G hedge: X → D", false, func(c jvCase) []string { return jvPairs(c, "%s → %s") }},
		{"G hedge: X? D?", false, func(c jvCase) []string { return jvPairs(c, "%s? %s?") }},
		{"G hedge: X vs. D", false, func(c jvCase) []string { return jvPairs(c, "%s vs. %s") }},
		{"G hedge: X, not D", false, func(c jvCase) []string { return jvPairs(c, "%s, not %s") }},
		{"G stuffed: X + every distractor word", false, func(c jvCase) []string {
			seen := map[string]bool{}
			for _, w := range skill.Words(c.a) {
				seen[w.Text] = true
			}
			out := c.a
			for _, d := range jvOthers(c) {
				for _, w := range skill.Words(d) {
					if !seen[w.Text] && len(out)+1+len(w.Text) <= skill.MaxAnswerBytes {
						seen[w.Text] = true
						out += " " + w.Text
					}
				}
			}
			if out == c.a {
				return nil
			}
			return []string{out}
		}},
		{"G .N for an integer target N (means 0.N)", false, func(c jvCase) []string {
			if !c.num || strings.Contains(c.a, ".") {
				return nil
			}
			return jvOne("." + c.a)
		}},
		{"G empty", false, func(c jvCase) []string { return []string{"", " ", "\t\n", "\u200b", "\u200f", "\u3000"} }},
		{"G homoglyph D beside X", false, func(c jvCase) []string { return jvPairsMap(c, "%s %s", jvHomoglyph) }},
		{"G homoglyph 'or' X or D", false, func(c jvCase) []string { return jvPairs(c, "%s оr %s") }},
		{"G zero-width in D beside X", false, func(c jvCase) []string {
			return jvPairsMap(c, "%s %s", func(s string) string { return jvInsert(s, "\u200b") })
		}},
		{"G ZWJ in D beside X", false, func(c jvCase) []string {
			return jvPairsMap(c, "%s %s", func(s string) string { return jvInsert(s, "\u200d") })
		}},
		{"G soft hyphen in D beside X", false, func(c jvCase) []string {
			return jvPairsMap(c, "%s %s", func(s string) string { return jvInsert(s, "\u00ad") })
		}},
		{"G combining marks on D beside X", false, func(c jvCase) []string {
			return jvPairsMap(c, "%s %s", func(s string) string { return jvInsert(s+"x", "\u0301")[:len(jvInsert(s+"x", "\u0301"))-1] })
		}},
		{"G RTL override D beside X", false, func(c jvCase) []string {
			return jvPairsMap(c, "%s %s", func(s string) string { return "\u202e" + reverse(s) + "\u202c" })
		}},
		{"G RLM between X and D", false, func(c jvCase) []string { return jvPairs(c, "%s\u200f%s") }},
		{"G full-width D beside X", false, func(c jvCase) []string { return jvPairsMap(c, "%s %s", jvFullWidth) }},
		{"G full-width D in tail", false, func(c jvCase) []string { return jvPairsMap(c, "%s — %s", jvFullWidth) }},
		{"G homoglyph D in tail", false, func(c jvCase) []string { return jvPairsMap(c, "%s — %s", jvHomoglyph) }},
		{"G ZW in D in tail", false, func(c jvCase) []string {
			return jvPairsMap(c, "%s — %s", func(s string) string { return jvInsert(s, "\u200b") })
		}},
		{"G homoglyph of X alone (wrong chars)", false, func(c jvCase) []string {
			h := jvHomoglyph(c.a)
			if h == c.a {
				return nil
			}
			return jvOne(h)
		}},
		{"G D wrapped in X's words", false, func(c jvCase) []string { return jvPairs(c, "%s, i.e. %s") }},
	}
}

func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

func jvCut(s string) string {
	for len(s) > skill.MaxAnswerBytes {
		i := strings.LastIndexByte(s[:skill.MaxAnswerBytes], ' ')
		if i <= 0 {
			return ""
		}
		s = s[:i]
	}
	return s
}

func jvPairsMap(c jvCase, f string, m func(string) string) []string {
	var out []string
	for _, d := range jvOthers(c) {
		if s := fmt.Sprintf(f, c.a, m(d)); len(s) <= skill.MaxAnswerBytes {
			out = append(out, s)
		}
	}
	return out
}

func jvPairs(c jvCase, f string) []string {
	return jvPairsMap(c, f, func(s string) string { return s })
}

func jvPairsRev(c jvCase, f string) []string {
	var out []string
	for _, d := range jvOthers(c) {
		if s := fmt.Sprintf(f, d, c.a); len(s) <= skill.MaxAnswerBytes {
			out = append(out, s)
		}
	}
	return out
}

func measureVariants(t *testing.T, label string, sets []*skill.Set) {
	vs := jvVariants()
	type score struct{ answers, accepted, questions, anyAccepted int }
	sc := make([]score, len(vs))
	verbose := os.Getenv("JUDGE_VARIANTS_VERBOSE") != ""
	logged := map[string]int{}
	for _, set := range sets {
		for k := range set.Parts {
			narr := narrativesUpTo(set, k)
			for j := range set.Parts[k].Questions {
				q := &set.Parts[k].Questions[j]
				c := jvCase{q: q, narr: narr, a: q.Answer, num: jvNumRe.MatchString(q.Answer)}
				for i, v := range vs {
					as := v.build(c)
					if len(as) == 0 {
						continue
					}
					sc[i].questions++
					anyOK := false
					for _, a := range as {
						sc[i].answers++
						ok, rule := skill.JudgeRule(q, a, narr)
						if ok {
							sc[i].accepted++
							anyOK = true
						}
						if verbose && ok != v.legit && logged[v.name] < 6 {
							logged[v.name]++
							t.Logf("[%s] %s: q=%q canonical=%q answer=%q accepted=%v rule=%s variants=%q distractors=%q", label, v.name, q.Question, q.Answer, a, ok, rule, q.Variants(), q.Distractors)
						}
					}
					if anyOK {
						sc[i].anyAccepted++
					}
				}
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n### %s\n\n| variant | side | answers accepted | questions with one accepted |\n|---|---|---|---|\n", label)
	idx := make([]int, len(vs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return vs[idx[a]].legit && !vs[idx[b]].legit })
	for _, i := range idx {
		v := vs[i]
		side := "agent (accept)"
		if !v.legit {
			side = "script (refuse)"
		}
		if sc[i].answers == 0 {
			fmt.Fprintf(&b, "| %s | %s | n/a | n/a |\n", jvEsc(v.name), side)
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %d/%d (%.1f%%) | %d/%d |\n", jvEsc(v.name), side, sc[i].accepted, sc[i].answers, 100*float64(sc[i].accepted)/float64(sc[i].answers), sc[i].anyAccepted, sc[i].questions)
	}
	t.Log(b.String())
	if out := os.Getenv("JUDGE_VARIANTS_OUT"); out != "" {
		f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			f.WriteString(b.String())
			f.Close()
		}
	}
}

func jvEsc(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
