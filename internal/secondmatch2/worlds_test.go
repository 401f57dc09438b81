package secondmatch2

import (
	"math/big"
	"os"
	"strings"
	"testing"
	"unicode"

	"github.com/acaptcha/acaptcha/skill"
)

// otherWorlds returns the question as it would stand if another of its
// candidates were right: each non-ignored distractor made the answer,
// the accepted variants and the other distractors its distractors; for a
// numeric target without distractors, the target plus and minus one.
func otherWorlds(q *skill.Question) []skill.Question {
	var out []skill.Question
	c := newCtx(toQS(q), nil)
	for i, d := range q.Distractors {
		if w := words(d, false); len(w) == 0 || allFn(w) {
			continue
		}
		b := *q
		b.Answer, b.Answers = d, []string{d}
		b.Distractors = append([]string{}, q.Variants()...)
		b.Distractors = append(b.Distractors, q.Distractors[:i]...)
		b.Distractors = append(b.Distractors, q.Distractors[i+1:]...)
		out = append(out, b)
	}
	if c.hasTarget && len(c.dists) == 0 && len(words(q.Answer, false)) == 1 {
		for _, delta := range []int64{1, -1} {
			b := *q
			b.Answer = new(big.Rat).Add(c.target, big.NewRat(delta, 1)).RatString()
			b.Answers = nil
			out = append(out, b)
		}
	}
	return out
}

// TestOneAnswerOneWorld: no generated answer is accepted by skill.Judge in
// two worlds that differ only in which candidate is right.
func TestOneAnswerOneWorld(t *testing.T) {
	items := vectorItems(t)
	if os.Getenv("SECONDMATCH2_CORPUS") != "" {
		if _, err := os.Stat(corpusDir); err != nil {
			t.Skip("LLM corpus absent")
		}
		items = append(items, corpusItems(t)...)
	}
	stride := 1
	if os.Getenv("SECONDMATCH2_CORPUS") == "" {
		stride = 5 // a sample, to keep go test ./... quick
	}
	n, acc, bad, k := 0, 0, 0, 0
	for _, it := range items {
		q := it.q
		worlds := otherWorlds(&q)
		if len(worlds) == 0 {
			continue
		}
		for _, a := range answersFor(&q) {
			if k++; k%stride != 0 {
				continue
			}
			n++
			if !skill.Judge(&q, a, it.narr) {
				continue
			}
			acc++
			for _, b := range worlds {
				if skill.Judge(&b, a, it.narr) {
					bad++
					if bad <= 40 {
						t.Errorf("%s: %q accepted for %q and for %q (q=%q)", it.src, a, q.Answer, b.Answer, q.Question)
					}
				}
			}
		}
	}
	t.Logf("%d answers, %d accepted in their world, %d accepted in another world too", n, acc, bad)
}

// codeWorlds returns, for a question without distractors or a numeric
// target (where M6 applies, 1.5.28), the questions as they would stand
// if another candidate that holds a code were right: every word of the
// narratives that holds a digit and a letter and is no word of the
// question's variants ("CLV-4569"), and every word that holds a digit
// (a number too) with the one or two words a narrative writes directly
// before it in the same clause ("parental clone 17" beside the variant
// "clone 17"):
// the worlds a white-box script would try against M6.
func codeWorlds(q *skill.Question, narr []string) []skill.Question {
	c := newCtx(toQS(q), narr)
	if c.hasTarget || len(c.dists) > 0 {
		return nil
	}
	seen := map[string]bool{normS(q.Answer): true}
	for _, v := range q.Variants() {
		seen[normS(v)] = true
	}
	var out []skill.Question
	add := func(a string) {
		if a == "" || seen[a] {
			return
		}
		seen[a] = true
		b := *q
		b.Answer, b.Answers = a, []string{a}
		out = append(out, b)
	}
	for ni, nn := range c.nnorm {
		nw := c.nwords[ni]
		for i, w := range nw {
			if !hasDigit(w.text) {
				continue
			}
			if !w.num && strings.IndexFunc(w.text, unicode.IsLetter) >= 0 && !c.isVarWord(w) {
				add(w.text)
			}
			phrase := w.text
			for k := i - 1; k >= 0 && k >= i-2; k-- {
				if clauseMark(nn, nw[k], nw[k+1]) {
					break
				}
				phrase = nw[k].text + " " + phrase
				add(phrase)
			}
		}
	}
	if len(out) > 40 {
		out = out[:40]
	}
	return out
}

// TestDescribedOneWorld: no answer that M6 accepts, in the question's own
// world or in another world a code of the narratives makes (codeWorlds),
// is accepted by skill.Judge in two of them. The answers are the
// generated ones and the narrative forms (a code with the narrative's
// lower-case words around it). M5's acceptance of the narrative's own run
// ("the parental clone 17" for the variant "clone 17") is not M6's and is
// not counted.
func TestDescribedOneWorld(t *testing.T) {
	items := vectorItems(t)
	if os.Getenv("SECONDMATCH2_CORPUS") != "" {
		if _, err := os.Stat(corpusDir); err != nil {
			t.Skip("LLM corpus absent")
		}
		items = append(items, corpusItems(t)...)
	}
	n, m6, bad := 0, 0, 0
	for _, it := range items {
		q := it.q
		worlds := codeWorlds(&q, it.narr)
		if len(worlds) == 0 {
			continue
		}
		all := append([]skill.Question{q}, worlds...)
		for _, a := range append(answersFor(&q), narrativeForms(&q, it.narr)...) {
			n++
			var in []string
			described := false
			for i := range all {
				if ok, rule := skill.JudgeRule(&all[i], a, it.narr); ok {
					in = append(in, all[i].Answer)
					described = described || rule == skill.RuleDescribed
				}
			}
			if !described {
				continue
			}
			m6++
			if len(in) > 1 {
				bad++
				if bad <= 40 {
					t.Errorf("%s: %q accepted for %q (M6 in one of them; q=%q)", it.src, a, in, q.Question)
				}
			}
		}
	}
	t.Logf("%d answers, %d accepted by M6 in some world, %d of them in two worlds", n, m6, bad)
	if n > 0 && m6 == 0 {
		t.Error("no answer accepted by M6: the worlds test nothing")
	}
}
