package peer

// Audit (helper-89): GossipSub's score table against peer-ID churn. It
// failed on the code it was written against.

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// TestGossipScoreNotRetainedForNeutralPeers_audit89: GossipSub keeps the
// score of a peer that disconnects for RetainScore (an hour here) unless
// the score is positive, so that a peer cannot shed a penalty by
// reconnecting. A peer that did nothing scored exactly 0, so every fresh
// peer ID that connected and spoke GossipSub left an entry behind for an
// hour: one per connection, bounded only by the rate of new connections
// (libp2p's is per IP address and /48, none in total), and each walked
// by the score refresh every second and copied by the score snapshot.
// Peers with nothing against them now score a little above 0 and are
// forgotten when they leave; a penalised peer is still retained.
func TestGossipScoreNotRetainedForNeutralPeers_audit89(t *testing.T) {
	victim := newBareNode(t, Config{Gossip: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// dial connects a fresh peer that speaks GossipSub to the victim;
	// scored reports whether the victim's GossipSub scores it.
	dial := func() (host.Host, *pubsub.Topic) {
		t.Helper()
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		ps, err := pubsub.NewGossipSub(ctx, h, pubsub.WithMessageSignaturePolicy(pubsub.StrictSign), pubsub.WithFloodPublish(true))
		if err != nil {
			t.Fatal(err)
		}
		topic, err := ps.Join(AttestationTopic)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Connect(ctx, peer.AddrInfo{ID: victim.ID(), Addrs: victim.Addrs()}); err != nil {
			t.Fatal(err)
		}
		return h, topic
	}
	scored := func(h host.Host) bool {
		_, ok := victim.GossipScore(h.ID())
		return ok
	}

	// A penalised peer: it publishes data that is no record.
	bad, topic := dial()
	retainWait(t, 10*time.Second, "the victim's GossipSub scores the peer", func() bool {
		return scored(bad) && len(topic.ListPeers()) > 0
	})
	if err := topic.Publish(ctx, []byte("no attestation envelope")); err != nil {
		t.Fatal(err)
	}
	retainWait(t, 10*time.Second, "the forwarder of an invalid message penalised", func() bool {
		s, ok := victim.GossipScore(bad.ID())
		return ok && s < 0
	})

	// The churning peers connect together and leave once the victim
	// scores every one of them (its score refresh, once a second, adds
	// them: one at a time, that was a second each).
	const churn = 8
	var ids []peer.ID
	var churned []host.Host
	for range churn {
		h, _ := dial()
		ids = append(ids, h.ID())
		churned = append(churned, h)
	}
	retainWait(t, 10*time.Second, "the victim's GossipSub scores the peers", func() bool {
		for _, h := range churned {
			if !scored(h) {
				return false
			}
		}
		return true
	})
	for _, h := range churned {
		h.Close()
	}
	bad.Close()
	retained := func() int {
		k := 0
		for _, p := range ids {
			if _, ok := victim.GossipScore(p); ok {
				k++
			}
		}
		return k
	}
	deadline := time.Now().Add(5 * time.Second)
	for retained() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if k := retained(); k > 0 {
		t.Fatalf("%d of %d peer IDs that connected, did nothing and left are still in the GossipSub score table (retained for %s each)", k, churn, time.Hour)
	}
	if s, ok := victim.GossipScore(bad.ID()); !ok || s >= 0 {
		t.Fatalf("the penalised peer's score was not retained: %v %v", s, ok)
	}
}

func retainWait(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
