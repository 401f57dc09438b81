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
// rest of its 23 hours. The same holds for the node's own records after a
// restart (the store prunes the expired rejection, EachNewestSound then
// picks the older, still valid acceptance).
func TestRetractionExpiresFirstAudit84(t *testing.T) {
	t.Skip("audit84: open. Proposal: keep a learned rejection (and, in the store, an issued one) until the latest expiry of the records it superseded, e.g. a trustRec.coversUntil = max(expires_at of the superseded acceptance, its own), pruned only after it; or refuse to learn an acceptance older than a retraction pruned less than MaxKeptLifetime ago (remember pair and issued_at of pruned rejections)")
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
}
