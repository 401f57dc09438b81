package peer

import (
	"sync"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Who came to whom (spec/protocol.md §5b, §5c): a verifier that came to
// this node is verified first and pays; one this node contacted was asked
// for its sessions. libp2p's connection direction does not say it: once a
// peer reached a node behind NAT through a relay, the node's hole punch
// dials the peer, and the direct connection the sessions then use is
// outbound at the node. So the node remembers the peers it dialed itself
// (Attest, bootstrap and discovery dials, a Verify of a peer it was not
// connected to) for as long as it stays connected to them; dials made by
// libp2p's own services (hole punching, the DHT's routing) do not count.

// maxSolicited bounds the peers remembered; past it the oldest entries
// are dropped (a dropped peer is then one that came: the stricter side).
const maxSolicited = 4096

type solicitState struct {
	mu    sync.Mutex
	peers map[peer.ID]uint64 // the order each was added in
	next  uint64
}

// solicit records that this node contacts p on its own initiative.
func (n *Node) solicit(p peer.ID) {
	s := &n.solicited
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.peers == nil {
		s.peers = map[peer.ID]uint64{}
	}
	if _, ok := s.peers[p]; !ok && len(s.peers) >= maxSolicited {
		var oldest peer.ID
		first := true
		var oldestAt uint64
		for q, at := range s.peers {
			if first || at < oldestAt {
				oldest, oldestAt, first = q, at, false
			}
		}
		delete(s.peers, oldest)
	}
	s.next++
	s.peers[p] = s.next
}

// solicitedPeer reports whether this node contacted p itself and has
// stayed connected to it since (protocol.Config.Solicited).
func (n *Node) solicitedPeer(p peer.ID) bool {
	s := &n.solicited
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.peers[p]
	return ok
}

// forgetSolicited drops p once no connection to it is left.
func (n *Node) forgetSolicited(p peer.ID) {
	if n.host.Network().Connectedness(p) == network.Connected || n.host.Network().Connectedness(p) == network.Limited {
		return
	}
	s := &n.solicited
	s.mu.Lock()
	delete(s.peers, p)
	s.mu.Unlock()
}

// watchSolicited forgets a peer this node contacted when it disconnects.
func (n *Node) watchSolicited() {
	n.host.Network().Notify(&network.NotifyBundle{
		DisconnectedF: func(_ network.Network, c network.Conn) { n.forgetSolicited(c.RemotePeer()) },
	})
}
