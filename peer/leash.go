package peer

// The first-contact leash (issue 10, finding 8): a verifier session holds
// one of the MaxConcurrentAttest slots only until the peer answers the
// hello. The protocol service sees the host through leashHost, which wraps
// the streams it opens on the attestation protocol to peers with a leashed
// session, so the node learns when the peer's first frame has arrived
// without a hook in the protocol package.
//
// The answer is a complete frame (its varint length and that many bytes),
// not its first byte: a peer that wrote one byte of a length prefix and
// fell silent kept its slot for the whole handshake timeout. A complete
// first frame either is a hello ack the verifier goes on with (paid, a
// set drawn) or ends the session at once (a decline, a malformed or
// unpaid ack).

import (
	"context"
	"net/netip"
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
	// nets are the network groups of p's connection when the session
	// started: they go into probation if p stays silent past the leash.
	nets addrNets

	mu      sync.Mutex
	timer   *time.Timer
	heard   bool // the peer answered
	slipped bool // the slot was given up before it answered
	done    bool
}

// leashSession registers a leash for the session first contact is about
// to run with p, whose connection is in nets; release gives its slot
// back.
func (n *Node) leashSession(p peer.ID, nets addrNets, release func()) *leash {
	l := &leash{n: n, p: p, release: release, nets: nets}
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

// opened starts the leash when the session's stream starts to open.
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
	l.n.slipping(l.nets, +1)
	l.mu.Unlock()
	l.release()
	// Fresh peer IDs of the same network wait for probation from now on,
	// not from the end of this session (the handshake timeout), but only
	// while this peer stays silent: one that answers late (a slow link, a
	// hard proof of work) takes the mark back, and only a session that
	// fails puts its network in probation for contactSilentNetFor
	// (firstContact).
	l.n.metrics.count(func(m *metrics) *atomic.Uint64 { return &m.contactLeashed })
	l.n.log.Debug("first contact: peer silent past the leash; slot given up", "peer", l.p, "leash", l.n.t.contactLeash)
}

func (l *leash) answered() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.slipped && !l.heard && !l.done {
		l.n.slipping(l.nets, -1)
	}
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
	if l.slipped && !l.heard && !l.done {
		l.n.slipping(l.nets, -1)
	}
	l.done = true
	if l.timer != nil {
		l.timer.Stop()
	}
	return l.slipped
}

// slipping counts the leashed sessions of nets' network whose peer is
// silent past the leash (d +1 when one slips, -1 when it answers or
// ends): while any is, the network counts as in probation
// (inSilentNets). Entries exist only while such sessions run, at most one
// per first-contact worker.
func (n *Node) slipping(nets addrNets, d int) {
	if !nets.prefix.IsValid() {
		return
	}
	c := &n.contact
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.slipping == nil {
		c.slipping = map[netip.Prefix]int{}
	}
	if c.slipping[nets.prefix] += d; c.slipping[nets.prefix] <= 0 {
		delete(c.slipping, nets.prefix)
	}
}

// leashHost is the host the protocol service uses: streams it opens on
// the attestation protocol to a peer with a leashed session report the
// peer's first answer to the leash.
type leashHost struct {
	host.Host
	n *Node
}

func (h leashHost) NewStream(ctx context.Context, p peer.ID, pids ...lpproto.ID) (network.Stream, error) {
	if !slices.Contains(pids, protocol.ID) {
		return h.Host.NewStream(ctx, p, pids...)
	}
	l := h.n.leashFor(p)
	if l != nil {
		// From the open's start, not its end: opening is bounded by
		// twice the handshake timeout only, and a peer that never
		// answers the negotiation (or, over QUIC, grants no stream
		// credit) held the slot for all of it (audit-82).
		l.opened()
	}
	s, err := h.Host.NewStream(ctx, p, pids...)
	if err != nil || l == nil {
		return s, err
	}
	return &leashedStream{Stream: s, l: l}, nil
}

// leashedStream tells the leash when the peer's first complete frame has
// been read.
type leashedStream struct {
	network.Stream
	l     *leash
	heard atomic.Bool

	mu    sync.Mutex // guards frame (reads come from one goroutine)
	frame frameWatch
}

func (s *leashedStream) Read(b []byte) (int, error) {
	k, err := s.Stream.Read(b)
	if k > 0 && !s.heard.Load() {
		s.mu.Lock()
		done := s.frame.feed(b[:k])
		s.mu.Unlock()
		if done && !s.heard.Swap(true) {
			s.l.answered()
		}
	}
	return k, err
}

// frameWatch follows the framing of the bytes a prover sends (spec
// §2: an unsigned-varint length, then that many bytes) far enough to tell
// when the first frame is complete.
type frameWatch struct {
	length uint64 // the length prefix read so far
	shift  uint
	// body: the prefix is complete and left bytes of the body are due.
	body bool
	left uint64
	// broken: an overflowing or oversized prefix, never complete (the
	// verifier ends the session on it).
	broken bool
}

// feed reads b and reports whether the first frame is complete.
func (w *frameWatch) feed(b []byte) bool {
	for len(b) > 0 && !w.broken {
		if !w.body {
			c := b[0]
			b = b[1:]
			w.length |= uint64(c&0x7f) << w.shift
			w.shift += 7
			switch {
			case c&0x80 != 0 && w.shift >= 63, c&0x80 == 0 && w.length > protocol.MaxProverFrame:
				w.broken = true
			case c&0x80 == 0:
				w.body, w.left = true, w.length
				if w.left == 0 {
					return true
				}
			}
			continue
		}
		k := min(uint64(len(b)), w.left)
		w.left -= k
		b = b[k:]
		if w.left == 0 {
			return true
		}
	}
	return false
}
