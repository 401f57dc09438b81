package testutil

import (
	"fmt"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

func oracleSet() *skill.Set {
	return &skill.Set{
		ID:     "s1",
		Domain: "astronomy",
		Parts: []skill.Part{
			{Narrative: "Observer Lena Park logged comet K7 near Vega on Tuesday.", Questions: []skill.Question{
				{Question: "Which comet did Lena Park log?", Answer: "K7", ReasoningType: skill.MultiHop},
				{Question: "Near which star?", Answer: "Vega", ReasoningType: skill.MultiHop},
			}},
			{Narrative: "On Friday the same comet had faded below the detection limit.", Questions: []skill.Question{
				{Question: "Who first logged the comet that faded?", Answer: "Lena Park", ReasoningType: skill.MultiHop, DependsOn: []int{1}},
			}},
			{Narrative: "A second observer, Tomas Reyes, confirmed the fading on Saturday.", Questions: []skill.Question{
				{Question: "Who confirmed the fading?", Answer: "Tomas Reyes", ReasoningType: skill.MultiHop},
				{Question: "Near which star was the comet, that Tomas Reyes saw fade, first logged?", Answer: "Vega", ReasoningType: skill.MultiHop, DependsOn: []int{1, 2}},
			}},
		},
	}
}

func TestOracleAnswer(t *testing.T) {
	s := oracleSet()
	o := NewOracle(nil, s)
	p := s.Parts
	cases := []struct {
		name                string
		narrative, question string
		history             []string
		want                string
	}{
		{"direct", p[0].Narrative, p[0].Questions[0].Question, nil, "K7"},
		{"second question", p[0].Narrative, p[0].Questions[1].Question, nil, "Vega"},
		{"whole prompt", "Round 1.\n<<<\n" + p[0].Narrative + "\n>>>\nQuestion: " + p[0].Questions[0].Question, "", nil, "K7"},
		{"reflowed white space", strings.ReplaceAll(p[0].Narrative, " ", "\n  "), "  Which comet  did Lena\tPark log? ", nil, "K7"},
		{"dependent with memory", p[1].Narrative, p[1].Questions[0].Question, []string{"x", "Round 1: " + p[0].Narrative}, "Lena Park"},
		{"dependent without memory", p[1].Narrative, p[1].Questions[0].Question, []string{"unrelated"}, Unknown},
		{"two deps, one missing", p[2].Narrative, p[2].Questions[1].Question, []string{p[0].Narrative}, Unknown},
		{"two deps present", p[2].Narrative, p[2].Questions[1].Question, []string{p[0].Narrative, p[1].Narrative}, "Vega"},
		{"dep in the same message", p[0].Narrative + "\n" + p[1].Narrative, p[1].Questions[0].Question, nil, "Lena Park"},
		{"question without its narrative", p[1].Narrative, p[0].Questions[0].Question, nil, Unknown},
		{"unknown question", p[0].Narrative, "What is the meaning of life?", nil, Unknown},
	}
	for _, c := range cases {
		q := c.question
		if q == "" {
			q = c.narrative
		}
		if got := o.Answer(c.narrative, q, c.history); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func TestOracleReplyUsesConversation(t *testing.T) {
	s := oracleSet()
	o := NewOracle(s)
	p := s.Parts
	ask := func(n int, q string) string { return fmt.Sprintf("Round %d\n%s\nQuestion: %s", n, p[n-1].Narrative, q) }
	req := BrainRequest{Messages: []Message{
		{"user", ask(1, p[0].Questions[0].Question)}, {"assistant", "K7"},
		{"user", ask(2, p[1].Questions[0].Question)},
	}}
	if r := o.Reply(req); r.Text != "Lena Park" || r.Delay != 0 || r.Status != 0 {
		t.Errorf("with memory: %+v", r)
	}
	req.Messages = req.Messages[2:]
	if r := o.Reply(req); r.Text != Unknown {
		t.Errorf("forgetful: %+v", r)
	}
	if r := o.Reply(BrainRequest{}); r.Text != Unknown {
		t.Errorf("empty: %+v", r)
	}
}

func TestOracleWrongAnswerNeverMatches(t *testing.T) {
	s := oracleSet()
	s.Parts[1].Questions[0].Answer = "unknown"
	o := NewOracle(s)
	got := o.Answer(s.Parts[1].Narrative, s.Parts[1].Questions[0].Question, nil)
	if skill.Match(got, "unknown") {
		t.Errorf("forgetful answer %q is correct", got)
	}
}
