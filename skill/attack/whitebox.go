package attack

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/acaptcha/acaptcha/skill"
)

// White-box attacker names, stable across releases.
const (
	ProceduralInverter = "whitebox-procedural"
	PromptAware        = "whitebox-prompt"
	CandidateList      = "candidate-list"
)

// WhiteBox returns the white-box attackers for a source kind: for
// skill.SourceProcedural the generator inverter; for skill.SourceLLM,
// skill.SourceHybrid and skill.SourceCorpus the prompt-aware attacker,
// the structure attackers (Structure) and the survivor attacker
// (Survivor), and for hybrid also the inverter, which targets the
// procedural skeleton under the rewording. An unknown kind gets every
// white-box attacker.
func WhiteBox(kind skill.SourceKind) []Named {
	inv := Named{
		Name:        ProceduralInverter,
		Description: "parses skill/procedural's own output back into its world model (aliases, check polarity, links, rule) and answers by the generator's question semantics",
		Prover:      &wbProver{name: ProceduralInverter, solve: solveProcedural},
	}
	pa := Named{
		Name:        PromptAware,
		Description: "exploits what the LLM generation and hybrid rewording prompts promise: one standout passing every check, a revised early view, the check vocabulary, conditional rules, arithmetic",
		Prover:      &wbProver{name: PromptAware, solve: solvePrompt},
	}
	// The structure attackers (Series, Scatter) read what the generation
	// prompt forces any model-written narrative to hold, and the survivor
	// attacker what the filter of those before it leaves; they run
	// wherever the prompt-aware attacker does.
	switch kind {
	case skill.SourceProcedural:
		return []Named{inv}
	case skill.SourceHybrid:
		return append(append([]Named{pa, inv}, Structure()...), Survivor())
	case skill.SourceLLM, skill.SourceCorpus:
		return append(append([]Named{pa}, Structure()...), Survivor())
	}
	return append(append([]Named{inv, pa}, Structure()...), Survivor())
}

// wbProver is a white-box attacker: deterministic, no model, no network.
// It sees only what the wire carries: the narratives and questions of its
// own session and its own earlier answers.
type wbProver struct {
	name  string
	solve func(s *wbSession, part int, c *skill.Challenge) string
}

// Name returns the attacker's registry name.
func (p *wbProver) Name() string { return p.name }

// NewSession implements skill.Prover.
func (p *wbProver) NewSession() skill.Answerer { return &wbSession{p: p} }

// wbSession remembers the narratives of its session by part, the parses
// made of them and its own answers. Not safe for concurrent use; a skill
// session asks its rounds one at a time.
type wbSession struct {
	p          *wbProver
	narratives []string
	questions  []string // the question asked of each part, by part
	answers    []string
	cache      map[string]any // parse caches keyed by attacker and part
	survivor   *svFilter      // the survivor attacker's filter sessions
}

// wbMaxParts bounds the session memory against hostile round numbers.
const wbMaxParts = 8

// Answer implements skill.Answerer.
func (s *wbSession) Answer(ctx context.Context, c skill.Challenge) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	c.Narrative = skill.CapBytes(c.Narrative, maxNarrativeBytes)
	c.Question = skill.CapBytes(c.Question, maxQuestionBytes)
	part := c.Round - 1
	if part < 0 || part >= wbMaxParts {
		// Unnumbered rounds: a new narrative starts a new part.
		part = len(s.narratives)
		if part > 0 && s.narratives[part-1] == c.Narrative {
			part--
		}
		part = min(part, wbMaxParts-1)
	}
	for len(s.narratives) <= part {
		s.narratives = append(s.narratives, "")
		s.questions = append(s.questions, "")
	}
	s.questions[part] = c.Question
	if s.narratives[part] != c.Narrative {
		s.narratives[part] = c.Narrative
		if s.cache != nil {
			for k := range s.cache {
				if strings.HasSuffix(k, partKey(part)) {
					delete(s.cache, k)
				}
			}
		}
	}
	ans := strings.TrimSpace(s.p.solve(s, part, &c))
	if ans == "" {
		ans = fallback
	}
	ans = wbFit(ans)
	if len(s.answers) < wbMaxParts {
		s.answers = append(s.answers, ans)
	}
	return ans, nil
}

func partKey(part int) string { return "#" + string(rune('0'+part)) }

// cached returns the value cached under name for part, building it once.
func (s *wbSession) cached(name string, part int, build func() any) any {
	if s.cache == nil {
		s.cache = map[string]any{}
	}
	k := name + partKey(part)
	if v, ok := s.cache[k]; ok {
		return v
	}
	v := build()
	s.cache[k] = v
	return v
}

// wbFit makes an answer valid on the wire: at most MaxAnswerBytes, cut on
// a rune boundary, valid UTF-8.
func wbFit(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "")
	}
	s = skill.CapBytes(s, skill.MaxAnswerBytes)
	return strings.TrimSpace(s)
}
