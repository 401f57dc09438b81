package peer

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// audit-81: the learned records of issuers the node does not admit
// directly were capped per issuer (4,096), per subject (256) and in total
// (MaxLearned, 65,536), and the gossip budgets price the signature checks
// per forwarder, network and in total, but nothing bounded how much of
// the learned table one network filled: issuer and subject keys are free,
// so one /24 (its network bucket: 8,192 units at once, 512 a second, 2
// units a record) got all 65,536 learned and persisted in about 4
// minutes, valid for up to 30 days, after which every other network's
// record of such an issuer was ignored (capacity) until they expired.
// Now one network keeps at most MaxLearnedPerNetwork (a sixteenth); the
// test learns one more than that from a forwarder connected from
// 127.0.0.0/24 (loopback counted: LimitLoopback) and then one from
// another network (127.0.1.0/24), which is still learned.
func TestGossipLearnedShareOfOneForwarder(t *testing.T) {
	// Parallel: its own node, key, store file and forwarder hosts; it
	// writes no package state. Most of its time is 4,097 signature
	// checks and bbolt commits (two fsyncs each).
	t.Parallel()
	n := newBareNode(t, Config{LimitLoopback: true})
	now := time.Now()

	// How long one forwarder's network takes to pass MaxLearned records
	// (two units each: an ed25519 author and an ed25519 record).
	var b gossipBudget
	pfx := netip.MustParsePrefix("198.51.100.0/24")
	passed, clock := 0, now
	for step := 0; passed < MaxLearned && step < 3600; step++ {
		for i := 0; passed < MaxLearned && i < 1<<14; i++ {
			// A fresh forwarder ID each time (the budget keys its
			// buckets by the ID alone: no key needed; 65,536 ed25519
			// keys took about 15 s under -race).
			id := peer.ID(fmt.Sprintf("forwarder-%d", passed))
			if !b.take(id, pfx, 2, clock) {
				break
			}
			passed++
		}
		clock = clock.Add(time.Second)
	}
	t.Logf("one /24 passes %d records through the gossip budget in %v", passed, clock.Sub(now))

	forwarder := func(listen string) host.Host {
		h, err := libp2p.New(libp2p.ListenAddrStrings(listen))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// The node dials, so the connection's remote address is the
		// forwarder's listen address (its network).
		if err := n.Host().Connect(ctx, peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()}); err != nil {
			t.Fatal(err)
		}
		return h
	}
	// Fresh issuers (their keys are free to an attacker); subjects from
	// a pool of 32, so each has about 128 records, under the per-subject
	// cap (256): a fresh subject key per record cost a third of this
	// test's time under -race.
	subjects := make([]peer.ID, 32)
	for i := range subjects {
		_, subjects[i] = testutil.NewKey(t)
	}
	records := 0
	learnFrom := func(fwd peer.ID) bool {
		ik, issuer := testutil.NewKey(t)
		subject := subjects[records%len(subjects)]
		records++
		env := SealTest(ik, subject, true, now, 24*time.Hour)
		res, why, a := n.checkGossip(env, issuer)
		if res != pubsub.ValidationAccept {
			t.Fatalf("gossip check: %v %s", res, why)
		}
		return n.learn(a, env, ViaGossip, fwd, issuer) == learnedNew
	}
	one := forwarder("/ip4/127.0.0.1/tcp/0")
	learned := 0
	// Bounded by its count, not by wall clock (a deadline turned a slow
	// machine into a wrong count: TestLearnedNetworkShareSurvivesRestart_audit83).
	for range MaxLearnedPerNetwork + 1 {
		if learnFrom(one.ID()) {
			learned++
		}
	}
	if learned != MaxLearnedPerNetwork {
		t.Fatalf("one forwarder's network had %d records of fresh issuers learned of %d; want its share, %d (a sixteenth of %d)", learned, MaxLearnedPerNetwork+1, MaxLearnedPerNetwork, MaxLearned)
	}
	other := forwarder("/ip4/127.0.1.1/tcp/0")
	if !learnFrom(other.ID()) {
		t.Fatal("a record from another network was not learned once one network held its share")
	}
}
