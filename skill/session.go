package skill

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"time"
)

// Reason is the machine-readable reason of a verdict.
type Reason string

// Verdict reasons. Accepted verdicts carry ReasonOK.
const (
	ReasonOK            Reason = "ok"
	ReasonWrongAnswer   Reason = "wrong_answer"
	ReasonTimeout       Reason = "timeout"
	ReasonTotalTimeout  Reason = "total_timeout"
	ReasonProtocolError Reason = "protocol_error"
	ReasonDeclined      Reason = "declined"
	// ReasonInconclusive marks a verifier-side fault (no challenge
	// available, its own LLM failing): the peer is neither accepted nor
	// held responsible.
	ReasonInconclusive Reason = "inconclusive"
)

// Reasons lists every verdict reason.
var Reasons = []Reason{ReasonOK, ReasonWrongAnswer, ReasonTimeout, ReasonTotalTimeout, ReasonProtocolError, ReasonDeclined, ReasonInconclusive}

// Valid reports whether r is a known reason.
func (r Reason) Valid() bool {
	for _, x := range Reasons {
		if r == x {
			return true
		}
	}
	return false
}

// Challenge is what a prover sees in one round.
type Challenge struct {
	Round     int // 1-based
	Rounds    int // total rounds in the session
	Domain    string
	Narrative string
	Question  string
	Budget    time.Duration
	// Kind is the challenge's kind (LookupKind); "" is NarrativeKind.
	// Sessions fill in the canonical name; the wire carries WireKind.
	Kind string
}

// RoundRecord is the verifier's record of one delivered round.
type RoundRecord struct {
	Round           int
	QuestionIndex   int
	Narrative       string
	Question        string
	ReasoningType   ReasoningType
	AnswerType      AnswerType
	Answer          string // what the prover sent ("" if none)
	Answered        bool
	Correct         bool
	NarrativeTokens int
	Budget          time.Duration
	Elapsed         time.Duration // raw, verifier clock
	Effective       time.Duration // Elapsed minus the RTT credit
}

// Verdict is the outcome of a session.
type Verdict struct {
	Accepted bool
	Reason   Reason
	// FailedRound is the round that decided a rejection: the last
	// recorded round, or the current one when none was recorded; 0 when
	// accepted.
	FailedRound int
	Detail      string
	Rounds      []RoundRecord
	SetID       string
	Domain      string
	// Kind is the canonical kind of the set served (NarrativeKind for a
	// set that names none); "" when no set was served.
	Kind string
}

// Timing is what the transport measured for one answer, all on the
// verifier's clock.
type Timing struct {
	// Elapsed runs from the last byte of the challenge being handed to the
	// transport to the answer being read.
	Elapsed time.Duration
	// RTT is the measured round-trip time; the session credits at most
	// Policy.RTTCredit of it.
	RTT time.Duration
	// SinceStart is the time since the session started, checked against
	// T_total.
	SinceStart time.Duration
}

// Session is the verifier's state machine for one attestation (paper
// Algorithm 1): it hands out one challenge per round and judges each answer
// with early exit on the first failure. It is not safe for concurrent use.
type Session struct {
	set     *Set
	kind    Kind
	policy  Policy
	picks   []int
	budgets []time.Duration
	round   int // index of the current round (0-based)
	records []RoundRecord
	verdict *Verdict
}

// NewSession picks one question per part uniformly at random from rng
// (crypto/rand when nil), as in Eq. 11-12, and computes each round's budget
// from the policy and the human timing model of the set's kind
// (Policy.BudgetFor). It fails when the set is invalid (its kind
// unregistered included) or the policy would give a round a budget too
// close to the human lower bound, or one the wire cannot carry (under
// MinBudget, or above Policy.Total: Policy.CheckBudget); those errors
// wrap ErrPolicy.
func NewSession(set *Set, p Policy, rng io.Reader) (*Session, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	if set == nil {
		return nil, fmt.Errorf("%w: nil set", ErrInvalidSet)
	}
	// A set its source prepared (Prepare: validated as it is now) is not
	// checked a second time; any other is.
	if !set.MarkedValid() {
		if err := set.Validate(); err != nil {
			return nil, err
		}
	}
	k, err := lookupKind(set.Kind)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSet, err)
	}
	if rng == nil {
		rng = rand.Reader
	}
	s := &Session{set: set, kind: k, policy: p}
	for i := 0; i < p.Rounds; i++ {
		part := &set.Parts[i]
		n, err := randIntN(rng, len(part.Questions))
		if err != nil {
			return nil, fmt.Errorf("pick question for part %d: %w", i+1, err)
		}
		var b time.Duration
		if k.byTokens {
			b, err = p.budgetForTokens(k, set.narrativeTokens(i))
		} else {
			b, err = p.BudgetFor(k, part, &part.Questions[n])
		}
		if err == nil {
			err = p.CheckBudget(b)
		}
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", i+1, err)
		}
		s.picks = append(s.picks, n)
		s.budgets = append(s.budgets, b)
	}
	return s, nil
}

// randIntN is crypto/rand.Int(rng, big.NewInt(n)) for 0 < n <= 2^56,
// reading exactly the bytes it reads and drawing the same number from
// them (the big-endian bytes of the bit length of n-1, the surplus high
// bits of the first cleared, drawn again while n or more), without its
// big.Int allocations: every session draws one question a round, and
// seeded tests rely on the draws.
func randIntN(rng io.Reader, n int) (int, error) {
	if n <= 0 || n > 1<<56 {
		return 0, fmt.Errorf("randIntN: bound %d out of range", n)
	}
	bitLen := bits.Len64(uint64(n - 1))
	if bitLen == 0 {
		return 0, nil
	}
	k := (bitLen + 7) / 8
	b := uint(bitLen % 8)
	if b == 0 {
		b = 8
	}
	var buf [8]byte
	for {
		if _, err := io.ReadFull(rng, buf[:k]); err != nil {
			return 0, err
		}
		buf[0] &= uint8(1<<b - 1)
		var v uint64
		for _, c := range buf[:k] {
			v = v<<8 | uint64(c)
		}
		if v < uint64(n) {
			return int(v), nil
		}
	}
}

// Policy returns the session's policy.
func (s *Session) Policy() Policy { return s.policy }

// Set returns the set the session serves.
func (s *Session) Set() *Set { return s.set }

// Kind returns the kind of the set the session serves.
func (s *Session) Kind() Kind { return s.kind }

// Budgets returns the per-round budgets.
func (s *Session) Budgets() []time.Duration { return append([]time.Duration(nil), s.budgets...) }

// Done reports whether a verdict has been reached.
func (s *Session) Done() bool { return s.verdict != nil }

// Current returns the challenge of the current round, or false when the
// session is over.
func (s *Session) Current() (Challenge, bool) {
	if s.verdict != nil {
		return Challenge{}, false
	}
	q := s.question(s.round)
	return Challenge{
		Round:     s.round + 1,
		Rounds:    s.policy.Rounds,
		Domain:    s.set.Domain,
		Narrative: s.set.Parts[s.round].Narrative,
		Question:  q.Question,
		Budget:    s.budgets[s.round],
		Kind:      s.kind.Name,
	}, true
}

func (s *Session) question(i int) *Question { return &s.set.Parts[i].Questions[s.picks[i]] }

// shown returns the narratives delivered so far, the current round's
// included: the context Judge reads description words from.
func (s *Session) shown() []string {
	out := make([]string, 0, s.round+1)
	for i := 0; i <= s.round; i++ {
		out = append(out, s.set.Parts[i].Narrative)
	}
	return out
}

// Expected returns the accepted variants for the current round.
func (s *Session) Expected() []string {
	if s.verdict != nil {
		return nil
	}
	return s.question(s.round).Variants()
}

// Credit returns the RTT credit the session applies for a measured RTT.
func (s *Session) Credit(rtt time.Duration) time.Duration {
	if rtt < 0 {
		return 0
	}
	return min(rtt, s.policy.RTTCredit)
}

// AnswerDeadline returns how long the transport should wait for the
// current round's answer: the budget plus the RTT credit, never past the
// remaining total budget.
func (s *Session) AnswerDeadline(rtt, sinceStart time.Duration) time.Duration {
	if s.verdict != nil {
		return 0
	}
	d := s.budgets[s.round] + s.Credit(rtt)
	if rem := s.policy.Total - sinceStart + s.Credit(rtt); rem < d {
		d = rem
	}
	return max(d, 0)
}

var errDone = errors.New("session already has a verdict")

// Submit judges the answer to the current round. It returns the record of
// the round; when the answer is wrong or late, or the session has reached
// its last round, the session is done and Verdict returns the outcome.
func (s *Session) Submit(answer string, t Timing) (RoundRecord, error) {
	if s.verdict != nil {
		return RoundRecord{}, errDone
	}
	q := s.question(s.round)
	eff := max(t.Elapsed-s.Credit(t.RTT), 0)
	rec := RoundRecord{
		Round:           s.round + 1,
		QuestionIndex:   s.picks[s.round],
		Narrative:       s.set.Parts[s.round].Narrative,
		Question:        q.Question,
		ReasoningType:   q.ReasoningType,
		AnswerType:      q.AnswerType,
		Answer:          answer,
		Answered:        true,
		NarrativeTokens: s.set.narrativeTokens(s.round),
		Budget:          s.budgets[s.round],
		Elapsed:         t.Elapsed,
		Effective:       eff,
	}
	if len(answer) > MaxAnswerBytes {
		// Never store an oversized answer in the transcript.
		rec.Answer = answer[:MaxAnswerBytes]
	}
	judge := s.kind.Judge
	if judge == nil {
		judge = Judge
	}
	rec.Correct = judge(q, answer, s.shown())
	s.records = append(s.records, rec)
	switch {
	case max(t.SinceStart-s.Credit(t.RTT), 0) > s.policy.Total:
		s.finish(ReasonTotalTimeout, fmt.Sprintf("session exceeded T_total %s", s.policy.Total))
	case eff > rec.Budget:
		s.finish(ReasonTimeout, fmt.Sprintf("effective time %s exceeds budget %s", eff.Round(time.Millisecond), rec.Budget))
	case len(answer) > MaxAnswerBytes:
		s.finish(ReasonWrongAnswer, fmt.Sprintf("answer of %d bytes exceeds the %d-byte cap", len(answer), MaxAnswerBytes))
	case !rec.Correct:
		s.finish(ReasonWrongAnswer, "answer does not match")
	default:
		s.round++
		if s.round == s.policy.Rounds {
			s.finish(ReasonOK, "")
		}
	}
	return rec, nil
}

// Fail ends the session without an answer for the current round: the
// prover timed out, declined, broke the protocol, or the verifier itself
// failed (ReasonInconclusive). The current round, if a challenge was
// delivered, is recorded as unanswered.
func (s *Session) Fail(reason Reason, detail string, delivered bool) {
	if s.verdict != nil {
		return
	}
	if delivered {
		s.recordUnanswered(Timing{})
	}
	s.finish(reason, detail)
}

// FailRound ends the session while the current round's challenge was out,
// recording how long the verifier waited (for a timeout, at least the
// budget) so that the transcript shows it.
func (s *Session) FailRound(reason Reason, detail string, t Timing) {
	if s.verdict != nil {
		return
	}
	s.recordUnanswered(t)
	s.finish(reason, detail)
}

func (s *Session) recordUnanswered(t Timing) {
	q := s.question(s.round)
	s.records = append(s.records, RoundRecord{
		Round: s.round + 1, QuestionIndex: s.picks[s.round],
		Narrative: s.set.Parts[s.round].Narrative, Question: q.Question,
		ReasoningType: q.ReasoningType, AnswerType: q.AnswerType,
		NarrativeTokens: s.set.narrativeTokens(s.round), Budget: s.budgets[s.round],
		Elapsed: t.Elapsed, Effective: max(t.Elapsed-s.Credit(t.RTT), 0),
	})
}

func (s *Session) finish(r Reason, detail string) {
	v := &Verdict{Accepted: r == ReasonOK, Reason: r, Detail: detail, Rounds: s.records, SetID: s.set.ID, Domain: s.set.Domain, Kind: s.kind.Name}
	if r != ReasonOK && len(s.records) > 0 {
		v.FailedRound = s.records[len(s.records)-1].Round
	} else if r != ReasonOK {
		v.FailedRound = s.round + 1
	}
	s.verdict = v
}

// Verdict returns the session's verdict, or false while it is still
// running.
func (s *Session) Verdict() (Verdict, bool) {
	if s.verdict == nil {
		return Verdict{}, false
	}
	return *s.verdict, true
}

// TranscriptDigest is the SHA-256 commitment to a narrative session's
// transcript that attestations carry: the domain-separation tag
// "acaptcha/transcript/v1", then for each delivered round its number as a
// big-endian uint32 followed by the narrative, the question and the
// prover's answer, each as a big-endian uint32 length and the UTF-8 bytes.
func TranscriptDigest(rounds []RoundRecord) [32]byte { return TranscriptDigestKind("", rounds) }

// TranscriptDigestKind is the transcript digest of a session of the given
// kind (spec/attestation.md §4). For NarrativeKind (or "") it is
// TranscriptDigest; for any other kind the tag is followed by the marker
// uint32 0xffffffff (no round number has it) and the kind name as a
// big-endian uint32 length and its bytes, whether or not any round was
// delivered, then the rounds as for narratives. With no round it is the
// digest of that prefix (of the tag alone for narratives).
func TranscriptDigestKind(kind string, rounds []RoundRecord) [32]byte {
	h := sha256.New()
	buf := writeString(h, make([]byte, 0, hashChunk), "acaptcha/transcript/v1")
	if k := WireKind(kind); k != "" {
		buf = binary.BigEndian.AppendUint32(buf, 0xffffffff)
		buf = writeString(h, binary.BigEndian.AppendUint32(buf, uint32(len(k))), k)
	}
	for _, r := range rounds {
		buf = binary.BigEndian.AppendUint32(buf, uint32(r.Round))
		for _, f := range []string{r.Narrative, r.Question, r.Answer} {
			buf = writeString(h, binary.BigEndian.AppendUint32(buf, uint32(len(f))), f)
		}
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}
