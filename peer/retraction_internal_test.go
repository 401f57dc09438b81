package peer

import (
	"context"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
)

// A rejection hidden by presenting an older acceptance (spec/trust.md
// §3.4, validation step 11): an issuer this node admits directly accepted
// p, later rejected it and published the rejection as a retraction. A
// node that never learned the acceptance (it joined the topic later, or
// missed that message) ignored the retraction as "not_accepted", and p,
// which kept the old acceptance's envelope, then presented it and was
// admitted by quorum on a voucher its issuer had withdrawn. The node now
// learns a directly admitted issuer's rejection as it comes, and the old
// acceptance is stale.
func TestRetractionWithoutHeldAcceptance(t *testing.T) {
	n := newBareNode(t, Config{TrustQuorum: 1})
	selfKey := n.host.Peerstore().PrivKey(n.ID())
	now := time.Now()
	ik, issuer := testutil.NewKey(t)
	_, p := testutil.NewKey(t)
	if err := IssueEnvelope(n, SealTest(selfKey, issuer, true, now, time.Hour)); err != nil {
		t.Fatal(err)
	}
	old := SealTest(ik, p, true, now.Add(-10*time.Minute), time.Hour)
	retraction := SealTest(ik, p, false, now.Add(-5*time.Minute), time.Hour)

	// The issuer publishes its retraction; the node holds nothing of p.
	m := gossipMsg(retraction, issuer)
	if got := n.validateGossip(context.Background(), issuer, m); got != pubsub.ValidationAccept {
		t.Fatalf("retraction by a directly admitted issuer, nothing held: %v, want accept", got)
	}
	a := m.ValidatorData.(*protocol.Attestation)
	if res := n.learn(a, retraction, ViaGossip, issuer, issuer); res != learnedNew {
		t.Fatalf("learn retraction: %v", res)
	}
	// p presents the acceptance its issuer withdrew.
	if res, err := LearnEnvelope(n, old, ViaPresentation, p); err != nil || res != "stale" {
		t.Fatalf("withdrawn acceptance presented: %q, %v; want stale", res, err)
	}
	if adm := n.Admission(p); adm.Admitted {
		t.Fatalf("p admitted on an acceptance its issuer withdrew: %+v", adm)
	}

	// An issuer this node does not admit directly still has its
	// rejections ignored when they retract nothing held (junk costs
	// nothing to mint).
	sk, sybil := testutil.NewKey(t)
	if got := n.validateGossip(context.Background(), sybil, gossipMsg(SealTest(sk, p, false, now, time.Hour), sybil)); got != pubsub.ValidationIgnore {
		t.Fatalf("stranger's rejection with nothing to retract: %v, want ignore", got)
	}
}
