package attack

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/acaptcha/acaptcha/skill"
)

// The survivor attacker: a script that knows the validator's own filter
// (skill/generate, generation.md stage 3). A served question is one that
// every filter attacker failed, in every context of earlier rounds; the
// filter's attackers and their seed are public. So the script runs them
// itself, takes each of their answers as known to be wrong, and answers
// with the best candidate of the question's form that none of them gave:
// for an entity the scatter attacker's ranking, for a number the series
// attacker's and then the other numbers of the narrative, for a label the
// labels the narrative quotes.

// WhiteBoxSurvivor is the survivor attacker's name.
const WhiteBoxSurvivor = "whitebox-survivor"

// Survivor returns the survivor attacker.
func Survivor() Named { return survivorDepth(1) }

// survivorDepth is the survivor attacker that answers with the depth-th
// candidate none of the filter attackers gave: depth 2 is the script
// against a filter that holds the depth-1 attacker too, and so on.
func survivorDepth(depth int) Named {
	name := WhiteBoxSurvivor
	if depth > 1 {
		name = fmt.Sprintf("%s-%d", WhiteBoxSurvivor, depth)
	}
	return Named{
		Name:        name,
		Description: "runs the validator's filter attackers itself and answers with the best candidate of the question's form that none of them gave (a served question is one they all fail)",
		Prover: &wbProver{name: name, solve: func(s *wbSession, part int, c *skill.Challenge) string {
			return solveSurvivor(s, part, c, depth)
		}},
	}
}

// survivorFilter is the filter the survivor attacker knows: the generic
// attackers as the validator seeds them and the white-box attackers of
// model-written sets (the inverter too on a procedural domain).
func survivorFilter(domain string) []Named {
	out := All()
	out = append(out, Named{Name: PromptAware, Prover: &wbProver{name: PromptAware, solve: solvePrompt}})
	if _, ok := procDomain(domain); ok {
		out = append(out, Named{Name: ProceduralInverter, Prover: &wbProver{name: ProceduralInverter, solve: solveProcedural}})
	}
	return append(out, Structure()...)
}

func solveSurvivor(s *wbSession, part int, c *skill.Challenge, depth int) string {
	// The filter attackers' answers in this session's context.
	wrong := map[string]bool{}
	for _, ans := range s.survivorFilterAnswers(part, c) {
		if k := svKey(ans); k != "" {
			wrong[k] = true
		}
	}
	// The depth-th candidate that no filter attacker gave.
	skip := depth - 1
	ok := func(a string) bool {
		k := svKey(a)
		if k == "" || k == svKey(fallback) || wrong[k] {
			return false
		}
		if skip > 0 {
			skip--
			wrong[k] = true
			return false
		}
		return true
	}
	q := c.Question
	switch {
	case scWhich.MatchString(q) && !scNotEntity.MatchString(q):
		for _, n := range scRank(s, part, q) {
			if ok(n) {
				return n
			}
		}
	case reqNumIns.MatchString(strings.ToLower(q)) || srMean.MatchString(q) || srGap.MatchString(q):
		if a := solveSeries(s, part, c); ok(a) {
			return a
		}
		for _, n := range wbNumbersShared(s.narratives[part]) {
			if ok(n.text) {
				return n.text
			}
		}
	default:
		lw := s.cached("llm", part, func() any { return parseLLMShared(s.narratives[part]) }).(*lWorld)
		for _, l := range lw.labels {
			if ok(l) {
				return l
			}
		}
	}
	return fallback
}

// svKey compares answers as the filter's judgement would at least: case,
// surrounding white space and punctuation, and grouping commas aside.
func svKey(a string) string {
	a = strings.ToLower(strings.TrimSpace(a))
	a = strings.Trim(a, " .,;:\"'()")
	return strings.ReplaceAll(a, ",", "")
}

// svFilter is the filter the survivor attacker runs, kept in its session
// between rounds: a session of each filter attacker that has answered the
// challenges done, in order, and the last answer each gave.
type svFilter struct {
	sessions []skill.Answerer
	answers  []string
	broken   []bool // the session failed a round: its answer stays the last one
	done     []skill.Challenge
}

// survivorFilterAnswers returns the filter attackers' answers, each in a
// session that has been asked the rounds of this session through part in
// order, with c's round count, domain and budget. An attacker session
// answers by what it has been asked alone, so the sessions of the
// previous call are carried on by one round when they have answered
// exactly the rounds before part; otherwise fresh ones replay every round.
func (s *wbSession) survivorFilterAnswers(part int, c *skill.Challenge) []string {
	chs := make([]skill.Challenge, 0, part+1)
	for r := 0; r <= part && r < len(s.narratives); r++ {
		chs = append(chs, skill.Challenge{Round: r + 1, Rounds: c.Rounds, Domain: c.Domain, Narrative: s.narratives[r], Question: s.questions[r], Budget: c.Budget})
	}
	f := s.survivor
	if f == nil || len(chs) == 0 || !slices.Equal(f.done, chs[:len(chs)-1]) {
		filter := survivorFilter(c.Domain)
		f = &svFilter{sessions: make([]skill.Answerer, len(filter)), answers: make([]string, len(filter)), broken: make([]bool, len(filter))}
		for i, a := range filter {
			f.sessions[i] = a.Prover.NewSession()
		}
	}
	for _, ch := range chs[len(f.done):] {
		for i, sess := range f.sessions {
			if f.broken[i] {
				continue
			}
			x, err := sess.Answer(context.Background(), ch)
			if err != nil {
				f.broken[i] = true
				continue
			}
			f.answers[i] = x
		}
	}
	f.done = chs
	s.survivor = f
	return f.answers
}
