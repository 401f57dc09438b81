package eval

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/attack"
)

// Config configures an evaluation run.
type Config struct {
	// Source provides the challenge sets. Run draws Sessions sets from it
	// in order, one per session index; every prover class faces the same
	// set and the same question picks at a given index. A source that runs
	// out (skill.ErrExhausted) after at least one set is cycled.
	Source skill.Source
	// Sessions is the number of sessions per prover class.
	Sessions int
	// Policy is the verifier policy the sessions run under.
	Policy skill.Policy
	// Seed makes the question picks and the human model reproducible.
	Seed uint64
	// Agents are configured LLM agents by name; may be empty.
	Agents map[string]skill.Prover
	// AgentSessions caps the sessions run per agent (they cost real model
	// calls); 0 means Sessions.
	AgentSessions int
	// Attackers are the generic script attackers to run (attack.All() for
	// all): they know nothing of the source.
	Attackers []attack.Named
	// AttackSeed is the seed the random attacker of Attackers was made
	// with (attack.AllSeeded); reported, 0 when not known. See
	// HeldOutSeed.
	AttackSeed uint64
	// WhiteBox are the white-box attackers for the source's kind
	// (attack.WhiteBox): scripts written against this code and prompts.
	WhiteBox []attack.Named
	// Listing are the attackers that answer with a list of candidates
	// (attack.Listing): they measure the matcher's guard.
	Listing []attack.Named
	// SourceKind is the kind of source the sets stand for; reported.
	SourceKind skill.SourceKind
	// NoReference skips the reference brains (the exact oracle and the
	// agent-style brain), which otherwise always run.
	NoReference bool
	// HumanSamples is the size of the human Monte Carlo (per-round and
	// per-session samples); 0 means DefaultHumanSamples.
	HumanSamples int
	// Human is the human timing model; the zero value means DefaultHumanMC.
	Human HumanMC
	// Workers is the number of sessions run in parallel; 0 means GOMAXPROCS.
	Workers int
	// SweepPoints is the number of tau values in the threshold sweep from
	// 1 s to 600 s; 0 means DefaultSweepPoints.
	SweepPoints int
}

// HeldOutSeed is the random attacker's seed for a run with seed: seed
// itself, or seed+1 when seed is the validation filter's
// (attack.DefaultRandomSeed, the seed of attack.All()). The filter drops
// every question its own random attacker answers, so that attacker fails
// the kept questions by construction; a run measures another draw of it.
func HeldOutSeed(seed uint64) uint64 {
	if seed == attack.DefaultRandomSeed {
		return seed + 1
	}
	return seed
}

// Defaults and limits of a run.
const (
	DefaultHumanSamples = 20000
	DefaultSweepPoints  = 61
	MaxSessions         = 10_000_000
	MaxHumanSamples     = 10_000_000
	SweepMin            = 1.0   // seconds
	SweepMax            = 600.0 // seconds
	// HumanClass is the class name of the human model in reports.
	HumanClass = "human-model"
	// maxRetainedSets bounds the sets kept to cycle a source that runs out.
	maxRetainedSets = 4096
)

// Class kinds in reports.
const (
	KindAttacker  = "attacker"
	KindAgent     = "agent"
	KindHuman     = "human"
	KindReference = "reference"
)

// Class groups in reports: attackers are reported per group.
const (
	GroupGeneric   = "generic"
	GroupWhiteBox  = "white-box"
	GroupListing   = "candidate-list"
	GroupReference = "reference"
	GroupAgent     = "agent"
	GroupHuman     = "human"
)

// Progress reports how far a run has got.
type Progress struct {
	Done    int           // session indices finished (every class)
	Total   int           // session indices to run
	Elapsed time.Duration // since Run started
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("invalid evaluation config")

// class is one prover class of a run.
type class struct {
	name, kind, group, desc string
	prover                  skill.Prover // nil for the human model and the reference brains
	reference               int          // 0, or refOracle / refAgentStyle
	limit                   int          // sessions to run
}

const (
	refOracle = 1 + iota
	refAgentStyle
)

// sessionResult is the compact record of one session.
type sessionResult struct {
	ran      bool
	accepted bool
	reason   skill.Reason
	rounds   []roundResult
	domain   string
	// errDetail is the verdict's detail when the session ended on an
	// error rather than a judgement (protocol_error, declined,
	// inconclusive): "prover failed: ... connection refused".
	errDetail string
}

// maxErrorDetail caps an error detail kept in a report.
const maxErrorDetail = 200

type roundResult struct {
	answered  bool
	correct   bool
	effective float64 // seconds
	reasoning skill.ReasoningType
	answer    skill.AnswerType
	tokens    int
}

func (c *Config) normalize() ([]class, error) {
	if c.Source == nil {
		return nil, fmt.Errorf("%w: no challenge source", ErrConfig)
	}
	if c.Sessions < 1 || c.Sessions > MaxSessions {
		return nil, fmt.Errorf("%w: sessions %d, want 1..%d", ErrConfig, c.Sessions, MaxSessions)
	}
	if err := c.Policy.Check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.HumanSamples == 0 {
		c.HumanSamples = DefaultHumanSamples
	}
	if c.HumanSamples < 1 || c.HumanSamples > MaxHumanSamples {
		return nil, fmt.Errorf("%w: human samples %d, want 1..%d", ErrConfig, c.HumanSamples, MaxHumanSamples)
	}
	if c.Human.isZero() {
		c.Human = DefaultHumanMC()
	}
	if err := c.Human.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	c.Workers = min(c.Workers, 256)
	if c.SweepPoints == 0 {
		c.SweepPoints = DefaultSweepPoints
	}
	if c.SweepPoints < 2 || c.SweepPoints > 10_000 {
		return nil, fmt.Errorf("%w: sweep points %d, want 2..10000", ErrConfig, c.SweepPoints)
	}
	if c.AgentSessions < 0 {
		return nil, fmt.Errorf("%w: negative agent sessions", ErrConfig)
	}
	agentLimit := c.Sessions
	if c.AgentSessions > 0 {
		agentLimit = min(c.AgentSessions, c.Sessions)
	}
	var classes []class
	seen := map[string]bool{HumanClass: true}
	if c.SourceKind != skill.SourceUnknown && !c.SourceKind.Valid() {
		return nil, fmt.Errorf("%w: unknown source kind %q", ErrConfig, c.SourceKind)
	}
	for _, g := range []struct {
		group string
		as    []attack.Named
	}{{GroupGeneric, c.Attackers}, {GroupWhiteBox, c.WhiteBox}, {GroupListing, c.Listing}} {
		for _, a := range g.as {
			if a.Name == "" || a.Prover == nil {
				return nil, fmt.Errorf("%w: attacker %q without a name or prover", ErrConfig, a.Name)
			}
			if seen[a.Name] {
				return nil, fmt.Errorf("%w: duplicate class name %q", ErrConfig, a.Name)
			}
			seen[a.Name] = true
			classes = append(classes, class{name: a.Name, kind: KindAttacker, group: g.group, desc: a.Description, prover: a.Prover, limit: c.Sessions})
		}
	}
	if !c.NoReference {
		for _, r := range []class{
			{name: OracleClass, reference: refOracle, desc: "knows the ground truth and answers with the canonical answer at once"},
			{name: AgentStyleClass, reference: refAgentStyle, desc: "knows the ground truth and answers in the forms agents use: the narrative's descriptive phrase, the bare number of a numbered label, an article, a unit, another number form"},
		} {
			if seen[r.name] {
				return nil, fmt.Errorf("%w: duplicate class name %q", ErrConfig, r.name)
			}
			seen[r.name] = true
			r.kind, r.group, r.limit = KindReference, GroupReference, c.Sessions
			classes = append(classes, r)
		}
	}
	names := make([]string, 0, len(c.Agents))
	for n := range c.Agents {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if n == "" || c.Agents[n] == nil {
			return nil, fmt.Errorf("%w: agent %q without a name or prover", ErrConfig, n)
		}
		if seen[n] {
			return nil, fmt.Errorf("%w: duplicate class name %q", ErrConfig, n)
		}
		seen[n] = true
		classes = append(classes, class{name: n, kind: KindAgent, group: GroupAgent, desc: "configured agent", prover: c.Agents[n], limit: agentLimit})
	}
	classes = append(classes, class{name: HumanClass, kind: KindHuman, group: GroupHuman,
		desc: "answers correctly, takes the Monte Carlo human time per round", limit: c.Sessions})
	return classes, nil
}

// pickReader returns the deterministic random stream that picks the
// questions of session index i: every class gets the same stream, so every
// class faces the same questions.
func pickReader(seed uint64, i int) *rand.ChaCha8 {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], seed)
	binary.BigEndian.PutUint64(b[8:], uint64(i))
	return rand.NewChaCha8(sha256.Sum256(append([]byte("acaptcha/eval/picks/v1"), b[:]...)))
}

// drawn is one session index with its set.
type drawn struct {
	i   int
	set *skill.Set
	err error // set-level failure: the index is skipped
}

// sourceStats records what drawing from the source did.
type sourceStats struct {
	drawn    int
	retained []*skill.Set
	cycled   bool
	distinct map[string]bool
	skipped  int
	firstErr string
	minTok   int
	maxTok   int
	sumTok   int
	nTok     int
}

// Run evaluates every prover class over cfg.Sessions sessions through the
// real session state machine (skill.NewSession and skill.Run) and returns
// the report. progress, if not nil, is called from one goroutine at most
// every 100 ms and once at the end.
func Run(ctx context.Context, cfg Config, progress func(Progress)) (*Report, error) {
	classes, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	results := make([][]sessionResult, len(classes))
	for c := range classes {
		results[c] = make([]sessionResult, cfg.Sessions)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	work := make(chan drawn, 2*cfg.Workers)
	st := &sourceStats{distinct: map[string]bool{}, minTok: -1}
	var srcErr error
	go func() {
		defer close(work)
		srcErr = draw(ctx, cfg, st, work)
	}()

	done := make(chan int, 4*cfg.Workers)
	var wg sync.WaitGroup
	for w := 0; w < cfg.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range work {
				if d.err == nil {
					runIndex(ctx, cfg, classes, results, d)
				}
				select {
				case done <- d.i:
				case <-ctx.Done():
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	var finished int
	last := time.Time{}
	for range done {
		finished++
		if progress != nil && time.Since(last) >= 100*time.Millisecond {
			last = time.Now()
			progress(Progress{Done: finished, Total: cfg.Sessions, Elapsed: time.Since(start)})
		}
	}
	if srcErr != nil {
		return nil, srcErr
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("evaluation cancelled after %d of %d sessions: %w", finished, cfg.Sessions, err)
	}
	if progress != nil {
		progress(Progress{Done: finished, Total: cfg.Sessions, Elapsed: time.Since(start)})
	}
	r := buildReport(cfg, classes, results, st)
	r.ElapsedSeconds = time.Since(start).Seconds()
	return r, nil
}

// draw pulls one set per session index from the source, in order.
func draw(ctx context.Context, cfg Config, st *sourceStats, work chan<- drawn) error {
	for i := 0; i < cfg.Sessions; i++ {
		var set *skill.Set
		if st.cycled {
			set = st.retained[i%len(st.retained)]
		} else {
			s, err := cfg.Source.Next(ctx)
			switch {
			case err == nil && s == nil:
				err = fmt.Errorf("source %s returned no set", cfg.Source.Name())
				fallthrough
			case err != nil:
				if ctx.Err() != nil {
					return nil // Run reports the cancellation
				}
				if errors.Is(err, skill.ErrExhausted) && len(st.retained) > 0 {
					st.cycled = true
					set = st.retained[i%len(st.retained)]
					break
				}
				return fmt.Errorf("draw challenge set %d from %s: %w", i, cfg.Source.Name(), err)
			default:
				set = s
				st.drawn++
				if len(st.retained) < maxRetainedSets {
					st.retained = append(st.retained, s)
				}
			}
		}
		d := drawn{i: i, set: set}
		if err := set.Validate(); err != nil {
			d.err = err
			st.skipped++
			if st.firstErr == "" {
				st.firstErr = fmt.Sprintf("set %d: %v", i, err)
			}
		} else {
			id := set.ID
			if id == "" {
				id = set.ContentID()
			}
			st.distinct[id] = true
			for p := 0; p < cfg.Policy.Rounds; p++ {
				n := skill.CountTokens(set.Parts[p].Narrative)
				if st.minTok < 0 || n < st.minTok {
					st.minTok = n
				}
				st.maxTok = max(st.maxTok, n)
				st.sumTok += n
				st.nTok++
			}
		}
		select {
		case work <- d:
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// runIndex runs every class's session for one session index.
func runIndex(ctx context.Context, cfg Config, classes []class, results [][]sessionResult, d drawn) {
	var (
		truth TruthFunc
		idx   truthIndex
	)
	for ci, c := range classes {
		if d.i >= c.limit || ctx.Err() != nil {
			continue
		}
		s, err := skill.NewSession(d.set, cfg.Policy, pickReader(cfg.Seed, d.i))
		if err != nil {
			results[ci][d.i] = sessionResult{ran: true, reason: skill.ReasonInconclusive, domain: d.set.Domain}
			continue
		}
		var a skill.Answerer
		switch {
		case c.reference != 0:
			if idx == nil {
				idx = newTruthIndex(d.set)
			}
			a = &referenceAnswerer{idx: idx, style: c.reference == refAgentStyle, seed: cfg.Seed}
		case c.prover == nil:
			if truth == nil {
				truth = TruthFromSets(d.set)
			}
			a = NewHumanAnswerer(cfg.Human, truth, cfg.Seed, uint64(d.i)+1)
		default:
			a = c.prover.NewSession()
		}
		v := skill.Run(ctx, s, a, nil)
		results[ci][d.i] = compact(v)
	}
}

func compact(v skill.Verdict) sessionResult {
	r := sessionResult{ran: true, accepted: v.Accepted, reason: v.Reason, domain: v.Domain}
	switch v.Reason {
	case skill.ReasonProtocolError, skill.ReasonDeclined, skill.ReasonInconclusive:
		r.errDetail = skill.CapBytes(v.Detail, maxErrorDetail)
	}
	r.rounds = make([]roundResult, len(v.Rounds))
	for i, rr := range v.Rounds {
		r.rounds[i] = roundResult{answered: rr.Answered, correct: rr.Correct, effective: rr.Effective.Seconds(),
			reasoning: rr.ReasoningType, answer: rr.AnswerType, tokens: rr.NarrativeTokens}
	}
	return r
}
