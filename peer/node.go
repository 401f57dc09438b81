// Package peer is the acaptcha node: a libp2p host with a persistent
// identity, the attestation protocol service, mutual attestation, the
// attestation store, and connection-manager protection for peers that pass.
package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	lpproto "github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// Connection-manager tags for attested peers.
const (
	TagAttested     = "acaptcha-attested"
	tagValue        = 100
	protectAttested = "acaptcha"
)

// storeLinger is how long a record written while sessions run waits for
// the next one to share its synced commit, an append to the store's
// write-ahead log (store.SetLinger). A mutual attestation leaves two
// records on each node (issued and received); the wait ends as soon as
// the second comes, so it costs Attest nothing (it waits for both), and a
// record with no company returns at most this much later (a session takes
// seconds). Measured when commits went to bbolt directly: 5 ms against
// none took 8 pairs from 330-407 to 378-476 attestations/s on the disk;
// 20 ms caught the pairs whose sessions end further apart there (in
// alternated runs of BenchmarkMutualAttestConcurrent on the disk, 2.00-2.06
// synced commits per attestation against 2.26-2.44, disjoint 504-579 /s
// against 427-551 and hub 607-615 against 535-577; tmpfs unchanged).
const storeLinger = 20 * time.Millisecond

// Config configures a node. The zero value of a field is its default,
// which for a library node is not always the CLI's: see AttestPolicy,
// Gossip and NAT, which `acaptcha node` sets. VerifyFirst and Limits
// (PowDifficulty, PayDifficulty) default as the CLI's do: on when the
// node is reachable beyond loopback. New refuses a negative count or duration
// in Config and Limits (KeepExpired alone gives a negative value a
// meaning: never prune), naming the field.
type Config struct {
	// Key is the node identity; when nil it is loaded from (or created
	// at) KeyFile.
	Key     crypto.PrivKey
	KeyFile string
	// Store is an open store; when nil StorePath is opened and owned by
	// the node.
	Store     *Store
	StorePath string
	// ListenAddrs are the multiaddrs the host listens on (default
	// DefaultListenAddrs: every IPv4 interface, port DefaultPort).
	ListenAddrs []string
	// Policy is the timing policy of the sessions this node runs as
	// verifier (skill.DefaultPolicy when Rounds is 0); New refuses one
	// that fails Policy.Check.
	Policy skill.Policy
	// Source supplies challenges when this node verifies; nil means the
	// node only proves.
	Source skill.Source
	// Feedback, when set, receives every verdict this node reaches as
	// verifier (protocol.Config.Feedback: consensus feedback that retires
	// questions); wrap Source in skill.RetiringSource with it.
	Feedback *skill.Consensus
	// Prover answers challenges when this node is verified; nil means the
	// node declines to be verified.
	Prover skill.Prover
	// AttestationTTL is how long the records this node issues are valid
	// (default protocol.DefaultAttestationTTL, 24 h); at most
	// MaxKeptLifetime, the longest other nodes keep a record.
	AttestationTTL time.Duration
	// MutualTimeout bounds how long Attest waits for the peer's verdict
	// on us after our own verification finished (default: the policy's
	// total budget plus 30 s).
	MutualTimeout time.Duration
	// Logger receives the node's logs (slog.Default() when nil).
	Logger *slog.Logger
	// HostOptions are appended to the libp2p options (tests use them).
	// They must not set a connection gater: the node installs its own
	// (gate.go), and libp2p refuses a second one.
	HostOptions []libp2p.Option
	// timing overrides the node's internal intervals (timing.go; tests
	// set it through export_test.go); nil for the defaults.
	timing *timing

	// First contact (contact.go).
	// AttestPolicy says which newly identified peers that speak the
	// protocol this node attests by itself (default AttestNone for the
	// library; the CLI node uses AttestAll).
	AttestPolicy AttestPolicy
	// RetryRejected is how long a peer that failed stays un-retried
	// (default 1 h; doubling per consecutive failure up to 24 h,
	// MaxRetryRejected, which is also its largest value).
	RetryRejected time.Duration
	// ReattestBefore re-attests an admitted, connected peer this long
	// before our attestation of it expires (default 1 h).
	ReattestBefore time.Duration
	// MaxConcurrentAttest bounds first-contact sessions in flight
	// (default 4).
	MaxConcurrentAttest int
	// KeepExpired is how long the store keeps an attestation (issued or
	// received) after it expired; the node prunes older ones at start and
	// every hour (default DefaultKeepExpired; negative: never). Without
	// it the store only grows: every session leaves a record, and the
	// budgets bound them per hour, not in total.
	KeepExpired time.Duration

	// Trust and sharing (admission.go, gossip.go, trust.go).
	// TrustQuorum admits a peer without a fresh challenge when at least
	// this many distinct issuers, each verified directly by this node,
	// hold valid accepted attestations of it; 0 disables transitive trust
	// (at most 2 * MaxLearned, the most learned records a node keeps).
	TrustQuorum int
	// Gossip publishes accepted attestations on the GossipSub topic and
	// learns others' (default off for the library; on for the CLI node).
	Gossip bool
	// BlockRejected blocks a rejected peer at the connection gater for
	// this long (0: never block).
	BlockRejected time.Duration
	// RequireSource is the weakest challenge source an attestation must
	// name (spec/attestation.md section 3.1) to admit its subject directly
	// or to count toward a trust quorum; weaker records are still stored
	// and gossiped. Empty means DefaultRequireSource (hybrid: LLM-written
	// or LLM-reworded challenges only); AnySource accepts every record.
	RequireSource skill.SourceKind
	// SourceKind is the kind of challenges Source serves, for the start-up
	// warning and first contact, when Source is no skill.Provenancer.
	SourceKind skill.SourceKind

	// Connection limits (limits.go). ConnLowWater and ConnHighWater are
	// the connection manager's watermarks (defaults 100 and 400); the
	// resource manager's inbound-connection limit is set above the high
	// watermark so that the manager, not the limit, decides who stays.
	// ConnGracePeriod protects new connections from trimming (default
	// 1 min). ConnsPerIP bounds inbound connections per IPv4 address and
	// IPv6 /56 (default 8). NewConnsPerSecond bounds new connections,
	// either direction, node-wide (default DefaultNewConnsPerSecond, 64,
	// with a burst of four seconds of it; an eighth of it per IPv4 /24,
	// a quarter per IPv6 /32), beside libp2p's per-prefix rates
	// (connRateLimiter); exempt loopback peers count in neither,
	// limited ones share one bucket of the node-wide rate.
	//
	// Loopback peers count in the per-IP and per-prefix limits (this
	// one, the protocol's draws, sessions and inbound streams, first
	// contact's, gossip's) when the node can be reached beyond loopback
	// (ReachableBeyondLoopback: ListenAddrs, the defaults included, or
	// any Relays),
	// since behind a local proxy, tunnel or sidecar every peer is a
	// loopback peer; a node on loopback only exempts them, as libp2p
	// does. LimitLoopback counts them always, ExemptLoopback never
	// (LimitLoopback wins), as `acaptcha node --limit-loopback on|off`.
	// The zero value was "exempt" whatever the node listened on: a
	// library node on its default 0.0.0.0 behind a local proxy had no
	// per-IP limit at all, where the CLI's had.
	ConnLowWater      int
	ConnHighWater     int
	ConnGracePeriod   time.Duration
	ConnsPerIP        int
	NewConnsPerSecond int
	LimitLoopback     bool
	ExemptLoopback    bool
	// Limits are the attestation protocol's budgets (limits.go; zero
	// fields: the protocol defaults, but the proof of work and the
	// payment, auto).
	Limits Limits
	// VerifyFirst: this node's prover answers a verifier that came to it
	// (the node did not dial it itself) only once the node admits it; until then
	// its hellos are declined VERIFY_FIRST and the node verifies it
	// (spec/protocol.md §5c). Attest copes with a peer that does so: it
	// waits for the peer's verdict on this node and asks again.
	//
	// By default (neither field set) New turns it on when the node is
	// reachable beyond loopback (ReachableBeyondLoopback(ListenAddrs,
	// Relays), the default listen addresses included) and leaves it off
	// on loopback only, as `acaptcha node --verify-first auto` does:
	// without it a script that contacts a public node has its prover
	// answer any challenge, within the Limits.MaxProver* budgets.
	// VerifyFirst turns it on always, AnswerFirst off always (VerifyFirst
	// wins), as --verify-first on|off. The zero value was "off" whatever
	// the node listened on: a library node on its default 0.0.0.0 answered
	// every verifier that came to it, where the CLI's verified it first.
	VerifyFirst bool
	AnswerFirst bool

	// Discovery (discovery.go).
	Bootstrap []string // multiaddrs with /p2p/
	MDNS      bool
	DHT       bool
	// Rendezvous is the DHT rendezvous string (default "acaptcha").
	Rendezvous string
	// DialPublicOnly refuses every dial to an address that is not
	// public (private, loopback, link-local, shared address space, ...),
	// after DNS resolution, whoever named it: for a node on a public
	// server, as Kubo's server profile filters private ranges. A DHT
	// record or gossip can name a DNS name that resolves into the node's
	// own network, which the DHT's address scope (public IPs only) does
	// not see. It makes mDNS discovery and private --bootstrap peers
	// useless (gate.go).
	DialPublicOnly bool

	// NAT traversal (nat.go). NAT turns on hole punching, AutoNAT v2 (and
	// the AutoNAT v1 service) and UPnP/NAT-PMP port mapping (default off
	// for the library; on for the CLI node). Relays are static circuit-v2
	// relays (multiaddrs with /p2p/) the node reserves a slot with when it
	// finds itself unreachable. RelayService makes a publicly reachable
	// node a relay for others (RelayServiceResources).
	NAT          bool
	Relays       []string
	RelayService bool

	// Metrics, when set, receives the node's Prometheus collectors
	// (metrics.go).
	Metrics prometheus.Registerer
}

// AttestPolicy selects which peers a node attests on first contact.
type AttestPolicy string

// Attest policies.
const (
	AttestNone     AttestPolicy = "none"
	AttestAll      AttestPolicy = "all"
	AttestInbound  AttestPolicy = "inbound"
	AttestOutbound AttestPolicy = "outbound"
)

// Node is a running acaptcha node.
type Node struct {
	cfg       Config
	t         timing // resolved Config.timing
	events    fanout // events.go
	log       *slog.Logger
	host      host.Host
	cm        *connmgr.BasicConnMgr
	gate      *nodeGater // the connection gater (gate.go)
	svc       *protocol.Service
	store     *Store
	ownsStore bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	inflight map[peer.ID]*call
	waiters  map[peer.ID][]chan protocol.ProverResult

	// State of the issue-5 subsystems, each owned by its own file.
	contact   contactState
	solicited solicitState // solicit.go
	trust     trustState
	gossip    gossipState
	discovery discoveryState
	metrics   *metrics
	// presentLimit rate-limits inbound presentations (present.go), and
	// presentSeen remembers the presented envelopes it verified (a
	// replayed one costs a hash, not a signature check; trust.md §3.5).
	presentLimit presentLimiter
	presentSeen  protocol.AttestationCache
	// presentOut rate-limits the presentations first contact sends
	// (allowPresentTo).
	presentOut presentLimiter
	// warns rate-limits per-peer warnings (lograte.go).
	warns warnLimiter

	// src is Config.Source as the protocol service draws from it,
	// watched for exhaustion (nil without a source); exhaustWarn
	// rate-limits the warning that it ran out.
	src         *skill.WatchedSource
	exhaustWarn rateWarn
	fillingWarn rateWarn
	// drain counts the sessions running and refuses new ones once
	// Shutdown began.
	drain     drainState
	closeOnce sync.Once
	closeErr  error
}

type call struct {
	started time.Time
	done    chan struct{}
	res     *protocol.Result
	err     error
	// ended is set once the session has its verdict (right before it is
	// written; protocol.Config.OnVerdict) or has ended without one; the
	// node then still closes the stream and records it, and done closes
	// after that. verdict is the result from OnVerdict, if it came.
	ended   atomic.Bool
	verdict atomic.Pointer[protocol.Result]
}

// New starts a node.
func New(cfg Config) (*Node, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.Policy.Rounds == 0 {
		cfg.Policy = skill.DefaultPolicy()
	}
	if err := cfg.Policy.Check(); err != nil {
		return nil, err
	}
	if cfg.AttestationTTL < 0 || cfg.AttestationTTL > MaxKeptLifetime {
		return nil, fmt.Errorf("node: attestation TTL %s: want up to %s, the longest nodes keep a record (trust.md §3.6)", cfg.AttestationTTL, MaxKeptLifetime)
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	key := cfg.Key
	if key == nil {
		if cfg.KeyFile == "" {
			return nil, errors.New("node: no key and no key file")
		}
		k, err := LoadOrCreateKey(cfg.KeyFile, log)
		if err != nil {
			return nil, err
		}
		key = k
	}
	// Resolved once: every limit below reads cfg.LimitLoopback, the
	// service the resolved VerifyFirst and Limits (resolveAuto).
	cfg.resolveAuto(ReachableBeyondLoopback(cfg.ListenAddrs, cfg.Relays))
	n := &Node{cfg: cfg, log: log, t: defaultTiming(), inflight: map[peer.ID]*call{}, waiters: map[peer.ID][]chan protocol.ProverResult{}}
	if cfg.timing != nil {
		n.t = *cfg.timing
	}
	n.store = cfg.Store
	if n.store == nil {
		if cfg.StorePath == "" {
			return nil, errors.New("node: no store and no store path")
		}
		s, err := OpenStore(cfg.StorePath)
		if err != nil {
			return nil, err
		}
		n.store, n.ownsStore = s, true
		switch r := s.Recovered(); {
		case r.Undecodable > 0:
			log.Warn("store: write-ahead log held frames that decode to no attestation; they were left out", "store", cfg.StorePath, "recovered", r.Records, "left_out", r.Undecodable)
		case r.Records > 0:
			log.Info("store: attestations recovered from the write-ahead log (the node did not close cleanly)", "store", cfg.StorePath, "recovered", r.Records)
		}
	}
	listen := cfg.ListenAddrs
	if len(listen) == 0 {
		listen = DefaultListenAddrs
	}
	if err := checkListenPorts(listen); err != nil {
		_ = n.closeStore() // the error returned says why New failed
		return nil, err
	}
	var relayACL *relayACL
	natOpts, err := natOptions(&n.cfg, key, &relayACL) // nat.go
	if err != nil {
		_ = n.closeStore() // the error returned says why New failed
		return nil, err
	}
	gateOpts, err := n.gaterOptions() // gate.go
	if err != nil {
		_ = n.closeStore() // the error returned says why New failed
		return nil, err
	}
	cm, rm, err := newConnLimits(&n.cfg)
	if err != nil {
		_ = n.closeStore() // the error returned says why New failed
		return nil, err
	}
	rm.gate = n.gate // stop streams are served from the gate's relays only
	n.cm = cm
	opts := append([]libp2p.Option{
		libp2p.Identity(key),
		libp2p.ListenAddrStrings(listen...),
		libp2p.ConnectionManager(cm),
		libp2p.ResourceManager(rm),
	}, cfg.HostOptions...)
	opts = append(opts, libp2pMetrics(cfg.Metrics))
	opts = append(opts, gateOpts...)
	opts = append(opts, natOpts...)
	h, err := libp2p.New(opts...)
	if err != nil {
		cm.Close()
		rm.Close()         // libp2p.New closes only what it built
		_ = n.closeStore() // the error returned says why New failed
		return nil, fmt.Errorf("start libp2p host: %w", err)
	}
	n.host = h
	if relayACL != nil {
		relayACL.setHost(h)
	}
	limitLoopback := n.cfg.LimitLoopback
	rm.setNets(func(p peer.ID) addrNets { return hostPeerNets(h, p, limitLoopback) })
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.metrics = newMetrics(cfg.Metrics, n.store) // before the service can report a session
	if err := n.startEvents(); err != nil {
		n.stopEvents()
		h.Close()
		cm.Close()
		_ = n.closeStore() // the error returned says why New failed
		return nil, fmt.Errorf("attestation events: %w", err)
	}
	// The service draws from the source through a watch that warns when
	// it runs out.
	var src skill.Source
	if cfg.Source != nil {
		n.src = skill.NewWatchedSource(cfg.Source, n.onSourceExhausted)
		src = n.src
	}
	// The service sees the host through leashHost (contact.go), which
	// tells first contact when a peer answers our hello, and drainHost,
	// which counts the sessions it answers and refuses new ones once
	// Shutdown began.
	svc, err := protocol.NewService(drainHost{Host: leashHost{Host: h, n: n}, n: n}, n.cfg.protocolLimits(protocol.Config{
		Policy:         cfg.Policy,
		Source:         src,
		Feedback:       cfg.Feedback,
		Prover:         cfg.Prover,
		AttestationTTL: cfg.AttestationTTL,
		Logger:         log,
		OnProved:       n.onProved,
		OnReciprocal: func(p peer.ID, drawsLeft bool) pb.Reciprocal {
			if n.drain.isDraining() {
				return pb.Reciprocal_RECIPROCAL_BUSY // no session back: the node is stopping
			}
			return n.onReciprocal(p, drawsLeft)
		},
		OnVerdict: n.onVerdict,
		// Peers this node admits may use the last quarter of its prover
		// budgets, which fresh peer IDs cannot drain (protocol.md §9a).
		TrustedPeer: func(p peer.ID) bool { return n.Admission(p).Admitted },
		VerifyFirst: cfg.VerifyFirst,
		// With VerifyFirst, a verifier our own standing verdict accepted
		// is answered even when that verdict is on challenges weaker than
		// we require to admit it (a node without an LLM serves
		// procedural ones): it answered ours.
		VerifiedPeer:     n.verifiedByUs,
		RejectedPeer:     func(p peer.ID) bool { return n.Admission(p).Reason == NotAdmittedRejected },
		Solicited:        n.askedToVerify,
		Contacted:        n.contactedByUs,
		Requested:        n.requestedByUs,
		MutualWaitProver: n.waitingProver,
		MutualWait:       n.mutualWait,
		OnReflection: func(p peer.ID) {
			n.warnPeer(p, "peer reflected our own challenge back to us")
		},
	}))
	if err != nil {
		h.Close()
		cm.Close()
		_ = n.closeStore() // the error returned says why New failed
		return nil, fmt.Errorf("start attestation service: %w", err)
	}
	n.svc = svc
	n.watchSolicited()
	// Subsystems start in dependency order: trust state and gossip before
	// first contact (which consults them), discovery last (it brings peers).
	for _, start := range []func() error{n.startTrust, n.watchProtection, n.startGossip, n.startContact, n.startDiscovery} {
		if err := start(); err != nil {
			n.Close()
			return nil, err
		}
	}
	return n, nil
}

// maxTrustQuorum is the largest Config.TrustQuorum: the most learned
// attestations a node's trust index holds at once (twice MaxLearned), so
// a larger quorum could never be met.
const maxTrustQuorum = maxLearnedHard

// resolveAuto settles the fields whose zero value is "auto" for a node
// that peers from beyond loopback can reach (reachable) or not: a node
// reachable beyond loopback counts loopback peers in its per-IP and
// per-prefix limits (unless ExemptLoopback), verifies a verifier that
// came to it before its prover answers (unless AnswerFirst), and asks
// protocol.PublicPowDifficulty both as its base proof of work (unless
// Limits.PowDifficulty is set: protocol.NoPow for none) and as the payment
// of a verifier it does not admit (unless Limits.PayDifficulty is set:
// NoPay for none); a node on loopback only does none of these. After it,
// Limits.PayDifficulty is protocol.Config's (0: none).
func (cfg *Config) resolveAuto(reachable bool) {
	cfg.LimitLoopback = cfg.LimitLoopback || !cfg.ExemptLoopback && reachable
	cfg.VerifyFirst = cfg.VerifyFirst || !cfg.AnswerFirst && reachable
	auto := protocol.NoPow
	if reachable {
		auto = protocol.PublicPowDifficulty
	}
	if cfg.Limits.PowDifficulty == 0 {
		cfg.Limits.PowDifficulty = auto
	}
	switch cfg.Limits.PayDifficulty {
	case 0:
		cfg.Limits.PayDifficulty = max(auto, 0)
	case NoPay:
		cfg.Limits.PayDifficulty = 0 // protocol.Config's none
	}
}

// check refuses the fields of cfg whose value no default stands for,
// naming the field: a negative count or duration (each of them has a
// default for 0, and KeepExpired alone gives a negative one a meaning), a
// trust quorum no index can meet, a challenge-source kind with no rank,
// and invalid protocol budgets (Limits.Check). They were taken silently:
// a negative RetryRejected or ConnsPerIP became the default, a negative
// TrustQuorum or BlockRejected turned the feature off, a SourceKind
// misspelt ("LLM") left the node's source unknown, so the start-up warning
// and the source checks of first contact did not apply, and a
// Limits.PowDifficulty above the node's maximum was lowered to it.
func (cfg *Config) check() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"MutualTimeout", cfg.MutualTimeout}, {"RetryRejected", cfg.RetryRejected}, {"ReattestBefore", cfg.ReattestBefore},
		{"BlockRejected", cfg.BlockRejected}, {"ConnGracePeriod", cfg.ConnGracePeriod},
	} {
		if d.v < 0 {
			return fmt.Errorf("node: Config.%s %s must not be negative (0: the default)", d.name, d.v)
		}
	}
	for _, c := range []struct {
		name string
		v    int
	}{
		{"MaxConcurrentAttest", cfg.MaxConcurrentAttest}, {"TrustQuorum", cfg.TrustQuorum},
		{"ConnLowWater", cfg.ConnLowWater}, {"ConnHighWater", cfg.ConnHighWater}, {"ConnsPerIP", cfg.ConnsPerIP},
		{"NewConnsPerSecond", cfg.NewConnsPerSecond},
	} {
		if c.v < 0 {
			return fmt.Errorf("node: Config.%s %d must not be negative (0: the default)", c.name, c.v)
		}
	}
	if cfg.RetryRejected > MaxRetryRejected {
		// The doubling back-off stops at MaxRetryRejected, while the
		// back-off from a stored rejection after a restart (and the
		// check that our rejection still stands) took the value whole.
		return fmt.Errorf("node: Config.RetryRejected %s: at most %s, where the doubling back-off stops", cfg.RetryRejected, MaxRetryRejected)
	}
	if cfg.TrustQuorum > maxTrustQuorum {
		return fmt.Errorf("node: Config.TrustQuorum %d: at most %d, the most learned attestations a node keeps", cfg.TrustQuorum, maxTrustQuorum)
	}
	if cfg.SourceKind != skill.SourceUnknown && !cfg.SourceKind.Valid() {
		return fmt.Errorf("node: Config.SourceKind %q: want one of %v, or empty to ask the source (skill.Provenancer)", cfg.SourceKind, skill.SourceKinds)
	}
	if err := cfg.Limits.Check(); err != nil {
		return fmt.Errorf("node: Config.Limits: %w", err)
	}
	return nil
}

// closeStore closes the store the node opened (Config.StorePath) and
// returns what its final checkpoint reported. Nothing acknowledged is
// lost when it fails: the records stay in the write-ahead log and the
// next open applies them; the caller hears of it all the same.
func (n *Node) closeStore() error {
	if n.ownsStore && n.store != nil {
		if err := n.store.Close(); err != nil {
			return fmt.Errorf("close store: %w", err)
		}
	}
	return nil
}

// Host returns the libp2p host.
func (n *Node) Host() host.Host { return n.host }

// ID returns the node's peer ID.
func (n *Node) ID() peer.ID { return n.host.ID() }

// Store returns the node's attestation store.
func (n *Node) Store() *Store { return n.store }

// Addrs returns the node's listen addresses with its /p2p/ component.
func (n *Node) Addrs() []ma.Multiaddr {
	addrs, err := peer.AddrInfoToP2pAddrs(&peer.AddrInfo{ID: n.host.ID(), Addrs: n.host.Addrs()})
	if err != nil {
		return nil
	}
	return addrs
}

// Close stops the node at once: the protocol service first (the sessions
// in flight are cut: their streams are reset), then background work, the
// host and the store. A session that had its verdict when it was cut
// (signed, and perhaps delivered) stores it before the store closes:
// Close waits up to closeSessionsWait for the cut sessions to end.
// Shutdown lets the sessions end first. Close may be called more than
// once, and while Shutdown waits (it then returns too).
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.close() })
	return n.closeErr
}

// closeSessionsWait bounds how long Close waits for the sessions it cut
// to end (they store a verdict they had; a cut stream ends the others at
// once).
const closeSessionsWait = 5 * time.Second

func (n *Node) close() error {
	n.cancel()
	n.stopDiscovery()
	n.stopContact()
	n.svc.Close()
	n.stopGossip()
	n.wg.Wait()
	// A session whose verdict was in hand when the service closed (its
	// record not yet stored: Verify returns it, the peer may hold it)
	// stores it before the store closes; none starts any more.
	idle := n.drain.start()
	t := time.NewTimer(closeSessionsWait)
	select {
	case <-idle:
	case <-t.C:
		n.log.Warn("closing with sessions still running: a verdict they reach is not stored", "sessions", n.drain.sessions())
	}
	t.Stop()
	n.stopEvents()
	err := n.host.Close()
	n.cm.Close()
	return errors.Join(err, n.closeStore())
}

// Mutual is the outcome of a mutual attestation.
type Mutual struct {
	Peer peer.ID
	// Ours is our verification of the peer.
	Ours *protocol.Result
	// Theirs is the peer's verification of us, as reported to our prover;
	// nil with TheirsErr set when it did not arrive.
	Theirs    *protocol.ProverResult
	TheirsErr error
	// TheirsStored says Theirs is the peer's verdict on us from our store:
	// it still stands, so we did not ask for a new one (a node verifies a
	// peer back only when it holds no standing verdict on it).
	TheirsStored bool
}

// ErrNetwork wraps failures to reach a peer. It is protocol.ErrNetwork:
// one sentinel for "the network failed" whichever layer saw it.
var ErrNetwork = protocol.ErrNetwork

// ErrReciprocalDropped is Mutual.TheirsErr when the peer's HelloAck said
// it will not verify us back (spec/protocol.md §1a); the error names why.
var ErrReciprocalDropped = errors.New("peer will not verify us back")

// ConnectError is the error of a failed connection to id: ErrNetwork and
// err, and, when libp2p did not dial at all because a dial to the same
// address failed moments ago (its dial backoff: 5 s after the first
// failure, growing with each), a sentence saying so. The bare "dial
// backoff" read as a fault of the peer's where a retry a few seconds
// later would dial again.
func ConnectError(id peer.ID, err error) error {
	if errors.Is(err, swarm.ErrDialBackoff) {
		return fmt.Errorf("connect to %s: %w (a dial to it failed moments ago, and libp2p waits at least %v before dialing the same address again): %w", id, ErrNetwork, swarm.BackoffBase, err)
	}
	return fmt.Errorf("connect to %s: %w: %w", id, ErrNetwork, err)
}

// ParseAddr parses a /.../p2p/ID multiaddr.
func ParseAddr(s string) (peer.AddrInfo, error) {
	ai, err := peer.AddrInfoFromString(s)
	if err != nil {
		return peer.AddrInfo{}, fmt.Errorf("parse peer address %q (want a multiaddr ending in /p2p/PEER_ID): %w", s, err)
	}
	return *ai, nil
}

// Attest connects to a peer and runs mutual attestation: we verify it and
// ask it to verify us back; both run concurrently on their own streams.
func (n *Node) Attest(ctx context.Context, ai peer.AddrInfo) (*Mutual, error) {
	if ai.ID == n.host.ID() {
		return nil, errors.New("cannot attest ourselves")
	}
	n.solicit(ai.ID, true, true) // this node came to the peer and asks it to verify us (solicit.go)
	if err := n.host.Connect(ctx, ai); err != nil {
		n.forgetSolicited(ai.ID)
		return nil, ConnectError(ai.ID, err)
	}
	if err := n.awaitDirect(ctx, ai.ID); err != nil { // nat.go: hole punching, relay limits
		return nil, err
	}
	if prev := n.standingVerdictOnUs(ai.ID, time.Now()); prev != nil {
		res, err := n.verifyAfter(ctx, ai.ID, false, time.Now())
		if err != nil {
			return nil, err
		}
		return &Mutual{Peer: ai.ID, Ours: res, Theirs: prev, TheirsStored: true}, nil
	}
	theirs := n.wait(ai.ID)
	defer n.unwait(ai.ID, theirs)
	// A session already in flight (first contact) did not ask the peer to
	// verify us back: let it finish and run our own, reciprocal one.
	res, err := n.verifyAfter(ctx, ai.ID, true, time.Now())
	if vf := (*protocol.VerifyFirstError)(nil); errors.As(err, &vf) {
		return n.attestVerifiedFirst(ctx, ai.ID, vf, theirs)
	}
	if err != nil {
		return nil, err
	}
	m := &Mutual{Peer: ai.ID, Ours: res}
	timeout := n.mutualTimeout()
	if why, dropped := protocol.ReciprocalDropped(res.Reciprocal); dropped {
		// The peer's HelloAck said it will not verify us back (spec
		// §1a): nothing to wait for, unless a session of its own with us
		// ended meanwhile or is still running (its verdict counts).
		select {
		case pr := <-theirs:
			m.Theirs = &pr
			return m, nil
		default:
		}
		if !n.svc.Proving(ai.ID) {
			m.TheirsErr = fmt.Errorf("%w: %s", ErrReciprocalDropped, why)
			return m, nil
		}
	}
	// A session back that is running when the wait is up runs under the
	// peer's total_ms, which may be longer than ours: it is waited for,
	// up to the longest session this node accepts as prover.
	start := time.Now()
	hard := start.Add(max(timeout, n.svc.Config().MaxAcceptTotal+reciprocalGrace))
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case pr := <-theirs:
			m.Theirs = &pr
			return m, nil
		case <-t.C:
			if now := time.Now(); n.svc.Proving(ai.ID) && now.Before(hard) {
				t.Reset(min(time.Second, hard.Sub(now)))
				continue
			}
			m.TheirsErr = fmt.Errorf("peer did not verify us within %s", time.Since(start).Round(time.Millisecond))
			return m, nil
		case <-ctx.Done():
			m.TheirsErr = fmt.Errorf("waiting for the peer's verdict: %w", ctx.Err())
			return m, nil
		}
	}
}

// verifiedByUs reports whether p is admitted, or our own standing verdict
// accepted it (on challenges below our admission source too), or a
// session of ours with p has written an acceptance that is not recorded
// yet: the verdict reaches p before the store and trust index have it,
// and p asks again as soon as it reads it (spec/protocol.md §5c).
func (n *Node) verifiedByUs(p peer.ID) bool {
	if adm := n.Admission(p); adm.Admitted || adm.Reason == NotAdmittedSource {
		return true
	}
	n.mu.Lock()
	c := n.inflight[p]
	n.mu.Unlock()
	if c == nil {
		return false
	}
	r := c.verdict.Load()
	return r != nil && r.Verdict.Accepted && r.Attestation != nil
}

// mutualTimeout is how long Attest waits for the peer's verdict on us.
func (n *Node) mutualTimeout() time.Duration {
	if t := n.cfg.MutualTimeout; t > 0 {
		return t
	}
	return n.cfg.Policy.Total + 30*time.Second
}

// attestVerifiedFirst finishes Attest with a peer whose prover declined
// our hello VERIFY_FIRST (spec/protocol.md §5c: it answers a verifier
// that came to it once it admits it): when it verifies us now (or a
// session of its own with us runs), wait for its verdict, then, if it
// accepted us, verify it again. It fails with vf when the peer will not
// verify us now, and when it rejected us.
func (n *Node) attestVerifiedFirst(ctx context.Context, p peer.ID, vf *protocol.VerifyFirstError, theirs chan protocol.ProverResult) (*Mutual, error) {
	if vf.Reciprocal != pb.Reciprocal_RECIPROCAL_WILL && !n.svc.Proving(p) {
		select {
		case pr := <-theirs: // its session with us ended meanwhile
			return n.afterVerifiedFirst(ctx, p, pr)
		default:
		}
		return nil, fmt.Errorf("attest %s: %w", p, vf)
	}
	start := time.Now()
	hard := start.Add(max(n.mutualTimeout(), n.svc.Config().MaxAcceptTotal+reciprocalGrace))
	t := time.NewTimer(n.mutualTimeout())
	defer t.Stop()
	for {
		select {
		case pr := <-theirs:
			return n.afterVerifiedFirst(ctx, p, pr)
		case <-t.C:
			if now := time.Now(); n.svc.Proving(p) && now.Before(hard) {
				t.Reset(min(time.Second, hard.Sub(now)))
				continue
			}
			return nil, fmt.Errorf("attest %s: it verifies us before it answers us and gave no verdict within %s: %w", p, time.Since(start).Round(time.Millisecond), vf)
		case <-ctx.Done():
			return nil, fmt.Errorf("attest %s: waiting for its verdict on us before it answers us: %w", p, ctx.Err())
		}
	}
}

// afterVerifiedFirst verifies p once p's verdict on us, pr, came (see
// attestVerifiedFirst).
func (n *Node) afterVerifiedFirst(ctx context.Context, p peer.ID, pr protocol.ProverResult) (*Mutual, error) {
	if pr.Err != nil {
		// Wrapped: a broken connection stays ErrNetwork (the CLI's exit
		// code for it), a cancelled one the context's error.
		return nil, fmt.Errorf("attest %s: it verifies us before it answers us, and its session verifying us failed: %w", p, pr.Err)
	}
	if !pr.Accepted {
		return nil, &RejectedFirstError{Peer: p, Theirs: pr}
	}
	res, err := n.verifyAfter(ctx, p, false, time.Now())
	if errors.Is(err, protocol.ErrVerifyFirst) {
		return nil, fmt.Errorf("attest %s: it accepted us but does not admit us (its trust rules, such as the challenge source it requires, are not met), and it answers only the verifiers it admits: %w", p, err)
	}
	if err != nil {
		return nil, fmt.Errorf("attest %s after its verdict on us: %w", p, err)
	}
	return &Mutual{Peer: p, Ours: res, Theirs: &pr}, nil
}

// RejectedFirstError is Attest's error for a peer that verifies us
// before it answers us (spec/protocol.md §5c) and did not accept us: we
// ran no session with it, so there is no verdict of ours. Theirs is its
// verdict on us, with its signed attestation (stored like any other).
type RejectedFirstError struct {
	Peer   peer.ID
	Theirs protocol.ProverResult
}

func (e *RejectedFirstError) Error() string {
	return fmt.Sprintf("attest %s: it verifies us before it answers us, and did not accept us (%s)", e.Peer, e.Theirs.Reason)
}

// reciprocalGrace is added to the longest session this node accepts as a
// prover to bound the wait for a session back that is running (its
// handshake, probes and verdict around the rounds).
const reciprocalGrace = 65 * time.Second

// standingVerdictOnUs returns p's newest valid verdict on us from the
// store when p would not verify us again if asked (see onReciprocal, with
// our own ReattestBefore and RetryRejected standing in for p's): an
// acceptance not yet due for re-attestation, or a recent rejection.
func (n *Node) standingVerdictOnUs(p peer.ID, now time.Time) *protocol.ProverResult {
	e, err := n.store.Latest(Received, p, now)
	if err != nil || e == nil {
		return nil
	}
	a := e.Attestation
	if a.Accepted {
		if !now.Before(n.reattestAt(a)) {
			return nil
		}
	} else if retry := n.contact.retryRejected; retry <= 0 || !now.Before(a.IssuedAt.Add(retry)) {
		return nil
	}
	return &protocol.ProverResult{
		Verifier: p, Accepted: a.Accepted, Reason: a.Reason, FailedRound: a.FailedRound,
		Envelope: e.Envelope, Attestation: a, Rounds: len(a.Rounds),
	}
}

// Verify runs one verifier session against a connected peer (no reciprocal
// request). Concurrent calls for the same peer share one session.
func (n *Node) Verify(ctx context.Context, p peer.ID) (*protocol.Result, error) {
	// An explicit verification: this node comes to p (it pays p's
	// payment, spec §5b), kept while connected (solicit.go).
	n.solicit(p, false, true)
	defer n.forgetSolicited(p)
	return n.verify(ctx, p, false)
}

func (n *Node) verify(ctx context.Context, p peer.ID, reciprocal bool) (*protocol.Result, error) {
	return n.verifyAfter(ctx, p, reciprocal, time.Time{})
}

// verifyAfter runs a verifier session against p, sharing one that is
// already in flight if it started at or after notBefore. A session that
// started earlier may already have delivered its verdict, so a caller that
// needs a verdict the peer has not seen yet (a reciprocal request) waits for
// it to end and then starts its own.
func (n *Node) verifyAfter(ctx context.Context, p peer.ID, reciprocal bool, notBefore time.Time) (*protocol.Result, error) {
	n.mu.Lock()
	for {
		c, ok := n.inflight[p]
		if !ok {
			break
		}
		n.mu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if !c.started.Before(notBefore) {
			return c.res, c.err
		}
		n.mu.Lock()
	}
	if !n.drain.enter() {
		n.mu.Unlock()
		return nil, ErrShuttingDown
	}
	defer n.drain.exit() // after the record is stored
	c := &call{started: time.Now(), done: make(chan struct{})}
	n.inflight[p] = c
	n.mu.Unlock()

	c.res, c.err = n.svc.Verify(ctx, p, reciprocal)
	if errors.Is(c.err, protocol.ErrVerifyFirst) {
		n.noteVerifyFirst(p) // for mutualWait (solicit.go)
	}
	c.ended.Store(true)
	if c.err == nil {
		n.recordIssued(c.res, "libp2p")
	}
	n.mu.Lock()
	delete(n.inflight, p)
	n.mu.Unlock()
	close(c.done)
	return c.res, c.err
}

// onVerdict marks our session to p as having its verdict (before it is
// written): a reciprocal request of p is no longer answered WILL on its
// account (contact.go, onReciprocal).
func (n *Node) onVerdict(p peer.ID, res *protocol.Result) {
	n.mu.Lock()
	c := n.inflight[p]
	n.mu.Unlock()
	if c != nil {
		c.verdict.Store(res)
		c.ended.Store(true)
	}
}

// onProved is the prover side's report of a finished session.
func (n *Node) onProved(r protocol.ProverResult) { n.recordReceived(r) }

func (n *Node) wait(p peer.ID) chan protocol.ProverResult {
	ch := make(chan protocol.ProverResult, 1)
	n.mu.Lock()
	n.waiters[p] = append(n.waiters[p], ch)
	n.mu.Unlock()
	return ch
}

func (n *Node) unwait(p peer.ID, ch chan protocol.ProverResult) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ws := n.waiters[p]
	for i, w := range ws {
		if w == ch {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(n.waiters, p)
	} else {
		n.waiters[p] = ws
	}
}

// ErrShuttingDown is returned by Verify and Attest (and ends first
// contact's sessions) once Shutdown began. It wraps protocol.ErrClosed.
var ErrShuttingDown = fmt.Errorf("node is shutting down: %w", protocol.ErrClosed)

// Shutdown stops the node gracefully: it starts no new session and lets
// the running ones end, then closes the node (Close). New sessions are
// refused from the moment it is called: a verifier's new stream is reset
// with protocol.ErrCodeBusy before its hello is answered, which the
// verifier reports as busy and signs nothing for (spec/protocol.md §5 step
// 3); a hello already being answered that asks to be verified back is
// answered BUSY; Verify, Attest and first contact fail with
// ErrShuttingDown. The sessions running as verifier (their records are
// stored) and as prover are waited for until ctx ends; those still
// running then are cut as Close cuts them, and Shutdown returns an error
// wrapping ctx's with Close's. Close may be called meanwhile to stop at
// once (a second interrupt): Shutdown then returns when it has. The HTTP
// door's sessions (peer/httpgw) are not waited for: drain the door
// (Gateway.Drain) alongside Drain, then close both.
func (n *Node) Shutdown(ctx context.Context) error {
	return errors.Join(n.Drain(ctx), n.Close())
}

// Drain is Shutdown without the Close: it refuses new sessions and waits
// until the running ones end or ctx does (then it returns an error
// wrapping ctx's and the node keeps running them until closed). A node
// that serves the HTTP door drains both and then closes both.
func (n *Node) Drain(ctx context.Context) error {
	idle := n.drain.start()
	select {
	case <-idle:
		return nil
	default:
	}
	select {
	case <-idle:
	case <-n.ctx.Done(): // Close was called
	case <-ctx.Done():
		return fmt.Errorf("node: stopped with %d session(s) still running: %w", n.drain.sessions(), ctx.Err())
	}
	return nil
}

// drainState counts the sessions running (as verifier and as prover) and,
// once Shutdown began, refuses new ones.
type drainState struct {
	mu       sync.Mutex
	draining bool
	running  int
	// idle is closed once draining with no session running.
	idle chan struct{}
}

// enter counts a new session, or reports that the node drains.
func (d *drainState) enter() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining {
		return false
	}
	d.running++
	return true
}

// exit ends a session enter counted.
func (d *drainState) exit() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running--; d.running == 0 && d.draining {
		closeChan(d.idle)
	}
}

// start begins the drain and returns a channel closed once no session
// runs.
func (d *drainState) start() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.draining {
		d.draining, d.idle = true, make(chan struct{})
		if d.running == 0 {
			closeChan(d.idle)
		}
	}
	return d.idle
}

func (d *drainState) isDraining() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.draining
}

func (d *drainState) sessions() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.running
}

func closeChan(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// drainHost is the host the protocol service registers its stream
// handler on: the handler of the attestation protocol runs counted by the
// node's drain, and a stream that arrives once Shutdown began is reset
// busy before its hello is read.
type drainHost struct {
	host.Host
	n *Node
}

func (h drainHost) SetStreamHandler(pid lpproto.ID, handler network.StreamHandler) {
	if pid == protocol.ID {
		inner := handler
		handler = func(s network.Stream) {
			if !h.n.drain.enter() {
				_ = s.ResetWithError(protocol.ErrCodeBusy)
				return
			}
			defer h.n.drain.exit()
			inner(s)
		}
	}
	h.Host.SetStreamHandler(pid, handler)
}

// exhaustWarnEvery is the least time between two warnings that the
// challenge source ran out.
const exhaustWarnEvery = 10 * time.Minute

// fillingWarnEvery is the least time between two warnings that a pool
// has not written its first set yet.
const fillingWarnEvery = time.Minute

// onSourceExhausted is told of every draw the challenge source refused
// with skill.ErrExhausted (the session ends inconclusive, and the peer
// reads "the verifier could not provide a challenge"): it counts it and
// warns, at once the first time, then at most every exhaustWarnEvery.
func (n *Node) onSourceExhausted(err error, served uint64) {
	n.metrics.observeExhausted()
	if n.ctx.Err() != nil || n.drain.isDraining() {
		return // stopping: a pool closed under a last session
	}
	if served == 0 && (n.servedKind() == skill.SourceLLM || n.servedKind() == skill.SourceHybrid) {
		// A pool writing its first sets (an LLM takes tens of seconds
		// each) is not used up: say so, apart from the exhaustion
		// warning, whose rate it leaves alone.
		if missed, ok := n.fillingWarn.allow(time.Now(), fillingWarnEvery); ok {
			n.log.Warn("challenge pool still writing its first sets: sessions end inconclusive until one is ready",
				"source", n.cfg.Source.Name(), "refused_since_last_warning", missed, "err", err)
		}
		return
	}
	missed, ok := n.exhaustWarn.allow(time.Now(), exhaustWarnEvery)
	if !ok {
		return
	}
	var hint string
	switch n.servedKind() {
	case skill.SourceCorpus:
		hint = "serve each set more often (--max-serves), add sets to the corpus, or let an LLM write fresh ones (--llm with --challenges llm or hybrid)"
	case skill.SourceLLM, skill.SourceHybrid:
		hint = "the generation pool had no set ready: raise --pool-size or --pool-workers, or check the LLM (acaptcha_pool_consecutive_failures)"
	default:
		hint = "give the node more challenge sets: --max-serves, a larger corpus, or an LLM (--challenges llm)"
	}
	n.log.Warn("challenge source exhausted: this node verifies no one until it has sets again; its sessions end inconclusive",
		"source", n.cfg.Source.Name(), "served", served, "refused_since_last_warning", missed,
		"err", err, "fix", hint, "next_warning_after", exhaustWarnEvery)
}

// rateWarn lets a warning through at most once per interval and counts
// the occasions it held back.
type rateWarn struct {
	mu     sync.Mutex
	warned bool
	last   time.Time
	missed uint64
}

// allow reports whether to warn at now, and how many occasions were held
// back since the last warning.
func (w *rateWarn) allow(now time.Time, every time.Duration) (missed uint64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.warned && now.Sub(w.last) < every {
		w.missed++
		return 0, false
	}
	missed, w.missed = w.missed, 0
	w.warned, w.last = true, now
	return missed, true
}
