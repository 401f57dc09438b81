package attack_test

import (
	"os"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/attack"
)

// agentWrappers are the ways an LLM agent dresses an answer (%s): markdown,
// quotes, brackets, list marks, frames, explanations after a comma, dash,
// bracket or line break.
var agentWrappers = []string{
	"**%s**", "Answer: **%s**", "**Answer:** %s", "**Answer**: %s", "%s.", "\"%s\"", "“%s”", "'%s'", "(%s)", "`%s`",
	"The answer is **%s**.", "Final answer: %s", "**Final answer:** %s.", "%s\n", "> %s", "- %s", "* %s", "Answer: `%s`",
	"%s — the narrative says so.", "**%s** — as stated in the report.", "%s (as stated in part 2)", "%s.\n\nReasoning: the record shows it.",
	"The answer: %s", "ANSWER: %s", "%s is the answer.", "It is %s.", "%s!", "[%s]", "_%s_", "*%s*", "__%s__",
	"%s, per the report.", "%s, according to the report.", "%s, based on the record.", "%s, which the report confirms.",
	"%s, given the timing.", "%s, as the report says.", "%s, since it persisted.",
}

// agentNumberWrappers apply to a numeric canonical answer only.
var agentNumberWrappers = []string{"approximately %s", "~%s", "≈ %s", "about %s", "%s (approx.)", "roughly %s",
	"Approximately **%s**", "around %s", "circa %s", "+%s", "%s exactly", "exactly %s", "%s in total", "a total of %s"}

// TestMeasureAgentWrappers (AGENT_WRAPPERS_MEASURE=1; skipped without the
// LLM corpus) runs the offline validator on the LLM sample sets and hybrid
// rewordings, as acaptcha eval does, and on every kept question wraps
// each accepted variant in each agent wrapper, and each variant with its
// "-" written as U+2011 (a model's non-breaking hyphen): how many are
// accepted per wrapper (an agent's right answer must be). Then, as the
// script's side, each wrapper around another kept question's canonical
// answer of the same part (a wrong candidate): how many are accepted,
// against how many of those wrong answers are accepted bare (a wrapper
// must add none). Measured at verification.md 1.5.17: LLM sets, every
// wrapper accepted on every variant (before 1.5.17 "X exactly",
// "exactly X" 8/75 and "X in total", "a total of X" 4/75: only where a
// narrative wrote the word in lower case); U+2011 12/12 (2/12 before
// 1.5.15); the comma wrappers but ", as" and ", since" 0/120 before
// 1.5.16 (", per" 20/120);
// 46 wrong candidates, none accepted bare or wrapped. Hybrids likewise
// (the four numeric wrappers 0/12 before 1.5.17, 12/12 after; U+2011
// 4/4; 10 wrong candidates).
func TestMeasureAgentWrappers(t *testing.T) {
	if os.Getenv("AGENT_WRAPPERS_MEASURE") == "" {
		t.Skip("set AGENT_WRAPPERS_MEASURE=1 to measure")
	}
	forKeptCorpusSets(t, func(pat string, _ skill.SourceKind, kept []*skill.Set) {
		measureWrappers(t, pat, kept)
	})
}

func measureWrappers(t *testing.T, label string, sets []*skill.Set) {
	tot, acc := map[string]int{}, map[string]int{}
	wrongN, wrongBare, wrongWrapped := 0, 0, 0
	nbTot, nbAcc := 0, 0
	for _, set := range sets {
		for k, part := range set.Parts {
			narr := attack.NarrativesUpTo(set, k)
			for j := range part.Questions {
				q := &part.Questions[j]
				forms := agentWrappers
				if ws := skill.Words(q.Answer); len(ws) == 1 && ws[0].Number != nil {
					forms = append(append([]string{}, forms...), agentNumberWrappers...)
				}
				for _, v := range q.Variants() {
					for _, f := range forms {
						a := strings.Replace(f, "%s", v, 1)
						if len(a) > skill.MaxAnswerBytes {
							continue
						}
						tot[f]++
						if skill.Judge(q, a, narr) {
							acc[f]++
						} else if os.Getenv("AGENT_WRAPPERS_VERBOSE") != "" {
							t.Logf("%s refused %q for %q", label, a, q.Variants())
						}
					}
					if strings.Contains(v, "-") {
						nbTot++
						if skill.Judge(q, strings.ReplaceAll(v, "-", "\u2011"), narr) {
							nbAcc++
						}
					}
				}
				for i := range part.Questions {
					wrong := part.Questions[i].Answer
					if i == j || skill.Judge(q, wrong, narr) && skill.Judge(&part.Questions[i], q.Answer, narr) {
						continue // the same candidate
					}
					wrongN++
					if skill.Judge(q, wrong, narr) {
						wrongBare++
					}
					for _, f := range forms {
						if a := strings.Replace(f, "%s", wrong, 1); len(a) <= skill.MaxAnswerBytes && skill.Judge(q, a, narr) {
							wrongWrapped++
							t.Logf("%s WRONG accepted %q for %q", label, a, q.Variants())
						}
					}
				}
			}
		}
	}
	for _, f := range append(append([]string{}, agentWrappers...), agentNumberWrappers...) {
		if tot[f] > 0 {
			t.Logf("%s wrapper %-40q %d/%d", label, f, acc[f], tot[f])
		}
	}
	t.Logf("%s variants with U+2011 for '-': %d/%d; %d wrong candidates: accepted bare %d, wrapped %d", label, nbAcc, nbTot, wrongN, wrongBare, wrongWrapped)
}
