package peer

// GossipSub's inbound RPCs (spec/trust.md §3.4).
//
// GossipSub reads a peer's RPCs on one inbound stream per peer with
// libp2p's msgio reader, which takes a buffer of the length an RPC's
// prefix announces (up to gossipMaxRPC, 256 KiB) before any of it
// arrives, and it sets no deadline: a peer that announced 256 KiB and
// sent one byte made the node hold 256 KiB for as long as its connection
// lasted. Connections are bounded per IPv4 address (ConnsPerIP) and in
// all (the inbound limit, 500 by default), not per /24: the peers of one
// /24 with 63 addresses held 125 MiB. An RPC over gossipSmallRPC (a
// record is at most 8 KiB; larger RPCs are bursts of many) is now read
// only in a place of gossipRPCs, one a peer, maxGossipLargePerGroup a
// budget group (loopback exempt unless limited), twice that an IPv6 /32
// and maxGossipLarge in all, and must arrive whole within
// gossipLargeRPCWait; without a place its stream is reset before the
// buffer is taken (the peer's next RPCs come on a new stream), and one
// not whole in time is reset, giving its place back.

import (
	"errors"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	lpproto "github.com/libp2p/go-libp2p/core/protocol"

	acprotocol "github.com/acaptcha/acaptcha/protocol"
)

const (
	// gossipSmallRPC is the largest RPC read without a place: a record
	// of 8 KiB and control eight times over. All of the inbound
	// connections' small RPCs hold 32 MiB at the default limit.
	gossipSmallRPC = 64 << 10
	// maxGossipLarge bounds the larger RPCs read at once (16 MiB),
	// maxGossipLargePerGroup those of one network.
	maxGossipLarge         = 64
	maxGossipLargePerGroup = 8
)

// gossipLargeRPCWait is how long a large RPC may take to arrive after its
// prefix (256 KiB at 26 KB/s). A variable for tests only, read when a
// node starts.
var gossipLargeRPCWait = 10 * time.Second

// errGossipRPCBusy ends a GossipSub stream whose large RPC finds no
// place.
var errGossipRPCBusy = errors.New("acaptcha: large gossip RPCs of this peer, its network or in all at their cap")

// gossipHost is the host GossipSub runs on: the node's, with inbound
// streams read through largeMsgStream.
type gossipHost struct {
	host.Host
	rpcs          *streamCounts
	limitLoopback bool
	wait          time.Duration // gossipLargeRPCWait when the node started
}

func newGossipHost(h host.Host, limitLoopback bool) gossipHost {
	return gossipHost{Host: h, limitLoopback: limitLoopback, wait: gossipLargeRPCWait,
		rpcs: newStreamCounts(1, maxGossipLargePerGroup, acprotocol.BlockFactor*maxGossipLargePerGroup, maxGossipLarge)}
}

// wrap reads the streams handler handles through largeMsgStream.
func (h gossipHost) wrap(handler network.StreamHandler) network.StreamHandler {
	return func(s network.Stream) {
		nets, _ := netsOf(s.Conn().RemoteMultiaddr(), h.limitLoopback)
		handler(&largeMsgStream{Stream: s, small: gossipSmallRPC, most: gossipMaxRPC, counts: h.rpcs,
			peer: s.Conn().RemotePeer(), nets: nets, busy: errGossipRPCBusy, wait: h.wait})
	}
}

func (h gossipHost) SetStreamHandler(pid lpproto.ID, handler network.StreamHandler) {
	h.Host.SetStreamHandler(pid, h.wrap(handler))
}

func (h gossipHost) SetStreamHandlerMatch(pid lpproto.ID, match func(lpproto.ID) bool, handler network.StreamHandler) {
	h.Host.SetStreamHandlerMatch(pid, match, h.wrap(handler))
}
