package peer

import (
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/bounded"
)

// Who came to whom (spec/protocol.md §5b, §5c). libp2p's connection
// direction does not say it: once a peer reached a node behind NAT through
// a relay, the node's hole punch dials the peer, and the direct connection
// the sessions then use is outbound at the node. So the node remembers
// what it did itself, for as long as it stays connected to the peer:
//
//   - asked: it asked the peer to verify it (Attest). Only such a peer's
//     sessions are answered as asked for; a discovery dial asks nothing
//     (a script that advertises itself on the DHT or over mDNS must not
//     get the node's answerer by being dialed).
//   - contacted: it came to the peer (Attest, Verify, a bootstrap or
//     discovery dial). Only such a prover's payment (§5b) is paid.
//
// Dials made by libp2p's own services (hole punching, the DHT's routing,
// relays) count as neither. And it remembers the peers that declined its
// own sessions VERIFY_FIRST (§5c), so that two verify-first nodes that
// came to each other do not wait for each other for ever (mutualWait).

// maxSolicited bounds each set of peers remembered; a full set forgets a
// sixteenth at once (bounded.MakeRoom: one scan per 256 new peers), in
// the declined sets those older than mutualWaitFor first, which count
// for nothing any more; then any (a dropped peer is then one that came,
// or that did not decline us: the stricter side). A flood of fresh peer
// IDs declined VERIFY_FIRST then pushes out stale entries before the
// recent ones of honest peers.
const maxSolicited = 4096

// mutualWaitFor is how long a peer's VERIFY_FIRST decline of our session
// counts for mutualWait.
const mutualWaitFor = 5 * time.Minute

type solicitState struct {
	mu        sync.Mutex
	asked     peerSet
	contacted peerSet
	requested peerSet // explicit Verify or Attest: paid up to the maximum
	declined  peerSet // when each declined our session VERIFY_FIRST
	declinedB peerSet // when we declined each one's session VERIFY_FIRST
}

// peerSet is a bounded map of peers to when they were added.
type peerSet map[peer.ID]time.Time

func (s *peerSet) add(p peer.ID, now time.Time) {
	if *s == nil {
		*s = peerSet{}
	}
	if _, ok := (*s)[p]; !ok {
		bounded.MakeRoom(*s, maxSolicited, func(at time.Time) bool { return now.Sub(at) > mutualWaitFor })
	}
	(*s)[p] = now
}

// recent reports whether p was added within d.
func (s peerSet) recent(p peer.ID, d time.Duration) bool {
	at, ok := s[p]
	return ok && time.Since(at) <= d
}

// note adds p to the set chosen by which, under the state's lock.
func (n *Node) note(p peer.ID, which func(*solicitState) *peerSet) {
	s := &n.solicited
	s.mu.Lock()
	defer s.mu.Unlock()
	which(s).add(p, time.Now())
}

// solicit records that this node comes to p on its own initiative,
// whether it asks p to verify it (Attest), and whether its caller asked
// for it explicitly (Verify, Attest; not a discovery dial).
func (n *Node) solicit(p peer.ID, askVerify, requested bool) {
	s := &n.solicited
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.contacted.add(p, now)
	if askVerify {
		s.asked.add(p, now)
	}
	if requested {
		s.requested.add(p, now)
	}
}

// requestedByUs reports whether this node's caller asked to verify p
// (Verify, Attest) and the node has stayed connected to p since
// (protocol.Config.Requested).
func (n *Node) requestedByUs(p peer.ID) bool {
	return n.holds(p, func(s *solicitState) peerSet { return s.requested })
}

// holds reports whether p is in the set chosen by which, under the
// state's lock.
func (n *Node) holds(p peer.ID, which func(*solicitState) peerSet) bool {
	s := &n.solicited
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := which(s)[p]
	return ok
}

// askedToVerify reports whether this node asked p to verify it and has
// stayed connected to it since (protocol.Config.Solicited).
func (n *Node) askedToVerify(p peer.ID) bool {
	return n.holds(p, func(s *solicitState) peerSet { return s.asked })
}

// noteVerifyFirst records that p declined our session VERIFY_FIRST.
func (n *Node) noteVerifyFirst(p peer.ID) {
	n.note(p, func(s *solicitState) *peerSet { return &s.declined })
}

// noteDeclinedByUs records that our prover declined p's session
// VERIFY_FIRST (for waitingProver).
func (n *Node) noteDeclinedByUs(p peer.ID) {
	n.note(p, func(s *solicitState) *peerSet { return &s.declinedB })
}

// contactedByUs reports whether this node came to p on its own
// initiative and has stayed connected since (protocol.Config.Contacted):
// its verifier pays p's payment (spec §5b).
func (n *Node) contactedByUs(p peer.ID) bool {
	return n.holds(p, func(s *solicitState) peerSet { return s.contacted })
}

// waitingProver reports whether either of this node and p declined the
// other's session VERIFY_FIRST within mutualWaitFor
// (protocol.Config.MutualWaitProver): two verify-first nodes that met
// without either asking the other, the one waiting answers the other
// against a payment (mutualWait on its side, whichever declined first),
// so this node's verifier pays p too, after p paid the proof of work of
// at least protocol.MutualWaitPayDifficulty it asks such a prover. A
// peer gets this node to pay only for sessions this node opens on its
// own, within its draw shares and the payment budgets.
func (n *Node) waitingProver(p peer.ID) bool {
	s := &n.solicited
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.declined.recent(p, mutualWaitFor) || s.declinedB.recent(p, mutualWaitFor)
}

// mutualWait reports whether p, which came to us and which we have not
// accepted, waits for us as we wait for it (protocol.Config.MutualWait):
// it declined our own session VERIFY_FIRST within mutualWaitFor, and no
// session of ours with p runs now (while one does, p gets no answer: it
// could hand our own challenges back to us). Two verify-first nodes that
// met without either asking the other then answer each other, against
// the payment of spec §5c.
func (n *Node) mutualWait(p peer.ID) bool {
	s := &n.solicited
	s.mu.Lock()
	waiting := s.declined.recent(p, mutualWaitFor)
	s.mu.Unlock()
	if !waiting {
		return false
	}
	n.mu.Lock()
	_, running := n.inflight[p]
	n.mu.Unlock()
	return !running
}

// forgetSolicited drops p once no connection to it is left.
func (n *Node) forgetSolicited(p peer.ID) {
	if c := n.host.Network().Connectedness(p); c == network.Connected || c == network.Limited {
		return
	}
	s := &n.solicited
	s.mu.Lock()
	delete(s.asked, p)
	delete(s.contacted, p)
	delete(s.requested, p)
	delete(s.declined, p)
	delete(s.declinedB, p)
	s.mu.Unlock()
}

// watchSolicited forgets a peer this node contacted when it disconnects.
func (n *Node) watchSolicited() {
	n.host.Network().Notify(&network.NotifyBundle{
		DisconnectedF: func(_ network.Network, c network.Conn) { n.forgetSolicited(c.RemotePeer()) },
	})
}
