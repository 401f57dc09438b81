package peer

import (
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// The count of presented records by issuers not admitted directly (the
// cap MaxPresentedUntrusted) scans the learned table at most once a
// second, however many presentations ask (audit-81: a scan per
// presentation, 46 ms at the table's hard cap under the trust lock), and
// stays exact for what is learned by presentation in between.
func TestPresentedUntrustedCountCached(t *testing.T) {
	n := newBareNode(t, Config{})
	now := time.Now()
	learn := func() {
		ik, issuer := testutil.NewKey(t)
		_, subject := testutil.NewKey(t)
		if res, err := LearnEnvelope(n, SealTest(ik, subject, true, now.Add(-time.Minute), 24*time.Hour), ViaPresentation, issuer); err != nil || res != "learned" {
			t.Fatalf("learn: %v %v", res, err)
		}
	}
	learn()
	if got := n.presentedUntrusted(); got != 1 {
		t.Fatalf("count %d, want 1", got)
	}
	for i := range 50 {
		learn()
		if got := n.presentedUntrusted(); got != i+2 {
			t.Fatalf("count %d after %d records, want %d", got, i+2, i+2)
		}
	}
	n.trust.presented.mu.Lock()
	scans := n.trust.presented.scans
	n.trust.presented.mu.Unlock()
	if scans > 2 {
		t.Fatalf("%d scans of the learned table for 51 counts within about a second, want at most 2", scans)
	}
}
