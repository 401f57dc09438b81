package peer

import (
	"net/netip"
	"sync/atomic"

	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/acaptcha/acaptcha/protocol"
)

// nodeGater is the host's connection gater. It refuses an inbound
// circuit-relayed connection unless its relay is one of Config.Relays,
// the only relays the node reserves a slot with (nat.go), and otherwise
// defers to the gater of rejected peers (Config.BlockRejected), if any.
//
// go-libp2p's circuit-v2 client accepts a relayed connection from any
// connected peer that opens the relay's stop protocol to this node,
// whether or not the node holds a reservation with it: one host could
// pose as relays and deliver connections of fresh peer IDs over one TCP
// connection. Those relays' groups are bounded by their network
// (protocol.RelayGroup), and this gate refuses them before their
// security handshake (spec/protocol.md §13). Outbound relayed
// connections (this node dialing a peer's circuit address) are not
// gated here: the relay is the remote peer's choice, and its group is
// the relay's network.
type nodeGater struct {
	relays  map[peer.ID]bool
	blocked connmgr.ConnectionGater // nil unless BlockRejected
	refused atomic.Uint64           // relayed connections refused
	// publicOnly refuses dials to addresses that are not public
	// (Config.DialPublicOnly); refusedDials counts them.
	publicOnly   bool
	refusedDials atomic.Uint64
}

var _ connmgr.ConnectionGater = (*nodeGater)(nil)

func (g *nodeGater) InterceptPeerDial(p peer.ID) bool {
	return g.blocked == nil || g.blocked.InterceptPeerDial(p)
}

// InterceptAddrDial sees an address after the swarm resolved its DNS
// names (go-libp2p's addrsForDial resolves, then filters): with
// Config.DialPublicOnly an address whose IP is private, loopback,
// link-local or otherwise not public is refused, whoever named it (a DHT
// record's DNS name that resolves to one included). A circuit address is
// left to the dial of its relay, which is gated by the relay's own
// resolved address; any other address that does not start with an IP
// (a transport that resolves names itself) is refused.
func (g *nodeGater) InterceptAddrDial(p peer.ID, a ma.Multiaddr) bool {
	if g.publicOnly && !dialablePublic(a) {
		g.refusedDials.Add(1)
		return false
	}
	return g.blocked == nil || g.blocked.InterceptAddrDial(p, a)
}

// dialablePublic reports whether a may be dialed under DialPublicOnly.
func dialablePublic(a ma.Multiaddr) bool {
	if _, relayed := protocol.CircuitRelay(a); relayed {
		return true
	}
	if len(a) == 0 {
		return false
	}
	switch a[0].Code() {
	case ma.P_IP4, ma.P_IP6:
	default:
		return false
	}
	ip, ok := netip.AddrFromSlice(a[0].RawValue())
	if !ok {
		return false
	}
	// A NAT64 address reaches the IPv4 host it carries (a DNS64 answer
	// for a private A record is one): judge that host. The local-use
	// prefix 64:ff9b:1::/48 carries it where no rule says, so it is
	// refused; IPv4-mapped addresses are their IPv4 address.
	ip = protocol.GroupAddr(ip)
	if ip.Is6() && nat64Space.Contains(ip) {
		return false
	}
	m, err := manet.FromIP(ip.AsSlice())
	return err == nil && manet.IsPublicAddr(m)
}

// nat64Space is the /32 of the NAT64 prefixes (the well-known
// 64:ff9b::/96, which GroupAddr maps to IPv4, and the local-use
// 64:ff9b:1::/48).
var nat64Space = netip.MustParsePrefix("64:ff9b::/32")

// InterceptAccept runs before the security handshake of an inbound
// connection: a relayed one names its relay (the authenticated peer of
// the connection the relay's stop stream came on) in its remote address.
func (g *nodeGater) InterceptAccept(addrs network.ConnMultiaddrs) bool {
	if relay, relayed := protocol.CircuitRelay(addrs.RemoteMultiaddr()); relayed && !g.relays[relay] {
		g.refused.Add(1)
		return false
	}
	return g.blocked == nil || g.blocked.InterceptAccept(addrs)
}

// allowStop reports whether p's inbound stop streams are served: p is
// one of the node's relays, whose relayed connections InterceptAccept
// lets in. A stop stream of any other peer would deliver a connection
// refused there, and counts as one refused (negotiating.go). A nil gater
// has no relays.
func (g *nodeGater) allowStop(p peer.ID) bool {
	if g == nil {
		return false
	}
	if !g.relays[p] {
		g.refused.Add(1)
		return false
	}
	return true
}

func (g *nodeGater) InterceptSecured(d network.Direction, p peer.ID, addrs network.ConnMultiaddrs) bool {
	return g.blocked == nil || g.blocked.InterceptSecured(d, p, addrs)
}

func (g *nodeGater) InterceptUpgraded(c network.Conn) (bool, control.DisconnectReason) {
	if g.blocked == nil {
		return true, 0
	}
	return g.blocked.InterceptUpgraded(c)
}
