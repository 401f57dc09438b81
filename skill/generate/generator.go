package generate

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/tmc/langchaingo/llms"

	"github.com/acaptcha/acaptcha/llm"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/attack"
)

// Config configures a Generator.
type Config struct {
	// Model writes the sets. Required.
	Model *llm.Model
	// CrossCheckWith is an optional second model (another provider) whose
	// solver must also reproduce every answer.
	CrossCheckWith *llm.Model
	// SkipCrossCheck turns cross-validation off (the generating model's
	// solver is used by default).
	SkipCrossCheck bool
	// Domains restricts generation to these domain names (all built-in
	// domains when empty).
	Domains []string
	// Params are the content parameters.
	Params Params
	// Temperature is the base sampling temperature (DefaultTemperature
	// when 0); each request jitters it by up to ±0.1.
	Temperature float64
	// NoJSONMode stops asking the provider for JSON output (some
	// OpenAI-compatible servers reject response_format).
	NoJSONMode bool
	// Stream receives the reply as a stream (SSE or NDJSON) and aborts a
	// reply larger than MaxOutputBytes.
	Stream bool
	// CallTimeout bounds every generation call (DefaultCallTimeout when
	// 0); the model's own timeout applies too.
	CallTimeout time.Duration
	// CheckTimeout bounds every cross-check call (DefaultCheckTimeout).
	CheckTimeout time.Duration
	// AnswerMaxTokens caps each answer of a cross-check solver (see
	// ValidatorConfig.AnswerMaxTokens).
	AnswerMaxTokens int
	// MaxTokens is the output-token cap of the first call
	// (DefaultInitialMaxTokens); a truncated reply is retried with the
	// cap doubled, up to MaxTokensCap (DefaultMaxTokensCap), at most
	// TruncationRetries times (DefaultTruncationRetries; negative: none).
	MaxTokens         int
	MaxTokensCap      int
	TruncationRetries int
	// RateLimitRetries is how often a call refused with HTTP 429 is
	// retried (DefaultRateLimitRetries; negative: never), waiting
	// RateLimitBackoff (DefaultRateLimitBackoff) doubled each time, capped
	// at llm.MaxBackoff.
	RateLimitRetries int
	RateLimitBackoff time.Duration
	// TokenBudgetPerHour caps the tokens (input plus output, generation
	// and cross-check) spent in any sliding hour; 0 means no cap. The cap
	// is checked before each attempt, so one attempt may overshoot it.
	TokenBudgetPerHour int
	// Attackers are the script attackers (attack.All() when nil).
	Attackers []attack.Named
	// WhiteBox selects the white-box attackers validation runs besides
	// Attackers (see ValidatorConfig.WhiteBox): by default those of the
	// generated set's source, attack.WhiteBox(skill.SourceLLM) for LLM
	// sets and attack.WhiteBox(skill.SourceHybrid) for hybrid ones.
	WhiteBox WhiteBoxMode
	// Policy, when set, rejects sets the verifier could not serve.
	Policy *skill.Policy
	// StrictLeakage: see ValidatorConfig.
	StrictLeakage bool
	// CallOptions are added to every generation call.
	CallOptions []llms.CallOption
	// Logger receives progress logs (slog.Default() when nil).
	Logger *slog.Logger
	// Now is the clock of the token budget (time.Now when nil).
	Now func() time.Time
}

// Defaults of Config.
const (
	DefaultTemperature       = 0.9
	DefaultCallTimeout       = 3 * time.Minute
	DefaultInitialMaxTokens  = 8192
	DefaultMaxTokensCap      = 32768
	DefaultTruncationRetries = 2
	DefaultRateLimitRetries  = 3
	DefaultRateLimitBackoff  = 2 * time.Second
)

// ErrBudget is wrapped by a *BudgetError.
var ErrBudget = errors.New("generation token budget exhausted")

// BudgetError reports that the hourly token budget is spent.
type BudgetError struct {
	// RetryAfter is when enough of the window will have passed for the
	// next attempt.
	RetryAfter time.Duration
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("%v: retry in %s", ErrBudget, e.RetryAfter.Round(time.Second))
}

// Unwrap makes errors.Is(err, ErrBudget) hold.
func (e *BudgetError) Unwrap() error { return ErrBudget }

// BudgetRetryAfter implements pool.BudgetSpent.
func (e *BudgetError) BudgetRetryAfter() time.Duration { return e.RetryAfter }

// Outcome is the record of one generation attempt.
type Outcome struct {
	// Set is the accepted set; nil when the attempt was rejected.
	Set    *skill.Set
	Domain string
	// Reason and Detail say why the attempt was rejected ("" if accepted).
	Reason Reason
	Detail string
	// ProviderWait is how long the provider asked to wait before the next
	// call (its Retry-After) when Reason is RejectRateLimited; else 0.
	ProviderWait time.Duration
	// Drops lists the dropped questions.
	Drops []Drop
	// Report is the validation report (nil when the reply never decoded).
	Report *Report
	// GenerationCalls, Generation: provider calls and tokens of the
	// generation step, retries included.
	GenerationCalls int
	Generation      llm.Usage
	// CheckCalls, Check: the same for cross-validation.
	CheckCalls int
	Check      llm.Usage
	// QuestionsReworded counts the questions a hybrid attempt reworded;
	// QuestionsKept, by QuestionKept* reason, those that kept the
	// skeleton's wording (nil when none did).
	QuestionsReworded int
	QuestionsKept     map[string]int
	Elapsed           time.Duration
}

// Err returns a *RejectError for a rejected attempt, nil otherwise.
func (o *Outcome) Err() error {
	if o.Reason == "" {
		return nil
	}
	return &RejectError{Reason: o.Reason, Detail: o.Detail, Wait: o.ProviderWait}
}

// Generator writes and validates challenge sets with an LLM. It is safe
// for concurrent use.
type Generator struct {
	cfg       Config
	params    Params
	domains   []Domain
	validator *Validator
	log       *slog.Logger
	stats     Recorder
	budget    *tokenBudget

	rmu sync.Mutex
	rng *rand.Rand
}

// New validates cfg and returns a generator.
func New(cfg Config) (*Generator, error) {
	if cfg.Model == nil {
		return nil, errors.New("generate: no model configured")
	}
	p, err := cfg.Params.withDefaults()
	if err != nil {
		return nil, err
	}
	g := &Generator{cfg: cfg, params: p, log: cfg.Logger}
	if g.log == nil {
		g.log = slog.Default()
	}
	c := &g.cfg
	if c.Temperature <= 0 {
		c.Temperature = DefaultTemperature
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.MaxTokens <= 0 {
		c.MaxTokens = DefaultInitialMaxTokens
	}
	if c.MaxTokensCap <= 0 {
		c.MaxTokensCap = max(DefaultMaxTokensCap, c.MaxTokens)
	}
	if c.MaxTokensCap < c.MaxTokens {
		return nil, fmt.Errorf("generate: MaxTokensCap %d below MaxTokens %d", c.MaxTokensCap, c.MaxTokens)
	}
	if c.TruncationRetries == 0 {
		c.TruncationRetries = DefaultTruncationRetries
	}
	if c.RateLimitRetries == 0 {
		c.RateLimitRetries = DefaultRateLimitRetries
	}
	if c.RateLimitBackoff <= 0 {
		c.RateLimitBackoff = DefaultRateLimitBackoff
	}
	if c.TokenBudgetPerHour < 0 {
		return nil, fmt.Errorf("generate: negative token budget %d", c.TokenBudgetPerHour)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if len(c.Domains) == 0 {
		g.domains = Domains()
	}
	for _, name := range c.Domains {
		d, err := LookupDomain(name)
		if err != nil {
			return nil, fmt.Errorf("generate: %w", err)
		}
		g.domains = append(g.domains, d)
	}
	var checks []*llm.Model
	if !c.SkipCrossCheck {
		checks = append(checks, c.Model)
		if c.CrossCheckWith != nil {
			checks = append(checks, c.CrossCheckWith)
		}
	}
	g.validator, err = NewValidator(ValidatorConfig{
		Params: p, Policy: c.Policy, Attackers: c.Attackers, WhiteBox: c.WhiteBox, CrossCheck: checks,
		CallTimeout: c.CheckTimeout, AnswerMaxTokens: c.AnswerMaxTokens, StrictLeakage: c.StrictLeakage, Logger: g.log,
		Retry: llm.RetryPolicy{Attempts: 1 + max(c.RateLimitRetries, 0), Backoff: c.RateLimitBackoff},
	})
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	g.budget = newTokenBudget(c.TokenBudgetPerHour, time.Hour, c.Now)
	var seed [32]byte
	_, _ = crand.Read(seed[:]) // never fails (Go 1.24+)
	g.rng = rand.New(rand.NewChaCha8(seed))
	return g, nil
}

// Name describes the generator ("llm:openai:gpt-4o-mini").
func (g *Generator) Name() string { return "llm:" + g.cfg.Model.Name() }

// Params returns the content parameters with defaults filled in.
func (g *Generator) Params() Params { return g.params }

// Kind implements skill.Provenancer: the sets Produce makes are
// LLM-written (their Provenance says skill.SourceLLM), so a pool.Pool
// over the generator reports that kind.
func (g *Generator) Kind() skill.SourceKind { return skill.SourceLLM }

// modelName is the generating model as provenance records it
// (provider:model), cut to skill.MaxModelBytes.
func (g *Generator) modelName() string {
	n := g.cfg.Model.Name()
	if len(n) > skill.MaxModelBytes {
		n = strings.ToValidUTF8(n[:skill.MaxModelBytes], "")
	}
	return n
}

// Validator returns the generator's validator.
func (g *Generator) Validator() *Validator { return g.validator }

// Stats returns the accounting so far.
func (g *Generator) Stats() Stats { return g.stats.Stats() }

// Accounting implements pool.Accountant: a pool's stats carry the
// generator's.
func (g *Generator) Accounting() any { st := g.Stats(); return &st }

// Accounting implements pool.Accountant.
func (h *Hybrid) Accounting() any { st := h.Stats(); return &st }

// Produce generates one set in a random configured domain: the set, or
// an error wrapping ErrRejected (a *RejectError), ErrBudget (a
// *BudgetError) or the context's error.
func (g *Generator) Produce(ctx context.Context) (*skill.Set, error) {
	o, err := g.Generate(ctx, "")
	if err != nil {
		return nil, err
	}
	if err := o.Err(); err != nil {
		return nil, err
	}
	return o.Set, nil
}

func (g *Generator) variation() (Variation, Domain) {
	g.rmu.Lock()
	defer g.rmu.Unlock()
	return NewVariation(g.rng, g.cfg.Temperature), g.domains[g.rng.IntN(len(g.domains))]
}

// Generate makes one attempt at a set in domain (a random configured
// domain when empty). A rejected attempt is an Outcome with a Reason and
// a nil error; the error is non-nil only when the token budget is spent
// (*BudgetError) or ctx ended before a verdict (its tokens are still
// counted in Stats).
func (g *Generator) Generate(ctx context.Context, domain string) (*Outcome, error) {
	v, d := g.variation()
	if domain != "" {
		var err error
		if d, err = LookupDomain(domain); err != nil {
			return nil, fmt.Errorf("generate: %w", err)
		}
	}
	return g.accounted(ctx, "", &Outcome{Domain: d.Name}, func(ctx context.Context, o *Outcome) error {
		return g.attempt(ctx, d, v, o)
	})
}

// accounted runs one attempt under the token budget: it times it, charges
// its tokens to the budget, records it in Stats and logs the verdict. kind
// names the generator in the log ("" or "hybrid ").
func (g *Generator) accounted(ctx context.Context, kind string, o *Outcome, attempt func(context.Context, *Outcome) error) (*Outcome, error) {
	if wait, ok := g.budget.allow(); !ok {
		return nil, &BudgetError{RetryAfter: wait}
	}
	start := time.Now()
	err := attempt(ctx, o)
	o.Elapsed = time.Since(start)
	g.budget.spend(o.Generation.InputTokens + o.Generation.OutputTokens + o.Check.InputTokens + o.Check.OutputTokens)
	if err != nil {
		g.stats.addUsage(o)
		return o, err
	}
	g.stats.Record(o)
	if o.Reason == "" {
		g.log.Info("generated "+kind+"challenge set", "set", o.Set.ID, "domain", o.Domain, "drops", len(o.Drops),
			"in", o.Generation.InputTokens+o.Check.InputTokens, "out", o.Generation.OutputTokens+o.Check.OutputTokens, "took", o.Elapsed.Round(time.Millisecond))
	} else {
		g.log.Info("rejected "+kind+"set", "domain", o.Domain, "reason", o.Reason, "detail", o.Detail, "took", o.Elapsed.Round(time.Millisecond))
	}
	return o, nil
}

// attempt fills o; it returns an error only when ctx ended.
func (g *Generator) attempt(ctx context.Context, d Domain, v Variation, o *Outcome) error {
	text, err := g.call(ctx, BuildPrompt(d, g.params, v), v, o)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("generate: %w", cerr)
		}
		o.callFailed(err, err.Error())
		return nil
	}
	set, err := DecodeOutput(text)
	if err != nil {
		o.Reason, o.Detail = RejectMalformed, err.Error()
		return nil
	}
	if !sameDomain(set.Domain, d) {
		o.Reason, o.Detail = RejectStructure, fmt.Sprintf("set is in domain %q, asked for %q", snippet(set.Domain, 40), d.Name)
		return nil
	}
	set.Domain, set.ID = d.Name, ""
	// The provenance is ours to state, whatever the reply claimed; it is
	// set before validation, which picks the white-box attackers by it.
	set.Provenance = &skill.Provenance{Source: skill.SourceLLM, Model: g.modelName(), LLMQuestions: true}
	rep, err := g.validator.Validate(ctx, set)
	o.Report, o.Drops = rep, rep.Drops
	o.CheckCalls, o.Check = rep.Calls, rep.Usage
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	if !rep.Accepted() {
		o.Reason, o.Detail = rep.Reason, rep.Detail
		return nil
	}
	o.Set = rep.Set
	return nil
}

func sameDomain(got string, d Domain) bool {
	n := strings.NewReplacer(" ", "_", "-", "_").Replace(strings.ToLower(strings.TrimSpace(got)))
	return n == d.Name
}

// callFailed records a provider call that failed for good: its reason,
// detail and, for a rate limit, the wait the provider asked for.
func (o *Outcome) callFailed(err error, detail string) {
	o.Reason, o.Detail, o.ProviderWait = classify(err), detail, llm.RetryAfter(err)
}

// classify maps a generation call error to a rejection reason.
func classify(err error) Reason {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return RejectDeadline
	case errors.Is(err, llm.ErrRateLimited):
		return RejectRateLimited
	case errors.Is(err, llm.ErrTruncated):
		return RejectTruncated
	case errors.Is(err, llm.ErrEmptyOutput):
		return RejectEmpty
	}
	return RejectLLMError
}

var errTooLarge = errors.New("generator reply exceeds the size limit")

// call asks the model for the set's text, retrying a truncated reply with
// a larger token cap and a rate-limited call after a backoff, each call
// under CallTimeout.
func (g *Generator) call(ctx context.Context, p Prompt, v Variation, o *Outcome) (string, error) {
	c := &g.cfg
	msgs := []llms.MessageContent{
		llms.TextParts(llms.ChatMessageTypeSystem, p.System),
		llms.TextParts(llms.ChatMessageTypeHuman, p.User),
	}
	maxTok := c.MaxTokens
	truncations, limited := 0, 0
	for {
		opts := []llms.CallOption{
			llms.WithMaxTokens(maxTok),
			llms.WithTemperature(v.Temperature),
			llms.WithSeed(v.Seed),
		}
		if !c.NoJSONMode {
			opts = append(opts, llms.WithJSONMode())
		}
		if c.Stream {
			var n int
			opts = append(opts, llms.WithStreamingFunc(func(_ context.Context, chunk []byte) error {
				if n += len(chunk); n > MaxOutputBytes {
					return errTooLarge
				}
				return nil
			}))
		}
		opts = append(opts, c.CallOptions...)
		cctx, cancel := context.WithTimeout(ctx, c.CallTimeout)
		resp, err := c.Model.Generate(cctx, msgs, opts...)
		cancel()
		o.GenerationCalls++
		o.Generation = o.Generation.Add(resp.Usage)
		switch {
		case err == nil:
			return resp.Text, nil
		case ctx.Err() != nil:
			return "", err
		case errors.Is(err, llm.ErrTruncated) && truncations < c.TruncationRetries && maxTok < c.MaxTokensCap:
			truncations++
			maxTok = min(2*maxTok, c.MaxTokensCap)
			g.log.Info("generated set truncated, retrying with a larger token limit", "max_tokens", maxTok, "retry", truncations)
		case errors.Is(err, llm.ErrRateLimited) && limited < c.RateLimitRetries:
			wait, ok := llm.RetryWait(err, c.RateLimitBackoff, limited)
			if !ok {
				return "", fmt.Errorf("%w (the provider asks to wait %s, more than %s)", err, wait, llm.MaxBackoff)
			}
			limited++
			g.log.Warn("generation rate limited, backing off", "wait", wait, "retry", limited)
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return "", fmt.Errorf("%w (gave up waiting to retry: %w)", err, ctx.Err())
			case <-t.C:
			}
		default:
			return "", err
		}
	}
}

// tokenBudget is a sliding-window token cap.
type tokenBudget struct {
	limit  int
	window time.Duration
	now    func() time.Time

	mu    sync.Mutex
	spent []spend
}

type spend struct {
	at time.Time
	n  int
}

func newTokenBudget(limit int, window time.Duration, now func() time.Time) *tokenBudget {
	return &tokenBudget{limit: limit, window: window, now: now}
}

// allow reports whether the window has room, or how long until it has.
func (b *tokenBudget) allow() (time.Duration, bool) {
	if b.limit <= 0 {
		return 0, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	cut := 0
	for cut < len(b.spent) && now.Sub(b.spent[cut].at) >= b.window {
		cut++
	}
	b.spent = b.spent[cut:]
	total := 0
	for _, s := range b.spent {
		total += s.n
	}
	if total < b.limit {
		return 0, true
	}
	// Wait until enough old entries leave the window.
	for _, s := range b.spent {
		total -= s.n
		if total < b.limit {
			return max(s.at.Add(b.window).Sub(now), time.Millisecond), false
		}
	}
	return b.window, false
}

func (b *tokenBudget) spend(n int) {
	if b.limit <= 0 || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.spent = append(b.spent, spend{at: b.now(), n: n})
}
