package abuse

// Performance P3 of issue 10: one verifier, many concurrent honest
// provers from distinct peer IDs.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/acaptcha/acaptcha/internal/swarm"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

// Defaults of ProversConfig.
const (
	DefaultProvers  = 1000
	DefaultBaseline = 20
	DefaultSets     = 64
	DefaultSeed     = 10
	// MaxProvers bounds N (two sockets per prover in one process with an
	// in-process fleet).
	MaxProvers = 5000
	// proverSessionTimeout bounds one session of the concurrent phase.
	proverSessionTimeout = 2 * time.Minute
	dialParallelism      = 32
)

// Fleet starts n provers that answer the sets of challengeSets(seed,
// sets); it returns their addresses and a function that stops them.
type Fleet func(ctx context.Context, n int, seed uint64, sets int) ([]lpeer.AddrInfo, func() error, error)

// ProversConfig configures RunProvers.
type ProversConfig struct {
	// N is the number of concurrent provers (default 1000).
	N int
	// Baseline is the number of sequential sessions against one prover
	// that give the single-prover round latency (default 20).
	Baseline int
	// Sets and Seed fix the procedural challenge sets the verifier serves
	// round robin and the provers know (defaults 64 and 10).
	Sets int
	Seed uint64
	// Fleet starts the provers (default InProcessFleet: in this process,
	// whose RSS and goroutines then include them).
	Fleet Fleet
	// Dir holds the verifier's store (default a temporary directory).
	Dir      string
	Progress func(format string, args ...any)
}

// RoundLatency summarises per-round answer times on the verifier's clock
// (challenge written to answer read).
type RoundLatency struct {
	Rounds int           `json:"rounds"`
	P50    time.Duration `json:"p50_ns"`
	P99    time.Duration `json:"p99_ns"`
	Max    time.Duration `json:"max_ns"`
}

// ProversReport is the outcome of RunProvers.
type ProversReport struct {
	N        int      `json:"provers"`
	Accepted int      `json:"accepted"`
	Failed   int      `json:"failed"`
	Errors   []string `json:"errors,omitempty"`
	// FleetInProcess says the provers ran in this process (RSS and
	// goroutines include them).
	FleetInProcess bool `json:"fleet_in_process"`
	// Baseline: one prover, sequential sessions; Concurrent: N provers at
	// once. AddedP99 = Concurrent.P99 - Baseline.P99.
	Baseline   RoundLatency  `json:"baseline_round"`
	Concurrent RoundLatency  `json:"concurrent_round"`
	AddedP99   time.Duration `json:"added_round_p99_ns"`
	// Session durations of the concurrent phase, and its wall time.
	SessionP50 time.Duration `json:"session_p50_ns"`
	SessionP99 time.Duration `json:"session_p99_ns"`
	Wall       time.Duration `json:"concurrent_wall_ns"`
	// Verifier process resources.
	RSSBefore      uint64 `json:"rss_before_bytes"`
	PeakRSS        uint64 `json:"peak_rss_bytes"`
	MaxRSS         uint64 `json:"max_rss_bytes"`
	GoroutinesIdle int    `json:"goroutines_before"`
	GoroutinesPeak int    `json:"goroutines_peak"`
	GoroutinesLeft int    `json:"goroutines_after"`
	// Leaked is goroutines after the fleet is gone minus before it came.
	Leaked int `json:"goroutines_leaked"`
}

// challengeSets are the sets verifier and provers share.
func challengeSets(seed uint64, n int) ([]*skill.Set, error) {
	g, err := procedural.New(procedural.Config{})
	if err != nil {
		return nil, fmt.Errorf("challenge generator: %w", err)
	}
	sets := make([]*skill.Set, 0, n)
	for i := range n {
		s, err := g.Generate(seed*1_000_003 + uint64(i))
		if err != nil {
			return nil, fmt.Errorf("challenge set %d: %w", i, err)
		}
		sets = append(sets, s)
	}
	return sets, nil
}

// roundRobin serves sets round robin, forever.
type roundRobin struct {
	sets []*skill.Set
	i    atomic.Uint64
}

func (r *roundRobin) Name() string { return "procedural-fixed" }

func (r *roundRobin) Next(ctx context.Context) (*skill.Set, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return r.sets[(r.i.Add(1)-1)%uint64(len(r.sets))], nil
}

// proverHost starts one prover of a fleet on loopback TCP.
func proverHost(oracle *swarm.BenchOracle) (host.Host, *protocol.Service, error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	h, err := libp2p.New(libp2p.Identity(key), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.Transport(tcp.NewTCPTransport),
		libp2p.DisableRelay(), libp2p.DisableMetrics(), libp2p.ResourceManager(&network.NullResourceManager{}))
	if err != nil {
		return nil, nil, fmt.Errorf("prover host: %w", err)
	}
	svc, err := protocol.NewService(h, protocol.Config{Prover: oracle.Prover(swarm.LatencyInstant, 1), Logger: quiet})
	if err != nil {
		h.Close()
		return nil, nil, fmt.Errorf("prover service: %w", err)
	}
	return h, svc, nil
}

// InProcessFleet starts the provers in this process.
func InProcessFleet(ctx context.Context, n int, seed uint64, nsets int) ([]lpeer.AddrInfo, func() error, error) {
	sets, err := challengeSets(seed, nsets)
	if err != nil {
		return nil, nil, err
	}
	oracle := swarm.NewBenchOracle()
	for _, s := range sets {
		oracle.Register(s)
	}
	var (
		mu    sync.Mutex
		hosts []host.Host
		svcs  []*protocol.Service
	)
	stop := func() error {
		mu.Lock()
		defer mu.Unlock()
		var errs []error
		for i := range hosts {
			svcs[i].Close()
			errs = append(errs, hosts[i].Close())
		}
		hosts, svcs = nil, nil
		return errors.Join(errs...)
	}
	addrs := make([]lpeer.AddrInfo, 0, n)
	for range n {
		if err := ctx.Err(); err != nil {
			stop()
			return nil, nil, err
		}
		h, svc, err := proverHost(oracle)
		if err != nil {
			stop()
			return nil, nil, err
		}
		mu.Lock()
		hosts, svcs = append(hosts, h), append(svcs, svc)
		mu.Unlock()
		addrs = append(addrs, lpeer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()})
	}
	return addrs, stop, nil
}

// fleetLine is one line ServeFleet writes per prover.
type fleetLine struct {
	ID    string   `json:"id"`
	Addrs []string `json:"addrs"`
}

// ServeFleet starts n provers in this process, writes one JSON line per
// prover ({"id","addrs"}) and then a line "ready", and keeps them up until
// ctx ends. A parent process reads the lines (ReadFleet).
func ServeFleet(ctx context.Context, n int, seed uint64, sets int, w io.Writer) error {
	if n < 1 || n > MaxProvers {
		return fmt.Errorf("fleet of %d provers: want 1..%d", n, MaxProvers)
	}
	addrs, stop, err := InProcessFleet(ctx, n, seed, sets)
	if err != nil {
		return err
	}
	defer stop()
	enc := json.NewEncoder(w)
	for _, ai := range addrs {
		l := fleetLine{ID: ai.ID.String()}
		for _, a := range ai.Addrs {
			l.Addrs = append(l.Addrs, a.String())
		}
		if err := enc.Encode(l); err != nil {
			return fmt.Errorf("fleet: write address: %w", err)
		}
	}
	if _, err := io.WriteString(w, "ready\n"); err != nil {
		return fmt.Errorf("fleet: write ready: %w", err)
	}
	<-ctx.Done()
	return nil
}

// ReadFleet reads what ServeFleet wrote, up to its "ready" line.
func ReadFleet(r io.Reader, n int) ([]lpeer.AddrInfo, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<16)
	var out []lpeer.AddrInfo
	for sc.Scan() {
		if sc.Text() == "ready" {
			if len(out) != n {
				return nil, fmt.Errorf("fleet: %d provers announced, want %d", len(out), n)
			}
			return out, nil
		}
		if len(out) >= n {
			return nil, fmt.Errorf("fleet: more than %d provers announced", n)
		}
		var l fleetLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("fleet: bad line %q: %w", sc.Text(), err)
		}
		id, err := lpeer.Decode(l.ID)
		if err != nil {
			return nil, fmt.Errorf("fleet: bad peer ID %q: %w", l.ID, err)
		}
		ai := lpeer.AddrInfo{ID: id}
		for _, s := range l.Addrs {
			a, err := ma.NewMultiaddr(s)
			if err != nil {
				return nil, fmt.Errorf("fleet: bad address %q: %w", s, err)
			}
			ai.Addrs = append(ai.Addrs, a)
		}
		out = append(out, ai)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	return nil, errors.New("fleet: ended before it was ready")
}

// RunProvers runs performance P3: a baseline of sequential sessions
// against one prover, then one session against each of N provers, all at
// once.
func RunProvers(ctx context.Context, cfg ProversConfig) (*ProversReport, error) {
	if cfg.N == 0 {
		cfg.N = DefaultProvers
	}
	if cfg.Baseline == 0 {
		cfg.Baseline = DefaultBaseline
	}
	if cfg.Sets == 0 {
		cfg.Sets = DefaultSets
	}
	if cfg.Seed == 0 {
		cfg.Seed = DefaultSeed
	}
	if cfg.Progress == nil {
		cfg.Progress = func(string, ...any) {}
	}
	inProcess := cfg.Fleet == nil
	if inProcess {
		cfg.Fleet = InProcessFleet
	}
	switch {
	case cfg.N < 1 || cfg.N > MaxProvers:
		return nil, fmt.Errorf("provers bench: %d provers: want 1..%d", cfg.N, MaxProvers)
	case cfg.Baseline < 1 || cfg.Baseline > 1000:
		return nil, fmt.Errorf("provers bench: baseline of %d sessions: want 1..1000", cfg.Baseline)
	case cfg.Sets < 1 || cfg.Sets > 10_000:
		return nil, fmt.Errorf("provers bench: %d sets: want 1..10000", cfg.Sets)
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "acaptcha-provers-*")
		if err != nil {
			return nil, fmt.Errorf("provers bench: temporary directory: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	sets, err := challengeSets(cfg.Seed, cfg.Sets)
	if err != nil {
		return nil, fmt.Errorf("provers bench: %w", err)
	}
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	// The verifier: an acaptcha node whose budgets are sized for honest
	// load of N provers (draws) and whose connection manager keeps them.
	v, err := peer.New(peer.Config{
		Key: key, StorePath: filepath.Join(dir, "verifier.db"), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		Source: &roundRobin{sets: sets}, Logger: quiet, AttestPolicy: peer.AttestNone, RequireSource: skill.SourceProcedural,
		ConnLowWater: cfg.N + 16, ConnHighWater: cfg.N + 64,
		Limits: peer.Limits{MaxDrawsPerPeer: cfg.Baseline + 10, MaxDraws: 2 * (cfg.N + cfg.Baseline)},
	})
	if err != nil {
		return nil, fmt.Errorf("provers bench: start verifier: %w", err)
	}
	vClosed := false
	defer func() {
		if !vClosed {
			v.Close()
		}
	}()
	rep := &ProversReport{N: cfg.N, FleetInProcess: inProcess}
	time.Sleep(100 * time.Millisecond)
	rep.GoroutinesIdle = runtime.NumGoroutine()
	cfg.Progress("starting %d provers", cfg.N+1)
	addrs, stopFleet, err := cfg.Fleet(ctx, cfg.N+1, cfg.Seed, cfg.Sets)
	if err != nil {
		return nil, fmt.Errorf("provers bench: fleet: %w", err)
	}
	fleetStopped := false
	defer func() {
		if !fleetStopped {
			stopFleet()
		}
	}()
	cfg.Progress("connecting to %d provers", len(addrs))
	if err := connectAll(ctx, v, addrs); err != nil {
		return nil, err
	}
	runtime.GC()
	rep.RSSBefore = rss()
	// The peak is of the whole run from here: the GC may return memory
	// during the concurrent phase, and a "peak" below the idle figure
	// (62 MiB idle, peak 61 MiB) read as a contradiction.
	rep.PeakRSS = rep.RSSBefore

	// Baseline: one prover, sequential sessions.
	cfg.Progress("baseline: %d sessions against one prover", cfg.Baseline)
	var base []time.Duration
	for range cfg.Baseline {
		sctx, cancel := context.WithTimeout(ctx, proverSessionTimeout)
		res, err := v.Verify(sctx, addrs[0].ID)
		cancel()
		if err != nil || !res.Verdict.Accepted {
			return nil, fmt.Errorf("provers bench: baseline session: %v %v", err, verdictOf(res))
		}
		base = append(base, roundTimes(res)...)
	}
	rep.Baseline = roundLatency(base)

	// Concurrent: one session against each of the other N provers at once.
	cfg.Progress("concurrent: %d sessions at once", cfg.N)
	var (
		mu       sync.Mutex
		rounds   []time.Duration
		sessions []time.Duration
		wg       sync.WaitGroup
	)
	stopSample := sampleInto(&rep.PeakRSS, &rep.GoroutinesPeak)
	start := make(chan struct{})
	for _, ai := range addrs[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			sctx, cancel := context.WithTimeout(ctx, proverSessionTimeout)
			defer cancel()
			t0 := time.Now()
			res, err := v.Verify(sctx, ai.ID)
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || !res.Verdict.Accepted {
				rep.Failed++
				if len(rep.Errors) < 5 {
					rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v %v", ai.ID, err, verdictOf(res)))
				}
				return
			}
			rep.Accepted++
			sessions = append(sessions, d)
			rounds = append(rounds, roundTimes(res)...)
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	rep.Wall = time.Since(t0)
	stopSample()
	rep.Concurrent = roundLatency(rounds)
	rep.AddedP99 = rep.Concurrent.P99 - rep.Baseline.P99
	slices.Sort(sessions)
	rep.SessionP50, rep.SessionP99 = quantile(sessions, 0.5), quantile(sessions, 0.99)
	rep.MaxRSS = maxRSS()

	// Leaks: the fleet goes away, the verifier's goroutines must come back
	// to where they were before it came.
	cfg.Progress("stopping the fleet")
	fleetStopped = true
	if err := stopFleet(); err != nil {
		cfg.Progress("fleet stop: %v", err)
	}
	for _, ai := range addrs {
		_ = v.Host().Network().ClosePeer(ai.ID)
	}
	rep.GoroutinesLeft = settleGoroutines(rep.GoroutinesIdle, 10*time.Second)
	rep.Leaked = max(rep.GoroutinesLeft-rep.GoroutinesIdle, 0)
	vClosed = true
	v.Close()
	return rep, nil
}

func verdictOf(r *protocol.Result) string {
	if r == nil {
		return ""
	}
	return string(r.Verdict.Reason) + " " + r.Verdict.Detail
}

func roundTimes(r *protocol.Result) []time.Duration {
	var d []time.Duration
	for _, rr := range r.Verdict.Rounds {
		if rr.Answered {
			d = append(d, rr.Elapsed)
		}
	}
	return d
}

func roundLatency(d []time.Duration) RoundLatency {
	d = slices.Clone(d)
	slices.Sort(d)
	l := RoundLatency{Rounds: len(d), P50: quantile(d, 0.5), P99: quantile(d, 0.99)}
	if len(d) > 0 {
		l.Max = d[len(d)-1]
	}
	return l
}

// connectAll connects v to every prover, dialParallelism at a time.
func connectAll(ctx context.Context, v *peer.Node, addrs []lpeer.AddrInfo) error {
	work := make(chan lpeer.AddrInfo)
	errs := make(chan error, len(addrs))
	var wg sync.WaitGroup
	for range dialParallelism {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ai := range work {
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				if err := v.Host().Connect(cctx, ai); err != nil {
					errs <- fmt.Errorf("provers bench: connect to %s: %w", ai.ID, err)
				}
				cancel()
			}
		}()
	}
	for _, ai := range addrs {
		work <- ai
	}
	close(work)
	wg.Wait()
	close(errs)
	return errors.Join(slices.Collect(chanSeq(errs))...)
}

func chanSeq[T any](ch <-chan T) func(func(T) bool) {
	return func(yield func(T) bool) {
		for v := range ch {
			if !yield(v) {
				return
			}
		}
	}
}

// sampleInto records peak RSS and goroutines every 50 ms until stopped.
func sampleInto(peakRSS *uint64, peakG *int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			*peakRSS = max(*peakRSS, rss())
			*peakG = max(*peakG, runtime.NumGoroutine())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
