package peer

import (
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// trust.md 1.1.0 §3.4: "versions validated one after the other before the
// first is delivered count against each other", for a pair the node does
// not hold yet too: of 20 versions validated before any is delivered, one
// is accepted for forwarding (the same one again passes: a re-validation).
func TestGossipNewPairVersionsInFlight(t *testing.T) {
	n := newBareNode(t, Config{})
	start := time.Now()
	newTestClock(n, start)
	ik, issuer := testutil.NewKey(t)
	_, subject := testutil.NewKey(t)
	base := start.Add(-time.Minute)
	accepted := 0
	for i := range 20 {
		env := SealTest(ik, subject, true, base, time.Hour+time.Duration(i)*time.Second)
		if _, a := validateOnly(t, n, env, issuer); a != nil {
			accepted++
		}
	}
	if accepted != 1 {
		t.Fatalf("%d versions of one new (issuer, subject) pair accepted for forwarding before delivery; want 1", accepted)
	}
}
