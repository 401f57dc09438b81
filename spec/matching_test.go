package spec

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

// matchingVectors is the file format of vectors/matching.json.
type matchingVectors struct {
	Description string `json:"description"`
	Cases       []struct {
		Name       string         `json:"name"`
		Question   skill.Question `json:"question"`
		Narratives []string       `json:"narratives"`
		Answer     string         `json:"answer"`
		Correct    bool           `json:"correct"`
		Rule       string         `json:"rule"`
	} `json:"cases"`
}

// Every matching vector decides as the spec says, by the rule it names.
func TestMatchingVectors(t *testing.T) {
	data, err := os.ReadFile("vectors/matching.json")
	if err != nil {
		t.Fatal(err)
	}
	var v matchingVectors
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	if len(v.Cases) < 30 {
		t.Fatalf("%d cases, want at least 30", len(v.Cases))
	}
	rules := map[string]int{}
	for _, c := range v.Cases {
		q := c.Question
		if q.ReasoningType == "" || q.Answer == "" {
			t.Fatalf("%s: incomplete question", c.Name)
		}
		got, rule := skill.JudgeRule(&q, c.Answer, c.Narratives)
		if got != c.Correct || rule != c.Rule {
			t.Errorf("%s: Judge(%q) = %v by %s, want %v by %s", c.Name, c.Answer, got, rule, c.Correct, c.Rule)
		}
		rules[c.Rule]++
	}
	for _, r := range []string{skill.RuleTooLong, skill.RuleExact, skill.RuleNumeric, skill.RuleContains, skill.RuleWindow, skill.RuleDescribed, skill.RuleNone} {
		if rules[r] == 0 {
			t.Errorf("no vector decided by rule %s", r)
		}
	}
}
