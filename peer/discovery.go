package peer

// Discovery brings peers to the node; first contact (contact.go) then
// attests them. Three sources, each optional:
//
//   - static bootstrap peers (Config.Bootstrap): dialled at start and
//     redialled with exponential backoff whenever the connection is lost;
//   - mDNS on the local network (Config.MDNS), service name "acaptcha"
//     (skipped when the node listens on loopback addresses only);
//   - a Kademlia DHT (Config.DHT) under the private protocol prefix
//     "/acaptcha", so it never joins the public IPFS DHT, with a
//     routing-discovery rendezvous on Config.Rendezvous: the node
//     advertises itself and periodically looks up the others.
//
// Every found peer is dialled on its own goroutine (deduplicated per peer,
// bounded in number); nothing blocks the mDNS or DHT callbacks.
//
// An mDNS announcement is unauthenticated: anyone on the LAN can name any
// peer ID and any addresses. The node dials only the announced addresses
// in the scope mDNS serves (mdnsScope: private and link-local, loopback
// only when the node listens on loopback only), each address at most once
// per mdnsRedialBackoff whatever the peer ID, the addresses of one IP at
// most mdnsHostBurst times (then one per mdnsHostEvery) and all mDNS
// addresses at most mdnsDialBurst times (then one per mdnsDialEvery), so
// announcements cannot make it a port scanner or connection amplifier
// for other hosts. The announcer's own address is not known here (the
// mDNS service hands over the announced peer only), so the bounds are per
// target and in total.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p-kad-dht/records"
	"github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	drouting "github.com/libp2p/go-libp2p/p2p/discovery/routing"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/acaptcha/acaptcha/internal/bounded"
)

// Discovery constants.
const (
	// MDNSServiceName is the mDNS service the nodes announce and browse.
	MDNSServiceName = "acaptcha"
	// DHTProtocolPrefix keeps the node's DHT private to acaptcha nodes
	// (its protocols are /acaptcha/kad/1.0.0).
	DHTProtocolPrefix protocol.ID = "/acaptcha"
	// DefaultRendezvous is the DHT rendezvous namespace when
	// Config.Rendezvous is empty.
	DefaultRendezvous = "acaptcha"
	// TagBootstrap tags bootstrap peers in the connection manager.
	TagBootstrap = "acaptcha-bootstrap"
)

// Timing of discovery (variables so tests can shorten them).
var (
	discoveryDialTimeout = 15 * time.Second
	bootstrapMaxBackoff  = 2 * time.Minute
	rendezvousInterval   = time.Minute
	advertiseMaxBackoff  = 5 * time.Minute
	maxDiscoveryDials    = 8
	rendezvousFindLimit  = 64
	// rendezvousAskLimit is how many results a lookup asks the DHT for,
	// of which rendezvousFindLimit are taken, at most rendezvousPerNet
	// per network (netQuota).
	rendezvousAskLimit = 4 * rendezvousFindLimit
	rendezvousPerNet   = 4
)

type discoveryState struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	bootstrap []peer.AddrInfo
	mdns      mdns.Service
	dht       *dht.IpfsDHT
	dhtStore  *dhtStore

	dialSem  chan struct{}
	mu       sync.Mutex
	dialing  map[peer.ID]bool
	mdnsGate mdnsGate // under mu
	// dhtScope is the scope of the bootstrap addresses as given, widened
	// (scopeWider) by the addresses the bootstrap peers were reached at: a
	// bootstrap peer named by DNS has the scope of what the name resolved
	// to.
	dhtScope   dhtScope
	scopeWider atomic.Uint32 // dhtScopePrivate | dhtScopeLoopback
}

const (
	dhtScopePrivate = 1 << iota
	dhtScopeLoopback
)

// currentDHTScope is the DHT's scope now (see discoveryState.dhtScope).
func (d *discoveryState) currentDHTScope() dhtScope {
	s, w := d.dhtScope, d.scopeWider.Load()
	s.private = s.private || w&dhtScopePrivate != 0
	s.loopback = s.loopback || w&dhtScopeLoopback != 0
	return s
}

// widenDHTScope takes the scope of an address a bootstrap peer was
// reached at into the DHT's.
func (d *discoveryState) widenDHTScope(a ma.Multiaddr) {
	s := newDHTScope([]peer.AddrInfo{{Addrs: []ma.Multiaddr{a}}})
	var bits uint32
	if s.private {
		bits |= dhtScopePrivate
	}
	if s.loopback {
		bits |= dhtScopeLoopback
	}
	if bits != 0 {
		d.scopeWider.Or(bits)
	}
}

// dhtScope decides which addresses the node takes from the DHT: into its
// peerstore (dht.AddressFilter, which also trims the provider records it
// stores and serves and the addresses it advertises) and into its dials
// (discovered). Anyone can publish a provider record naming any address;
// dialling what it names would let a stranger point this node at hosts
// on its own network or machine (a port scan by proxy, a probe of local
// services). Public addresses are always in scope; private ones (RFC
// 1918, shared 100.64/10, ULA, link-local) only when a bootstrap peer has
// one (the operator runs a DHT on a private network), loopback ones only
// when a bootstrap peer is on loopback (nodes on one machine).
// Unspecified and other unroutable addresses never are. A relay circuit
// is judged by the relay's address. A DNS name counts as public unless it
// is localhost's (a name that resolves to a private address is not
// caught here).
type dhtScope struct{ private, loopback bool }

// newDHTScope is the scope of a DHT joined through boot.
func newDHTScope(boot []peer.AddrInfo) dhtScope {
	var s dhtScope
	for _, ai := range boot {
		for _, a := range ai.Addrs {
			switch {
			case manet.IsIPLoopback(a), isLocalhostName(a):
				s.loopback = true
			case manet.IsPrivateAddr(a):
				s.private = true
			}
		}
	}
	return s
}

// allows reports whether a is in scope.
func (s dhtScope) allows(a ma.Multiaddr) bool {
	// A circuit's own scope is its relay's: the part before /p2p-circuit.
	if relay, rest := ma.SplitFunc(a, func(c ma.Component) bool { return c.Code() == ma.P_CIRCUIT }); len(rest) > 0 {
		if len(relay) == 0 {
			return false
		}
		a = relay
	}
	switch {
	case manet.IsIPUnspecified(a):
		return false
	case manet.IsIPLoopback(a), isLocalhostName(a):
		return s.loopback
	case manet.IsPrivateAddr(a):
		return s.private
	default:
		return manet.IsPublicAddr(a)
	}
}

// isLocalhostName reports whether a starts with a DNS name of this
// machine: localhost or a name under it (RFC 6761).
func isLocalhostName(a ma.Multiaddr) bool {
	if len(a) == 0 {
		return false
	}
	switch a[0].Code() {
	case ma.P_DNS, ma.P_DNS4, ma.P_DNS6, ma.P_DNSADDR:
		name := strings.TrimSuffix(strings.ToLower(a[0].Value()), ".")
		return name == "localhost" || strings.HasSuffix(name, ".localhost")
	}
	return false
}

// filter returns the addresses of addrs in scope (addrs itself when all
// are). It is the DHT's AddressFilter.
func (s dhtScope) filter(addrs []ma.Multiaddr) []ma.Multiaddr {
	for i, a := range addrs {
		if s.allows(a) {
			continue
		}
		out := append([]ma.Multiaddr(nil), addrs[:i]...)
		for _, b := range addrs[i+1:] {
			if s.allows(b) {
				out = append(out, b)
			}
		}
		return out
	}
	return addrs
}

// Bounds of the dials mDNS announcements cause (mdnsGate).
const (
	// mdnsRedialBackoff: an announced address, or peer ID, dialled is not
	// dialled again on an announcement within it.
	mdnsRedialBackoff = time.Minute
	// mdnsMaxAddrs bounds the addresses dialled for one announcement.
	mdnsMaxAddrs = 8
	// Per announced IP, a bucket of mdnsHostBurst dials refilled one per
	// mdnsHostEvery; for all of mDNS one of mdnsDialBurst refilled one per
	// mdnsDialEvery.
	mdnsHostBurst = 4
	mdnsHostEvery = 15 * time.Second
	mdnsDialBurst = 16
	mdnsDialEvery = 4 * time.Second
	// mdnsTracked bounds each table of the gate.
	mdnsTracked = 1024
)

// mdnsGate decides which announced addresses the node dials.
type mdnsGate struct {
	// loopback: the node listens on loopback only, so loopback addresses
	// are in scope (the nodes are on one machine).
	loopback bool
	ids      map[peer.ID]time.Time // when last dialled
	addrs    map[string]time.Time  // when last dialled, by multiaddr
	hosts    map[netip.Addr]*tokenBucket
	total    tokenBucket
}

// admit returns the addresses of ai to dial at now, taking their tokens
// and starting their backoff, or none.
func (g *mdnsGate) admit(ai peer.AddrInfo, now time.Time) []ma.Multiaddr {
	if g.ids == nil {
		g.ids = map[peer.ID]time.Time{}
		g.addrs = map[string]time.Time{}
		g.hosts = map[netip.Addr]*tokenBucket{}
	}
	recent := func(t time.Time) bool { return now.Sub(t) < mdnsRedialBackoff }
	if last, ok := g.ids[ai.ID]; ok && recent(last) {
		return nil
	}
	var out []ma.Multiaddr
	for _, a := range ai.Addrs {
		if len(out) == mdnsMaxAddrs {
			break
		}
		ip, ok := mdnsScope(a, g.loopback)
		if !ok {
			continue
		}
		key := string(a.Bytes())
		if last, ok := g.addrs[key]; ok && recent(last) {
			continue
		}
		hb := bucketIn(g.hosts, ip, mdnsHostBurst, mdnsHostEvery, now)
		if hb != nil && hb.tokens < 1 {
			continue
		}
		g.total.refill(now, mdnsDialBurst, mdnsDialEvery)
		if g.total.tokens < 1 {
			break
		}
		g.total.tokens--
		takeIn(g.hosts, hb, ip, mdnsHostBurst, mdnsHostEvery, mdnsTracked, now)
		bounded.MakeRoom(g.addrs, mdnsTracked, func(t time.Time) bool { return !recent(t) })
		g.addrs[key] = now
		out = append(out, a)
	}
	if len(out) > 0 {
		bounded.MakeRoom(g.ids, mdnsTracked, func(t time.Time) bool { return !recent(t) })
		g.ids[ai.ID] = now
	}
	return out
}

// mdnsScope returns the IP of an announced address the node may dial: an
// IPv4 or IPv6 address (a zone allowed) that is private (RFC 1918, IPv6
// ULA) or link-local, or loopback when loopback is set, followed by
// transports without a relay circuit or another host. Public, unspecified,
// multicast and DNS addresses are not in the scope of a LAN discovery.
func mdnsScope(a ma.Multiaddr, loopback bool) (netip.Addr, bool) {
	var ip netip.Addr
	for i, c := range a {
		switch code := c.Code(); {
		case code == ma.P_IP6ZONE && i == 0:
		case (code == ma.P_IP4 || code == ma.P_IP6) && !ip.IsValid():
			addr, ok := netip.AddrFromSlice(c.RawValue())
			if !ok {
				return netip.Addr{}, false
			}
			ip = addr.Unmap()
		case code == ma.P_IP4, code == ma.P_IP6, code == ma.P_IP6ZONE, code == ma.P_CIRCUIT,
			code == ma.P_DNS, code == ma.P_DNS4, code == ma.P_DNS6, code == ma.P_DNSADDR, code == ma.P_UNIX:
			return netip.Addr{}, false
		case !ip.IsValid():
			return netip.Addr{}, false // the address does not start with an IP
		}
	}
	if !ip.IsValid() || !(ip.IsPrivate() || ip.IsLinkLocalUnicast() || loopback && ip.IsLoopback()) {
		return netip.Addr{}, false
	}
	return ip, true
}

// ParseBootstrap parses bootstrap multiaddrs (each ending in /p2p/ID) and
// merges the addresses of one peer.
func ParseBootstrap(addrs []string) ([]peer.AddrInfo, error) {
	var mas []ma.Multiaddr
	for _, s := range addrs {
		m, err := ma.NewMultiaddr(s)
		if err != nil {
			return nil, fmt.Errorf("bootstrap address %q: %w", s, err)
		}
		if _, err := peer.AddrInfoFromP2pAddr(m); err != nil {
			return nil, fmt.Errorf("bootstrap address %q (want a multiaddr ending in /p2p/PEER_ID): %w", s, err)
		}
		mas = append(mas, m)
	}
	ais, err := peer.AddrInfosFromP2pAddrs(mas...)
	if err != nil {
		return nil, fmt.Errorf("bootstrap addresses: %w", err)
	}
	return ais, nil
}

func (n *Node) startDiscovery() error {
	d := &n.discovery
	boot, err := ParseBootstrap(n.cfg.Bootstrap)
	if err != nil {
		return err
	}
	for _, ai := range boot {
		if ai.ID == n.host.ID() {
			return fmt.Errorf("bootstrap address %s is this node itself", ai)
		}
	}
	d.bootstrap = boot
	d.dhtScope = newDHTScope(boot)
	d.dialSem = make(chan struct{}, maxDiscoveryDials)
	d.dialing = map[peer.ID]bool{}
	d.mdnsGate.loopback = !n.listensBeyondLoopback()
	d.ctx, d.cancel = context.WithCancel(n.ctx)

	for _, ai := range boot {
		n.host.ConnManager().TagPeer(ai.ID, TagBootstrap, tagValue)
		d.wg.Add(1)
		go n.keepBootstrap(ai)
	}
	if n.cfg.DHT {
		if len(boot) == 0 {
			// A DHT with no known peer cannot join a network: it learns
			// members only from peers that connect to this node (inbound
			// dials, mDNS), so say so instead of starting silently.
			n.log.Warn("DHT discovery enabled without bootstrap peers: the DHT finds other nodes only after one connects to this node (give --bootstrap /ip4/.../p2p/ID of a known node)")
		}
		if err := n.startDHT(); err != nil {
			return err
		}
	}
	if n.cfg.MDNS && !n.listensBeyondLoopback() {
		n.log.Info("mDNS discovery off: the node listens on loopback only, which nobody on the network can reach")
	} else if n.cfg.MDNS {
		s := mdns.NewMdnsService(n.host, MDNSServiceName, mdnsNotifee{n})
		if err := s.Start(); err != nil {
			return fmt.Errorf("start mDNS discovery: %w", err)
		}
		d.mdns = s
	}
	if len(boot) > 0 || d.mdns != nil || n.cfg.DHT {
		n.log.Info("discovery started", "bootstrap", len(boot), "mdns", d.mdns != nil, "dht", n.cfg.DHT)
	}
	return nil
}

func (n *Node) stopDiscovery() {
	d := &n.discovery
	if d.cancel == nil {
		return
	}
	d.cancel()
	if d.mdns != nil {
		if err := d.mdns.Close(); err != nil {
			n.log.Debug("close mDNS", "err", err)
		}
	}
	d.wg.Wait()
	if d.dht != nil {
		if err := d.dht.Close(); err != nil {
			n.log.Debug("close DHT", "err", err)
		}
	}
}

// listensBeyondLoopback reports whether any IP listen address of the host
// is not a loopback address (an unspecified address counts: it covers
// every interface). Addresses without an IP (a relay circuit) do not count.
func (n *Node) listensBeyondLoopback() bool {
	for _, a := range n.host.Network().ListenAddresses() {
		first, _ := ma.SplitFirst(a)
		if first == nil {
			continue
		}
		if c := first.Protocol().Code; c != ma.P_IP4 && c != ma.P_IP6 {
			continue
		}
		if !manet.IsIPLoopback(a) {
			return true
		}
	}
	return false
}

// mdnsNotifee hands mDNS finds to the dialer without blocking the resolver.
type mdnsNotifee struct{ n *Node }

func (m mdnsNotifee) HandlePeerFound(ai peer.AddrInfo) { m.n.discovered(ai, "mdns") }

// discovered dials a found peer in the background unless it is us, already
// connected, already being dialled, or too many dials are under way (the
// peer will be found again).
func (n *Node) discovered(ai peer.AddrInfo, via string) {
	d := &n.discovery
	if ai.ID == "" || ai.ID == n.host.ID() || len(ai.Addrs) == 0 {
		return
	}
	if n.host.Network().Connectedness(ai.ID) == network.Connected {
		return
	}
	if d.ctx.Err() != nil {
		return
	}
	d.mu.Lock()
	if d.dialing[ai.ID] {
		d.mu.Unlock()
		return
	}
	select {
	case d.dialSem <- struct{}{}:
	default:
		d.mu.Unlock()
		n.log.Debug("discovery: too many dials under way; dropping", "peer", ai.ID, "via", via)
		return
	}
	var addrs []ma.Multiaddr
	switch via {
	case "mdns":
		addrs = d.mdnsGate.admit(ai, time.Now())
	case "dht":
		addrs = d.currentDHTScope().filter(ai.Addrs)
	default:
		addrs = ai.Addrs
	}
	if len(addrs) == 0 {
		<-d.dialSem
		d.mu.Unlock()
		n.log.Debug("discovery: no address in scope; not dialling", "peer", ai.ID, "via", via, "addrs", len(ai.Addrs))
		return
	}
	ai = peer.AddrInfo{ID: ai.ID, Addrs: addrs}
	d.dialing[ai.ID] = true
	d.wg.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.wg.Done()
		defer func() {
			d.mu.Lock()
			delete(d.dialing, ai.ID)
			d.mu.Unlock()
			<-d.dialSem
		}()
		if err := n.dial(d.ctx, ai); err != nil {
			n.log.Debug("discovery: dial failed", "peer", ai.ID, "via", via, "err", err)
			return
		}
		n.log.Info("discovered peer", "peer", ai.ID, "via", via)
	}()
}

func (n *Node) dial(ctx context.Context, ai peer.AddrInfo) error {
	ctx, cancel := context.WithTimeout(ctx, discoveryDialTimeout)
	defer cancel()
	n.solicit(ai.ID, false, false) // this node came to the peer, asking nothing of it (solicit.go)
	if err := n.host.Connect(ctx, ai); err != nil {
		n.forgetSolicited(ai.ID)
		return ConnectError(ai.ID, err)
	}
	return nil
}

// keepBootstrap keeps a bootstrap peer connected: it dials with exponential
// backoff (with jitter) until connected, then checks the connection
// periodically, until the node stops.
func (n *Node) keepBootstrap(ai peer.AddrInfo) {
	d := &n.discovery
	defer d.wg.Done()
	backoff := n.t.bootstrapMinBackoff
	failures := 0
	for d.ctx.Err() == nil {
		wait := n.t.bootstrapCheckInterval
		if n.host.Network().Connectedness(ai.ID) != network.Connected {
			if err := n.dial(d.ctx, ai); err != nil {
				if d.ctx.Err() != nil {
					return
				}
				failures++
				lvl := n.log.Debug
				if failures == 1 || failures%10 == 0 {
					lvl = n.log.Warn
				}
				lvl("bootstrap peer unreachable; retrying", "peer", ai.ID, "failures", failures, "retry_in", backoff, "err", err)
				wait = jitter(backoff)
				backoff = min(backoff*2, bootstrapMaxBackoff)
			} else {
				n.log.Info("connected to bootstrap peer", "peer", ai.ID)
				backoff, failures = n.t.bootstrapMinBackoff, 0
				for _, c := range n.host.Network().ConnsToPeer(ai.ID) {
					d.widenDHTScope(c.RemoteMultiaddr())
				}
			}
		}
		if !sleepCtx(d.ctx, wait) {
			return
		}
	}
}

func (n *Node) startDHT() error {
	d := &n.discovery
	// The records other peers make it store are bounded (dhtstore.go);
	// value records, which acaptcha never reads, are not stored.
	d.dhtStore = newDHTStore(n.host.ID(), func(p peer.ID) (netip.Prefix, bool) {
		pfx := n.peerNets(p).prefix
		return pfx, pfx.IsValid()
	})
	kad, err := dht.New(dhtHost{Host: n.host, ps: dhtPeerstore{Peerstore: n.host.Peerstore(), store: d.dhtStore},
		streams: newDHTStreams(), limitLoopback: n.cfg.LimitLoopback, replies: newDHTReplies()},
		dht.ProtocolPrefix(DHTProtocolPrefix),
		dht.Mode(dht.ModeAutoServer),
		dht.BootstrapPeers(d.bootstrap...),
		dht.Datastore(d.dhtStore),
		// Its cache of provider sets keeps no record the store refused.
		// A provider's addresses reach the peerstore (for this TTL)
		// through dhtPeerstore, which bounds them.
		dht.ProviderManagerOpts(records.Cache(d.dhtStore.cache), records.ProviderAddrTTL(dhtProviderAddrTTL)),
		dht.DisableValues(),
		// Addresses out of the DHT's scope never reach the peerstore,
		// the provider records or what this node advertises.
		dht.AddressFilter(func(addrs []ma.Multiaddr) []ma.Multiaddr { return d.currentDHTScope().filter(addrs) }),
	)
	if err != nil {
		return fmt.Errorf("start DHT: %w", err)
	}
	d.dht = kad
	ns := n.cfg.Rendezvous
	if ns == "" {
		ns = DefaultRendezvous
	}
	rd := drouting.NewRoutingDiscovery(kad)
	d.wg.Add(2)
	go n.advertiseLoop(rd, ns)
	go n.findLoop(rd, ns)
	return nil
}

// advertiseLoop advertises the node under the rendezvous namespace and
// re-advertises before the record's TTL runs out; failures (an empty
// routing table at start) back off exponentially.
func (n *Node) advertiseLoop(rd *drouting.RoutingDiscovery, ns string) {
	d := &n.discovery
	defer d.wg.Done()
	backoff := n.t.advertiseMinBackoff
	if !sleepCtx(d.ctx, jitter(time.Second)) {
		return
	}
	for d.ctx.Err() == nil {
		if err := d.dht.Bootstrap(d.ctx); err != nil && d.ctx.Err() == nil {
			n.log.Debug("DHT bootstrap", "err", err)
		}
		ttl, err := rd.Advertise(d.ctx, ns)
		wait := ttl * 7 / 8
		if err != nil {
			if d.ctx.Err() != nil {
				return
			}
			n.log.Debug("DHT rendezvous advertise failed; retrying", "ns", ns, "retry_in", backoff, "err", err)
			wait = jitter(backoff)
			backoff = min(backoff*2, advertiseMaxBackoff)
		} else {
			n.log.Info("advertised on DHT rendezvous", "ns", ns, "ttl", ttl)
			backoff = n.t.advertiseMinBackoff
		}
		if !sleepCtx(d.ctx, wait) {
			return
		}
	}
}

// findLoop looks the rendezvous namespace up, often at first and then
// every rendezvousInterval, and dials what it finds.
func (n *Node) findLoop(rd *drouting.RoutingDiscovery, ns string) {
	d := &n.discovery
	defer d.wg.Done()
	interval := n.t.rendezvousFirstInterval
	for sleepCtx(d.ctx, jitter(interval)) {
		interval = min(interval*2, rendezvousInterval)
		if d.dht.RoutingTable().Size() == 0 {
			continue
		}
		if err := n.findOnce(rd, ns); err != nil && d.ctx.Err() == nil {
			n.log.Debug("DHT rendezvous lookup failed", "ns", ns, "err", err)
		}
	}
}

func (n *Node) findOnce(rd *drouting.RoutingDiscovery, ns string) error {
	d := &n.discovery
	ctx, cancel := context.WithTimeout(d.ctx, time.Minute)
	defer cancel()
	ch, err := rd.FindPeers(ctx, ns, discovery.Limit(rendezvousAskLimit))
	if err != nil {
		return fmt.Errorf("find peers on %q: %w", ns, err)
	}
	q := netQuota{per: rendezvousPerNet, total: rendezvousFindLimit, limitLoopback: n.cfg.LimitLoopback}
	for ai := range ch {
		if q.take(ai) {
			n.discovered(ai, "dht")
		}
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("find peers on %q: %w", ns, err)
	}
	return nil
}

// netQuota shares a lookup's results out by network: fresh peer IDs
// advertising the rendezvous from one IPv4 /24 or IPv6 /48 (or through
// one relay) get at most per of the total results taken, so that they
// cannot fill a lookup and crowd the honest peers out of discovery. A
// result is counted by its first address with a network; one with none
// (no address this node could group) counts only in the total.
type netQuota struct {
	per, total    int
	limitLoopback bool
	taken         int
	nets          map[netip.Prefix]int
}

// take reports whether ai is within the quota, counting it if so.
func (q *netQuota) take(ai peer.AddrInfo) bool {
	if q.taken >= q.total {
		return false
	}
	for _, a := range ai.Addrs {
		nets, known := netsOf(a, q.limitLoopback)
		if !known || !nets.prefix.IsValid() {
			continue
		}
		if q.nets[nets.prefix] >= q.per {
			return false
		}
		if q.nets == nil {
			q.nets = map[netip.Prefix]int{}
		}
		q.nets[nets.prefix]++
		break
	}
	q.taken++
	return true
}

// jitter returns d scaled by a random factor in [0.75, 1.25).
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(float64(d) * (0.75 + rand.Float64()/2))
}

// sleepCtx sleeps for d or until ctx ends; it reports whether ctx is still
// live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
