package main

import (
	"fmt"
	"strings"

	"github.com/acaptcha/acaptcha/skill"
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
		sets, err := skill.LoadDir(dir)
		if err != nil {
			return nil, usageErr("%v", err)
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
	return c, nil
}
