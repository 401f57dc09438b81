package secondmatch2

import (
	"encoding/json"
	"os"
	"testing"
)

type vcase struct {
	Name     string `json:"name"`
	Question struct {
		Question    string   `json:"question"`
		Answer      string   `json:"answer"`
		Answers     []string `json:"answers"`
		Distractors []string `json:"distractors"`
	} `json:"question"`
	Narratives []string `json:"narratives"`
	Answer     string   `json:"answer"`
	Correct    bool     `json:"correct"`
	Rule       string   `json:"rule"`
}

func loadVectors(t *testing.T) []vcase {
	data, err := os.ReadFile("../../spec/vectors/matching.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Cases []vcase `json:"cases"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v.Cases
}

func toQ(c vcase) *Q {
	return &Q{Question: c.Question.Question, Answer: c.Question.Answer, Answers: c.Question.Answers, Distractors: c.Question.Distractors}
}

// The second matcher decides every vector as listed, by the rule listed.
func TestVectors(t *testing.T) {
	for _, c := range loadVectors(t) {
		got, rule := Judge(toQ(c), c.Answer, c.Narratives)
		if got != c.Correct || rule != c.Rule {
			t.Errorf("%s: %q = %v by %s, want %v by %s", c.Name, c.Answer, got, rule, c.Correct, c.Rule)
		}
	}
}
