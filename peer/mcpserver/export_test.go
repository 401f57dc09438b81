package mcpserver

import (
	ma "github.com/multiformats/go-multiaddr"

	"github.com/acaptcha/acaptcha/peer"
)

func peerDirection(d string) peer.Direction { return peer.Direction(d) }

// PublicDialAddr exposes publicDialAddr to the tests.
func PublicDialAddr(a ma.Multiaddr) error { return publicDialAddr(a) }

// NewestScan is the cached list_attestations pass of every peer for dir
// (nil when none), to tell a reused pass from a new one.
func (s *Server) NewestScan(dir string) any {
	s.scans <- struct{}{}
	defer func() { <-s.scans }()
	if c := s.newest[peerDirection(dir)]; c != nil {
		return c
	}
	return nil
}

// HoldScans takes the listings' turn until release is called.
func (s *Server) HoldScans() (release func()) {
	s.scans <- struct{}{}
	return func() { <-s.scans }
}

// OpenConns counts the connections h.Listener has accepted and not yet
// seen closed.
func (h *HTTPHandler) OpenConns() int {
	h.conns.mu.Lock()
	defer h.conns.mu.Unlock()
	return h.conns.open
}
