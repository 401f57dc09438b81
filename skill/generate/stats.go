package generate

import (
	"maps"
	"sync"
	"time"

	"github.com/acaptcha/acaptcha/llm"
	"github.com/acaptcha/acaptcha/skill"
)

// Stats is the cost and outcome accounting of a Generator.
type Stats struct {
	// Attempts counts generation attempts that ran to a verdict.
	Attempts int `json:"attempts"`
	// Accepted counts sets that passed validation.
	Accepted int `json:"accepted"`
	// Rejected counts rejected attempts by reason.
	Rejected map[Reason]int `json:"rejected"`
	// Dropped counts dropped questions by Drop.Key ("script:router",
	// "cross_check_disagree", ...), over accepted and rejected sets.
	Dropped map[string]int `json:"dropped"`
	// GenerationCalls and CheckCalls count provider calls, retries
	// included.
	GenerationCalls int `json:"generation_calls"`
	CheckCalls      int `json:"check_calls"`
	// Generation and Check are the tokens of generation and cross-check
	// calls, as the providers reported them.
	Generation llm.Usage `json:"generation_tokens"`
	Check      llm.Usage `json:"check_tokens"`
	// QuestionsReworded counts the questions hybrid attempts that ran to
	// a verdict reworded; QuestionsKept, by QuestionKept* reason, those
	// that kept the skeleton's wording because the rewording failed its
	// check.
	QuestionsReworded int            `json:"questions_reworded,omitempty"`
	QuestionsKept     map[string]int `json:"questions_kept,omitempty"`
	// LastLLMError is the detail of the last attempt rejected llm_error
	// (the provider's error, e.g. an unreachable endpoint), cut at 200
	// bytes: the counts alone do not say why.
	LastLLMError string `json:"last_llm_error,omitempty"`
	// LastRejection is the reason and detail of the last rejected
	// attempt, whatever its reason (a model's reply that is no JSON, a
	// leak), cut at 200 bytes.
	LastRejection string `json:"last_rejection,omitempty"`
	// Busy is the summed wall time of the attempts.
	Busy time.Duration `json:"busy_ns"`
}

// Total returns all tokens spent.
func (s Stats) Total() llm.Usage { return s.Generation.Add(s.Check) }

// RejectedTotal returns the number of rejected attempts.
func (s Stats) RejectedTotal() int {
	n := 0
	for _, v := range s.Rejected {
		n += v
	}
	return n
}

// PerAccepted returns the input and output tokens spent per accepted set,
// counting the tokens of rejected attempts too (0, 0 when none was
// accepted).
func (s Stats) PerAccepted() (in, out float64) {
	if s.Accepted == 0 {
		return 0, 0
	}
	t := s.Total()
	return float64(t.InputTokens) / float64(s.Accepted), float64(t.OutputTokens) / float64(s.Accepted)
}

// RejectionRate returns the share of attempts rejected for reason r.
func (s Stats) RejectionRate(r Reason) float64 {
	if s.Attempts == 0 {
		return 0
	}
	return float64(s.Rejected[r]) / float64(s.Attempts)
}

func (s Stats) clone() Stats {
	s.Rejected = maps.Clone(s.Rejected)
	s.Dropped = maps.Clone(s.Dropped)
	s.QuestionsKept = maps.Clone(s.QuestionsKept)
	if s.Rejected == nil {
		s.Rejected = map[Reason]int{}
	}
	if s.Dropped == nil {
		s.Dropped = map[string]int{}
	}
	return s
}

// Recorder accumulates the Stats of generation attempts; it is safe for
// concurrent use. Generators keep one; callers that run attempts of their
// own (the CLI's procedural source) use it to account them the same way.
type Recorder struct {
	mu sync.Mutex
	s  Stats
}

// Record counts one finished attempt.
func (b *Recorder) Record(o *Outcome) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.s.Rejected == nil {
		b.s.Rejected = map[Reason]int{}
		b.s.Dropped = map[string]int{}
	}
	b.s.Attempts++
	if o.Reason == "" {
		b.s.Accepted++
	} else {
		b.s.Rejected[o.Reason]++
		b.s.LastRejection = skill.CapBytes(string(o.Reason)+": "+o.Detail, 200)
		if o.Reason == RejectLLMError && o.Detail != "" {
			b.s.LastLLMError = skill.CapBytes(o.Detail, 200)
		}
	}
	for _, d := range o.Drops {
		b.s.Dropped[d.Key()]++
	}
	b.s.QuestionsReworded += o.QuestionsReworded
	for k, n := range o.QuestionsKept {
		if b.s.QuestionsKept == nil {
			b.s.QuestionsKept = map[string]int{}
		}
		b.s.QuestionsKept[k] += n
	}
	b.s.GenerationCalls += o.GenerationCalls
	b.s.CheckCalls += o.CheckCalls
	b.s.Generation = b.s.Generation.Add(o.Generation)
	b.s.Check = b.s.Check.Add(o.Check)
	b.s.Busy += o.Elapsed
}

// addUsage counts the calls and tokens of an attempt that ended without
// a verdict (its context ended).
func (b *Recorder) addUsage(o *Outcome) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.s.GenerationCalls += o.GenerationCalls
	b.s.CheckCalls += o.CheckCalls
	b.s.Generation = b.s.Generation.Add(o.Generation)
	b.s.Check = b.s.Check.Add(o.Check)
	b.s.Busy += o.Elapsed
}

// Stats returns a copy of the accumulated figures.
func (b *Recorder) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.s.clone()
}
