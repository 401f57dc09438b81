package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/acaptcha/acaptcha/llm"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/generate"
	"github.com/acaptcha/acaptcha/skill/pool"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

// genOptions are the challenge-pool options shared by the commands
// (persistent flags, see rootCmd).
type genOptions struct {
	poolSize    int
	poolWorkers int
	poolWait    time.Duration
	crossCheck  string
	tokenBudget int

	// ctx ends the pool's workers; set by the node command, whose
	// stopPools cancels it once the node has drained (a signal would close
	// the pools under the sessions still drawing).
	ctx       context.Context
	stopPools func() // cancels ctx and waits for the pools' workers
	pools     []*pool.Pool
	// ready is the started node's pool stock (nil: its source is no
	// pool); attest waits for one set before it dials.
	ready func() int
	// stats, when the source is a generation pool, reads its counters
	// (a one-shot attest gives up on repeated failures).
	stats func() pool.Stats
}

// withLLMPoolDefault makes cmd (node, attest, mcp) serve freshly generated
// challenges when an LLM is configured and --challenges is left at auto,
// and ties the pool's workers to the command's context.
func (a *app) withLLMPoolDefault(cmd *cobra.Command) *cobra.Command {
	prev := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		ctx, cancel := context.WithCancel(context.WithoutCancel(c.Context()))
		a.gen.ctx = ctx
		a.gen.stopPools = func() {
			cancel()
			for _, p := range a.gen.pools {
				p.Close() // waits for its workers; a second call does nothing
			}
		}
		if a.llmSpec != "" && a.challenges == "auto" {
			a.challenges = "llm"
		}
		if prev != nil {
			return prev(c, args)
		}
		return nil
	}
	return cmd
}

// newModel builds an LLM client for spec with the global base URL (for
// the same provider as --llm) and no retry of its own: the generator
// retries rate-limited calls itself.
func (a *app) newModel(ctx context.Context, spec string, timeout time.Duration) (*llm.Model, error) {
	cfg := llm.Config{Spec: spec, Timeout: timeout, Logger: a.log}
	if s, err := llm.ParseSpec(spec); err == nil {
		if own, err := llm.ParseSpec(a.llmSpec); err == nil && own.Provider == s.Provider {
			cfg.BaseURL = a.llmBaseURL
		}
	}
	m, err := llm.New(ctx, cfg)
	if err != nil {
		flag := "--llm"
		if spec != a.llmSpec && spec == a.gen.crossCheck {
			flag = "--cross-check-llm"
		}
		return nil, usageErr("%s %s: %v", flag, spec, err)
	}
	return m, nil
}

// generatorConfig builds the LLM generator's configuration from the
// global options.
func (a *app) generatorConfig(ctx context.Context) (generate.Config, error) {
	if a.llmSpec == "" {
		return generate.Config{}, usageErr("%s", errLLMSourceNeedsLLM)
	}
	m, err := a.newModel(ctx, a.llmSpec, 0)
	if err != nil {
		return generate.Config{}, err
	}
	cfg := generate.Config{Model: m, TokenBudgetPerHour: a.gen.tokenBudget, AnswerMaxTokens: a.answerTokens, Logger: a.log}
	if a.gen.crossCheck != "" {
		if cfg.CrossCheckWith, err = a.newModel(ctx, a.gen.crossCheck, 0); err != nil {
			return generate.Config{}, err
		}
	}
	if p, err := a.policy(); err == nil {
		cfg.Policy = &p
	} else {
		return generate.Config{}, err
	}
	return cfg, nil
}

// newGenerator builds the LLM generator from the global options.
func (a *app) newGenerator(ctx context.Context, edit func(*generate.Config)) (*generate.Generator, error) {
	cfg, err := a.generatorConfig(ctx)
	if err != nil {
		return nil, err
	}
	if edit != nil {
		edit(&cfg)
	}
	g, err := generate.New(cfg)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return g, nil
}

// newHybrid builds the hybrid generator (procedural skeletons reworded
// by the LLM) from the global options.
func (a *app) newHybrid(ctx context.Context, edit func(*generate.HybridConfig)) (*generate.Hybrid, error) {
	cfg, err := a.generatorConfig(ctx)
	if err != nil {
		return nil, err
	}
	hc := generate.HybridConfig{Config: cfg}
	if edit != nil {
		edit(&hc)
	}
	h, err := generate.NewHybrid(hc)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return h, nil
}

// llmPool is the "llm" challenge source: a pool of freshly generated,
// validated sets kept in the node's store (ledger, when it is the store;
// in memory otherwise) and refilled in the background.
func (a *app) llmPool(ledger skill.Ledger, maxServes int) (skill.Source, error) {
	ctx := a.poolContext()
	g, err := a.newGenerator(ctx, nil)
	if err != nil {
		return nil, err
	}
	if err := a.checkPoolFeasible("llm", g.Params()); err != nil {
		return nil, err
	}
	return a.newPool(ctx, "llm-pool:"+a.llmSpec, g, ledger, maxServes)
}

// hybridPool is the "hybrid" challenge source: the pool of llmPool, filled
// with procedural sets reworded by the LLM.
func (a *app) hybridPool(ledger skill.Ledger, maxServes int) (skill.Source, error) {
	ctx := a.poolContext()
	h, err := a.newHybrid(ctx, nil)
	if err != nil {
		return nil, err
	}
	if err := a.checkPoolFeasible("hybrid", h.Params()); err != nil {
		return nil, err
	}
	return a.newPool(ctx, "hybrid-pool:"+a.llmSpec, h, ledger, maxServes)
}

// checkPoolFeasible refuses a policy under which a pool of the requested
// narrative lengths could serve nothing: the generator would reject every
// set it paid for (it validates against the policy) and every session
// would end inconclusive once --pool-wait ran out.
func (a *app) checkPoolFeasible(name string, params generate.Params) error {
	p, err := a.policy()
	if err != nil {
		return err
	}
	_, err = a.checkFeasible(p, "challenge source "+name, generatedRange(params), true)
	return err
}

// poolContext is the context that ends a pool's workers.
func (a *app) poolContext() context.Context {
	if a.gen.ctx != nil {
		return a.gen.ctx
	}
	return context.Background()
}

// newPool starts a pool over prod with the global pool options, stopped
// when ctx ends.
func (a *app) newPool(ctx context.Context, name string, prod generate.Producer, ledger skill.Ledger, maxServes int) (skill.Source, error) {
	cfg := pool.Config{
		Size: a.gen.poolSize, Workers: a.gen.poolWorkers, MaxServes: maxServes, Wait: a.gen.poolWait,
		Name: name, Logger: a.log,
	}
	if st, ok := ledger.(pool.Store); ok {
		cfg.Store = st
	}
	p, err := pool.New(cfg, prod)
	if err != nil {
		return nil, usageErr("challenge pool: %v", err)
	}
	context.AfterFunc(ctx, func() { p.Close() })
	a.gen.pools = append(a.gen.pools, p)
	return p, nil
}

// procProducer validates procedural sets offline (structure, leakage,
// script resistance) before they count.
type procProducer struct {
	g *procedural.Generator
	v *generate.Validator
}

func (p procProducer) generate(ctx context.Context) (*skill.Set, *generate.Report, error) {
	s, err := p.g.Next(ctx)
	if err != nil {
		return nil, nil, err
	}
	// Run, not Offline: a validation that ctx cut short is an
	// interrupted attempt, not a rejected set (Offline words it as a
	// cross_check rejection, which generate then counted and printed).
	r, err := p.v.Run(ctx, s, generate.Mode{Full: true})
	if err != nil {
		return nil, nil, err
	}
	return r.Set, r, nil
}

type genFlags struct {
	n, maxAttempts, parallel int
	domain, out, source      string
	questions                int
	minTokens, maxTokens     int
	temperature              float64
	outputTokens             int
	callTimeout              time.Duration
	noCrossCheck, stream     bool
	listDomains              bool
}

func (a *app) generateCmd() *cobra.Command {
	var f genFlags
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Generate and validate fresh challenge sets and write them as JSON files",
		Long: `Generates challenge sets with the configured LLM (--llm), the offline
procedural generator (--source procedural) or both (--source hybrid: procedural
sets reworded by the LLM, questions and answers kept, facts checked), validates
every set (structure, leakage, script attackers and, for LLM and hybrid sets,
cross-checking solvers) and writes the accepted ones to --out as paper-schema
JSON, one file per set. Progress goes to stderr (none with --json), the summary
to stdout (--json for machine output).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.listDomains {
				return a.listDomains(f.source)
			}
			if f.source == "procedural" {
				// The offline generator calls no LLM: `generate --source
				// procedural --llm M` wrote procedural sets and said
				// nothing (a malformed spec included). Only flags typed
				// on the command line are refused, as for challenge
				// inspect (an ACAPTCHA_LLM exported for the node is no
				// request for LLM-written sets).
				for _, name := range []string{"llm", "llm-base-url", "cross-check-llm"} {
					if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
						return usageErr("--%s: --source procedural writes its sets offline and calls no LLM (leave --%s out, or have the LLM reword the sets: --source hybrid)", name, name)
					}
				}
			}
			// The default token budget guards a node's background pool
			// against runaway generation; a batch the user asked for by
			// count is capped only when the flag is given.
			if cmd.Flags().Lookup("pool-token-budget") != nil && !flagGiven(cmd, "pool-token-budget") {
				a.gen.tokenBudget = 0
			}
			return a.runGenerate(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.IntVarP(&f.n, "n", "n", 1, "number of accepted sets to write")
	fl.StringVar(&f.domain, "domain", "", "domain of every set (default: a random domain per set; see --list-domains)")
	fl.StringVar(&f.out, "out", ".", "directory the sets are written to")
	fl.StringVar(&f.source, "source", "llm", "generator: llm (needs --llm), procedural (offline) or hybrid (procedural sets reworded by --llm)")
	fl.IntVar(&f.maxAttempts, "max-attempts", 0, "give up after this many attempts (default 5 x --n)")
	fl.IntVar(&f.parallel, "parallel", 1, "attempts running at once")
	fl.IntVar(&f.questions, "questions", generate.DefaultQuestionsPerPart, fmt.Sprintf("questions per part (at most %d; %d with --source procedural or hybrid)", skill.MaxQuestions, procedural.MaxQuestionsPerPart))
	fl.IntVar(&f.minTokens, "min-tokens", generate.DefaultMinTokens, fmt.Sprintf("minimum narrative length per part, in tokens (%d to %d; at least %d with --source procedural or hybrid)", generate.MinPartTokens, generate.MaxPartTokens, procedural.MinPartTokens))
	fl.IntVar(&f.maxTokens, "max-tokens", generate.DefaultMaxTokens, fmt.Sprintf("maximum narrative length per part, in tokens (--min-tokens to %d; at least %d with --source procedural or hybrid)", generate.MaxPartTokens, procedural.MinMaxTokens))
	fl.Float64Var(&f.temperature, "temperature", generate.DefaultTemperature, fmt.Sprintf("base sampling temperature of the generator (jittered by up to 0.1 per request; --source hybrid rewords at %.1f unless set)", generate.DefaultHybridTemperature))
	fl.IntVar(&f.outputTokens, "output-tokens", generate.DefaultInitialMaxTokens, fmt.Sprintf("output-token cap of a generation call, doubled after a truncated reply (lower it for models that accept less; --source hybrid uses %d per part unless set)", generate.DefaultHybridMaxTokens))
	fl.DurationVar(&f.callTimeout, "call-timeout", generate.DefaultCallTimeout, "deadline of each generation call")
	fl.BoolVar(&f.noCrossCheck, "no-cross-check", false, "skip cross-validation by the LLM's solver (not recommended)")
	fl.BoolVar(&f.stream, "stream", false, "receive the generator's reply as a stream")
	fl.BoolVar(&f.listDomains, "list-domains", false, "list the domains of --source and exit")
	return cmd
}

func (a *app) listDomains(source string) error {
	type row struct {
		Name        string `json:"name"`
		Field       string `json:"field,omitempty"`
		Description string `json:"description"`
	}
	var rows []row
	switch source {
	case "llm":
		for _, d := range generate.Domains() {
			rows = append(rows, row{d.Name, d.Field, d.Description})
		}
	case "procedural", "hybrid":
		for _, d := range procedural.Domains() {
			rows = append(rows, row{Name: d.Name, Description: d.Description})
		}
	default:
		return usageErr("--source %q: want llm, procedural or hybrid", source)
	}
	if a.jsonOut {
		return writeJSON(a, rows)
	}
	for _, r := range rows {
		fmt.Fprintf(a.stdout, "%-26s %s\n", r.Name, r.Description)
	}
	return nil
}

// genSummary is the JSON summary of a generate run.
type genSummary struct {
	Source    string         `json:"source"`
	Model     string         `json:"model,omitempty"`
	Requested int            `json:"requested"`
	Accepted  int            `json:"accepted"`
	Attempts  int            `json:"attempts"`
	Elapsed   time.Duration  `json:"elapsed_ns"`
	Files     []string       `json:"files"`
	Stats     generate.Stats `json:"stats"`
	PerSet    *perSetTokens  `json:"tokens_per_accepted_set,omitempty"`
	Error     string         `json:"error,omitempty"`
}

type perSetTokens struct {
	Input  float64 `json:"input"`
	Output float64 `json:"output"`
}

// checkGenShape checks --questions, --min-tokens and --max-tokens against
// what --source can write, naming the flags: the generators' own errors
// named their configuration fields ("MaxTokens 5000 outside [max(MinTokens
// 350, 450), 4000]") under layers of prefixes ("hybrid: skeletons:
// procedural: invalid configuration"). procedural and hybrid (procedural
// skeletons) share the offline generator's bounds; llm has the prompt's.
func checkGenShape(f genFlags) error {
	maxQ, minMin, minMax, maxTok := skill.MaxQuestions, generate.MinPartTokens, 0, generate.MaxPartTokens
	switch f.source {
	case "procedural", "hybrid":
		maxQ, minMin, minMax, maxTok = procedural.MaxQuestionsPerPart, procedural.MinPartTokens, procedural.MinMaxTokens, procedural.MaxPartTokens
	case "llm":
	default:
		return nil // the unknown source is refused below
	}
	switch {
	case f.questions > maxQ:
		return usageErr("--questions %d: --source %s writes 1 to %d questions per part", f.questions, f.source, maxQ)
	case f.minTokens < minMin || f.minTokens > maxTok:
		return usageErr("--min-tokens %d: --source %s writes parts of %d to %d tokens", f.minTokens, f.source, minMin, maxTok)
	case f.maxTokens < max(f.minTokens, minMax) || f.maxTokens > maxTok:
		if f.maxTokens < f.minTokens {
			return usageErr("--max-tokens %d is below --min-tokens %d", f.maxTokens, f.minTokens)
		}
		return usageErr("--max-tokens %d: --source %s wants %d to %d", f.maxTokens, f.source, max(f.minTokens, minMax), maxTok)
	}
	return nil
}

func (a *app) runGenerate(ctx context.Context, f genFlags) error {
	switch {
	case f.n < 1:
		return usageErr("--n must be at least 1")
	case f.parallel < 1 || f.parallel > 64:
		return usageErr("--parallel %d, want 1..64", f.parallel)
	case !(f.temperature > 0 && f.temperature <= 2):
		// The generator reads 0 or less as its default and providers
		// take at most 2: say so rather than sample at another value.
		return usageErr("--temperature %g: want above 0 up to 2 (0 or less would mean the default %.1f)", f.temperature, generate.DefaultTemperature)
	case f.outputTokens < 1:
		return usageErr("--output-tokens %d: want at least 1", f.outputTokens)
	case f.callTimeout <= 0:
		return usageErr("--call-timeout %s: want a positive duration", f.callTimeout)
	case f.questions < 1:
		// The generators read 0 as their defaults: refuse it rather
		// than write sets of another shape than asked.
		return usageErr("--questions %d: want at least 1 per part (0 would mean the default %d)", f.questions, generate.DefaultQuestionsPerPart)
	case f.minTokens < 1:
		return usageErr("--min-tokens %d: want a positive length (0 would mean the default %d)", f.minTokens, generate.DefaultMinTokens)
	case f.maxTokens < 1:
		return usageErr("--max-tokens %d: want a positive length (0 would mean the default %d)", f.maxTokens, generate.DefaultMaxTokens)
	}
	if err := checkGenShape(f); err != nil {
		return err
	}
	if f.maxAttempts == 0 {
		f.maxAttempts = 5 * f.n
	}
	if f.maxAttempts < f.n {
		return usageErr("--max-attempts %d is below --n %d", f.maxAttempts, f.n)
	}
	// Made and probed before a set is generated (an LLM's tokens spent
	// on sets that cannot be saved): a directory that cannot be written
	// is a runtime failure (exit 1), as for eval.
	if strings.TrimSpace(f.out) == "" {
		return checkOutDir(f.out) // the usage error
	}
	if err := checkOutDir(f.out); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	params := generate.Params{QuestionsPerPart: f.questions, MinTokens: f.minTokens, MaxTokens: f.maxTokens}

	// attempt makes one attempt; it returns the accepted set (or nil), the
	// outcome for accounting, and an error that ends the run.
	var attempt func(ctx context.Context) (*skill.Set, *generate.Outcome, error)
	var stats func() generate.Stats
	sum := &genSummary{Source: f.source, Requested: f.n, Files: []string{}}
	switch f.source {
	case "llm":
		var domains []string
		if f.domain != "" {
			if _, err := generate.LookupDomain(f.domain); err != nil {
				return usageErr("--domain: %v", err)
			}
			domains = []string{f.domain}
		}
		g, err := a.newGenerator(ctx, func(c *generate.Config) {
			c.Domains, c.Params, c.Temperature = domains, params, f.temperature
			c.CallTimeout, c.SkipCrossCheck, c.Stream = f.callTimeout, f.noCrossCheck, f.stream
			c.MaxTokens = f.outputTokens
		})
		if err != nil {
			return err
		}
		sum.Model = a.llmSpec
		stats = g.Stats
		attempt = func(ctx context.Context) (*skill.Set, *generate.Outcome, error) {
			o, err := g.Generate(ctx, "")
			if err != nil {
				return nil, nil, err
			}
			return o.Set, o, nil
		}
	case "procedural":
		pcfg := procedural.Config{QuestionsPerPart: f.questions, MinTokens: f.minTokens, MaxTokens: f.maxTokens}
		if f.domain != "" {
			pcfg.Domains = []string{f.domain}
		}
		pg, err := procedural.New(pcfg)
		if err != nil {
			return usageErr("procedural generator: %v", err)
		}
		pol, err := a.policy()
		if err != nil {
			return err
		}
		v, err := generate.NewValidator(generate.ValidatorConfig{Params: params, Policy: &pol, Logger: a.log})
		if err != nil {
			return usageErr("%v", err)
		}
		pp := procProducer{g: pg, v: v}
		var box generate.Recorder
		stats = box.Stats
		attempt = func(ctx context.Context) (*skill.Set, *generate.Outcome, error) {
			start := time.Now()
			s, r, err := pp.generate(ctx)
			if err != nil {
				return nil, nil, err
			}
			o := &generate.Outcome{Set: s, Reason: r.Reason, Detail: r.Detail, Drops: r.Drops, Report: r, Elapsed: time.Since(start)}
			box.Record(o)
			return s, o, nil
		}
	case "hybrid":
		h, err := a.newHybrid(ctx, func(c *generate.HybridConfig) {
			if f.domain != "" {
				c.Domains = []string{f.domain}
			}
			c.Params, c.CallTimeout, c.SkipCrossCheck, c.Stream = params, f.callTimeout, f.noCrossCheck, f.stream
			// Rewording has its own defaults; a value set by flag or
			// environment replaces them.
			if f.temperature != generate.DefaultTemperature {
				c.Temperature = f.temperature
			}
			if f.outputTokens != generate.DefaultInitialMaxTokens {
				c.MaxTokens = f.outputTokens
			}
		})
		if err != nil {
			return err
		}
		sum.Model = a.llmSpec
		stats = h.Stats
		attempt = func(ctx context.Context) (*skill.Set, *generate.Outcome, error) {
			o, err := h.Generate(ctx)
			if err != nil {
				return nil, nil, err
			}
			return o.Set, o, nil
		}
	default:
		return usageErr("--source %q: want llm, procedural or hybrid", f.source)
	}
	// Every set is validated against the timing policy: a policy that
	// refuses every narrative length asked for would reject every attempt.
	if pol, err := a.policy(); err != nil {
		return err
	} else if _, err := a.checkFeasible(pol, "generate --source "+f.source, tokenRange{lo: f.minTokens, hi: max(f.maxTokens, f.minTokens)}, true); err != nil {
		return err
	}

	start := time.Now()
	// With --json standard error carries JSON only (logs, the error
	// object), as eval's progress does: no progress lines.
	progOut := a.stderr
	if a.jsonOut {
		progOut = io.Discard
	}
	prog := newProgress(progOut, f.n)
	var (
		mu       sync.Mutex
		attempts int
		runErr   error
		wg       sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// next claims an attempt while sets and attempts remain.
	next := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if runErr != nil || len(sum.Files) >= f.n || attempts >= f.maxAttempts || ctx.Err() != nil {
			return false
		}
		attempts++
		return true
	}
	for range f.parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next() {
				s, _, err := attempt(ctx)
				mu.Lock()
				if err != nil {
					if runErr == nil && ctx.Err() == nil {
						runErr = err
					}
					attempts--
					mu.Unlock()
					cancel()
					return
				}
				if s != nil && len(sum.Files) < f.n {
					path, werr := writeSet(f.out, s)
					if werr != nil {
						runErr = werr
						mu.Unlock()
						cancel()
						return
					}
					sum.Files = append(sum.Files, path)
				}
				prog.update(len(sum.Files), stats(), time.Since(start))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	prog.done()

	sum.Accepted, sum.Attempts, sum.Elapsed, sum.Stats = len(sum.Files), attempts, time.Since(start), stats()
	if in, out := sum.Stats.PerAccepted(); sum.Stats.Accepted > 0 && f.source != "procedural" {
		sum.PerSet = &perSetTokens{Input: in, Output: out}
	}
	err := runErr
	if err == nil && sum.Accepted < f.n {
		err = fmt.Errorf("only %d of %d sets accepted after %d attempts", sum.Accepted, f.n, attempts)
	}
	if err != nil {
		sum.Error = err.Error()
	}
	if a.jsonOut {
		if werr := writeJSON(a, sum); werr != nil {
			return werr
		}
	} else {
		printSummary(a.stdout, sum, f.out)
	}
	if err != nil {
		return verdictErr(err)
	}
	return nil
}

// writeSet writes s to dir as indented paper-schema JSON named after its
// domain and id.
func writeSet(dir string, s *skill.Set) (string, error) {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode set: %w", err)
	}
	id := s.ID
	if len(id) > 12 {
		id = id[:12]
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%s.json", s.Domain, id))
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("write set: %w", err)
	}
	return path, nil
}

func printSummary(w io.Writer, s *genSummary, dir string) {
	what := s.Source
	if s.Model != "" {
		what += " (" + s.Model + ")"
	}
	fmt.Fprintf(w, "generated %d of %d sets with %s in %s, %d attempts\n", s.Accepted, s.Requested, what, s.Elapsed.Round(time.Second), s.Attempts)
	if len(s.Files) > 0 {
		fmt.Fprintf(w, "  written to %s:\n", dir)
		for _, f := range s.Files {
			fmt.Fprintf(w, "    %s\n", filepath.Base(f))
		}
	}
	fmt.Fprintf(w, "  rejected: %s\n", countList(reasonCounts(s.Stats.Rejected)))
	if s.Stats.LastLLMError != "" {
		fmt.Fprintf(w, "  last LLM error: %s\n", s.Stats.LastLLMError)
	} else if s.Stats.LastRejection != "" && s.Accepted < s.Requested {
		fmt.Fprintf(w, "  last rejection: %s\n", s.Stats.LastRejection)
	}
	fmt.Fprintf(w, "  questions dropped: %s\n", countList(s.Stats.Dropped))
	if s.Source != "procedural" {
		st := s.Stats
		fmt.Fprintf(w, "  tokens: generation %d in / %d out (%d calls), cross-check %d in / %d out (%d calls)\n",
			st.Generation.InputTokens, st.Generation.OutputTokens, st.GenerationCalls, st.Check.InputTokens, st.Check.OutputTokens, st.CheckCalls)
		if s.PerSet != nil {
			fmt.Fprintf(w, "  per accepted set, rejected attempts included: %.0f in / %.0f out\n", s.PerSet.Input, s.PerSet.Output)
		}
	}
}

func reasonCounts(m map[generate.Reason]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[string(k)] = v
	}
	return out
}

// countList formats counts as "a 2, b 1" (largest first), or "none".
func countList(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// progress reports a generate run on stderr: one rewritten line on a
// terminal, one line per attempt otherwise.
type progress struct {
	w    io.Writer
	tty  bool
	want int
	last int
}

func newProgress(w io.Writer, want int) *progress {
	return &progress{w: w, tty: isTerminal(w), want: want}
}

func (p *progress) update(accepted int, st generate.Stats, elapsed time.Duration) {
	const width = 20
	filled := min(width, accepted*width/max(p.want, 1))
	bar := strings.Repeat("#", filled) + strings.Repeat(".", width-filled)
	line := fmt.Sprintf("[%s] %d/%d accepted, %d rejected (%s), ", bar, accepted, p.want, st.RejectedTotal(), countList(reasonCounts(st.Rejected)))
	if t := st.Total(); t.InputTokens+t.OutputTokens > 0 {
		line += fmt.Sprintf("tokens %d in / %d out, ", t.InputTokens, t.OutputTokens)
	}
	line += elapsed.Round(time.Second).String()
	if p.tty {
		pad := max(0, p.last-len(line))
		fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
		p.last = len(line)
		return
	}
	fmt.Fprintln(p.w, line)
}

func (p *progress) done() {
	if p.tty && p.last > 0 {
		fmt.Fprintln(p.w)
	}
}
