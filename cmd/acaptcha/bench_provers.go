package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/spf13/cobra"

	"github.com/acaptcha/acaptcha/internal/abuse"
)

type proversFlags struct {
	n, baseline, sets int
	seed              uint64
	fleet             string
	check             bool
	// serveFleet runs this process as the fleet of a parent bench.
	serveFleet bool
}

// Acceptance goals of performance P3 (issue 10).
const (
	goalProversRSS      = 256 << 20
	goalProversAddedP99 = 50 * time.Millisecond
)

func (a *app) benchProversCmd() *cobra.Command {
	var f proversFlags
	cmd := &cobra.Command{
		Use:   "provers",
		Short: "One verifier, N concurrent honest provers from distinct peer IDs (performance P3)",
		Long: `Starts one acaptcha node as verifier and N+1 honest provers on loopback TCP,
each with its own peer ID, connects the verifier to all of them, then:

  1. baseline: --baseline sequential sessions against one prover;
  2. concurrent: one session against each of the other N provers, all at once.

It reports whether every prover was served, the per-round answer time on the
verifier's clock (p50/p99) for both phases and the p99 the concurrent load
adds, the verifier's RSS and goroutines, and the goroutines left once the
provers are gone (leaks).

By default (--fleet process) the provers run in a child process (this binary
again), so the RSS and goroutines are the verifier's alone; --fleet inline
runs them in this process (figures then include them). The provers answer
from the procedural sets the verifier serves (shared by seed), instantly: the
bench measures the runtime, not a model. The verifier's draw budgets are
raised to cover N provers (per peer: baseline + 10; in total: 2 x (N +
baseline)); everything else is the node's default.

--check exits 1 unless every prover is served, the added p99 is at most
50 ms, the verifier's peak RSS at most 256 MB (only with --fleet process) and
no goroutine is left behind.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.serveFleet {
				return a.serveFleet(cmd.Context(), f)
			}
			return a.runBenchProvers(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.IntVarP(&f.n, "n", "n", abuse.DefaultProvers, "concurrent provers")
	fl.IntVar(&f.baseline, "baseline", abuse.DefaultBaseline, "sequential sessions against one prover for the baseline")
	fl.IntVar(&f.sets, "sets", abuse.DefaultSets, "distinct challenge sets served round robin")
	fl.Uint64Var(&f.seed, "seed", abuse.DefaultSeed, "seed of the challenge sets")
	fl.StringVar(&f.fleet, "fleet", "process", "where the provers run: process (a child process) or inline (this process)")
	fl.BoolVar(&f.check, "check", false, "exit 1 when a P3 goal is missed")
	fl.BoolVar(&f.serveFleet, "serve-fleet", false, "internal: run as the prover fleet of a parent bench")
	_ = fl.MarkHidden("serve-fleet")
	return cmd
}

// serveFleet is the child side: provers until stdin closes.
func (a *app) serveFleet(ctx context.Context, f proversFlags) error {
	if ctx == nil {
		ctx = context.Background()
	}
	// The parent ends the fleet by closing our stdin, and that alone: a
	// Ctrl-C reaches the whole process group, and the fleet that stopped
	// on it too wrote its own "error: interrupted ..." under the
	// parent's (in text even under --json), as it wrote "error: context
	// canceled" when the parent stopped it during start-up. A parent
	// killed outright closes our stdin all the same.
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	err := abuse.ServeFleet(ctx, f.n, f.seed, f.sets, a.stdout)
	if ctx.Err() != nil {
		return nil // stopped by the parent: the end of the fleet's run
	}
	return err
}

// processFleet runs the provers in a child process of this binary.
func (a *app) processFleet(ctx context.Context, n int, seed uint64, sets int) ([]lpeer.AddrInfo, func() error, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("fleet: find this binary: %w", err)
	}
	args := []string{"bench", "provers", "--serve-fleet", "-n", strconv.Itoa(n),
		"--seed", strconv.FormatUint(seed, 10), "--sets", strconv.Itoa(sets)}
	if a.jsonOut {
		// Its standard error is ours: JSON lines under --json.
		args = append(args, "--json")
	}
	c := exec.Command(exe, args...)
	c.Stderr = a.stderr
	stdin, err := c.StdinPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("fleet: %w", err)
	}
	stdout, err := c.StdoutPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("fleet: %w", err)
	}
	if err := c.Start(); err != nil {
		return nil, nil, fmt.Errorf("fleet: start %s: %w", exe, err)
	}
	done := make(chan error, 1)
	stop := func() error {
		stdin.Close()
		go func() { done <- c.Wait() }()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			_ = c.Process.Kill()
			return fmt.Errorf("fleet: child did not stop; killed: %w", <-done)
		}
	}
	type result struct {
		addrs []lpeer.AddrInfo
		err   error
	}
	ready := make(chan result, 1)
	go func() {
		addrs, err := abuse.ReadFleet(stdout, n)
		ready <- result{addrs, err}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case r := <-ready:
		if r.err != nil {
			return nil, nil, errors.Join(r.err, stop())
		}
		return r.addrs, stop, nil
	case <-ctx.Done():
		return nil, nil, errors.Join(ctx.Err(), stop())
	case <-time.After(10 * time.Minute):
		return nil, nil, errors.Join(errors.New("fleet: not ready within 10 minutes"), stop())
	}
}

func (a *app) runBenchProvers(ctx context.Context, f proversFlags) error {
	switch {
	case f.n < 1 || f.n > abuse.MaxProvers:
		return usageErr("-n %d: want 1..%d", f.n, abuse.MaxProvers)
	case f.baseline < 1 || f.baseline > 1000:
		return usageErr("--baseline %d: want 1..1000", f.baseline)
	case f.sets < 1 || f.sets > 10_000:
		return usageErr("--sets %d: want 1..10000", f.sets)
	case f.fleet != "process" && f.fleet != "inline":
		return usageErr("--fleet %q: want process or inline", f.fleet)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	cfg := abuse.ProversConfig{N: f.n, Baseline: f.baseline, Sets: f.sets, Seed: f.seed}
	if f.fleet == "process" {
		cfg.Fleet = a.processFleet
	}
	if !a.jsonOut {
		start := time.Now()
		cfg.Progress = func(format string, args ...any) {
			fmt.Fprintf(a.stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
		}
	}
	rep, err := abuse.RunProvers(ctx, cfg)
	if err != nil {
		return err
	}
	var missed []string
	if f.check {
		missed = proversGoalsMissed(rep)
	}
	if a.jsonOut {
		out := struct {
			*abuse.ProversReport
			// Checked says --check judged the P3 goals; GoalsMissed
			// names the ones missed (exit 1).
			Checked     bool     `json:"checked"`
			GoalsMissed []string `json:"goals_missed,omitempty"`
		}{rep, f.check, missed}
		if err := writeJSON(a, out); err != nil {
			return err
		}
	} else {
		if err := printProversReport(a.stdout, rep); err != nil {
			return err
		}
		switch {
		case !f.check:
		case len(missed) == 0:
			fmt.Fprintln(a.stdout, "\nP3 goals: all met")
		default:
			fmt.Fprintf(a.stdout, "\nP3 goals MISSED:\n  %s\n", strings.Join(missed, "\n  "))
		}
	}
	if len(missed) > 0 {
		return verdictErr(fmt.Errorf("P3 goals missed: %s", strings.Join(missed, "; ")))
	}
	return nil
}

// proversGoalsMissed judges the P3 goals (--check): every prover served,
// the added round p99, the verifier's RSS (child-process fleet only) and
// no goroutine leaked.
func proversGoalsMissed(rep *abuse.ProversReport) []string {
	var failed []string
	if rep.Failed > 0 || rep.Accepted != rep.N {
		failed = append(failed, fmt.Sprintf("%d of %d provers served", rep.Accepted, rep.N))
	}
	if rep.AddedP99 > goalProversAddedP99 {
		failed = append(failed, fmt.Sprintf("added round p99 %s > %s", ms(rep.AddedP99), ms(goalProversAddedP99)))
	}
	if !rep.FleetInProcess && rep.PeakRSS > goalProversRSS {
		failed = append(failed, fmt.Sprintf("verifier RSS %s > 256 MiB", mib(rep.PeakRSS)))
	}
	if rep.Leaked > 0 {
		failed = append(failed, fmt.Sprintf("%d goroutines leaked", rep.Leaked))
	}
	return failed
}

func printProversReport(w io.Writer, r *abuse.ProversReport) error {
	where := "a child process (figures are the verifier's alone)"
	if r.FleetInProcess {
		where = "this process (figures include them)"
	}
	fmt.Fprintf(w, "\none verifier, %d concurrent provers with distinct peer IDs on loopback TCP; provers in %s\n", r.N, where)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "served\t%d accepted, %d failed\n", r.Accepted, r.Failed)
	for _, e := range r.Errors {
		fmt.Fprintf(tw, "error\t%s\n", e)
	}
	fmt.Fprintf(tw, "round time, one prover\tp50 %s, p99 %s (%d rounds)\n", ms(r.Baseline.P50), ms(r.Baseline.P99), r.Baseline.Rounds)
	fmt.Fprintf(tw, "round time, %d at once\tp50 %s, p99 %s, max %s (%d rounds)\n", r.N, ms(r.Concurrent.P50), ms(r.Concurrent.P99), ms(r.Concurrent.Max), r.Concurrent.Rounds)
	fmt.Fprintf(tw, "added p99 per round\t%s\n", ms(r.AddedP99))
	fmt.Fprintf(tw, "sessions, %d at once\tp50 %s, p99 %s; all done in %s\n", r.N, ms(r.SessionP50), ms(r.SessionP99), ms(r.Wall))
	fmt.Fprintf(tw, "RSS\t%s connected and idle, peak %s (getrusage max %s)\n", mib(r.RSSBefore), mib(r.PeakRSS), mib(r.MaxRSS))
	fmt.Fprintf(tw, "goroutines\t%d before the provers, peak %d, %d after they left (leaked: %d)\n", r.GoroutinesIdle, r.GoroutinesPeak, r.GoroutinesLeft, r.Leaked)
	return tw.Flush()
}
