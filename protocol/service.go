package protocol

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/bounded"
	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// Defaults of Config.
const (
	// DefaultProbes is one RTT probe per session. The credit is the
	// minimum over the probes, capped by RTTCredit: more probes can only
	// lower it (stricter on an honest prover on a jittery link), while a
	// prover that delays its acks gains the cap whatever their number.
	// The paper (§5) takes one sample too, the TCP handshake. Each probe
	// is a round trip before round 1 (two more per session on a 150 ms
	// link: 300 ms) and, of a mutual attestation's CPU on loopback,
	// about 12 % for the two extra (README, Figures).
	DefaultProbes            = 1
	DefaultMaxInboundPerPeer = 2
	DefaultMaxInbound        = 64
	// DefaultMaxInboundPerPrefix bounds the concurrent prover sessions of
	// the verifiers of one IP prefix together (fresh peer IDs are free:
	// without it a few addresses could hold every inbound slot).
	DefaultMaxInboundPerPrefix = 16
	DefaultHandshakeTimeout    = 10 * time.Second
	DefaultHelloTimeout        = 3 * time.Second
	DefaultProbeTimeout        = 5 * time.Second
	DefaultSourceTimeout       = 30 * time.Second
	// MaxTotal is the longest T_total a prover accepts in a hello (and a
	// verifier may be configured with).
	MaxTotal = time.Hour
	// ReciprocalAllowance is the part of the handshake timeout (at most a
	// quarter of it) that a prover keeps from its proof of work for
	// Config.OnReciprocal when the hello asks to be verified back: the
	// ack is due within the handshake timeout of reading the hello.
	ReciprocalAllowance = time.Second
)

// Timing constants of the exchange (see spec/protocol.md).
const (
	// answerGrace is added to the answer read deadline so that an answer
	// arriving just after the budget is still read and judged late rather
	// than reported as missing.
	answerGrace = 250 * time.Millisecond
	// answerSlack is how long past budget + RTT credit the prover keeps
	// waiting for its answerer before it gives the round up.
	answerSlack = time.Second
	// proverSlack pads the prover's wait for the next frame.
	proverSlack = 10 * time.Second
	// closeWait bounds the verifier's wait for the prover to close after
	// the verdict (the RTT credit is added).
	closeWait = 2 * time.Second
)

// Errors returned by Verify and reported in ProverResult.Err.
var (
	// ErrNetwork: no session could run because the stream could not be
	// opened or failed before any challenge was sent.
	ErrNetwork = errors.New("acaptcha: network failure")
	// ErrUnresponsive (which is also ErrNetwork) reports a peer that
	// accepted the stream but did not answer the hello or a probe in
	// time: no challenge was revealed, so no session ran and nothing is
	// attested.
	ErrUnresponsive = fmt.Errorf("%w: peer unresponsive before the first challenge", ErrNetwork)
	// ErrNoSource: this node has no challenge source and cannot verify.
	ErrNoSource = errors.New("acaptcha: no challenge source configured")
	// ErrClosed: the service was closed.
	ErrClosed = errors.New("acaptcha: service closed")
	// ErrBusy: the prover refused the session because of its inbound
	// limits (Verify), or this node did (ProverResult.Err).
	ErrBusy = errors.New("acaptcha: prover busy")
	// ErrReflection: a verifier sent this node a challenge this node had
	// issued itself.
	ErrReflection = errors.New("acaptcha: reflected challenge")
	// ErrNoProver: this node was asked to prove but has no Prover.
	ErrNoProver = errors.New("acaptcha: no prover configured")
	// ErrBadHello: the hello was refused (IDs, nonce, version or policy).
	ErrBadHello = errors.New("acaptcha: hello refused")
	// ErrAnswerer: this node's answerer failed or refused a challenge.
	ErrAnswerer = errors.New("acaptcha: answerer failed")
	// ErrUnpaid: the peer's hello ack did not carry the proof of work the
	// hello asked for, or the peer broke the protocol before paying; no
	// set was drawn and nothing was signed (spec §5a).
	ErrUnpaid = errors.New("acaptcha: peer did not pay for the session")
	// ErrVerifierUnpaid: this node's prover asked the verifier for a
	// payment (spec §5b) and its first frame after the ack did not pay
	// it (ProverResult.Err; the session ended busy, nothing answered).
	ErrVerifierUnpaid = errors.New("acaptcha: verifier did not pay")
	// ErrPayRefused: the prover asked this node's verifier for a payment
	// above what it pays, or on a connection the prover opened (spec
	// §5b); no session ran and nothing was signed.
	ErrPayRefused = errors.New("acaptcha: prover's payment not paid")
	// ErrVerifyFirst: the prover answers a verifier that came to it only
	// once it admits it, and declined the hello VERIFY_FIRST (spec §5c;
	// Verify returns a *VerifyFirstError); ProverResult.Err of such a
	// hello on this node's side.
	ErrVerifyFirst = errors.New("acaptcha: prover verifies this node first")
	// ErrDeclined: the prover declined the hello (no prover, version,
	// policy); no set was drawn and nothing was signed.
	ErrDeclined = errors.New("acaptcha: prover declined the session")
	// ErrPeerQuota: the peer's share of set draws, or this node's global
	// draw budget, is spent for the current window (spec §9a).
	ErrPeerQuota = errors.New("acaptcha: set-draw budget spent")
)

// cameToUs reports whether p came to this node (spec §5b, §5c): not
// Solicited, or, without that hook, some connection to p was opened by p.
// It decides what this node's prover asks of a verifier.
func (s *Service) cameToUs(p peer.ID) bool {
	if s.cfg.Solicited != nil {
		return !s.cfg.Solicited(p)
	}
	return s.openedByPeer(p)
}

// proverCameToUs is whether this node's verifier refuses to pay p's
// payment: p came to this node (not Contacted; without that hook, p
// opened a connection to it).
func (s *Service) proverCameToUs(p peer.ID) bool {
	if s.cfg.Contacted != nil {
		return !s.cfg.Contacted(p)
	}
	return s.openedByPeer(p)
}

// openedByPeer reports whether some connection to p was opened by p.
func (s *Service) openedByPeer(p peer.ID) bool {
	for _, c := range s.h.Network().ConnsToPeer(p) {
		if c.Stat().Direction == network.DirInbound {
			return true
		}
	}
	return false
}

// VerifyFirstError is Verify's error when the prover declined the hello
// VERIFY_FIRST (spec §5c): it answers this node only once it admits it.
// Reciprocal says whether it is verifying this node now (WILL: its
// verdict comes, then a new Verify may be answered) or why not. It
// matches ErrVerifyFirst.
type VerifyFirstError struct {
	Peer       peer.ID
	Reciprocal pb.Reciprocal
	Detail     string
}

func (e *VerifyFirstError) Error() string {
	why := "it verifies us now"
	if w, dropped := ReciprocalDropped(e.Reciprocal); dropped {
		why = "it will not verify us now: " + w
	} else if e.Reciprocal != pb.Reciprocal_RECIPROCAL_WILL {
		why = "it did not say whether it verifies us"
	}
	return fmt.Sprintf("%v: %s answers us only once it admits us; %s (%s)", ErrVerifyFirst, e.Peer, why, e.Detail)
}

// Is makes errors.Is(err, ErrVerifyFirst) hold.
func (e *VerifyFirstError) Is(target error) bool { return target == ErrVerifyFirst }

// ackWait is how long a verifier waits for the HelloAck from writing its
// hello (spec §5a): the prover's handshake timeout, counted from its
// reading the hello, plus a path allowance of a fifth of it (2 s by
// default) for the hello's and the ack's way and a hello read late, plus
// the proof of work's allowance. Without the path allowance a prover that
// acked within its deadline was found unresponsive.
func ackWait(handshake time.Duration, d int) time.Duration {
	return handshake + handshake/5 + powAllowance(d)
}

// powAllowance is the extra time a verifier waits for a hello ack that
// must carry a proof of work of d bits: 50 ms per 2^16 expected hashes
// above 2^16.
func powAllowance(d int) time.Duration {
	if d <= 16 {
		return 0
	}
	return time.Duration(1<<(d-16)) * 50 * time.Millisecond
}

// Config configures a Service. The zero value of every field means its
// default; a node with neither Source nor Prover only speaks enough of the
// protocol to decline.
type Config struct {
	// Policy is the verifier's timing and round policy; a zero Policy
	// (Rounds == 0) means skill.DefaultPolicy().
	Policy skill.Policy
	// Source hands out challenge sets; nil means this node cannot verify
	// (Verify returns ErrNoSource).
	Source skill.Source
	// Prover answers the challenges of remote verifiers; nil means the
	// prover side declines every session with "no_prover".
	Prover skill.Prover
	// Probes is how many RTT probes a verifier sends (default
	// DefaultProbes, at most MaxProbes): fewer when two more of the
	// fastest round trips seen would end past the handshake timeout from
	// the first (a prover waits that long for round 1).
	Probes int
	// AttestationTTL is how long issued attestations are valid (default
	// DefaultAttestationTTL).
	AttestationTTL time.Duration
	// Now is the clock every measured duration is taken on (default
	// time.Now). Stream deadlines always use the wall clock.
	Now func() time.Time
	// Logger receives the service's logs (default slog.Default()).
	Logger *slog.Logger
	// OnProved is called once for every inbound stream, when the session
	// this node answered as prover has ended, also on failures (with Err
	// set). It runs on the stream handler's goroutine.
	OnProved func(ProverResult)
	// Feedback, when set, is told every verdict this node reaches as
	// verifier (consensus feedback on the challenge pool, issue 13): a
	// question that several provers who passed the earlier rounds answer
	// the same wrong way is retired. Wrap Source in skill.RetiringSource
	// with the same Consensus so retired questions stop being served.
	Feedback *skill.Consensus
	// OnReciprocal is called when a verifier's hello asks this node to
	// verify it back, after the hello's checks and payment and before the
	// HelloAck is written: its answer goes into the HelloAck (spec §1a),
	// so that a verifier whose request is dropped learns it at once
	// instead of waiting for a session that never comes. drawsLeft is
	// false when this node would draw no set for the peer now (its share,
	// its prefix's or the node's draws are spent): answer WILL only when a
	// session of ours to it is running already, BUSY otherwise. It runs on
	// the stream handler's goroutine, inside the prover's handshake: it
	// must not wait on the network (a session back is started
	// asynchronously), and it must return within ReciprocalAllowance,
	// the part of the handshake timeout the proof of work leaves it (the
	// ack is due within the handshake timeout of reading the hello, spec
	// §5a). A nil OnReciprocal answers NOT_OFFERED.
	OnReciprocal func(p peer.ID, drawsLeft bool) pb.Reciprocal
	// OnVerdict, if set, is called on a libp2p verifier session's
	// goroutine once the session has its verdict, right before the
	// verdict is written to subject p (res as Verify will return it). From
	// then on the session is no reason to answer a reciprocal request of
	// p with WILL (spec §1a): its verdict is on its way.
	OnVerdict func(p peer.ID, res *Result)
	// OnReflection is called with the peer that sent this node one of its
	// own challenges. It runs on the handler's goroutine: do not block.
	OnReflection func(offender peer.ID)
	// MaxInboundPerPeer, MaxInboundPerPrefix and MaxInbound bound the
	// concurrent prover sessions per remote peer (default 2), per IP
	// prefix of the remote peers (default 16; loopback exempt unless
	// LimitLoopback) and in total (default 64). MaxInboundPerBlock bounds
	// those of the peers of one IPv6 /32 (BlockOf) that the node does not
	// admit (default BlockFactor times MaxInboundPerPrefix).
	MaxInboundPerPeer   int
	MaxInboundPerPrefix int
	MaxInbound          int
	MaxInboundPerBlock  int
	// ReflectionWindow is how long issued challenges are remembered for
	// reflection detection (default 10 minutes).
	ReflectionWindow time.Duration
	// HandshakeTimeout bounds the hello exchange and every write (default
	// 10 s); ProbeTimeout bounds one probe round trip (default 5 s).
	HandshakeTimeout time.Duration
	ProbeTimeout     time.Duration
	// HelloTimeout bounds the prover's wait for the hello after an
	// inbound stream opened (default 3 s, at most HandshakeTimeout): a
	// verifier writes it at once, and the wait holds an inbound slot.
	HelloTimeout time.Duration
	// SourceTimeout bounds Source.Next before the session is declared
	// inconclusive (default 30 s).
	SourceTimeout time.Duration

	// Payment and budgets of the verifier side (spec/protocol.md §5a,
	// §9a). PowDifficulty is the base proof-of-work difficulty in bits
	// asked of every peer before a set is drawn for it (default
	// DefaultPowDifficulty; NoPow for none); failures of the peer and the
	// node's load add to it, up to MaxPowDifficulty (default
	// DefaultMaxPowDifficulty), which is also the most this node pays as
	// a prover. MaxDrawsPerPeer, MaxDrawsPerPrefix and MaxDraws bound the
	// sets drawn per DrawWindow for one peer, for the peers of one IP
	// prefix (IPv4 /24, IPv6 /48; default DefaultMaxDrawsPerPrefix) and
	// in total. Loopback peers are exempt from the prefix budget unless
	// LimitLoopback is set (tests and benches on loopback set it).
	PowDifficulty    int
	MaxPowDifficulty int
	// PayDifficulty is the proof of work in bits this node's prover asks
	// of a verifier that came to this node (Solicited) and that the node does
	// not admit, before it answers anything (spec/protocol.md §5b; 0, the
	// default: none; at most MaxPowDifficulty), plus 2 bits per halving of
	// the node's answerer-call budget left, capped at MaxPowDifficulty.
	// This node's verifier pays
	// what a prover asks up to MaxPowDifficulty, to provers it came to,
	// within MaxVerifierPayWork: the hashes it solves to pay provers per
	// DrawWindow (a payment of D bits is charged 2^D before it is solved;
	// default DefaultMaxVerifierPayWork), one prover at most a sixteenth,
	// the provers of one IP prefix an eighth, the last quarter kept for
	// the peers the node admits (TrustedPeer). Beyond it the session is
	// not run (ErrPayRefused, the stream reset busy).
	PayDifficulty      int
	MaxVerifierPayWork int
	// MaxPaySolves is how many payments this node's verifier solves at
	// once (§5b: a payment asked while they all run is refused and its
	// charge given back; 0: max(1, GOMAXPROCS/2)).
	MaxPaySolves int
	// VerifyFirst: this node's prover answers a verifier that came to it
	// (Solicited: it did not contact it) only once the node admits it (TrustedPeer):
	// until then the hello is declined VERIFY_FIRST, and OnReciprocal is
	// asked whether the node verifies the verifier now (spec §5c). A
	// script cannot then borrow this node's answerer, its own challenges
	// reflected or anyone's, by coming to it; a verifier this node came
	// to, or admits, is answered as before.
	VerifyFirst bool
	// Solicited reports whether this node asked p to verify it (it came
	// to p for p's verdict, as Attest does), and Contacted whether it came
	// to p on its own initiative at all (a dial to verify p, or a
	// discovery dial, included): who "came" for verify first and the
	// payment (spec §5b, "Who came"; §5c). A verifier this node asked is
	// answered as asked for; every other one came to this node. This
	// node's verifier pays only provers it contacted. Nil: p came to this
	// node when any connection between them was opened by p (the
	// connection a session runs on is not enough: after p reached a node
	// behind NAT through a relay, the node's own hole punch dials p).
	Solicited func(p peer.ID) bool
	Contacted func(p peer.ID) bool
	// MutualWaitProver reports whether p, which this node did not
	// contact, waits for this node as it waits for p: one of them
	// declined the other's session VERIFY_FIRST recently (spec §5c).
	// This node's verifier then asks p a proof of work of at least
	// MutualWaitPayDifficulty and pays p's payment (§5b), as it pays a
	// prover it contacted. Nil: no prover that came is paid.
	MutualWaitProver func(p peer.ID) bool
	// Requested reports whether this node's caller asked for the
	// verification of p explicitly (peer.Node's Verify and Attest, not a
	// discovery dial): its verifier pays such a prover up to
	// MaxPowDifficulty, within MaxVerifierPayWork. Every other prover it
	// pays at most PaySlack bits above the larger of the proof of work
	// its hello asked and PublicPowDifficulty (spec §5b). Nil: the
	// service's own Verify calls count as requested when the node
	// contacted p and no Contacted hook is set (the library default).
	Requested func(p peer.ID) bool
	// RejectedPeer, with VerifyFirst, reports whether this node's own
	// standing verdict on p is a rejection: such a verifier is never
	// answered, asked for or not (spec §5c).
	RejectedPeer func(peer.ID) bool
	// MutualWait, with VerifyFirst, reports whether p, which came to
	// this node and which it has not accepted, declined this node's own
	// session VERIFY_FIRST recently while no session of this node's with
	// p runs: two verify-first nodes that met without either asking the
	// other wait for each other. Such a verifier is answered against the
	// payment of at least MutualWaitPayDifficulty bits (spec §5c).
	MutualWait func(peer.ID) bool
	// VerifiedPeer, with VerifyFirst, reports whether this node's own
	// verdict on p accepted it and stands (a peer it accepted on
	// challenges weaker than it requires for admission): such a verifier
	// is answered too (spec §5c). Nil: only TrustedPeer counts.
	VerifiedPeer      func(peer.ID) bool
	DrawWindow        time.Duration
	MaxDrawsPerPeer   int
	MaxDrawsPerPrefix int
	MaxDraws          int
	LimitLoopback     bool
	// MaxDrawsPerBlock bounds the sets drawn per DrawWindow for the peers
	// of one IPv6 /32 (BlockOf) that the node does not admit together
	// (default BlockFactor times MaxDrawsPerPrefix; spec §9a).
	MaxDrawsPerBlock int

	// Bounds of the prover side (spec/protocol.md §6, §9a): the longest
	// total_ms accepted (default DefaultMaxAcceptTotal, at least
	// Policy.Total), the longest wait for the verifier's next frame
	// (default DefaultIdleTimeout), and per ProverWindow the sessions,
	// answerer calls and prompt tokens one verifier can cause; the
	// sessions the verifiers of one IP prefix can cause together
	// (MaxSessionsPerVerifierPrefix; loopback exempt unless
	// LimitLoopback, as for draws); and the sessions, answerer calls,
	// prompt tokens and proof-of-work hashes (2^D per session asking D
	// bits; one prefix at most an eighth) of all verifiers together.
	MaxAcceptTotal               time.Duration
	IdleTimeout                  time.Duration
	ProverWindow                 time.Duration
	MaxSessionsPerVerifier       int
	MaxCallsPerVerifier          int
	MaxTokensPerVerifier         int
	MaxSessionsPerVerifierPrefix int
	MaxProverSessions            int
	MaxProverCalls               int
	MaxProverTokens              int
	MaxProverPowWork             int
	// MaxSessionsPerVerifierBlock bounds the sessions answered per
	// ProverWindow for the verifiers of one IPv6 /32 (BlockOf) that the
	// node does not admit together (default BlockFactor times
	// MaxSessionsPerVerifierPrefix); their proof of work, answerer calls
	// and prompt tokens get BlockFactor times a prefix's share (a quarter
	// of the node's by default), at most the node's (spec §9a).
	MaxSessionsPerVerifierBlock int
	// TrustedPeer tells whether peer p may use the last quarter of the
	// node's global budgets: as a verifier, of the prover side's session,
	// answerer-call, prompt-token and proof-of-work budgets
	// (MaxProverSessions, MaxProverCalls, MaxProverTokens,
	// MaxProverPowWork); as a prover, of the verifier side's set draws
	// (MaxDraws). Others cannot (spec §9a): fresh peer IDs and networks
	// are free, and without a reserve a few of them asking the largest
	// proof of work, or paying for draws, would leave the node BUSY for
	// everyone, the peers it admits included, for the window. A node
	// passes the peers it admits; nil trusts nobody.
	TrustedPeer func(p peer.ID) bool
}

func (c *Config) applyDefaults() error {
	if c.Policy.Rounds == 0 {
		c.Policy = skill.DefaultPolicy()
	}
	if err := c.Policy.Check(); err != nil {
		return err
	}
	if c.Policy.Total > MaxTotal {
		return fmt.Errorf("%w: total %s exceeds the protocol maximum %s", skill.ErrPolicy, c.Policy.Total, MaxTotal)
	}
	if c.Policy.RTTCredit > c.Policy.Total {
		return fmt.Errorf("%w: RTT credit %s exceeds total %s", skill.ErrPolicy, c.Policy.RTTCredit, c.Policy.Total)
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"AttestationTTL", &c.AttestationTTL, DefaultAttestationTTL},
		{"ReflectionWindow", &c.ReflectionWindow, DefaultReflectionWindow},
		{"HandshakeTimeout", &c.HandshakeTimeout, DefaultHandshakeTimeout},
		{"ProbeTimeout", &c.ProbeTimeout, DefaultProbeTimeout},
		{"HelloTimeout", &c.HelloTimeout, DefaultHelloTimeout},
		{"SourceTimeout", &c.SourceTimeout, DefaultSourceTimeout},
		{"DrawWindow", &c.DrawWindow, DefaultDrawWindow},
		{"MaxAcceptTotal", &c.MaxAcceptTotal, max(DefaultMaxAcceptTotal, c.Policy.Total)},
		{"IdleTimeout", &c.IdleTimeout, DefaultIdleTimeout},
		{"ProverWindow", &c.ProverWindow, DefaultProverWindow},
	} {
		if *d.v < 0 {
			return fmt.Errorf("acaptcha: config: negative %s", d.name)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	for _, n := range []struct {
		name string
		v    *int
		def  int
	}{
		{"Probes", &c.Probes, DefaultProbes},
		{"MaxInboundPerPeer", &c.MaxInboundPerPeer, DefaultMaxInboundPerPeer},
		{"MaxInbound", &c.MaxInbound, DefaultMaxInbound},
		{"MaxInboundPerPrefix", &c.MaxInboundPerPrefix, DefaultMaxInboundPerPrefix},
		{"MaxPowDifficulty", &c.MaxPowDifficulty, DefaultMaxPowDifficulty},
		{"MaxDrawsPerPeer", &c.MaxDrawsPerPeer, DefaultMaxDrawsPerPeer},
		{"MaxDrawsPerPrefix", &c.MaxDrawsPerPrefix, DefaultMaxDrawsPerPrefix},
		{"MaxDraws", &c.MaxDraws, DefaultMaxDraws},
		{"MaxSessionsPerVerifier", &c.MaxSessionsPerVerifier, DefaultMaxSessionsPerVerifier},
		{"MaxCallsPerVerifier", &c.MaxCallsPerVerifier, DefaultMaxCallsPerVerifier},
		{"MaxTokensPerVerifier", &c.MaxTokensPerVerifier, DefaultMaxTokensPerVerifier},
		{"MaxProverCalls", &c.MaxProverCalls, DefaultMaxProverCalls},
		{"MaxSessionsPerVerifierPrefix", &c.MaxSessionsPerVerifierPrefix, DefaultMaxSessionsPerVerifierPrefix},
		{"MaxProverSessions", &c.MaxProverSessions, DefaultMaxProverSessions},
		{"MaxProverTokens", &c.MaxProverTokens, DefaultMaxProverTokens},
		{"MaxProverPowWork", &c.MaxProverPowWork, DefaultMaxProverPowWork},
		{"MaxVerifierPayWork", &c.MaxVerifierPayWork, DefaultMaxVerifierPayWork},
	} {
		if *n.v < 0 {
			return fmt.Errorf("acaptcha: config: negative %s", n.name)
		}
		if *n.v == 0 {
			*n.v = n.def
		}
	}
	for _, n := range []struct {
		name string
		v    *int
		def  int
	}{
		{"MaxInboundPerBlock", &c.MaxInboundPerBlock, BlockFactor * c.MaxInboundPerPrefix},
		{"MaxDrawsPerBlock", &c.MaxDrawsPerBlock, BlockFactor * c.MaxDrawsPerPrefix},
		{"MaxSessionsPerVerifierBlock", &c.MaxSessionsPerVerifierBlock, BlockFactor * c.MaxSessionsPerVerifierPrefix},
	} {
		if *n.v < 0 {
			return fmt.Errorf("acaptcha: config: negative %s", n.name)
		}
		if *n.v == 0 {
			*n.v = n.def
		}
	}
	switch {
	case c.PowDifficulty == 0:
		c.PowDifficulty = DefaultPowDifficulty
	case c.PowDifficulty < NoPow:
		return fmt.Errorf("acaptcha: config: PowDifficulty %d (use NoPow for none)", c.PowDifficulty)
	}
	if c.MaxPowDifficulty > MaxPowDifficulty {
		return fmt.Errorf("acaptcha: config: MaxPowDifficulty %d exceeds %d", c.MaxPowDifficulty, MaxPowDifficulty)
	}
	c.PowDifficulty = min(c.PowDifficulty, c.MaxPowDifficulty)
	if c.PayDifficulty < 0 || c.PayDifficulty > c.MaxPowDifficulty {
		return fmt.Errorf("acaptcha: config: PayDifficulty %d: want 0 (none) to %d bits (MaxPowDifficulty)", c.PayDifficulty, c.MaxPowDifficulty)
	}
	c.HelloTimeout = min(c.HelloTimeout, c.HandshakeTimeout)
	if c.MaxAcceptTotal > MaxTotal {
		return fmt.Errorf("acaptcha: config: MaxAcceptTotal %s exceeds the protocol maximum %s", c.MaxAcceptTotal, MaxTotal)
	}
	if c.Probes > MaxProbes {
		return fmt.Errorf("acaptcha: config: %d probes exceeds %d", c.Probes, MaxProbes)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// stream is the part of network.Stream the sessions use.
type stream interface {
	io.Reader
	io.Writer
	Close() error
	CloseWrite() error
	Reset() error
	ResetWithError(network.StreamErrorCode) error
	SetDeadline(time.Time) error
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

// Service runs both sides of the attestation protocol on a host: Verify
// opens a verifier stream to a peer, and the stream handler answers remote
// verifiers with Config.Prover.
type Service struct {
	h    host.Host
	cfg  Config
	now  func() time.Time
	log  *slog.Logger
	priv crypto.PrivKey

	guard   *reflectionGuard
	budgets *budgets
	// paySolvers holds a token per payment being solved (§5b): at most
	// maxPaySolves at once (paySolver).
	paySolvers chan struct{}
	// issued dates the records this verifier signs (issued.go).
	issued issueClock
	// random supplies nonces (crypto/rand; tests make it deterministic).
	random io.Reader

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	inbound int
	perPeer map[peer.ID]int
	// reporting counts, per verifier, the prover sessions whose result
	// OnProved has not returned yet: a session's inbound slot is freed
	// before its result is recorded (Proving).
	reporting map[peer.ID]int
	perPrefix map[netip.Prefix]int
	perBlock  map[netip.Prefix]int // untrusted streams per IPv6 /32
	// silent counts, per budget group, the streams that ended without a
	// valid hello (silentGroup), and silentBlocks, per IPv6 /32, its
	// /48s in probation last silent (silentBlock); waiting holds, per
	// group or /32 in probation, its one untrusted stream that waits for
	// its hello (inboundHold), and stalled its one untrusted stream past
	// a valid hello that waits for the verifier's first frame after the
	// hello ack (made on first use).
	silent       map[netip.Prefix]*silentGroup
	silentBlocks map[netip.Prefix]*silentBlock
	// budgetStrikes is when each verifier last struck its group by a
	// hello refused for its own spent budgets (strikeOwnBudget).
	budgetStrikes map[peer.ID]time.Time
	waiting       map[netip.Prefix]*inboundHold
	stalled       map[netip.Prefix]*inboundHold
	wg            sync.WaitGroup
}

// NewService validates cfg, fills in its defaults and registers the
// stream handler for ID on h.
func NewService(h host.Host, cfg Config) (*Service, error) {
	if h == nil {
		return nil, errors.New("acaptcha: nil host")
	}
	if err := cfg.applyDefaults(); err != nil {
		return nil, err
	}
	cfg.Prover = holdRateLimits(cfg.Prover, cfg.Logger)
	s := &Service{
		h: h, cfg: cfg, now: cfg.Now,
		log:     cfg.Logger.With("protocol", ID, "self", h.ID()),
		guard:   newReflectionGuard(cfg.ReflectionWindow),
		perPeer: map[peer.ID]int{}, reporting: map[peer.ID]int{}, perPrefix: map[netip.Prefix]int{}, perBlock: map[netip.Prefix]int{},
		silent: map[netip.Prefix]*silentGroup{}, silentBlocks: map[netip.Prefix]*silentBlock{}, budgetStrikes: map[peer.ID]time.Time{},
		waiting: map[netip.Prefix]*inboundHold{}, random: rand.Reader,
	}
	s.budgets = newBudgets(&s.cfg)
	s.budgets.prefixOf = s.drawPrefix
	solves := cfg.MaxPaySolves
	if solves <= 0 {
		solves = maxPaySolves()
	}
	s.paySolvers = make(chan struct{}, solves)
	if cfg.Source != nil {
		s.priv = h.Peerstore().PrivKey(h.ID())
		if s.priv == nil {
			return nil, fmt.Errorf("acaptcha: the host's private key is not in its peerstore; cannot sign attestations")
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	h.SetStreamHandler(ID, s.handleStream)
	return s, nil
}

// holdRateLimits wraps a prover that does not report its answerer's
// availability itself (no Unavailable method, as skill.GuardedProver's)
// in a skill.GuardedProver that only holds hellos off after a provider's
// rate limit: a node whose provider refused a call with a rate limit MUST
// take its answerer as not answering for the wait named, or a default of
// at least 10 s (spec/protocol.md §6 step 3), whoever built the node. It
// asks no canary (every error counts as a reply: whether an answerer is
// down is the SHOULD of the same step, for the caller's own guard), and a
// prover whose errors carry no rate limit never holds. A prover that
// shares its capacity among verifiers (VerifierProver: an agent over MCP,
// no provider of its own) is left as it is.
func holdRateLimits(p skill.Prover, log *slog.Logger) skill.Prover {
	if p == nil {
		return nil
	}
	if _, ok := p.(interface{ Unavailable() error }); ok {
		return p
	}
	if _, ok := p.(VerifierProver); ok {
		return p
	}
	return skill.NewGuardedProver(p, log, func(error) bool { return true })
}

// Config returns the service's configuration with defaults filled in.
func (s *Service) Config() Config { return s.cfg }

// Close removes the stream handler, aborts the sessions in flight (their
// streams are reset) and waits for them and for their callbacks and
// answerer calls to return.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.h.RemoveStreamHandler(ID)
	s.cancel()
	s.wg.Wait()
	return nil
}

// enter registers one unit of in-flight work, or reports that the service
// is closed.
func (s *Service) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// inboundHold is one inbound stream's slot (acquireInbound).
type inboundHold struct {
	s      *Service
	p      peer.ID
	pfx    netip.Prefix
	hasPfx bool
	// blk is the IPv6 /32 the stream counts in (hasBlk: an untrusted
	// peer's stream of a /48, BlockOf).
	blk     netip.Prefix
	hasBlk  bool
	preempt func() // resets the stream (a newer one of its group took its place)
	// waiting: the stream of a group (or /32) in probation in the
	// group's waiting place, under waitKey in Service.waiting, from its
	// opening until it enters the stall place (enterStall) or ends;
	// hello: its hello is valid (helloValid), so that a newer stream of
	// the group no longer takes its place but is refused; done: the slot
	// is free again.
	waiting, hello, done bool
	waitKey              netip.Prefix
	// trusted: the peer was admitted when the slot was taken; stalling:
	// the stream waits past its hello for the verifier's first frame
	// after the ack, under stallKey in Service.stalled (enterStall).
	trusted  bool
	stalling bool
	stallKey netip.Prefix
}

// release frees the slot (idempotent).
func (h *inboundHold) release() {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	h.s.releaseLocked(h)
}

func (s *Service) releaseLocked(h *inboundHold) {
	if h.done {
		return
	}
	h.done = true
	s.inbound--
	if s.perPeer[h.p]--; s.perPeer[h.p] <= 0 {
		delete(s.perPeer, h.p)
	}
	if h.hasPfx {
		if s.perPrefix[h.pfx]--; s.perPrefix[h.pfx] <= 0 {
			delete(s.perPrefix, h.pfx)
		}
	}
	if h.hasBlk {
		if s.perBlock[h.blk]--; s.perBlock[h.blk] <= 0 {
			delete(s.perBlock, h.blk)
		}
	}
	s.leaveWaitingLocked(h)
	s.leaveStallLocked(h)
}

func (s *Service) leaveStallLocked(h *inboundHold) {
	if h.stalling && s.stalled[h.stallKey] == h {
		delete(s.stalled, h.stallKey)
	}
	h.stalling = false
}

// probationKeyLocked is the place a stream of an untrusted peer of pfx
// waits in: its IPv6 /32's when the /32 is in probation, else its
// group's when the group is (ok false: neither is, or the peer is
// trusted, or it has no group).
func (s *Service) probationKeyLocked(pfx netip.Prefix, hasPfx, trusted bool, now time.Time) (key netip.Prefix, ok bool) {
	if !hasPfx || trusted {
		return netip.Prefix{}, false
	}
	if blk, hasBlk := BlockOf(pfx); hasBlk && s.blockInProbationLocked(blk, now) {
		return blk, true
	}
	if s.inProbationLocked(pfx, now) {
		return pfx, true
	}
	return netip.Prefix{}, false
}

// enterStall is called once the slot's stream has a valid hello (after
// helloValid): a stream of an untrusted peer whose group (or /32) is in
// probation waits in the group's stall place until the verifier's first
// frame after the hello ack (leaveStall), and a newer such stream of the
// group takes that place, the older one being reset (preempt). No
// challenge can be in flight then: a verifier writes round 1 only after
// a probe ack. It reports false when the slot is gone already.
func (h *inboundHold) enterStall() bool {
	s := h.s
	s.mu.Lock()
	if h.done {
		s.mu.Unlock()
		return false
	}
	key, ok := s.probationKeyLocked(h.pfx, h.hasPfx, h.trusted, s.now())
	if !ok {
		s.leaveWaitingLocked(h)
		s.mu.Unlock()
		return true
	}
	victim := s.stalled[key]
	if victim == h {
		s.leaveWaitingLocked(h)
		s.mu.Unlock()
		return true
	}
	// The stream leaves the waiting place for the stall place: it held
	// the waiting place from its opening, so the group had at most one
	// stream there and one here at every instant.
	s.leaveWaitingLocked(h)
	if victim != nil {
		s.releaseLocked(victim)
	}
	if s.stalled == nil {
		s.stalled = map[netip.Prefix]*inboundHold{}
	}
	s.stalled[key] = h
	h.stalling, h.stallKey = true, key
	s.mu.Unlock()
	if victim != nil && victim.preempt != nil {
		victim.preempt()
	}
	return true
}

// leaveStall is called when the verifier's first frame after the hello
// ack is read: the stream has the group's usual slots. It reports false
// when a newer stream took its place (the slot is gone and the stream
// reset).
func (h *inboundHold) leaveStall() bool {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leaveStallLocked(h)
	return !h.done
}

// helloValid marks the slot's stream as past its hello: no newer stream
// of its group can take its place any more. A stream in its group's
// waiting place keeps that place (a newer stream of the group is
// refused) until it enters the stall place, its session paid, or ends
// (enterStall, release): out of both places meanwhile, a newer stream
// took the waiting place and the group held three streams or more,
// up to its cap while the prover solved proofs of work. It reports
// false when a newer stream already took the place (the slot is gone
// and the stream reset).
func (h *inboundHold) helloValid() bool {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.done {
		return false
	}
	h.hello = true
	return true
}

// leaveWaitingLocked takes h out of its group's waiting place.
func (s *Service) leaveWaitingLocked(h *inboundHold) {
	if h.waiting && s.waiting[h.waitKey] == h {
		delete(s.waiting, h.waitKey)
	}
	h.waiting = false
}

// acquireInbound applies the per-peer, per-prefix (hasPfx false: none),
// per-block (an untrusted peer's IPv6 /32, BlockOf) and global inbound
// limits (spec §6 step 1). The last quarter of the global slots is kept
// for trusted verifiers (Config.TrustedPeer). Of a group in probation
// for silent streams (silentGroup), or of an IPv6 /32 in probation
// (silentBlock: then one for the whole /32), one untrusted stream at a
// time may wait for its hello: a newer one takes the place of the one
// waiting, whose stream is reset (preempt), so that a silent stream of
// the group's abuser keeps no honest verifier of the group out. A stream
// past a valid hello (helloValid) keeps the place, a newer one being
// refused, until its session is paid; it then leaves it for the group's
// stall place (enterStall), where it waits until the verifier's first
// frame after the ack, and then has the group's usual slots. The group
// so holds at most two streams opened in probation at every instant. It
// returns the slot, or nil when a limit is reached.
func (s *Service) acquireInbound(p peer.ID, pfx netip.Prefix, hasPfx, trusted bool, preempt func()) *inboundHold {
	blk, hasBlk := BlockOf(pfx)
	hasBlk = hasBlk && hasPfx && !trusted
	s.mu.Lock()
	total := s.cfg.MaxInbound - int(keptFor(trusted, float64(s.cfg.MaxInbound), 1))
	var waitKey netip.Prefix
	probation := false
	switch {
	case hasBlk && s.blockInProbationLocked(blk, s.now()):
		waitKey, probation = blk, true
	case hasPfx && !trusted && s.inProbationLocked(pfx, s.now()):
		waitKey, probation = pfx, true
	}
	var victim *inboundHold
	if probation {
		victim = s.waiting[waitKey]
	}
	if victim != nil && victim.hello {
		// The stream waiting is past its valid hello: it keeps the
		// place until its session is paid (enterStall).
		s.mu.Unlock()
		return nil
	}
	// The counts as they are once the victim, if any, made room.
	inbound, perPeer, perPrefix, perBlock := s.inbound, s.perPeer[p], 0, 0
	if hasPfx {
		perPrefix = s.perPrefix[pfx]
	}
	if hasBlk {
		perBlock = s.perBlock[blk]
	}
	if victim != nil {
		inbound--
		if victim.p == p {
			perPeer--
		}
		if victim.hasPfx && hasPfx && victim.pfx == pfx {
			perPrefix--
		}
		if victim.hasBlk && hasBlk && victim.blk == blk {
			perBlock--
		}
	}
	if inbound >= total || perPeer >= s.cfg.MaxInboundPerPeer ||
		hasPfx && perPrefix >= s.cfg.MaxInboundPerPrefix ||
		hasBlk && perBlock >= s.cfg.MaxInboundPerBlock {
		s.mu.Unlock()
		return nil
	}
	if victim != nil {
		s.releaseLocked(victim)
	}
	h := &inboundHold{s: s, p: p, pfx: pfx, hasPfx: hasPfx, blk: blk, hasBlk: hasBlk, preempt: preempt, waiting: probation, waitKey: waitKey, trusted: trusted}
	s.inbound++
	s.perPeer[p]++
	if hasPfx {
		s.perPrefix[pfx]++
	}
	if hasBlk {
		s.perBlock[blk]++
	}
	if probation {
		s.waiting[waitKey] = h
	}
	s.mu.Unlock()
	if victim != nil && victim.preempt != nil {
		victim.preempt()
	}
	return h
}

// Silent streams (spec §6 step 1): a stream that takes an inbound slot
// and ends without a valid hello (none within HelloTimeout, another
// frame, a bad hello), or a stall, one whose valid hello this node did not
// decline and that ends before the verifier's round 1 challenge or
// verdict (a hello and then silence held a slot until the first-frame
// deadline, IdleTimeout), cost its sender nothing else, so the budget group
// that sends SilentStrikes of them within SilentWindow of each other is
// in probation for SilentWindow after the last: one stream of its
// untrusted peers at a time may wait for its hello (acquireInbound), and
// one past its hello for the verifier's first frame after the ack
// (enterStall).
const (
	SilentStrikes = 4
	SilentWindow  = 10 * time.Minute
	// SilentBlockNets: an IPv6 /32 is in probation as a whole while this
	// many of its /48s are (one holder of a /32 has 65,536 /48s, each
	// with its own waiting stream otherwise).
	SilentBlockNets = 4
	// maxSilentGroups bounds the table; the oldest entries go first.
	maxSilentGroups = 4096
)

// silentGroup is a budget group's record of silent streams.
type silentGroup struct {
	strikes int
	last    time.Time
}

// silentBlock is an IPv6 /32's record of its /48s in probation: the
// SilentBlockNets of them last silent while in probation (the zero
// Prefix: none yet), each with that time. Each is in probation until
// SilentWindow after its time, so the /32 has SilentBlockNets /48s in
// probation exactly while every entry is set and within SilentWindow.
type silentBlock struct {
	nets [SilentBlockNets]struct {
		pfx  netip.Prefix
		last time.Time
	}
}

// inProbation reports whether SilentBlockNets /48s of the block are in
// probation at now.
func (b *silentBlock) inProbation(now time.Time) bool {
	for _, e := range b.nets {
		if !e.pfx.IsValid() || now.Sub(e.last) > SilentWindow {
			return false
		}
	}
	return true
}

// strikeSilent records a silent stream of the group pfx, and for a /48
// in probation after it, of its IPv6 /32 (silentBlock).
// strikeOwnBudget strikes pfx for a hello of p refused because p's own
// budgets (its peer's, its group's or its block's) are spent, at most
// once per verifier and SilentWindow: the reference verifier retries a
// busy peer (2, 4, 8, 16, 32 s, then every minute), so an honest one
// whose share ran out would put its group in probation by itself, while
// a group reopening such hellos from fresh peer IDs still strikes once
// per ID. The table holds at most maxSilentGroups verifiers, the
// oldest strikes forgotten first (a forgotten one may strike again).
func (s *Service) strikeOwnBudget(p peer.ID, pfx netip.Prefix, now time.Time) {
	s.mu.Lock()
	last, seen := s.budgetStrikes[p]
	if seen && now.Sub(last) <= SilentWindow {
		s.mu.Unlock()
		return
	}
	if !seen {
		bounded.MakeRoom(s.budgetStrikes, maxSilentGroups, func(t time.Time) bool { return now.Sub(t) > SilentWindow })
	}
	s.budgetStrikes[p] = now
	s.mu.Unlock()
	s.strikeSilent(pfx, now)
}

func (s *Service) strikeSilent(pfx netip.Prefix, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.silent[pfx]
	if g == nil {
		if len(s.silent) >= maxSilentGroups {
			s.evictSilentLocked(now)
		}
		g = &silentGroup{}
		s.silent[pfx] = g
	} else if now.Sub(g.last) > SilentWindow {
		g.strikes = 0
	}
	g.strikes++
	g.last = now
	blk, ok := BlockOf(pfx)
	if !ok || g.strikes < SilentStrikes {
		return
	}
	b := s.silentBlocks[blk]
	if b == nil {
		bounded.MakeRoom(s.silentBlocks, maxSilentGroups, func(b *silentBlock) bool { return !b.inProbation(now) })
		b = &silentBlock{}
		s.silentBlocks[blk] = b
	}
	// pfx's entry, or else the one last silent longest ago (an unset one
	// first), takes the time.
	at := -1
	for i, e := range b.nets {
		if e.pfx == pfx {
			at = i
			break
		}
	}
	if at < 0 {
		at = 0
		for i, e := range b.nets {
			if !e.pfx.IsValid() {
				at = i
				break
			}
			if e.last.Before(b.nets[at].last) {
				at = i
			}
		}
	}
	b.nets[at].pfx, b.nets[at].last = pfx, now
}

// blockInProbationLocked reports whether the IPv6 /32 blk is in
// probation: SilentBlockNets of its /48s are.
func (s *Service) blockInProbationLocked(blk netip.Prefix, now time.Time) bool {
	b := s.silentBlocks[blk]
	return b != nil && b.inProbation(now)
}

// inProbationLocked reports whether the group pfx is in probation.
func (s *Service) inProbationLocked(pfx netip.Prefix, now time.Time) bool {
	g := s.silent[pfx]
	return g != nil && g.strikes >= SilentStrikes && now.Sub(g.last) <= SilentWindow
}

// evictSilentLocked forgets the expired entries, or when none has
// expired the older half (groups in probation are among them only when
// every group is: the table cannot be grown past its bound).
func (s *Service) evictSilentLocked(now time.Time) {
	for k, g := range s.silent {
		if now.Sub(g.last) > SilentWindow {
			delete(s.silent, k)
		}
	}
	if len(s.silent) < maxSilentGroups {
		return
	}
	lasts := make([]time.Time, 0, len(s.silent))
	for _, g := range s.silent {
		lasts = append(lasts, g.last)
	}
	slices.SortFunc(lasts, func(a, b time.Time) int { return a.Compare(b) })
	cut := lasts[len(lasts)/2]
	for k, g := range s.silent {
		if !g.last.After(cut) {
			delete(s.silent, k)
		}
	}
}

// Proving reports whether a session that p runs against this node (this
// node the prover) is in progress, or ended and its result is still
// being reported (Config.OnProved has not returned: the node is checking
// and storing p's verdict): its verdict may still come whatever p
// answered to a reciprocal request.
func (s *Service) Proving(p peer.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.perPeer[p] > 0 || s.reporting[p] > 0
}

// reportingAdd counts a prover session of p until its result is reported
// (d = 1 when it starts, -1 once OnProved returned).
func (s *Service) reportingAdd(p peer.ID, d int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reporting[p] += d; s.reporting[p] <= 0 {
		delete(s.reporting, p)
	}
}

// msToDur and durToMs convert wire milliseconds, saturating.
func msToDur(ms uint32) time.Duration { return time.Duration(ms) * time.Millisecond }

func durToMs(d time.Duration) uint32 {
	if d <= 0 {
		return 0
	}
	ms := d / time.Millisecond
	if ms > 1<<32-1 {
		return 1<<32 - 1
	}
	return uint32(ms)
}
