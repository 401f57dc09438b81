// Package procedural is the offline challenge generator of acaptcha: it
// builds three-part narrative sets (paper §5.2–5.3) from a seeded world
// model, so every answer is known by construction and no LLM is needed.
// It is the embedded default skill.Source when no model is configured.
//
// Each part describes four to six candidate entities of one kind (enzymes,
// vulnerabilities, drug candidates, pathogens, indicators, and their
// follow-up kinds) in neutral terms. Exactly one candidate per part passes
// four implicit checks — persistence over time, replication, no external
// cause, presence across sites — and, from the second part on, is tied to
// the previous part's standout only through indirect references (a lot or
// ticket code, a descriptive alias), so later questions need earlier
// answers. Some outcomes are only implied: by a relation to another
// candidate whose outcome is stated, or by a measurement against a bar the
// part states; numeric answers are differences, day counts or counts the
// text does not spell out. Facts are scattered over non-adjacent
// paragraphs, voiced through interchangeable paraphrase templates, padded
// with realistic filler to the requested length, and wrapped in varied
// document formats.
package procedural

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/acaptcha/acaptcha/skill"
)

// Length and question limits. MinPartTokens keeps every part long enough
// for the default timing policy (tau = 15 s must stay below a quarter of
// the human lower bound). A part's length is drawn from [MinTokens,
// MaxTokens]; the densest world model (four candidates, two checks per
// sentence) needs up to about 500 tokens, so a part drawn shorter than its
// content comes out at the content's length, and MaxTokens must be at
// least MinMaxTokens to keep that within 15% of the range.
const (
	DefaultMinTokens        = 350
	DefaultMaxTokens        = 1100
	DefaultQuestionsPerPart = 3
	MinPartTokens           = 350
	MinMaxTokens            = 450
	MaxPartTokens           = 4000
	MaxQuestionsPerPart     = 6
)

// ErrConfig is wrapped by every configuration error of New.
var ErrConfig = errors.New("procedural: invalid configuration")

// ErrGenerate is wrapped when a set cannot be produced (an internal
// consistency check failed); it never happens with the built-in tables.
var ErrGenerate = errors.New("procedural: generation failed")

// Config parameterises a Generator. The zero value is valid and means all
// domains, 350..1100 tokens per part, three questions per part and a fresh
// crypto-random seed for every set.
type Config struct {
	// Domains restricts generation to these domain names (see Domains);
	// empty means all.
	Domains []string
	// MinTokens and MaxTokens bound the narrative length of each part in
	// skill.CountTokens units; each part draws its own length in the range
	// (but never shorter than its content, see MinMaxTokens). Zero means
	// the default. Both must lie in [MinPartTokens, MaxPartTokens], and
	// MaxTokens must be at least MinMaxTokens.
	MinTokens, MaxTokens int
	// QuestionsPerPart is how many questions each part carries (1..6,
	// default 3). With three or more, every part has an entity, a numeric
	// and a label answer; with two or more, the set covers all six
	// reasoning types.
	QuestionsPerPart int
	// Seed, when set, makes Next deterministic: the i-th call generates
	// from a seed derived from *Seed and i. Nil means crypto/rand per set.
	Seed *uint64
}

// Domain describes one challenge domain.
type Domain struct {
	Name        string
	Description string
}

// Domains lists the built-in domains, one per OECD FORD field used by the
// paper (Appendix B).
func Domains() []Domain {
	out := make([]Domain, len(domainTable))
	for i, d := range domainTable {
		out[i] = Domain{Name: d.name, Description: d.desc}
	}
	return out
}

// Generator produces challenge sets. It is safe for concurrent use.
type Generator struct {
	minTok, maxTok int
	qpp            int
	domains        []*domain
	seeded         bool
	seed           uint64
	ctr            atomic.Uint64
}

var (
	_ skill.Source      = (*Generator)(nil)
	_ skill.Provenancer = (*Generator)(nil)
)

// New validates cfg and returns a generator.
func New(cfg Config) (*Generator, error) {
	if tablesErr != nil {
		return nil, fmt.Errorf("%w: built-in tables: %w", ErrGenerate, tablesErr)
	}
	g := &Generator{minTok: cfg.MinTokens, maxTok: cfg.MaxTokens, qpp: cfg.QuestionsPerPart}
	if g.minTok == 0 {
		g.minTok = DefaultMinTokens
	}
	if g.maxTok == 0 {
		g.maxTok = max(DefaultMaxTokens, g.minTok)
	}
	if g.qpp == 0 {
		g.qpp = DefaultQuestionsPerPart
	}
	switch {
	case g.minTok < MinPartTokens || g.minTok > MaxPartTokens:
		return nil, fmt.Errorf("%w: MinTokens %d outside [%d, %d]", ErrConfig, g.minTok, MinPartTokens, MaxPartTokens)
	case g.maxTok < max(g.minTok, MinMaxTokens) || g.maxTok > MaxPartTokens:
		return nil, fmt.Errorf("%w: MaxTokens %d outside [max(MinTokens %d, %d), %d]", ErrConfig, g.maxTok, g.minTok, MinMaxTokens, MaxPartTokens)
	case g.qpp < 1 || g.qpp > MaxQuestionsPerPart:
		return nil, fmt.Errorf("%w: QuestionsPerPart %d outside [1, %d]", ErrConfig, g.qpp, MaxQuestionsPerPart)
	}
	if len(cfg.Domains) == 0 {
		for i := range domainTable {
			g.domains = append(g.domains, &domainTable[i])
		}
	} else {
		seen := map[string]bool{}
		for _, name := range cfg.Domains {
			d := lookupDomain(name)
			if d == nil {
				names := make([]string, len(domainTable))
				for i := range domainTable {
					names[i] = domainTable[i].name
				}
				return nil, fmt.Errorf("%w: unknown domain %q (known: %s)", ErrConfig, name, strings.Join(names, ", "))
			}
			if !seen[name] {
				seen[name] = true
				g.domains = append(g.domains, d)
			}
		}
	}
	if cfg.Seed != nil {
		g.seeded = true
		g.seed = *cfg.Seed
	}
	return g, nil
}

// Name implements skill.Source.
func (g *Generator) Name() string { return "procedural" }

// Kind implements skill.Provenancer: every set it serves is procedural
// (its Provenance says so), and a node that verifies with it warns at
// start that a script written against this code passes its challenges
// without being told (peer.Config.SourceKind).
func (g *Generator) Kind() skill.SourceKind { return skill.SourceProcedural }

// Next implements skill.Source: it generates a fresh set from a
// crypto-random seed, or from the configured deterministic stream.
func (g *Generator) Next(ctx context.Context) (*skill.Set, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("procedural: %w", err)
	}
	var seed uint64
	if g.seeded {
		seed = splitmix(g.seed + (g.ctr.Add(1)-1)*0x9e3779b97f4a7c15)
	} else {
		var b [8]byte
		if _, err := crand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("procedural: seed: %w", err)
		}
		seed = binary.LittleEndian.Uint64(b[:])
	}
	return g.Generate(seed)
}

// Generate builds the set for seed; the same seed and configuration always
// give the same set. The set's ID is its content hash, so it never reveals
// the seed.
func (g *Generator) Generate(seed uint64) (*skill.Set, error) {
	return g.generate(seed, nil)
}

func (g *Generator) generate(seed uint64, tr *trace) (*skill.Set, error) {
	if len(g.domains) == 0 || g.minTok == 0 || g.qpp == 0 {
		return nil, fmt.Errorf("%w: generator not built with New", ErrConfig)
	}
	st := newGen(g, seed, tr)
	set, err := st.run()
	if err != nil {
		return nil, fmt.Errorf("%w: seed %d: %w", ErrGenerate, seed, err)
	}
	set.Provenance = &skill.Provenance{Source: skill.SourceProcedural}
	set.ID = set.ContentID()
	// The structural check the session relies on, as a last safety net;
	// Prepare marks the set checked, so the session does not check it
	// again.
	if err := set.Prepare(); err != nil {
		return nil, fmt.Errorf("%w: seed %d: %w", ErrGenerate, seed, err)
	}
	return set, nil
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
