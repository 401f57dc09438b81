package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/acaptcha/acaptcha/internal/liblog"
	"github.com/acaptcha/acaptcha/internal/swarm"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/skill"
)

func (a *app) benchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmarks of the runtime",
		// Alone it prints its help; an unknown subcommand is a usage
		// error (groupCmd, app.go).
	}
	cmd.AddCommand(a.benchSwarmCmd())
	cmd.AddCommand(a.benchAbuseCmd(), a.benchProversCmd())
	return cmd
}

type swarmFlags struct {
	n, anchors, mesh, lateLinks, anchorConc int
	latency, transport, requireSource       string
	latencyScale                            float64
	timeout                                 time.Duration
}

func (a *app) benchSwarmCmd() *cobra.Command {
	var f swarmFlags
	cmd := &cobra.Command{
		Use:   "swarm",
		Short: "Start N nodes in this process and measure how a swarm bootstraps admission",
		Long: `Starts N acaptcha nodes in this process on loopback and lets first
contact, attestation gossip and the trust quorum (--trust-quorum K) bootstrap
admission among them, until every node admits every other node. Reports the
time to full coverage, the challenge sessions run (against N x (N-1) for
pairwise verification), the gossip messages, CPU time and peak memory.

With a quorum, K anchors verify every node and every node verifies the
anchors (about 2K x N sessions, the fewest a quorum of directly verified
issuers allows); every other admission comes from the quorum. Without one
(--trust-quorum 0) every pair verifies each other; --gossip=false then
leaves attestation gossip off, which pairwise admission does not need (with
it every node validates all N x (N-1) records).

On TCP every connection holds two sockets in this process, so a large
pairwise swarm can exceed the open-file limit (the command says so before it
starts); --transport quic shares one UDP socket per node.

The provers are bench-only oracles: the verifiers' sources register every set
they serve in a shared answer key, and the provers answer from it, instantly
or after a sampled LLM-like delay (--latency realistic). The simulation
measures the protocol and the runtime, not a model; 'acaptcha node' and
'acaptcha demo' never use this oracle. The challenges are procedural, so the
nodes admit on procedural attestations (--require-source procedural) unless
--require-source says otherwise.

When the run ends (full coverage, --timeout or a stall) the nodes close, a
few at a time: what they and go-libp2p log from then on (sessions and
connections the closed nodes broke off) goes to DEBUG, marked
level_at_teardown; warnings during the run are kept.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The bench serves procedural challenges: its nodes require
			// source procedural unless --require-source is given.
			if cmd.Flags().Changed("require-source") {
				f.requireSource = a.requireSource
			}
			return a.runBenchSwarm(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.IntVarP(&f.n, "nodes", "n", 50, "number of nodes")
	fl.IntVar(&f.anchors, "anchors", 0, "anchors that verify every node (default: the trust quorum)")
	fl.IntVar(&f.mesh, "mesh", swarm.DefaultMesh, "gossip-mesh links each member dials to other members")
	fl.IntVar(&f.lateLinks, "late-links", swarm.DefaultLateLinks, "links each member dials after coverage, to check that first contact runs no session")
	fl.IntVar(&f.anchorConc, "anchor-concurrency", swarm.DefaultAnchorConcurrency, "sessions an anchor runs at once")
	fl.StringVar(&f.latency, "latency", string(swarm.LatencyInstant), "prover latency: instant, or realistic (lognormal per round, median 2.5 s, times --latency-scale)")
	fl.StringVar(&f.transport, "transport", string(swarm.TransportTCP), "loopback transport: tcp, or quic")
	fl.Float64Var(&f.latencyScale, "latency-scale", swarm.DefaultLatencyScale, "factor on realistic delays")
	fl.DurationVar(&f.timeout, "timeout", swarm.DefaultTimeout, "give up after this long")
	a.addFlags(fl, groupPolicy, groupTrust, groupGossip)
	// The bench serves procedural challenges and so requires source
	// procedural unless told (RunE): its help says so, not the node's
	// hybrid.
	if rs := fl.Lookup("require-source"); rs != nil {
		rs.DefValue = string(skill.SourceProcedural)
		rs.Usage += "; the bench's challenges are procedural, so it requires procedural unless given"
	}
	return cmd
}

func (a *app) runBenchSwarm(ctx context.Context, f swarmFlags) error {
	lat, err := swarm.ParseLatency(f.latency)
	if err != nil {
		return usageErr("--latency: %v", err)
	}
	tr, err := swarm.ParseTransport(f.transport)
	if err != nil {
		return usageErr("--transport: %v", err)
	}
	pol, err := a.policy()
	if err != nil {
		return err
	}
	switch {
	case f.n < 2 || f.n > swarm.MaxNodes:
		return usageErr("--nodes %d: want 2..%d", f.n, swarm.MaxNodes)
	case a.trustQuorum < 0 || f.anchors < 0:
		return usageErr("--trust-quorum and --anchors must not be negative")
	case f.timeout <= 0:
		return usageErr("--timeout must be positive")
	case f.mesh < 0 || f.lateLinks < 0:
		return usageErr("--mesh and --late-links must not be negative (0: none)")
	case f.anchorConc < 1:
		return usageErr("--anchor-concurrency %d: want at least 1", f.anchorConc)
	case !(f.latencyScale > 0) || math.IsInf(f.latencyScale, 0):
		// The library reads 0 as its default; a flag the user set to 0
		// or below must not quietly mean 0.1.
		return usageErr("--latency-scale %g: want a positive factor", f.latencyScale)
	}
	requireSource := skill.SourceProcedural
	if f.requireSource != "" {
		if requireSource, err = peer.ParseRequireSource(f.requireSource); err != nil {
			return usageErr("--require-source: %v", err)
		}
	}
	cfg := swarm.Config{
		N: f.n, Quorum: a.trustQuorum, Anchors: f.anchors,
		Mesh: nonZero(f.mesh), LateLinks: nonZero(f.lateLinks), AnchorConcurrency: f.anchorConc,
		Latency: lat, LatencyScale: f.latencyScale, Policy: pol, RequireSource: requireSource, NoGossip: !a.gossip, Transport: tr,
		Timeout: f.timeout, Logger: a.log,
	}
	// The nodes' logs and the libraries' (go-libp2p, GossipSub) go to
	// DEBUG once the run has ended and its nodes close one another's
	// connections and sessions; warnings during the run are kept.
	cfg.Teardown = new(liblog.Teardown)
	liblog.Install(cfg.Teardown.Handler(a.log.Handler()))
	if !a.jsonOut {
		start := time.Now()
		cfg.Progress = func(format string, args ...any) {
			fmt.Fprintf(a.stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	rep, err := swarm.Run(ctx, cfg)
	if rep != nil && rep.TimedOut {
		// "context deadline exceeded" alone does not say which limit
		// ran out.
		limit := fmt.Sprintf("gave up after --timeout %s", f.timeout)
		rep.Error = limit + ": " + rep.Error
		if err != nil {
			err = fmt.Errorf("%s: %w", limit, err)
		}
	}
	if err != nil && rep == nil {
		if errors.Is(err, swarm.ErrConfig) {
			return usageErr("%v", err)
		}
		return err
	}
	if a.jsonOut {
		if werr := writeJSON(a, rep); werr != nil {
			return werr
		}
	} else if werr := a.printSwarmReport(rep); werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	if !rep.Converged {
		return verdictErr(fmt.Errorf("the swarm did not reach full admission coverage"))
	}
	return nil
}

// nonZero maps an explicit 0 ("none") to the simulation's "none" (-1).
func nonZero(v int) int {
	if v == 0 {
		return -1
	}
	return v
}

func mib(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func (a *app) printSwarmReport(r *swarm.Report) error {
	mode := "pairwise (no trust quorum)"
	if !r.Gossip {
		mode += ", gossip off"
	}
	if r.Quorum > 0 {
		mode = fmt.Sprintf("trust quorum %d, %d anchors, %d mesh links per member", r.Quorum, r.Anchors, r.Mesh)
	}
	brains := string(r.Latency)
	if r.Latency == swarm.LatencyRealistic {
		brains += fmt.Sprintf(" x%.2g", r.LatencyScale)
	}
	fmt.Fprintf(a.stdout, "\nswarm of %d nodes on loopback %s, %s, %s bench-oracle brains, procedural challenges, require source %s\n", r.N, strings.ToUpper(string(r.Transport)), mode, brains, r.RequireSource)
	tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
	conv := "NO"
	if r.Converged {
		conv = "yes"
	}
	fmt.Fprintf(tw, "full coverage\t%s: %d/%d ordered pairs admitted, %d through the quorum\n", conv, r.AdmittedPairs, r.Pairs, r.ViaQuorum)
	if r.Converged {
		fmt.Fprintf(tw, "time to coverage\t%s from the first connection (start-up %s, whole run %s)\n", r.TimeToCoverage.Round(time.Millisecond), r.StartUp.Round(time.Millisecond), r.Total.Round(time.Millisecond))
	} else {
		fmt.Fprintf(tw, "time\tstart-up %s, whole run %s\n", r.StartUp.Round(time.Millisecond), r.Total.Round(time.Millisecond))
	}
	if r.Quorum > 0 {
		fmt.Fprintf(tw, "challenge sessions\t%d (%.2f per node); pairwise: %d; anchor design: 2K x N - K(K+1) = %d; floor of any design: %d\n", r.Sessions, r.SessionsPerNode, r.PairwiseSessions, r.MinSessions, r.FloorSessions)
		fmt.Fprintf(tw, "node pairs verified\t%d with a session in either direction (a mutual attestation counts once); pairwise: %d\n", r.PairsVerified, r.PairwiseSessions/2)
		fmt.Fprintf(tw, "sessions on late links\t%d (peers already admitted through the quorum)\n", r.LateSessions)
	} else {
		fmt.Fprintf(tw, "challenge sessions\t%d (%.2f per node); pairwise: N x (N-1) = %d\n", r.Sessions, r.SessionsPerNode, r.PairwiseSessions)
	}
	fmt.Fprintf(tw, "gossip messages\t%d published, %d delivered\n", r.GossipPublished, r.GossipDelivered)
	fmt.Fprintf(tw, "connections\t%d\n", r.Connections)
	fmt.Fprintf(tw, "CPU time\t%s user + %s system\n", r.CPUUser.Round(time.Millisecond), r.CPUSys.Round(time.Millisecond))
	fmt.Fprintf(tw, "peak memory\tGo heap %s, Go runtime %s, process max RSS %s\n", mib(r.PeakHeap), mib(r.PeakSys), mib(r.MaxRSS))
	var ps []string
	for _, p := range r.Phases {
		ps = append(ps, fmt.Sprintf("%s %s (%d sessions)", p.Name, p.Took.Round(time.Millisecond), p.Sessions))
	}
	fmt.Fprintf(tw, "phases\t%s\n", strings.Join(ps, "; "))
	if r.UnknownAnswers > 0 {
		fmt.Fprintf(tw, "oracle misses\t%d challenges were not in the answer key\n", r.UnknownAnswers)
	}
	if r.Error != "" {
		fmt.Fprintf(tw, "error\t%s\n", r.Error)
	}
	for _, m := range r.Missing {
		fmt.Fprintf(tw, "missing\t%s\n", m)
	}
	return tw.Flush()
}
