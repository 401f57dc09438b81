package peer

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// largeMsgStream follows the varint-delimited messages read from a
// stream whose reader (libp2p's msgio) takes a buffer of the length a
// message's prefix announces before any of the message arrives: a
// message over small (and at most most, beyond which the reader refuses
// it itself) takes a place in counts from its prefix until its last byte
// is read or the stream ends, and the stream is reset, returning an error
// wrapping busy before the reader sees the prefix, when there is none.
// With wait set, a message that has not arrived whole wait after its
// prefix has its stream reset, giving its place back. The DHT's replies
// (dhtreply.go) and GossipSub's RPCs (gossipstream.go) are read through
// it.
type largeMsgStream struct {
	network.Stream
	small, most uint64
	counts      *streamCounts
	peer        peer.ID
	nets        addrNets
	busy        error
	wait        time.Duration

	frames msgFramer

	mu     sync.Mutex
	placed bool        // a place is held
	timer  *time.Timer // resets the stream when wait runs out
}

func (s *largeMsgStream) Read(p []byte) (int, error) {
	n, err := s.Stream.Read(p)
	ferr := s.frames.feed(p[:n], math.MaxUint64, func(size uint64) error {
		if size > s.small && size <= s.most && !s.place() {
			return fmt.Errorf("%w: %d bytes announced", s.busy, size)
		}
		return nil
	}, s.unplace)
	if ferr != nil && !errors.Is(ferr, errMalformedPrefix) { // the reader refuses a malformed prefix itself
		_ = s.Stream.Reset()
		return 0, ferr
	}
	return n, err
}

// place takes a place for a large message.
func (s *largeMsgStream) place() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.placed {
		return true
	}
	if !s.counts.acquire(s.peer, s.nets) {
		return false
	}
	s.placed = true
	if s.wait > 0 {
		s.timer = time.AfterFunc(s.wait, func() { _ = s.Reset() })
	}
	return true
}

// unplace gives a place back, if one is held.
func (s *largeMsgStream) unplace() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.placed {
		s.placed = false
		s.counts.release(s.peer, s.nets)
		if s.timer != nil {
			s.timer.Stop()
			s.timer = nil
		}
	}
}

func (s *largeMsgStream) Close() error {
	s.unplace()
	return s.Stream.Close()
}

func (s *largeMsgStream) Reset() error {
	s.unplace()
	return s.Stream.Reset()
}

func (s *largeMsgStream) ResetWithError(code network.StreamErrorCode) error {
	s.unplace()
	return s.Stream.ResetWithError(code)
}
