package peer

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
	circuit "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/proto"
)

// TestStopStreamsOnlyFromRelays (h125): go-libp2p's circuit client
// serves the relay's stop protocol (/libp2p/circuit/relay/0.2.0/stop) to
// any connected peer, reading its message for up to a minute, 128
// streams a peer (640 and more in all), with no share per network; the
// relayed connection it would deliver is refused by the node's gate
// unless its relay is one of Config.Relays (spec/protocol.md §13), but
// the stream was held first: fresh peer IDs of one network that opened
// stop streams and sent nothing held 128 apiece for a minute, against
// the node's inbound streams in all. A stop stream now opens only from a
// configured relay; any other peer's is reset once its protocol is
// negotiated, before its handler reads it.
func TestStopStreamsOnlyFromRelays(t *testing.T) {
	relay, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	victim := newBareNode(t, Config{LimitLoopback: true,
		Relays: []string{relay.Addrs()[0].String() + "/p2p/" + relay.ID().String()}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const perPeer = 16
	held := 0
	for _, h := range freshPeers(ctx, t, victim, 3) {
		held += holdIdle(ctx, t, h, victim, circuit.ProtoIDv2Stop, perPeer)
	}
	if held > 0 {
		t.Errorf("3 fresh peer IDs that are no relay of the node hold %d stop streams, want none", held)
	}
	if err := relay.Connect(ctx, peer.AddrInfo{ID: victim.ID(), Addrs: victim.Addrs()}); err != nil {
		t.Fatal(err)
	}
	if n := holdIdle(ctx, t, relay, victim, circuit.ProtoIDv2Stop, 2); n != 2 {
		t.Errorf("the node's relay: %d of 2 stop streams served", n)
	}
}
