package peer

// Connection limits sized on purpose (issue 10, finding 3).
//
// The connection manager keeps between ConnLowWater and ConnHighWater
// connections and, above the high watermark, trims the peers with the
// lowest tag value first: untagged (unattested) idle peers go first,
// attested peers carry TagAttested and are protected. It can only do so
// if the resource manager lets the connection count climb above the high
// watermark: with libp2p's autoscaled limits (252 inbound connections on
// a 24 GiB machine) below the default watermark of 400, idle connections
// from an attacker took every inbound slot and the manager never trimmed.
// The node therefore sets the system inbound-connection limit explicitly
// to the high watermark plus a margin, and the total above that.

import (
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	xrate "github.com/libp2p/go-libp2p/x/rate"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/acaptcha/acaptcha/protocol"
)

// Defaults of the connection limits of Config.
const (
	DefaultConnLowWater    = 100
	DefaultConnHighWater   = 400
	DefaultConnGracePeriod = time.Minute
	DefaultConnsPerIP      = 8
)

// connSilencePeriod is the connection manager's minimum interval between
// two trims.
const connSilencePeriod = 10 * time.Second

// InboundConnLimit is the system inbound-connection limit the node sets
// for a connection-manager high watermark: the watermark plus a quarter
// (at least 16), so that the manager can see the excess and trim it
// while new peers still get in.
func InboundConnLimit(highWater int) int {
	return highWater + max(highWater/4, 16)
}

// connWatermarks resolves the watermarks of cfg.
func connWatermarks(cfg *Config) (low, high int, err error) {
	low, high = cfg.ConnLowWater, cfg.ConnHighWater
	if low <= 0 {
		low = DefaultConnLowWater
	}
	if high <= 0 {
		high = max(DefaultConnHighWater, low)
	}
	if high < low {
		return 0, 0, fmt.Errorf("connection limits: high watermark %d below low watermark %d", high, low)
	}
	if high > math.MaxInt32/2 {
		return 0, 0, fmt.Errorf("connection limits: high watermark %d too large", high)
	}
	return low, high, nil
}

// connLimitConfig returns the resource-manager limits for a high
// watermark: libp2p's autoscaled defaults (with its service limits), with
// the system and transient connection limits raised above the watermark.
func connLimitConfig(high, attestPerPeer int) rcmgr.ConcreteLimitConfig {
	scaling := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&scaling)
	base := scaling.AutoScale()
	part := base.ToPartialLimitConfig()
	in := InboundConnLimit(high)
	out := max(part.System.ConnsOutbound.Build(0), high)
	part.System.ConnsInbound = rcmgr.LimitVal(in)
	part.System.ConnsOutbound = rcmgr.LimitVal(out)
	part.System.Conns = rcmgr.LimitVal(max(part.System.Conns.Build(0), in+out/2))
	// File descriptors bound TCP connections too; the OS limit still
	// applies on top.
	part.System.FD = rcmgr.LimitVal(max(part.System.FD.Build(0), in+out/2+64))
	// Our services' streams: serviceStreamsPerPeer inbound per peer
	// (attestPerPeer for the attestation service), and room in the
	// service (and the system) for that many of every inbound
	// connection, so that peers cannot fill the service's scope
	// (libp2p's default service limits let one peer hold 139 inbound
	// streams and 19 peers all 2,530).
	attestPerPeer = max(attestPerPeer, serviceStreamsPerPeer)
	svcIn := in*attestPerPeer + 64
	if part.Service == nil {
		part.Service = map[string]rcmgr.ResourceLimits{}
	}
	if part.ServicePeer == nil {
		part.ServicePeer = map[string]rcmgr.ResourceLimits{}
	}
	for _, svc := range []string{protocol.ServiceName, PresentServiceName} {
		l := part.Service[svc]
		l.StreamsInbound = rcmgr.LimitVal(max(part.ServiceDefault.StreamsInbound.Build(0), svcIn))
		l.Streams = rcmgr.LimitVal(max(part.ServiceDefault.Streams.Build(0), svcIn+part.ServiceDefault.StreamsOutbound.Build(0)))
		part.Service[svc] = l
		perPeer := serviceStreamsPerPeer
		if svc == protocol.ServiceName {
			perPeer = attestPerPeer
		}
		pl := part.ServicePeer[svc]
		pl.StreamsInbound = rcmgr.LimitVal(perPeer)
		pl.Streams = rcmgr.LimitVal(perPeer + part.ServicePeerDefault.StreamsOutbound.Build(0))
		part.ServicePeer[svc] = pl
	}
	// Inbound streams wait in the transient scope until their protocol
	// is negotiated: room for negotiatingPerConn of every inbound
	// connection (negotiationRM bounds those of a peer and a network),
	// and as much more in the system's, so that streams in negotiation
	// cannot take the room of negotiated ones.
	trIn := max(part.Transient.StreamsInbound.Build(0), negotiatingPerConn*in)
	part.Transient.StreamsInbound = rcmgr.LimitVal(trIn)
	part.Transient.Streams = rcmgr.LimitVal(max(part.Transient.Streams.Build(0), trIn+part.Transient.StreamsOutbound.Build(0)))
	part.System.StreamsInbound = rcmgr.LimitVal(max(part.System.StreamsInbound.Build(0), 2*svcIn+trIn))
	part.System.Streams = rcmgr.LimitVal(max(part.System.Streams.Build(0), 2*svcIn+trIn+part.System.StreamsOutbound.Build(0)))
	return part.Build(base)
}

// serviceStreamsPerPeer bounds one peer's inbound streams to the
// attestation and presentation protocols (each): the protocol's two
// inbound sessions per peer (protocol.Config.MaxInboundPerPeer) and two
// refused ones lingering for their Decline to be read (spec/protocol.md
// §6 step 1); a stream over it is reset as the handler attaches it to the
// service. A node whose Limits.MaxInboundPerPeer is higher gives the
// attestation service that many and serviceLingerStreams more
// (attestStreamsPerPeer).
const (
	serviceStreamsPerPeer = protocol.DefaultMaxInboundPerPeer + serviceLingerStreams
	serviceLingerStreams  = 2
)

// attestStreamsPerPeer is the per-peer inbound stream limit of the
// attestation service for l: its sessions per peer and two refused
// streams lingering, serviceStreamsPerPeer at least.
func attestStreamsPerPeer(l Limits) int {
	sessions := l.MaxInboundPerPeer
	if sessions <= 0 {
		sessions = protocol.DefaultMaxInboundPerPeer
	}
	return max(serviceStreamsPerPeer, min(sessions, math.MaxInt32/2)+serviceLingerStreams)
}

// newConnLimits builds the connection manager and the resource manager of
// a node from its config.
func newConnLimits(cfg *Config) (*connmgr.BasicConnMgr, *negotiationRM, error) {
	low, high, err := connWatermarks(cfg)
	if err != nil {
		return nil, nil, err
	}
	grace := cfg.ConnGracePeriod
	if grace <= 0 {
		grace = DefaultConnGracePeriod
	}
	cm, err := connmgr.NewConnManager(low, high, connmgr.WithGracePeriod(grace), connmgr.WithSilencePeriod(min(connSilencePeriod, grace)))
	if err != nil {
		return nil, nil, fmt.Errorf("connection manager: %w", err)
	}
	perIP := cfg.ConnsPerIP
	if perIP <= 0 {
		perIP = DefaultConnsPerIP
	}
	opts := []rcmgr.Option{rcmgr.WithLimitPerSubnet(
		[]rcmgr.ConnLimitPerSubnet{{PrefixLength: 32, ConnCount: perIP}},
		[]rcmgr.ConnLimitPerSubnet{{PrefixLength: 56, ConnCount: perIP}, {PrefixLength: 48, ConnCount: 8 * perIP}},
	)}
	v4, v6, err := networkPrefixLimits(cfg, InboundConnLimit(high))
	if err != nil {
		cm.Close()
		return nil, nil, err
	}
	opts = append(opts, rcmgr.WithNetworkPrefixLimit(v4, v6))
	rl, err := connRateLimiter(cfg)
	if err != nil {
		cm.Close()
		return nil, nil, err
	}
	opts = append(opts, rcmgr.WithConnRateLimiters(rl))
	if cfg.Metrics == nil {
		// The resource manager's statistics feed Prometheus only
		// (libp2pMetrics): without a registry they cost a formatted
		// trace event on every stream and reservation for nobody.
		opts = append(opts, rcmgr.WithMetricsDisabled())
	}
	attestPerPeer := attestStreamsPerPeer(cfg.Limits)
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(connLimitConfig(high, attestPerPeer)), opts...)
	if err != nil {
		cm.Close()
		return nil, nil, fmt.Errorf("resource manager: %w", err)
	}
	return cm, newNegotiationRM(rm, attestPerPeer), nil
}

// Limits are the attestation protocol's budgets of a node
// (spec/protocol.md §5a, §9a; protocol.Config). A zero field means the
// protocol's default, but for PowDifficulty and PayDifficulty, whose zero
// value New resolves from where the node listens (auto). Loopback peers count in the per-prefix budgets as
// Config.LimitLoopback and ExemptLoopback decide (by default: when the
// node listens beyond loopback).
type Limits struct {
	// PowDifficulty is the base proof of work asked before a set is drawn
	// (failures and load still add to it). 0, the default, is auto: New
	// asks protocol.PublicPowDifficulty (16) when the node is reachable
	// beyond loopback (ReachableBeyondLoopback(Config.ListenAddrs,
	// Config.Relays), the default listen addresses included) and none on
	// loopback only, as `acaptcha node --pow-difficulty auto`;
	// protocol.NoPow asks none whatever the node listens on. Without it
	// fresh peer IDs draw sets for nothing up to the draw budgets.
	// Provers written to spec 1.0.0 cannot pay it. The zero value was
	// "none" whatever the node listened on.
	PowDifficulty int
	// PayDifficulty is the proof of work this node's prover asks of a
	// verifier that contacted it and that it does not admit, before it
	// answers anything (protocol.Config.PayDifficulty). 0, the default,
	// is auto as PowDifficulty's: protocol.PublicPowDifficulty when the
	// node is reachable beyond loopback, none on loopback only; NoPay asks
	// none whatever the node listens on. Without it such verifiers make
	// its LLM answer for nothing, up to the MaxProver* budgets. The zero
	// value was "none" whatever the node listened on.
	PayDifficulty int
	// MaxDrawsPerPeer, MaxDrawsPerPrefix and MaxDraws bound the challenge
	// sets drawn per hour for one peer, for one IPv4 /24 or IPv6 /48, and
	// in total; MaxDrawsPerBlock for the peers of one IPv6 /32 that the
	// node does not admit (0: protocol.BlockFactor times the per-prefix
	// budget).
	MaxDrawsPerPeer   int
	MaxDrawsPerPrefix int
	MaxDraws          int
	MaxDrawsPerBlock  int
	// MaxSessionsPerVerifier bounds the sessions this node answers for
	// one verifier per hour; MaxCallsPerVerifier and MaxProverCalls the
	// answerer (LLM) calls per verifier and in total per hour.
	MaxSessionsPerVerifier int
	MaxCallsPerVerifier    int
	MaxProverCalls         int
	// MaxTokensPerVerifier bounds the prompt tokens (narrative and
	// question) one verifier can make this node's prover read per hour.
	MaxTokensPerVerifier int
	// MaxSessionsPerVerifierPrefix bounds the sessions this node answers
	// per hour for the verifiers of one IPv4 /24 or IPv6 /48 together,
	// MaxSessionsPerVerifierBlock for those of one IPv6 /32 that the node
	// does not admit (0: protocol.BlockFactor times the per-prefix
	// budget); MaxProverSessions, MaxProverTokens and MaxProverPowWork
	// the sessions, prompt tokens and proof-of-work hashes of all
	// verifiers per hour (protocol.Config).
	MaxSessionsPerVerifierPrefix int
	MaxSessionsPerVerifierBlock  int
	MaxProverSessions            int
	MaxProverTokens              int
	MaxProverPowWork             int
	// MaxVerifierPayWork bounds the proof-of-work hashes this node's
	// verifier solves per hour to pay the provers that ask it (spec
	// protocol.md §5b; one prover a sixteenth, one IP prefix an eighth;
	// 0: protocol.DefaultMaxVerifierPayWork).
	MaxVerifierPayWork int
	// MaxPaySolves is how many of those payments it solves at once
	// (0: half the cores the process may use, at least one).
	MaxPaySolves int
	// MaxInboundPerPeer, MaxInboundPerPrefix and MaxInbound bound
	// concurrent prover sessions; MaxInboundPerBlock those of the
	// untrusted verifiers of one IPv6 /32 (0: protocol.BlockFactor times
	// the per-prefix limit).
	MaxInboundPerPeer   int
	MaxInboundPerPrefix int
	MaxInbound          int
	MaxInboundPerBlock  int
	// MaxAcceptTotal is the longest total_ms this node accepts in a hello.
	MaxAcceptTotal time.Duration
}

// NoPay as Limits.PayDifficulty asks no payment of verifiers, whatever
// the node listens on (0 is auto).
const NoPay = -1

// Check reports the first invalid limit: every count and duration must
// not be negative, and the proof of work and the payment must be
// protocol.NoPow (NoPay) or 0 (auto) up to
// protocol.DefaultMaxPowDifficulty bits, the most a node asks (New calls
// it).
func (l Limits) Check() error {
	for _, c := range []struct {
		name string
		v    int
	}{
		{"draws per peer", l.MaxDrawsPerPeer}, {"draws per prefix", l.MaxDrawsPerPrefix}, {"draws", l.MaxDraws},
		{"sessions per verifier", l.MaxSessionsPerVerifier}, {"answerer calls per verifier", l.MaxCallsPerVerifier},
		{"answerer calls", l.MaxProverCalls}, {"prompt tokens per verifier", l.MaxTokensPerVerifier}, {"inbound sessions per peer", l.MaxInboundPerPeer}, {"inbound sessions", l.MaxInbound},
		{"inbound sessions per prefix", l.MaxInboundPerPrefix},
		{"sessions per verifier prefix", l.MaxSessionsPerVerifierPrefix}, {"prover sessions", l.MaxProverSessions},
		{"draws per IPv6 /32", l.MaxDrawsPerBlock}, {"sessions per verifier IPv6 /32", l.MaxSessionsPerVerifierBlock},
		{"inbound sessions per IPv6 /32", l.MaxInboundPerBlock},
		{"prover tokens", l.MaxProverTokens}, {"prover proof-of-work hashes", l.MaxProverPowWork},
		{"verifier payment hashes", l.MaxVerifierPayWork}, {"payments solved at once", l.MaxPaySolves},
	} {
		if c.v < 0 {
			return fmt.Errorf("limits: %s %d must not be negative", c.name, c.v)
		}
	}
	if l.PowDifficulty < protocol.NoPow || l.PowDifficulty > protocol.DefaultMaxPowDifficulty {
		return fmt.Errorf("limits: proof-of-work difficulty %d: want %d (none), 0 (auto) or 1..%d bits", l.PowDifficulty, protocol.NoPow, protocol.DefaultMaxPowDifficulty)
	}
	if l.PayDifficulty < NoPay || l.PayDifficulty > protocol.DefaultMaxPowDifficulty {
		return fmt.Errorf("limits: verifier payment %d: want %d (none), 0 (auto) or 1..%d bits", l.PayDifficulty, NoPay, protocol.DefaultMaxPowDifficulty)
	}
	if l.MaxAcceptTotal < 0 || l.MaxAcceptTotal > protocol.MaxTotal {
		return fmt.Errorf("limits: accepted total %s: want 0 (default) up to %s", l.MaxAcceptTotal, protocol.MaxTotal)
	}
	return nil
}

// protocolLimits copies the node's protocol budgets into c.
func (cfg *Config) protocolLimits(c protocol.Config) protocol.Config {
	l := cfg.Limits
	c.PowDifficulty, c.PayDifficulty = l.PowDifficulty, l.PayDifficulty
	c.MaxDrawsPerPeer, c.MaxDrawsPerPrefix, c.MaxDraws = l.MaxDrawsPerPeer, l.MaxDrawsPerPrefix, l.MaxDraws
	c.MaxSessionsPerVerifier, c.MaxCallsPerVerifier, c.MaxProverCalls = l.MaxSessionsPerVerifier, l.MaxCallsPerVerifier, l.MaxProverCalls
	c.MaxSessionsPerVerifierPrefix, c.MaxProverSessions = l.MaxSessionsPerVerifierPrefix, l.MaxProverSessions
	c.MaxProverTokens, c.MaxProverPowWork = l.MaxProverTokens, l.MaxProverPowWork
	c.MaxTokensPerVerifier, c.MaxVerifierPayWork = l.MaxTokensPerVerifier, l.MaxVerifierPayWork
	c.MaxInboundPerPeer, c.MaxInboundPerPrefix, c.MaxInbound = l.MaxInboundPerPeer, l.MaxInboundPerPrefix, l.MaxInbound
	c.MaxDrawsPerBlock, c.MaxSessionsPerVerifierBlock, c.MaxInboundPerBlock = l.MaxDrawsPerBlock, l.MaxSessionsPerVerifierBlock, l.MaxInboundPerBlock
	c.MaxAcceptTotal, c.MaxPaySolves = l.MaxAcceptTotal, l.MaxPaySolves
	c.LimitLoopback = cfg.LimitLoopback
	return c
}

// PeerUsage reports what p has cost this node's verifier: paid sessions,
// sets drawn and draws refused (protocol.Service.PeerUsage).
func (n *Node) PeerUsage(p peer.ID) protocol.PeerUsage { return n.svc.PeerUsage(p) }

// ProtocolConfig returns the attestation service's configuration with its
// defaults filled in (the budgets in force).
func (n *Node) ProtocolConfig() protocol.Config { return n.svc.Config() }

// networkPrefixLimits are the addresses exempt from the per-IP limit:
// loopback (libp2p's default, dropped when loopback is limited: Config.
// LimitLoopback, resolved by New) and the
// node's static relays. Every connection relayed to this node arrives
// from its relay's address, so with the per-IP limit a node reachable only
// through a relay would accept ConnsPerIP peers in all; a relay's address
// gets the inbound limit instead (the relay itself bounds its circuits).
func networkPrefixLimits(cfg *Config, inbound int) (v4, v6 []rcmgr.NetworkPrefixLimit, err error) {
	v4, v6 = []rcmgr.NetworkPrefixLimit{}, []rcmgr.NetworkPrefixLimit{}
	if !cfg.LimitLoopback {
		v4 = append(v4, rcmgr.DefaultNetworkPrefixLimitV4...)
		v6 = append(v6, rcmgr.DefaultNetworkPrefixLimitV6...)
	}
	relays, err := relayIPs(cfg)
	if err != nil {
		return nil, nil, err
	}
	for _, addr := range relays {
		l := rcmgr.NetworkPrefixLimit{Network: netip.PrefixFrom(addr, addr.BitLen()), ConnCount: inbound}
		if addr.Is4() {
			v4 = append(v4, l)
		} else {
			v6 = append(v6, l)
		}
	}
	return v4, v6, nil
}

// relayIPs are the distinct IP addresses, not loopback, of the node's
// static relays (DNS addresses are resolved at dial time: nothing to
// name here).
func relayIPs(cfg *Config) ([]netip.Addr, error) {
	relays, err := ParseRelays(cfg.Relays)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, ai := range relays {
		for _, a := range ai.Addrs {
			ip, err := manet.ToIP(a)
			if err != nil {
				continue
			}
			addr, ok := netip.AddrFromSlice(ip)
			if !ok || addr.IsLoopback() {
				continue
			}
			addr = addr.Unmap()
			if !seen[addr] {
				seen[addr] = true
				out = append(out, addr)
			}
		}
	}
	return out, nil
}

// DefaultNewConnsPerSecond is the node-wide rate of new connections
// (Config.NewConnsPerSecond); the bucket holds four seconds of it.
const DefaultNewConnsPerSecond = 64

// newConnBurstSeconds is how many seconds of the new-connection rate the
// node-wide bucket holds.
const newConnBurstSeconds = 4

// newConnGroupShare: one IPv4 /24 gets this fraction (1/8) of the
// node-wide new-connection rate and bucket, one IPv6 /32
// protocol.BlockFactor times that.
const newConnGroupShare = 8

// connRateLimiter is the resource manager's limiter of new connections
// (either direction: libp2p asks it for dials too). libp2p's default
// limits each IPv4 address and IPv6 /56 to one every 5 s (burst 16) and
// each IPv6 /48 to one every 2 s (burst 80), exempts loopback and has no
// node-wide rate: a peer with many prefixes (an IPv6 /32 holds 65,536
// /48s) had the node run Noise handshakes, each an X25519 exchange and an
// Ed25519 signature and verification, as fast as it could connect. The
// node keeps those per-prefix rates and adds a node-wide one of
// DefaultNewConnsPerSecond (Config.NewConnsPerSecond). Loopback keeps
// libp2p's exemption unless it is limited (Config.LimitLoopback): then all
// of loopback shares one bucket of the node-wide rate (behind a local
// proxy every peer has the same address, so a per-address rate would be
// one for everyone), as each static relay's address does (every relayed
// connection arrives from it; without its own bucket one relay's peers
// got one connection every 5 s between them).
//
// The node-wide rate has a share per network: an eighth of it per IPv4
// /24 and a quarter per IPv6 /32 (newConnGroupShare; a /24 at least one
// address's 16). libp2p's
// per-address rate let the 256 addresses of one /24 (4 096 connections at
// once, 51 a second after) or the /48s of one /32 spend the whole
// node-wide bucket, and every other network's new connections, inbound
// and dialed, were refused while they kept at it.
func connRateLimiter(cfg *Config) (*xrate.Limiter, error) {
	perSec := cfg.NewConnsPerSecond
	if perSec <= 0 {
		perSec = DefaultNewConnsPerSecond
	}
	perSec = min(perSec, math.MaxInt32/newConnBurstSeconds)
	node := xrate.Limit{RPS: float64(perSec), Burst: newConnBurstSeconds * perSec}
	// At least libp2p's own bound of one address (16 at once, one every
	// 5 s): a network is never held below one of its hosts.
	group := xrate.Limit{RPS: max(0.2, float64(perSec)/newConnGroupShare), Burst: max(16, node.Burst/newConnGroupShare)}
	block := xrate.Limit{RPS: protocol.BlockFactor * group.RPS, Burst: protocol.BlockFactor * group.Burst}
	loop := xrate.Limit{} // unlimited
	if cfg.LimitLoopback {
		loop = node
	}
	prefixes := []xrate.PrefixLimit{
		{Prefix: netip.MustParsePrefix("127.0.0.0/8"), Limit: loop},
		{Prefix: netip.MustParsePrefix("::1/128"), Limit: loop},
	}
	relays, err := relayIPs(cfg)
	if err != nil {
		return nil, err
	}
	for _, addr := range relays {
		prefixes = append(prefixes, xrate.PrefixLimit{Prefix: netip.PrefixFrom(addr, addr.BitLen()), Limit: node})
	}
	return &xrate.Limiter{
		NetworkPrefixLimits: prefixes,
		GlobalLimit:         node,
		SubnetRateLimiter: xrate.SubnetLimiter{
			IPv4SubnetLimits: []xrate.SubnetLimit{
				{PrefixLength: 32, Limit: xrate.Limit{RPS: 0.2, Burst: 16}},
				{PrefixLength: 24, Limit: group},
			},
			IPv6SubnetLimits: []xrate.SubnetLimit{
				{PrefixLength: 56, Limit: xrate.Limit{RPS: 0.2, Burst: 16}},
				{PrefixLength: 48, Limit: xrate.Limit{RPS: 0.5, Burst: 80}},
				{PrefixLength: 32, Limit: block},
			},
			GracePeriod: time.Minute,
		},
	}, nil
}
