package skill

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/acaptcha/acaptcha/internal/strictjson"
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
	MaxDomainBytes    = 256 // the wire's cap on Challenge.domain (protocol.md §3)
	MaxVariants       = 8
	MaxQuestions      = 8
	// MaxDistractors caps the other candidates a question lists for the
	// matching guard (spec/verification.md): forms of every candidate the
	// question weighs that is not the answer.
	MaxDistractors = 32
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
	// Distractors lists, in every form the narrative uses (code, full
	// name, descriptive phrase), the other candidates this question weighs.
	// The verifier keeps them, like the answers, and never sends them: an
	// answer that names any of them is wrong (spec/verification.md, the
	// guard against an answer that lists candidates). Optional; without
	// it only exact and numeric matching apply.
	Distractors []string `json:"distractors,omitempty"`
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
// to and decodes from the Appendix A output schema. A set of another
// registered kind (Kind) has the same shape: each part's Narrative is
// that kind's text for the round.
type Set struct {
	// ID identifies the set. When empty it is derived from the content
	// (see ContentID); sources fill it in before serving.
	ID string `json:"id,omitempty"`
	// Kind names the set's challenge kind (LookupKind); empty means
	// NarrativeKind, and narrative sets leave it empty (WireKind) so that
	// their files and IDs are those of 1.0.0.
	Kind   string `json:"kind,omitempty"`
	Domain string `json:"domain"`
	Parts  []Part `json:"parts"`
	// Provenance says what produced the set. Sources set it when they
	// serve; a set file may carry the generator's own record of it.
	Provenance *Provenance `json:"provenance,omitempty"`

	// prep is Prepare's mark (prepared.go); a copy of the Set value does
	// not carry it over (it names the set it was made for).
	prep *prepared
}

// SourceKind names the kind of source that produced a challenge set, as
// attestations carry it (spec/attestation.md). The kinds are ranked by how
// much a script written against this code can do with them.
type SourceKind string

// The source kinds, from weakest to strongest script resistance.
const (
	// SourceUnknown is the kind of a record or set that names none.
	SourceUnknown SourceKind = ""
	// SourceProcedural is the offline generator: text rendered from a
	// public grammar, which a script written against it parses back.
	SourceProcedural SourceKind = "procedural"
	// SourceCorpus is a static collection of sets, whoever wrote them:
	// anyone holding the files can pre-solve them.
	SourceCorpus SourceKind = "corpus"
	// SourceHybrid is a procedural skeleton reworded by an LLM per set.
	SourceHybrid SourceKind = "hybrid"
	// SourceLLM is a set written by an LLM per set and validated.
	SourceLLM SourceKind = "llm"
)

// SourceKinds lists the named source kinds in rank order.
var SourceKinds = []SourceKind{SourceProcedural, SourceCorpus, SourceHybrid, SourceLLM}

// Rank orders source kinds by script resistance: unknown 0, procedural 1,
// corpus 2, hybrid and llm 3 (both are fresh LLM-worded text).
func (k SourceKind) Rank() int {
	switch k {
	case SourceProcedural:
		return 1
	case SourceCorpus:
		return 2
	case SourceHybrid, SourceLLM:
		return 3
	}
	return 0
}

// Valid reports whether k is a named source kind.
func (k SourceKind) Valid() bool { return k.Rank() > 0 }

// AtLeast reports whether k is at least as script-resistant as min.
func (k SourceKind) AtLeast(min SourceKind) bool { return k.Rank() >= min.Rank() }

// ParseSourceKind parses a source kind name.
func ParseSourceKind(s string) (SourceKind, error) {
	k := SourceKind(strings.ToLower(strings.TrimSpace(s)))
	if !k.Valid() {
		return SourceUnknown, fmt.Errorf("unknown challenge source kind %q (want procedural, corpus, hybrid or llm)", s)
	}
	return k, nil
}

// Provenance records what produced a challenge set.
type Provenance struct {
	Source SourceKind `json:"source"`
	// Model is the generating model as provider:model, where known.
	Model string `json:"model,omitempty"`
	// LLMQuestions reports that the questions, not only the narratives,
	// were written or reworded by an LLM.
	LLMQuestions bool `json:"llm_questions,omitempty"`
}

// MaxModelBytes caps Provenance.Model.
const MaxModelBytes = 128

// KindName is the set's kind, NarrativeKind when it names none.
func (s *Set) KindName() string { return CanonicalKind(s.Kind) }

// kindMarker opens the hashed input of a set of a kind other than
// narrative: a length no field can have, so no narrative set's input
// starts with it (spec/attestation.md §3.3).
var kindMarker = [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// ContentID returns a stable identifier of the set's content: the hex
// SHA-256 of its narratives and questions, independent of ID and of JSON
// formatting (spec/attestation.md §3.3). A set of a kind other than
// narrative prefixes the input with kindMarker and its kind name, so a
// narrative set's ID is what it always was and sets of different kinds
// never share an ID.
func (s *Set) ContentID() string {
	if s.MarkedValid() {
		return s.prep.contentID
	}
	return s.contentID()
}

// contentID computes ContentID.
func (s *Set) contentID() string {
	h := sha256.New()
	buf := make([]byte, 0, hashChunk)
	writeField := func(v string) {
		buf = writeString(h, binary.BigEndian.AppendUint64(buf[:0], uint64(len(v))), v)
	}
	if k := WireKind(s.Kind); k != "" {
		h.Write(kindMarker[:])
		writeField(k)
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

// hashChunk is the size of the buffer writeString carries text in.
const hashChunk = 1024

// writeString writes prefix (which it may reuse) and then v to h through
// buf's array, a piece at a time: h.Write([]byte(v)) would copy each
// narrative to the heap. It returns the buffer for the next call.
func writeString(h hash.Hash, prefix []byte, v string) []byte {
	buf := prefix
	for {
		n := min(len(v), cap(buf)-len(buf))
		buf = append(buf, v[:n]...)
		v = v[n:]
		h.Write(buf)
		buf = buf[:0]
		if len(v) == 0 {
			return buf
		}
	}
}

// ErrInvalidSet is wrapped by every structural validation failure.
var ErrInvalidSet = errors.New("invalid challenge set")

// Validate checks the structure a session relies on: a registered kind,
// three parts, each with a non-empty narrative and at least one
// well-formed question whose canonical answer is among its variants and
// fits the answer limits; then the kind's own rules (Kind.Validate: for
// narratives, the paper schema's reasoning and answer types and answer
// length). It is the minimum for serving; generators apply stricter checks
// on top.
func (s *Set) Validate() error {
	if s.Kind != "" && !ValidKindName(s.Kind) {
		return fmt.Errorf("%w: malformed kind %q", ErrInvalidSet, CapBytes(s.Kind, 64))
	}
	k, err := lookupKind(s.Kind)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidSet, err)
	}
	if err := s.validateShape(); err != nil {
		return err
	}
	if k.Validate != nil {
		if err := k.Validate(s); err != nil {
			if !errors.Is(err, ErrInvalidSet) {
				err = fmt.Errorf("%w: kind %s: %w", ErrInvalidSet, k.Name, err)
			}
			return err
		}
	}
	return nil
}

// validateShape is the part of Validate every kind shares.
func (s *Set) validateShape() error {
	if len(s.Parts) != Parts {
		return fmt.Errorf("%w: %d parts, want %d", ErrInvalidSet, len(s.Parts), Parts)
	}
	if strings.TrimSpace(s.Domain) == "" {
		return fmt.Errorf("%w: empty domain", ErrInvalidSet)
	}
	if len(s.Domain) > MaxDomainBytes || !utf8.ValidString(s.Domain) {
		// A prover refuses a Challenge whose domain breaks the wire's
		// limit (protocol.md §6 step 7): served, the set would end an
		// honest prover's session in protocol_error.
		return fmt.Errorf("%w: domain is not UTF-8 of at most %d bytes (%d bytes)", ErrInvalidSet, MaxDomainBytes, len(s.Domain))
	}
	if pv := s.Provenance; pv != nil {
		if pv.Source != SourceUnknown && !pv.Source.Valid() {
			return fmt.Errorf("%w: unknown provenance source %q", ErrInvalidSet, pv.Source)
		}
		if len(pv.Model) > MaxModelBytes {
			return fmt.Errorf("%w: provenance model of %d bytes exceeds %d", ErrInvalidSet, len(pv.Model), MaxModelBytes)
		}
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
	vs := q.Variants()
	if len(vs) > MaxVariants {
		return fmt.Errorf("%d answer variants, at most %d", len(vs), MaxVariants)
	}
	if !MatchAny(q.Answer, vs) {
		return fmt.Errorf("canonical answer %q is not among its variants", q.Answer)
	}
	// Variants may spell a short answer out in full ("lactate dehydrogenase
	// gamma" for "LDH-γ"); they only have to fit the wire cap on answers.
	for _, v := range vs {
		if n := len(strings.TrimSpace(v)); n == 0 || n > MaxAnswerBytes {
			return fmt.Errorf("answer variant %q has %d bytes, want 1..%d", v, n, MaxAnswerBytes)
		}
	}
	if len(q.Distractors) > MaxDistractors {
		return fmt.Errorf("%d distractors, at most %d", len(q.Distractors), MaxDistractors)
	}
	for _, d := range q.Distractors {
		if n := len(strings.TrimSpace(d)); n == 0 || n > MaxAnswerBytes {
			return fmt.Errorf("distractor %q has %d bytes, want 1..%d", d, n, MaxAnswerBytes)
		}
		// Exact comparison only: Validate runs for every session, and the
		// generators check distractors against Judge when they write them.
		if MatchAny(d, vs) {
			return fmt.Errorf("distractor %q is also an accepted answer", d)
		}
	}
	for _, d := range q.DependsOn {
		if d < 1 || d >= part {
			return fmt.Errorf("depends_on %d is not an earlier part", d)
		}
	}
	return nil
}

// validateNarrative is the narrative kind's rule for one question.
func (q *Question) validateNarrative() error {
	if !q.ReasoningType.Valid() {
		return fmt.Errorf("unknown reasoning_type %q", q.ReasoningType)
	}
	if q.AnswerType != "" && !q.AnswerType.Valid() {
		return fmt.Errorf("unknown answer_type %q", q.AnswerType)
	}
	if n := utf8.RuneCountInString(strings.TrimSpace(q.Answer)); n > MaxAnswerChars {
		return fmt.Errorf("canonical answer %q has %d characters, at most %d", q.Answer, n, MaxAnswerChars)
	}
	return nil
}

// DecodeSet parses one set from paper-schema JSON, rejecting unknown
// fields, trailing data and structurally invalid sets, and fills in ID.
func DecodeSet(data []byte) (*Set, error) {
	// Read as every parser reads it (generation.md, "Format"): UTF-8, no
	// unpaired surrogate escape, no duplicate member, and member names
	// spelled exactly as the schema does (encoding/json would match
	// "Answer" to "answer"; DisallowUnknownFields refuses the rest).
	if err := strictjson.Check(data, func(name string) error {
		if !setMemberNames()[name] {
			return fmt.Errorf("unknown member %q", name)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("decode challenge set: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var s Set
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("decode challenge set: %w", err)
	}
	// Nothing but white space may follow the object (generation.md,
	// "Format"). dec.More reports false before a ']' or '}', so it took
	// `{...}]` and `{...}}}` as one object.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("decode challenge set: trailing data after the JSON object")
	}
	if s.ID == "" {
		s.ID = s.ContentID()
	}
	// Validated once here: the set is new and goes to its caller as it
	// is, so the session drawn from it need not check it again.
	if err := s.Prepare(); err != nil {
		return nil, err
	}
	return &s, nil
}

// setMemberNames is every JSON member name of the set schema (Set and the
// types it holds), as their json tags spell them.
var setMemberNames = sync.OnceValue(func() map[string]bool {
	names := map[string]bool{}
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				walk(f.Type)
				continue
			}
			if name == "" {
				name = f.Name
			}
			names[name] = true
			walk(f.Type)
		}
	}
	walk(reflect.TypeOf(Set{}))
	return names
})
