package peer

import (
	"net/netip"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"
)

// streamCounts counts streams held at once per peer, per budget group
// (IPv4 /24, IPv6 /48 or relay network: addrNets.prefix) and per IPv6
// /32 (addrNets.block), each up to its cap, and in all up to total (0:
// no cap of its own); a table holds only the keys with streams, so it is
// as large as the streams it counts. The node's bounded streams share
// it: those in negotiation (negotiating.go), the DHT's (dhtstream.go),
// the presentations in flight (present.go), libp2p's ping, identify
// push and relay hop streams (servicebounds.go), and the large DHT
// replies and GossipSub RPCs being read (largemsg.go).
type streamCounts struct {
	perPeer, perGroup, perBlock, total int

	mu     sync.Mutex
	peers  map[peer.ID]int
	groups map[netip.Prefix]int
	blocks map[netip.Prefix]int
	// n counts the streams held (total's count).
	n int
}

func newStreamCounts(perPeer, perGroup, perBlock, total int) *streamCounts {
	return &streamCounts{perPeer: perPeer, perGroup: perGroup, perBlock: perBlock, total: total,
		peers: map[peer.ID]int{}, groups: map[netip.Prefix]int{}, blocks: map[netip.Prefix]int{}}
}

// acquire counts a stream of p from nets, or reports false, counting
// nothing, when one of their caps is reached.
func (c *streamCounts) acquire(p peer.ID, nets addrNets) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total > 0 && c.n >= c.total || c.peers[p] >= c.perPeer ||
		nets.prefix.IsValid() && c.groups[nets.prefix] >= c.perGroup ||
		nets.block.IsValid() && c.blocks[nets.block] >= c.perBlock {
		return false
	}
	c.n++
	c.peers[p]++
	if nets.prefix.IsValid() {
		c.groups[nets.prefix]++
	}
	if nets.block.IsValid() {
		c.blocks[nets.block]++
	}
	return true
}

// release uncounts a stream acquire counted.
func (c *streamCounts) release(p peer.ID, nets addrNets) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n--
	dec(c.peers, p)
	if nets.prefix.IsValid() {
		dec(c.groups, nets.prefix)
	}
	if nets.block.IsValid() {
		dec(c.blocks, nets.block)
	}
}

// held reports the streams counted: in all, and the most of one peer
// and of one group.
func (c *streamCounts) held() (total, maxPeer, maxGroup int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.peers {
		maxPeer = max(maxPeer, n)
	}
	for _, n := range c.groups {
		maxGroup = max(maxGroup, n)
	}
	return c.n, maxPeer, maxGroup
}

func dec[K comparable](m map[K]int, k K) {
	if m[k] <= 1 {
		delete(m, k)
		return
	}
	m[k]--
}
