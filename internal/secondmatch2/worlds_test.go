package secondmatch2

import (
	"math/big"
	"os"
	"testing"

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
