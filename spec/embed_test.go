package spec

import (
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

// The shipped corpus is what the demo and a node without an LLM may serve:
// every set must load, be servable under the default policy, and chain
// its parts (a question in parts 2 and 3 that needs an earlier answer).
func TestExamplesAreServableAndChained(t *testing.T) {
	sets, err := Examples()
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) < 3 {
		t.Fatalf("%d example sets, want at least 3", len(sets))
	}
	domains := map[string]bool{}
	for _, s := range sets {
		domains[s.Domain] = true
		if _, err := skill.NewSession(s, skill.DefaultPolicy(), nil); err != nil {
			t.Errorf("%s: %v", s.Domain, err)
		}
		for i := 1; i < len(s.Parts); i++ {
			chained := false
			for _, q := range s.Parts[i].Questions {
				chained = chained || len(q.DependsOn) > 0
			}
			if !chained {
				t.Errorf("%s: part %d has no question that needs an earlier answer", s.Domain, i+1)
			}
		}
	}
	if len(domains) < 3 {
		t.Fatalf("examples cover %d domains, want at least 3", len(domains))
	}
}
