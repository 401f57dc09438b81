package eval

import (
	"context"
	"testing"

	"github.com/acaptcha/acaptcha/skill/attack"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

// TestProceduralSource runs the full evaluation over the offline
// generator: every set is fresh, every class runs, the human model never
// passes, and a fixed seed reproduces the attackers' results.
func TestProceduralSource(t *testing.T) {
	run := func() *Report {
		seed := uint64(2024)
		g, err := procedural.New(procedural.Config{Seed: &seed})
		if err != nil {
			t.Fatal(err)
		}
		cfg := baseConfig(nil, 60)
		cfg.Source = g
		cfg.Attackers = attack.All()
		r, err := Run(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := run(), run()
	if a.Corpus.Distinct != 60 || a.Corpus.Skipped != 0 {
		t.Fatalf("corpus %+v", a.Corpus)
	}
	for i, c := range a.Classes {
		if c.Sessions != 60 {
			t.Errorf("%s ran %d sessions", c.Name, c.Sessions)
		}
		if c.Pass.K != b.Classes[i].Pass.K || c.Failures[string("wrong_answer")] != b.Classes[i].Failures["wrong_answer"] {
			t.Errorf("%s: not reproducible under a fixed seed", c.Name)
		}
		t.Logf("%-22s pass %d/%d, round-1 %.1f%%", c.Name, c.Pass.K, c.Pass.N, 100*c.Rounds[0].Rate.Value)
	}
	if h, _ := a.Class(HumanClass); h.Pass.K != 0 {
		t.Errorf("human model passed %d sessions", h.Pass.K)
	}
}
