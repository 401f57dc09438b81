package abuse

import (
	"strings"
	"testing"
	"time"
)

// A run whose attackers were still deploying when it ended (bench abuse
// --duration 3s: 3.76 s of ramp-up in a 3.8 s run) failed its bounds with
// only "no honest session completed", and --help promised the honest
// flows "always get a quarter": the failure now says the ramp-up took
// the run and to give a longer --duration.
func TestCheckCostSaysRampUpTookTheRun(t *testing.T) {
	r := &Report{Duration: 3800 * time.Millisecond, RampUp: 3757 * time.Millisecond}
	f := strings.Join(r.CheckCost(), "; ")
	if !strings.Contains(f, "deploying the attackers took 3.757s") || !strings.Contains(f, "longer --duration") {
		t.Errorf("CheckCost: %s", f)
	}
	r = &Report{Duration: 30 * time.Second, RampUp: 3 * time.Second}
	if f := strings.Join(r.CheckCost(), "; "); !strings.Contains(f, "no honest session completed") || strings.Contains(f, "deploying") {
		t.Errorf("CheckCost with a short ramp-up: %s", f)
	}
}

// A round the node answered in a session whose payment (spec/protocol.md
// §5b) it asked and did not get fails the cost bounds.
func TestCheckCostUnpaidAnswer(t *testing.T) {
	r := &Report{Duration: 30 * time.Second, Honest: Latency{Count: 1},
		Attack: []AttackReport{{Name: AttackProverCost, CallBudget: -1, UnpaidAnswered: 2}}}
	if f := strings.Join(r.CheckCost(), "; "); !strings.Contains(f, "2 rounds answered in sessions that did not pay") {
		t.Errorf("CheckCost: %q", f)
	}
	r.Attack[0].UnpaidAnswered = 0
	if f := r.CheckCost(); len(f) != 0 {
		t.Errorf("CheckCost of a clean run: %v", f)
	}
}
