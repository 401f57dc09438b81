package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/attack"
	"github.com/acaptcha/acaptcha/skill/eval"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

func (a *app) evalCmd() *cobra.Command {
	var (
		source        string
		sessions      int
		agentSessions int
		seed          uint64
		out           string
		workers       int
		humanSamples  int
		noPlots       bool
	)
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Measure who passes: every script attacker, the human timing model and configured LLM agents",
		Long: `Runs N sessions per prover class through the real session state machine
against a challenge source: every built-in script attacker, the human timing
model (paper §6.3 Monte Carlo) and, with --llm, the configured agent. Reports
per-round and per-session pass rates with 95% confidence intervals,
effective-time medians and p90, the tau threshold sweep and the feasible tau
window, and writes report.json plus two plots (PNG and SVG) to --out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			pol, err := a.policy()
			if err != nil {
				return err
			}
			if sessions < 1 {
				return usageErr("--sessions must be at least 1")
			}
			var src skill.Source
			switch {
			case source == "procedural":
				s := seed
				src, err = procedural.New(procedural.Config{Seed: &s})
				if err != nil {
					return usageErr("%v", err)
				}
			case source == "examples" || strings.HasPrefix(source, "corpus:"):
				saved := a.challenges
				a.challenges = source
				// Evaluation reuses corpus sets across classes and sessions.
				src, err = a.source(nil, 1<<30)
				a.challenges = saved
				if err != nil {
					return err
				}
			case source == "llm":
				saved := a.challenges
				a.challenges = "llm"
				src, err = a.source(nil, 1<<30)
				a.challenges = saved
				if err != nil {
					return err
				}
			default:
				return usageErr("--source %q: want procedural, examples, corpus:DIR or llm", source)
			}
			agents := map[string]skill.Prover{}
			prover, llmName, err := a.prover(ctx)
			if err != nil {
				return err
			}
			if prover != nil {
				agents["agent:"+llmName] = prover
			}
			cfg := eval.Config{
				Source: src, Sessions: sessions, Policy: pol, Seed: seed,
				Agents: agents, AgentSessions: agentSessions, Attackers: attack.AllSeeded(seed),
				HumanSamples: humanSamples, Workers: workers,
			}
			start := time.Now()
			progress := a.progressPrinter("sessions")
			rep, err := eval.Run(ctx, cfg, progress)
			if err != nil {
				return fmt.Errorf("eval: %w", err)
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return fmt.Errorf("output directory: %w", err)
			}
			jsonPath := filepath.Join(out, "report.json")
			f, err := os.Create(jsonPath)
			if err != nil {
				return fmt.Errorf("write report: %w", err)
			}
			if err := rep.WriteJSON(f); err != nil {
				f.Close()
				return fmt.Errorf("write report: %w", err)
			}
			if err := f.Close(); err != nil {
				return fmt.Errorf("write report: %w", err)
			}
			files := []string{jsonPath}
			if !noPlots {
				plots, err := eval.WritePlots(rep, out)
				if err != nil {
					return fmt.Errorf("plots: %w", err)
				}
				files = append(files, plots...)
			}
			if a.jsonOut {
				return rep.WriteJSON(a.stdout)
			}
			if err := rep.WriteText(a.stdout); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "\nwrote %s (%s)\n", strings.Join(files, ", "), time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&source, "source", "procedural", "challenge source: procedural, examples, corpus:DIR or llm")
	f.IntVar(&sessions, "sessions", 1000, "sessions per prover class")
	f.IntVar(&agentSessions, "agent-sessions", 20, "sessions per configured LLM agent (they cost real tokens)")
	f.Uint64Var(&seed, "seed", 1, "seed for sets, question picks and the human model: the same seed gives the same run")
	f.StringVar(&out, "out", "acaptcha-eval", "directory for report.json and the plots")
	f.IntVar(&workers, "workers", 0, "sessions run in parallel (default GOMAXPROCS)")
	f.IntVar(&humanSamples, "human-samples", 50000, "human Monte Carlo samples (50000 bounds a zero completion rate below 1e-4 at 95% confidence)")
	f.BoolVar(&noPlots, "no-plots", false, "skip the PNG/SVG plots")
	return cmd
}

// progressPrinter returns a progress callback: a redrawn bar on a
// terminal, a line per tenth otherwise (logs, CI), nothing with --json.
func (a *app) progressPrinter(unit string) func(eval.Progress) {
	tty := false
	if f, ok := a.stderr.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	var lastDraw time.Time
	lastTenth := -1
	return func(p eval.Progress) {
		if a.jsonOut || p.Total <= 0 {
			return
		}
		done := p.Done >= p.Total
		if tty {
			if time.Since(lastDraw) < 200*time.Millisecond && !done {
				return
			}
			lastDraw = time.Now()
			fmt.Fprintf(a.stderr, "\r%s %d/%d %s  %s", bar(p.Done, p.Total, 30), p.Done, p.Total, unit, p.Elapsed.Round(time.Second))
			if done {
				fmt.Fprintln(a.stderr)
			}
			return
		}
		if tenth := p.Done * 10 / p.Total; tenth != lastTenth {
			lastTenth = tenth
			fmt.Fprintf(a.stderr, "%d/%d %s (%d%%) %s\n", p.Done, p.Total, unit, tenth*10, p.Elapsed.Round(time.Second))
		}
	}
}

func bar(done, total, width int) string {
	if total <= 0 {
		total = 1
	}
	n := min(done*width/total, width)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}
