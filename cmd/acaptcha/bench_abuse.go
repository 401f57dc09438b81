package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/acaptcha/acaptcha/internal/abuse"
)

type abuseFlags struct {
	duration, honestEvery, pace time.Duration
	attacks                     []string
	scale                       float64
	check, nodeLog, limitLoop   bool
	connLow, connHigh, payWork  int
}

func (a *app) benchAbuseCmd() *cobra.Command {
	var f abuseFlags
	cmd := &cobra.Command{
		Use:   "abuse",
		Short: "Attack one node on loopback with eleven kinds of abuse while honest peers attest with it",
		Long: `Starts one acaptcha node in this process on loopback (procedural
challenges, the protocol's default budgets, first contact on every peer,
gossip and presentations on) and runs, for --duration, a mix of attacks from
hostile libp2p clients:

  1 reciprocal-flood      one identity loops hellos asking to be verified back
  2 goroutine-flood       the same with a prover that never answers
  3 idle-connections      many identities connect and idle
  4 slot-pinning          hellos with total_ms = 1 h that hold the stream
  5 set-drain             identities that pay, peek at round 1 and reset
  6 perturbed-relay       relays the node's challenge back with one leading space
  7 hostile-verifiers     made-up three-round sessions against the node's answerer
  8 silent-first-contact  identities that never answer the node's hello
  9 sybil-presentation    presentations of acceptances by throw-away issuers
 10 stalled-hellos        valid hellos (one probe, round 1 and its answer, or
                          none) and then silence
 11 payment-drain         provers that decline the node's first contact
                          VERIFY_FIRST (mutual wait) and then ask the most
                          payment it pays, again and again; every third
                          identity a control that asks without declining

Once every attacker identity is up (the ramp-up), the node verifies honest
provers and honest verifiers verify the node until the end, one session
every --honest-every each (a fresh honest identity every 10
sessions, as honest agents re-attest rarely). The provers answer from a
bench-only answer key that stands in for the LLM; the node's answerer counts
its calls.

The report gives the honest session latency, the process's peak RSS and
goroutines (attackers and honest peers run in the same process, so these
bound the node's own), the growth of the node's store file, and per attack
the attacker's attempts, the sessions it paid for, the sets drawn for it, the
records signed about it and the answerer calls it caused against its budget.
The node's connection manager runs with watermarks --conn-low/--conn-high
(64/160: about 170 attacker identities pass the high watermark and stay
below the inbound limit of 200) and a 2 s grace period so that it trims
idle connections within the run. All peers dial from 127.0.0.1, which is
exempt from the per-IP connection limit: the attacker is one with as many
addresses as identities.

--check exits 1 when an acceptance bound fails: honest p99 below 1 s, peak
RSS below 512 MB, goroutines below 5,000, no attacker set spent beyond the
attacker's paid sessions, no answerer call beyond budget, every honest
session accepted, a probe then silence and an answer then silence holding
a slot at most 15 s, the hashes the node paid to the payment-drain provers
within the shares of its payment budget that apply (one prover's, one
/24's with --limit-loopback, all unadmitted provers'), and no payment to a
prover in none of the paying situations (spec §5b).

--limit-loopback counts the loopback peers in the node's per-prefix
budgets: all of them are then one /24 (127.0.0.0/24), whose share of the
payment budget the check then applies; meant for --attacks payment-drain
alone (the other attacks' identities would fill that network's slots).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runBenchAbuse(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&f.duration, "duration", abuse.DefaultDuration, "how long the attack runs (longer when deploying the attackers takes more than three quarters of it: the honest flows then get a quarter; deployment stops at this duration, with the identities up by then, so a run lasts at most a quarter more; give a few seconds more than the deployment takes, about 4 s on 2 cores, to run every identity)")
	fl.DurationVar(&f.honestEvery, "honest-every", abuse.DefaultHonestEvery, "pause between two sessions of each honest flow")
	fl.DurationVar(&f.pace, "pace", abuse.DefaultPace, "pause between two iterations of an attacker's loop")
	fl.StringSliceVar(&f.attacks, "attacks", nil, "attacks to run, comma-separated (default all: "+strings.Join(abuse.Attacks, ",")+")")
	fl.Float64Var(&f.scale, "scale", 1, "multiplies the attacker identities of every attack")
	fl.BoolVar(&f.check, "check", false, "exit 1 when an acceptance bound fails")
	fl.BoolVar(&f.nodeLog, "node-log", false, "print the node's warnings on stderr")
	fl.BoolVar(&f.limitLoop, "limit-loopback", false, "count loopback peers in the node's per-prefix budgets (all the bench's peers then share 127.0.0.0/24; for --attacks payment-drain)")
	fl.IntVar(&f.payWork, "max-verifier-pay-work", 0, "the node's payment budget, hashes per hour (0: the protocol's default, 2^28; smaller makes its shares bind within a short run)")
	fl.IntVar(&f.connLow, "conn-low", abuse.DefaultConnLow, "the node's connection-manager low watermark")
	fl.IntVar(&f.connHigh, "conn-high", abuse.DefaultConnHigh, "the node's connection-manager high watermark (its inbound limit is set above it)")
	return cmd
}

func (a *app) runBenchAbuse(ctx context.Context, f abuseFlags) error {
	switch {
	case f.duration <= 0 || f.duration > 24*time.Hour:
		return usageErr("--duration %s: want a positive duration up to 24h", f.duration)
	case f.honestEvery < 0 || f.pace < 0:
		return usageErr("--honest-every and --pace must not be negative")
	case !(f.scale > 0 && f.scale <= 16):
		// Written so that NaN fails it too (every comparison with NaN
		// is false).
		return usageErr("--scale %g: want more than 0, at most 16", f.scale)
	case f.payWork < 0:
		return usageErr("--max-verifier-pay-work %d: want 0 (the default) or more", f.payWork)
	case f.connLow < 1 || f.connHigh < f.connLow || f.connHigh > 100_000:
		return usageErr("--conn-low %d / --conn-high %d: want 1 <= low <= high <= 100000", f.connLow, f.connHigh)
	}
	for _, name := range f.attacks {
		if !contains(abuse.Attacks, name) {
			return usageErr("--attacks: unknown attack %q (known: %s)", name, strings.Join(abuse.Attacks, ", "))
		}
	}
	cfg := abuse.Config{Duration: f.duration, HonestEvery: f.honestEvery, Pace: f.pace, Attacks: f.attacks, Scale: f.scale, ConnLow: f.connLow, ConnHigh: f.connHigh, LimitLoopback: f.limitLoop, MaxVerifierPayWork: f.payWork}
	if f.nodeLog {
		cfg.NodeLog = a.stderr
	}
	if !a.jsonOut {
		start := time.Now()
		cfg.Progress = func(format string, args ...any) {
			fmt.Fprintf(a.stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	rep, err := abuse.Run(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench abuse: %w", err)
	}
	// A signal cuts the run short: the figures are partial and the
	// acceptance bounds are not judged (Main exits 130).
	interrupted := ctx.Err() != nil
	if a.jsonOut {
		if err := writeJSON(a, struct {
			*abuse.Report
			Interrupted bool `json:"interrupted,omitempty"`
		}{rep, interrupted}); err != nil {
			return err
		}
	} else if err := printAbuseReport(a.stdout, rep, interrupted); err != nil {
		return err
	}
	if interrupted {
		return fmt.Errorf("bench abuse: %w", context.Cause(ctx))
	}
	if f.check && len(rep.Failed) > 0 {
		return verdictErr(fmt.Errorf("acceptance bounds failed: %s", strings.Join(rep.Failed, "; ")))
	}
	return nil
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// printPayDrain prints what the payment-drain provers made the node pay
// against the budget shares that apply to them.
func printPayDrain(w io.Writer, x abuse.AttackReport) {
	prefix := "n/a (loopback is exempt; --limit-loopback)"
	if x.PayBudgetPrefix > 0 {
		prefix = fmt.Sprintf("%d hashes for the /24 of a share of %d", x.NodePayWork, x.PayBudgetPrefix)
	}
	fmt.Fprintf(w, "     node paid %d hashes (%.1f payments of 22 bits) in %d payments the provers received; %d refused by the budgets\n",
		x.NodePayWork, float64(x.NodePayWork)/(1<<22), x.PaymentsReceived, x.NodePayRefused)
	fmt.Fprintf(w, "     per prover: at most %d of a share of %d; per /24: %s; per IPv6 /32: n/a (IPv4); unadmitted provers: %d of a share of %d\n",
		x.NodePayMaxPeer, x.PayBudgetProver, prefix, x.NodePayWork, x.PayBudgetTotal)
	fmt.Fprintf(w, "     outside the paying situations: %d payments received, %d hashes charged for the controls\n", x.PaidOutside, x.NodePayControls)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func printAbuseReport(w io.Writer, r *abuse.Report, interrupted bool) error {
	if interrupted {
		fmt.Fprintln(w, "\nINTERRUPTED: the run was stopped early; the figures below are partial")
	}
	fmt.Fprintf(w, "\nabuse bench: %d attacks for %s against one node on loopback (procedural challenges, default budgets; connection watermarks %d/%d, inbound limit %d)\n",
		len(r.Attacks), r.Duration.Round(100*time.Millisecond), r.ConnLow, r.ConnHigh, r.InboundLimit)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, l := range []struct {
		name string
		v    abuse.Latency
	}{{fmt.Sprintf("honest sessions (after a %s ramp-up)", r.RampUp.Round(time.Millisecond)), r.Honest}, {"  node verifies prover", r.HonestProver}, {"  verifier verifies node", r.HonestVerifier}} {
		fmt.Fprintf(tw, "%s\t%d accepted, %d failed; p50 %s, p99 %s, max %s\n", l.name, l.v.Count, l.v.Failures, ms(l.v.P50), ms(l.v.P99), ms(l.v.Max))
	}
	fmt.Fprintf(tw, "honest connections\t%d attempts refused (a new honest identity retries up to 10 times)\n", r.HonestConnectRetries)
	fmt.Fprintf(tw, "process peak RSS\t%s (sampled; getrusage max %s) - node, attackers and honest peers together\n", mib(r.PeakRSS), mib(r.MaxRSS))
	fmt.Fprintf(tw, "process peak goroutines\t%d (%d after everything closed)\n", r.PeakGoroutines, r.GoroutinesLeft)
	fmt.Fprintf(tw, "node store file\t%d -> %d bytes (+%d; bbolt grows its file in steps, so a short run's records may fit the room it has)\n", r.StoreBefore, r.StoreAfter, r.StoreAfter-r.StoreBefore)
	fmt.Fprintf(tw, "node sets drawn\t%d; verifier sessions %d\n", r.SetsServed, r.SessionsLogged)
	fmt.Fprintf(tw, "node answerer calls\t%d of a budget of %d over the run\n", r.AnswererCalls, r.AnswererBudget)
	fmt.Fprintf(tw, "node log\t%d records (%d warnings), %d bytes\n", r.LogRecords, r.LogWarnings, r.LogBytes)
	st := r.Stats
	fmt.Fprintf(tw, "node stats\treciprocal asked %d / run %d; first contact leashed %d; presentations limited %d, learned %d, capped %d; peers at end %d\n",
		st.ReciprocalAsked, st.ReciprocalRun, st.ContactLeashed, st.PresentationsLimited, st.LearnedPresentation, st.PresentedCapped, r.NodeConnections)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "#\tattack\tids\tattempts\tpaid\tsets drawn\treturned\tsigned\tLLM calls\tbudget\t")
	for _, x := range r.Attack {
		budget := "-"
		if x.CallBudget >= 0 {
			budget = fmt.Sprint(x.CallBudget)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", x.Finding, x.Name, x.Identities, x.Sessions, x.Paid, x.Drawn, x.Returned, x.Signatures, x.Calls, budget)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, x := range r.Attack {
		if x.Detail == "" {
			// Nothing of its own to say: no dangling colon.
			fmt.Fprintf(w, "  %d %s\n", x.Finding, x.Name)
		} else {
			fmt.Fprintf(w, "  %d %s: %s\n", x.Finding, x.Name, x.Detail)
		}
		if x.Name == abuse.AttackPayDrain {
			printPayDrain(w, x)
		}
	}
	switch {
	case interrupted:
		fmt.Fprintln(w, "\nacceptance bounds: not judged (interrupted)")
	case len(r.Failed) == 0:
		fmt.Fprintln(w, "\nacceptance bounds: all hold")
	default:
		fmt.Fprintf(w, "\nacceptance bounds FAILED:\n  %s\n", strings.Join(r.Failed, "\n  "))
	}
	return nil
}
