package generate

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/acaptcha/acaptcha/skill"
)

// Params are the content parameters of a generated set: what the prompt
// asks for and what structural validation enforces.
type Params struct {
	// QuestionsPerPart is q, the number of questions each part carries
	// (default 3). With three or more, every part must cover entity,
	// numeric and label answers.
	QuestionsPerPart int
	// MinTokens and MaxTokens bound each part's narrative in
	// skill.CountTokens units (default 350 and 1100).
	MinTokens, MaxTokens int
	// LengthSlack widens the accepted narrative length on both sides
	// (default 0.2: 20 %), because models only roughly meet a length.
	LengthSlack float64
	// MinEntities and MaxEntities bound the candidate entities per part
	// (default 4 and 6).
	MinEntities, MaxEntities int
	// MinMisleading is the number of misleading interim conclusions per
	// part (default 1).
	MinMisleading int
	// MinNumbers is the number of numeric values per part (default 5).
	MinNumbers int
	// MinScatter is the number of non-adjacent paragraphs the facts behind
	// one answer are spread over (default 3).
	MinScatter int
	// MaxAnswerChars caps canonical answers (default and maximum
	// skill.MaxAnswerChars).
	MaxAnswerChars int
	// MinSetReasoningTypes is how many different reasoning types the
	// whole set must use (default 4).
	MinSetReasoningTypes int
}

// Defaults of Params.
const (
	DefaultQuestionsPerPart     = 3
	DefaultMinTokens            = 350
	DefaultMaxTokens            = 1100
	DefaultLengthSlack          = 0.2
	DefaultMinEntities          = 4
	DefaultMaxEntities          = 6
	DefaultMinMisleading        = 1
	DefaultMinNumbers           = 5
	DefaultMinScatter           = 3
	DefaultMinSetReasoningTypes = 4
	// MinPartTokens is the least MinTokens: a shorter part cannot hold
	// the entities, numbers and misleading facts a part must.
	MinPartTokens = 50
	// MaxPartTokens caps MaxTokens: longer parts do not fit the wire and
	// narrative limits comfortably.
	MaxPartTokens = 4000
)

// ErrParams is wrapped by every invalid Params error.
var ErrParams = errors.New("invalid generation parameters")

// withDefaults fills zero fields with the defaults and checks the result.
func (p Params) withDefaults() (Params, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&p.QuestionsPerPart, DefaultQuestionsPerPart)
	def(&p.MinTokens, DefaultMinTokens)
	def(&p.MaxTokens, max(DefaultMaxTokens, p.MinTokens))
	def(&p.MinEntities, DefaultMinEntities)
	def(&p.MaxEntities, max(DefaultMaxEntities, p.MinEntities))
	def(&p.MinMisleading, DefaultMinMisleading)
	def(&p.MinNumbers, DefaultMinNumbers)
	def(&p.MinScatter, DefaultMinScatter)
	def(&p.MaxAnswerChars, skill.MaxAnswerChars)
	def(&p.MinSetReasoningTypes, min(DefaultMinSetReasoningTypes, len(skill.ReasoningTypes)))
	if p.LengthSlack == 0 {
		p.LengthSlack = DefaultLengthSlack
	}
	switch {
	case p.QuestionsPerPart < 1 || p.QuestionsPerPart > skill.MaxQuestions:
		return p, fmt.Errorf("%w: %d questions per part, want 1..%d", ErrParams, p.QuestionsPerPart, skill.MaxQuestions)
	case p.MinTokens < MinPartTokens || p.MaxTokens < p.MinTokens || p.MaxTokens > MaxPartTokens:
		return p, fmt.Errorf("%w: part length %d..%d tokens, want %d <= min <= max <= %d", ErrParams, p.MinTokens, p.MaxTokens, MinPartTokens, MaxPartTokens)
	case p.LengthSlack < 0 || p.LengthSlack > 1:
		return p, fmt.Errorf("%w: length slack %.2f, want 0..1", ErrParams, p.LengthSlack)
	case p.MinEntities < 2 || p.MaxEntities < p.MinEntities || p.MaxEntities > 12:
		return p, fmt.Errorf("%w: entities %d..%d, want 2 <= min <= max <= 12", ErrParams, p.MinEntities, p.MaxEntities)
	case p.MinMisleading < 0 || p.MinNumbers < 0 || p.MinScatter < 1:
		return p, fmt.Errorf("%w: negative content counts", ErrParams)
	case p.MaxAnswerChars < 1 || p.MaxAnswerChars > skill.MaxAnswerChars:
		return p, fmt.Errorf("%w: answer length %d, want 1..%d", ErrParams, p.MaxAnswerChars, skill.MaxAnswerChars)
	case p.MinSetReasoningTypes < 1 || p.MinSetReasoningTypes > len(skill.ReasoningTypes):
		return p, fmt.Errorf("%w: %d set reasoning types, want 1..%d", ErrParams, p.MinSetReasoningTypes, len(skill.ReasoningTypes))
	}
	return p, nil
}

// formats are the document formats the prompt draws from for variety.
var formats = []string{
	"laboratory report", "internal memo", "audit log with commentary", "email thread",
	"field notes", "incident report", "meeting minutes", "shift handover log",
	"review board summary", "ticket history", "quarterly briefing", "inspection record",
	"case file", "technical bulletin", "interview transcript excerpt", "change log with notes",
}

// flavourWords are sampled into every request (after the idea of paper
// 001's random word banks) so that the model's favourite scenarios do not
// repeat across nodes and calls.
var flavourWords = strings.Fields(`harbour lantern granite orchard ledger compass meadow furnace
	cobalt willow beacon quarry saddle glacier pepper falcon canal ember
	thistle basalt ferry mosaic tundra anchor velvet cedar prism kettle
	juniper marble delta cinder orbit walnut copper barley signal tidal
	summit plover lattice rivet sable hollow crescent flint bramble
	parcel vessel sorrel chalk umber lichen spindle gantry terrace
	quill harrow pylon estuary sextant tallow wicket larch mantle
	bastion cairn dowel fathom gable hamlet isthmus jetty kiln loom
	mooring nettle osprey pewter quay rampart shale trellis vale wharf`)

// Variation is the random part of one request: it makes two requests for
// the same domain differ even with a deterministic model.
type Variation struct {
	// CaseKey is a random reference the model uses to seed its names.
	CaseKey string
	// Formats suggests one document format per part.
	Formats [skill.Parts]string
	// Words are to be worked into the narratives.
	Words []string
	// Seed is sent to providers that honour a sampling seed.
	Seed int
	// Temperature is this request's sampling temperature.
	Temperature float64
	// RuleCases says, per part, which case of a stated rule the part's
	// label answer falls in, so that the answer's place in the rule
	// follows neither from the story (the case that matters tends to be
	// the most severe) nor from the writing (the case in mind tends to be
	// stated first).
	RuleCases [skill.Parts]RuleCase
}

// RuleCase is a place in a stated rule's own order of cases. The first
// place is not one: the validator's rule attackers (attack.RuleClause,
// attack.RuleListFirst) answer with the first case, so a question whose
// answer is listed first is dropped anyway. The places used are public
// too, so the rule attackers attack.RuleListSecond, RuleListPenult and
// RuleListLast answer the middle and last cases: a question survives the
// filter only when its rule is not one they read.
type RuleCase int

// The places a label answer can take in its rule.
const (
	RuleMiddle RuleCase = iota // neither the first case nor the last
	RuleLast                   // the last case
)

func (c RuleCase) String() string {
	if c == RuleLast {
		return "the last case"
	}
	return "a case between the first and the last"
}

// ruleCases spreads a variation's seed over the parts' rule cases,
// uniformly and independently per part (taking them from the seed keeps
// the variation's random stream as it was).
func ruleCases(seed int) [skill.Parts]RuleCase {
	var out [skill.Parts]RuleCase
	x := uint32(seed)
	for i := range out {
		out[i] = RuleCase(x & 1)
		x >>= 1
	}
	return out
}

// NewVariation draws a variation from r with a temperature jittered by
// up to ±0.1 around temp.
func NewVariation(r *rand.Rand, temp float64) Variation {
	v := Variation{
		CaseKey:     fmt.Sprintf("%c%c-%04d", 'A'+r.IntN(26), 'A'+r.IntN(26), r.IntN(10000)),
		Seed:        int(r.Int32()),
		Temperature: max(0, min(2, temp+(r.Float64()-0.5)*0.2)),
	}
	perm := r.Perm(len(formats))
	for i := range v.Formats {
		v.Formats[i] = formats[perm[i]]
	}
	wp := r.Perm(len(flavourWords))
	for _, i := range wp[:3] {
		v.Words = append(v.Words, flavourWords[i])
	}
	v.RuleCases = ruleCases(v.Seed)
	return v
}

// Prompt is the text of one generation request.
type Prompt struct {
	System string
	User   string
}

// BuildPrompt writes the generation prompt for domain d. p must have its
// defaults filled in (New does that).
func BuildPrompt(d Domain, p Params, v Variation) Prompt {
	return Prompt{System: systemPrompt(p), User: userPrompt(d, p, v)}
}

func systemPrompt(p Params) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("You write reading-comprehension puzzles that tell AI agents apart from people and from scripts. ")
	w("Each puzzle is a case told in three parts. A capable language model must be able to answer every question by reading carefully and reasoning; ")
	w("a program that only matches keywords, patterns or nearby numbers must fail; and a person must need far longer than a few seconds, because the facts are many, dense and spread out.\n\n")

	w("## The three parts\n")
	w("- Part 1 stands on its own: its questions can be answered from part 1 alone.\n")
	w("- Part 2 continues the case. It mentions what part 1 found only by description (for example \"the lot that kept drifting in the earlier screen\" or \"the host singled out last week\"), never by name, code or number. Its questions cannot be answered without knowing part 1's answers. It may build on part 1's finding, overturn it, or reuse it.\n")
	w("- Part 3 draws on both earlier parts in the same indirect way, and its questions need the answers of both.\n")
	w("- Never repeat an earlier part's answer, or any of its listed variants, in a later part's narrative or questions.\n\n")

	w("## Every part's narrative\n")
	w("1. Length: %d to %d tokens (about %d to %d words).\n", p.MinTokens, p.MaxTokens, p.MinTokens*3/4, p.MaxTokens*3/4)
	w("2. Candidates: %d to %d named candidate entities, all described in neutral or favourable language. ", p.MinEntities, p.MaxEntities)
	w("Do not use verdict words such as \"confirmed\", \"ruled out\", \"primary suspect\", \"most likely\", \"culprit\" or \"the target\". ")
	w("The candidate that matters differs from the others only through implied evidence: whether its effect persists over time or fades, whether independent repeats reproduce it, whether something external explains it away, and whether it is widespread or confined to one place.\n")
	w("3. Misdirection: at least %d paragraph(s) state an early or provisional conclusion that a later paragraph of the same part corrects, so a reader who stops early or skims answers wrongly.\n", p.MinMisleading)
	w("4. Numbers: at least %d numeric values woven into the prose (measurements, counts, codes, dates, thresholds); some answer questions, the rest are plausible distractors of the same kind and unit.\n", p.MinNumbers)
	w("5. Scattering: the facts behind each answer sit in at least %d paragraphs that are not next to each other, so every answer needs several paragraphs combined.\n", p.MinScatter)
	w("6. Form: choose a realistic document format per part (report, memo, log, email thread, minutes, notes...); the three parts should not all share one format.\n")
	w("7. Anti-parsing: paraphrase instead of repeating key terms; call the same entity by different names, abbreviations or descriptions in different paragraphs; put key facts in subordinate clauses, asides and footnotes; use the field's jargon so that understanding is needed.\n")
	w("8. Stated rules: a rule or threshold scheme that maps cases to labels (tiers, grades, statuses, codes, classes) has at least three cases and states them in the rule's own order, from the lowest threshold or mildest case to the highest or most severe (or in the order the scheme numbers them). That order never depends on which case a question asks about: no case is listed first because it applies. The user message says which case each part's label answer falls in.\n\n")

	w("## Questions\n")
	w("Write exactly %d questions for each part. Each question:\n", p.QuestionsPerPart)
	w("- needs several reasoning steps, not a lookup of one sentence;\n")
	w("- has exactly one correct answer, a short string of at most %d characters that follows deterministically from the text;\n", p.MaxAnswerChars)
	w("- describes what is sought by its meaning, never where it is (no \"in the third paragraph\", no quoting the sentence that holds it);\n")
	w("- does not contain its own answer or any of its variants;\n")
	w("- says what form the answer takes where more than one would fit: a number without its unit (\"give the number of days\", \"in mg/L, number only\"), a label as the text names it (\"which tier, as the rule names it\"), an entity by its code or name;\n")
	w("- uses a reasoning type that no other question of the same part uses.\n")
	if p.QuestionsPerPart >= 3 {
		w("Within each part, at least one answer is an entity name, at least one is a number, and at least one is a label or classification.\n")
	}
	w("Across the whole set use at least %d different reasoning types. The reasoning types are:\n", p.MinSetReasoningTypes)
	w("- negation: eliminate the candidates that are explained away, to find the one that is not;\n")
	w("- comparison: compare quantities or rank candidates;\n")
	w("- temporal: reason about order, duration or persistence over time;\n")
	w("- multi_hop: chain two or more facts from different places;\n")
	w("- conditional: apply a rule or threshold stated in the text;\n")
	w("- causal: tell a cause from a mere correlation or coincidence.\n")
	w("Every question of parts 2 and 3 whose answer needs an earlier part lists those parts in depends_on (1-based part numbers); parts 2 and 3 must each have at least one such question.\n\n")

	w("## Accepted answers\n")
	w("Give each question an \"answers\" array of 2 to %d accepted spellings: the forms a capable reader who got it right is likely to write. The first entry is the canonical answer and equals \"answer\". Include:\n", skill.MaxVariants)
	w("- entities: the code or short identifier and the full name as the text uses it, and the descriptive phrase the text itself uses for that entity, e.g. [\"CYP2D6\", \"cytochrome P450 2D6\", \"the liver enzyme\"]; for Greek letters both the symbol and the spelled-out form, e.g. [\"TNF-α\", \"TNF-alpha\"];\n")
	w("- numbers: the bare number and the number with its unit, with and without a percent sign where relevant, e.g. [\"4.2\", \"4.2 mg/L\"] or [\"35\", \"35%%\"];\n")
	w("- labels: the label and the longer phrase the text uses for it, e.g. [\"amber\", \"amber tier\"].\n")
	w("Keep every entry short (the canonical answer at most %d characters, every entry at most %d bytes) and never so loose that a wrong reading would match: no entry may also fit another candidate.\n\n", p.MaxAnswerChars, skill.MaxAnswerBytes)

	w("## Distractors\n")
	w("Give each question a \"distractors\" array listing every other candidate the question weighs (the other entities, numbers or labels a reader must tell the answer apart from), each in every form the text uses for it: code, full name and descriptive phrase. ")
	w("The verifier keeps this list secret and counts an answer that names any of them as wrong, so that a program listing several candidates fails. List at most %d entries; never list the answer or any of its accepted spellings.\n\n", skill.MaxDistractors)

	w("## Output\n")
	w("Reply with one JSON object and nothing else: no code fence, no commentary before or after. Use exactly this shape and these keys:\n")
	w(`{"domain": "<domain name>", "parts": [{"narrative": "<text of the part>", "questions": [{"question": "<question>", "answer": "<canonical answer>", "answers": ["<canonical answer>", "<variant>"], "distractors": ["<other candidate>", "<its full name>"], "reasoning_type": "negation|comparison|temporal|multi_hop|conditional|causal", "answer_type": "entity|numeric|label", "depends_on": [1]}]}]}`)
	w("\nThere are exactly three parts. Omit depends_on (or leave it empty) for questions that need no earlier part. Write paragraph breaks inside narratives as \\n\\n.")
	return b.String()
}

func userPrompt(d Domain, p Params, v Variation) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("Write one new three-part case in the domain \"%s\".\n\n", d.Name)
	w("## Domain\n%s.\n", d.Description)
	w("Typical entities: %s.\n", strings.Join(d.Entities, "; "))
	w("Typical reasoning: %s.\n\n", strings.Join(d.Patterns, "; "))
	w("## This case\n")
	w("- Case key %s: derive fresh, unusual names, codes and numbers from it; do not reuse any example name from these instructions.\n", v.CaseKey)
	w("- Suggested formats: part 1 as a %s, part 2 as a %s, part 3 as a %s.\n", v.Formats[0], v.Formats[1], v.Formats[2])
	w("- Work these words into the story somewhere, in any sense: %s.\n", strings.Join(v.Words, ", "))
	w("- Set \"domain\" to \"%s\" and give each part %d questions.\n", d.Name, p.QuestionsPerPart)
	w("- Stated rules: where a part's label answer applies a stated rule, it is, in the rule's own order, %s of the rule in part 1, %s in part 2 and %s in part 3; choose the case the question asks about to fit.\n", v.RuleCases[0], v.RuleCases[1], v.RuleCases[2])
	return b.String()
}
