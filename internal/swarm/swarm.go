// Package swarm is the in-process swarm simulation behind `acaptcha bench
// swarm`: it starts N acaptcha nodes on loopback TCP, lets first contact,
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
//  2. join: every member dials every anchor; members verify the anchors at
//     once, while the anchors' challenges wait until every member is
//     connected (their bench sources are gated), so that every anchor's
//     attestation is gossiped to a complete swarm: GossipSub keeps no
//     history, and a node that subscribes late never sees what was
//     published before;
//  3. coverage: the anchors verify the members, publish the acceptances
//     on the gossip topic, and each node admits every member through the
//     quorum of the anchors it verified itself;
//  4. mesh: each member then dials a few random members; first contact
//     must find them admitted and run no session.
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

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

// Limits of a simulation.
const (
	MaxNodes       = 1000
	DefaultTimeout = 10 * time.Minute
	DefaultMesh    = 3
	// DefaultLatencyScale shrinks realistic delays so that a large swarm
	// finishes in minutes (2.5 s median per round becomes 250 ms).
	DefaultLatencyScale = 0.1
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
	// Mesh is how many random members each member dials after coverage
	// (default DefaultMesh; negative: none).
	Mesh int
	// Latency is the provers' latency model, LatencyScale its factor for
	// realistic delays (default DefaultLatencyScale).
	Latency      Latency
	LatencyScale float64
	// Policy is the verifiers' policy (default skill.DefaultPolicy()).
	Policy skill.Policy
	// MaxConcurrentAttest is the anchors' first-contact concurrency
	// (members keep the node default).
	MaxConcurrentAttest int
	// Timeout bounds the whole run (default DefaultTimeout).
	Timeout time.Duration
	// Dir holds the nodes' stores (default: a fresh directory under
	// /dev/shm when it exists, else the system temp directory); it is
	// removed afterwards.
	Dir string
	// Logger receives the nodes' logs (default: discarded).
	Logger *slog.Logger
	// Progress, when set, is told about each phase.
	Progress func(format string, args ...any)
}

// Report is the outcome of a simulation.
type Report struct {
	N            int     `json:"n"`
	Quorum       int     `json:"trust_quorum"`
	Anchors      int     `json:"anchors,omitempty"`
	Mesh         int     `json:"mesh_links_per_member,omitempty"`
	Latency      Latency `json:"latency"`
	LatencyScale float64 `json:"latency_scale,omitempty"`
	Converged    bool    `json:"converged"`
	// AdmittedPairs counts ordered pairs (i, j), i != j, where node i
	// admits node j at the end; full coverage is N x (N-1).
	AdmittedPairs int `json:"admitted_pairs"`
	Pairs         int `json:"pairs"`
	// ViaQuorum counts admitted pairs admitted through the quorum.
	ViaQuorum int `json:"admitted_via_quorum"`
	// Sessions counts challenge sessions (one verifier and one prover, one
	// direction); PairwiseSessions is N x (N-1).
	Sessions         int64   `json:"sessions"`
	SessionsPerNode  float64 `json:"sessions_per_node"`
	PairwiseSessions int64   `json:"pairwise_sessions"`
	MeshSessions     int64   `json:"mesh_phase_sessions"`
	UnknownAnswers   int64   `json:"unknown_answers"`
	// Gossip counters summed over the nodes.
	GossipPublished int64 `json:"gossip_published"`
	GossipDelivered int64 `json:"gossip_delivered"`
	Connections     int   `json:"connections"`
	// Durations in nanoseconds in JSON.
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
		if c.Anchors >= c.N {
			return fmt.Errorf("%w: quorum %d needs more than %d nodes (%d anchors and at least one member)", ErrConfig, c.Quorum, c.Anchors, c.Anchors+1)
		}
	} else {
		c.Anchors = 0
	}
	if c.Mesh == 0 {
		c.Mesh = DefaultMesh
	}
	if c.Latency == "" {
		c.Latency = LatencyInstant
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
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
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

	coveredAt time.Time

	peakHeap, peakSys atomic.Uint64
}

// Run runs one simulation. It returns the report also when the swarm did
// not converge in time (Converged false, Error set); the error is for
// failures to run at all.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
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
		N: cfg.N, Quorum: cfg.Quorum, Anchors: cfg.Anchors, Latency: cfg.Latency,
		Pairs: cfg.N * (cfg.N - 1), PairwiseSessions: int64(cfg.N) * int64(cfg.N-1),
	}}
	if cfg.Mesh > 0 && cfg.Quorum > 0 {
		s.rep.Mesh = cfg.Mesh
	}
	if cfg.Latency == LatencyRealistic {
		s.rep.LatencyScale = cfg.LatencyScale
	}
	ru0 := readUsage()
	start := time.Now()
	stopSampling := s.sampleMemory()
	defer func() {
		for _, n := range s.nodes {
			if n != nil {
				n.Close()
			}
		}
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
		s.rep.Error = err.Error()
		if ctx.Err() != nil {
			// Ran out of time: the report says how far it got.
			return s.rep, nil
		}
		return s.rep, err
	}
	return s.rep, nil
}

// sampleMemory records the peak Go heap every 200 ms until stopped.
func (s *sim) sampleMemory() func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	sample := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		for _, x := range []struct {
			p *atomic.Uint64
			v uint64
		}{{&s.peakHeap, m.HeapAlloc}, {&s.peakSys, m.Sys}} {
			for {
				old := x.p.Load()
				if x.v <= old || x.p.CompareAndSwap(old, x.v) {
					break
				}
			}
		}
	}
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			sample()
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

func (s *sim) isAnchor(i int) bool { return i < s.cfg.Anchors }

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
	if s.isAnchor(i) {
		gate = s.gate
		conc = cfg.MaxConcurrentAttest
	}
	n, err := peer.New(peer.Config{
		Key:                 key,
		StorePath:           filepath.Join(dir, fmt.Sprintf("node%04d.db", i)),
		ListenAddrs:         []string{"/ip4/127.0.0.1/tcp/0"},
		Policy:              cfg.Policy,
		Source:              s.oracle.Source(gen, gate),
		Prover:              s.oracle.Prover(cfg.Latency, cfg.LatencyScale),
		Logger:              cfg.Logger.With("node", i),
		AttestPolicy:        peer.AttestAll,
		MaxConcurrentAttest: conc,
		TrustQuorum:         cfg.Quorum,
		Gossip:              true,
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
				cctx, cancel := context.WithTimeout(ctx, time.Minute)
				err := s.nodes[pr[0]].Host().Connect(cctx, addrInfo(s.nodes[pr[1]]))
				cancel()
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

// phase runs f and records its duration and sessions.
func (s *sim) phase(name string, f func() error) error {
	s.cfg.Progress("phase %s", name)
	t0, n0 := time.Now(), s.oracle.Sessions()
	err := f()
	s.rep.Phases = append(s.rep.Phases, Phase{Name: name, Took: time.Since(t0), Sessions: s.oracle.Sessions() - n0})
	return err
}

func (s *sim) runPairwise(ctx context.Context) error {
	var pairs [][2]int
	for i := range s.cfg.N {
		for j := i + 1; j < s.cfg.N; j++ {
			pairs = append(pairs, [2]int{i, j})
		}
	}
	mrand.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
	if err := s.phase("connect", func() error { return s.connect(ctx, pairs) }); err != nil {
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
	anchors, members := indices(0, cfg.Anchors), indices(cfg.Anchors, cfg.N)
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
	// The anchors hold their challenges until every member is connected
	// to them, so that their acceptances reach the whole swarm.
	s.gate.Shut()
	err = s.phase("join", func() error {
		var pairs [][2]int
		for _, m := range members {
			for _, a := range anchors {
				pairs = append(pairs, [2]int{m, a})
			}
		}
		mrand.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
		return s.connect(ctx, pairs)
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
	if err != nil || cfg.Mesh <= 0 || len(members) < 2 {
		return err
	}
	return s.phase("mesh", func() error { return s.mesh(ctx, members) })
}

// mesh dials cfg.Mesh random other members from each member, then gives
// first contact time to act; every member is admitted by now, so no
// session should run.
func (s *sim) mesh(ctx context.Context, members []int) error {
	n0 := s.oracle.Sessions()
	seen := map[[2]int]bool{}
	var pairs [][2]int
	for _, m := range members {
		k := min(s.cfg.Mesh, len(members)-1)
		for tries := 0; k > 0 && tries < 8*s.cfg.Mesh; tries++ {
			o := members[mrand.IntN(len(members))]
			a, b := min(m, o), max(m, o)
			if o == m || seen[[2]int{a, b}] {
				continue
			}
			seen[[2]int{a, b}] = true
			pairs = append(pairs, [2]int{m, o})
			k--
		}
	}
	if err := s.connect(ctx, pairs); err != nil {
		return err
	}
	// First contact presents, checks admission and, with a quorum, may
	// wait for gossip before it challenges: give it that long.
	t := time.NewTimer(meshSettle)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return fmt.Errorf("swarm: mesh: %w", ctx.Err())
	}
	s.rep.MeshSessions = s.oracle.Sessions() - n0
	return nil
}

// meshSettle is how long the mesh phase watches for sessions.
var meshSettle = 3 * time.Second

// awaitCoverage polls until every node in idx admits every other node in
// idx and returns when that was first seen.
func (s *sim) awaitCoverage(ctx context.Context, idx []int) (time.Time, error) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	last := -1
	lastReport := time.Now()
	for {
		got := 0
		for _, i := range idx {
			for _, j := range idx {
				if i != j && s.nodes[i].Admission(s.nodes[j].ID()).Admitted {
					got++
				}
			}
		}
		want := len(idx) * (len(idx) - 1)
		if got == want {
			return time.Now(), nil
		}
		if got != last && time.Since(lastReport) > 2*time.Second {
			s.cfg.Progress("coverage %d/%d pairs, %d sessions", got, want, s.oracle.Sessions())
			last, lastReport = got, time.Now()
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("swarm: coverage %d/%d pairs when the run ended: %w", got, want, ctx.Err())
		case <-t.C:
		}
	}
}

// finish fills in the end-of-run figures.
func (s *sim) finish() {
	r := s.rep
	r.Sessions = s.oracle.Sessions()
	r.SessionsPerNode = float64(r.Sessions) / float64(r.N)
	r.UnknownAnswers = s.oracle.Unknown()
	if len(s.nodes) == 0 || s.nodes[len(s.nodes)-1] == nil {
		return
	}
	r.AdmittedPairs, r.ViaQuorum = 0, 0
	for i, a := range s.nodes {
		if a == nil {
			continue
		}
		r.Connections += len(a.Host().Network().Conns())
		st := a.Stats()
		r.GossipPublished += int64(st.GossipPublished)
		r.GossipDelivered += int64(st.GossipDelivered)
		for j, b := range s.nodes {
			if i == j || b == nil {
				continue
			}
			adm := a.Admission(b.ID())
			if adm.Admitted {
				r.AdmittedPairs++
				if adm.Via == peer.AdmittedQuorum {
					r.ViaQuorum++
				}
			} else if len(r.Missing) < maxMissing {
				r.Missing = append(r.Missing, s.describeMissing(i, j, adm))
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
	for _, pi := range a.Peers() {
		if pi.Peer != b.ID() {
			continue
		}
		vouchers = len(pi.Vouchers)
		for _, v := range pi.Vouchers {
			if v.Counts {
				counting++
			}
		}
	}
	return fmt.Sprintf("node %d does not admit node %d: %s; %d vouchers learned, %d count; connected %v",
		i, j, adm.Reason, vouchers, counting, a.Host().Network().Connectedness(b.ID()))
}

func indices(from, to int) []int {
	out := make([]int, 0, max(to-from, 0))
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}
