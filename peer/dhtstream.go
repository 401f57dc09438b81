package peer

import (
	"errors"
	"fmt"

	"github.com/libp2p/go-libp2p/core/network"
	lpproto "github.com/libp2p/go-libp2p/core/protocol"

	acprotocol "github.com/acaptcha/acaptcha/protocol"
)

// maxDHTRequest bounds a request read on an inbound DHT stream. The DHT
// reads up to libp2p's MessageSizeMax (4 MiB) and takes a buffer of the
// length a request's prefix announces before any of it arrives, held
// while the stream stays open (a minute of idleness): a peer's streams
// (75 at once, 1,265 for all peers) each announcing 4 MiB made the node
// hold 4 MiB apiece, memory no resource manager counts. The requests an
// acaptcha node serves (FIND_NODE, GET_PROVIDERS, ADD_PROVIDER with at
// most a few addresses, PING) are a few hundred bytes.
const maxDHTRequest = 16 << 10

// errDHTRequestSize ends a DHT stream whose request is over maxDHTRequest.
var errDHTRequestSize = errors.New("acaptcha: DHT request over the size this node reads")

// Inbound DHT streams served at once. The DHT keeps a stream open for a
// minute of idleness, and libp2p's resource manager lets one peer hold
// 75 streams of a protocol and all peers 1,265: some 17 fresh peer IDs
// that opened DHT streams and sent nothing had every other peer's DHT
// request refused for as long as they kept them. A DHT client keeps one
// stream per peer it queries.
const (
	maxDHTStreamsPerPeer  = 4
	maxDHTStreamsPerGroup = 32
	maxDHTStreamsPerBlock = acprotocol.BlockFactor * maxDHTStreamsPerGroup
)

// newDHTStreams counts the inbound DHT streams served.
func newDHTStreams() *streamCounts {
	return newStreamCounts(maxDHTStreamsPerPeer, maxDHTStreamsPerGroup, maxDHTStreamsPerBlock, 0)
}

// dhtStreamHandler wraps the DHT's handler of inbound streams: a stream
// over the bounds of its peer, its connection's network or its IPv6 /32
// (counts; loopback exempt from the groups unless limitLoopback) is
// reset at once, the others are read through dhtRequestStream.
func dhtStreamHandler(h network.StreamHandler, counts *streamCounts, limitLoopback bool) network.StreamHandler {
	return func(s network.Stream) {
		p := s.Conn().RemotePeer()
		nets, _ := netsOf(s.Conn().RemoteMultiaddr(), limitLoopback)
		if !counts.acquire(p, nets) {
			_ = s.ResetWithError(network.StreamResourceLimitExceeded)
			return
		}
		defer counts.release(p, nets)
		h(&dhtRequestStream{Stream: s})
	}
}

// SetStreamHandler installs the DHT's handler of protocol pid
// (dhtStreamHandler).
func (h dhtHost) SetStreamHandler(pid lpproto.ID, handler network.StreamHandler) {
	h.Host.SetStreamHandler(pid, dhtStreamHandler(handler, h.streams, h.limitLoopback))
}

// dhtRequestStream follows the varint-delimited requests read from an
// inbound DHT stream and resets the stream, returning an error, as soon
// as a length prefix announces more than maxDHTRequest: before the DHT's
// reader, which reads a prefix a byte at a time, can take a buffer of it.
type dhtRequestStream struct {
	network.Stream
	frames msgFramer
}

func (s *dhtRequestStream) Read(p []byte) (int, error) {
	n, err := s.Stream.Read(p)
	switch ferr := s.frames.feed(p[:n], maxDHTRequest, nil, nil); {
	case errors.Is(ferr, errMalformedPrefix):
		return s.refuse(fmt.Errorf("%w: malformed length prefix", errDHTRequestSize))
	case ferr != nil:
		return s.refuse(fmt.Errorf("%w: more than %d bytes announced, %d read at most", errDHTRequestSize, maxDHTRequest, maxDHTRequest))
	}
	return n, err
}

func (s *dhtRequestStream) refuse(err error) (int, error) {
	_ = s.Stream.Reset()
	return 0, err
}
