package skill

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ReasoningType names the kind of inference a question needs (paper
// Appendix A).
type ReasoningType string

// The six reasoning types of the generation template.
const (
	Negation    ReasoningType = "negation"
	Comparison  ReasoningType = "comparison"
	Temporal    ReasoningType = "temporal"
	MultiHop    ReasoningType = "multi_hop"
	Conditional ReasoningType = "conditional"
	Causal      ReasoningType = "causal"
)

// ReasoningTypes lists every valid reasoning type.
var ReasoningTypes = []ReasoningType{Negation, Comparison, Temporal, MultiHop, Conditional, Causal}

// Valid reports whether r is one of the six reasoning types.
func (r ReasoningType) Valid() bool {
	for _, t := range ReasoningTypes {
		if r == t {
			return true
		}
	}
	return false
}

// AnswerType names the shape of a question's answer.
type AnswerType string

// The three answer types of the generation template.
const (
	EntityAnswer  AnswerType = "entity"
	NumericAnswer AnswerType = "numeric"
	LabelAnswer   AnswerType = "label"
)

// AnswerTypes lists every valid answer type.
var AnswerTypes = []AnswerType{EntityAnswer, NumericAnswer, LabelAnswer}

// Valid reports whether a is one of the three answer types.
func (a AnswerType) Valid() bool {
	return a == EntityAnswer || a == NumericAnswer || a == LabelAnswer
}

// Limits on challenge content. MaxAnswerBytes is also the wire cap on a
// prover's answer.
const (
	Parts             = 3
	MaxAnswerBytes    = 64
	MaxAnswerChars    = 20 // canonical answers (Appendix A: short strings of at most 20 chars)
	MaxNarrativeBytes = 32 << 10
	MaxQuestionBytes  = 2 << 10
	MaxVariants       = 8
	MaxQuestions      = 8
)

// Question is one question of a part, in the paper's Appendix A schema.
// Answers lists every accepted variant with the canonical answer first; a
// set written without it (as in the paper's Appendix C) is accepted and
// Answers defaults to [Answer].
type Question struct {
	Question      string        `json:"question"`
	Answer        string        `json:"answer"`
	Answers       []string      `json:"answers,omitempty"`
	ReasoningType ReasoningType `json:"reasoning_type"`
	AnswerType    AnswerType    `json:"answer_type"`
	// DependsOn lists the earlier parts (1-based) whose answers this
	// question needs. It is an acaptcha extension of the paper schema,
	// used by tests and evaluation to tell memory questions apart.
	DependsOn []int `json:"depends_on,omitempty"`
}

// Variants returns the accepted answers: Answers if set, else [Answer].
func (q *Question) Variants() []string {
	if len(q.Answers) > 0 {
		return q.Answers
	}
	return []string{q.Answer}
}

// Part is one narrative and its questions.
type Part struct {
	Narrative string     `json:"narrative"`
	Questions []Question `json:"questions"`
}

// Set is a three-part narrative set in one domain (paper §5.3). It encodes
// to and decodes from the Appendix A output schema.
type Set struct {
	// ID identifies the set. When empty it is derived from the content
	// (see ContentID); sources fill it in before serving.
	ID     string `json:"id,omitempty"`
	Domain string `json:"domain"`
	Parts  []Part `json:"parts"`
}

// ContentID returns a stable identifier of the set's content: the hex
// SHA-256 of its narratives and questions, independent of ID and of JSON
// formatting.
func (s *Set) ContentID() string {
	h := sha256.New()
	writeField := func(v string) {
		var n [8]byte
		l := uint64(len(v))
		for i := range n {
			n[i] = byte(l >> (56 - 8*i))
		}
		h.Write(n[:])
		h.Write([]byte(v))
	}
	writeField(s.Domain)
	for _, p := range s.Parts {
		writeField(p.Narrative)
		for _, q := range p.Questions {
			writeField(q.Question)
			writeField(q.Answer)
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// ErrInvalidSet is wrapped by every structural validation failure.
var ErrInvalidSet = errors.New("invalid challenge set")

// Validate checks the structure a session relies on: three parts, each with
// a non-empty narrative and at least one well-formed question whose
// canonical answer is among its variants and fits the answer limits. It is
// the minimum for serving; generators apply stricter checks on top.
func (s *Set) Validate() error {
	if len(s.Parts) != Parts {
		return fmt.Errorf("%w: %d parts, want %d", ErrInvalidSet, len(s.Parts), Parts)
	}
	if strings.TrimSpace(s.Domain) == "" {
		return fmt.Errorf("%w: empty domain", ErrInvalidSet)
	}
	for i := range s.Parts {
		p := &s.Parts[i]
		if strings.TrimSpace(p.Narrative) == "" {
			return fmt.Errorf("%w: part %d: empty narrative", ErrInvalidSet, i+1)
		}
		if len(p.Narrative) > MaxNarrativeBytes {
			return fmt.Errorf("%w: part %d: narrative of %d bytes exceeds %d", ErrInvalidSet, i+1, len(p.Narrative), MaxNarrativeBytes)
		}
		if len(p.Questions) == 0 || len(p.Questions) > MaxQuestions {
			return fmt.Errorf("%w: part %d: %d questions, want 1..%d", ErrInvalidSet, i+1, len(p.Questions), MaxQuestions)
		}
		for j := range p.Questions {
			if err := p.Questions[j].validate(i + 1); err != nil {
				return fmt.Errorf("%w: part %d question %d: %v", ErrInvalidSet, i+1, j+1, err)
			}
		}
	}
	return nil
}

func (q *Question) validate(part int) error {
	if strings.TrimSpace(q.Question) == "" {
		return errors.New("empty question")
	}
	if len(q.Question) > MaxQuestionBytes {
		return fmt.Errorf("question of %d bytes exceeds %d", len(q.Question), MaxQuestionBytes)
	}
	if strings.TrimSpace(q.Answer) == "" {
		return errors.New("empty answer")
	}
	if !q.ReasoningType.Valid() {
		return fmt.Errorf("unknown reasoning_type %q", q.ReasoningType)
	}
	if q.AnswerType != "" && !q.AnswerType.Valid() {
		return fmt.Errorf("unknown answer_type %q", q.AnswerType)
	}
	vs := q.Variants()
	if len(vs) > MaxVariants {
		return fmt.Errorf("%d answer variants, at most %d", len(vs), MaxVariants)
	}
	if !MatchAny(q.Answer, vs) {
		return fmt.Errorf("canonical answer %q is not among its variants", q.Answer)
	}
	if n := utf8.RuneCountInString(strings.TrimSpace(q.Answer)); n > MaxAnswerChars {
		return fmt.Errorf("canonical answer %q has %d characters, at most %d", q.Answer, n, MaxAnswerChars)
	}
	// Variants may spell a short answer out in full ("lactate dehydrogenase
	// gamma" for "LDH-γ"); they only have to fit the wire cap on answers.
	for _, v := range vs {
		if n := len(strings.TrimSpace(v)); n == 0 || n > MaxAnswerBytes {
			return fmt.Errorf("answer variant %q has %d bytes, want 1..%d", v, n, MaxAnswerBytes)
		}
	}
	for _, d := range q.DependsOn {
		if d < 1 || d >= part {
			return fmt.Errorf("depends_on %d is not an earlier part", d)
		}
	}
	return nil
}

// DecodeSet parses one set from paper-schema JSON, rejecting unknown
// fields, trailing data and structurally invalid sets, and fills in ID.
func DecodeSet(data []byte) (*Set, error) {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var s Set
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("decode challenge set: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decode challenge set: trailing data after the JSON object")
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.ID == "" {
		s.ID = s.ContentID()
	}
	return &s, nil
}
