package secondmatch2

import (
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/acaptcha/acaptcha/skill"
)

const corpusDir = "/work/shared/llm-corpus"

// item is one question with the narratives shown up to its part.
type item struct {
	src  string
	q    skill.Question
	narr []string
}

func corpusItems(t *testing.T) []item {
	var files []string
	for _, g := range []string{"sets/*.json", "hybrid/*-hybrid.json", "hybrid/*-hybrid-q.json"} {
		m, _ := filepath.Glob(filepath.Join(corpusDir, g))
		files = append(files, m...)
	}
	var out []item
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Parts []struct {
				Narrative string           `json:"narrative"`
				Questions []skill.Question `json:"questions"`
			} `json:"parts"`
		}
		if err := json.Unmarshal(data, &s); err != nil {
			t.Logf("%s: %v", f, err)
			continue
		}
		var narr []string
		for _, p := range s.Parts {
			narr = append(narr, p.Narrative)
			for _, q := range p.Questions {
				out = append(out, item{filepath.Base(f), q, append([]string{}, narr...)})
			}
		}
	}
	return out
}

func vectorItems(t *testing.T) []item {
	var out []item
	seen := map[string]bool{}
	for _, c := range loadVectors(t) {
		k := fmt.Sprint(c.Question, c.Narratives)
		if seen[k] {
			continue
		}
		seen[k] = true
		q := skill.Question{Question: c.Question.Question, Answer: c.Question.Answer, Answers: c.Question.Answers,
			Distractors: c.Question.Distractors, ReasoningType: skill.MultiHop, AnswerType: skill.LabelAnswer}
		out = append(out, item{"vectors:" + c.Name, q, c.Narratives})
	}
	return out
}

func toQS(q *skill.Question) *Q {
	return &Q{Question: q.Question, Answer: q.Answer, Answers: q.Answers, Distractors: q.Distractors}
}

var spelledOf = func() map[int]string {
	m := map[int]string{}
	for k, v := range spelled {
		m[v] = k
	}
	return m
}()

var seps = []string{" — ", "—", " - ", " -- ", " – ", " (", "; ", ". ", ", because ", ", as ", ", according to ", ", which ", "\n", "\r", "\r\n", "\n\n",
	" ", ", ", " or ", " and ", "-", " to ", "-to-", "/", "\u2010", "\u2011", "\u2212", " \u2212 ", "\u00a0—\u00a0", "\u3000",
	"\u2028", "\u0085", "\t", ". \n", "!\n", "\n—", " \n ",
	": ", " because ", " -> ", " thousand ", " hundred "} // 1.5.19

// candidates returns the strings an answer is built from for a question.
func candidates(q *skill.Question) []string {
	set := map[string]bool{}
	add := func(s string) {
		if s != "" {
			set[s] = true
		}
	}
	add(q.Answer)
	for _, v := range q.Answers {
		add(v)
	}
	for _, d := range q.Distractors {
		add(d)
	}
	c := newCtx(toQS(q), nil)
	nums := []string{}
	if c.hasTarget {
		nums = append(nums, c.target.FloatString(0), c.target.RatString())
		for _, d := range q.Distractors {
			for _, w := range words(d, false) {
				if w.num {
					nums = append(nums, w.text)
				}
			}
		}
		one := big.NewRat(1, 1)
		nums = append(nums, new(big.Rat).Add(c.target, one).RatString())
	}
	for _, n := range nums {
		add(n)
		v, ok := new(big.Rat).SetString(strings.ReplaceAll(n, ",", ""))
		if ok && v.IsInt() && v.Sign() >= 0 && v.Num().Int64() < 100 {
			sp := spelledOf[int(v.Num().Int64())]
			add(sp)
			add(sp + "-fold")
			add(strings.ToUpper(sp[:1]) + sp[1:])
			add(strings.Replace(sp, "-", " ", 1)) // 1.5.21 compound tens
		}
		add(n + "-fold")
		// 1.5.19 number phrases and decimal commas
		add(n + "k")
		add(n + " thousand")
		add(strings.Replace(n, ".", ",", 1))
		if v, ok := new(big.Rat).SetString(strings.ReplaceAll(n, ",", "")); ok && v.IsInt() && v.Sign() > 0 {
			if k := new(big.Rat).Quo(v, big.NewRat(1000, 1)); k.IsInt() {
				add(k.RatString() + "k")
				add(k.RatString() + " thousand")
			}
			if i := v.Num().Int64(); v.Num().IsInt64() && i >= 100 && i < 10000 && i%100 < 100 {
				h, r := i/100, i%100
				if hs, ok := spelledOf[int(h)]; ok {
					add(hs + " hundred")
					if rs, ok := spelledOf[int(r)]; ok && r > 0 {
						add(hs + " hundred " + rs)
						add(hs + " hundred and " + rs)
					}
				}
			}
		}
		// 1.5.27 spelled decimals: "seven point six", and its parts
		if sd, ok := spelledDecimalOf(n); ok {
			add(sd)
			add(strings.Replace(sd, " point ", ", point ", 1))
			add(strings.Replace(sd, " point ", " point-", 1))
			// 1.5.29: a fold word's or hyphenated word's number is no
			// digit of it; every spelled digit that follows is
			add(sd + "fold")
			add(sd + "-fold")
			add(sd + " fold")
			add(sd + " zero")
		}
		add(n + "-km")
		add(n + "x")
		add(n + " percent")
		add(n + ".0")
		add("-" + n)
		add("−" + n)
		// compound units of the question
		for _, w := range words(q.Question, false) {
			if strings.Contains(w.text, "/") && hasDigit(w.text) && !w.num {
				add(n + " " + w.text)
				add(n + w.text)
				add(n + "-" + w.text)
			}
		}
	}
	// 1.5.26: a candidate's digits written as subscripts (read as its
	// digits) and as superscripts (not read so)
	for _, s := range append([]string{q.Answer, firstOf(q.Distractors)}, nums...) {
		if hasDigit(s) {
			add(scriptDigits(s, '\u2080'))
			add(scriptDigits(s, '\u2070'))
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// spelledDecimalOf spells a number with a decimal part digit by digit
// after "point" (1.5.27): "7.6" is "seven point six".
func spelledDecimalOf(n string) (string, bool) {
	whole, frac, ok := strings.Cut(n, ".")
	if !ok || frac == "" {
		return "", false
	}
	v, err := strconv.Atoi(whole)
	sp, known := spelledOf[v]
	if err != nil || !known {
		return "", false
	}
	out := sp + " point"
	for _, r := range frac {
		if r < '0' || r > '9' {
			return "", false
		}
		out += " " + spelledOf[int(r-'0')]
	}
	return out, true
}

func firstOf(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return ss[0]
}

// scriptDigits writes s's ASCII digits from zero on: U+2080 (subscripts)
// or U+2070 (superscripts, whose 1, 2 and 3 are U+00B9, U+00B2, U+00B3).
func scriptDigits(s string, zero rune) string {
	return strings.Map(func(r rune) rune {
		if r < '0' || r > '9' {
			return r
		}
		if zero == '\u2070' {
			switch r {
			case '1':
				return '\u00b9'
			case '2':
				return '\u00b2'
			case '3':
				return '\u00b3'
			}
		}
		return zero + (r - '0')
	}, s)
}

func wrappers(a string) []string {
	// 1.5.36: a leading point (".7" for 0.7, ".3" beside 3).
	lead := "." + strings.TrimPrefix(a, "0.")
	return []string{a, lead, "about " + lead, "-" + lead, "the " + a, "Answer: " + a, a + " is the answer", "\n" + a, "\r\n" + a, a + "\n", a + "\r\n",
		strings.ToUpper(a), "The answer is approximately " + a, "It's " + a + ".", "**" + a + "**", "(" + a + ")",
		"\u00a0" + a, a + ".", "— " + a, "about " + a, "a total of " + a, "exactly " + a,
		// 1.5.19
		"So the answer is " + a + ".", "I think it's " + a, "1. " + a, "Result: " + a, "The value is " + a,
		"Most likely " + a, "\\boxed{" + a + "}", "<answer>" + a + "</answer>", a + " Ltd", a + " deep", "Therefore, " + a,
		// 1.5.22
		a + "'s", "the " + a + "’s", "That's " + a,
		// 1.5.27 pronouns and "as"
		"It is classed as " + a + ".", "It had " + a + " recorded as its type.", a + " explained it.", "They differ by " + a + ".",
		"as " + a, a + " as", "it " + a, a + " them",
		// 1.5.29: pronouns before a number meet the number-label guard
		"these " + a, "They " + a,
		// 1.5.33: attributions, opinions, frames, likelihoods, tail frames
		"The correct answer is " + a + ".", "I'd go with " + a, "Definitely " + a, "It should be " + a + ".",
		"According to the narrative, " + a, "Based on the email thread: " + a, "Per the report, the answer is " + a,
		"According to the report " + a, a + " is my answer.", a + " is the correct answer",
		// 1.5.35: hedging words opening a tail, and later in it
		a + ", maybe not", a + " (perhaps)", a + " — possibly the other", a + " — it fits, maybe"}
}

func answersFor(q *skill.Question) []string {
	cs := candidates(q)
	if len(cs) > 24 {
		cs = cs[:24]
	}
	core := map[string]bool{q.Answer: true}
	for i, d := range q.Distractors {
		if i < 2 {
			core[d] = true
		}
	}
	set := map[string]bool{}
	for _, x := range cs {
		for _, w := range wrappers(x) {
			set[w] = true
		}
		for _, y := range cs {
			ss := seps
			if !core[x] && !core[y] {
				ss = seps[:16]
			}
			for _, s := range ss {
				set[x+s+y] = true
			}
		}
	}
	for x := range core {
		for _, s := range []string{" — because it is ", "\n\nExplanation: ", "\nthe narrative says ", "'s ", " (it's ", ", maybe ", " (perhaps "} {
			for _, y := range cs {
				set[x+s+y] = true
			}
		}
		// 1.5.34: a tail with another candidate disguised (fullwidth,
		// zero-width spaces, a combining mark after each letter).
		for _, y := range cs {
			for _, d := range []string{fullwidth(y), strings.Join(strings.Split(y, ""), "\u200b"), strings.Join(strings.Split(y, ""), "\u0301")} {
				set[x+" — "+d] = true
				set[x+" ("+d+")"] = true
			}
		}
		for _, y := range cs {
			for _, f := range []string{"\n%s\n%s", "\r\n%s\r\n%s", "Answer:\n%s\n%s", "%s —\n%s", "%s-%s-fold", "%s—%s\n"} {
				set[fmt.Sprintf(f, x, y)] = true
				set[fmt.Sprintf(f, y, x)] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		if len(s) <= 64 {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// TestDifferential compares the second matcher with skill.JudgeRule on
// many generated answers per question.
func TestDifferential(t *testing.T) {
	items := vectorItems(t)
	if os.Getenv("SECONDMATCH2_CORPUS") == "" {
		t.Log("vectors' questions only (SECONDMATCH2_CORPUS=1 adds the LLM corpus)")
	} else if _, err := os.Stat(corpusDir); err != nil {
		t.Skip("LLM corpus absent")
	} else {
		items = append(items, corpusItems(t)...)
	}
	stride := 1
	if os.Getenv("SECONDMATCH2_CORPUS") == "" {
		stride = 7 // a sample, to keep go test ./... quick
	}
	n, bad, k := 0, 0, 0
	byKind := map[string]int{}
	for _, it := range items {
		q := it.q
		c := newCtx(toQS(&q), it.narr)
		for _, a := range append(answersFor(&q), narrativeForms(&q, it.narr)...) {
			if k++; k%stride != 0 {
				continue
			}
			n++
			g, gr := skill.JudgeRule(&q, a, it.narr)
			m, mr := c.judge(a)
			if g != m || (g && gr != mr) {
				bad++
				kind := fmt.Sprintf("go=%v/%s second=%v/%s", g, gr, m, mr)
				byKind[kind]++
				if byKind[kind] <= 15 || os.Getenv("DIFF_ALL") != "" {
					t.Errorf("%s: q=%q answer=%q variants=%q distractors=%q: %s", it.src, q.Question, a, q.Variants(), q.Distractors, kind)
				}
			}
		}
	}
	t.Logf("%d questions, %d answers compared, %d disagreements %v", len(items), n, bad, byKind)
}

// narrativeForms returns answers built from the narratives around the
// question's candidates (1.5.28): every candidate that holds a digit with
// one or two lower-case words of a narrative sentence that holds it before
// it (M6: "the fragment CLV-5649"), or after it; and the narrative's
// clause runs around a candidate with the question's words and pronouns
// around them (M5: "mycoplasma in the working stock explained it").
func narrativeForms(q *skill.Question, narr []string) []string {
	cands := append(append([]string{q.Answer}, q.Answers...), firstOf(q.Distractors))
	var qw []string
	for _, w := range strings.Fields(strings.ToLower(q.Question)) {
		w = strings.Trim(w, "?,.;:")
		if w != "" && !functionWords[w] && strings.ToLower(w) == w && !hasDigit(w) && len(qw) < 2 {
			qw = append(qw, w)
			// 1.5.29: M5's second window drops a question word's form
			// less 's too
			if b, ok := strings.CutSuffix(w, "'s"); ok && b != "" {
				qw = append(qw, b)
			}
		}
	}
	set := map[string]bool{}
	for _, x := range cands {
		if x == "" {
			continue
		}
		lx := strings.ToLower(x)
		for _, n := range narr {
			for _, sent := range strings.FieldsFunc(n, func(r rune) bool { return r == '.' || r == '?' || r == '!' || r == '\n' }) {
				ls := strings.ToLower(sent)
				at := strings.Index(ls, lx)
				if at < 0 {
					continue
				}
				var lower []string
				for _, w := range strings.FieldsFunc(sent, func(r rune) bool { return r == ' ' || r == ',' || r == ';' || r == ':' || r == '(' || r == ')' }) {
					if strings.ToLower(w) == w && !hasDigit(w) && len(lower) < 8 {
						lower = append(lower, w)
					}
				}
				if hasDigit(x) {
					for i, a := range lower {
						set[a+" "+x] = true
						set["the "+a+" "+x] = true
						set[x+" "+a] = true
						if i+1 < len(lower) {
							set[a+" "+lower[i+1]+" "+x] = true
							set[lower[i+1]+" "+a+" "+x] = true
						}
					}
				}
				// the clause around the candidate, as written
				lo, hi := at, at+len(lx)
				for lo > 0 && !strings.ContainsRune(",;:()", rune(sent[lo-1])) && at-lo < 24 {
					lo--
				}
				for hi < len(sent) && !strings.ContainsRune(",;:()", rune(sent[hi])) && hi-at-len(lx) < 24 {
					hi++
				}
				if !utf8.ValidString(sent[lo:hi]) {
					continue
				}
				run := strings.TrimSpace(sent[lo:hi])
				for _, r := range []string{run, strings.TrimSpace(sent[at:hi]), strings.TrimSpace(sent[lo : at+len(lx)])} {
					set[r+" explained it."] = true
					set["It was explained by "+r+"."] = true
					set["they "+r] = true
					for _, w := range qw {
						set[w+" "+r] = true
						set[r+" "+w+" it"] = true
					}
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for a := range set {
		if len(a) <= 64 {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out
}

// fullwidth writes ASCII letters and digits in their fullwidth forms.
func fullwidth(s string) string {
	return strings.Map(func(r rune) rune {
		if r > ' ' && r < 0x7f {
			return r - '!' + '！'
		}
		return r
	}, s)
}
