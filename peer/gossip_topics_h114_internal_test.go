package peer

import (
	"context"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pubsubpb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-msgio"
)

// GossipSub keeps, for every topic a peer announces a subscription to,
// an entry in its table of topics' peers, whatever the topic: without a
// subscription filter one connected peer (a fresh ID, no proof of work,
// not even GossipSub in its identify) wrote RPCs of 256 KiB, each
// announcing some 10,000 topics of its choosing, as fast as it could,
// and the node held every one: nothing bounded them per peer or in all,
// and a topic's entry was never removed, not when the peer unsubscribed
// nor when it left (only the peer was taken out of it), so the table
// grew for the life of the process and every peer's departure walked
// all of it in pubsub's event loop. The node only serves
// AttestationTopic, so it now keeps subscriptions to that topic alone
// (spec/trust.md §3.4).
func TestGossipForeignTopicsNotHeld(t *testing.T) {
	victim := newBareNode(t, Config{Gossip: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fh, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	// It lists GossipSub (and drains what the node writes), so that the
	// node takes it for a GossipSub peer and lists it in a topic's peers.
	fh.SetStreamHandler(pubsub.GossipSubID_v11, func(s network.Stream) { _, _ = io.Copy(io.Discard, s) })
	if err := fh.Connect(ctx, peer.AddrInfo{ID: victim.ID(), Addrs: victim.Addrs()}); err != nil {
		t.Fatal(err)
	}
	s, err := fh.NewStream(ctx, victim.ID(), pubsub.GossipSubID_v11)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	w := msgio.NewVarintWriter(s)
	const rpcs, perRPC = 4, 5000
	sub := true
	var topics []string
	for r := range rpcs {
		rpc := &pubsubpb.RPC{}
		for i := range perRPC {
			topic := fmt.Sprintf("junk/%d/%d", r, i)
			topics = append(topics, topic)
			rpc.Subscriptions = append(rpc.Subscriptions, &pubsubpb.RPC_SubOpts{Subscribe: &sub, Topicid: &topic})
		}
		b, err := rpc.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > gossipMaxRPC {
			t.Fatalf("test RPC of %d bytes over the node's cap", len(b))
		}
		if err := w.WriteMsg(b); err != nil {
			t.Fatalf("write RPC %d: %v", r, err)
		}
	}
	// Then a subscription to the node's topic: the RPCs of one stream
	// are handled in order, so once it is seen the flood was handled.
	topic := AttestationTopic
	b, err := (&pubsubpb.RPC{Subscriptions: []*pubsubpb.RPC_SubOpts{{Subscribe: &sub, Topicid: &topic}}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMsg(b); err != nil {
		t.Fatal(err)
	}
	ps := victim.gossip.ps
	for !slices.Contains(ps.ListPeers(AttestationTopic), fh.ID()) {
		if ctx.Err() != nil {
			t.Fatal("the node never saw the subscription to its own topic")
		}
		time.Sleep(10 * time.Millisecond)
	}
	held := 0
	for _, tp := range topics {
		if slices.Contains(ps.ListPeers(tp), fh.ID()) {
			held++
		}
	}
	t.Logf("one peer announced %d foreign topics: the node holds %d of them", len(topics), held)
	if held != 0 {
		t.Fatalf("the node holds %d topics of one peer's choosing, want none but its own", held)
	}
}
