// Package swarm is the in-process swarm simulation behind `acaptcha bench
// swarm`: it starts N acaptcha nodes on loopback (TCP or QUIC), lets first contact,
// gossip and the trust quorum bootstrap admission among them, and measures
// how long it takes until every node admits every other node, how many
// challenge sessions that cost, the gossip traffic, CPU time and memory.
//
// Provers answer from a shared BenchOracle (bench-only; see its doc).
//
// # Who verifies whom
//
// Pairwise (quorum 0): every pair of nodes connects and first contact runs
// one session per direction, N x (N-1) in all.
//
// With quorum K, a node admits a peer without a session when K issuers it
// verified itself hold acceptances of the peer. Every node therefore has to
// verify at least K peers, and every peer needs acceptances from K issuers
// that the others verified. The cheapest shape is a set of K anchors that
// everybody verifies and that verify everybody: K x (N-1) sessions by the
// anchors plus K x (N-K) by the members, about 2K x N in all, and each
// member verifies only K peers. (Counting two-step paths shows no graph
// does substantially better: for every pair (X, Y) without a direct
// session, K of X's verified issuers must have verified Y, which needs
// K x N^2 such paths, and only nodes that both verify and are verified by
// O(N) peers contribute O(N) each.)
//
// The simulation runs in phases:
//  1. anchors: the K anchors connect to each other and verify each other;
//  2. join: the swarm assembles. Members come in two halves that differ in
//     their attest policy: "outbound" members dial the anchors, "inbound"
//     members are dialled by them, so every member verifies every anchor
//     (and only the anchors: at once, as they connect). For the gossip
//     mesh, each inbound member also dials Mesh random outbound members:
//     on such a link neither end's policy asks for a challenge. The
//     anchors' challenges wait until the swarm has assembled and the
//     members have verified them (their bench sources are gated):
//     GossipSub keeps no history, and a node that joins the topic late
//     never sees what was published before;
//  3. coverage: the anchors verify the members and publish the
//     acceptances (so do the subjects); each node admits every member
//     through the quorum of the anchors it verified itself;
//  4. contact: each member dials LateLinks random other members, of either
//     half; first contact must find them admitted and run no session.
package swarm

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/liblog"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

// Limits and defaults of a simulation.
const (
	MaxNodes       = 1000
	DefaultTimeout = 10 * time.Minute
	// DefaultMesh is how many outbound members each inbound member dials.
	DefaultMesh = 3
	// DefaultLateLinks is how many members each member dials after
	// coverage.
	DefaultLateLinks = 1
	// DefaultLatencyScale shrinks realistic delays so that a large swarm
	// finishes in minutes (2.5 s median per round becomes 250 ms).
	DefaultLatencyScale = 0.1
	// DefaultStallTimeout ends a run whose coverage stopped moving.
	DefaultStallTimeout = 30 * time.Second
	// DefaultAnchorConcurrency is the anchors' first-contact concurrency.
	DefaultAnchorConcurrency = 8
)

// Config configures a simulation.
type Config struct {
	// N is the number of nodes (2..MaxNodes).
	N int
	// Quorum is the trust quorum K of every node; 0 runs pairwise.
	Quorum int
	// Anchors is how many anchors a quorum run uses (default Quorum; at
	// least Quorum).
	Anchors int
	// Mesh is how many outbound members each inbound member dials for the
	// gossip mesh (default DefaultMesh; negative: none).
	Mesh int
	// LateLinks is how many random members each member dials after
	// coverage (default DefaultLateLinks; negative: none).
	LateLinks int
	// Latency is the provers' latency model, LatencyScale its factor for
	// realistic delays (default DefaultLatencyScale).
	Latency      Latency
	LatencyScale float64
	// Transport is the loopback transport the nodes listen and dial on
	// (default TransportTCP).
	Transport Transport
	// NoGossip turns attestation gossip off (pairwise runs only: a quorum
	// learns its vouchers from gossip). Pairwise verification needs no
	// gossip, and with it every node validates every one of the N x (N-1)
	// records, N^3 validations in all.
	NoGossip bool
	// Policy is the verifiers' policy (default skill.DefaultPolicy()).
	Policy skill.Policy
	// RequireSource is every node's challenge-source policy
	// (peer.Config.RequireSource). The bench serves procedural
	// challenges, so it defaults to skill.SourceProcedural rather than
	// the node default (hybrid), under which no node would admit another.
	RequireSource skill.SourceKind
	// AnchorConcurrency is the anchors' first-contact concurrency
	// (default DefaultAnchorConcurrency; members keep the node default).
	AnchorConcurrency int
	// Timeout bounds the whole run (default DefaultTimeout).
	Timeout time.Duration
	// StallTimeout ends a run early when neither coverage nor the session
	// count moved for this long (default DefaultStallTimeout).
	StallTimeout time.Duration
	// Dir holds the nodes' stores (default: a fresh directory under
	// /dev/shm when it exists, else the system temp directory); it is
	// removed afterwards.
	Dir string
	// Logger receives the nodes' logs (default: discarded).
	Logger *slog.Logger
	// Teardown demotes the nodes' logs to DEBUG when the run has ended
	// and its nodes close: each node still open would warn about every
	// session a closed one broke off. Run starts it; a caller that also
	// routes the libraries' logs through it (liblog.Install) quiets
	// go-libp2p's teardown lines as well. Default: one of the run's own.
	Teardown *liblog.Teardown
	// Progress, when set, is told about each phase.
	Progress func(format string, args ...any)
}

// Report is the outcome of a simulation.
type Report struct {
	N      int `json:"n"`
	Quorum int `json:"trust_quorum"`
	// RequireSource is the nodes' challenge-source policy.
	RequireSource skill.SourceKind `json:"require_source"`
	Anchors       int              `json:"anchors,omitempty"`
	Mesh          int              `json:"mesh_links_per_member,omitempty"`
	Latency       Latency          `json:"latency"`
	Transport     Transport        `json:"transport"`
	Gossip        bool             `json:"gossip"`
	LatencyScale  float64          `json:"latency_scale,omitempty"`
	Converged     bool             `json:"converged"`
	// AdmittedPairs counts ordered pairs (i, j), i != j, where node i
	// admits node j at the end; full coverage is Pairs = N x (N-1).
	AdmittedPairs int `json:"admitted_pairs"`
	Pairs         int `json:"pairs"`
	// ViaQuorum counts admitted pairs admitted through the quorum.
	ViaQuorum int `json:"admitted_via_quorum"`
	// Sessions counts challenge sessions run to an end (one verifier,
	// one prover, one direction), as the nodes count them; SetsServed the
	// challenge sets drawn (a session that could not start draws one too).
	// PairwiseSessions is N x (N-1), MinSessions the fewest the anchor
	// design needs for this quorum (see the package doc), FloorSessions
	// the fewest any design can need (spec/trust.md §3.2).
	Sessions         int64   `json:"sessions"`
	SetsServed       int64   `json:"sets_served"`
	SessionsPerNode  float64 `json:"sessions_per_node"`
	PairwiseSessions int64   `json:"pairwise_sessions"`
	MinSessions      int64   `json:"min_sessions"`
	FloorSessions    int64   `json:"floor_sessions"`
	LateSessions     int64   `json:"late_link_sessions"`
	// PairsVerified counts unordered node pairs {i, j} in which at least
	// one node admits the other directly (its own session, accepted): a
	// mutual attestation counts once. Pairwise it is N x (N-1) / 2.
	PairsVerified  int   `json:"pairs_verified"`
	UnknownAnswers int64 `json:"unknown_answers"`
	// Gossip counters summed over the nodes: records published, and
	// records delivered to a node by another after validation.
	GossipPublished int64 `json:"gossip_published"`
	GossipDelivered int64 `json:"gossip_delivered"`
	Connections     int   `json:"connections"`
	// Durations are in nanoseconds in JSON. TimeToCoverage runs from the
	// first connection to full coverage.
	StartUp        time.Duration `json:"startup_ns"`
	TimeToCoverage time.Duration `json:"time_to_coverage_ns"`
	Total          time.Duration `json:"total_ns"`
	CPUUser        time.Duration `json:"cpu_user_ns"`
	CPUSys         time.Duration `json:"cpu_sys_ns"`
	// PeakHeap is the largest Go heap sampled during the run, PeakSys the
	// largest memory obtained from the OS by the Go runtime, MaxRSS the
	// process's peak resident set (rusage; includes what ran before).
	PeakHeap uint64  `json:"peak_heap_bytes"`
	PeakSys  uint64  `json:"peak_go_sys_bytes"`
	MaxRSS   uint64  `json:"max_rss_bytes,omitempty"`
	Phases   []Phase `json:"phases"`
	Error    string  `json:"error,omitempty"`
	// TimedOut reports that the run ended at Config.Timeout (Error then
	// says where it was).
	TimedOut bool `json:"timed_out,omitempty"`
	// Missing describes a few pairs not admitted at the end.
	Missing []string `json:"missing,omitempty"`
}

// Phase is the duration and session count of one phase.
type Phase struct {
	Name     string        `json:"name"`
	Took     time.Duration `json:"took_ns"`
	Sessions int64         `json:"sessions"`
}

// ErrConfig is wrapped by configuration errors.
var ErrConfig = errors.New("swarm: invalid configuration")

var errStalled = errors.New("swarm: coverage stalled")

// MinSessions is the number of sessions the anchor design runs for n nodes
// and quorum k (2k x n - k(k+1)), or n(n-1) pairwise.
func MinSessions(n, k int) int64 {
	if k <= 0 || k >= n {
		return int64(n) * int64(n-1)
	}
	return 2*int64(k)*int64(n) - int64(k)*int64(k+1)
}

// Transport is a loopback transport of the simulation.
type Transport string

// Transports.
const (
	// TransportTCP is TCP with Noise or TLS and yamux: two sockets per
	// connection in this process.
	TransportTCP Transport = "tcp"
	// TransportQUIC is QUIC v1: every node's connections share its UDP
	// socket, so large pairwise swarms fit the open-file limit.
	TransportQUIC Transport = "quic"
)

// ParseTransport parses a transport name.
func ParseTransport(s string) (Transport, error) {
	switch t := Transport(s); t {
	case TransportTCP, TransportQUIC:
		return t, nil
	case "":
		return TransportTCP, nil
	}
	return "", fmt.Errorf("transport %q: want tcp or quic", s)
}

func (t Transport) listenAddr() string {
	if t == TransportQUIC {
		return "/ip4/127.0.0.1/udp/0/quic-v1"
	}
	return "/ip4/127.0.0.1/tcp/0"
}

// fileLimit reports the open-file limit (a variable for tests).
var fileLimit = openFileLimit

// filesNeeded estimates the open files a run needs: per node a listener,
// its store and the runtime's share (8 is generous), plus on TCP two
// sockets per connection: N x (N-1) for pairwise, and for a quorum the
// anchor links, the mesh and the late links.
func (c *Config) filesNeeded() int {
	need := 8*c.N + 64
	if c.Transport != TransportTCP {
		return need
	}
	conns := c.N * (c.N - 1) / 2
	if c.Quorum > 0 {
		conns = c.Anchors*c.N + max(c.Mesh, 0)*c.N + max(c.LateLinks, 0)*c.N
	}
	return need + 2*conns
}

func (c *Config) defaults() error {
	switch {
	case c.N < 2 || c.N > MaxNodes:
		return fmt.Errorf("%w: n %d outside [2, %d]", ErrConfig, c.N, MaxNodes)
	case c.Quorum < 0:
		return fmt.Errorf("%w: negative trust quorum", ErrConfig)
	case c.Anchors < 0:
		return fmt.Errorf("%w: negative anchors", ErrConfig)
	}
	if c.Quorum > 0 {
		if c.Anchors == 0 {
			c.Anchors = c.Quorum
		}
		if c.Anchors < c.Quorum {
			return fmt.Errorf("%w: %d anchors cannot make a quorum of %d", ErrConfig, c.Anchors, c.Quorum)
		}
		if c.Anchors+2 > c.N {
			return fmt.Errorf("%w: quorum %d with %d anchors needs at least %d nodes", ErrConfig, c.Quorum, c.Anchors, c.Anchors+2)
		}
		if c.NoGossip {
			return fmt.Errorf("%w: a trust quorum needs gossip (its vouchers travel on it)", ErrConfig)
		}
	} else {
		c.Anchors = 0
	}
	if c.Mesh == 0 {
		c.Mesh = DefaultMesh
	}
	if c.LateLinks == 0 {
		c.LateLinks = DefaultLateLinks
	}
	if c.Latency == "" {
		c.Latency = LatencyInstant
	}
	if c.Transport == "" {
		c.Transport = TransportTCP
	}
	if _, err := ParseTransport(string(c.Transport)); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if need, limit := c.filesNeeded(), fileLimit(); limit > 0 && need > limit {
		return fmt.Errorf("%w: %d nodes on %s need about %d open files and this process may open %d: raise the limit (ulimit -n) or use the quic transport, whose connections share one socket per node", ErrConfig, c.N, c.Transport, need, limit)
	}
	if _, err := ParseLatency(string(c.Latency)); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.LatencyScale <= 0 {
		c.LatencyScale = DefaultLatencyScale
	}
	if c.Policy.Rounds == 0 {
		c.Policy = skill.DefaultPolicy()
	}
	if err := c.Policy.Check(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.RequireSource == "" {
		c.RequireSource = skill.SourceProcedural
	}
	if _, err := peer.ParseRequireSource(string(c.RequireSource)); err != nil {
		return fmt.Errorf("%w: require source: %w", ErrConfig, err)
	}
	if c.AnchorConcurrency <= 0 {
		c.AnchorConcurrency = DefaultAnchorConcurrency
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.StallTimeout <= 0 {
		c.StallTimeout = DefaultStallTimeout
	}
	if c.Teardown == nil {
		c.Teardown = new(liblog.Teardown)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Progress == nil {
		c.Progress = func(string, ...any) {}
	}
	return nil
}

type sim struct {
	cfg    Config
	oracle *BenchOracle
	gate   *Gate
	nodes  []*peer.Node
	rep    *Report

	coveredAt         time.Time
	peakHeap, peakSys atomic.Uint64
}

// errRunTimeout is the cause of a run's end at Config.Timeout.
var errRunTimeout = errors.New("swarm: the run's time limit passed")

// Run runs one simulation. It returns the report also when the swarm did
// not converge in time (Converged false, Error set); the error is for
// failures to run at all.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, cfg.Timeout, errRunTimeout)
	defer cancel()
	dir := cfg.Dir
	if dir == "" {
		base := ""
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			base = "/dev/shm"
		}
		d, err := os.MkdirTemp(base, "acaptcha-swarm-")
		if err != nil {
			return nil, fmt.Errorf("swarm: store directory: %w", err)
		}
		dir = d
		defer os.RemoveAll(d)
	}
	s := &sim{cfg: cfg, oracle: NewBenchOracle(), gate: NewGate(), rep: &Report{
		N: cfg.N, Quorum: cfg.Quorum, RequireSource: cfg.RequireSource, Anchors: cfg.Anchors, Latency: cfg.Latency, Transport: cfg.Transport, Gossip: !cfg.NoGossip,
		Pairs: cfg.N * (cfg.N - 1), PairwiseSessions: int64(cfg.N) * int64(cfg.N-1),
		MinSessions: MinSessions(cfg.N, cfg.Quorum), FloorSessions: FloorSessions(cfg.N, cfg.Quorum),
	}}
	if cfg.Quorum > 0 && cfg.Mesh > 0 {
		s.rep.Mesh = cfg.Mesh
	}
	if cfg.Latency == LatencyRealistic {
		s.rep.LatencyScale = cfg.LatencyScale
	}
	ru0 := readUsage()
	start := time.Now()
	stopSampling := s.sampleMemory()
	defer func() {
		// The run is over: what the nodes say as they close one
		// another's sessions is no news (warnings during the run are
		// kept).
		cfg.Teardown.Start()
		s.closeNodes()
	}()

	err := s.startNodes(ctx, dir)
	s.rep.StartUp = time.Since(start)
	if err == nil {
		t0 := time.Now()
		if cfg.Quorum > 0 {
			err = s.runQuorum(ctx)
		} else {
			err = s.runPairwise(ctx)
		}
		if !s.coveredAt.IsZero() {
			s.rep.TimeToCoverage = s.coveredAt.Sub(t0)
		}
	}
	stopSampling()
	s.finish()
	s.rep.Total = time.Since(start)
	ru1 := readUsage()
	s.rep.CPUUser, s.rep.CPUSys = ru1.user-ru0.user, ru1.sys-ru0.sys
	s.rep.MaxRSS = ru1.maxRSS
	s.rep.PeakHeap, s.rep.PeakSys = s.peakHeap.Load(), s.peakSys.Load()
	if err != nil {
		s.rep.TimedOut = errors.Is(context.Cause(ctx), errRunTimeout)
		s.rep.Error = err.Error()
		if (ctx.Err() != nil || errors.Is(err, errStalled)) && s.rep.Phases != nil {
			// Ran out of time or stalled: the report says how far it got.
			return s.rep, nil
		}
		return s.rep, err
	}
	return s.rep, nil
}

// closeNodes stops the nodes, a few at a time.
func (s *sim) closeNodes() {
	work := make(chan *peer.Node)
	var wg sync.WaitGroup
	for range 2 * runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				n.Close()
			}
		}()
	}
	for _, n := range s.nodes {
		if n != nil {
			work <- n
		}
	}
	close(work)
	wg.Wait()
}

// sampleMemory records the peak Go heap every 200 ms until stopped.
func (s *sim) sampleMemory() func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	raise := func(p *atomic.Uint64, v uint64) {
		for {
			old := p.Load()
			if v <= old || p.CompareAndSwap(old, v) {
				return
			}
		}
	}
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			raise(&s.peakHeap, m.HeapAlloc)
			raise(&s.peakSys, m.Sys)
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// Node roles.
type role int

const (
	rolePairwise role = iota
	roleAnchor
	roleOutbound // a member that verifies whom it dials: the anchors
	roleInbound  // a member that verifies who dials it: the anchors
)

func (s *sim) role(i int) role {
	switch {
	case s.cfg.Quorum == 0:
		return rolePairwise
	case i < s.cfg.Anchors:
		return roleAnchor
	case (i-s.cfg.Anchors)%2 == 0:
		return roleOutbound
	}
	return roleInbound
}

// startNodes starts the N nodes with a few workers.
func (s *sim) startNodes(ctx context.Context, dir string) error {
	cfg := s.cfg
	cfg.Progress("starting %d nodes", cfg.N)
	s.nodes = make([]*peer.Node, cfg.N)
	errs := make([]error, cfg.N)
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(cfg.N, 2*runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				s.nodes[i], errs[i] = s.newNode(i, dir)
			}
		}()
	}
	for i := range cfg.N {
		if ctx.Err() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("swarm: starting nodes: %w", err)
	}
	return errors.Join(errs...)
}

func (s *sim) newNode(i int, dir string) (*peer.Node, error) {
	cfg := s.cfg
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("swarm: node %d key: %w", i, err)
	}
	gen, err := procedural.New(procedural.Config{})
	if err != nil {
		return nil, fmt.Errorf("swarm: node %d challenge generator: %w", i, err)
	}
	var gate *Gate
	conc := 0
	pol := peer.AttestAll
	switch s.role(i) {
	case roleAnchor:
		gate, conc = s.gate, cfg.AnchorConcurrency
	case roleOutbound:
		pol = peer.AttestOutbound
	case roleInbound:
		pol = peer.AttestInbound
	}
	n, err := peer.New(peer.Config{
		Key:                 key,
		StorePath:           filepath.Join(dir, fmt.Sprintf("node%04d.db", i)),
		ListenAddrs:         []string{cfg.Transport.listenAddr()},
		Policy:              cfg.Policy,
		Source:              s.oracle.Source(gen, gate),
		Prover:              s.oracle.Prover(cfg.Latency, cfg.LatencyScale),
		Logger:              slog.New(cfg.Teardown.Handler(cfg.Logger.Handler())).With("node", i),
		AttestPolicy:        pol,
		MaxConcurrentAttest: conc,
		TrustQuorum:         cfg.Quorum,
		RequireSource:       cfg.RequireSource,
		Gossip:              !cfg.NoGossip,
	})
	if err != nil {
		return nil, fmt.Errorf("swarm: start node %d: %w", i, err)
	}
	return n, nil
}

func addrInfo(n *peer.Node) lpeer.AddrInfo {
	return lpeer.AddrInfo{ID: n.ID(), Addrs: n.Host().Addrs()}
}

// connect dials the given pairs (from, to) with bounded parallelism.
func (s *sim) connect(ctx context.Context, pairs [][2]int) error {
	work := make(chan [2]int)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range min(len(pairs), 16) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pr := range work {
				err := s.dial(ctx, pr[0], pr[1])
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("swarm: node %d dials node %d: %w", pr[0], pr[1], err))
					mu.Unlock()
				}
			}
		}()
	}
	for _, pr := range pairs {
		if ctx.Err() != nil {
			break
		}
		work <- pr
	}
	close(work)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("swarm: connecting: %w", err)
	}
	return errors.Join(errs...)
}

// dialTries is how often the simulation dials one pair before it gives up:
// on a saturated machine a security handshake can time out, and a real
// node's discovery would dial again too. dialPause is the first pause
// between two dials, longer than the swarm's back-off of a failed address
// (swarm.BackoffBase, 5 s), which would refuse an earlier dial outright.
const (
	dialTries = 3
	dialPause = 6 * time.Second
)

// dial connects node i to node j, retrying a failed dial after a pause.
func (s *sim) dial(ctx context.Context, i, j int) error {
	var err error
	for try := range dialTries {
		if try > 0 {
			if serr := sleepCtx(ctx, time.Duration(try)*dialPause); serr != nil {
				return errors.Join(err, serr)
			}
			s.cfg.Progress("node %d dials node %d again (attempt %d): %v", i, j, try+1, err)
		}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		err = s.nodes[i].Host().Connect(cctx, addrInfo(s.nodes[j]))
		cancel()
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("after %d attempts: %w", dialTries, err)
}

// phase runs f and records its duration and sessions.
func (s *sim) phase(name string, f func() error) error {
	s.cfg.Progress("phase %s", name)
	t0, n0 := time.Now(), s.sessions()
	err := f()
	s.rep.Phases = append(s.rep.Phases, Phase{Name: name, Took: time.Since(t0), Sessions: s.sessions() - n0})
	return err
}

// sessions sums the verifier sessions the nodes ran.
func (s *sim) sessions() int64 {
	var k int64
	for _, n := range s.nodes {
		if n != nil {
			k += int64(n.Stats().SessionsVerified)
		}
	}
	return k
}

func shuffled(pairs [][2]int) [][2]int {
	mrand.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
	return pairs
}

func (s *sim) runPairwise(ctx context.Context) error {
	var pairs [][2]int
	for i := range s.cfg.N {
		for j := i + 1; j < s.cfg.N; j++ {
			pairs = append(pairs, [2]int{i, j})
		}
	}
	if err := s.phase("connect", func() error { return s.connect(ctx, shuffled(pairs)) }); err != nil {
		return err
	}
	return s.phase("coverage", func() error {
		at, err := s.awaitCoverage(ctx, indices(0, s.cfg.N))
		s.coveredAt = at
		return err
	})
}

func (s *sim) runQuorum(ctx context.Context) error {
	cfg := s.cfg
	anchors := indices(0, cfg.Anchors)
	var outbound, inbound []int
	for i := cfg.Anchors; i < cfg.N; i++ {
		if s.role(i) == roleOutbound {
			outbound = append(outbound, i)
		} else {
			inbound = append(inbound, i)
		}
	}
	err := s.phase("anchors", func() error {
		var pairs [][2]int
		for i := range anchors {
			for j := i + 1; j < len(anchors); j++ {
				pairs = append(pairs, [2]int{anchors[i], anchors[j]})
			}
		}
		if err := s.connect(ctx, pairs); err != nil {
			return err
		}
		_, err := s.awaitCoverage(ctx, anchors)
		return err
	})
	if err != nil {
		return err
	}
	s.gate.Shut()
	err = s.phase("join", func() error {
		var pairs [][2]int
		for _, a := range anchors {
			for _, m := range outbound {
				pairs = append(pairs, [2]int{m, a})
			}
			for _, m := range inbound {
				pairs = append(pairs, [2]int{a, m})
			}
		}
		if err := s.connect(ctx, shuffled(append(pairs, meshLinks(inbound, outbound, cfg.Mesh)...))); err != nil {
			return err
		}
		// Let the members finish verifying the anchors before the
		// anchors start (one burst of gossip at a time), and GossipSub
		// form its mesh over the new connections (it grafts on its
		// heartbeats, once a second).
		if err := s.awaitAdmitted(ctx, append(outbound, inbound...), anchors); err != nil {
			return err
		}
		return sleepCtx(ctx, meshSettle)
	})
	s.gate.Open()
	if err != nil {
		return err
	}
	err = s.phase("coverage", func() error {
		at, err := s.awaitCoverage(ctx, indices(0, cfg.N))
		s.coveredAt = at
		return err
	})
	if err != nil || cfg.LateLinks <= 0 {
		return err
	}
	return s.phase("contact", func() error { return s.lateLinks(ctx, append(outbound, inbound...)) })
}

// meshLinks returns links from inbound to outbound members such that
// every member of either half has at least k of them (when the other half
// is large enough).
func meshLinks(inbound, outbound []int, k int) [][2]int {
	if k <= 0 || len(inbound) == 0 || len(outbound) == 0 {
		return nil
	}
	linked := map[[2]int]bool{}
	degree := map[int]int{}
	var pairs [][2]int
	add := func(m, o int) {
		if !linked[[2]int{m, o}] {
			linked[[2]int{m, o}] = true
			degree[m]++
			degree[o]++
			pairs = append(pairs, [2]int{m, o})
		}
	}
	for _, m := range inbound {
		for _, o := range pick(outbound, k) {
			add(m, o)
		}
	}
	for _, o := range outbound {
		for _, m := range pick(inbound, len(inbound)) {
			if degree[o] >= k {
				break
			}
			add(m, o)
		}
	}
	return pairs
}

// pick returns up to k distinct random elements of xs.
func pick(xs []int, k int) []int {
	if k <= 0 {
		return nil
	}
	idx := mrand.Perm(len(xs))
	out := make([]int, 0, min(k, len(xs)))
	for _, i := range idx[:min(k, len(xs))] {
		out = append(out, xs[i])
	}
	return out
}

// lateLinks dials LateLinks random other members from each member that it
// is not connected to yet, then gives first contact time to act: every
// member is admitted by now, so no session should run.
func (s *sim) lateLinks(ctx context.Context, members []int) error {
	n0 := s.sessions()
	var pairs [][2]int
	for _, m := range members {
		for _, o := range pick(members, s.cfg.LateLinks+1) {
			if o != m && len(s.nodes[m].Host().Network().ConnsToPeer(s.nodes[o].ID())) == 0 {
				pairs = append(pairs, [2]int{m, o})
			}
		}
	}
	if err := s.connect(ctx, pairs); err != nil {
		return err
	}
	if err := sleepCtx(ctx, lateSettle); err != nil {
		return err
	}
	s.rep.LateSessions = s.sessions() - n0
	return nil
}

// meshSettle is how long the join phase gives GossipSub to build its mesh.
var meshSettle = 2 * time.Second

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("swarm: %w", ctx.Err())
	}
}

// lateSettle is how long the contact phase watches for sessions: longer
// than first contact's quorum wait.
var lateSettle = 3 * time.Second

// awaitCoverage polls until every node in idx admits every other node in
// idx and returns when that was first seen. Admission only grows during a
// run, so each poll rechecks only the pairs still missing.
func (s *sim) awaitCoverage(ctx context.Context, idx []int) (time.Time, error) {
	type pair struct{ i, j int }
	var missing []pair
	for _, i := range idx {
		for _, j := range idx {
			if i != j {
				missing = append(missing, pair{i, j})
			}
		}
	}
	want := len(missing)
	t := time.NewTicker(coveragePoll)
	defer t.Stop()
	lastReport, lastChange := time.Now(), time.Now()
	lastSessions := int64(-1)
	for {
		rest := missing[:0]
		for _, p := range missing {
			if !s.nodes[p.i].Admission(s.nodes[p.j].ID()).Admitted {
				rest = append(rest, p)
			}
		}
		changed := len(rest) != len(missing)
		missing = rest
		if len(missing) == 0 {
			return time.Now(), nil
		}
		if sess := s.sessions(); changed || sess != lastSessions {
			lastChange, lastSessions = time.Now(), sess
		}
		if time.Since(lastReport) > 5*time.Second {
			s.cfg.Progress("coverage %d/%d pairs, %d sessions", want-len(missing), want, lastSessions)
			lastReport = time.Now()
		}
		if time.Since(lastChange) > s.cfg.StallTimeout {
			return time.Time{}, fmt.Errorf("%w at %d/%d pairs: nothing changed for %s", errStalled, want-len(missing), want, s.cfg.StallTimeout)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("swarm: coverage %d/%d pairs when the run ended: %w", want-len(missing), want, ctx.Err())
		case <-t.C:
		}
	}
}

// awaitAdmitted waits until every node in from admits every node in to.
func (s *sim) awaitAdmitted(ctx context.Context, from, to []int) error {
	t := time.NewTicker(coveragePoll)
	defer t.Stop()
	for {
		done := true
		for _, i := range from {
			for _, j := range to {
				if i != j && !s.nodes[i].Admission(s.nodes[j].ID()).Admitted {
					done = false
					break
				}
			}
			if !done {
				break
			}
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("swarm: waiting for the members to verify the anchors: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// coveragePoll is the interval of coverage checks.
var coveragePoll = 100 * time.Millisecond

// finish fills in the end-of-run figures.
func (s *sim) finish() {
	r := s.rep
	r.SetsServed = s.oracle.Served()
	r.Sessions = s.sessions()
	r.SessionsPerNode = float64(r.Sessions) / float64(r.N)
	r.UnknownAnswers = s.oracle.Unknown()
	for _, n := range s.nodes {
		if n == nil {
			return
		}
	}
	direct := make([][]bool, len(s.nodes))
	for i, a := range s.nodes {
		direct[i] = make([]bool, len(s.nodes))
		r.Connections += len(a.Host().Network().Conns())
		st := a.Stats()
		r.GossipPublished += int64(st.GossipPublished)
		r.GossipDelivered += int64(st.GossipDelivered)
		for j, b := range s.nodes {
			if i == j {
				continue
			}
			adm := a.Admission(b.ID())
			switch {
			case adm.Admitted:
				r.AdmittedPairs++
				switch adm.Via {
				case peer.AdmittedQuorum:
					r.ViaQuorum++
				case peer.AdmittedDirect:
					direct[i][j] = true
				}
			case len(r.Missing) < maxMissing:
				r.Missing = append(r.Missing, s.describeMissing(i, j, adm))
			}
		}
	}
	for i := range direct {
		for j := i + 1; j < len(direct); j++ {
			if direct[i][j] || direct[j][i] {
				r.PairsVerified++
			}
		}
	}
	r.Connections /= 2
	r.Converged = r.AdmittedPairs == r.Pairs
}

const maxMissing = 10

// describeMissing says why node i does not admit node j.
func (s *sim) describeMissing(i, j int, adm peer.Admission) string {
	a, b := s.nodes[i], s.nodes[j]
	vouchers, counting := 0, 0
	verdict := ""
	for _, pi := range a.Peers() {
		if pi.Peer != b.ID() {
			continue
		}
		if d := pi.Direct; d != nil {
			verdict = fmt.Sprintf(" (own verdict %s at %s)", d.Reason, d.IssuedAt.Format(time.TimeOnly))
		}
		vouchers = len(pi.Vouchers)
		for _, v := range pi.Vouchers {
			if v.Counts {
				counting++
			}
		}
	}
	return fmt.Sprintf("node %d does not admit node %d: %s%s; %d vouchers learned, %d count; %s",
		i, j, adm.Reason, verdict, vouchers, counting, a.Host().Network().Connectedness(b.ID()))
}

func indices(from, to int) []int {
	out := make([]int, 0, max(to-from, 0))
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// FloorSessions is a lower bound on the sessions (one per direction) with
// which n nodes can all admit one another when an admission by quorum k
// counts only issuers the admitting node verified itself (spec/trust.md
// §3.2): with m the fewest peers any node verified directly, either m = n-1
// (pairwise) or k <= m <= n-2 and the swarm runs at least
// max(n*m, k(n-1-m) + m(n-m)) sessions. For n well above k the least is at
// m = k: k(2n - 2k - 1), which MinSessions' anchor design exceeds by k².
func FloorSessions(n, k int) int64 {
	best := int64(n) * int64(n-1)
	if k <= 0 {
		return best
	}
	for m := k; m <= n-2; m++ {
		a := int64(n) * int64(m)
		b := int64(k)*int64(n-1-m) + int64(m)*int64(n-m)
		best = min(best, max(a, b))
	}
	return best
}
