package attack

import (
	"testing"

	"github.com/acaptcha/acaptcha/skill/procedural"
)

// TestAttackersOnProcedural runs every attacker through the session state
// machine on sets from the offline generator.
func TestAttackersOnProcedural(t *testing.T) {
	seed := uint64(77)
	g, err := procedural.New(procedural.Config{Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		set, err := g.Generate(uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range All() {
			v := runSession(t, set, n.Prover, i)
			if v.Reason != "ok" && v.Reason != "wrong_answer" {
				t.Fatalf("%s: verdict %s (%s)", n.Name, v.Reason, v.Detail)
			}
		}
	}
}
