package peer

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pubsubpb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"
	"github.com/libp2p/go-msgio"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// TestGossipPeerExchangeDialsNothing (h125): GossipSub connects to the
// peers a PRUNE's peer exchange (PX) names when its sender's score is at
// least AcceptPXThreshold, and it does not check that the sender was in
// its mesh. The threshold (10) was meant for peers this node admits (the
// app-specific bonus), but a stranger's first deliveries of valid
// messages score 1 each (up to 50), and an acceptance of a peer, which
// the peer may publish, is a valid message anyone can seal under a fresh
// key: after ten of them one fresh peer ID's PRUNEs, each naming 16 fresh peer IDs with
// signed records of any addresses (each record an Ed25519 check in
// pubsub's event loop), made the node dial whatever hosts it chose, a
// connection amplifier. This node sends no PX (its peers are found by
// bootstrap, mDNS and the DHT, whose dials are bounded) and now accepts
// none: the threshold is above any score a peer can reach.
func TestGossipPeerExchangeDialsNothing(t *testing.T) {
	victim := newBareNode(t, Config{Gossip: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The host the attacker aims the node at.
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	var dialed atomic.Int32
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			dialed.Add(1)
			_ = c.Close()
		}
	}()
	targetAddr := ma.StringCast("/ip4/127.0.0.1/tcp/" + strconv.Itoa(target.Addr().(*net.TCPAddr).Port))

	// A fresh peer ID earns its score with acceptances of itself under
	// fresh keys (a record's subject may publish it).
	fh, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	ps, err := pubsub.NewGossipSub(ctx, fh)
	if err != nil {
		t.Fatal(err)
	}
	topic, err := ps.Join(AttestationTopic)
	if err != nil {
		t.Fatal(err)
	}
	if err := fh.Connect(ctx, peer.AddrInfo{ID: victim.ID(), Addrs: victim.Addrs()}); err != nil {
		t.Fatal(err)
	}
	score := func() float64 {
		if m := victim.gossip.scores.Load(); m != nil {
			return (*m)[fh.ID()]
		}
		return 0
	}
	for i := 0; score() < 12; i++ {
		if ctx.Err() != nil || i > 2000 {
			t.Fatalf("the attacker's score stays at %.2f", score())
		}
		if i < 40 {
			k, _ := testutil.NewKey(t)
			if err := topic.Publish(ctx, SealTest(k, fh.ID(), true, time.Now().Add(-time.Minute), time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("a fresh peer ID scores %.2f with its first deliveries", score())

	// A PRUNE naming fresh peer IDs at the target's address.
	var px []*pubsubpb.PeerInfo
	for range 16 {
		k, id := testutil.NewKey(t)
		env, err := record.Seal(peer.PeerRecordFromAddrInfo(peer.AddrInfo{ID: id, Addrs: []ma.Multiaddr{targetAddr}}), k)
		if err != nil {
			t.Fatal(err)
		}
		b, err := env.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		px = append(px, &pubsubpb.PeerInfo{PeerID: []byte(id), SignedPeerRecord: b})
	}
	tp := AttestationTopic
	rpc := &pubsubpb.RPC{Control: &pubsubpb.ControlMessage{Prune: []*pubsubpb.ControlPrune{{TopicID: &tp, Peers: px}}}}
	b, err := rpc.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s, err := fh.NewStream(ctx, victim.ID(), pubsub.GossipSubID_v11)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	if err := msgio.NewVarintWriter(s).WriteMsg(b); err != nil {
		t.Fatal(err)
	}
	// The dials come within pubsub's connector's first pass; none may.
	deadline := time.Now().Add(3 * time.Second)
	for dialed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if k := dialed.Load(); k > 0 {
		t.Errorf("one stranger's PRUNE made the node dial the host it named %d times, want none", k)
	}
}
