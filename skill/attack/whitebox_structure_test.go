package attack

import (
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

// TestStructureAttackersSynthetic runs the structure attackers on a small
// set written for the test (testdata/structure): a memo whose persisting
// candidate is introduced with its description and then written about by
// it in separate paragraphs, with a steady list of readings beside fading
// and one-off ones; and a change log whose repaired tank gives three
// checks. The series attacker must compute both means from the steady
// lists, the scatter attacker must name the persisting vat, and both must
// keep to their question forms.
func TestStructureAttackersSynthetic(t *testing.T) {
	set, err := skill.LoadFile("testdata/structure/tollgate_brewhouse.json")
	if err != nil {
		t.Fatal(err)
	}
	series, scatter := Series().Prover, Scatter().Prover
	for _, c := range []struct {
		p    skill.Prover
		k, j int
		want string // "" for an answer the judge must refuse
	}{
		{series, 0, 1, "30"},  // the steady list 30, 31, 29, 30 over four days, not the fading 41 -> 22
		{series, 1, 1, "7.3"}, // 7, 8, 7 over three checks, to one decimal
		{scatter, 0, 0, "Vat Birch"},
		{series, 0, 0, ""},  // an entity question: no number
		{scatter, 0, 1, ""}, // a numeric question: no entity
		{scatter, 0, 2, ""}, // a label question: not an item the text introduces
	} {
		q := &set.Parts[c.k].Questions[c.j]
		ans := answerAt(t, set, c.p, c.k, c.j)
		ok := skill.Judge(q, ans, narrativesUpTo(set, c.k))
		if c.want != "" && (!ok || ans != c.want) {
			t.Errorf("%s part %d question %d: %q (judged %v), want %q", c.p.(*wbProver).name, c.k+1, c.j+1, ans, ok, c.want)
		}
		if c.want == "" && ok {
			t.Errorf("%s part %d question %d: %q judged correct", c.p.(*wbProver).name, c.k+1, c.j+1, ans)
		}
	}
}

// TestSurvivorSynthetic runs the survivor attacker on a set written for
// the test (testdata/structure/harrow_cold_chain.json) whose part 1
// question every attacker of the validator's filter fails, each naming a
// wrong store: the survivor attacker runs them itself, sets their
// answers aside and names the store left.
func TestSurvivorSynthetic(t *testing.T) {
	set, err := skill.LoadFile("testdata/structure/harrow_cold_chain.json")
	if err != nil {
		t.Fatal(err)
	}
	q := &set.Parts[0].Questions[0]
	narr := narrativesUpTo(set, 0)
	wrong := map[string]bool{}
	for _, a := range survivorFilter(set.Domain) {
		ans := answerAt(t, set, a.Prover, 0, 0)
		if skill.Judge(q, ans, narr) {
			t.Fatalf("filter attacker %s answers %q: the set no longer tests elimination", a.Name, ans)
		}
		wrong[svKey(ans)] = true
	}
	ans := answerAt(t, set, Survivor().Prover, 0, 0)
	if wrong[svKey(ans)] || !skill.Judge(q, ans, narr) {
		t.Errorf("survivor answered %q (a filter answer: %v), want %q", ans, wrong[svKey(ans)], q.Answer)
	}
	// One level deeper nothing is left: the four stores are the filter's
	// three answers and the survivor's.
	if ans2 := answerAt(t, set, survivorDepth(2).Prover, 0, 0); ans2 != fallback {
		t.Errorf("survivor depth 2 answered %q, want %q", ans2, fallback)
	}
}
