package attack

import (
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

// TestJudgeLeadingPointProcedural: on procedural sets (our fixtures) a
// target below 1 written with a leading point (".7" for 0.7, "about .35")
// is accepted, and an integer target N answered ".N" (which means 0.N) is
// refused (verification.md 1.5.36: ".7" was the word 7).
func TestJudgeLeadingPointProcedural(t *testing.T) {
	small, ints := 0, 0
	for _, set := range procSets(t, 30, 20261129) {
		for k := range set.Parts {
			narr := narrativesUpTo(set, k)
			for j := range set.Parts[k].Questions {
				q := &set.Parts[k].Questions[j]
				if !jvNumRe.MatchString(q.Answer) {
					continue
				}
				if rest, ok := strings.CutPrefix(q.Answer, "0."); ok {
					small++
					for _, a := range []string{"." + rest, "about ." + rest, "(." + rest + ")"} {
						if !skill.Judge(q, a, narr) {
							t.Errorf("%q refused for %q", a, q.Answer)
						}
					}
				}
				if !strings.Contains(q.Answer, ".") {
					ints++
					if a := "." + q.Answer; skill.Judge(q, a, narr) {
						t.Errorf("%q accepted for %q", a, q.Answer)
					}
				}
			}
		}
	}
	if small == 0 || ints < 20 {
		t.Fatalf("%d targets below 1, %d integer targets", small, ints)
	}
}
