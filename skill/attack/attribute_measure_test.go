package attack

import (
	"regexp"
	"strings"

	"github.com/acaptcha/acaptcha/skill"
)

// attributeValue is a script against the filter: the attribute questions
// a procedural skeleton asks and a rewording keeps ("Which desk owner was
// logged for the indicator that ...?") are answered with the value the
// text gives that attribute most often ("with credit as its desk owner",
// "whose readout was logged as luminescent", "the mechanism entry for X
// reads competitive", "Desk owner field for X: credit"), the first in the
// text on a tie, whichever candidate the question singles out. Measured
// by TestMeasureJudgeShapes: hybrids 1 of 11 kept questions (round 1
// 0 %), hybrid-q 2 of 14 (round 1 0 %), LLM sets 0 of 51.
func attributeValue() Named {
	return Named{
		Name:        "attribute-value",
		Description: "answers an attribute question with the value the text gives that attribute most often, the first on a tie",
		Prover:      &wbProver{name: "attribute-value", solve: solveAttribute},
	}
}

var (
	avQuestion = []*regexp.Regexp{
		regexp.MustCompile(`(?i)\b(?:which|what)\s+((?:[a-z0-9-]+\s+){0,3}?[a-z0-9-]+)\s+(?:was|were|is|belongs|recorded|logged)\b`),
		regexp.MustCompile(`(?i)\bhad\s+which\s+((?:[a-z0-9-]+\s+){0,3}?[a-z0-9-]+)\s+(?:recorded|logged)\b`),
	}
	avValue = `([\p{L}\p{N}][\p{L}\p{N}/.%+-]*(?:\s+[\p{L}\p{N}][\p{L}\p{N}/.%+-]*){0,2}?)`
)

// avPatterns returns the phrasings that give attr a value, in the order
// they are tried; each has one group, the value.
func avPatterns(attr string) []*regexp.Regexp {
	a := strings.ReplaceAll(regexp.QuoteMeta(attr), `\ `, `\s+`)
	a = strings.ReplaceAll(a, " ", `\s+`)
	end := `(?:[,.;:)]|\s+(?:and|which|while|with|for|on|in|at|after|came|recorded|registered|logged|showed|was)\b|$)`
	forms := []string{
		`with\s+` + avValue + `\s+(?:logged\s+|recorded\s+)?as\s+its\s+` + a + `\b`,
		`whose\s+` + a + `\s+(?:was\s+)?(?:logged|recorded)\s+as\s+` + avValue + end,
		a + `\s+(?:entry|field)\s+for\s+[^:\n]*?(?:\s+reads\s+|:\s*)` + avValue + end,
		a + `\s+(?:was\s+)?(?:logged|recorded)\s+as\s+` + avValue + end,
		`(?:logged|recorded)\s+` + a + `\s+(?:was|is)\s+` + avValue + end,
		a + `\s+column\s+shows\s+` + avValue + end,
		`shows\s+` + avValue + `\s+in\s+the\s+` + a + `\s+column`,
		`had\s+` + avValue + `\s+(?:recorded|logged)\s+as\s+its\s+` + a + `\b`,
		avValue + `\s+was\s+(?:also\s+)?(?:logged|recorded)\s+as\s+(?:the|its)\s+` + a + `\b`,
		a + `\s+of\s+` + avValue + end,
		a + `\s*:\s*` + avValue + end,
	}
	out := make([]*regexp.Regexp, len(forms))
	for i, f := range forms {
		out[i] = regexp.MustCompile(`(?i)` + f)
	}
	return out
}

func solveAttribute(s *wbSession, part int, c *skill.Challenge) string {
	attr := ""
	for _, re := range avQuestion {
		if m := re.FindStringSubmatch(c.Question); m != nil {
			attr = strings.ToLower(strings.Join(strings.Fields(m[1]), " "))
			break
		}
	}
	if attr == "" {
		return fallback
	}
	text := s.narratives[part]
	type val struct {
		text  string
		n     int
		first int
	}
	vals := map[string]*val{}
	for _, re := range avPatterns(attr) {
		for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
			v := strings.TrimSpace(text[m[2]:m[3]])
			v = strings.TrimPrefix(strings.TrimPrefix(v, "the "), "The ")
			v = strings.TrimRight(v, ".")
			if v == "" || len(v) > 40 {
				continue
			}
			k := strings.ToLower(v)
			if x := vals[k]; x != nil {
				x.n++
				x.first = min(x.first, m[2])
				continue
			}
			vals[k] = &val{text: v, n: 1, first: m[2]}
		}
	}
	var best *val
	for _, v := range vals {
		if best == nil || v.n > best.n || v.n == best.n && v.first < best.first {
			best = v
		}
	}
	if best == nil {
		return fallback
	}
	return best.text
}
