package skill

import (
	"slices"
	"sync"
)

// A source validates every set before it serves it (the procedural
// generator after generating, DecodeSet after decoding, the pool when a
// set enters it), and NewSession validated it again, on the session's
// path: about 3 % of a mutual attestation's CPU went to checking a set
// the source had just checked. Prepare is Validate for a source that
// hands the set out and changes it no more: it marks the set, and
// NewSession skips its own check for a set so marked (MarkedValid). Any
// other set (built by hand, copied, decoded by json.Unmarshal, or changed
// in its parts or questions since) is validated as before.
//
// Preparing is also when other packages do their per-set work once
// (RegisterPreparer): the protocol fingerprints each narrative for its
// reflection guard there, not before every challenge it sends.

// prepared is what Prepare recorded of a set: the set itself (a copy of
// the Set value is not prepared) and a shallow copy of what its validity
// rests on, so that a field changed since, a part or question list
// replaced or resized, or a question's field changed in place is seen.
// Strings compare by pointer first (the same string costs no scan).
type prepared struct {
	set    *Set
	kind   string
	domain string
	prov   *Provenance
	provV  Provenance
	parts  []Part
	qs     [Parts][]Question
	qcopy  [Parts][]Question
	// narratives and tokens are each part's narrative as prepared and its
	// CountTokens, which every judged round records (narrativeTokens).
	narratives [Parts]string
	tokens     [Parts]int
	// contentID is ContentID as prepared: every signed verdict of a
	// session that showed the set names it, and hashing the set's text
	// again for each cost about 1 % of a mutual attestation's CPU.
	contentID string
	values    map[any]any // RegisterPreparer's results, by key (read-only)
}

// Preparer computes a value for a valid set, kept with it under its key
// (see PreparedValue).
type Preparer struct {
	Key     any
	Prepare func(*Set) any
}

var (
	preparersMu sync.RWMutex
	preparers   []Preparer
)

// RegisterPreparer adds a computation Prepare runs on every set it
// marks; a package registers its own in init.
func RegisterPreparer(p Preparer) {
	preparersMu.Lock()
	defer preparersMu.Unlock()
	preparers = append(preparers, p)
}

// Prepare validates s (Validate) and, when it is valid, marks it as
// such and runs the registered preparers on it. The caller must not
// change s afterwards (its ID aside): a change of the set's fields, its
// parts' or its questions' is noticed and the mark ignored, but one
// inside a question's Answers, DependsOn or Distractors (an element
// replaced in place) is not, so sources call Prepare only on a set they
// hand out as it is.
func (s *Set) Prepare() error {
	if err := s.Validate(); err != nil {
		return err
	}
	p := &prepared{set: s, kind: s.Kind, domain: s.Domain, prov: s.Provenance, parts: s.Parts}
	if s.Provenance != nil {
		p.provV = *s.Provenance
	}
	for i := range s.Parts {
		p.qs[i] = s.Parts[i].Questions
		p.qcopy[i] = slices.Clone(s.Parts[i].Questions)
		p.narratives[i] = s.Parts[i].Narrative
		p.tokens[i] = CountTokens(s.Parts[i].Narrative)
	}
	p.contentID = s.contentID()
	preparersMu.RLock()
	ps := preparers
	preparersMu.RUnlock()
	if len(ps) > 0 {
		p.values = make(map[any]any, len(ps))
		for _, pr := range ps {
			p.values[pr.Key] = pr.Prepare(s)
		}
	}
	s.prep = p
	return nil
}

// MarkedValid reports whether Prepare validated s and s is still as it
// checked it (see prepared).
func (s *Set) MarkedValid() bool {
	p := s.prep
	if p == nil || p.set != s || p.kind != s.Kind || p.domain != s.Domain || p.prov != s.Provenance ||
		p.prov != nil && *p.prov != p.provV || !sameSlice(p.parts, s.Parts) {
		return false
	}
	for i := range s.Parts {
		if p.narratives[i] != s.Parts[i].Narrative || !sameSlice(p.qs[i], s.Parts[i].Questions) {
			return false
		}
		for j := range p.qcopy[i] {
			if !sameQuestion(&p.qcopy[i][j], &s.Parts[i].Questions[j]) {
				return false
			}
		}
	}
	return true
}

// sameQuestion reports whether q is still a, field by field (its lists
// as slices: same array, same length).
func sameQuestion(a, q *Question) bool {
	return a.Question == q.Question && a.Answer == q.Answer && a.ReasoningType == q.ReasoningType &&
		a.AnswerType == q.AnswerType && sameSlice(a.Answers, q.Answers) && sameSlice(a.DependsOn, q.DependsOn) &&
		sameSlice(a.Distractors, q.Distractors)
}

// PreparedValue returns what the preparer registered under key computed
// for s, if s is MarkedValid.
func (s *Set) PreparedValue(key any) (any, bool) {
	if !s.MarkedValid() {
		return nil, false
	}
	v, ok := s.prep.values[key]
	return v, ok
}

// narrativeTokens is CountTokens of part i's narrative, counted when
// the set was prepared if it was.
func (s *Set) narrativeTokens(i int) int {
	if s.MarkedValid() {
		return s.prep.tokens[i]
	}
	return CountTokens(s.Parts[i].Narrative)
}

// sameSlice reports whether a and b are the same slice: same array, same
// length.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
