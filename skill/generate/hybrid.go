package generate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

// The hybrid generator renders a procedural skeleton through the LLM: the
// offline generator writes a set whose answers are known by construction,
// the model rewords each part's narrative (facts fixed), and the set keeps
// the skeleton's questions and answers. The rewording is checked for fact
// survival (see hybrid_facts.go) and then goes through the same
// validation pipeline as an LLM-written set, cross-check included, so
// the solver must still reproduce the ground truth from the new text.

// Reasons a hybrid attempt is rejected, besides those of SetReasons.
const (
	// RejectFactLost: a rewording dropped an identifier, alias, number,
	// date or answer of its paragraph in the skeleton.
	RejectFactLost Reason = "fact_lost"
	// RejectFactAdded: a rewording has an identifier, number or date the
	// skeleton's part did not.
	RejectFactAdded Reason = "fact_added"
	// RejectLengthDrift: a rewording's length differs from the skeleton
	// part's by more than HybridConfig.LengthDrift.
	RejectLengthDrift Reason = "length_drift"
	// RejectParagraphs: a rewording has another number of paragraphs, so
	// the facts are no longer scattered as the skeleton scattered them.
	RejectParagraphs Reason = "paragraphs_changed"
)

// HybridReasons lists the rejection reasons only the hybrid generator
// gives. Earlier answers newly named in a later part are RejectLeakage.
var HybridReasons = []Reason{RejectFactLost, RejectFactAdded, RejectLengthDrift, RejectParagraphs}

// Defaults of HybridConfig.
const (
	DefaultHybridTemperature = 0.7
	DefaultHybridMaxTokens   = 4096
	DefaultLengthDrift       = 0.25
	DefaultSkeletonTries     = 8
	DefaultHybridAttempts    = 3
)

// HybridConfig configures a Hybrid.
type HybridConfig struct {
	// Config configures the rewording model, validation, retries, the
	// token budget and accounting as for a Generator. Model is required.
	// Domains must be procedural domains; Params also shape the skeletons
	// (length and questions per part). Temperature defaults to
	// DefaultHybridTemperature and MaxTokens to DefaultHybridMaxTokens.
	Config
	// Skeletons supplies the sets to reword (nil: a crypto-random
	// procedural generator over Domains and Params).
	Skeletons skill.Source
	// SkeletonTries bounds how many skeletons one attempt draws until one
	// passes offline validation (DefaultSkeletonTries).
	SkeletonTries int
	// Attempts bounds the attempts of one Produce call, each with a new
	// skeleton (DefaultHybridAttempts). Provider failures end it early.
	Attempts int
	// LengthDrift is the accepted relative change of a part's length in
	// skill.CountTokens units (DefaultLengthDrift, at most 1).
	LengthDrift float64
}

// Hybrid rewords procedural skeletons with an LLM and keeps their ground
// truth. It is a Producer for a Pool and safe for concurrent use.
type Hybrid struct {
	g        *Generator
	skel     skill.Source
	tries    int
	attempts int
	drift    float64
}

var _ Producer = (*Hybrid)(nil)

// NewHybrid validates cfg and returns a hybrid generator.
func NewHybrid(cfg HybridConfig) (*Hybrid, error) {
	if cfg.Temperature <= 0 {
		cfg.Temperature = DefaultHybridTemperature
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultHybridMaxTokens
	}
	if cfg.LengthDrift == 0 {
		cfg.LengthDrift = DefaultLengthDrift
	}
	if cfg.LengthDrift < 0 || cfg.LengthDrift > 1 {
		return nil, fmt.Errorf("hybrid: length drift %.2f, want 0..1", cfg.LengthDrift)
	}
	if cfg.SkeletonTries <= 0 {
		cfg.SkeletonTries = DefaultSkeletonTries
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = DefaultHybridAttempts
	}
	g, err := New(cfg.Config)
	if err != nil {
		return nil, fmt.Errorf("hybrid: %w", err)
	}
	h := &Hybrid{g: g, skel: cfg.Skeletons, tries: cfg.SkeletonTries, attempts: cfg.Attempts, drift: cfg.LengthDrift}
	if h.skel == nil {
		p := g.Params()
		pc := procedural.Config{MinTokens: p.MinTokens, MaxTokens: p.MaxTokens, QuestionsPerPart: p.QuestionsPerPart}
		for _, d := range g.domains {
			pc.Domains = append(pc.Domains, d.Name)
		}
		if len(cfg.Domains) == 0 {
			pc.Domains = nil // every procedural domain
		}
		if h.skel, err = procedural.New(pc); err != nil {
			return nil, fmt.Errorf("hybrid: skeletons: %w", err)
		}
	}
	return h, nil
}

// Name describes the generator ("hybrid:openai:gpt-4o-mini").
func (h *Hybrid) Name() string { return "hybrid:" + h.g.cfg.Model.Name() }

// Params returns the content parameters with defaults filled in.
func (h *Hybrid) Params() Params { return h.g.Params() }

// Kind implements skill.Provenancer: the sets Produce makes are
// procedural ones reworded by the LLM (skill.SourceHybrid).
func (h *Hybrid) Kind() skill.SourceKind { return skill.SourceHybrid }

// Stats returns the accounting so far.
func (h *Hybrid) Stats() Stats { return h.g.Stats() }

// Produce implements Producer: it makes up to HybridConfig.Attempts
// attempts, each with a new skeleton, and returns the first accepted set,
// or an error wrapping ErrRejected (the last rejection), ErrBudget or the
// context's error. A failure of the provider ends it at once, so the
// pool's backoff applies.
func (h *Hybrid) Produce(ctx context.Context) (*skill.Set, error) {
	var last error
	for range h.attempts {
		o, err := h.Generate(ctx)
		if err != nil {
			return nil, err
		}
		if o.Reason == "" {
			return o.Set, nil
		}
		last = o.Err()
		if !contentRejection(last) {
			break
		}
	}
	return nil, last
}

// Generate makes one attempt: it draws a skeleton that passes offline
// validation, rewords its parts, checks that the facts survived and
// validates the result. A rejected attempt is an Outcome with a Reason
// and a nil error; the error is non-nil only when the token budget is
// spent (*BudgetError), the skeleton source failed, or ctx ended (tokens
// are still counted in Stats).
func (h *Hybrid) Generate(ctx context.Context) (*Outcome, error) {
	return h.g.accounted(ctx, "hybrid ", &Outcome{}, h.attempt)
}

// attempt fills o; it returns an error only when ctx ended or the
// skeleton source failed.
func (h *Hybrid) attempt(ctx context.Context, o *Outcome) error {
	g := h.g
	skel, pre, err := h.skeleton(ctx)
	if err != nil {
		return err
	}
	if pre != nil {
		o.Domain = pre.domain
		o.Reason, o.Detail = pre.rep.Reason, "skeleton: "+pre.rep.Detail
		return nil
	}
	o.Domain = skel.Domain
	inv := newInventory(skel)
	out := cloneSet(skel)
	out.ID = ""
	for pi := range skel.Parts {
		v, _ := g.variation()
		style := rewordStyles[uint(v.Seed)%uint(len(rewordStyles))]
		text, err := g.call(ctx, buildRewordPrompt(skel, pi, inv.keepTerms(pi), style, h.drift), v, o)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return fmt.Errorf("hybrid: %w", cerr)
			}
			o.callFailed(err, fmt.Sprintf("part %d: %v", pi+1, err))
			return nil
		}
		narr, err := DecodeRewording(text)
		if err != nil {
			o.Reason, o.Detail = RejectMalformed, fmt.Sprintf("part %d: %v", pi+1, err)
			return nil
		}
		if reason, detail := inv.checkRewording(pi, narr, h.drift); reason != "" {
			o.Reason, o.Detail = reason, detail
			return nil
		}
		out.Parts[pi].Narrative = narr
	}
	reworded, err := h.rewordQuestions(ctx, skel, inv, out, o)
	if err != nil || o.Reason != "" {
		return err
	}
	// Set before validation, which picks the white-box attackers by it.
	out.Provenance = &skill.Provenance{Source: skill.SourceHybrid, Model: g.modelName(), LLMQuestions: o.QuestionsKept == nil}
	rep, err := g.validator.Validate(ctx, out)
	o.Report, o.Drops = rep, rep.Drops
	o.CheckCalls, o.Check = rep.Calls, rep.Usage
	if err != nil {
		return fmt.Errorf("hybrid: %w", err)
	}
	if !rep.Accepted() {
		o.Reason, o.Detail = rep.Reason, rep.Detail
		return nil
	}
	// The served questions are LLM-worded when every one that survived
	// validation was reworded.
	all := true
	for _, p := range rep.Set.Parts {
		for _, q := range p.Questions {
			all = all && reworded[q.Question]
		}
	}
	rep.Set.Provenance.LLMQuestions = all
	o.Set = rep.Set
	return nil
}

// rewordQuestions asks the model to reword every question of skel in one
// request, checks each rewording (inventory.checkQuestion) and writes the
// ones that pass into out; a question whose rewording fails keeps its
// skeleton wording and is counted in o.QuestionsKept by reason. Keeping
// the original rather than failing the attempt spends no further tokens
// and loses no ground truth: the set is then served with some questions
// in the skeleton's wording, which its provenance says (LLMQuestions
// false). A malformed reply keeps every original; a failed call rejects
// the attempt like a failed narrative call. It returns the set of
// reworded question texts, and an error only when ctx ended.
func (h *Hybrid) rewordQuestions(ctx context.Context, skel *skill.Set, inv *inventory, out *skill.Set, o *Outcome) (map[string]bool, error) {
	g := h.g
	keep := make([][][]string, len(skel.Parts))
	for pi, p := range skel.Parts {
		for qi := range p.Questions {
			keep[pi] = append(keep[pi], inv.questionKeep(pi, qi))
		}
	}
	kept := func(why string) {
		if o.QuestionsKept == nil {
			o.QuestionsKept = map[string]int{}
		}
		o.QuestionsKept[why]++
	}
	v, _ := g.variation()
	text, err := g.call(ctx, buildQuestionPrompt(skel, keep), v, o)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("hybrid: %w", cerr)
		}
		o.callFailed(err, fmt.Sprintf("questions: %v", err))
		return nil, nil
	}
	got, err := DecodeQuestionRewording(text)
	if err != nil {
		g.log.Info("hybrid question rewording malformed, keeping the skeleton's wording", "err", err)
	}
	reworded := map[string]bool{}
	for pi, p := range skel.Parts {
		used := map[string]bool{}
		var pending []int
		for qi := range p.Questions {
			if err != nil {
				kept(QuestionKeptMalformed)
				used[skill.Normalize(p.Questions[qi].Question)] = true
				continue
			}
			nt, ok := got[fmt.Sprintf("%d.%d", pi+1, qi+1)]
			if !ok {
				kept(QuestionKeptMissing)
				used[skill.Normalize(p.Questions[qi].Question)] = true
				continue
			}
			clean, why, detail := inv.checkQuestion(pi, qi, nt)
			if why != "" {
				g.log.Debug("hybrid question keeps its wording", "part", pi+1, "question", qi+1, "why", why, "detail", detail)
				kept(why)
				used[skill.Normalize(p.Questions[qi].Question)] = true
				continue
			}
			out.Parts[pi].Questions[qi].Question = clean
			pending = append(pending, qi)
		}
		for _, qi := range pending {
			q := &out.Parts[pi].Questions[qi]
			if k := skill.Normalize(q.Question); used[k] {
				kept(QuestionKeptDuplicate)
				q.Question = p.Questions[qi].Question
				continue
			} else {
				used[k] = true
			}
			reworded[q.Question] = true
			o.QuestionsReworded++
		}
	}
	return reworded, nil
}

// skeletonReject is the offline verdict on the last skeleton drawn when
// none passed.
type skeletonReject struct {
	domain string
	rep    *Report
}

// skeleton draws skeletons until one passes the offline stages of
// validation (structure with the rules for fresh output, leakage, script
// resistance), so no tokens are spent on a set that would fail without
// the model. It gives up after SkeletonTries draws with the last verdict.
func (h *Hybrid) skeleton(ctx context.Context) (*skill.Set, *skeletonReject, error) {
	var last *skeletonReject
	for range h.tries {
		s, err := h.skel.Next(ctx)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, nil, fmt.Errorf("hybrid: %w", cerr)
			}
			return nil, nil, fmt.Errorf("hybrid: skeleton from %s: %w", h.skel.Name(), err)
		}
		rep, err := h.g.validator.Run(ctx, s, Mode{Fresh: true})
		if err != nil {
			return nil, nil, fmt.Errorf("hybrid: %w", err)
		}
		if rep.Accepted() {
			return s, nil, nil
		}
		last = &skeletonReject{domain: s.Domain, rep: rep}
	}
	return nil, last, nil
}

// cloneSet copies s deeply.
func cloneSet(s *skill.Set) *skill.Set {
	out := &skill.Set{ID: s.ID, Domain: s.Domain, Parts: make([]skill.Part, len(s.Parts))}
	if s.Provenance != nil {
		pv := *s.Provenance
		out.Provenance = &pv
	}
	for pi, p := range s.Parts {
		np := skill.Part{Narrative: p.Narrative, Questions: make([]skill.Question, len(p.Questions))}
		for qi, q := range p.Questions {
			q.Answers = slices.Clone(q.Answers)
			q.DependsOn = slices.Clone(q.DependsOn)
			q.Distractors = slices.Clone(q.Distractors)
			np.Questions[qi] = q
		}
		out.Parts[pi] = np
	}
	return out
}

// DecodeRewording parses a rewording reply: exactly one JSON object
// {"narrative": "..."} (unknown keys are errors) with a non-empty
// narrative, nothing around it but white space and, as DecodeOutput
// allows, one Markdown code fence. Errors wrap ErrMalformed.
func DecodeRewording(text string) (string, error) {
	if len(text) > MaxOutputBytes {
		return "", fmt.Errorf("%w: reply of %d bytes exceeds %d", ErrMalformed, len(text), MaxOutputBytes)
	}
	body, err := unfence(strings.TrimSpace(text))
	if err != nil {
		return "", err
	}
	if body == "" {
		return "", fmt.Errorf("%w: empty reply", ErrMalformed)
	}
	if body[0] != '{' {
		return "", fmt.Errorf("%w: reply does not start with a JSON object (starts %q)", ErrMalformed, snippet(body, 40))
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.DisallowUnknownFields()
	var r struct {
		Narrative *string `json:"narrative"`
	}
	if err := dec.Decode(&r); err != nil {
		return "", fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("%w: data after the JSON object", ErrMalformed)
	}
	if r.Narrative == nil {
		return "", fmt.Errorf("%w: no narrative", ErrMalformed)
	}
	narr := strings.TrimSpace(*r.Narrative)
	switch {
	case narr == "":
		return "", fmt.Errorf("%w: empty narrative", ErrMalformed)
	case len(narr) > skill.MaxNarrativeBytes:
		return "", fmt.Errorf("%w: narrative of %d bytes exceeds %d", ErrMalformed, len(narr), skill.MaxNarrativeBytes)
	}
	return narr, nil
}

// maxRewordedQuestions caps the entries of a question-rewording reply.
const maxRewordedQuestions = skill.Parts * skill.MaxQuestions

var questionID = regexp.MustCompile(`^[1-9]\.[1-9]$`)

// DecodeQuestionRewording parses a question-rewording reply: exactly one
// JSON object {"questions": [{"id": "P.Q", "question": "..."}]} (unknown
// keys are errors; ids unique, of the form part.question), nothing around
// it but white space and, as DecodeOutput allows, one Markdown code fence.
// It returns the questions by id, trimmed; their content is checked by
// the caller. Errors wrap ErrMalformed.
func DecodeQuestionRewording(text string) (map[string]string, error) {
	if len(text) > MaxOutputBytes {
		return nil, fmt.Errorf("%w: reply of %d bytes exceeds %d", ErrMalformed, len(text), MaxOutputBytes)
	}
	body, err := unfence(strings.TrimSpace(text))
	if err != nil {
		return nil, err
	}
	if body == "" || body[0] != '{' {
		return nil, fmt.Errorf("%w: reply does not start with a JSON object (starts %q)", ErrMalformed, snippet(body, 40))
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.DisallowUnknownFields()
	var r struct {
		Questions []struct {
			ID       string  `json:"id"`
			Question *string `json:"question"`
		} `json:"questions"`
	}
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: data after the JSON object", ErrMalformed)
	}
	if len(r.Questions) == 0 {
		return nil, fmt.Errorf("%w: no questions", ErrMalformed)
	}
	if len(r.Questions) > maxRewordedQuestions {
		return nil, fmt.Errorf("%w: %d questions, at most %d", ErrMalformed, len(r.Questions), maxRewordedQuestions)
	}
	out := make(map[string]string, len(r.Questions))
	for _, q := range r.Questions {
		id := strings.TrimSpace(q.ID)
		if !questionID.MatchString(id) {
			return nil, fmt.Errorf("%w: question id %q is not part.question", ErrMalformed, snippet(id, 20))
		}
		if _, dup := out[id]; dup {
			return nil, fmt.Errorf("%w: question %s given twice", ErrMalformed, id)
		}
		if q.Question == nil {
			return nil, fmt.Errorf("%w: question %s has no text", ErrMalformed, id)
		}
		out[id] = strings.TrimSpace(*q.Question)
	}
	return out, nil
}
