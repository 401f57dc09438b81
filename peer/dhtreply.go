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
	"fmt"
	"sync"

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
// through dhtReplyStream.
func (h dhtHost) NewStream(ctx context.Context, p peer.ID, pids ...lpproto.ID) (network.Stream, error) {
	s, err := h.Host.NewStream(ctx, p, pids...)
	if err != nil || h.replies == nil {
		return s, err
	}
	nets, _ := netsOf(s.Conn().RemoteMultiaddr(), h.limitLoopback)
	return &dhtReplyStream{Stream: s, counts: h.replies, peer: p, nets: nets}, nil
}

// dhtReplyStream follows the varint-delimited replies read from an
// outbound DHT stream: a reply whose prefix announces more than
// maxDHTSmallReply takes a place in counts until its last byte is read
// or the stream ends, and the stream is reset, before the DHT's reader
// sees the prefix, when there is none.
type dhtReplyStream struct {
	network.Stream
	counts *streamCounts
	peer   peer.ID
	nets   addrNets

	rest  uint64 // bytes left of the current reply
	size  uint64 // the prefix read so far
	shift uint

	mu     sync.Mutex
	placed bool // a place is held
}

func (s *dhtReplyStream) Read(p []byte) (int, error) {
	n, err := s.Stream.Read(p)
	for i := 0; i < n; i++ {
		if s.rest > 0 {
			skip := min(s.rest, uint64(n-i))
			s.rest -= skip
			i += int(skip) - 1
			if s.rest == 0 {
				s.unplace()
			}
			continue
		}
		b := p[i]
		if s.shift > 63 {
			return n, err // malformed: the DHT's reader refuses it
		}
		s.size |= uint64(b&0x7f) << s.shift
		s.shift += 7
		if b&0x80 != 0 {
			continue
		}
		size := s.size
		s.rest, s.size, s.shift = size, 0, 0
		if size > maxDHTSmallReply && size <= network.MessageSizeMax && !s.place() {
			_ = s.Stream.Reset()
			return 0, fmt.Errorf("%w: %d bytes announced", errDHTReplyBusy, size)
		}
	}
	return n, err
}

// place takes a place for a large reply.
func (s *dhtReplyStream) place() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.placed {
		return true
	}
	s.placed = s.counts.acquire(s.peer, s.nets)
	return s.placed
}

// unplace gives a place back, if one is held.
func (s *dhtReplyStream) unplace() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.placed {
		s.placed = false
		s.counts.release(s.peer, s.nets)
	}
}

func (s *dhtReplyStream) Close() error {
	s.unplace()
	return s.Stream.Close()
}

func (s *dhtReplyStream) Reset() error {
	s.unplace()
	return s.Stream.Reset()
}

func (s *dhtReplyStream) ResetWithError(code network.StreamErrorCode) error {
	s.unplace()
	return s.Stream.ResetWithError(code)
}
