package peer

// Replies to the node's own DHT queries (spec/protocol.md §9a, "The
// DHT").
//
// The DHT's client reads a reply of up to libp2p's MessageSizeMax (4 MiB)
// and, as its server does for requests (dhtRequestStream), takes a
// buffer of the length the reply's prefix announces before any of it
// arrives, held until the reply is read or the DHT's 10 s read timeout.
// The DHT checks every new peer that connects and serves the DHT with a
// FIND_NODE (up to 256 at once) besides the lookups it runs (10 servers
// at once each), so hostile servers that connected to the node and
// answered each check with a 4 MiB prefix made it hold up to 1 GiB.
// Honest replies are small but for GET_PROVIDERS in a large network (a
// server returns every provider of the rendezvous it holds, a few
// hundred bytes each, up to 4 MiB): a reply announcing more than
// maxDHTSmallReply is read only in one of maxDHTLargeReplies places,
// one of a server (peer), of its network (budget group; loopback exempt
// unless limited) and two of an IPv6 /32; a reply over them fails as an
// unreachable server's would (its stream is reset before its buffer is
// taken) and the lookup goes on with the others.

import (
	"context"
	"errors"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	lpproto "github.com/libp2p/go-libp2p/core/protocol"
)

const (
	// maxDHTSmallReply is the largest reply read without a place: 64
	// KiB, some eight times a FIND_NODE reply of 20 peers with 8
	// addresses each.
	maxDHTSmallReply = 64 << 10
	// maxDHTLargeReplies is how many larger replies are read at once
	// (16 MiB at most).
	maxDHTLargeReplies = 4
)

// errDHTReplyBusy ends a DHT query whose large reply finds no place.
var errDHTReplyBusy = errors.New("acaptcha: large DHT replies of this server, its network or in all at their cap")

// newDHTReplies counts the large DHT replies being read.
func newDHTReplies() *streamCounts {
	return newStreamCounts(1, 1, 2, maxDHTLargeReplies)
}

// NewStream opens the DHT's outbound streams, whose replies are read
// through largeMsgStream: a reply over maxDHTSmallReply takes a place in
// h.replies.
func (h dhtHost) NewStream(ctx context.Context, p peer.ID, pids ...lpproto.ID) (network.Stream, error) {
	s, err := h.Host.NewStream(ctx, p, pids...)
	if err != nil || h.replies == nil {
		return s, err
	}
	nets, _ := netsOf(s.Conn().RemoteMultiaddr(), h.limitLoopback)
	return &largeMsgStream{Stream: s, small: maxDHTSmallReply, most: network.MessageSizeMax,
		counts: h.replies, peer: p, nets: nets, busy: errDHTReplyBusy}, nil
}
