package peer

// Reservations of the relay service (Config.RelayService) per network.
//
// circuit v2's relay holds RelayServiceResources().MaxReservations
// reservations, each for an hour that its holder refreshes, bounded per
// IP address (4) and, for IPv6, per ASN when its table knows the address;
// nothing bounds those of one IPv4 /24 or one IPv6 /48 of unknown ASN: 16
// addresses of one /24 with fresh peer IDs behind each held all 64, and a
// peer of any other network was refused RESERVATION_REFUSED for as long
// as they refreshed. relayACL (the relay's ACL filter) lets the peers of
// one budget group (IPv4 /24, IPv6 /48, relay network; loopback exempt
// unless Config.LimitLoopback) hold at most maxRelayRsvpPerGroup
// reservations and those of one IPv6 /32 BlockFactor times as many. A
// reservation counts from the filter's yes until its TTL runs out or its
// holder is no longer connected (the relay drops a reservation when its
// holder disconnects); a holder's refresh keeps its place.

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	acprotocol "github.com/acaptcha/acaptcha/protocol"
)

// maxRelayRsvpPerGroup bounds the relay reservations of one network: an
// eighth of the relay's 64.
const maxRelayRsvpPerGroup = 8

// relayACL is the relay service's ACL filter (relayv2.WithACL).
type relayACL struct {
	limitLoopback bool
	ttl           time.Duration
	max           int // table size: the relay's reservations, twice
	now           func() time.Time
	host          atomic.Pointer[host.Host] // set once the host runs

	mu   sync.Mutex
	held map[peer.ID]relayHold
}

type relayHold struct {
	nets  addrNets
	until time.Time
}

func newRelayACL(limitLoopback bool) *relayACL {
	r := RelayServiceResources()
	return &relayACL{limitLoopback: limitLoopback, ttl: r.ReservationTTL, max: 2 * r.MaxReservations,
		now: time.Now, held: map[peer.ID]relayHold{}}
}

func (a *relayACL) setHost(h host.Host) { a.host.Store(&h) }

// AllowReserve counts p's reservation in its networks, refusing it when
// one of them holds its share (a refresh of p's keeps its place).
func (a *relayACL) AllowReserve(p peer.ID, addr ma.Multiaddr) bool {
	nets, _ := netsOf(addr, a.limitLoopback)
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	var h host.Host
	if hp := a.host.Load(); hp != nil {
		h = *hp
	}
	for q, r := range a.held {
		if q != p && (!now.Before(r.until) || h != nil && h.Network().Connectedness(q) != network.Connected) {
			delete(a.held, q)
		}
	}
	delete(a.held, p)
	if nets.prefix.IsValid() {
		inGroup, inBlock := 0, 0
		for _, r := range a.held {
			if r.nets.prefix == nets.prefix {
				inGroup++
			}
			if nets.block.IsValid() && r.nets.block == nets.block {
				inBlock++
			}
		}
		if inGroup >= maxRelayRsvpPerGroup || inBlock >= acprotocol.BlockFactor*maxRelayRsvpPerGroup {
			return false
		}
	}
	if len(a.held) >= a.max {
		// More than the relay holds: it refuses them anyway.
		return false
	}
	a.held[p] = relayHold{nets: nets, until: now.Add(a.ttl)}
	return true
}

// AllowConnect leaves circuits to the relay's own limits and the hop
// streams' bounds (servicebounds.go).
func (a *relayACL) AllowConnect(peer.ID, ma.Multiaddr, peer.ID) bool { return true }
