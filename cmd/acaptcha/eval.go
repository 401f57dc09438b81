package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/attack"
	"github.com/acaptcha/acaptcha/skill/eval"
	"github.com/acaptcha/acaptcha/skill/generate"
	"github.com/acaptcha/acaptcha/skill/procedural"
	"github.com/acaptcha/acaptcha/spec"
)

// evalOptions are the flags of acaptcha eval.
type evalOptions struct {
	source        string
	glob          string
	kind          string
	validate      bool
	sessions      int
	agentSessions int
	seed          uint64
	attackSeed    uint64
	out           string
	workers       int
	humanSamples  int
	noPlots       bool
}

const evalValidateHelp = `run every set through the offline validator (structure, leakage, the generic
script attackers and the white-box attackers of --source-kind; no LLM) and
serve only what it keeps: the questions an attacker answers are dropped, a set
left with a part without questions is not served. Default on for corpus:DIR
and examples (a corpus is served as acaptcha generate would have written it:
raw model output has not been filtered yet), off for procedural, llm and
hybrid (a node serves procedural sets as they come, and the llm and hybrid
pools validate their sets already)`

func (a *app) evalCmd() *cobra.Command {
	var o evalOptions
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Measure who passes: script attackers (generic, white-box, candidate list), reference brains, the human timing model and configured LLM agents",
		Long: `Runs N sessions per prover class through the real session state machine
against a challenge source: the generic script attackers, the white-box
attackers written against this code and prompts for the source's kind, the
candidate-list attacker, two reference brains that know the ground truth (the
exact oracle and the agent-style brain, which answers in the forms agents use:
the narrative's descriptive phrase, the bare number of a numbered label, an
article, a unit), the human timing model (paper §6.3 Monte Carlo) and, with
--llm, the configured agent. Reports per-class session pass rates with 95%
Wilson intervals, per-round rates, effective-time medians and p90, a summary
(best generic, best white-box, candidate list, oracle, agent-style), what the
validation filter kept and which attackers it filtered with, the tau
threshold sweep and the feasible tau window, and writes report.json plus two
plots (PNG and SVG) to --out. The filter drops every question its attackers
answer, so on what it kept they fail by construction; the run's random
attacker is therefore seeded apart from the filter's (--attack-seed).

Sources: procedural, examples, corpus:DIR (every *.json of DIR, or only those
matching --glob, e.g. --glob '*-hybrid.json'), llm and hybrid (pools that need
--llm).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("validate") {
				o.validate = evalValidateDefault(o.source)
			}
			return a.runEval(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.source, "source", "procedural", "challenge source: procedural, examples, corpus:DIR, llm or hybrid")
	f.StringVar(&o.glob, "glob", "", "with --source corpus:DIR, load only the files of DIR whose name matches this pattern (e.g. '*-hybrid.json'); every match must be a challenge set")
	f.StringVar(&o.kind, "source-kind", "", "kind of source the sets stand for (procedural, corpus, hybrid or llm): picks the white-box attackers of the eval and the validation filter; default from --source (corpus:DIR and examples are corpus); for a corpus only, a generator source's kind being known")
	f.BoolVar(&o.validate, "validate", false, evalValidateHelp)
	f.IntVar(&o.sessions, "sessions", 1000, "sessions per prover class")
	f.IntVar(&o.agentSessions, "agent-sessions", 20, "sessions per configured LLM agent (they cost real tokens; 0: as many as --sessions, and never more than --sessions)")
	f.Uint64Var(&o.seed, "seed", 1, "seed for sets, question picks, the agent-style brain and the human model: the same seed gives the same run")
	f.Uint64Var(&o.attackSeed, "attack-seed", 0, fmt.Sprintf("seed of the random attacker (0: --seed, or --seed+1 when that is %d, the seed of the validation filter's random attacker, which fails what the filter kept by construction)", attack.DefaultRandomSeed))
	f.StringVar(&o.out, "out", "acaptcha-eval", "directory for report.json and the plots")
	f.IntVar(&o.workers, "workers", 0, fmt.Sprintf("sessions run in parallel (0: GOMAXPROCS; at most %d)", maxEvalWorkers))
	f.IntVar(&o.humanSamples, "human-samples", 50000, "human Monte Carlo samples (50000 bounds a zero completion rate below 1e-4 at 95% confidence)")
	f.BoolVar(&o.noPlots, "no-plots", false, "skip the PNG/SVG plots")
	return cmd
}

// evalValidateDefault is --validate's default for a source (see
// evalValidateHelp): on for static corpora.
func evalValidateDefault(source string) bool {
	s, _, err := lookupChallenges(source)
	return err == nil && s.static
}

// evalKind is the source kind a --source stands for.
func evalKind(source string) (skill.SourceKind, error) {
	s, _, err := lookupChallenges(source)
	if err != nil {
		return skill.SourceUnknown, usageErr("--source: %v", err)
	}
	return s.kind, nil
}

// evalAttackers returns the attacker groups of a run: generic, white-box
// for kind, candidate list.
func evalAttackers(seed uint64, kind skill.SourceKind) (generic, whiteBox, listing []attack.Named) {
	return attack.AllSeeded(seed), attack.WhiteBox(kind), []attack.Named{attack.Listing()}
}

// checkOutDir makes dir and checks that a file can be written in it, so a
// run does not spend its sessions before failing to save them.
func checkOutDir(dir string) error {
	if strings.TrimSpace(dir) == "" {
		// An unset shell variable (--out "$DIR"): mkdir "" failed as a
		// runtime error that named no flag.
		return usageErr("--out is empty: want a directory (leave the flag out for the default)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	f, err := os.CreateTemp(dir, ".acaptcha-eval-probe-*")
	if err != nil {
		return fmt.Errorf("output directory %s is not writable: %w", dir, err)
	}
	name := f.Name()
	cerr := f.Close()
	rerr := os.Remove(name)
	if err := errors.Join(cerr, rerr); err != nil {
		return fmt.Errorf("output directory %s: %w", dir, err)
	}
	return nil
}

func (a *app) runEval(ctx context.Context, o evalOptions) error {
	pol, err := a.policy()
	if err != nil {
		return err
	}
	switch {
	case o.sessions < 1 || o.sessions > eval.MaxSessions:
		return usageErr("--sessions %d: want 1..%d", o.sessions, eval.MaxSessions)
	case o.agentSessions < 0:
		return usageErr("--agent-sessions %d: want 0 (as many as --sessions) or more", o.agentSessions)
	case o.humanSamples < 1 || o.humanSamples > eval.MaxHumanSamples:
		// eval.Config reads 0 as its own default (20,000), not this
		// flag's: refuse it rather than run another sample size.
		return usageErr("--human-samples %d: want 1..%d", o.humanSamples, eval.MaxHumanSamples)
	case o.workers < 0 || o.workers > maxEvalWorkers:
		return usageErr("--workers %d: want 0 (GOMAXPROCS) up to %d", o.workers, maxEvalWorkers)
	}
	kind, err := evalKind(o.source)
	if err != nil {
		return err
	}
	if o.kind != "" {
		k, err := skill.ParseSourceKind(o.kind)
		if err != nil {
			return usageErr("--source-kind: %v", err)
		}
		if kind != skill.SourceCorpus && k != kind {
			// A generator's sets are of its kind: another one swaps the
			// white-box attackers (procedural sets without
			// whitebox-procedural reported every script at 0).
			return usageErr("--source-kind %s: --source %s writes %s sets, so their kind is known; --source-kind names what a corpus (corpus:DIR, examples) stands for", o.kind, o.source, kind)
		}
		kind = k
	}
	if o.glob != "" {
		if !strings.HasPrefix(o.source, "corpus:") {
			return usageErr("--glob needs --source corpus:DIR")
		}
		if _, err := filepath.Match(o.glob, ""); err != nil {
			return usageErr("--glob %q: %v", o.glob, err)
		}
	}
	if err := checkOutDir(o.out); err != nil {
		return err
	}
	var (
		vr   *generate.Validator
		vrec *eval.Validation
	)
	if o.validate {
		vr, err = generate.NewValidator(generate.ValidatorConfig{Policy: &pol, Logger: a.log, WhiteBoxKind: kind})
		if err != nil {
			return usageErr("%v", err)
		}
		why := "explicitly requested (--validate)"
		if evalValidateDefault(o.source) {
			why = "default for corpus sources: sets are served as acaptcha generate would have written them"
		}
		vrec = eval.NewValidation(fmt.Sprintf("offline validator: structure, leakage, generic script attackers, white-box attackers for %s sets", kind), why)
		// The validator runs attack.All(): its random attacker has
		// attack.DefaultRandomSeed.
		vrec.Attackers, vrec.RandomSeed = vr.ScriptAttackers(kind), attack.DefaultRandomSeed
	}
	src, lengths, err := a.evalSource(ctx, o, pol, vr, vrec)
	if err != nil {
		return err
	}
	// What the timing policy makes of the source's narrative lengths
	// (refused at start-up when it serves nothing; warned about, and
	// reported, when it refuses some).
	feas, err := a.checkFeasible(pol, "challenge source "+o.source, lengths, false)
	if err != nil {
		return err
	}
	agents := map[string]skill.Prover{}
	prover, llmName, err := a.prover(ctx)
	if err != nil {
		return err
	}
	if prover != nil {
		agents["agent:"+llmName] = prover
	}
	attackSeed := o.attackSeed
	if attackSeed == 0 {
		attackSeed = eval.HeldOutSeed(o.seed)
	}
	generic, whiteBox, listing := evalAttackers(attackSeed, kind)
	cfg := eval.Config{
		Source: src, Sessions: o.sessions, Policy: pol, Seed: o.seed, SourceKind: kind,
		Agents: agents, AgentSessions: o.agentSessions,
		Attackers: generic, AttackSeed: attackSeed, WhiteBox: whiteBox, Listing: listing,
		HumanSamples: o.humanSamples, Workers: o.workers,
	}
	start := time.Now()
	rep, err := eval.Run(ctx, cfg, a.progressPrinter("sessions"))
	if errors.Is(err, eval.ErrConfig) {
		return usageErr("eval: %v", err)
	}
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	rep.Notes = append(rep.Notes, policyNotes(pol, feas)...)
	if vs, ok := src.(*validatingSource); ok {
		vrec = vs.record()
	}
	rep.Validation = vrec
	files, err := writeEvalOutput(rep, o.out, !o.noPlots)
	if err != nil {
		return err
	}
	if a.jsonOut {
		if err := rep.WriteJSON(a.stdout); err != nil {
			return err
		}
	} else {
		if err := rep.WriteText(a.stdout); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "\nwrote %s (%s)\n", strings.Join(files, ", "), time.Since(start).Round(time.Millisecond))
	}
	return unmeasuredAgents(rep)
}

// unmeasuredAgents fails a run whose configured agent answered no
// session: every one ended on an error (an LLM that cannot be reached,
// a bad key), so its 0 % and the feasible window measure nothing.
func unmeasuredAgents(rep *eval.Report) error {
	var errs []error
	for _, c := range rep.Classes {
		n := 0
		for _, v := range c.Errors {
			n += v
		}
		if c.Kind != eval.KindAgent || c.Sessions == 0 || n < c.Sessions {
			continue
		}
		top, most := "", 0
		for e, v := range c.Errors {
			if v > most || (v == most && e < top) {
				top, most = e, v
			}
		}
		errs = append(errs, fmt.Errorf("%s not measured: all %d of its sessions ended on an error, not a judgement (%s; check --llm)", c.Name, c.Sessions, top))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("eval: %w", errors.Join(errs...))
}

func writeEvalOutput(rep *eval.Report, out string, plots bool) ([]string, error) {
	jsonPath := filepath.Join(out, "report.json")
	f, err := os.Create(jsonPath)
	if err != nil {
		return nil, fmt.Errorf("write report: %w", err)
	}
	if err := rep.WriteJSON(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("write report: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("write report: %w", err)
	}
	files := []string{jsonPath}
	if plots {
		ps, err := eval.WritePlots(rep, out)
		if err != nil {
			return nil, fmt.Errorf("plots: %w", err)
		}
		files = append(files, ps...)
	}
	return files, nil
}

// evalSource builds the source of a run. A corpus is filtered up front
// when vr is set (vrec records it); a generating source is wrapped so each
// set it yields is filtered as it is drawn.
// It returns the range of narrative lengths the source serves.
func (a *app) evalSource(ctx context.Context, o evalOptions, pol skill.Policy, vr *generate.Validator, vrec *eval.Validation) (skill.Source, tokenRange, error) {
	var gen skill.Source
	var lengths tokenRange
	switch {
	case o.source == "procedural":
		s := o.seed
		g, err := procedural.New(procedural.Config{Seed: &s})
		if err != nil {
			return nil, lengths, usageErr("%v", err)
		}
		gen, lengths = g, generatedRangeOf(o.source)
	case o.source == "llm" || o.source == "hybrid":
		saved := a.challenges
		a.challenges = o.source
		// Evaluation reuses sets across classes and sessions.
		g, err := a.source(nil, 1<<30)
		a.challenges = saved
		if err != nil {
			return nil, lengths, err
		}
		gen, lengths = g, generatedRangeOf(o.source)
	}
	if gen != nil {
		if vr == nil {
			return gen, lengths, nil
		}
		return &validatingSource{inner: gen, v: vr, rec: vrec, start: time.Now()}, lengths, nil
	}
	sets, names, name, err := loadEvalCorpus(o.source, o.glob)
	if err != nil {
		return nil, lengths, err
	}
	if vr != nil {
		start := time.Now()
		sets = filterSets(ctx, vr, vrec, sets, names)
		vrec.Seconds = time.Since(start).Seconds()
		if err := ctx.Err(); err != nil {
			return nil, lengths, fmt.Errorf("validation filter: %w", err)
		}
		if len(sets) == 0 {
			return nil, lengths, fmt.Errorf("validation filter: no set of %s kept (%s)", name, countsText(vrec.Rejected))
		}
	}
	for _, s := range sets {
		if _, err := skill.NewSession(s, pol, nil); err != nil {
			return nil, lengths, usageErr("challenge set %s (%s) cannot be served under this policy: %v", s.ID, s.Domain, err)
		}
	}
	c, err := skill.NewCorpus(name, sets, nil, 1<<30)
	if err != nil {
		return nil, lengths, usageErr("%v", err)
	}
	c.Reproducible(o.seed) // the same --seed draws the same sets
	return c, setsRange(sets, pol.Rounds), nil
}

// generatedRangeOf is the narrative range of a generating source.
func generatedRangeOf(name string) tokenRange {
	r, _ := sourceRange(name)
	return r
}

// maxEvalWorkers is the most sessions eval runs at once (eval.Config's
// own cap).
const maxEvalWorkers = 256

// policyNotes relate the report's feasible tau window to the timing
// policy a node applies. The window's upper edge is where the simulated
// humans (comprehension overhead included) start completing rounds; the
// policy refuses, per round, any tau above MaxHumanFraction (25%) of the
// Eq. 6 lower bound of that round's narrative, a deliberate margin below
// the fastest possible reader. A tau inside the window but above the
// policy's cap is not one a node serves.
func policyNotes(p skill.Policy, f feasibility) []string {
	frac := 100 * p.MaxHumanFraction
	if p.DeriveTau {
		return []string{fmt.Sprintf("timing policy: budgets derived per round (alpha %.2g of the Eq. 6 lower bound), always within the %.0f%% cap; the feasible tau window above describes fixed budgets", p.Alpha, frac)}
	}
	notes := []string{fmt.Sprintf("timing policy cap: a node refuses a round whose tau exceeds %.0f%% of the Eq. 6 human lower bound of its narrative; for this source's narratives of %d-%d tokens that is %s (every set served) to %s (no set served above). The feasible window's upper edge is where simulated humans start completing rounds, not what a node accepts: a fixed tau that serves every set is at most %s",
		frac, f.r.lo, f.r.hi, f.serveAll, f.serveNone.Truncate(100*time.Millisecond), f.serveAll)}
	if f.refused > 0 {
		parts, sessions := f.share(p.Rounds)
		notes = append(notes, fmt.Sprintf("tau %s is above the cap for narratives of %d-%d tokens (about %.0f%% of parts): about %.0f%% of sessions are expected to end inconclusive (the inconclusive counts above) because the timing policy refused their set (%v)",
			p.Tau, f.shortest, f.longest, 100*parts, 100*sessions, policyWords(f.err)))
	}
	return notes
}

// loadEvalCorpus loads the sets of an examples or corpus:DIR source, with
// a name per set for the validation record.
func loadEvalCorpus(source, glob string) (sets []*skill.Set, names []string, name string, err error) {
	if source == "examples" {
		sets, err = spec.Examples()
		if err != nil {
			return nil, nil, "", usageErr("%v", err)
		}
		for _, s := range sets {
			names = append(names, s.ID)
		}
		return sets, names, "examples", nil
	}
	dir := strings.TrimPrefix(source, "corpus:")
	name = dir
	pattern := glob
	if pattern == "" {
		pattern = "*.json"
	} else {
		name += "/" + glob
	}
	// A mistyped directory is not an empty one (filepath.Glob finds
	// nothing in either).
	if fi, err := os.Stat(dir); err != nil {
		return nil, nil, "", usageErr("corpus directory: %v", err)
	} else if !fi.IsDir() {
		return nil, nil, "", usageErr("corpus directory %s is not a directory", dir)
	}
	files, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return nil, nil, "", usageErr("--glob %q: %v", glob, err)
	}
	sort.Strings(files)
	for _, f := range files {
		if fi, err := os.Stat(f); err != nil || fi.IsDir() {
			continue
		}
		s, err := skill.LoadFile(f)
		if err != nil {
			return nil, nil, "", usageErr("%v", err)
		}
		sets = append(sets, s)
		names = append(names, filepath.Base(f))
	}
	if len(sets) == 0 {
		return nil, nil, "", usageErr("corpus directory %s holds no challenge sets matching %s", dir, pattern)
	}
	return sets, names, name, nil
}

// filterSets runs the offline validator on every set, in parallel, and
// returns the kept sets in input order.
func filterSets(ctx context.Context, vr *generate.Validator, vrec *eval.Validation, sets []*skill.Set, names []string) []*skill.Set {
	reps := make([]*generate.Report, len(sets))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, s := range sets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			// Run, not Offline: a validation ctx cut short is no verdict
			// on the set (Offline words it as a cross_check rejection).
			if rep, err := vr.Run(ctx, s, generate.Mode{Full: true}); err == nil {
				reps[i] = rep
			}
		}()
	}
	wg.Wait()
	var kept []*skill.Set
	for i, rep := range reps {
		if rep == nil {
			continue // interrupted: the caller reports ctx's error
		}
		if k := recordValidation(vrec, names[i], sets[i], rep); k != nil {
			kept = append(kept, k)
		}
	}
	return kept
}

// recordValidation records one validator report and returns the kept set
// (nil when rejected).
func recordValidation(vrec *eval.Validation, name string, in *skill.Set, rep *generate.Report) *skill.Set {
	var drops []string
	for _, d := range rep.Drops {
		drops = append(drops, d.Key())
	}
	if !rep.Accepted() {
		vrec.Record(name, in, nil, string(rep.Reason), rep.Detail, drops)
		return nil
	}
	kept := rep.Set
	if kept.Provenance == nil && in.Provenance != nil {
		pv := *in.Provenance
		kept.Provenance = &pv
	}
	vrec.Record(name, in, kept, "", "", drops)
	return kept
}

func countsText(m map[string]int) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// maxValidationRejects bounds the sets in a row a validating source may
// reject before it gives up.
const maxValidationRejects = 50

// validatingSource filters the sets of a generating source through the
// offline validator as they are drawn.
type validatingSource struct {
	inner skill.Source
	v     *generate.Validator
	start time.Time

	mu  sync.Mutex
	rec *eval.Validation
}

func (s *validatingSource) Name() string { return s.inner.Name() + " (validated)" }

func (s *validatingSource) Next(ctx context.Context) (*skill.Set, error) {
	for range maxValidationRejects {
		set, err := s.inner.Next(ctx)
		if err != nil {
			return nil, err
		}
		if set == nil {
			return nil, fmt.Errorf("source %s returned no set", s.inner.Name())
		}
		rep, err := s.v.Run(ctx, set, generate.Mode{Full: true})
		if err != nil {
			return nil, fmt.Errorf("validation filter: %w", err)
		}
		name := set.ID
		if name == "" {
			name = set.ContentID()
		}
		s.mu.Lock()
		kept := recordValidation(s.rec, name, set, rep)
		s.mu.Unlock()
		if kept != nil {
			return kept, nil
		}
	}
	return nil, fmt.Errorf("validation filter rejected %d sets of %s in a row", maxValidationRejects, s.inner.Name())
}

func (s *validatingSource) record() *eval.Validation {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec.Seconds = time.Since(s.start).Seconds()
	return s.rec
}

// progressPrinter returns a progress callback: a redrawn bar on a
// terminal, a line per tenth otherwise (logs, CI), nothing with --json.
func (a *app) progressPrinter(unit string) func(eval.Progress) {
	tty := isTerminal(a.stderr)
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
			fmt.Fprintf(a.stderr, "%d/%d %s (%d%%) %s\n", p.Done, p.Total, unit, p.Done*100/p.Total, p.Elapsed.Round(time.Second))
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
