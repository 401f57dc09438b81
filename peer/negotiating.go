package peer

// Inbound streams before their protocol is negotiated (spec/protocol.md
// §9a, "Streams in negotiation").
//
// libp2p's resource manager counts a new inbound stream in its transient
// scope until the stream's protocol is negotiated (multistream-select,
// up to the host's negotiation timeout of 10 s), and that scope is
// shared by every peer with no share per peer or per network: one peer
// that opened 504 streams on one connection and wrote no protocol
// header had every other peer's new stream, to any protocol, reset for
// resource limits until the timeout, and could open them again at once.
// negotiationRM bounds the streams in negotiation of one peer, of one
// budget group (IPv4 /24, IPv6 /48 or relay network, as the protocol's
// budgets; loopback exempt unless Config.LimitLoopback) and of one IPv6
// /32; the transient scope holds negotiatingPerConn of every inbound
// connection the node accepts (connLimitConfig), so that filling it
// takes that many connections' worth of networks.

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	circuit "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/proto"

	acprotocol "github.com/acaptcha/acaptcha/protocol"
)

const (
	// maxNegotiatingPerPeer bounds one peer's inbound streams whose
	// protocol is not negotiated yet. An honest peer's stream carries
	// its protocol header in its first write (go-libp2p negotiates
	// lazily), so it holds none for longer than a round trip.
	maxNegotiatingPerPeer = 8
	// maxNegotiatingPerGroup bounds those of the peers of one budget
	// group together (peer IDs are free), maxNegotiatingPerBlock those
	// of one IPv6 /32 (protocol.BlockFactor groups' worth).
	maxNegotiatingPerGroup = 32
	maxNegotiatingPerBlock = acprotocol.BlockFactor * maxNegotiatingPerGroup
	// negotiatingPerConn is the room of the transient scope for inbound
	// streams per inbound connection the node accepts.
	negotiatingPerConn = 4
)

// errNegotiating refuses an inbound stream over a bound of
// negotiationRM; the swarm resets it StreamResourceLimitExceeded.
// errStopNotRelay resets a stop stream of a peer that is not one of the
// node's relays.
var errStopNotRelay = fmt.Errorf("%w: stop streams are taken from this node's relays only", network.ErrResourceLimitExceeded)

var errNegotiating = fmt.Errorf("%w: inbound streams awaiting their protocol of this peer, its network or its IPv6 /32 at their cap", network.ErrResourceLimitExceeded)

// negotiationRM is the node's resource manager with the bounds of
// inbound streams in negotiation.
type negotiationRM struct {
	network.ResourceManager
	// nets returns the groups of a peer (set once the host exists;
	// until then only the per-peer bound applies).
	nets   atomic.Pointer[func(peer.ID) addrNets]
	counts *streamCounts
	// services counts the negotiated inbound streams of the libp2p
	// services bounded per network (servicebounds.go), by protocol.
	services map[protocol.ID]*streamCounts
	// gate, when set (before the host runs), is the node's connection
	// gater: only its relays (Config.Relays) have their inbound stop
	// streams (circuit.ProtoIDv2Stop) served, as only their relayed
	// connections are let in (gate.go); go-libp2p's circuit client read
	// a stop stream of any peer for up to a minute first, 128 a peer,
	// with no share per network. Without a gate no peer is a relay.
	gate *nodeGater
}

// newNegotiationRM wraps rm; attestPerPeer is the inbound streams of the
// attestation service one peer may hold (attestStreamsPerPeer): a node
// configured for more sessions per peer than maxNegotiatingPerPeer lets
// a peer open that many at once.
func newNegotiationRM(rm network.ResourceManager, attestPerPeer int) *negotiationRM {
	perPeer := max(maxNegotiatingPerPeer, attestPerPeer)
	perGroup := max(maxNegotiatingPerGroup, perPeer)
	perBlock := max(maxNegotiatingPerBlock, acprotocol.BlockFactor*perGroup)
	return &negotiationRM{ResourceManager: rm, counts: newStreamCounts(perPeer, perGroup, perBlock, 0), services: serviceBounds()}
}

// setNets sets how a peer's groups are found.
func (r *negotiationRM) setNets(f func(peer.ID) addrNets) { r.nets.Store(&f) }

// OpenStream counts an inbound stream against its peer's, network's and
// /32's bounds until its protocol is set or it ends.
func (r *negotiationRM) OpenStream(p peer.ID, dir network.Direction) (network.StreamManagementScope, error) {
	if dir != network.DirInbound {
		return r.ResourceManager.OpenStream(p, dir)
	}
	var nets addrNets
	if f := r.nets.Load(); f != nil {
		nets = (*f)(p)
	}
	if !r.counts.acquire(p, nets) {
		return nil, errNegotiating
	}
	s, err := r.ResourceManager.OpenStream(p, dir)
	if err != nil {
		r.counts.release(p, nets)
		return nil, err
	}
	ns := &negotiatingScope{StreamManagementScope: s, peer: p, nets: nets, services: r.services, gate: r.gate}
	ns.release = func() { r.counts.release(p, nets) }
	return ns, nil
}

// negotiating reports the inbound streams in negotiation: in all, and
// the most of one peer and of one group.
func (r *negotiationRM) negotiating() (total, maxPeer, maxGroup int) {
	return r.counts.held()
}

// negotiatingScope is a stream's scope that gives its place back when
// the stream's protocol is set (negotiated) or when it ends. A protocol
// of services is counted in its streamCounts from then until the
// stream ends; over its bounds, SetProtocol fails and the host resets
// the stream before its handler runs.
type negotiatingScope struct {
	network.StreamManagementScope
	once    sync.Once
	release func()

	peer     peer.ID
	nets     addrNets
	services map[protocol.ID]*streamCounts
	gate     *nodeGater // may be nil
	mu       sync.Mutex
	service  *streamCounts // the count holding the stream, if any
	done     bool
}

func (s *negotiatingScope) SetProtocol(proto protocol.ID) error {
	s.once.Do(s.release)
	if proto == circuit.ProtoIDv2Stop && !s.gate.allowStop(s.peer) {
		return errStopNotRelay
	}
	if c := s.services[proto]; c != nil {
		s.mu.Lock()
		switch {
		case s.done || s.service != nil:
			// Ended, or set twice: counted once at most.
		case !c.acquire(s.peer, s.nets):
			s.mu.Unlock()
			return fmt.Errorf("%w: inbound %s streams of this peer, its network or its IPv6 /32 at their cap", network.ErrResourceLimitExceeded, proto)
		default:
			s.service = c
		}
		s.mu.Unlock()
	}
	return s.StreamManagementScope.SetProtocol(proto)
}

func (s *negotiatingScope) Done() {
	s.once.Do(s.release)
	s.mu.Lock()
	if s.service != nil {
		s.service.release(s.peer, s.nets)
		s.service = nil
	}
	s.done = true
	s.mu.Unlock()
	s.StreamManagementScope.Done()
}
