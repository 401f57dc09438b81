package peer

// NAT traversal (issue 12): a node behind a NAT reaches and is reached by
// others the way other go-libp2p applications are.
//
//   - Config.NAT turns on hole punching (DCUtR, /libp2p/dcutr), AutoNAT v2
//     (client and server: which of our addresses are reachable), the
//     AutoNAT v1 service (other nodes learn whether they are reachable;
//     AutoRelay and the relay service act on that verdict) and UPnP /
//     NAT-PMP port mapping on the home router.
//   - Config.Relays are static circuit-v2 relays: when AutoNAT finds the
//     node unreachable it reserves a slot with them and advertises
//     <relay>/p2p/<relay-id>/p2p-circuit addresses.
//   - Config.RelayService makes a publicly reachable node a circuit-v2
//     relay for others, with RelayServiceResources.
//
// A peer reached only through a relay is connected by a limited
// connection: the relay resets it after RelayLimit.Duration or once
// RelayLimit.Data bytes went through it in either direction (circuit v2
// defaults: 2 min and 128 KiB). The attestation and presentation streams
// are opened with network.WithAllowLimitedConn, so a session runs over
// such a connection when nothing better exists. A mutual attestation
// with the example sets moves about 25 KB through the relay, both ways
// together (nat_test.go measures it), well inside the data limit; the
// worst case, three 32 KiB narratives each way, still fits. Attest and
// first contact first give hole punching DirectConnWait to turn the
// relayed connection into a direct one, and refuse (ErrRelayBudget) a
// relayed connection whose relay would reset it before a session could
// end (sessionWallBound: 60 s under the default policy, against the
// relay's 2 min). When a relay does cut a connection mid-session, the
// streams on it are reset as any broken stream: before the first
// challenge the verifier ends with a network error (protocol.ErrNetwork)
// and signs nothing; after it, it signs a protocol_error rejection
// (spec/protocol.md, "peek and abort": a prover could otherwise run its
// own relay to abort a session it is failing). The next contact opens a
// fresh relayed connection. GossipSub never uses limited connections
// (go-libp2p-pubsub waits for a direct one), so gossip flows only between
// peers that reach each other directly or after a hole punch.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	relayclient "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// DirectConnWait bounds how long Attest waits, when it reached a peer
// only through a relay and both sides can hole-punch, for a direct
// connection before it runs the session over the relayed one.
const DirectConnWait = 5 * time.Second

// ErrRelayAddr is wrapped by every invalid Config.Relays entry.
var ErrRelayAddr = errors.New("invalid relay address")

// ParseRelays parses static relay multiaddrs (Config.Relays, the CLI's
// --relay): each must name the relay's peer ID (/p2p/ID) and reach it
// directly (no /p2p-circuit). Addresses of one relay are merged.
func ParseRelays(addrs []string) ([]peer.AddrInfo, error) {
	mas := make([]ma.Multiaddr, 0, len(addrs))
	for _, s := range addrs {
		m, err := ma.NewMultiaddr(s)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %w", ErrRelayAddr, s, err)
		}
		if _, err := m.ValueForProtocol(ma.P_CIRCUIT); err == nil {
			return nil, fmt.Errorf("%w %q: a relay must be reachable directly, not through /p2p-circuit", ErrRelayAddr, s)
		}
		if _, err := peer.AddrInfoFromP2pAddr(m); err != nil {
			return nil, fmt.Errorf("%w %q (want a multiaddr ending in /p2p/PEER_ID): %w", ErrRelayAddr, s, err)
		}
		mas = append(mas, m)
	}
	ais, err := peer.AddrInfosFromP2pAddrs(mas...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRelayAddr, err)
	}
	for _, ai := range ais {
		if len(ai.Addrs) == 0 {
			return nil, fmt.Errorf("%w %s: no transport address, only a peer ID", ErrRelayAddr, ai.ID)
		}
	}
	return ais, nil
}

// RelayServiceResources are the limits of the relay service a node runs
// with Config.RelayService: circuit v2's defaults for each relayed
// connection (2 min, 128 KiB each way: the limits every public relay
// applies, which an attestation session is sized to fit; larger ones
// would make the node a free bulk relay), and fewer slots than libp2p's
// 128, since relaying is a side job of an acaptcha node. Streams and
// memory of the service are further bounded by the resource manager's
// "libp2p.relay/v2" service limits.
func RelayServiceResources() relayv2.Resources {
	r := relayv2.DefaultResources()
	r.Limit = relayv2.DefaultLimit()
	r.MaxReservations = 64
	r.MaxCircuits = 8
	r.MaxReservationsPerIP = 4
	r.MaxReservationsPerASN = 16
	return r
}

// natOptions returns the libp2p options of cfg's NAT settings; key is the
// node's identity (a node is not its own relay). With the relay service
// it sets *relayACLOut to the service's ACL filter, whose host is set
// once the host runs.
func natOptions(cfg *Config, key crypto.PrivKey, relayACLOut **relayACL) ([]libp2p.Option, error) {
	var opts []libp2p.Option
	if cfg.NAT {
		opts = append(opts,
			libp2p.EnableHolePunching(),
			libp2p.EnableAutoNATv2(),
			libp2p.EnableNATService(),
			libp2p.NATPortMap(),
		)
	}
	if len(cfg.Relays) > 0 {
		relays, err := ParseRelays(cfg.Relays)
		if err != nil {
			return nil, err
		}
		self, err := peer.IDFromPrivateKey(key)
		if err != nil {
			return nil, fmt.Errorf("relays: node identity: %w", err)
		}
		for _, ai := range relays {
			if ai.ID == self {
				return nil, fmt.Errorf("%w %s: this node itself", ErrRelayAddr, ai)
			}
		}
		opts = append(opts, libp2p.EnableAutoRelayWithStaticRelays(relays))
	}
	if cfg.RelayService {
		acl := newRelayACL(cfg.LimitLoopback) // relaybounds.go
		opts = append(opts, libp2p.EnableRelayService(relayv2.WithResources(RelayServiceResources()), relayv2.WithACL(acl)))
		*relayACLOut = acl
	}
	return opts, nil
}

// awaitDirect gives hole punching up to DirectConnWait to replace a
// relayed (limited) connection to p by a direct one, so that a session
// does not spend the relay's data and time limits. It waits only when
// NAT traversal is on and both sides can hole-punch (a host registers
// /libp2p/dcutr only once it knows a public address of its own). It then
// returns ErrRelayBudget when the only connection left is relayed and its
// relay resets it before a session could end (relayBudget).
func (n *Node) awaitDirect(ctx context.Context, p peer.ID) error {
	h := n.host
	if h.Network().Connectedness(p) != network.Limited {
		return nil
	}
	if n.cfg.NAT && slices.Contains(h.Mux().Protocols(), holepunch.Protocol) {
		if ps, err := h.Peerstore().SupportsProtocols(p, holepunch.Protocol); err == nil && len(ps) > 0 {
			n.waitDirect(ctx, p)
		}
	}
	return n.relayBudget(p, time.Now())
}

func (n *Node) waitDirect(ctx context.Context, p peer.ID) {
	h := n.host
	sub, err := h.EventBus().Subscribe(new(event.EvtPeerConnectednessChanged))
	if err != nil {
		n.log.Debug("await direct connection: subscribe", "peer", p, "err", err)
		return
	}
	defer sub.Close()
	t := time.NewTimer(DirectConnWait)
	defer t.Stop()
	for h.Network().Connectedness(p) == network.Limited {
		select {
		case <-sub.Out():
		case <-t.C:
			n.log.Debug("no direct connection through hole punching; the session runs over the relay", "peer", p, "waited", DirectConnWait)
			return
		case <-ctx.Done():
			return
		}
	}
	n.log.Debug("hole punching opened a direct connection", "peer", p)
}

// ErrRelayBudget reports a relayed connection that its relay would reset
// before a session over it could end.
var ErrRelayBudget = errors.New("relayed connection too short-lived for a session")

// relaySessionMargin covers the hello, the proof of work, the RTT probe
// and the verdict around a session's rounds.
const relaySessionMargin = 15 * time.Second

// sessionWallBound is the longest a session under the node's policy runs:
// its rounds at tau each, or the total budget when tau is derived per
// round or the total is shorter, plus relaySessionMargin.
func (n *Node) sessionWallBound() time.Duration {
	pol := n.cfg.Policy
	d := pol.Total
	if !pol.DeriveTau && time.Duration(pol.Rounds)*pol.Tau < d {
		d = time.Duration(pol.Rounds) * pol.Tau
	}
	return d + relaySessionMargin
}

// relayBudget checks the limits a relay announced for our relayed
// connections to p (circuit v2 tells both ends): a session that the relay
// cuts after its first challenge ends in a signed protocol_error (spec:
// "peek and abort"), so a verifier must not start one on a connection the
// relay resets sooner than sessionWallBound. A data limit below what a
// session may send (its rounds of challenges at skill.MaxNarrativeBytes)
// is only warned about: real sessions send far less (nat_test.go).
func (n *Node) relayBudget(p peer.ID, now time.Time) error {
	need := n.sessionWallBound()
	var best time.Duration
	for _, c := range n.host.Network().ConnsToPeer(p) {
		st := c.Stat()
		if !st.Limited {
			return nil
		}
		left := time.Duration(1<<63 - 1)
		if d, ok := st.Extra[relayclient.StatLimitDuration].(time.Duration); ok && d > 0 {
			left = st.Opened.Add(d).Sub(now)
		}
		if data, ok := st.Extra[relayclient.StatLimitData].(uint64); ok && data > 0 && data < uint64(n.cfg.Policy.Rounds)*skill.MaxNarrativeBytes {
			relay, _ := protocol.CircuitRelay(c.RemoteMultiaddr())
			n.warnRelayLimit(relay, p, data, now)
		}
		best = max(best, left)
	}
	if best < need {
		return fmt.Errorf("%w: the relay resets the connection to %s in %s, a session may take %s (a session the relay cuts is signed protocol_error); retry for a fresh relayed connection or a direct one",
			ErrRelayBudget, p, best.Round(time.Second), need)
	}
	return nil
}

// warnRelayLimit warns that relay's data limit (data bytes) may not
// hold a session, the one with p being the latest met. The limit is the
// relay's, the same for every peer behind it, and every fresh peer ID
// that connects through the relay meets it: the line is written once a
// minute per relay (and within the total budget of remote-triggered
// lines, lograte.go), not once per peer, the rest at DEBUG.
func (n *Node) warnRelayLimit(relay, p peer.ID, data uint64, now time.Time) {
	const msg = "relay data limit may not hold a session with long challenges"
	ok, suppressed, dropped := n.warns.allow(warnKey{relay, msg}, now)
	args := []any{"relay", relay, "peer", p, "relay_limit_bytes", data}
	if !ok {
		n.log.Debug(msg, args...)
		return
	}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	if dropped > 0 {
		args = append(args, "suppressed_other_peers", dropped)
	}
	n.log.Warn(msg, args...)
}

// reachable reports whether the node holds a connection to p, direct or
// relayed (limited): first contact and reciprocal sessions run over
// either.
func (n *Node) reachable(p peer.ID) bool {
	switch n.host.Network().Connectedness(p) {
	case network.Connected, network.Limited:
		return true
	}
	return false
}
