package peer

import (
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// audit84 (open): a retraction that expires before the acceptance it
// retracts. An issuer this node admits directly accepted s (valid 24 h),
// then retracted it with a rejection valid 1 h (a shorter TTL: the
// issuer's operator changed --attestation-ttl, or another
// implementation's policy). Once the rejection expires the node prunes
// it (pruneLearned), the pair is empty, and s presents the withdrawn
// acceptance, which is learned and counts in the quorum again for the
// rest of its 23 hours. A learned rejection is now kept, expired, until
// MaxKeptLifetime after its issue (store.LearnedDead), in memory and in the
// store: the node's own issued records are kept Config.KeepExpired (30
// days by default) past their expiry already.
func TestRetractionExpiresFirstAudit84(t *testing.T) {
	n := newBareNode(t, Config{TrustQuorum: 1, RequireSource: AnySource})
	now := time.Now()
	clock := newTestClock(n, now)
	ik, issuer := testutil.NewKey(t)
	_, s := testutil.NewKey(t)
	directlyAdmit(t, n, issuer, now)
	acc := SealTest(ik, s, true, now.Add(-time.Minute), 24*time.Hour)
	rej := SealTest(ik, s, false, now, time.Hour)
	for _, env := range [][]byte{acc, rej} {
		if _, err := LearnEnvelope(n, env, ViaGossip, issuer); err != nil {
			t.Fatal(err)
		}
	}
	if adm := n.Admission(s); adm.Admitted {
		t.Fatalf("after the retraction: %+v", adm)
	}
	clock.advance(2 * time.Hour)
	n.pruneLearned(clock.now())
	if res, err := LearnEnvelope(n, acc, ViaPresentation, s); err != nil || res == learnedNew.String() {
		t.Errorf("the withdrawn acceptance presented again after its retraction expired: %s, %v (admission %+v)", res, err, n.Admission(s))
	}
	if adm := n.Admission(s); adm.Admitted {
		t.Errorf("admitted after the retraction expired: %+v", adm)
	}
	// Once MaxKeptLifetime has passed since the rejection's issue, it
	// goes, in memory and in the store.
	// goes (the store's prune: TestPruneLearnedKeepsRetraction).
	n.pruneLearned(now.Add(MaxKeptLifetime + time.Minute))
	n.trust.mu.RLock()
	left := len(n.trust.learned[s])
	n.trust.mu.RUnlock()
	if left != 0 {
		t.Errorf("%d learned records of the subject in memory after MaxKeptLifetime", left)
	}
}
