package peer

// The first-contact leash (issue 10, finding 8): a verifier session holds
// one of the MaxConcurrentAttest slots only until the peer answers the
// hello. The protocol service sees the host through leashHost, which wraps
// the streams it opens on the attestation protocol to peers with a leashed
// session, so the node learns when the peer's first frame arrives without
// a hook in the protocol package.

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	lpproto "github.com/libp2p/go-libp2p/core/protocol"

	"github.com/acaptcha/acaptcha/protocol"
)

// leash is one first-contact session waiting for the peer's first answer.
type leash struct {
	n       *Node
	p       peer.ID
	release func() // gives the session's slot back (idempotent)

	mu      sync.Mutex
	timer   *time.Timer
	heard   bool // the peer answered
	slipped bool // the slot was given up before it answered
	done    bool
}

// leashSession registers a leash for the session first contact is about
// to run with p; release gives its slot back.
func (n *Node) leashSession(p peer.ID, release func()) *leash {
	l := &leash{n: n, p: p, release: release}
	c := &n.contact
	c.mu.Lock()
	c.leashes[p] = l
	c.mu.Unlock()
	return l
}

func (n *Node) leashFor(p peer.ID) *leash {
	c := &n.contact
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leashes[p]
}

// opened starts the leash when the session's stream is open.
func (l *leash) opened() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done || l.heard || l.timer != nil {
		return
	}
	l.timer = time.AfterFunc(l.n.t.contactLeash, l.expire)
}

func (l *leash) expire() {
	l.mu.Lock()
	if l.done || l.heard {
		l.mu.Unlock()
		return
	}
	l.slipped = true
	l.mu.Unlock()
	l.release()
	l.n.metrics.count(func(m *metrics) *atomic.Uint64 { return &m.contactLeashed })
	l.n.log.Debug("first contact: peer silent past the leash; slot given up", "peer", l.p, "leash", l.n.t.contactLeash)
}

func (l *leash) answered() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.heard = true
	if l.timer != nil {
		l.timer.Stop()
	}
}

// end unregisters the leash and reports whether the peer stayed silent
// past it.
func (l *leash) end() (silent bool) {
	c := &l.n.contact
	c.mu.Lock()
	if c.leashes[l.p] == l {
		delete(c.leashes, l.p)
	}
	c.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
	if l.timer != nil {
		l.timer.Stop()
	}
	return l.slipped
}

// leashHost is the host the protocol service uses: streams it opens on
// the attestation protocol to a peer with a leashed session report the
// peer's first answer to the leash.
type leashHost struct {
	host.Host
	n *Node
}

func (h leashHost) NewStream(ctx context.Context, p peer.ID, pids ...lpproto.ID) (network.Stream, error) {
	s, err := h.Host.NewStream(ctx, p, pids...)
	if err != nil || !slices.Contains(pids, protocol.ID) {
		return s, err
	}
	l := h.n.leashFor(p)
	if l == nil {
		return s, nil
	}
	l.opened()
	return &leashedStream{Stream: s, l: l}, nil
}

type leashedStream struct {
	network.Stream
	l     *leash
	heard atomic.Bool
}

func (s *leashedStream) Read(b []byte) (int, error) {
	k, err := s.Stream.Read(b)
	if k > 0 && !s.heard.Swap(true) {
		s.l.answered()
	}
	return k, err
}
