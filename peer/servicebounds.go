package peer

// Inbound streams of the libp2p services the node runs but does not
// write (spec/protocol.md §9a, "libp2p services").
//
// go-libp2p registers the handlers of ping, identify push, with
// Config.NAT AutoNAT v1 and v2, and with Config.RelayService the
// circuit-v2 relay's hop protocol itself; the
// resource manager bounds their streams per peer and per service, with
// no share per network: fresh peer IDs of one IPv4 /24 (peer IDs cost
// nothing) could hold a service's every stream and have the streams of
// every other peer reset. Ping: 2 streams a peer, kept as long as the
// peer pings within 10 s, 252 in all on a 24 GiB machine (126 peer IDs).
// Identify push: 16 streams a peer, each held up to identify's 5 s
// timeout before it is opened again, 252 in all (16 peer IDs). The
// relay's hop streams: 64 a peer, each held a minute idle (a circuit's
// stream for the circuit's 2 minutes). AutoNAT v1's service (Config.NAT):
// 2 streams a peer, each read up to a minute, 75 in all on the same
// machine (38 peer IDs); AutoNAT v2's server answers 2 requests of a
// peer at once, each read up to 15 s.
//
// negotiationRM counts such a stream, when its protocol is set
// (SetProtocol, right after multistream-select and before its handler
// runs), in the protocol's streamCounts of serviceBounds: per peer, per
// budget group (IPv4 /24, IPv6 /48 or relay network; loopback exempt
// unless Config.LimitLoopback) and per IPv6 /32, as the DHT's inbound
// streams (dhtstream.go); a stream over a bound is reset
// StreamResourceLimitExceeded before its handler runs, and one counted
// gives its place back when it ends. The resource manager's per-peer and
// per-service limits stay in force on top.
//
// Two of the services need no such count. An identify request
// (/ipfs/id/1.0.0) holds its stream only while the node writes its
// answer, one message well within the stream's flow-control window, and
// the stream's scope is given back when the node closes its side,
// whether or not the peer reads (TestIdentifyRequestsHoldNoStreams; the
// write waits only on a connection the peer stops reading altogether,
// which yamux closes after its 10 s write timeout). Hole punching
// (Config.NAT, /libp2p/dcutr) resets a DCUtR stream at once unless it
// comes on a relayed connection this node dialed, so peers that dial
// the node hold none (TestDCUtRStreamsOfDialingPeersReset).
//
// AutoNAT's request rates (v2: 60 a minute in all, 12 a peer; v1: 30
// dial-backs a minute, 3 a peer) are go-libp2p's, node-wide with no
// share per network, and go-libp2p has no option for one: a few
// networks' fresh peer IDs can spend them and have other peers'
// requests refused for the rest of the minute. They are left so: a
// per-network rate of ours would raise that to five or so networks, not
// close it, and the service is a courtesy to other nodes (which ask
// several servers) that this node does not need.
//
// Ping is still served although the node never pings: it is the one
// libp2p liveness probe other implementations and operators' tools use
// against any libp2p node, `acaptcha bench abuse` keeps a ping stream
// open to hold its connections against the connection manager's trims
// (internal/abuse/paydrain.go), as a peer of an outside implementation
// may, and the protocol benchmark measures rounds against it. Bounded,
// it costs the node at most maxPingPerGroup streams of 32-byte echoes
// per network, each answered only after the peer sent its 32 bytes.

import (
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/host/autonat"
	"github.com/libp2p/go-libp2p/p2p/protocol/autonatv2"
	circuit "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/proto"
	"github.com/libp2p/go-libp2p/p2p/protocol/identify"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"

	acprotocol "github.com/acaptcha/acaptcha/protocol"
)

const (
	// maxPingPerPeer is libp2p's own per-peer bound of ping streams;
	// maxPingPerGroup bounds those of one network together.
	maxPingPerPeer  = 2
	maxPingPerGroup = 8
	// maxIDPushPerPeer bounds one peer's identify pushes at once: a
	// peer pushes when its addresses or protocols change, one short
	// stream at a time (go-libp2p's identify keeps one push in flight
	// per connection); maxIDPushPerGroup those of one network.
	maxIDPushPerPeer  = 2
	maxIDPushPerGroup = 8
	// maxHopPerPeer is the relay service's circuits per peer
	// (RelayServiceResources().MaxCircuits, whose streams last the
	// circuit) and two for reservations and refused connects;
	// maxHopPerGroup bounds one network's.
	maxHopPerPeer  = 10
	maxHopPerGroup = 32
	// maxAutoNATPerPeer is libp2p's per-peer bound of AutoNAT v1
	// streams (each read up to a minute) and the AutoNAT v2 server's
	// requests in progress per peer; maxAutoNATPerGroup bounds one
	// network's (each version's).
	maxAutoNATPerPeer  = 2
	maxAutoNATPerGroup = 8
)

// serviceBounds returns the bounded libp2p protocols of the node and
// their counts of inbound streams.
func serviceBounds() map[protocol.ID]*streamCounts {
	counts := func(perPeer, perGroup int) *streamCounts {
		return newStreamCounts(perPeer, perGroup, acprotocol.BlockFactor*perGroup, 0)
	}
	return map[protocol.ID]*streamCounts{
		ping.ID:                counts(maxPingPerPeer, maxPingPerGroup),
		identify.IDPush:        counts(maxIDPushPerPeer, maxIDPushPerGroup),
		circuit.ProtoIDv2Hop:   counts(maxHopPerPeer, maxHopPerGroup),
		autonat.AutoNATProto:   counts(maxAutoNATPerPeer, maxAutoNATPerGroup),
		autonatv2.DialProtocol: counts(maxAutoNATPerPeer, maxAutoNATPerGroup),
	}
}
