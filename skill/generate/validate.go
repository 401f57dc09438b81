package generate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/acaptcha/acaptcha/llm"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/attack"
	"github.com/acaptcha/acaptcha/skill/solve"
)

// ValidatorConfig configures a Validator.
type ValidatorConfig struct {
	// Params are the content parameters structure is checked against.
	Params Params
	// Policy, when set, rejects sets with a narrative too short for the
	// policy to budget (see skill.Policy.Budget).
	Policy *skill.Policy
	// Attackers are the script attackers (attack.All() when nil, its
	// random attacker seeded with attack.DefaultRandomSeed).
	Attackers []attack.Named
	// Stateful names the attackers whose answers depend on the earlier
	// rounds of their session (default: attack.StatefulRouter). They are
	// run in every combination of earlier rounds' questions a session can
	// produce; the others, whose answers depend on the current round only,
	// in one.
	Stateful []string
	// MaxScriptContexts caps how many combinations of earlier rounds'
	// questions a stateful attacker is run in for one question (default
	// 27, every combination with three questions per part).
	MaxScriptContexts int
	// WhiteBox says which white-box attackers (attack.WhiteBox) run on a
	// set besides Attackers; see WhiteBoxMode. The default runs those of
	// the set's source, except on procedural sets.
	WhiteBox WhiteBoxMode
	// WhiteBoxKind, when set, picks the white-box attackers as for this
	// source kind instead of the set's Provenance (for example to inspect
	// a file known to be a hybrid rewording).
	WhiteBoxKind skill.SourceKind
	// CrossCheck lists the models whose solvers must reproduce every
	// answer. Empty skips cross-validation (offline validation).
	CrossCheck []*llm.Model
	// CallTimeout bounds each cross-check call (default 60 s).
	CallTimeout time.Duration
	// AnswerMaxTokens caps each answer a cross-check solver writes
	// (solve.Config.MaxAnswerTokens; solve.DefaultMaxAnswerTokens when
	// 0): the prover's cap, so that a reasoning model has the same room
	// to think when it validates a set as when it answers one.
	AnswerMaxTokens int
	// Retry retries cross-check calls refused with HTTP 429.
	Retry llm.RetryPolicy
	// StrictLeakage rejects any mention of an earlier answer in a later
	// narrative; by default only a mention tied to the earlier finding is
	// a leak (see Validator.statesAnswer). Questions of later parts never
	// may name an earlier answer.
	StrictLeakage bool
	// Logger receives debug logs (slog.Default() when nil).
	Logger *slog.Logger
}

// WhiteBoxMode selects the white-box attackers a Validator runs. They are
// chosen by the set's source kind (ValidatorConfig.WhiteBoxKind, else the
// set's Provenance; a set without provenance, or from a static corpus, is
// attacked as LLM-written text) and run like the stateful attackers, in
// every context of earlier rounds.
type WhiteBoxMode string

const (
	// WhiteBoxAuto (the default) runs attack.WhiteBox(kind) for every
	// kind but procedural. Procedural sets are an offline demo source:
	// their inverter answers nearly every question, so filtering by it
	// would leave nothing to serve; its figure is reported by the eval,
	// not used as a filter.
	WhiteBoxAuto WhiteBoxMode = ""
	// WhiteBoxOff runs no white-box attacker.
	WhiteBoxOff WhiteBoxMode = "off"
	// WhiteBoxAlways runs attack.WhiteBox(kind) for every kind, the
	// procedural inverter on procedural sets included (inspection and
	// measurement).
	WhiteBoxAlways WhiteBoxMode = "always"
)

// ParseWhiteBoxMode parses "auto" (or ""), "off" or "always".
func ParseWhiteBoxMode(s string) (WhiteBoxMode, error) {
	switch m := WhiteBoxMode(strings.ToLower(strings.TrimSpace(s))); m {
	case "auto", WhiteBoxAuto:
		return WhiteBoxAuto, nil
	case WhiteBoxOff, WhiteBoxAlways:
		return m, nil
	}
	return WhiteBoxAuto, fmt.Errorf("validator: unknown white-box mode %q (want auto, off or always)", s)
}

// whiteBoxFor returns the white-box attackers to run on s.
func (v *Validator) whiteBoxFor(s *skill.Set) []attack.Named {
	kind := v.cfg.WhiteBoxKind
	if kind == skill.SourceUnknown && s != nil && s.Provenance != nil {
		kind = s.Provenance.Source
	}
	return v.whiteBoxForKind(kind)
}

// ScriptAttackers names the attackers stage 3 runs on a set of the given
// source kind, in order: the configured attackers (attack.All() by
// default), then the white-box attackers. kind stands for the set's
// provenance; ValidatorConfig.WhiteBoxKind, when set, overrides it as in
// validation. Whoever measures script resistance on validated sets needs
// the list: every attacker in it fails the kept questions by
// construction.
func (v *Validator) ScriptAttackers(kind skill.SourceKind) []string {
	if v.cfg.WhiteBoxKind != skill.SourceUnknown {
		kind = v.cfg.WhiteBoxKind
	}
	var out []string
	for _, a := range v.cfg.Attackers {
		out = append(out, a.Name)
	}
	for _, a := range v.whiteBoxForKind(kind) {
		if !slices.Contains(out, a.Name) {
			out = append(out, a.Name)
		}
	}
	return out
}

func (v *Validator) whiteBoxForKind(kind skill.SourceKind) []attack.Named {
	if v.cfg.WhiteBox == WhiteBoxOff {
		return nil
	}
	switch kind {
	case skill.SourceUnknown, skill.SourceCorpus:
		kind = skill.SourceLLM
	case skill.SourceProcedural:
		if v.cfg.WhiteBox != WhiteBoxAlways {
			return nil
		}
	}
	return attack.WhiteBox(kind)
}

// Defaults of ValidatorConfig.
const (
	DefaultMaxScriptContexts = 27
	DefaultCheckTimeout      = 60 * time.Second
)

// Validator runs the validation pipeline on generated sets. It is safe
// for concurrent use.
type Validator struct {
	cfg ValidatorConfig
	log *slog.Logger
}

// NewValidator returns a validator; Params get their defaults.
func NewValidator(cfg ValidatorConfig) (*Validator, error) {
	p, err := cfg.Params.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg.Params = p
	if cfg.Attackers == nil {
		cfg.Attackers = attack.All()
	}
	if cfg.Stateful == nil {
		cfg.Stateful = []string{attack.StatefulRouter}
	}
	if cfg.MaxScriptContexts <= 0 {
		cfg.MaxScriptContexts = DefaultMaxScriptContexts
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCheckTimeout
	}
	if _, err := ParseWhiteBoxMode(string(cfg.WhiteBox)); err != nil {
		return nil, err
	}
	if cfg.WhiteBoxKind != skill.SourceUnknown && !cfg.WhiteBoxKind.Valid() {
		return nil, fmt.Errorf("validator: unknown white-box source kind %q", cfg.WhiteBoxKind)
	}
	for _, m := range cfg.CrossCheck {
		if m == nil {
			return nil, errors.New("validator: nil cross-check model")
		}
	}
	if cfg.Policy != nil {
		if err := cfg.Policy.Check(); err != nil {
			return nil, fmt.Errorf("validator: %w", err)
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Validator{cfg: cfg, log: log}, nil
}

// Params returns the validator's parameters with defaults filled in.
func (v *Validator) Params() Params { return v.cfg.Params }

// AttackerAnswer is what one script attacker answered to one question.
type AttackerAnswer struct {
	Attacker string
	// Answer is the attacker's answer in the first context it was run in.
	Answer string
	// Correct reports that it answered correctly in at least one context
	// (then Answer is that correct answer).
	Correct bool
}

// CheckAnswer is what one cross-checking solver answered to one question.
type CheckAnswer struct {
	Model   string
	Answer  string
	Correct bool
	Err     string
}

// QuestionReport is the validation record of one question.
type QuestionReport struct {
	Part, Question int // 1-based
	Q              skill.Question
	Scripts        []AttackerAnswer
	Checks         []CheckAnswer
	// Dropped is the first reason the question was dropped ("" if kept).
	Dropped Reason
}

// Report is the outcome of validating one set.
type Report struct {
	// Set is the accepted set without its dropped questions, with ID set;
	// nil when the set was rejected.
	Set *skill.Set
	// Reason and Detail tell why the set was rejected ("" if accepted).
	Reason Reason
	Detail string
	// Drops lists every dropped question.
	Drops []Drop
	// Unlisted lists the questions whose model-written distractors were
	// removed because an accepted variant is made of description words
	// (Reason DistractorsUnlisted; generation.md stage 1b). Set (and the
	// script filter) judge them without distractors.
	Unlisted []Drop
	// Questions has one entry per question of the input set, in order,
	// for the stages that ran.
	Questions []QuestionReport
	// Usage and Calls count the cross-check calls.
	Usage llm.Usage
	Calls int
}

// Accepted reports whether the set passed.
func (r *Report) Accepted() bool { return r.Reason == "" && r.Set != nil }

// Err returns a *RejectError for a rejected set, nil otherwise.
func (r *Report) Err() error {
	if r.Accepted() {
		return nil
	}
	return &RejectError{Reason: r.Reason, Detail: r.Detail}
}

// work is the validation state: the input set and, per part, the indices
// of the questions still alive.
type work struct {
	set  *skill.Set
	live [][]int
	rep  *Report
	qrep map[[2]int]*QuestionReport
}

func newWork(s *skill.Set) *work {
	w := &work{set: s, rep: &Report{}, qrep: map[[2]int]*QuestionReport{}}
	for pi, p := range s.Parts {
		var idx []int
		for qi := range p.Questions {
			idx = append(idx, qi)
			w.rep.Questions = append(w.rep.Questions, QuestionReport{Part: pi + 1, Question: qi + 1, Q: p.Questions[qi]})
		}
		w.live = append(w.live, idx)
	}
	for i := range w.rep.Questions {
		q := &w.rep.Questions[i]
		w.qrep[[2]int{q.Part - 1, q.Question - 1}] = q
	}
	return w
}

func (w *work) reject(r Reason, format string, a ...any) *Report {
	w.rep.Reason, w.rep.Detail = r, fmt.Sprintf(format, a...)
	return w.rep
}

// drop removes question qi of part pi (0-based) from the live set.
func (w *work) drop(pi, qi int, d Drop) {
	d.Part, d.Question = pi+1, qi+1
	w.rep.Drops = append(w.rep.Drops, d)
	if q := w.qrep[[2]int{pi, qi}]; q != nil && q.Dropped == "" {
		q.Dropped = d.Reason
	}
	w.live[pi] = slices.DeleteFunc(w.live[pi], func(x int) bool { return x == qi })
}

// emptyPart returns the first part without live questions (0-based), or -1.
func (w *work) emptyPart() int {
	for pi, l := range w.live {
		if len(l) == 0 {
			return pi
		}
	}
	return -1
}

// result builds the surviving set.
func (w *work) result() *skill.Set {
	out := &skill.Set{Domain: w.set.Domain}
	if pv := w.set.Provenance; pv != nil {
		c := *pv
		out.Provenance = &c
	}
	for pi, p := range w.set.Parts {
		np := skill.Part{Narrative: p.Narrative}
		for _, qi := range w.live[pi] {
			q := p.Questions[qi]
			q.Answers = slices.Clone(q.Answers)
			q.DependsOn = slices.Clone(q.DependsOn)
			q.Distractors = slices.Clone(q.Distractors)
			np.Questions = append(np.Questions, q)
		}
		out.Parts = append(out.Parts, np)
	}
	out.ID = out.ContentID()
	return out
}

// Mode selects what a validation run checks.
type Mode struct {
	// Fresh applies the rules for a generator's raw output on top of those
	// for a servable set: at least QuestionsPerPart questions per part,
	// every answer type in every part, MinSetReasoningTypes reasoning
	// types, and a question depending on an earlier part in parts 2 and 3.
	// A set that passed validation has lost questions, so it no longer
	// meets them; without Fresh it is checked as a verifier would serve it.
	Fresh bool
	// CrossCheck runs cross-validation with the configured models.
	CrossCheck bool
	// Full runs the script attackers on every part even after one part
	// lost all its questions (for inspection); otherwise the run stops at
	// the first stage that rejects the set.
	Full bool
}

// Offline checks a set as a verifier would serve it with the stages that
// need no model: structure, leakage and script resistance, the last on
// every part (Mode{Full: true}).
func (v *Validator) Offline(ctx context.Context, s *skill.Set) *Report {
	return v.run(ctx, s, Mode{Full: true})
}

// Validate runs the whole pipeline on a generator's raw output:
// structure (Fresh rules), leakage, script resistance and, with
// cross-check models configured, cross-validation. It returns an error
// only when ctx ended; a rejected set is a Report with a Reason.
func (v *Validator) Validate(ctx context.Context, s *skill.Set) (*Report, error) {
	return v.Run(ctx, s, Mode{Fresh: true, CrossCheck: true})
}

// Run validates s as m says. It returns an error only when ctx ended.
func (v *Validator) Run(ctx context.Context, s *skill.Set, m Mode) (*Report, error) {
	rep := v.run(ctx, s, m)
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("validate: %w", err)
	}
	return rep, nil
}

func (v *Validator) run(ctx context.Context, s *skill.Set, m Mode) *Report {
	cross, full := m.CrossCheck, m.Full
	if s == nil {
		return &Report{Reason: RejectStructure, Detail: "no set"}
	}
	if reason, detail := v.structure(s, m.Fresh); reason != "" {
		return newWork(s).reject(reason, "%s", detail)
	}
	// Stage 1b, before anything judges an answer: the filter must judge
	// the questions as they will be served.
	s, unlisted := unlistWorded(s)
	w := newWork(s)
	w.rep.Unlisted = unlisted
	if r := v.leakage(w); r != nil {
		return r
	}
	if pi := w.emptyPart(); pi >= 0 {
		return w.reject(RejectLeakage, "part %d: every question contains its own answer", pi+1)
	}
	v.scripts(ctx, w, full)
	if pi := w.emptyPart(); pi >= 0 {
		return w.reject(RejectScript, "part %d: script attackers answered every question", pi+1)
	}
	if cross && len(v.cfg.CrossCheck) > 0 {
		if err := v.crossCheck(ctx, w); err != nil {
			return w.reject(RejectCrossCheck, "%v", err)
		}
		if pi := w.emptyPart(); pi >= 0 {
			return w.reject(RejectCrossCheck, "part %d: no question was reproduced by every cross-check solver", pi+1)
		}
	}
	if err := ctx.Err(); err != nil {
		return w.reject(RejectCrossCheck, "validation cancelled: %v", err)
	}
	w.rep.Set = w.result()
	return w.rep
}

// --- stage 1: structure ------------------------------------------------

func (v *Validator) structure(s *skill.Set, fresh bool) (Reason, string) {
	p := v.cfg.Params
	if err := s.Validate(); err != nil {
		return RejectStructure, err.Error()
	}
	lo := int(float64(p.MinTokens) * (1 - p.LengthSlack))
	hi := int(float64(p.MaxTokens)*(1+p.LengthSlack) + 0.5)
	seen := map[string]bool{}
	setTypes := map[skill.ReasoningType]bool{}
	for pi := range s.Parts {
		part := &s.Parts[pi]
		if n := skill.CountTokens(part.Narrative); n < lo || n > hi {
			return RejectStructure, fmt.Sprintf("part %d: narrative of %d tokens, want %d..%d", pi+1, n, lo, hi)
		}
		if n := len(part.Questions); fresh && n < p.QuestionsPerPart {
			return RejectStructure, fmt.Sprintf("part %d: %d questions, want %d", pi+1, n, p.QuestionsPerPart)
		}
		types := map[skill.ReasoningType]bool{}
		answers := map[skill.AnswerType]bool{}
		chained := false
		for qi := range part.Questions {
			q := &part.Questions[qi]
			at := fmt.Sprintf("part %d question %d", pi+1, qi+1)
			if !q.AnswerType.Valid() {
				return RejectStructure, fmt.Sprintf("%s: missing or unknown answer_type %q", at, q.AnswerType)
			}
			if len(q.Answers) == 0 {
				return RejectStructure, fmt.Sprintf("%s: no answers array", at)
			}
			if strings.TrimSpace(q.Answers[0]) != strings.TrimSpace(q.Answer) {
				return RejectStructure, fmt.Sprintf("%s: first accepted answer %q is not the canonical answer %q", at, q.Answers[0], q.Answer)
			}
			if n := utf8.RuneCountInString(strings.TrimSpace(q.Answer)); n > p.MaxAnswerChars {
				return RejectStructure, fmt.Sprintf("%s: answer %q has %d characters, at most %d", at, q.Answer, n, p.MaxAnswerChars)
			}
			if q.AnswerType == skill.NumericAnswer && !strings.ContainsFunc(q.Answer, unicode.IsDigit) {
				return RejectStructure, fmt.Sprintf("%s: numeric answer %q has no digits", at, q.Answer)
			}
			// Compared after NFC, case folding and collapsing white space
			// (generation.md stage 1): Normalize trims, strings.Fields
			// splits on White_Space runs.
			k := strings.Join(strings.Fields(skill.Normalize(q.Question)), " ")
			if seen[k] {
				return RejectStructure, fmt.Sprintf("%s: duplicate question", at)
			}
			seen[k] = true
			if types[q.ReasoningType] && len(part.Questions) <= len(skill.ReasoningTypes) {
				return RejectStructure, fmt.Sprintf("%s: reasoning type %s used twice in the part", at, q.ReasoningType)
			}
			types[q.ReasoningType] = true
			setTypes[q.ReasoningType] = true
			answers[q.AnswerType] = true
			if len(q.DependsOn) > 0 {
				chained = true
			}
		}
		if fresh && p.QuestionsPerPart >= 3 {
			for _, t := range skill.AnswerTypes {
				if !answers[t] {
					return RejectStructure, fmt.Sprintf("part %d: no %s answer", pi+1, t)
				}
			}
		}
		if fresh && pi > 0 && !chained {
			return RejectStructure, fmt.Sprintf("part %d: no question depends on an earlier part", pi+1)
		}
	}
	if fresh && len(setTypes) < p.MinSetReasoningTypes {
		return RejectStructure, fmt.Sprintf("set uses %d reasoning types, want at least %d", len(setTypes), p.MinSetReasoningTypes)
	}
	if pol := v.cfg.Policy; pol != nil {
		for pi := 0; pi < pol.Rounds && pi < len(s.Parts); pi++ {
			b, err := pol.Budget(skill.CountTokens(s.Parts[pi].Narrative))
			if err == nil {
				// A budget the wire cannot carry (0 ms, above T_total)
				// would be refused at every draw (spec/protocol.md §5).
				err = pol.CheckBudget(b)
			}
			if err != nil {
				return RejectPolicy, fmt.Sprintf("part %d: %v", pi+1, err)
			}
		}
	}
	return "", ""
}

// --- stage 2: leakage --------------------------------------------------

// verdictWords are explicit labels that give the answer away. "target",
// which the prompt also forbids as a label, is not checked: it is
// ordinary jargon in too many domains ("target gene", "target
// temperature").
var verdictWords = regexp.MustCompile(`(?i)\b(confirmed|ruled[\s-]+out|rules?[\s-]+out|primary[\s-]+suspects?|prime[\s-]+suspects?|most[\s-]+likely|culprits?)\b`)

func (v *Validator) leakage(w *work) *Report {
	s := w.set
	for pi := range s.Parts {
		if m := verdictWords.FindString(s.Parts[pi].Narrative); m != "" {
			return w.reject(RejectLeakage, "part %d: explicit verdict wording %q", pi+1, m)
		}
	}
	norms := make([]string, len(s.Parts))
	for pi := range s.Parts {
		norms[pi] = skill.Normalize(s.Parts[pi].Narrative)
	}
	// A later part's narrative or questions must not state an earlier
	// part's answer.
	for pj := range s.Parts {
		for qj := range s.Parts[pj].Questions {
			for _, variant := range s.Parts[pj].Questions[qj].Variants() {
				if trivialNumber(variant) {
					continue
				}
				term := skill.Normalize(variant)
				for pk := pj + 1; pk < len(s.Parts); pk++ {
					if sent, ok := v.statesAnswer(norms[pk], term); ok {
						return w.reject(RejectLeakage, "part %d's narrative states part %d's answer %q: %q", pk+1, pj+1, variant, snippet(sent, 120))
					}
					for qk := range s.Parts[pk].Questions {
						if containsTerm(skill.Normalize(s.Parts[pk].Questions[qk].Question), term) {
							return w.reject(RejectLeakage, "part %d question %d states part %d's answer %q", pk+1, qk+1, pj+1, variant)
						}
					}
				}
			}
		}
	}
	// A question must not contain its own answer.
	for pi := range s.Parts {
		for qi := range s.Parts[pi].Questions {
			q := &s.Parts[pi].Questions[qi]
			qn := skill.Normalize(q.Question)
			for _, variant := range q.Variants() {
				if !trivialNumber(variant) && containsTerm(qn, skill.Normalize(variant)) {
					w.drop(pi, qi, Drop{Reason: DropAnswerInQuestion, Detail: fmt.Sprintf("question contains %q", variant)})
					break
				}
			}
		}
	}
	return nil
}

// backReference matches words by which a sentence points back at an
// earlier finding ("the lot flagged earlier", "previously identified").
var backReference = regexp.MustCompile(`(?i)\b(earlier|previous|previously|prior|preceding|aforementioned|already|identified|singled[\s-]+out|established|concluded|determined|turned[\s-]+out|as[\s-]+noted|as[\s-]+reported|last[\s-]+(?:week|month|quarter|report|review)|first[\s-]+(?:report|screen|review|part|round)|part[\s-]+(?:1|2|one|two))\b`)

// statesAnswer reports whether a later part's normalised narrative states
// an earlier answer (normalised term). With StrictLeakage any mention
// counts. Otherwise a mention counts when its sentence also points back
// at earlier findings: a later part may list the earlier answer among its
// rivals without singling it out (a table of all lots, the rates under
// every mechanism), which is how a chain makes the earlier answer
// necessary, but it must not tie it to the earlier finding.
func (v *Validator) statesAnswer(text, term string) (string, bool) {
	for _, i := range termIndexes(text, term) {
		sent := sentenceAt(text, i, i+len(term))
		if v.cfg.StrictLeakage || backReference.MatchString(sent) {
			return strings.TrimSpace(sent), true
		}
	}
	return "", false
}

// sentenceAt returns the sentence of text around text[i:j].
func sentenceAt(text string, i, j int) string {
	isEnd := func(r rune) bool { return r == '.' || r == '!' || r == '?' || r == ';' || r == '\n' }
	start := strings.LastIndexFunc(text[:i], isEnd) + 1
	end := strings.IndexFunc(text[j:], isEnd)
	if end < 0 {
		end = len(text)
	} else {
		end += j
	}
	return text[start:end]
}

// trivialNumber reports whether an answer variant is a bare number with
// at most two digits ("3", "12", "4.5", "7%"): such numbers occur in any
// technical text, so their presence elsewhere does not give an answer
// away. Longer numbers, and numbers with units or words, are checked.
func trivialNumber(s string) bool {
	digits := 0
	for _, r := range strings.TrimSpace(s) {
		switch {
		case unicode.IsDigit(r):
			digits++
		case r == '.' || r == ',' || r == '-' || r == '+' || r == '%' || r == '−':
		default:
			return false
		}
	}
	return digits > 0 && digits <= 2
}

// containsTerm reports whether term occurs in text as a whole token
// sequence: not preceded or followed by a letter or digit. Both are
// normalised (skill.Normalize) by the caller.
func containsTerm(text, term string) bool {
	return len(termIndexes(text, term)) > 0
}

// termIndexes returns the offsets of the whole-token occurrences of term
// in text.
func termIndexes(text, term string) []int {
	if term == "" {
		return nil
	}
	var out []int
	for off := 0; off <= len(text)-len(term); {
		i := strings.Index(text[off:], term)
		if i < 0 {
			break
		}
		i += off
		before, _ := utf8.DecodeLastRuneInString(text[:i])
		after, _ := utf8.DecodeRuneInString(text[i+len(term):])
		if !wordRune(before) && !wordRune(after) {
			out = append(out, i)
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		off = i + size
	}
	return out
}

func wordRune(r rune) bool {
	return r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r))
}

// --- stage 3: script resistance ----------------------------------------

func (v *Validator) challenge(s *skill.Set, pi, qi int) skill.Challenge {
	return skill.Challenge{
		Round: pi + 1, Rounds: len(s.Parts), Domain: s.Domain,
		Narrative: s.Parts[pi].Narrative, Question: s.Parts[pi].Questions[qi].Question,
		Budget: skill.DefaultTau,
	}
}

// contexts lists the combinations of earlier rounds' questions a session
// can produce before part pi, at most limit of them, spread evenly over
// all combinations when there are more.
func contexts(live [][]int, pi, limit int) [][]int {
	total := 1
	for _, l := range live[:pi] {
		total *= len(l)
	}
	if total == 0 {
		return nil
	}
	step := 1
	if total > limit {
		step = (total + limit - 1) / limit
	}
	var out [][]int
	for n := 0; n < total; n += step {
		combo := make([]int, pi)
		r := n
		for p := pi - 1; p >= 0; p-- {
			combo[p] = live[p][r%len(live[p])]
			r /= len(live[p])
		}
		out = append(out, combo)
	}
	return out
}

// scripts runs every attacker on every live question, part by part, in
// every context of earlier rounds (the earlier parts' live questions), and
// drops each question an attacker answers correctly in any of them.
func (v *Validator) scripts(ctx context.Context, w *work, full bool) {
	s := w.set
	attackers := slices.Clone(v.cfg.Attackers)
	stateful := slices.Clone(v.cfg.Stateful)
	for _, a := range v.whiteBoxFor(s) {
		if !slices.ContainsFunc(attackers, func(b attack.Named) bool { return b.Name == a.Name }) {
			attackers = append(attackers, a)
			stateful = append(stateful, a.Name)
		}
	}
	for pi := range s.Parts {
		if !full && w.emptyPart() >= 0 {
			return // rejected already: spare the remaining parts
		}
		ctxs := contexts(w.live, pi, v.cfg.MaxScriptContexts)
		shown := narrativesThrough(s, pi)
		for _, qi := range slices.Clone(w.live[pi]) {
			q := &s.Parts[pi].Questions[qi]
			qr := w.qrep[[2]int{pi, qi}]
			var hit *AttackerAnswer
			for _, a := range attackers {
				if hit != nil && a.Name == attack.WhiteBoxSurvivor {
					// The survivor answers from what every other
					// attacker left, on a question they all failed
					// (generation.md stage 3): one of them answered
					// this question, which is dropped whatever the
					// survivor says, and its replay of the whole
					// filter is most of a set's validation.
					continue
				}
				aa := AttackerAnswer{Attacker: a.Name}
				runs := ctxs
				if !slices.Contains(stateful, a.Name) && len(runs) > 1 {
					runs = runs[:1]
				}
				for ci, combo := range runs {
					ans, err := v.attackOnce(ctx, a.Prover, s, combo, pi, qi)
					if err != nil {
						break
					}
					if ci == 0 {
						aa.Answer = ans
					}
					if scriptAnswers(q, ans, shown) {
						aa.Answer, aa.Correct = ans, true
						break
					}
				}
				qr.Scripts = append(qr.Scripts, aa)
				if aa.Correct && hit == nil {
					hit = &qr.Scripts[len(qr.Scripts)-1]
				}
			}
			if hit != nil {
				w.drop(pi, qi, Drop{Reason: DropScript, By: hit.Attacker, Answer: hit.Answer})
			}
		}
	}
}

// scriptAnswers reports whether a script's answer answers q: skill.Judge
// accepts it, or it holds exactly one number and skill.Judge accepts that
// number alone. The matcher refuses a number behind a numbered label the
// texts use ("Stage 6" for a count of 6, the number-label guard of
// spec/verification.md), and a script author who reads that drops the
// label: the script has found the number all the same.
func scriptAnswers(q *skill.Question, ans string, shown []string) bool {
	if skill.Judge(q, ans, shown) {
		return true
	}
	var num string
	for _, w := range skill.Words(ans) {
		if w.Number == nil {
			continue
		}
		if num != "" {
			return false
		}
		num = w.Text
		if w.Number.Sign() < 0 {
			num = "-" + num
		}
	}
	return num != "" && skill.Judge(q, num, shown)
}

// narrativesThrough returns the narratives of parts 1..pi+1 of s: what a
// prover has been shown when it answers a question of part pi (0-based),
// the context skill.Judge judges its answer in.
func narrativesThrough(s *skill.Set, pi int) []string {
	out := make([]string, 0, pi+1)
	for k := 0; k <= pi && k < len(s.Parts); k++ {
		out = append(out, s.Parts[k].Narrative)
	}
	return out
}

// attackOnce runs one attacker session through the earlier rounds of
// combo and returns its answer to question qi of part pi.
func (v *Validator) attackOnce(ctx context.Context, p skill.Prover, s *skill.Set, combo []int, pi, qi int) (string, error) {
	sess := p.NewSession()
	for r, q := range combo {
		if _, err := sess.Answer(ctx, v.challenge(s, r, q)); err != nil {
			return "", err
		}
	}
	return sess.Answer(ctx, v.challenge(s, pi, qi))
}

// --- stage 4: cross-validation -----------------------------------------

// crossCheck asks fresh solver sessions of every cross-check model to
// answer the live questions, without their answers, through the prover's
// own multi-turn path: session k answers the k-th live question of every
// part in order (wrapping around in parts with fewer questions), so each
// question is asked with the earlier parts already read. A question that
// any solver fails to reproduce is dropped.
func (v *Validator) crossCheck(ctx context.Context, w *work) error {
	s := w.set
	sessions := 0
	for _, l := range w.live {
		sessions = max(sessions, len(l))
	}
	type result struct {
		pi, qi int
		ans    CheckAnswer
	}
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
		wraps   []*llm.Model
	)
	for _, m := range v.cfg.CrossCheck {
		// A private wrapper per validation counts this validation's tokens
		// exactly, whatever else uses the model concurrently.
		wm := m.Fork(llm.WithTimeout(v.cfg.CallTimeout), llm.WithRetry(v.cfg.Retry), llm.WithLogger(v.log))
		wraps = append(wraps, wm)
		solver := solve.New(wm, solve.Config{Memory: true, MaxAnswerTokens: v.cfg.AnswerMaxTokens})
		name := m.Name()
		for k := 0; k < sessions; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sess := solver.NewSession()
				for pi := range s.Parts {
					if ctx.Err() != nil {
						return
					}
					l := w.live[pi]
					qi := l[k%len(l)]
					q := &s.Parts[pi].Questions[qi]
					ans, err := sess.Answer(ctx, v.challenge(s, pi, qi))
					ca := CheckAnswer{Model: name, Answer: ans}
					if err != nil {
						ca.Err = err.Error()
					} else {
						ca.Correct = skill.Judge(q, ans, narrativesThrough(s, pi))
					}
					mu.Lock()
					results = append(results, result{pi, qi, ca})
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	for _, wm := range wraps {
		w.rep.Usage = w.rep.Usage.Add(wm.Usage())
		w.rep.Calls += wm.Calls()
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cross-check cancelled: %w", err)
	}
	slices.SortStableFunc(results, func(a, b result) int {
		if a.pi != b.pi {
			return a.pi - b.pi
		}
		return a.qi - b.qi
	})
	failed := map[[2]int]bool{}
	for _, r := range results {
		key := [2]int{r.pi, r.qi}
		qr := w.qrep[key]
		qr.Checks = append(qr.Checks, r.ans)
		if r.ans.Correct || failed[key] {
			continue
		}
		failed[key] = true
		d := Drop{Reason: DropCrossCheckDisagree, By: r.ans.Model, Answer: r.ans.Answer}
		if r.ans.Err != "" {
			d.Reason, d.Detail = DropCrossCheckError, r.ans.Err
		}
		w.drop(r.pi, r.qi, d)
	}
	return nil
}
