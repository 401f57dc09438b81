// Package httpgw is the HTTP front door of an acaptcha node: verifier as a
// service for agents without libp2p (spec/http.md). An agent proves that
// it holds a libp2p key (it signs the session's start message), pays the
// session's proof of work, answers an RTT probe, then answers each round's
// challenge with one HTTP exchange; the node times every round on its own
// clock, from the flushed write of the challenge to the arrival of the
// answer, and returns the verdict with the attestation it signed about
// the agent's peer ID. The attestation can be verified over HTTP too.
//
// The gateway never re-implements verification: it drives the node's
// transport-free verifier (Core), the one the libp2p protocol runs over,
// so payment, budgets, reflection detection and signing are shared.
package httpgw

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// APIVersion is the version of the HTTP door's wire (spec/http.md); its
// routes live under /v1.
const APIVersion = "1.0.0"

// Defaults of Config.
const (
	// DefaultMaxSessions bounds the sessions open at once.
	DefaultMaxSessions = 256
	// DefaultMaxSessionsPerPrefix bounds the open sessions of one IP
	// prefix (IPv4 /24, IPv6 /48 by default, as the core's draw budget).
	DefaultMaxSessionsPerPrefix = 8
	// DefaultMaxSessionsPerBlock bounds the open sessions of one IPv6
	// /32 (an allocation of 65,536 /48s): a quarter of the total.
	DefaultMaxSessionsPerBlock = 64
	// DefaultMaxSessionsPerPeer bounds the started sessions of one
	// (authenticated) peer.
	DefaultMaxSessionsPerPeer = 2
	// DefaultMaxUnstarted, DefaultMaxUnstartedPerPrefix and
	// DefaultMaxUnstartedPerBlock bound the sessions created and not
	// yet started (awaiting_start), in total, per IP prefix and per IPv6
	// /32. Such a session costs its client one request and nothing else,
	// yet it holds a session slot and counts as load of the node's
	// verifier (it raises the proof of work asked of every peer, on both
	// doors) until it starts or its StartTTL ends. An honest client
	// starts within a second of creating (a 16-bit proof of work is
	// about 65,000 hashes), so a quarter of the session slots is many
	// times what honest traffic needs; started sessions, which have
	// paid, keep the other three quarters. The core adds a bit of proof
	// of work per doubling of its sessions beyond 16 (protocol/limits.go):
	// 64 unstarted sessions add at most three bits, where 256 added
	// five. Per prefix: half the prefix's open sessions; per IPv6 /32: a
	// quarter of the unstarted total (one allocation adds at most one
	// bit), so that it takes sixteen IPv4 /24s or four IPv6 allocations
	// to hold them all.
	DefaultMaxUnstarted          = 64
	DefaultMaxUnstartedPerPrefix = 4
	DefaultMaxUnstartedPerBlock  = 16
	// DefaultStartTTL is how long a created session waits for its start
	// (the proof of work's allowance is added above 16 bits). A scripted
	// client needs well under a second; 15 s leaves room for a slow
	// interpreter and a slow link.
	DefaultStartTTL = 15 * time.Second
	// DefaultProbeTimeout bounds one probe round trip.
	DefaultProbeTimeout = 5 * time.Second
	// DefaultKeepDone is how long an ended session stays readable.
	DefaultKeepDone = 2 * time.Minute
	// DefaultPowDifficulty is the least proof of work the door asks
	// (anonymous clients mint peer IDs for free), whatever the node's own
	// base (its --pow-difficulty, which may be 0 over libp2p): a
	// deliberate floor (spec/http.md §8, "Sybils").
	DefaultPowDifficulty = protocol.PublicPowDifficulty
	// DefaultV4PrefixBits and DefaultV6PrefixBits define an IP prefix.
	DefaultV4PrefixBits = 24
	DefaultV6PrefixBits = 48
)

// Limits of the wire (spec/http.md §5).
const (
	// MaxBodyBytes caps every request body but verify's.
	MaxBodyBytes = 4 << 10
	// MaxVerifyBodyBytes caps the body of /v1/attestations/verify (a
	// base64 envelope of at most protocol.MaxEnvelopeBytes).
	MaxVerifyBodyBytes = 16 << 10
	// AnswerGrace is added to the answer deadline before the gateway
	// times a round out, as on libp2p: a just-late answer is judged late
	// rather than missing.
	AnswerGrace = 250 * time.Millisecond
	// MaxChallengeWrite is the most of a challenge response's write and
	// flush the client is not charged for (http.md §2): the round's
	// clock starts when the flush returned, but at most this long after
	// the write began, as on libp2p (protocol.md §5 step 5).
	MaxChallengeWrite = time.Second
	// Server timeouts (the idle timeout: idleTimeoutFor).
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 15 * time.Second
	maxHeaderBytes    = 8 << 10
)

// Config configures a Gateway.
type Config struct {
	// Core is the verifier the sessions run on (the node's).
	Core Core
	// OnIssued is told every finished session's result (the node stores
	// the signed record as one it issued, indexes it and gossips it).
	OnIssued func(*protocol.Result)
	// RequireSource is the node's admission minimum, named in the
	// manifest; verify's default when the request names none is "any".
	RequireSource skill.SourceKind
	// Addrs are the node's libp2p addresses, named in the manifest.
	Addrs func() []ma.Multiaddr
	// Probes is the number of RTT probes (default protocol.DefaultProbes).
	Probes int
	// PowDifficulty is the least proof of work asked (default
	// DefaultPowDifficulty; protocol.NoPow for none beyond the core's).
	PowDifficulty int
	// Limits (defaults above). An IP prefix is an IPv4 /V4PrefixBits or
	// an IPv6 /V6PrefixBits; a block an IPv6 /V6BlockBits (the
	// per-block limits do not apply to IPv4).
	MaxSessions           int
	MaxSessionsPerPrefix  int
	MaxSessionsPerBlock   int
	MaxSessionsPerPeer    int
	MaxUnstarted          int
	MaxUnstartedPerPrefix int
	MaxUnstartedPerBlock  int
	StartTTL              time.Duration
	ProbeTimeout          time.Duration
	KeepDone              time.Duration
	V4PrefixBits          int
	V6PrefixBits          int
	V6BlockBits           int
	// TrustedProxies are the networks of the reverse proxies in front of
	// the door (none by default). The per-prefix session limit and the
	// core's per-address quotas count a request against its direct
	// peer's address, unless that address is in one of these: the client
	// is then the last address in X-Forwarded-For that is not (see
	// clientIP). Behind a proxy that is not listed, every client counts
	// as the proxy; listing a network whose hosts are not all proxies
	// lets those hosts claim any address.
	TrustedProxies []netip.Prefix
	// RequestRate and RequestBurst are the costly requests (creates and
	// verifies) per second one IP prefix may make (defaults
	// DefaultRequestRate, DefaultRequestBurst), the IP prefixes of one
	// IPv6 block protocol.BlockFactor times that; GlobalRequestRate and
	// GlobalRequestBurst the door's in total. Reads have buckets of their
	// own with the same rates. MaxConns caps open connections in total;
	// MaxConnsPerIP per client (an IPv4 address, an IPv6 /64),
	// MaxConnsPerPrefix per IP prefix and MaxConnsPerBlock per IPv6 block
	// (a trusted proxy's count against the total only).
	RequestRate        float64
	RequestBurst       int
	GlobalRequestRate  float64
	GlobalRequestBurst int
	MaxConns           int
	MaxConnsPerIP      int
	MaxConnsPerPrefix  int
	MaxConnsPerBlock   int
	// IdleTimeout closes idle keep-alive connections (default: 20 s, or
	// the longest answer wait of the policy plus a second, up to 60 s;
	// idleTimeoutFor).
	IdleTimeout time.Duration
	// Now is the clock rounds are timed on (default time.Now).
	Now func() time.Time
	// Logger receives the gateway's logs (default slog.Default()).
	Logger *slog.Logger
	// random supplies session IDs and probe nonces (tests).
	random io.Reader
}

func (c *Config) applyDefaults() error {
	if c.Core == nil {
		return errors.New("httpgw: no verifier core")
	}
	for _, p := range c.TrustedProxies {
		if !p.IsValid() {
			return fmt.Errorf("httpgw: trusted proxy network %v is not valid", p)
		}
	}
	for _, n := range []struct {
		v   *int
		def int
	}{
		{&c.Probes, protocol.DefaultProbes},
		{&c.MaxSessions, DefaultMaxSessions},
		{&c.MaxSessionsPerPrefix, DefaultMaxSessionsPerPrefix},
		{&c.MaxSessionsPerBlock, DefaultMaxSessionsPerBlock},
		{&c.MaxSessionsPerPeer, DefaultMaxSessionsPerPeer},
		{&c.MaxUnstarted, DefaultMaxUnstarted},
		{&c.MaxUnstartedPerPrefix, DefaultMaxUnstartedPerPrefix},
		{&c.MaxUnstartedPerBlock, DefaultMaxUnstartedPerBlock},
		{&c.V4PrefixBits, DefaultV4PrefixBits},
		{&c.V6PrefixBits, DefaultV6PrefixBits},
		{&c.V6BlockBits, DefaultV6BlockBits},
		{&c.RequestBurst, DefaultRequestBurst},
		{&c.GlobalRequestBurst, DefaultGlobalRequestBurst},
		{&c.MaxConns, DefaultMaxConns},
		{&c.MaxConnsPerIP, DefaultMaxConnsPerIP},
		{&c.MaxConnsPerPrefix, DefaultMaxConnsPerPrefix},
		{&c.MaxConnsPerBlock, DefaultMaxConnsPerBlock},
		{&c.PowDifficulty, DefaultPowDifficulty},
	} {
		if *n.v == 0 {
			*n.v = n.def
		}
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"RequestRate", c.RequestRate}, {"GlobalRequestRate", c.GlobalRequestRate}} {
		// A NaN passed the check below (NaN < 0 is false) and refused
		// every request; an infinite rate lifted the limit.
		if math.IsNaN(r.v) || math.IsInf(r.v, 0) {
			return fmt.Errorf("httpgw: %s %v: want a finite rate (0: the default)", r.name, r.v)
		}
	}
	if c.PowDifficulty < protocol.NoPow {
		return fmt.Errorf("httpgw: PowDifficulty %d: want protocol.NoPow (none beyond the core's), 0 (the default) or up to %d bits", c.PowDifficulty, protocol.MaxPowDifficulty)
	}
	if c.RequestRate == 0 {
		c.RequestRate = DefaultRequestRate
	}
	if c.GlobalRequestRate == 0 {
		c.GlobalRequestRate = DefaultGlobalRequestRate
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&c.StartTTL, DefaultStartTTL},
		{&c.ProbeTimeout, DefaultProbeTimeout},
		{&c.KeepDone, DefaultKeepDone},
		{&c.IdleTimeout, idleTimeoutFor(c.Core.Policy())},
	} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < 0 {
			return errors.New("httpgw: negative duration in config")
		}
	}
	switch {
	case c.Probes < 1 || c.Probes > protocol.MaxProbes:
		return fmt.Errorf("httpgw: %d probes, want 1..%d", c.Probes, protocol.MaxProbes)
	case c.MaxSessions < 1 || c.MaxSessionsPerPrefix < 1 || c.MaxSessionsPerBlock < 1 || c.MaxSessionsPerPeer < 1 ||
		c.MaxUnstarted < 1 || c.MaxUnstartedPerPrefix < 1 || c.MaxUnstartedPerBlock < 1:
		return errors.New("httpgw: session limits must be positive")
	case c.RequestRate < 0 || c.GlobalRequestRate < 0 || c.RequestBurst < 1 || c.GlobalRequestBurst < 1:
		return errors.New("httpgw: request rates must be positive")
	case c.MaxConns < 1 || c.MaxConnsPerIP < 1 || c.MaxConnsPerPrefix < 1 || c.MaxConnsPerBlock < 1:
		return errors.New("httpgw: connection caps must be positive")
	case c.V4PrefixBits < 1 || c.V4PrefixBits > 32 || c.V6PrefixBits < 1 || c.V6PrefixBits > 128 ||
		c.V6BlockBits < 1 || c.V6BlockBits > 128:
		return errors.New("httpgw: prefix bits out of range")
	case c.PowDifficulty > protocol.MaxPowDifficulty:
		return fmt.Errorf("httpgw: proof of work of %d bits exceeds %d", c.PowDifficulty, protocol.MaxPowDifficulty)
	}
	if c.PowDifficulty < 0 {
		c.PowDifficulty = 0
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.random == nil {
		c.random = rand.Reader
	}
	return nil
}

// Gateway is the HTTP door of one node.
type Gateway struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	handler http.Handler

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	plan  addrPlan
	rates *rateLimits // creates and verifies
	reads *rateLimits // reads (GETs, no route, no session)
	// verified remembers the envelopes the verify route checked: the
	// same bytes again cost a hash, not a signature check.
	verified protocol.AttestationCache

	mu       sync.Mutex
	closed   bool
	draining bool // Drain: no new session, no start
	// lateUntil is when the last session whose round this server ended
	// (no answer in time) stops expecting its client's late answer,
	// which gets the signed verdict (§4.4): Drain keeps serving until
	// then.
	lateUntil time.Time
	sessions  map[string]*session
	open      int            // sessions not yet ended
	byPrefix  map[string]int // open sessions per prefix
	byBlock   map[string]int // open sessions per IPv6 block
	byPeer    map[peer.ID]int
	unstarted int            // open sessions not yet started
	unByPfx   map[string]int // unstarted sessions per prefix
	unByBlock map[string]int // unstarted sessions per IPv6 block
	srv       *http.Server
	served    chan struct{} // closed when Serve returns
}

// New builds a gateway; serve its Handler, or call Serve.
func New(cfg Config) (*Gateway, error) {
	if err := cfg.applyDefaults(); err != nil {
		return nil, err
	}
	g := &Gateway{
		cfg: cfg, now: cfg.Now,
		log:      cfg.Logger.With("door", "http", "self", cfg.Core.Self()),
		sessions: map[string]*session{},
		byPrefix: map[string]int{}, byBlock: map[string]int{}, byPeer: map[peer.ID]int{},
		unByPfx: map[string]int{}, unByBlock: map[string]int{},
		plan:  addrPlan{v4: cfg.V4PrefixBits, v6: cfg.V6PrefixBits, v6Block: cfg.V6BlockBits},
		rates: newRateLimits(cfg.RequestRate, cfg.RequestBurst, cfg.GlobalRequestRate, cfg.GlobalRequestBurst),
		reads: newRateLimits(cfg.RequestRate, cfg.RequestBurst, cfg.GlobalRequestRate, cfg.GlobalRequestBurst),
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.handler = g.routes()
	return g, nil
}

// Handler returns the gateway's routes (spec/http.md §3).
func (g *Gateway) Handler() http.Handler { return g.handler }

// MinPowDifficulty is the least proof of work in bits the door asks of a
// client (Config.PowDifficulty): it replaces the core's base when the base
// is lower (a node run with no proof of work over libp2p still charges
// this much over HTTP, where peer IDs are free to anonymous clients,
// spec/http.md §8), and the core's load surcharge comes on top.
func (g *Gateway) MinPowDifficulty() int {
	d := g.cfg.PowDifficulty
	if b, ok := g.cfg.Core.(interface{ PowBase() int }); ok {
		d = max(d, b.PowBase())
	}
	return min(d, g.MaxPowDifficulty())
}

// MaxPowDifficulty is the most proof of work a session of this door asks
// (the manifest's max_difficulty): the core's maximum (a node's
// MaxPowDifficulty, 22 bits by default) when the core says it, else the
// protocol's 32. A client that pays this much can start any session.
func (g *Gateway) MaxPowDifficulty() int {
	if m, ok := g.cfg.Core.(interface{ PowMax() int }); ok && m.PowMax() > 0 {
		return min(m.PowMax(), protocol.MaxPowDifficulty)
	}
	return protocol.MaxPowDifficulty
}

// Listen listens on addr (host:port) and serves the gateway in the
// background until Close; it returns the bound address.
func (g *Gateway) Listen(addr string) (net.Addr, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("httpgw: listen on %s: %w", addr, err)
	}
	if err := g.Serve(l); err != nil {
		l.Close()
		return nil, err
	}
	return l.Addr(), nil
}

// Serve serves the gateway on l in the background until Close. It takes
// ownership of l.
func (g *Gateway) Serve(l net.Listener) error {
	l = limitListener(l, g.cfg.MaxConns, connCaps{host: g.cfg.MaxConnsPerIP, prefix: g.cfg.MaxConnsPerPrefix, block: g.cfg.MaxConnsPerBlock},
		g.plan, g.cfg.TrustedProxies)
	srv := &http.Server{
		Handler:           g.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       g.cfg.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return g.ctx },
	}
	srv.ConnState = newKeepAlivePressure(srv, g.cfg.MaxConns).connState
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return errUnavailable
	}
	if g.srv != nil {
		g.mu.Unlock()
		return errors.New("httpgw: already serving")
	}
	g.srv, g.served = srv, make(chan struct{})
	g.mu.Unlock()
	go func() {
		defer close(g.served)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.log.Error("http gateway stopped", "err", err)
		}
	}()
	g.log.Info("http gateway listening", "addr", l.Addr().String())
	return nil
}

// Drain lets the sessions under way end: from now on a create or the
// start of an unstarted session is refused (unavailable, nothing charged
// or signed), and Drain returns once every started session has its
// verdict, or with ctx's error when ctx ends first (Close then ends the
// rest). The server keeps serving meanwhile, so the clients of running
// sessions can send their probes and answers.
func (g *Gateway) Drain(ctx context.Context) error {
	g.mu.Lock()
	g.draining = true
	g.mu.Unlock()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for g.running() > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("httpgw: drain: %d sessions still running: %w", g.running(), ctx.Err())
		case <-t.C:
		}
	}
	// A client whose round the server ended sends its answer late and
	// is owed the signed verdict in reply: keep serving a little.
	for {
		g.mu.Lock()
		wait := time.Until(g.lateUntil)
		g.mu.Unlock()
		if wait <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil // every verdict is signed; only its delivery is cut short
		case <-time.After(min(wait, 50*time.Millisecond)):
		}
	}
}

// lateAnswerLinger is how long a draining door keeps serving after it
// ended a round that its client did not answer in time.
const lateAnswerLinger = 5 * time.Second

// running counts the started sessions not yet ended: byPeer counts them
// from admitStart to release (an abort or an expiry releases too), under
// g.mu.
func (g *Gateway) running() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, c := range g.byPeer {
		n += c
	}
	return n
}

// Close stops the server (requests in flight get up to 5 s), ends every
// open session (a delivered round ends inconclusive, unsigned, as when the
// libp2p service closes mid-session; an unstarted session is aborted) and
// waits for the server to stop.
func (g *Gateway) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	srv, served := g.srv, g.served
	all := make([]*session, 0, len(g.sessions))
	for _, s := range g.sessions {
		all = append(all, s)
	}
	g.mu.Unlock()
	var err error
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = srv.Shutdown(ctx)
		cancel()
		if err != nil {
			_ = srv.Close()
		}
		<-served
	}
	g.cancel()
	for _, s := range all {
		g.closeSession(s)
	}
	if err != nil {
		return fmt.Errorf("httpgw: shutdown: %w", err)
	}
	return nil
}
