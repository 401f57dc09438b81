package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/acaptcha/acaptcha/llm"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/generate"
	"github.com/acaptcha/acaptcha/skill/procedural"
	"github.com/acaptcha/acaptcha/spec"
)

// challengeSource is one value of --challenges (and of eval's --source):
// its name, the kind of challenges it serves (what the attestations it
// backs say, spec/attestation.md §3.1) and how to build it. Every command
// looks sources up here by name, so a new source is one entry.
type challengeSource struct {
	name string
	// arg names the argument of a "name:ARG" value ("" for none).
	arg  string
	kind skill.SourceKind
	// static sources serve fixed sets (a corpus): eval validates them by
	// default, and a node serving one warns that nodes sharing it
	// decline each other (peer.Node's start-up warning).
	static bool
	// build makes the source; ledger records served sets (nil: memory).
	build func(a *app, arg string, ledger skill.Ledger, maxServes int) (skill.Source, error)
}

// challengeSources are the sources in the order help texts list them.
var challengeSources = []challengeSource{
	{name: "procedural", kind: skill.SourceProcedural, build: func(a *app, _ string, _ skill.Ledger, _ int) (skill.Source, error) {
		g, err := procedural.New(procedural.Config{})
		if err != nil {
			return nil, usageErr("%v", err)
		}
		p, err := a.policy()
		if err != nil {
			return nil, err
		}
		if _, err := a.checkFeasible(p, "challenge source procedural", procRange, false); err != nil {
			return nil, err
		}
		return g, nil
	}},
	{name: "examples", kind: skill.SourceCorpus, static: true, build: func(a *app, _ string, ledger skill.Ledger, maxServes int) (skill.Source, error) {
		sets, err := spec.Examples()
		if err != nil {
			return nil, usageErr("%v", err)
		}
		return a.corpus("examples", sets, ledger, maxServes)
	}},
	{name: "corpus", arg: "DIR", kind: skill.SourceCorpus, static: true, build: func(a *app, dir string, ledger skill.Ledger, maxServes int) (skill.Source, error) {
		sets, err := a.loadCorpusDir(dir)
		if err != nil {
			return nil, err
		}
		return a.corpus(dir, sets, ledger, maxServes)
	}},
	{name: "llm", kind: skill.SourceLLM, build: func(a *app, _ string, ledger skill.Ledger, maxServes int) (skill.Source, error) {
		return a.llmPool(ledger, maxServes)
	}},
	{name: "hybrid", kind: skill.SourceHybrid, build: func(a *app, _ string, ledger skill.Ledger, maxServes int) (skill.Source, error) {
		return a.hybridPool(ledger, maxServes)
	}},
}

// sourceRange is the narrative range of a generating source (false for a
// corpus, whose sets are checked one by one when loaded): the procedural
// generator's, or the requested length of the llm and hybrid pools.
func sourceRange(name string) (tokenRange, bool) {
	switch name {
	case "procedural":
		return procRange, true
	case "llm", "hybrid":
		return generatedRange(generate.Params{MinTokens: generate.DefaultMinTokens, MaxTokens: generate.DefaultMaxTokens}), true
	}
	return tokenRange{}, false
}

// checkSourcePolicy checks the policy against the source --challenges
// names before anything is built or opened (checkFeasible), and what else
// of --challenges and --llm can be checked then: a command refused for a
// usage error leaves no fresh key or empty store behind.
func (a *app) checkSourcePolicy(p skill.Policy) error {
	s, arg, err := lookupChallenges(a.challenges)
	if err != nil {
		return usageErr("--challenges: %v", err)
	}
	for _, c := range []struct{ flag, spec string }{{"--llm", a.llmSpec}, {"--cross-check-llm", a.gen.crossCheck}} {
		if c.spec == "" {
			continue
		}
		if _, err := llm.ParseSpec(c.spec); err != nil {
			return usageErr("%s %s: %v", c.flag, c.spec, err)
		}
	}
	switch s.name {
	case "llm", "hybrid":
		if a.llmSpec == "" {
			return usageErr("%s", errLLMSourceNeedsLLM)
		}
	case "corpus":
		if _, err := a.loadCorpusDir(arg); err != nil {
			return err
		}
	}
	if r, ok := sourceRange(s.name); ok {
		_, err = a.checkFeasible(p, "challenge source "+s.name, r, s.name != "procedural")
	}
	return err
}

// errLLMSourceNeedsLLM is the usage error of an llm or hybrid source
// without --llm.
const errLLMSourceNeedsLLM = "llm and hybrid challenges (--challenges of node, attest, mcp and demo; --source of generate and eval) are written by an LLM (procedural needs none): configure one with --llm openai:MODEL (OPENAI_API_KEY, optionally --llm-base-url or OPENAI_BASE_URL), --llm anthropic:MODEL, --llm googleai:MODEL or --llm ollama:MODEL"

// loadCorpusDir reads the sets of --challenges corpus:DIR once (the
// check before the store is opened, then the source built on it).
func (a *app) loadCorpusDir(dir string) ([]*skill.Set, error) {
	if sets, ok := a.corpusSets[dir]; ok {
		return sets, nil
	}
	sets, err := skill.LoadDir(dir)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	if a.corpusSets == nil {
		a.corpusSets = map[string][]*skill.Set{}
	}
	a.corpusSets[dir] = sets
	return sets, nil
}

// procRange is the narrative range of the procedural generator with its
// defaults (procedural.Config{}): each part draws its length uniformly.
var procRange = tokenRange{lo: procedural.DefaultMinTokens, hi: procedural.DefaultMaxTokens}

// challengeSourceNames lists the accepted values ("procedural, examples,
// corpus:DIR, llm or hybrid").
func challengeSourceNames() string {
	names := make([]string, len(challengeSources))
	for i, s := range challengeSources {
		names[i] = s.name
		if s.arg != "" {
			names[i] += ":" + s.arg
		}
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// lookupChallenges resolves a --challenges value; "auto" (already
// resolved to llm for a node with --llm) means procedural.
func lookupChallenges(v string) (*challengeSource, string, error) {
	if v == "auto" {
		v = "procedural"
	}
	name, arg, hasArg := strings.Cut(v, ":")
	for i := range challengeSources {
		s := &challengeSources[i]
		if s.name != name {
			continue
		}
		switch {
		case s.arg == "" && hasArg:
			return nil, "", fmt.Errorf("%q takes no argument", name)
		case s.arg != "" && (!hasArg || arg == ""):
			return nil, "", fmt.Errorf("%q needs an argument: %s:%s", name, name, s.arg)
		}
		return s, arg, nil
	}
	return nil, "", fmt.Errorf("unknown source %q: want %s", v, challengeSourceNames())
}

// challengeKind is the kind of challenges a --challenges value serves
// (unknown for a value that names no source).
func challengeKind(challenges string) skill.SourceKind {
	s, _, err := lookupChallenges(challenges)
	if err != nil {
		return skill.SourceUnknown
	}
	return s.kind
}

// corpus serves fixed sets, refusing at start-up a set the policy cannot
// serve rather than failing every session later.
func (a *app) corpus(name string, sets []*skill.Set, ledger skill.Ledger, maxServes int) (skill.Source, error) {
	p, err := a.policy()
	if err != nil {
		return nil, err
	}
	for _, s := range sets {
		if _, err := skill.NewSession(s, p, nil); err != nil {
			return nil, usageErr("challenge set %s (%s) cannot be served under this policy: %v", s.ID, s.Domain, err)
		}
	}
	c, err := skill.NewCorpus(name, sets, ledger, maxServes)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	// The ledger (the node's store) outlives the process: a corpus used
	// up in an earlier run makes every session inconclusive from the
	// start, which nothing else says until a peer comes.
	if n, known, err := c.Remaining(); err == nil && known && n == 0 {
		a.corpusUsedUp = true
		a.log.Warn("every set of the challenge corpus has been served --max-serves times already (the count is kept in the store): this node verifies no one until it gets new sets; add sets, raise --max-serves, or use --challenges llm",
			"corpus", name, "sets", c.Len(), "max_serves", maxServes, "store", a.storePath)
	}
	return c, nil
}

// tokenRange is the narrative length, in tokens per part, of the sets a
// source serves: a generator's requested range, or a corpus's extremes.
type tokenRange struct{ lo, hi int }

// feasibility is what the timing policy makes of a source's narrative
// lengths: a round whose narrative the policy refuses (tau above
// MaxHumanFraction of the human lower bound, or a derived budget the
// session cannot carry) makes its session end inconclusive, unsigned.
type feasibility struct {
	r tokenRange
	// refused counts the lengths in r the policy refuses; shortest and
	// longest are the extremes of them (0 when none), err the policy's
	// words for one.
	refused           int
	shortest, longest int
	err, lastErr      error
	// serveAll is the largest fixed tau that serves every length of r
	// (0 under --derive-tau), serveNone the tau above which none is.
	serveAll, serveNone time.Duration
}

// checkLengths applies policy p to every narrative length of r as a
// session does to each round (skill.NewSession: Budget, then CheckBudget).
func checkLengths(p skill.Policy, r tokenRange) feasibility {
	f := feasibility{r: r}
	// Every length, or a sample of a very wide range (each counting for
	// step lengths).
	step := max(1, (r.hi-r.lo+1)/8192)
	for l := r.lo; l <= r.hi; l += step {
		b, err := p.Budget(l)
		if err == nil {
			err = p.CheckBudget(b)
		}
		if err == nil {
			continue
		}
		if f.refused == 0 {
			f.shortest, f.err = l, err
		}
		f.refused += min(step, r.hi-l+1)
		f.longest, f.lastErr = min(l+step-1, r.hi), err
	}
	if !p.DeriveTau {
		capAt := func(l int) time.Duration {
			return time.Duration(p.MaxHumanFraction * float64(p.Human.LowerBound(l)))
		}
		f.serveAll, f.serveNone = capAt(r.lo).Truncate(100*time.Millisecond), capAt(r.hi)
	}
	return f
}

// share is the fraction of lengths refused, and of sessions of rounds
// rounds with at least one refused round (lengths drawn uniformly and
// independently per part, as the generators draw them).
func (f feasibility) share(rounds int) (parts, sessions float64) {
	n := f.r.hi - f.r.lo + 1
	if n <= 0 {
		return 0, 0
	}
	parts = float64(f.refused) / float64(n)
	return parts, 1 - math.Pow(1-parts, float64(rounds))
}

// remedy says which flag serves every length.
func (f feasibility) remedy(p skill.Policy) string {
	if p.DeriveTau {
		return "a longer --total serves the longest narratives"
	}
	if f.serveAll >= skill.MinBudget {
		return fmt.Sprintf("--tau %s or less serves every set (or --derive-tau)", f.serveAll)
	}
	return "--derive-tau serves every set"
}

// checkFeasible refuses, at start-up, a timing policy under which the
// source what (narratives of r tokens per part) can serve no set: every
// session would end inconclusive, silently, at its first round. When only
// some sets fail it warns loudly with the share of sessions that will.
// It returns what it found (eval reports it).
//
// generated: the source is a generator that validates its sets against
// the policy (an LLM pool, or acaptcha generate).
func (a *app) checkFeasible(p skill.Policy, what string, r tokenRange, generated bool) (feasibility, error) {
	f := checkLengths(p, r)
	switch {
	case f.refused == 0:
		return f, nil
	case f.refused == r.hi-r.lo+1:
		// Quote the refusal at the end of the range that comes nearest
		// to passing: the longest narrative under a fixed tau.
		why := f.lastErr
		if p.DeriveTau {
			why = f.err
		}
		return f, usageErr("%s cannot serve a single challenge set under this timing policy (--tau %s, --total %s%s): its narratives are %d-%d tokens per part, and even %s. Every session would end inconclusive; %s",
			what, tauString(p), p.Total, deriveWord(p), r.lo, r.hi, policyWords(why), f.remedy(p))
	}
	if a.warned[what] {
		return f, nil
	}
	if a.warned == nil {
		a.warned = map[string]bool{}
	}
	a.warned[what] = true
	parts, sessions := f.share(p.Rounds)
	outcome := fmt.Sprintf("about %.0f%% of %d-round sessions will end INCONCLUSIVE, nothing signed", 100*sessions, p.Rounds)
	if generated {
		// The generators validate their sets against the policy
		// (skill/generate: RejectPolicy): the refused ones are paid for
		// and thrown away.
		outcome = fmt.Sprintf("about %.0f%% of the sets generated will be rejected by the policy check (an LLM's after their tokens are spent)", 100*sessions)
	}
	a.log.Warn(fmt.Sprintf("%s: the timing policy refuses its narratives of %d-%d tokens (%s): about %.0f%% of parts, so %s; %s",
		what, f.shortest, f.longest, policyWords(f.err), 100*parts, outcome, f.remedy(p)),
		"tau", tauString(p), "total", p.Total, "narrative_tokens", fmt.Sprintf("%d-%d", r.lo, r.hi))
	return f, nil
}

// policyWords is a policy error without its "invalid timing policy: "
// prefix and its advice (the caller gives its own).
func policyWords(err error) string {
	s := strings.TrimPrefix(err.Error(), skill.ErrPolicy.Error()+": ")
	if i := strings.LastIndex(s, "; use "); i > 0 {
		s = s[:i]
	}
	return s
}

func deriveWord(p skill.Policy) string {
	if p.DeriveTau {
		return ", --derive-tau"
	}
	return ""
}

// generatedRange is the narrative range of a generator's parameters.
func generatedRange(p generate.Params) tokenRange {
	return tokenRange{lo: p.MinTokens, hi: max(p.MaxTokens, p.MinTokens)}
}

// setsRange is the range of the narratives a session of rounds rounds
// shows from sets.
func setsRange(sets []*skill.Set, rounds int) tokenRange {
	r := tokenRange{lo: math.MaxInt}
	for _, s := range sets {
		for i := 0; i < rounds && i < len(s.Parts); i++ {
			n := skill.CountTokens(s.Parts[i].Narrative)
			r.lo, r.hi = min(r.lo, n), max(r.hi, n)
		}
	}
	if r.lo > r.hi {
		r.lo = r.hi
	}
	return r
}
