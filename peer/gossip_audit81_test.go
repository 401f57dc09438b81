package peer

import (
	"net/netip"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// audit-81 (not fixed): the learned records of issuers the node does not
// admit directly are capped per issuer (4 096), per subject (256) and in
// total (MaxLearned, 65 536), and the gossip budgets price the signature
// checks per forwarder, network and in total, but nothing bounds how much
// of the learned table one forwarder or one network fills: issuer and
// subject keys are free, so one /24 (its network bucket: 8 192 units at
// once, 512 a second, 2 units a record) gets all 65 536 learned and
// persisted in about 4 minutes, valid for up to 30 days, after which
// every other network's record of such an issuer is ignored (capacity)
// until they expire. The test learns MaxLearned/16+1 records of fresh
// issuers about fresh subjects forwarded by one peer, and wants them cut
// at a sixteenth of the table; it also measures the time the forwarder's
// network needs to pass MaxLearned records through the gossip budget.
//
// Proposed fix: count the learned records (by issuers not admitted
// directly) per forwarding network (IPv4 /24, IPv6 /48, relay; the
// prefix inspectGossip computes, kept on the record as from is) and per
// IPv6 /32, and ignore (reason capacity) past a share of MaxLearned, e.g.
// MaxLearned/16 per network and /8 per /32, as the presentation path
// bounds its untrusted records (MaxPresentedUntrusted); or evict, when
// full, the records of the network that holds the most.
func TestGossipLearnedShareOfOneForwarder(t *testing.T) {
	t.Skip("audit81: one forwarder (one /24) can fill the whole learned table (65,536 records of fresh issuers, ~4 min at its gossip budget) and lock every other network's untrusted-issuer records out for up to 30 days")
	n := newBareNode(t, Config{})
	_, fwd := testutil.NewKey(t)
	now := time.Now()

	// How long one forwarder's network takes to pass MaxLearned records
	// (two units each: an ed25519 author and an ed25519 record).
	var b gossipBudget
	pfx := netip.MustParsePrefix("198.51.100.0/24")
	passed, clock := 0, now
	for step := 0; passed < MaxLearned && step < 3600; step++ {
		for i := 0; passed < MaxLearned && i < 1<<14; i++ {
			_, id := testutil.NewKey(t)
			if !b.take(id, pfx, 2, clock) { // a fresh forwarder ID each time
				break
			}
			passed++
		}
		clock = clock.Add(time.Second)
	}
	t.Logf("one /24 passes %d records through the gossip budget in %v", passed, clock.Sub(now))

	const want = MaxLearned/16 + 1
	learned := 0
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; i < want && time.Now().Before(deadline); i++ {
		ik, issuer := testutil.NewKey(t)
		_, subject := testutil.NewKey(t)
		env := SealTest(ik, subject, true, now, 24*time.Hour)
		res, _, a := n.checkGossip(env, issuer)
		if res != pubsub.ValidationAccept {
			continue
		}
		if n.learn(a, env, ViaGossip, fwd, issuer) == learnedNew {
			learned++
		}
	}
	if learned > MaxLearned/16 {
		t.Fatalf("one forwarder had %d records of fresh issuers learned (%d%% of the %d the table holds); want at most a sixteenth", learned, learned*100/MaxLearned, MaxLearned)
	}
}
