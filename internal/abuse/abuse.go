// Package abuse is the abuse bench of issue 10: it starts one acaptcha
// node in this process on loopback and plays the attacks of the
// issue against it from hostile libp2p clients, while one honest prover
// and one honest verifier keep attesting with it. It reports the honest
// latency, the node's resources, and per attack what the attacker made the
// node spend, and checks the acceptance bounds.
//
// Everything runs in one process: RSS and goroutines are the process's
// (node, attackers and honest peers together), an upper bound on the
// node's own. Challenges are procedural; the honest provers and the node's
// prover answer from a bench-only answer key (internal/swarm.BenchOracle),
// which stands in for the LLM: the node's answerer counts its calls, the
// calls for challenges not in the key being the ones hostile verifiers
// caused.
package abuse

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/swarm"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

// Acceptance bounds of issue 10.
const (
	BoundHonestP99  = time.Second
	BoundRSS        = 512 << 20
	BoundGoroutines = 5000
	// BoundProbeHold: a verifier that probed once owes round 1 within
	// the node's handshake timeout (10 s; protocol.md 1.11.0, §6 step
	// 5), where it held the slot for the idle timeout (45 s).
	BoundProbeHold = 15 * time.Second
	// BoundAnswerHold: a verifier that read an answer owes its next
	// frame within the node's handshake timeout (10 s; protocol.md
	// 1.12.0, §6 step 5), where it held the slot for the idle wait (45 s).
	BoundAnswerHold = 15 * time.Second
)

// Defaults of Config.
const (
	DefaultDuration    = 30 * time.Second
	DefaultHonestEvery = 500 * time.Millisecond
	DefaultPace        = 10 * time.Millisecond
	// honestPerIdentity is how many sessions one honest identity runs
	// before the bench replaces it: an honest agent attests with a node a
	// few times an hour, well inside the per-peer budgets (20 draws, 40
	// prover sessions per hour), so the honest side is played by a stream
	// of honest agents rather than by one peer re-attesting every half
	// second.
	honestPerIdentity = 10
	// Connection limits of the bench node by default: the attackers'
	// identities (about 170 at scale 1) pass the high watermark, as the
	// 260 idle connections of the issue passed the 252 inbound slots,
	// and stay below the inbound limit (InboundConnLimit: 200); the
	// grace period is short enough for the connection manager to trim
	// within the run.
	DefaultConnLow  = 64
	DefaultConnHigh = 160
	benchConnGrace  = 2 * time.Second
)

// Attack names, in the order of the findings.
const (
	AttackReciprocalFlood = "reciprocal-flood"
	AttackGoroutineFlood  = "goroutine-flood"
	AttackIdleConns       = "idle-connections"
	AttackSlotPinning     = "slot-pinning"
	AttackSetDrain        = "set-drain"
	AttackRelay           = "perturbed-relay"
	AttackProverCost      = "hostile-verifiers"
	AttackSilentContact   = "silent-first-contact"
	AttackPresentation    = "sybil-presentation"
	AttackStall           = "stalled-hellos"
	AttackPayDrain        = "payment-drain"
)

// Attacks lists every attack, finding 1 to 11.
var Attacks = []string{AttackReciprocalFlood, AttackGoroutineFlood, AttackIdleConns, AttackSlotPinning,
	AttackSetDrain, AttackRelay, AttackProverCost, AttackSilentContact, AttackPresentation, AttackStall, AttackPayDrain}

// Identities per attack by default (the figures scaled to one
// process on a small machine; Config.Scale multiplies them).
var defaultIdentities = map[string]int{
	AttackReciprocalFlood: 1, AttackGoroutineFlood: 4, AttackIdleConns: 112, AttackSlotPinning: 16,
	AttackSetDrain: 8, AttackRelay: 2, AttackProverCost: 8, AttackSilentContact: 16, AttackPresentation: 4,
	AttackStall: 8, AttackPayDrain: 6,
}

// Config configures a bench run.
type Config struct {
	// Duration of the attack (default 30 s).
	Duration time.Duration
	// HonestEvery is the pause between two sessions of each honest flow
	// (default 500 ms).
	HonestEvery time.Duration
	// Pace is the pause between two iterations of an attacker's loop
	// (default 10 ms).
	Pace time.Duration
	// Attacks selects the attacks (default all).
	Attacks []string
	// Scale multiplies the attacker identities (default 1).
	Scale float64
	// ConnLow and ConnHigh are the node's connection-manager watermarks
	// (defaults DefaultConnLow and DefaultConnHigh).
	ConnLow, ConnHigh int
	// LimitLoopback counts the node's loopback peers in its per-prefix
	// budgets (peer.Config.LimitLoopback): every peer of the bench is then
	// in 127.0.0.0/24, one network (meant for payment-drain alone: the
	// other attacks' identities would fill that network's connection
	// slots).
	LimitLoopback bool
	// MaxVerifierPayWork is the node's payment budget per window
	// (peer.Limits.MaxVerifierPayWork; default the protocol's, 2^28
	// hashes an hour): a smaller one makes its shares bind within a
	// short run.
	MaxVerifierPayWork int
	// MaxPaySolves is how many payments the node solves at once
	// (peer.Limits.MaxPaySolves; default half the cores, at least one).
	MaxPaySolves int
	// Dir holds the stores (default a temporary directory, removed).
	Dir string
	// NodeLog, when set, receives the node's warnings.
	NodeLog io.Writer
	// Progress, when set, receives progress lines.
	Progress func(format string, args ...any)

	// deployPause, for tests, is a pause before each attacker identity
	// is deployed: the slow ramp-up of a loaded machine.
	deployPause time.Duration
	// until, for tests, ends the run before Duration once it reports
	// true (polled every 100 ms while the honest flows run): a test
	// waits for the events it asserts, with Duration as its bound.
	until func(b *bench, honest ...*latencies) bool
}

func (c *Config) defaults() error {
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.HonestEvery == 0 {
		c.HonestEvery = DefaultHonestEvery
	}
	if c.Pace == 0 {
		c.Pace = DefaultPace
	}
	if c.Scale == 0 {
		c.Scale = 1
	}
	if c.ConnLow == 0 {
		c.ConnLow = DefaultConnLow
	}
	if c.ConnHigh == 0 {
		c.ConnHigh = max(DefaultConnHigh, c.ConnLow)
	}
	switch {
	case c.Duration < 0 || c.Duration > 24*time.Hour:
		return fmt.Errorf("abuse bench: duration %s: want up to 24h", c.Duration)
	case c.HonestEvery < 0 || c.Pace < 0:
		return errors.New("abuse bench: negative pause")
	case c.Scale < 0 || c.Scale > 16 || math.IsNaN(c.Scale):
		return fmt.Errorf("abuse bench: scale %g: want 0..16", c.Scale)
	case c.MaxVerifierPayWork < 0:
		return errors.New("abuse bench: negative payment budget")
	case c.MaxPaySolves < 0:
		return errors.New("abuse bench: negative count of payments solved at once")
	case c.ConnLow < 0 || c.ConnHigh < c.ConnLow || c.ConnHigh > 100_000:
		return fmt.Errorf("abuse bench: connection watermarks %d/%d: want 0 <= low <= high <= 100000", c.ConnLow, c.ConnHigh)
	}
	if len(c.Attacks) == 0 {
		c.Attacks = Attacks
	}
	for _, a := range c.Attacks {
		if !slices.Contains(Attacks, a) {
			return fmt.Errorf("abuse bench: unknown attack %q (known: %v)", a, Attacks)
		}
	}
	if c.Progress == nil {
		c.Progress = func(string, ...any) {}
	}
	return nil
}

// Latency summarises honest session durations.
type Latency struct {
	Count    int           `json:"count"`
	Failures int           `json:"failures"`
	P50      time.Duration `json:"p50_ns"`
	P99      time.Duration `json:"p99_ns"`
	Max      time.Duration `json:"max_ns"`
	// LastError is the newest failure, if any.
	LastError string `json:"last_error,omitempty"`
}

// AttackReport is what one attack made the node spend.
type AttackReport struct {
	Name       string `json:"name"`
	Finding    int    `json:"finding"`
	Identities int    `json:"identities"`
	// Sessions counts the attacker's attempts (hellos, connections,
	// presentations, sessions it asked for).
	Sessions int64 `json:"sessions"`
	// Paid, Drawn, Returned, Refused: the node's verifier accounting for
	// the attack's identities (protocol.PeerUsage).
	Paid     int `json:"paid_sessions"`
	Drawn    int `json:"sets_drawn"`
	Returned int `json:"sets_returned"`
	Refused  int `json:"draws_refused"`
	// Signatures are the records the node signed about these identities.
	Signatures int `json:"signatures"`
	// Calls are the node's answerer (LLM) calls this attack caused, and
	// CallBudget what the node's budgets allow for it over the run (-1:
	// the attack does not aim at the answerer).
	Calls      int64 `json:"answerer_calls"`
	CallBudget int64 `json:"answerer_call_budget"`
	// ProbeHold is, for stalled-hellos, the longest a stream that sent
	// one probe and then nothing held its slot (bound: BoundProbeHold).
	ProbeHold time.Duration `json:"probe_hold_ns,omitempty"`
	// PayHashes are the hashes the attack's verifiers tried to pay the
	// node's payments (spec/protocol.md §5b), and UnpaidAnswered the
	// rounds the node answered in sessions it asked a payment of and did
	// not get (bound: none).
	PayHashes      int64 `json:"payment_hashes,omitempty"`
	UnpaidAnswered int64 `json:"rounds_answered_unpaid,omitempty"`
	// AnswerHold is, for stalled-hellos, the longest a stream that sent
	// round 1, read its answer and then sent nothing held its slot
	// (bound: BoundAnswerHold).
	AnswerHold time.Duration `json:"answer_hold_ns,omitempty"`
	// Payment drain (finding 11, spec §5b): NodePayWork are the hashes
	// the node's verifier was charged to pay the attack's provers (2^D_v
	// per payment, protocol.PeerUsage.PayWork), NodePayMaxPeer the most
	// for one of them, NodePayRefused the payments its budgets refused
	// them, and NodePayControls the hashes charged for the controls
	// (provers in none of the paying situations; bound: none).
	// PaymentsReceived are the valid payments the provers received, and
	// PaidOutside those received in none of the node's paying situations
	// (bound: none). PayBudgetProver, PayBudgetPrefix and PayBudgetTotal
	// are the shares of the node's payment budget that apply over the
	// run: one prover's, one /24's (0: none applies, loopback being
	// exempt) and all unadmitted provers'.
	NodePayWork      int64 `json:"node_pay_work,omitempty"`
	NodePayMaxPeer   int64 `json:"node_pay_work_max_prover,omitempty"`
	NodePayRefused   int   `json:"node_pay_refused,omitempty"`
	NodePayControls  int64 `json:"node_pay_work_controls,omitempty"`
	PaymentsReceived int64 `json:"payments_received,omitempty"`
	PaidOutside      int64 `json:"payments_outside_situations,omitempty"`
	PayBudgetProver  int64 `json:"pay_budget_prover,omitempty"`
	PayBudgetPrefix  int64 `json:"pay_budget_prefix,omitempty"`
	PayBudgetTotal   int64 `json:"pay_budget_unadmitted,omitempty"`
	// Detail is the attack's own outcome.
	Detail string `json:"detail"`
}

// Report is the outcome of a run.
type Report struct {
	// Duration is how long the run lasted: the configured duration, or
	// RampUp plus a quarter of it when deploying took longer; when
	// deploying was still under way at the configured duration plus a
	// quarter, the run ended then and the honest flows never ran.
	Duration time.Duration `json:"duration_ns"`
	Attacks  []string      `json:"attacks"`
	// ConnLow and ConnHigh are the node's watermarks, InboundLimit its
	// inbound-connection limit.
	ConnLow      int `json:"conn_low"`
	ConnHigh     int `json:"conn_high"`
	InboundLimit int `json:"inbound_conn_limit"`
	// RampUp is how long the attackers took to deploy; the honest flows
	// run from then to the end of Duration.
	RampUp time.Duration `json:"ramp_up_ns"`
	// Honest latencies: the node verifying honest provers, honest
	// verifiers verifying the node, and both together.
	HonestProver   Latency `json:"honest_prover"`
	HonestVerifier Latency `json:"honest_verifier"`
	Honest         Latency `json:"honest"`
	// HonestConnectRetries counts honest connection attempts the node
	// refused (each new honest identity tries up to 10 times).
	HonestConnectRetries int64 `json:"honest_connect_retries"`
	// Process resources (node, attackers and honest peers together).
	PeakRSS        uint64 `json:"peak_rss_bytes"`
	MaxRSS         uint64 `json:"max_rss_bytes"`
	PeakGoroutines int    `json:"peak_goroutines"`
	GoroutinesLeft int    `json:"goroutines_after"`
	// Store growth of the node, in bytes of its bbolt file.
	StoreBefore int64 `json:"store_before_bytes"`
	StoreAfter  int64 `json:"store_after_bytes"`
	// Node-side totals.
	SetsServed      int64      `json:"sets_served"`
	AnswererCalls   int64      `json:"answerer_calls"`
	AnswererBudget  int64      `json:"answerer_call_budget"`
	LogRecords      int64      `json:"log_records"`
	LogWarnings     int64      `json:"log_warnings"`
	LogBytes        int64      `json:"log_bytes"`
	SessionsLogged  int        `json:"verifier_sessions"`
	NodeConnections int        `json:"node_peers_at_end"`
	Stats           peer.Stats `json:"node_stats"`

	Attack []AttackReport `json:"per_attack"`
	// Failed lists the acceptance bounds that failed (empty: all hold).
	Failed []string `json:"failed"`
}

// Check evaluates the acceptance bounds of issue 10 and fills r.Failed.
func (r *Report) Check() []string {
	f := r.CheckCost()
	if r.Honest.P99 >= BoundHonestP99 {
		f = append(f, fmt.Sprintf("honest p99 %s >= %s", r.Honest.P99.Round(time.Millisecond), BoundHonestP99))
	}
	if r.PeakRSS >= BoundRSS {
		f = append(f, fmt.Sprintf("peak RSS %d MiB >= %d MiB", r.PeakRSS>>20, BoundRSS>>20))
	}
	if r.PeakGoroutines >= BoundGoroutines {
		f = append(f, fmt.Sprintf("peak goroutines %d >= %d", r.PeakGoroutines, BoundGoroutines))
	}
	r.Failed = f
	return f
}

// CheckCost evaluates the bounds that do not depend on the machine's
// speed: honest sessions all accepted, no attacker set spent beyond the
// attacker's paid sessions, no answerer call beyond budget.
func (r *Report) CheckCost() []string {
	var f []string
	if r.Honest.Count == 0 {
		if honest := r.Duration - r.RampUp; honest < r.Duration/5 {
			// The attackers' deployment ran into the end of the run
			// (a short --duration, a loaded machine): the honest
			// flows, which start after it, had no time at all.
			f = append(f, fmt.Sprintf("no honest session completed: deploying the attackers took %s of the %s run, leaving the honest flows %s; give a longer --duration",
				r.RampUp.Round(time.Millisecond), r.Duration.Round(time.Millisecond), max(honest, 0).Round(time.Millisecond)))
		} else {
			f = append(f, "no honest session completed")
		}
	}
	if r.Honest.Failures > 0 {
		f = append(f, fmt.Sprintf("%d honest sessions failed (last: %s)", r.Honest.Failures, r.Honest.LastError))
	}
	for _, a := range r.Attack {
		if spent := a.Drawn - a.Returned; spent > a.Paid {
			f = append(f, fmt.Sprintf("%s: %d sets spent for %d paid sessions", a.Name, spent, a.Paid))
		}
		if a.ProbeHold > BoundProbeHold {
			f = append(f, fmt.Sprintf("%s: a probe then silence held a slot %s > %s", a.Name, a.ProbeHold.Round(time.Millisecond), BoundProbeHold))
		}
		if a.AnswerHold > BoundAnswerHold {
			f = append(f, fmt.Sprintf("%s: an answer then silence held a slot %s > %s", a.Name, a.AnswerHold.Round(time.Millisecond), BoundAnswerHold))
		}
		if a.UnpaidAnswered > 0 {
			f = append(f, fmt.Sprintf("%s: %d rounds answered in sessions that did not pay", a.Name, a.UnpaidAnswered))
		}
		f = append(f, checkPayDrain(a)...)
		if a.CallBudget >= 0 && a.Calls > a.CallBudget {
			f = append(f, fmt.Sprintf("%s: %d answerer calls, budget %d", a.Name, a.Calls, a.CallBudget))
		}
	}
	if r.AnswererCalls > r.AnswererBudget {
		f = append(f, fmt.Sprintf("%d answerer calls in total, node budget %d", r.AnswererCalls, r.AnswererBudget))
	}
	return f
}

// bench is one run.
type bench struct {
	cfg    Config
	dir    string
	oracle *swarm.BenchOracle
	node   *peer.Node
	logs   *logCounter
	prover *countingProver

	mu     sync.Mutex
	closer []func()
	// ids holds the peer IDs of each attack, and honestIDs the honest
	// identities.
	ids       map[string][]lpeer.ID
	honestIDs []lpeer.ID
	counters  map[string]*attackCounters
	// connectRetries counts honest connection attempts refused.
	connectRetries atomic.Int64
	// drainSeq numbers the payment-drain identities, and drainControls
	// are those that never enter a paying situation (paydrain.go).
	drainSeq      int
	drainControls []lpeer.ID
}

// Run runs the bench.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	b := &bench{cfg: cfg, oracle: swarm.NewBenchOracle(), logs: newLogCounter(),
		ids: map[string][]lpeer.ID{}, counters: map[string]*attackCounters{}}
	b.dir = cfg.Dir
	if b.dir == "" {
		d, err := os.MkdirTemp("", "acaptcha-abuse-*")
		if err != nil {
			return nil, fmt.Errorf("abuse bench: temporary directory: %w", err)
		}
		defer os.RemoveAll(d)
		b.dir = d
	}
	goroutinesBefore := runtime.NumGoroutine()
	if err := b.startNode(); err != nil {
		return nil, err
	}
	storePath := filepath.Join(b.dir, "node.db")
	rep := &Report{Duration: cfg.Duration, Attacks: cfg.Attacks, StoreBefore: fileSize(storePath),
		ConnLow: cfg.ConnLow, ConnHigh: cfg.ConnHigh, InboundLimit: peer.InboundConnLimit(cfg.ConnHigh)}

	// The run lasts Duration, and its honest flows (which start once the
	// attackers are deployed) at least a quarter of it: on a loaded
	// machine, or under the race detector, deploying 170 identities can
	// take the whole Duration, and a run whose honest flows never started
	// measures nothing. Deployment itself stops at Duration (the
	// identities up by then keep attacking), so the run ends by Duration
	// plus that quarter. (Deployment and run were one deadline, Duration
	// plus a quarter: a ramp-up past it cancelled the run before the
	// honest flows started, and the report had no honest session.)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	deployCtx, stopDeploy := context.WithTimeout(runCtx, cfg.Duration)
	defer stopDeploy()
	stopSample := b.sample(rep)
	cfg.Progress("node %s up; %d attacks for %s", b.node.ID(), len(cfg.Attacks), cfg.Duration)

	var wg, deploying sync.WaitGroup
	started := time.Now()
	for _, name := range cfg.Attacks {
		c := &attackCounters{}
		b.counters[name] = c
		n := max(1, int(math.Round(float64(defaultIdentities[name])*cfg.Scale)))
		wg.Add(1)
		deploying.Add(1)
		go func() {
			defer wg.Done()
			if err := b.attack(runCtx, deployCtx, name, n, c, sync.OnceFunc(deploying.Done)); err != nil && runCtx.Err() == nil {
				c.setErr(err)
				cfg.Progress("attack %s stopped: %v", name, err)
			}
		}()
	}
	// The honest flows start once every attacker identity is up: they
	// measure the node under the full mix, not the attackers' ramp-up
	// (170 identities dialling at once).
	deploying.Wait()
	stopDeploy()
	rep.RampUp = time.Since(started)
	end := time.AfterFunc(honestWindow(cfg.Duration, rep.RampUp), cancel)
	defer end.Stop()
	cfg.Progress("attackers deployed in %s; honest flows start", rep.RampUp.Round(time.Millisecond))
	var hp, hv latencies
	wg.Add(2)
	go func() { defer wg.Done(); b.honestProver(runCtx, &hp) }()
	go func() { defer wg.Done(); b.honestVerifier(runCtx, &hv) }()
	if cfg.until != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sleepCtx(runCtx, 100*time.Millisecond) {
				if cfg.until(b, &hp, &hv) {
					cfg.Progress("the run's goal is reached: ending it")
					cancel()
				}
			}
		}()
	}
	wg.Wait()
	// The budgets below are over the run as it was.
	rep.Duration = time.Since(started)
	cfg.Progress("attack over after %s; collecting figures", rep.Duration.Round(time.Millisecond))

	// Node-side figures, before the node closes.
	rep.HonestProver, rep.HonestVerifier = hp.summary(), hv.summary()
	all := latencies{d: append(append([]time.Duration(nil), hp.d...), hv.d...), failures: hp.failures + hv.failures,
		last: cmpOr(hv.last, hp.last)}
	rep.Honest = all.summary()
	rep.HonestConnectRetries = b.connectRetries.Load()
	rep.SetsServed = b.oracle.Served()
	rep.AnswererCalls = b.prover.calls.Load()
	pc := b.node.ProtocolConfig()
	rep.AnswererBudget = bucketBudget(pc.MaxProverCalls, pc.ProverWindow, rep.Duration)
	rep.Stats = b.node.Stats()
	rep.NodeConnections = len(b.node.Host().Network().Peers())
	for _, name := range cfg.Attacks {
		rep.Attack = append(rep.Attack, b.attackReport(name, pc, rep.Duration))
	}
	stopSample()
	b.closeAll()
	rep.StoreAfter = fileSize(storePath)
	rep.LogRecords, rep.LogWarnings, rep.LogBytes = b.logs.records.Load(), b.logs.warns.Load(), b.logs.bytes.Load()
	rep.SessionsLogged = b.logs.sessionsFinished()
	rep.MaxRSS = maxRSS()
	rep.GoroutinesLeft = settleGoroutines(goroutinesBefore, 5*time.Second)
	rep.Check()
	return rep, nil
}

// honestWindow is how long the honest flows run after a ramp-up: to the
// end of d, and at least a quarter of d.
func honestWindow(d, rampUp time.Duration) time.Duration {
	return max(d-rampUp, d/4)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// bucketBudget is the most a token bucket of capacity c refilled at c per
// window w can give within d: c + c·d/w.
func bucketBudget(c int, w, d time.Duration) int64 {
	if w <= 0 {
		return int64(c)
	}
	return int64(c) + int64(float64(c)*float64(d)/float64(w))
}

func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

// settleGoroutines waits up to d for the goroutine count to come back to
// base and returns the count then.
func settleGoroutines(base int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		n := runtime.NumGoroutine()
		if n <= base || time.Now().After(deadline) {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sample records peak RSS and goroutines every 100 ms until stopped.
func (b *bench) sample(rep *Report) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			rep.PeakRSS = max(rep.PeakRSS, rss())
			rep.PeakGoroutines = max(rep.PeakGoroutines, runtime.NumGoroutine())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (b *bench) onClose(f func()) {
	b.mu.Lock()
	b.closer = append(b.closer, f)
	b.mu.Unlock()
}

// closeAll closes everything started, newest first, the node last.
func (b *bench) closeAll() {
	b.mu.Lock()
	fs := b.closer
	b.closer = nil
	b.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

func newKey() (crypto.PrivKey, error) {
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("abuse bench: key: %w", err)
	}
	return k, nil
}

// countingProver is the node's prover: it answers from the bench answer
// key and counts every answerer call, and the calls for challenges the
// key does not know (those hostile verifiers made up, and apart those of
// stalled-hellos).
type countingProver struct {
	oracle                  *swarm.BenchOracle
	calls, hostile, stalled atomic.Int64
}

func (p *countingProver) NewSession() skill.Answerer {
	return skill.AnswerFunc(func(_ context.Context, c skill.Challenge) (string, error) {
		p.calls.Add(1)
		if a, ok := p.oracle.Lookup(c); ok {
			return a, nil
		}
		if strings.HasPrefix(c.Narrative, stallNarrative) {
			p.stalled.Add(1)
			return "unknown", nil
		}
		p.hostile.Add(1)
		return "unknown", nil
	})
}

// startNode starts the node under attack: the CLI node's behaviour
// (attest every peer on first contact, gossip, presentations) with the
// protocol's default budgets, procedural challenges, and connection
// limits sized for the bench (see benchConnHigh).
func (b *bench) startNode() error {
	key, err := newKey()
	if err != nil {
		return err
	}
	gen, err := procedural.New(procedural.Config{})
	if err != nil {
		return fmt.Errorf("abuse bench: challenge generator: %w", err)
	}
	b.prover = &countingProver{oracle: b.oracle}
	log := slog.New(b.logs.handler(b.cfg.NodeLog, slog.LevelWarn))
	n, err := peer.New(peer.Config{
		Key: key, StorePath: filepath.Join(b.dir, "node.db"), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		// As a public node asks (spec/protocol.md §5b): every verifier
		// that comes to it pays before its answerer reads a challenge.
		Limits: peer.Limits{PayDifficulty: protocol.PublicPowDifficulty, MaxVerifierPayWork: b.cfg.MaxVerifierPayWork, MaxPaySolves: b.cfg.MaxPaySolves},
		Source: b.oracle.Source(gen, nil), Prover: b.prover, Logger: log,
		AttestPolicy: peer.AttestAll, Gossip: true, RequireSource: skill.SourceProcedural, SourceKind: skill.SourceProcedural,
		ConnLowWater: b.cfg.ConnLow, ConnHighWater: b.cfg.ConnHigh, ConnGracePeriod: benchConnGrace,
		LimitLoopback: b.cfg.LimitLoopback,
	})
	if err != nil {
		return fmt.Errorf("abuse bench: start node: %w", err)
	}
	b.node = n
	b.onClose(func() { n.Close() })
	return nil
}

func (b *bench) nodeInfo() lpeer.AddrInfo {
	return lpeer.AddrInfo{ID: b.node.ID(), Addrs: b.node.Host().Addrs()}
}

// addIDs records peer IDs of an attack.
func (b *bench) addIDs(name string, ids ...lpeer.ID) {
	b.mu.Lock()
	b.ids[name] = append(b.ids[name], ids...)
	b.mu.Unlock()
}

func (b *bench) attackReport(name string, pc protocol.Config, d time.Duration) AttackReport {
	c := b.counters[name]
	b.mu.Lock()
	ids := slices.Clone(b.ids[name])
	b.mu.Unlock()
	r := AttackReport{Name: name, Finding: slices.Index(Attacks, name) + 1, Identities: len(ids), Sessions: c.sessions.Load(), CallBudget: -1}
	for _, id := range ids {
		u := b.node.PeerUsage(id)
		r.Paid += u.Paid
		r.Drawn += u.Drawn
		r.Returned += u.Returned
		r.Refused += u.Refused
		r.Signatures += b.logs.signatures(id.String())
	}
	if name == AttackProverCost {
		r.Calls = b.prover.hostile.Load()
		r.CallBudget = int64(len(ids)) * bucketBudget(pc.MaxCallsPerVerifier, pc.ProverWindow, d)
	}
	if name == AttackStall {
		r.Calls = b.prover.stalled.Load()
		r.CallBudget = int64(len(ids)) * bucketBudget(pc.MaxCallsPerVerifier, pc.ProverWindow, d)
	}
	if name == AttackPayDrain {
		b.payDrainReport(&r, ids, pc, d)
	}
	r.PayHashes, r.UnpaidAnswered = c.get(payHashesKey), c.get(unpaidAnsweredKey)
	r.ProbeHold = time.Duration(c.get(probeHoldKey)) * time.Millisecond
	r.AnswerHold = time.Duration(c.get(answerHoldKey)) * time.Millisecond
	r.Detail = c.detail()
	return r
}
