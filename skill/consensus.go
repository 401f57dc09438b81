package skill

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
)

// Consensus is the probabilistic-CAPTCHA seed's consensus feedback applied
// to a challenge pool: when several distinct provers that had passed the
// earlier rounds of their session give the same non-matching answer to a
// question, on time, the question is more likely flawed (an ambiguous
// narrative, a missing variant) than the provers wrong. Past Threshold
// distinct provers the question is retired: RetiringSource stops serving
// it. The last live question of a part is never retired (a peer could
// otherwise retire a whole set); it is counted as disputed instead.
//
// Only failures after at least one passed round count, so a script that
// fails round 1 (nearly all of them) never moves a count; per question only
// MaxAnswers distinct wrong answers and per answer Threshold provers are
// kept, and at most MaxQuestions questions are tracked, so memory is
// bounded whatever peers send. Consensus is safe for concurrent use.
type Consensus struct {
	cfg ConsensusConfig

	mu      sync.Mutex
	tally   map[string]map[string]map[string]struct{} // question key -> normalised answer -> prover
	retired map[string]bool
	stats   ConsensusStats
}

// ConsensusConfig parameterises Consensus. Zero fields take the defaults.
type ConsensusConfig struct {
	// Threshold is the number of distinct provers that must give the same
	// non-matching answer (default 3).
	Threshold int
	// MaxQuestions bounds the questions tracked (default 4096); past it
	// the tallies are dropped and counting starts over (retirements are
	// kept up to the same bound).
	MaxQuestions int
	// MaxAnswers bounds the distinct wrong answers tracked per question
	// (default 16).
	MaxAnswers int
}

// Consensus defaults.
const (
	DefaultConsensusThreshold = 3
	defaultConsensusQuestions = 4096
	defaultConsensusAnswers   = 16
)

// ConsensusStats counts what the feedback saw and did.
type ConsensusStats struct {
	// Observed counts wrong answers that qualified (on time, after a
	// passed round).
	Observed uint64 `json:"observed"`
	// Retired counts questions retired from serving.
	Retired uint64 `json:"retired"`
	// Disputed counts questions that reached the threshold but were the
	// last live question of their part, so they were kept.
	Disputed uint64 `json:"disputed"`
}

// NewConsensus returns an empty consensus tracker.
func NewConsensus(cfg ConsensusConfig) (*Consensus, error) {
	if cfg.Threshold == 0 {
		cfg.Threshold = DefaultConsensusThreshold
	}
	if cfg.MaxQuestions == 0 {
		cfg.MaxQuestions = defaultConsensusQuestions
	}
	if cfg.MaxAnswers == 0 {
		cfg.MaxAnswers = defaultConsensusAnswers
	}
	if cfg.Threshold < 2 || cfg.MaxQuestions < 1 || cfg.MaxAnswers < 1 {
		return nil, fmt.Errorf("consensus: threshold %d (want at least 2), max questions %d, max answers %d (want at least 1)",
			cfg.Threshold, cfg.MaxQuestions, cfg.MaxAnswers)
	}
	return &Consensus{cfg: cfg, tally: map[string]map[string]map[string]struct{}{}, retired: map[string]bool{}}, nil
}

// questionKey identifies a question across serves and across copies of
// its set with retired questions removed: the set id, the part and the
// question text.
func questionKey(setID string, part int, question string) string {
	h := sha256.Sum256([]byte(question))
	return fmt.Sprintf("%s/%d/%s", setID, part, hex.EncodeToString(h[:8]))
}

// Observe records the outcome of one session of set by prover (any stable
// identity: a peer ID). It reports whether the session retired a question.
func (c *Consensus) Observe(set *Set, v Verdict, prover string) bool {
	if set == nil || v.Reason != ReasonWrongAnswer || len(v.Rounds) < 2 || prover == "" {
		return false
	}
	last := v.Rounds[len(v.Rounds)-1]
	for _, r := range v.Rounds[:len(v.Rounds)-1] {
		if !r.Correct || r.Effective > r.Budget {
			return false
		}
	}
	if !last.Answered || last.Correct || last.Effective > last.Budget || len(last.Answer) > MaxAnswerBytes {
		return false
	}
	ans := Normalize(last.Answer)
	if ans == "" {
		return false
	}
	part := last.Round - 1
	if part < 0 || part >= len(set.Parts) {
		return false
	}
	key := questionKey(set.ID, part, last.Question)

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.retired[key] {
		return false
	}
	byAnswer := c.tally[key]
	if byAnswer == nil {
		if len(c.tally) >= c.cfg.MaxQuestions {
			clear(c.tally)
		}
		byAnswer = map[string]map[string]struct{}{}
		c.tally[key] = byAnswer
	}
	provers := byAnswer[ans]
	if provers == nil {
		if len(byAnswer) >= c.cfg.MaxAnswers {
			return false
		}
		provers = map[string]struct{}{}
		byAnswer[ans] = provers
	}
	if _, dup := provers[prover]; dup {
		return false
	}
	provers[prover] = struct{}{}
	c.stats.Observed++
	if len(provers) < c.cfg.Threshold {
		return false
	}
	delete(c.tally, key)
	if c.liveQuestions(set, part) <= 1 {
		c.stats.Disputed++
		return false
	}
	if len(c.retired) >= c.cfg.MaxQuestions {
		clear(c.retired)
	}
	c.retired[key] = true
	c.stats.Retired++
	return true
}

// liveQuestions counts the questions of a part not yet retired; c.mu held.
func (c *Consensus) liveQuestions(set *Set, part int) int {
	n := 0
	for _, q := range set.Parts[part].Questions {
		if !c.retired[questionKey(set.ID, part, q.Question)] {
			n++
		}
	}
	return n
}

// Retired reports whether a question of a set has been retired.
func (c *Consensus) Retired(setID string, part int, question string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.retired[questionKey(setID, part, question)]
}

// Stats returns the counters.
func (c *Consensus) Stats() ConsensusStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// filter returns set, or a copy without its retired questions.
func (c *Consensus) filter(set *Set) *Set {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.retired) == 0 {
		return set
	}
	var out *Set
	for pi := range set.Parts {
		var keep []Question
		for _, q := range set.Parts[pi].Questions {
			if !c.retired[questionKey(set.ID, pi, q.Question)] {
				keep = append(keep, q)
			}
		}
		if len(keep) == len(set.Parts[pi].Questions) {
			continue
		}
		if out == nil {
			cp := *set
			cp.Parts = append([]Part(nil), set.Parts...)
			out = &cp
		}
		out.Parts[pi].Questions = keep
	}
	if out == nil {
		return set
	}
	return out
}

// RetiringSource serves the sets of Source without the questions its
// Consensus retired. It passes Return through when Source takes sets back.
type RetiringSource struct {
	Source    Source
	Consensus *Consensus
}

// Next implements Source.
func (r RetiringSource) Next(ctx context.Context) (*Set, error) {
	s, err := r.Source.Next(ctx)
	if err != nil || r.Consensus == nil {
		return s, err
	}
	return r.Consensus.filter(s), nil
}

// Name implements Source.
func (r RetiringSource) Name() string { return r.Source.Name() }

// Return implements Returner when the wrapped source does.
func (r RetiringSource) Return(set *Set) error {
	if rt, ok := r.Source.(Returner); ok {
		return rt.Return(set)
	}
	return nil
}

// Kind implements Provenancer when the wrapped source does.
func (r RetiringSource) Kind() SourceKind {
	if p, ok := r.Source.(Provenancer); ok {
		return p.Kind()
	}
	return SourceUnknown
}
