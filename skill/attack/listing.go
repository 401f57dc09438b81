package attack

import (
	"strings"

	"github.com/acaptcha/acaptcha/skill"
)

// Listing returns the attacker that answers with a list of its top
// candidates: as many as fit in skill.MaxAnswerBytes, joined by ", "
// (or " or " on alternate rounds), to test that the matcher refuses lists.
// Its candidates are the procedural inverter's and the prompt-aware
// attacker's answers followed by the round's other candidates.
func Listing() Named {
	return Named{
		Name:        CandidateList,
		Description: "answers with as many of its top candidates as fit in 64 bytes (\"PFK1, HK2, ENO3\"), to show the matcher refuses lists",
		Prover:      &wbProver{name: CandidateList, solve: solveListing},
	}
}

func solveListing(s *wbSession, part int, c *skill.Challenge) string {
	var cands []string
	add := func(a string) {
		a = strings.TrimSpace(a)
		if a == "" || a == fallback {
			return
		}
		for _, x := range cands {
			if strings.EqualFold(x, a) {
				return
			}
		}
		cands = append(cands, a)
	}
	add(solveProcedural(s, part, c))
	add(solvePrompt(s, part, c))
	// The other candidates of the round, in the inverter's order of
	// standing: entities, or numbers, or labels, as the question asks.
	w := s.procWorld(part, c.Domain)
	q := strings.ToLower(c.Question)
	numeric := reqNumIns.MatchString(q)
	for _, i := range w.cand {
		e := w.ents[i]
		switch {
		case numeric && e.val != nil:
			add(e.valText)
		case !numeric:
			add(e.name())
		}
	}
	lw := s.cached("llm", part, func() any { return parseLLMShared(s.narratives[part]) }).(*lWorld)
	for _, e := range lw.ents {
		add(e.name)
	}
	sep := ", "
	if c.Round%2 == 0 {
		sep = " or "
	}
	out := ""
	for _, a := range cands {
		next := a
		if out != "" {
			next = out + sep + a
		}
		if len(next) > skill.MaxAnswerBytes {
			continue
		}
		out = next
	}
	if out == "" {
		return fallback
	}
	return out
}
