package testutil

import (
	"strings"

	"github.com/acaptcha/acaptcha/skill"
)

// Unknown is what the oracle and the keyword script answer when they
// cannot answer: a plausible-looking but wrong answer.
const Unknown = "unknown"

// Oracle knows the canonical answers of a collection of sets. It plays a
// perfect reader with an honest memory: it answers a question at once and
// correctly, provided it can see the question's own narrative and, for a
// question that depends on earlier parts, those parts' narratives
// somewhere in the conversation. Otherwise it answers Unknown (or "none"
// when Unknown happens to be correct). It is safe for concurrent use.
type Oracle struct {
	entries []oracleEntry
}

type oracleEntry struct {
	question  string   // normalised question text
	narrative string   // normalised narrative of the question's part
	deps      []string // normalised narratives of the parts it depends on
	answer    string
	variants  []string
}

// NewOracle returns an oracle over sets (nil sets are skipped).
func NewOracle(sets ...*skill.Set) *Oracle {
	o := &Oracle{}
	for _, s := range sets {
		if s == nil {
			continue
		}
		for pi := range s.Parts {
			p := &s.Parts[pi]
			for qi := range p.Questions {
				q := &p.Questions[qi]
				e := oracleEntry{
					question:  norm(q.Question),
					narrative: norm(p.Narrative),
					answer:    q.Answer,
					variants:  q.Variants(),
				}
				if e.question == "" || e.narrative == "" {
					continue
				}
				for _, d := range q.DependsOn {
					if d >= 1 && d <= len(s.Parts) {
						e.deps = append(e.deps, norm(s.Parts[d-1].Narrative))
					}
				}
				o.entries = append(o.entries, e)
			}
		}
	}
	return o
}

// norm collapses white space so that prompt formatting does not hide a
// narrative or question.
func norm(s string) string { return strings.Join(strings.Fields(s), " ") }

// Reply implements Brain: the last user message must hold both a known
// question and its narrative; the earlier user messages are the memory.
func (o *Oracle) Reply(req BrainRequest) BrainReply {
	msg, ok := req.LastUser()
	if !ok {
		return BrainReply{Text: Unknown}
	}
	return BrainReply{Text: o.Answer(msg, msg, req.EarlierUsers())}
}

// Answer answers the known question contained in question (the longest
// match wins) whose narrative is contained in narrative. Both arguments
// may be a whole prompt. A question depending on earlier parts is answered
// correctly only when each of those parts' narratives appears in narrative
// or in one of the history entries.
func (o *Oracle) Answer(narrative, question string, history []string) string {
	nn, nq := norm(narrative), norm(question)
	var best *oracleEntry
	for i := range o.entries {
		e := &o.entries[i]
		if (best == nil || len(e.question) > len(best.question)) &&
			strings.Contains(nq, e.question) && strings.Contains(nn, e.narrative) {
			best = e
		}
	}
	if best == nil {
		return Unknown
	}
	var hist []string
	for _, d := range best.deps {
		if strings.Contains(nn, d) {
			continue
		}
		if hist == nil {
			hist = make([]string, len(history))
			for i, h := range history {
				hist[i] = norm(h)
			}
		}
		found := false
		for _, h := range hist {
			if strings.Contains(h, d) {
				found = true
				break
			}
		}
		if !found {
			return wrongAnswer(best.variants)
		}
	}
	return best.answer
}

func wrongAnswer(variants []string) string {
	if skill.MatchAny(Unknown, variants) {
		return "none"
	}
	return Unknown
}
