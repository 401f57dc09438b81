package protocol

import (
	"crypto/sha256"
	"math"
	"math/bits"
	"net/netip"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/bounded"
	"github.com/acaptcha/acaptcha/skill"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Budgets of the verifier and prover sides (spec/protocol.md §9a). Every
// budget is a token bucket: capacity C, refilled continuously at C per
// window, so a peer gets at most C units in any window plus what refills
// within it.
const (
	// DefaultDrawWindow is the window of the verifier's set-draw budgets.
	DefaultDrawWindow = time.Hour
	// DefaultMaxDrawsPerPeer is how many challenge sets one peer can make
	// this node draw per window (first contact, reciprocal, retries). It
	// leaves room for an honest peer (or a test harness) that re-attests a
	// few times an hour; failures raise the proof of work long before.
	DefaultMaxDrawsPerPeer = 20
	// DefaultMaxDrawsPerPrefix is how many challenge sets the peers of one
	// IP prefix (an IPv4 /24, an IPv6 /48) can make this node draw per
	// window together: a sybil with many peer IDs behind one network gets
	// a few peers' worth of draws, not one share per ID.
	DefaultMaxDrawsPerPrefix = 100
	// DefaultMaxDraws is the node's global draw budget per window.
	DefaultMaxDraws = 1000
	// PrefixBitsIPv4 and PrefixBitsIPv6 are the prefix lengths the
	// per-prefix draw budget groups remote addresses by.
	PrefixBitsIPv4 = 24
	PrefixBitsIPv6 = 48
	// BlockBitsIPv6 is the IPv6 block (an allocation: 65,536 /48s) whose
	// peers the per-block budgets bound together (BlockOf).
	BlockBitsIPv6 = 32
	// DefaultProverWindow is the window of the prover's budgets.
	DefaultProverWindow = time.Hour
	// DefaultMaxSessionsPerVerifier is how many sessions this node answers
	// for one verifier per window.
	DefaultMaxSessionsPerVerifier = 40
	// DefaultMaxCallsPerVerifier is how many answerer (LLM) calls one
	// verifier can cause per window; a session reserves one per round.
	DefaultMaxCallsPerVerifier = 120
	// DefaultMaxTokensPerVerifier bounds the prompt tokens (skill.
	// CountTokens of narrative and question) one verifier can make this
	// node read per window.
	DefaultMaxTokensPerVerifier = 400_000
	// DefaultMaxProverCalls is the node's global answerer-call budget per
	// window.
	DefaultMaxProverCalls = 1800
	// DefaultMaxSessionsPerVerifierPrefix is how many sessions this node
	// answers per window for the verifiers of one IP prefix together (an
	// IPv4 /24, an IPv6 /48): fresh peer IDs cost nothing, so the
	// per-verifier budgets alone do not bound what one network can make
	// the prover do (solve proofs of work, store the verdicts it is sent).
	DefaultMaxSessionsPerVerifierPrefix = 200
	// DefaultMaxProverSessions is the node's global budget of answered
	// sessions per window.
	DefaultMaxProverSessions = 2000
	// DefaultMaxProverTokens is the node's global budget of prompt tokens
	// per window (about 150 full-size narrative rounds of 32 KiB, or 2,000
	// of the paper's 2,000-token ones).
	DefaultMaxProverTokens = 4_000_000
	// DefaultMaxProverPowWork is the node's global budget of proof-of-work
	// hashes it solves as a prover per window: a verifier's hello names
	// the difficulty D, and each session is charged 2^D (the expected
	// work) before the prover solves it. 2^28 is 64 sessions at the
	// highest default difficulty (22 bits, about 1.4 s of one core here)
	// or 4,096 at 16 bits: about 90 s of CPU per hour at most.
	DefaultMaxProverPowWork = 1 << 28
	// DefaultMaxVerifierPayWork is the node's global budget of
	// proof-of-work hashes its verifier solves per DrawWindow to pay the
	// provers that ask it (spec §5b): a prover's ack names D_v, and each
	// payment is charged 2^D_v before it is solved. As the prover's
	// DefaultMaxProverPowWork: 64 payments at 22 bits, about 90 s of one
	// core per hour at most. One prover gets at most a sixteenth
	// (verifierPayPeerShare: 4 payments at 22 bits), the provers of one IP
	// prefix an eighth (proverPrefixShare), and the last quarter is kept
	// for the peers the node admits (proverReserve): a prover can make
	// the verifier pay (a peer that declined its session VERIFY_FIRST, a
	// peer it was made to dial), and fresh peer IDs are free.
	DefaultMaxVerifierPayWork = 1 << 28
	// verifierPayPeerShare: one prover may make the verifier pay at most
	// this fraction of MaxVerifierPayWork per window.
	verifierPayPeerShare = 16
	// proverPrefixShare: the verifiers of one IP prefix (or relay, §9a)
	// may use at most this fraction of the node's proof-of-work,
	// answerer-call and prompt-token budgets (the calls and tokens never
	// less than one session's worth, prefixShare).
	proverPrefixShare = 8
	// BlockFactor: the peers of one IPv6 /32 (BlockOf) that the node does
	// not admit get together at most this many times what one IP prefix
	// gets, of every per-prefix budget (draws, the prover's sessions,
	// proof of work, answerer calls and prompt tokens, inbound slots): a
	// holder of a /32's 65,536 /48s gets two /48s' worth, and an abuser
	// with one /48 of a shared /32 leaves its neighbours at least as much
	// as it takes (spec §9a).
	BlockFactor = 2
	// DefaultMaxDrawsPerBlock, DefaultMaxSessionsPerVerifierBlock and
	// DefaultMaxInboundPerBlock are BlockFactor times the per-prefix
	// defaults (a zero Config field is BlockFactor times the per-prefix
	// value in force).
	DefaultMaxDrawsPerBlock            = BlockFactor * DefaultMaxDrawsPerPrefix
	DefaultMaxSessionsPerVerifierBlock = BlockFactor * DefaultMaxSessionsPerVerifierPrefix
	// DefaultMaxAcceptTotal is the longest T_total a prover accepts in a
	// hello by default (raised to the node's own policy total if longer).
	DefaultMaxAcceptTotal = 5 * time.Minute
	// DefaultIdleTimeout bounds every wait of the prover for the
	// verifier's next frame (hello ack to round 1, answer to next
	// challenge or verdict).
	DefaultIdleTimeout = 45 * time.Second
	// failureDecay is how long one recorded failure of a peer raises its
	// proof-of-work difficulty (failures decay linearly).
	failureDecay = 10 * time.Minute
	// maxFailureBits caps the difficulty a peer's failures add.
	maxFailureBits = 6
	// loadStep: every doubling of concurrent verifier sessions beyond it
	// adds one bit of difficulty.
	loadStep = 16
	// maxTrackedPeers bounds the per-peer budget tables, and
	// maxTrackedPrefixes each per-prefix and per-block one.
	maxTrackedPeers    = 1 << 16
	maxTrackedPrefixes = 1 << 14
)

// bucket is a token bucket.
type bucket struct {
	tokens float64
	last   time.Time
}

// refill brings b up to now for capacity c refilled over window w.
func (b *bucket) refill(c float64, w time.Duration, now time.Time) {
	if b.last.IsZero() {
		b.tokens, b.last = c, now
		return
	}
	if dt := now.Sub(b.last); dt > 0 {
		b.tokens = min(c, b.tokens+c*float64(dt)/float64(w))
		b.last = now
	}
}

// give returns n to b (capacity c, window w), never above c: the refund
// of what was taken and not used.
func (b *bucket) give(n, c float64, w time.Duration, now time.Time) {
	b.refill(c, w, now)
	b.tokens = min(c, b.tokens+n)
}

func (b *bucket) full(c float64, w time.Duration, now time.Time) bool {
	b.refill(c, w, now)
	return b.tokens >= c
}

// peerState is what the budgets remember of one peer.
type peerState struct {
	draws    bucket // verifier: sets drawn for this peer
	failures float64
	failedAt time.Time
	sessions bucket // prover: sessions answered for this verifier
	calls    bucket // prover: answerer calls
	tokens   bucket // prover: prompt tokens
	pay      bucket // verifier: payment hashes solved for this prover (§5b)
	usage    PeerUsage
}

// PeerUsage is what one peer has cost this node's verifier so far (while
// the peer is in the budget table): hello acks that paid, the sets drawn
// for it, how many of those went back unseen (their draws refunded), and
// draws refused by its share, its prefix's share or the global budget
// after it paid; and, as a prover, the hashes of the payments (spec §5b)
// this node's verifier was charged for it (2^D_v each, solved or not)
// and the payments it asked that the budgets refused.
type PeerUsage struct {
	Paid       int   `json:"paid"`
	Drawn      int   `json:"drawn"`
	Returned   int   `json:"returned"`
	Refused    int   `json:"refused"`
	PayWork    int64 `json:"pay_work,omitempty"`
	PayRefused int   `json:"pay_refused,omitempty"`
}

// PeerUsage reports what p has cost this node's verifier (zero for a peer
// it never verified or has forgotten).
func (s *Service) PeerUsage(p peer.ID) PeerUsage {
	b := s.budgets
	b.mu.Lock()
	defer b.mu.Unlock()
	if st, ok := b.peers[p]; ok {
		return st.usage
	}
	return PeerUsage{}
}

// nat64WKP is the NAT64 well-known prefix (RFC 6052): its addresses are
// IPv4 hosts as a local translator shows them to an IPv6 node, the IPv4
// address in the last 32 bits. It is never routed globally (RFC 6052
// §3.1), so no remote host can claim one of its addresses but through
// this node's own translator.
var nat64WKP = netip.MustParsePrefix("64:ff9b::/96")

// nat64Block is the /32 of the NAT64 prefixes, the well-known one and
// the local-use 64:ff9b:1::/48 (RFC 8215): translators' address space,
// not a holder's allocation, so it is no block.
var nat64Block = netip.MustParsePrefix("64:ff9b::/32")

// GroupAddr is the address an IP's budget groups are taken from: IPv4
// for an IPv4-mapped address and for one of the NAT64 well-known prefix
// (whose /48 would put every IPv4 host behind the translator in one
// group), the address itself otherwise, without its zone. The HTTP door
// groups its clients from it too (spec/http.md §5).
func GroupAddr(ip netip.Addr) netip.Addr {
	ip = ip.Unmap().WithZone("")
	if ip.Is6() && nat64WKP.Contains(ip) {
		b := ip.As16()
		return netip.AddrFrom4([4]byte(b[12:]))
	}
	return ip
}

// DrawPrefix is the prefix whose draw budget a remote address falls in:
// the /24 of an IPv4 address (IPv4-mapped IPv6 and the NAT64 well-known
// prefix 64:ff9b::/96 included: the /24 of the IPv4 address they carry),
// the /48 of an IPv6 address. ok is false for an address without an IP,
// and for loopback unless limitLoopback is set (loopback is exempt by
// default, as libp2p's resource manager exempts it).
func DrawPrefix(ip netip.Addr, limitLoopback bool) (netip.Prefix, bool) {
	ip = GroupAddr(ip)
	if !ip.IsValid() || (ip.IsLoopback() && !limitLoopback) {
		return netip.Prefix{}, false
	}
	bits := PrefixBitsIPv6
	if ip.Is4() {
		bits = PrefixBitsIPv4
	}
	pfx, err := ip.Prefix(bits)
	if err != nil {
		return netip.Prefix{}, false
	}
	return pfx, true
}

// BlockOf is the IPv6 block (/32, BlockBitsIPv6) whose budgets the group
// pfx (as DrawPrefix or RelayGroup give it) also counts in: the /32 of an
// IPv6 /48; none (ok false) for an IPv4 /24 (IPv4-mapped and NAT64
// addresses included), for a /48 of 64:ff9b::/32 (NAT64's local-use
// prefix, RFC 8215) and for a relay's group. One holder of a /32 has
// 65,536 /48s: the block bounds what they get together (spec §9a).
func BlockOf(pfx netip.Prefix) (netip.Prefix, bool) {
	if !pfx.IsValid() || !pfx.Addr().Is6() || pfx.Bits() != PrefixBitsIPv6 || nat64Block.Contains(pfx.Addr()) {
		return netip.Prefix{}, false
	}
	blk, err := pfx.Addr().Prefix(BlockBitsIPv6)
	if err != nil {
		return netip.Prefix{}, false
	}
	return blk, true
}

// drawPrefix is the budget group of p's current connection: a direct
// connection's prefix first, else a relayed connection's relay group
// (connPrefix); ok is false when p is not connected or is exempt.
func (s *Service) drawPrefix(p peer.ID) (netip.Prefix, bool) {
	var relayed netip.Prefix
	var hasRelayed bool
	for _, c := range s.h.Network().ConnsToPeer(p) {
		remote := c.RemoteMultiaddr()
		pfx, ok, known := s.connPrefix(remote)
		switch {
		case !known:
		case !isRelayed(remote):
			return pfx, ok
		case !hasRelayed:
			relayed, hasRelayed = pfx, ok
		}
	}
	return relayed, hasRelayed
}

// connPrefix is the budget group of a connection's remote address
// (spec/protocol.md §9a): for a direct connection the prefix DrawPrefix
// gives its IP (ok false when exempt); for a circuit-relayed one the
// group of its relay's network (RelayGroup), loopback included, since
// the remote peer is elsewhere. known is false for an address that
// has neither (a non-IP transport): no group applies.
func (s *Service) connPrefix(remote ma.Multiaddr) (pfx netip.Prefix, ok, known bool) {
	if group, relayed := RelayGroup(remote); relayed {
		return group, true, true
	}
	nip, err := manet.ToIP(remote)
	if err != nil {
		return netip.Prefix{}, false, false
	}
	addr, valid := netip.AddrFromSlice(nip)
	if !valid {
		return netip.Prefix{}, false, false
	}
	pfx, ok = DrawPrefix(addr, s.cfg.LimitLoopback)
	return pfx, ok, true
}

// isRelayed reports whether remote runs through a circuit relay.
func isRelayed(remote ma.Multiaddr) bool {
	_, relayed := CircuitRelay(remote)
	return relayed
}

// CircuitRelay reports whether remote is a circuit-v2 relayed address
// (it has a /p2p-circuit component) and names the relay this node is
// connected to: the /p2p component right before the first /p2p-circuit
// (go-libp2p writes <relay's address>/p2p/<relay>/p2p-circuit, the relay
// being the authenticated peer of the underlying connection). relay is
// empty when that component is missing.
func CircuitRelay(remote ma.Multiaddr) (relay peer.ID, relayed bool) {
	for _, c := range remote {
		switch c.Code() {
		case ma.P_CIRCUIT:
			return relay, true
		case ma.P_P2P:
			id, err := peer.IDFromBytes(c.RawValue())
			if err != nil {
				id = ""
			}
			relay = id
		default:
			relay = ""
		}
	}
	return "", false
}

// relayGroupNet is the network relay groups are written in: 100::/64,
// the IPv6 discard-only prefix (RFC 6666), which never carries a peer.
var relayGroupNet = [8]byte{0x01, 0x00}

// RelayBitsIPv4 and RelayBitsIPv6 are the network of a relay's address
// that its relayed connections are grouped by (RelayGroup): an IPv4 /24,
// an IPv6 /32 (an allocation's block, not its /48s: one holder of a /32
// would otherwise run 65,536 relays in as many groups).
const (
	RelayBitsIPv4 = PrefixBitsIPv4
	RelayBitsIPv6 = BlockBitsIPv6
)

// RelayGroup is the budget group of a circuit-relayed connection (spec
// §9a); relayed is false when remote is not a circuit-relayed address
// (CircuitRelay). The group is that of the relay's network: the IPv4 /24
// or IPv6 /32 (RelayBitsIPv4, RelayBitsIPv6) of the address remote starts
// with, which is the relay's address as the underlying connection sees
// it (go-libp2p writes <relay's address>/p2p/<relay>/p2p-circuit; the IP
// is the transport's, not a claim of the relay). Every peer that reaches
// this node through relays of one network shares that group, whatever
// the relays' peer IDs: go-libp2p's circuit client takes a relayed
// connection from any connected peer that speaks the relay's stop
// protocol, reservation or not, so relay IDs cost as little as peer IDs.
// The group is apart from the group of the relay's own address (one
// abuser behind a public relay spends the relay's group, not the share
// of the relay's network as a direct peer). An address that does not
// start with an IP is grouped by the relay's peer ID instead (an unnamed
// relay has one group too).
//
// It is written as a netip.Prefix so that every table keyed by a budget
// prefix (the verifier's and the prover's prefix budgets, the inbound
// slots, VerifierProver.NewSessionFor) takes it unchanged and stays
// bounded as before: the /128 whose upper 64 bits are relayGroupNet and
// whose lower 64 bits are the first 8 bytes of SHA-256("acaptcha relay
// network\x00" || the network's 16-byte address (IPv4 as IPv4-mapped
// IPv6) || its prefix length in bits, one byte), or, by peer ID, of
// SHA-256("acaptcha relay group\x00" || relay's peer ID bytes). It cannot
// equal an IP group: DrawPrefix gives only /24s and /48s.
func RelayGroup(remote ma.Multiaddr) (group netip.Prefix, relayed bool) {
	relay, relayed := CircuitRelay(remote)
	if !relayed {
		return netip.Prefix{}, false
	}
	h := sha256.New()
	if nw, ok := relayNetwork(remote); ok {
		a := nw.Addr().As16()
		h.Write([]byte("acaptcha relay network\x00"))
		h.Write(a[:])
		h.Write([]byte{byte(nw.Bits())})
	} else {
		h.Write([]byte("acaptcha relay group\x00"))
		h.Write([]byte(relay))
	}
	var a [16]byte
	copy(a[:8], relayGroupNet[:])
	copy(a[8:], h.Sum(nil)[:8])
	return netip.PrefixFrom(netip.AddrFrom16(a), 128), true
}

// relayNetwork is the network of the IP address remote starts with
// (RelayBitsIPv4, RelayBitsIPv6 of GroupAddr's address, IPv4 written
// IPv4-mapped); ok is false when remote does not start with one.
func relayNetwork(remote ma.Multiaddr) (nw netip.Prefix, ok bool) {
	if len(remote) == 0 {
		return netip.Prefix{}, false
	}
	switch remote[0].Code() {
	case ma.P_IP4, ma.P_IP6:
	default:
		return netip.Prefix{}, false
	}
	ip, valid := netip.AddrFromSlice(remote[0].RawValue())
	if !valid {
		return netip.Prefix{}, false
	}
	ip = GroupAddr(ip)
	bits := RelayBitsIPv6
	if ip.Is4() {
		bits = RelayBitsIPv4
	}
	nw, err := ip.Prefix(bits)
	if err != nil {
		return netip.Prefix{}, false
	}
	if nw.Addr().Is4() {
		nw = netip.PrefixFrom(netip.AddrFrom16(nw.Addr().As16()), 96+bits)
	}
	return nw, true
}

// budgets holds the per-peer and global budgets of a Service.
type budgets struct {
	cfg *Config

	// prefixOf maps a peer to the IP prefix of its connection (ok false:
	// no prefix budget applies). It is called without mu held.
	prefixOf func(peer.ID) (netip.Prefix, bool)

	mu          sync.Mutex
	peers       map[peer.ID]*peerState
	prefixes    map[netip.Prefix]*bucket       // verifier: sets drawn per prefix
	blocks      map[netip.Prefix]*bucket       // verifier: sets drawn per IPv6 /32
	vprefixes   map[netip.Prefix]*proverPrefix // prover: per verifier prefix
	vblocks     map[netip.Prefix]*proverPrefix // prover: per verifier IPv6 /32
	draws       bucket                         // global sets drawn
	calls       bucket                         // global answerer calls
	sessions    bucket                         // global sessions answered
	tokens      bucket                         // global prompt tokens
	pow         bucket                         // global proof-of-work hashes solved
	payPrefixes map[netip.Prefix]*bucket       // verifier: payment hashes per prover prefix
	payBlocks   map[netip.Prefix]*bucket       // verifier: payment hashes per prover IPv6 /32
	pay         bucket                         // verifier: global payment hashes solved
	payRefused  int                            // payments refused for spent budgets
	outbound    int                            // verifier sessions in flight
	unpaid      int                            // counters for tests and metrics
	drawRefused int
}

func newBudgets(cfg *Config) *budgets {
	return &budgets{cfg: cfg, peers: map[peer.ID]*peerState{}, prefixes: map[netip.Prefix]*bucket{},
		blocks: map[netip.Prefix]*bucket{}, vprefixes: map[netip.Prefix]*proverPrefix{},
		vblocks: map[netip.Prefix]*proverPrefix{}, payPrefixes: map[netip.Prefix]*bucket{},
		payBlocks: map[netip.Prefix]*bucket{}}
}

// proverPrefix is what the prover's budgets remember of one verifier IP
// prefix (or relay group), or of one IPv6 /32 block.
type proverPrefix struct {
	sessions bucket
	pow      bucket
	calls    bucket
	tokens   bucket
}

// maxRoundTokens is the token bound of the largest round a verifier can
// send: a narrative and a question of the largest sizes (skill.TokenBound).
var maxRoundTokens = skill.TokenBound(skill.MaxNarrativeBytes) + skill.TokenBound(skill.MaxQuestionBytes)

// prefixShare is the share of a node-wide prover budget of size full
// that the verifiers of one prefix may use: an eighth, but at least unit
// (one session's worth) and never more than full, so that a small budget
// does not shut out every verifier that has a prefix.
func prefixShare(full, unit int) float64 {
	return max(float64(full)/proverPrefixShare, float64(min(full, unit)))
}

// prefixCalls and prefixTokens are the answerer calls and prompt tokens
// the verifiers of one prefix may use per window: an eighth of the
// node's, at least one session of the most rounds (skill.Parts) and one
// round of the largest size (maxRoundTokens).
func (b *budgets) prefixCalls() float64 { return prefixShare(b.cfg.MaxProverCalls, skill.Parts) }
func (b *budgets) prefixTokens() float64 {
	return prefixShare(b.cfg.MaxProverTokens, maxRoundTokens)
}

// groupCaps are the capacities of one group's prover budgets.
type groupCaps struct{ sessions, pow, calls, tokens float64 }

// prefixCaps are those of a verifier prefix.
func (b *budgets) prefixCaps() groupCaps {
	c := b.cfg
	return groupCaps{sessions: float64(c.MaxSessionsPerVerifierPrefix), pow: float64(c.MaxProverPowWork / proverPrefixShare),
		calls: b.prefixCalls(), tokens: b.prefixTokens()}
}

// blockCaps are those of a verifier IPv6 /32: MaxSessionsPerVerifierBlock
// sessions, and BlockFactor times a prefix's proof of work, calls and
// tokens, at most the node's.
func (b *budgets) blockCaps() groupCaps {
	c := b.cfg
	pc := b.prefixCaps()
	return groupCaps{sessions: float64(c.MaxSessionsPerVerifierBlock),
		pow:   min(float64(c.MaxProverPowWork), BlockFactor*pc.pow),
		calls: min(float64(c.MaxProverCalls), BlockFactor*pc.calls), tokens: min(float64(c.MaxProverTokens), BlockFactor*pc.tokens)}
}

// proverPrefixLocked returns the prover budgets of pfx, refilled to now.
func (b *budgets) proverPrefixLocked(pfx netip.Prefix, now time.Time) *proverPrefix {
	return b.proverGroupLocked(b.vprefixes, pfx, b.prefixCaps(), now)
}

// proverBlockLocked returns the prover budgets of the IPv6 /32 blk.
func (b *budgets) proverBlockLocked(blk netip.Prefix, now time.Time) *proverPrefix {
	return b.proverGroupLocked(b.vblocks, blk, b.blockCaps(), now)
}

// proverGroupLocked returns the prover budgets of key in table m (of
// capacities caps), refilled to now. When the table is full, groups
// back to full budgets are forgotten first, then any (a forgotten group
// starts full; the global budgets still bound it).
func (b *budgets) proverGroupLocked(m map[netip.Prefix]*proverPrefix, key netip.Prefix, caps groupCaps, now time.Time) *proverPrefix {
	w := b.cfg.ProverWindow
	refill := func(pp *proverPrefix) {
		pp.sessions.refill(caps.sessions, w, now)
		pp.pow.refill(caps.pow, w, now)
		pp.calls.refill(caps.calls, w, now)
		pp.tokens.refill(caps.tokens, w, now)
	}
	if pp, ok := m[key]; ok {
		refill(pp)
		return pp
	}
	bounded.MakeRoom(m, maxTrackedPrefixes, func(pp *proverPrefix) bool {
		refill(pp)
		return pp.sessions.tokens >= caps.sessions && pp.pow.tokens >= caps.pow && pp.calls.tokens >= caps.calls && pp.tokens.tokens >= caps.tokens
	})
	pp := &proverPrefix{}
	refill(pp)
	m[key] = pp
	return pp
}

// blockFor is the IPv6 /32 whose budgets p, of group pfx (hasPfx false:
// none), spends besides its group's: BlockOf(pfx), unless the node
// admits p (an admitted peer counts in its group only, so that an
// abuser sharing its /32 cannot spend its service). It asks TrustedPeer,
// so it runs before the budgets' lock is taken.
func (b *budgets) blockFor(p peer.ID, pfx netip.Prefix, hasPfx bool) (netip.Prefix, bool) {
	if !hasPfx {
		return netip.Prefix{}, false
	}
	blk, ok := BlockOf(pfx)
	if !ok || b.trusted(p) {
		return netip.Prefix{}, false
	}
	return blk, true
}

// prefix returns the prefix of p, if any prefix budget applies.
func (b *budgets) prefix(p peer.ID) (netip.Prefix, bool) {
	if b.prefixOf == nil {
		return netip.Prefix{}, false
	}
	return b.prefixOf(p)
}

// drawGroupLocked returns the draw bucket of key in m (capacity
// capacity), refilled to now. When the table is full, groups whose
// bucket is full again are forgotten first, then any (a forgotten group
// starts full; the global budget still bounds it).
func (b *budgets) drawGroupLocked(m map[netip.Prefix]*bucket, key netip.Prefix, capacity int, now time.Time) *bucket {
	c, w := float64(capacity), b.cfg.DrawWindow
	if pb, ok := m[key]; ok {
		pb.refill(c, w, now)
		return pb
	}
	bounded.MakeRoom(m, maxTrackedPrefixes, func(pb *bucket) bool { return pb.full(c, w, now) })
	pb := &bucket{}
	pb.refill(c, w, now)
	m[key] = pb
	return pb
}

// drawsLeftIn reports whether the draw bucket of key in m (capacity
// capacity), if the table has one, holds a draw (a group it has none of
// is full).
func (b *budgets) drawsLeftIn(m map[netip.Prefix]*bucket, key netip.Prefix, capacity int, now time.Time) bool {
	pb, ok := m[key]
	if !ok {
		return true
	}
	pb.refill(float64(capacity), b.cfg.DrawWindow, now)
	return pb.tokens >= 1
}

// stateLocked returns p's state, evicting idle peers when the table is
// full (a forgotten peer starts with full buckets; the global budgets
// still bound it).
func (b *budgets) stateLocked(p peer.ID, now time.Time) *peerState {
	if st, ok := b.peers[p]; ok {
		return st
	}
	bounded.MakeRoom(b.peers, maxTrackedPeers, func(st *peerState) bool { return b.idleLocked(st, now) })
	st := &peerState{}
	b.peers[p] = st
	return st
}

func (b *budgets) idleLocked(st *peerState, now time.Time) bool {
	c := b.cfg
	return st.draws.full(float64(c.MaxDrawsPerPeer), c.DrawWindow, now) &&
		st.sessions.full(float64(c.MaxSessionsPerVerifier), c.ProverWindow, now) &&
		st.calls.full(float64(c.MaxCallsPerVerifier), c.ProverWindow, now) &&
		st.tokens.full(float64(c.MaxTokensPerVerifier), c.ProverWindow, now) &&
		st.pay.full(b.payPeerCap(), c.DrawWindow, now) &&
		b.failuresLocked(st, now) == 0
}

func (b *budgets) failuresLocked(st *peerState, now time.Time) float64 {
	if st.failures > 0 {
		st.failures = max(0, st.failures-float64(now.Sub(st.failedAt))/float64(failureDecay))
		st.failedAt = now
	}
	return st.failures
}

// ---- verifier side ----

// payPeerCap is one prover's share of the verifier's payment budget.
// payPrefixCap is the payment hashes per window of the provers of one
// prefix, payBlockCap of the provers of one IPv6 /32 that the node does
// not admit (BlockFactor prefixes' worth, spec §9a).
func (b *budgets) payPrefixCap() int { return b.cfg.MaxVerifierPayWork / proverPrefixShare }

func (b *budgets) payBlockCap() int {
	return min(BlockFactor*b.payPrefixCap(), b.cfg.MaxVerifierPayWork)
}

func (b *budgets) payPeerCap() float64 {
	return float64(b.cfg.MaxVerifierPayWork / verifierPayPeerShare)
}

// chargePay spends 2^d hashes of the verifier's payment budgets (spec
// §5b: the global one, prover p's share and its IP prefix's) before this
// node solves the payment p's hello ack asks, or reports false, spending
// nothing, when any cannot cover it. It is never given back: the work is
// done whatever follows. The last quarter of the global budget is kept
// for the peers the node admits (Config.TrustedPeer).
func (b *budgets) chargePay(p peer.ID, d int, now time.Time) bool {
	if d <= 0 {
		return true
	}
	c := b.cfg
	work := math.Ldexp(1, d)
	full := float64(c.MaxVerifierPayWork)
	reserve := b.reserveFor(p, full, work)
	pfx, hasPfx := b.prefix(p)
	// The provers of one IPv6 /32 that the node does not admit share
	// BlockFactor prefixes' worth (spec §9a, "IPv6 /32 blocks").
	blk, hasBlk := b.blockFor(p, pfx, hasPfx)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pay.refill(full, c.DrawWindow, now)
	st := b.stateLocked(p, now)
	st.pay.refill(b.payPeerCap(), c.DrawWindow, now)
	var pb, bb *bucket
	if hasPfx {
		pb = b.drawGroupLocked(b.payPrefixes, pfx, b.payPrefixCap(), now)
	}
	if hasBlk {
		bb = b.drawGroupLocked(b.payBlocks, blk, b.payBlockCap(), now)
	}
	if b.pay.tokens < work+reserve || st.pay.tokens < work || pb != nil && pb.tokens < work || bb != nil && bb.tokens < work {
		b.payRefused++
		st.usage.PayRefused++
		return false
	}
	b.pay.tokens -= work
	st.pay.tokens -= work
	st.usage.PayWork += int64(work)
	if pb != nil {
		pb.tokens -= work
	}
	if bb != nil {
		bb.tokens -= work
	}
	return true
}

// refundPay gives back a charge of chargePay(p, d) whose payment was not
// solved because every solver was busy (Service.paySolver): the budgets
// and p's counted work, each bucket capped at its size.
func (b *budgets) refundPay(p peer.ID, d int, now time.Time) {
	if d <= 0 {
		return
	}
	c := b.cfg
	work := math.Ldexp(1, d)
	full := float64(c.MaxVerifierPayWork)
	pfx, hasPfx := b.prefix(p)
	blk, hasBlk := b.blockFor(p, pfx, hasPfx)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pay.tokens = min(b.pay.tokens+work, full)
	st := b.stateLocked(p, now)
	st.pay.tokens = min(st.pay.tokens+work, b.payPeerCap())
	st.usage.PayWork -= int64(work)
	if hasPfx {
		if g := b.payPrefixes[pfx]; g != nil {
			g.tokens = min(g.tokens+work, float64(b.payPrefixCap()))
		}
	}
	if hasBlk {
		if g := b.payBlocks[blk]; g != nil {
			g.tokens = min(g.tokens+work, float64(b.payBlockCap()))
		}
	}
}

// startOutbound counts a verifier session in flight; it returns the
// function that ends it.
func (b *budgets) startOutbound() func() {
	b.mu.Lock()
	b.outbound++
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		b.outbound--
		b.mu.Unlock()
	}
}

// difficulty is the proof of work asked of p now (spec §5a):
// base + min(failures, 6) + load bits, capped.
func (b *budgets) difficulty(p peer.ID, now time.Time) int {
	c := b.cfg
	b.mu.Lock()
	defer b.mu.Unlock()
	d := max(c.PowDifficulty, 0)
	if st, ok := b.peers[p]; ok {
		d += min(int(b.failuresLocked(st, now)+0.5), maxFailureBits)
	}
	d += bits.Len(uint(max(b.outbound-1, 0) / loadStep))
	b.draws.refill(float64(c.MaxDraws), c.DrawWindow, now)
	d += globalDrawBits(b.draws.tokens, float64(c.MaxDraws))
	return min(d, c.MaxPowDifficulty)
}

// payDifficulty is D_v, the payment this node's prover asks of a verifier
// that came to it (spec §5b; 0: none): PayDifficulty plus 2 bits for each
// halving of the node's answerer-call budget left below its full size (as
// G of §5a: a verifier of fresh IDs emptying it meets a rising price),
// capped at MaxPowDifficulty.
func (b *budgets) payDifficulty(now time.Time) int {
	c := b.cfg
	if c.PayDifficulty <= 0 {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls.refill(float64(c.MaxProverCalls), c.ProverWindow, now)
	return min(c.PayDifficulty+globalDrawBits(b.calls.tokens, float64(c.MaxProverCalls)), c.MaxPowDifficulty)
}

// globalDrawBits is G of spec §5a: 2 bits for each halving of the global
// draw budget below its full size (left under 1/2: 2, under 1/4: 4,
// under 1/8: 6), at most 8. Fresh peer IDs and prefixes are free, so the
// node-wide budget is what a spender of draws meets; one bit below half
// (before) let the last draws go at almost the price of the first.
func globalDrawBits(left, full float64) int {
	g := 0
	for frac := full / 2; left < frac && g < 8; frac /= 2 {
		g += 2
	}
	return g
}

// canDraw reports whether p's share, the share of its IP prefix and the
// global budget allow a draw, without spending it.
func (b *budgets) canDraw(p peer.ID, now time.Time) bool {
	pfx, hasPfx := b.prefix(p)
	return b.canDrawIn(p, pfx, hasPfx, now)
}

// canDrawIn is canDraw with the prefix given (hasPfx false: none), for a
// door that saw the peer's address itself (Verifier.Begin).
func (b *budgets) canDrawIn(p peer.ID, pfx netip.Prefix, hasPfx bool, now time.Time) bool {
	c := b.cfg
	reserve := b.reserveFor(p, float64(c.MaxDraws), 1)
	blk, hasBlk := b.blockFor(p, pfx, hasPfx)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.draws.refill(float64(c.MaxDraws), c.DrawWindow, now)
	if b.draws.tokens < 1+reserve {
		return false
	}
	if hasPfx && !b.drawsLeftIn(b.prefixes, pfx, c.MaxDrawsPerPrefix, now) ||
		hasBlk && !b.drawsLeftIn(b.blocks, blk, c.MaxDrawsPerBlock, now) {
		return false
	}
	st, ok := b.peers[p]
	if !ok {
		return true
	}
	st.draws.refill(float64(c.MaxDrawsPerPeer), c.DrawWindow, now)
	return st.draws.tokens >= 1
}

// takeDraw spends one draw of p's share, of its prefix's share (and, for
// a peer the node does not admit, of its IPv6 /32's: blockFor) and of the
// global budget. It is called once per paid hello ack (spec §5a), so it
// also counts p's paid sessions.
func (b *budgets) takeDraw(p peer.ID, now time.Time) bool {
	pfx, hasPfx := b.prefix(p)
	return b.takeDrawIn(p, pfx, hasPfx, now)
}

// takeDrawIn is takeDraw with the prefix given.
func (b *budgets) takeDrawIn(p peer.ID, pfx netip.Prefix, hasPfx bool, now time.Time) bool {
	c := b.cfg
	// The last quarter of the global draws is kept for the peers the
	// node admits (Config.TrustedPeer, spec §9a).
	reserve := b.reserveFor(p, float64(c.MaxDraws), 1)
	blk, hasBlk := b.blockFor(p, pfx, hasPfx)
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.stateLocked(p, now)
	st.usage.Paid++
	st.draws.refill(float64(c.MaxDrawsPerPeer), c.DrawWindow, now)
	b.draws.refill(float64(c.MaxDraws), c.DrawWindow, now)
	var pb, bb *bucket
	if hasPfx {
		pb = b.drawGroupLocked(b.prefixes, pfx, c.MaxDrawsPerPrefix, now)
	}
	if hasBlk {
		bb = b.drawGroupLocked(b.blocks, blk, c.MaxDrawsPerBlock, now)
	}
	if st.draws.tokens < 1 || b.draws.tokens < 1+reserve || (pb != nil && pb.tokens < 1) || (bb != nil && bb.tokens < 1) {
		b.drawRefused++
		st.usage.Refused++
		return false
	}
	st.draws.tokens--
	b.draws.tokens--
	if pb != nil {
		pb.tokens--
	}
	if bb != nil {
		bb.tokens--
	}
	st.usage.Drawn++
	return true
}

// refundDraw gives back a draw whose set was given back unseen (to p's
// share, its prefix's share and the global budget).
func (b *budgets) refundDraw(p peer.ID, now time.Time) {
	pfx, hasPfx := b.prefix(p)
	b.refundDrawIn(p, pfx, hasPfx, now)
}

// refundDrawIn is refundDraw with the prefix given.
func (b *budgets) refundDrawIn(p peer.ID, pfx netip.Prefix, hasPfx bool, now time.Time) {
	c := b.cfg
	blk, hasBlk := b.blockFor(p, pfx, hasPfx)
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.stateLocked(p, now)
	st.draws.give(1, float64(c.MaxDrawsPerPeer), c.DrawWindow, now)
	b.draws.give(1, float64(c.MaxDraws), c.DrawWindow, now)
	if pb, ok := b.prefixes[pfx]; ok && hasPfx {
		pb.give(1, float64(c.MaxDrawsPerPrefix), c.DrawWindow, now)
	}
	if bb, ok := b.blocks[blk]; ok && hasBlk {
		bb.give(1, float64(c.MaxDrawsPerBlock), c.DrawWindow, now)
	}
	st.usage.Returned++
}

// failed records a failure of p (unpaid, rejected, broken session): it
// raises the difficulty asked of p.
func (b *budgets) failed(p peer.ID, now time.Time, unpaid bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.stateLocked(p, now)
	b.failuresLocked(st, now)
	st.failures = min(st.failures+1, maxFailureBits)
	st.failedAt = now
	if unpaid {
		b.unpaid++
	}
}

// ---- prover side ----

// A session is never given back: what the prover spends on one before
// its first answerer call (a proof of work, the verdict it stores) is
// what the session budgets bound.

// Standard round sizes (spec §9a): at the hello the prover reserves the
// prompt tokens of a session of rounds of at most these sizes, so that a
// verifier whose rounds stay within them never meets a round refused for
// tokens, whoever else spent the budgets meanwhile (a verifier that drains
// a node's token budget would otherwise make honest verifiers meet
// mid-session refusals, which they sign as `declined` rejections of it).
const (
	StandardNarrativeBytes = 8 << 10
	StandardQuestionBytes  = 512
)

// standardRoundTokens is the token bound of a standard round (5,802).
var standardRoundTokens = skill.TokenBound(StandardNarrativeBytes) + skill.TokenBound(StandardQuestionBytes)

// SessionTokens is the reservation of a session of the given rounds
// before any cap applies: round r is charged rounds 1..r's text, so
// rounds(rounds+1)/2 standard rounds (34,812 for three).
func SessionTokens(rounds int) int {
	rounds = max(rounds, 1)
	return rounds * (rounds + 1) / 2 * standardRoundTokens
}

// tokenHold is a prover session's reservation of prompt tokens (spec
// §9a), taken at the hello by admitSessionOwn: the session's rounds draw
// on it first and on the budgets only for what exceeds it, and release
// gives what is left back when the session ends. It keeps the budgets
// the hello charged (the verifier's group and /32 block, hasBlk as the
// hello decided it), so that what goes back goes where it came from
// whatever the node's admission of the verifier does meanwhile; the
// session's unused answerer calls go back the same way (refundCalls).
type tokenHold struct {
	b        *budgets
	p        peer.ID
	pfx, blk netip.Prefix
	hasPfx   bool
	hasBlk   bool
	left     int
}

// charge spends n prompt tokens of a round: from the hold, and what
// exceeds it from the budgets (chargeTokensIn). It reports false,
// spending nothing, when the budgets cannot cover the excess.
func (h *tokenHold) charge(n int, now time.Time) bool {
	if n <= h.left {
		h.left -= n
		return true
	}
	if !h.b.chargeTokensAt(h.p, h.pfx, h.hasPfx, h.blk, h.hasBlk, n-h.left, now) {
		return false
	}
	h.left = 0
	return true
}

// give returns n tokens charged and not used (a round's bound settled to
// its exact count) to the hold.
func (h *tokenHold) give(n int) { h.left += max(n, 0) }

// release gives what is left of the hold back to the budgets.
func (h *tokenHold) release(now time.Time) {
	if h.b != nil && h.left > 0 {
		h.b.refundTokensAt(h.p, h.pfx, h.hasPfx, h.blk, h.hasBlk, h.left, now)
	}
	h.left = 0
}

// refundCalls gives n answerer calls the session reserved at its hello
// and did not make back to the budgets the hello charged.
func (h *tokenHold) refundCalls(n int, now time.Time) {
	if h.b != nil {
		h.b.refundCallsAt(h.p, h.pfx, h.hasPfx, h.blk, h.hasBlk, n, now)
	}
}

// admitSessionOwn reserves one session, rounds answerer calls and the
// session's prompt tokens (the hold: SessionTokens, at most a quarter of
// the capacity of each token budget that applies) for verifier p, of its
// prefix's (hasPfx false: none; as the prover reads it off the stream
// once), its /32 block's and the node's budgets, or says which budget is
// spent (why; empty when the session is admitted). The checks run in the
// order of spec §9a: the verifier's sessions, calls and tokens; its
// prefix's; its block's; the node's, each of the node's with the quarter
// kept for trusted verifiers (reserveFor: one session, one call, the
// hold's tokens as the unit). own reports whether a refusal is the
// verifier's own doing: its peer's, its network's or its block's budget
// is spent, not the node's. A hello refused so is silent for its group
// (spec §6 step 1).
func (b *budgets) admitSessionOwn(p peer.ID, pfx netip.Prefix, hasPfx bool, rounds int, now time.Time) (hold tokenHold, own bool, why string) {
	c := b.cfg
	trusted := b.trusted(p)
	blk, hasBlk := BlockOf(pfx)
	hasBlk = hasBlk && hasPfx && !trusted // blockFor, with trusted asked once
	// The reservation is at most a quarter of each applicable budget's
	// capacity, so that a budget smaller than four standard sessions
	// still admits sessions until three quarters of it are spent.
	capacity := min(float64(c.MaxTokensPerVerifier), float64(c.MaxProverTokens))
	if hasPfx {
		capacity = min(capacity, b.prefixTokens())
	}
	if hasBlk {
		capacity = min(capacity, b.blockCaps().tokens)
	}
	res := max(1, math.Floor(min(float64(SessionTokens(rounds)), capacity/4)))
	sessionReserve := keptFor(trusted, float64(c.MaxProverSessions), 1)
	callReserve := keptFor(trusted, float64(c.MaxProverCalls), 1)
	tokenReserve := keptFor(trusted, float64(c.MaxProverTokens), res)
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.stateLocked(p, now)
	st.sessions.refill(float64(c.MaxSessionsPerVerifier), c.ProverWindow, now)
	st.calls.refill(float64(c.MaxCallsPerVerifier), c.ProverWindow, now)
	st.tokens.refill(float64(c.MaxTokensPerVerifier), c.ProverWindow, now)
	b.calls.refill(float64(c.MaxProverCalls), c.ProverWindow, now)
	b.sessions.refill(float64(c.MaxProverSessions), c.ProverWindow, now)
	b.tokens.refill(float64(c.MaxProverTokens), c.ProverWindow, now)
	var pp, bp *proverPrefix
	if hasPfx {
		pp = b.proverPrefixLocked(pfx, now)
	}
	if hasBlk {
		bp = b.proverBlockLocked(blk, now)
	}
	r := float64(rounds)
	switch {
	case st.sessions.tokens < 1:
		return tokenHold{}, true, "session budget for this verifier spent"
	case st.calls.tokens < r:
		return tokenHold{}, true, "answerer-call budget for this verifier spent"
	case st.tokens.tokens < res:
		return tokenHold{}, true, "token budget for this verifier spent"
	case pp != nil && pp.sessions.tokens < 1:
		return tokenHold{}, true, "session budget for this verifier's network spent"
	case pp != nil && pp.calls.tokens < r:
		return tokenHold{}, true, "answerer-call budget for this verifier's network spent"
	case pp != nil && pp.tokens.tokens < res:
		return tokenHold{}, true, "token budget for this verifier's network spent"
	case bp != nil && bp.sessions.tokens < 1:
		return tokenHold{}, true, "session budget for this verifier's IPv6 /32 spent"
	case bp != nil && bp.calls.tokens < r:
		return tokenHold{}, true, "answerer-call budget for this verifier's IPv6 /32 spent"
	case bp != nil && bp.tokens.tokens < res:
		return tokenHold{}, true, "token budget for this verifier's IPv6 /32 spent"
	case b.sessions.tokens < 1:
		return tokenHold{}, false, "session budget of this node spent"
	case b.sessions.tokens < 1+sessionReserve:
		return tokenHold{}, false, "session budget of this node spent but for the share kept for verifiers it trusts"
	case b.calls.tokens < r:
		return tokenHold{}, false, "answerer-call budget of this node spent"
	case b.calls.tokens < r+callReserve:
		return tokenHold{}, false, "answerer-call budget of this node spent but for the share kept for verifiers it trusts"
	case b.tokens.tokens < res:
		return tokenHold{}, false, "token budget of this node spent"
	case b.tokens.tokens < res+tokenReserve:
		return tokenHold{}, false, "token budget of this node spent but for the share kept for verifiers it trusts"
	}
	st.sessions.tokens--
	st.calls.tokens -= r
	st.tokens.tokens -= res
	b.calls.tokens -= r
	b.sessions.tokens--
	b.tokens.tokens -= res
	for _, g := range []*proverPrefix{pp, bp} {
		if g != nil {
			g.sessions.tokens--
			g.calls.tokens -= r
			g.tokens.tokens -= res
		}
	}
	return tokenHold{b: b, p: p, pfx: pfx, blk: blk, hasPfx: hasPfx, hasBlk: hasBlk, left: int(res)}, false, ""
}

// proverReserve is the share of the node's global budgets kept for
// trusted peers (Config.TrustedPeer): 1/4 of the prover side's sessions,
// answerer calls, prompt tokens and proof of work, and of the verifier
// side's set draws.
const proverReserve = 4

// reserveFor is how much of a global budget of size full peer
// p must leave when it spends unit of it (keptFor). It asks
// TrustedPeer, so it runs before the budgets' lock is taken.
func (b *budgets) reserveFor(p peer.ID, full, unit float64) float64 {
	return keptFor(b.trusted(p), full, unit)
}

// trusted reports whether p may use the reserved quarter
// (Config.TrustedPeer); it is called without the budgets' lock.
func (b *budgets) trusted(p peer.ID) bool {
	f := b.cfg.TrustedPeer
	return f != nil && f(p)
}

// keptFor is how much of a global prover budget of size full a verifier
// must leave when it spends unit of it: a quarter (whole units), or
// nothing for a trusted verifier; never so much that a full budget could
// not take one unit (a small budget would otherwise shut every verifier
// out of a node that trusts nobody yet).
func keptFor(trusted bool, full, unit float64) float64 {
	if trusted {
		return 0
	}
	return max(0, min(math.Floor(full/proverReserve/unit)*unit, full-unit))
}

// chargePow spends 2^d proof-of-work hashes of the global budget and of
// the share of p's IP prefix before the prover solves a proof of work of
// d bits, or reports false (spending nothing) when either cannot cover
// it. It is never given back: the work is done whatever follows.
func (b *budgets) chargePow(p peer.ID, d int, now time.Time) bool {
	pfx, hasPfx := b.prefix(p)
	return b.chargePowIn(p, pfx, hasPfx, d, now)
}

// chargePowIn is chargePow with the verifier's prefix given.
func (b *budgets) chargePowIn(p peer.ID, pfx netip.Prefix, hasPfx bool, d int, now time.Time) bool {
	ok, _ := b.chargePowOwn(p, pfx, hasPfx, d, now)
	return ok
}

// chargePowOwn is chargePowIn that also reports whether a refusal is the
// verifier's own doing (own): its network's or its block's share of the
// work is spent, not the node's.
func (b *budgets) chargePowOwn(p peer.ID, pfx netip.Prefix, hasPfx bool, d int, now time.Time) (ok, own bool) {
	if d <= 0 {
		return true, false
	}
	c := b.cfg
	work := math.Ldexp(1, d)
	reserve := b.reserveFor(p, float64(c.MaxProverPowWork), work)
	blk, hasBlk := b.blockFor(p, pfx, hasPfx)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pow.refill(float64(c.MaxProverPowWork), c.ProverWindow, now)
	var pp, bp *proverPrefix
	if hasPfx {
		pp = b.proverPrefixLocked(pfx, now)
	}
	if hasBlk {
		bp = b.proverBlockLocked(blk, now)
	}
	if pp != nil && pp.pow.tokens < work || bp != nil && bp.pow.tokens < work {
		return false, true
	}
	if b.pow.tokens < work+reserve {
		return false, false
	}
	b.pow.tokens -= work
	for _, g := range []*proverPrefix{pp, bp} {
		if g != nil {
			g.pow.tokens -= work
		}
	}
	return true, false
}

// refundCalls gives back reserved answerer calls that were not made, to
// verifier p's budget, its current connection's prefix's (prefix) and the
// node's.
func (b *budgets) refundCalls(p peer.ID, n int, now time.Time) {
	if n <= 0 {
		return
	}
	pfx, hasPfx := b.prefix(p)
	b.refundCallsIn(p, pfx, hasPfx, n, now)
}

// refundCallsIn is refundCalls with the verifier's prefix given.
func (b *budgets) refundCallsIn(p peer.ID, pfx netip.Prefix, hasPfx bool, n int, now time.Time) {
	blk, hasBlk := b.blockFor(p, pfx, hasPfx)
	b.refundCallsAt(p, pfx, hasPfx, blk, hasBlk, n, now)
}

// refundCallsAt is refundCallsIn with the verifier's /32 block given
// (hasBlk false: none), as its hello decided it: whether the block's
// budget applies depends on whether the node admits p, which can change
// during a session.
func (b *budgets) refundCallsAt(p peer.ID, pfx netip.Prefix, hasPfx bool, blk netip.Prefix, hasBlk bool, n int, now time.Time) {
	if n <= 0 {
		return
	}
	c := b.cfg
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stateLocked(p, now).calls.give(float64(n), float64(c.MaxCallsPerVerifier), c.ProverWindow, now)
	b.calls.give(float64(n), float64(c.MaxProverCalls), c.ProverWindow, now)
	if pp, ok := b.vprefixes[pfx]; ok && hasPfx {
		pp.calls.give(float64(n), b.prefixCalls(), c.ProverWindow, now)
	}
	if bp, ok := b.vblocks[blk]; ok && hasBlk {
		bp.calls.give(float64(n), b.blockCaps().calls, c.ProverWindow, now)
	}
}

// refundTokens gives back n prompt tokens that were reserved and not
// used, to verifier p's budget, its current connection's prefix's (prefix)
// and the node's.
func (b *budgets) refundTokens(p peer.ID, n int, now time.Time) {
	if n <= 0 {
		return
	}
	pfx, hasPfx := b.prefix(p)
	b.refundTokensIn(p, pfx, hasPfx, n, now)
}

// refundTokensIn is refundTokens with the verifier's prefix given.
func (b *budgets) refundTokensIn(p peer.ID, pfx netip.Prefix, hasPfx bool, n int, now time.Time) {
	blk, hasBlk := b.blockFor(p, pfx, hasPfx)
	b.refundTokensAt(p, pfx, hasPfx, blk, hasBlk, n, now)
}

// refundTokensAt is refundTokensIn with the verifier's /32 block given
// (refundCallsAt).
func (b *budgets) refundTokensAt(p peer.ID, pfx netip.Prefix, hasPfx bool, blk netip.Prefix, hasBlk bool, n int, now time.Time) {
	if n <= 0 {
		return
	}
	c := b.cfg
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stateLocked(p, now).tokens.give(float64(n), float64(c.MaxTokensPerVerifier), c.ProverWindow, now)
	b.tokens.give(float64(n), float64(c.MaxProverTokens), c.ProverWindow, now)
	if pp, ok := b.vprefixes[pfx]; ok && hasPfx {
		pp.tokens.give(float64(n), b.prefixTokens(), c.ProverWindow, now)
	}
	if bp, ok := b.vblocks[blk]; ok && hasBlk {
		bp.tokens.give(float64(n), b.blockCaps().tokens, c.ProverWindow, now)
	}
}

// chargeTokens spends n prompt tokens (one round) of verifier p's
// budget, of its current connection's prefix's (prefix) and of the node's;
// it reports false, spending nothing, when one cannot cover them or when
// p, not trusted, would take the node's kept quarter (reserveFor, the
// round's n tokens as the unit).
func (b *budgets) chargeTokens(p peer.ID, n int, now time.Time) bool {
	if n <= 0 {
		return true
	}
	pfx, hasPfx := b.prefix(p)
	return b.chargeTokensIn(p, pfx, hasPfx, n, now)
}

// chargeTokensIn is chargeTokens with the verifier's prefix given.
func (b *budgets) chargeTokensIn(p peer.ID, pfx netip.Prefix, hasPfx bool, n int, now time.Time) bool {
	blk, hasBlk := b.blockFor(p, pfx, hasPfx)
	return b.chargeTokensAt(p, pfx, hasPfx, blk, hasBlk, n, now)
}

// chargeTokensAt is chargeTokensIn with the verifier's /32 block given
// (refundCallsAt).
func (b *budgets) chargeTokensAt(p peer.ID, pfx netip.Prefix, hasPfx bool, blk netip.Prefix, hasBlk bool, n int, now time.Time) bool {
	if n <= 0 {
		return true
	}
	c := b.cfg
	x := float64(n)
	reserve := b.reserveFor(p, float64(c.MaxProverTokens), x)
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.stateLocked(p, now)
	st.tokens.refill(float64(c.MaxTokensPerVerifier), c.ProverWindow, now)
	b.tokens.refill(float64(c.MaxProverTokens), c.ProverWindow, now)
	var pp, bp *proverPrefix
	if hasPfx {
		pp = b.proverPrefixLocked(pfx, now)
	}
	if hasBlk {
		bp = b.proverBlockLocked(blk, now)
	}
	if st.tokens.tokens < x || pp != nil && pp.tokens.tokens < x || bp != nil && bp.tokens.tokens < x || b.tokens.tokens < x+reserve {
		return false
	}
	st.tokens.tokens -= x
	b.tokens.tokens -= x
	for _, g := range []*proverPrefix{pp, bp} {
		if g != nil {
			g.tokens.tokens -= x
		}
	}
	return true
}
