package secondgen

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

type gQuestion struct {
	Question, Answer string
	Answers          []string
	ReasoningType    string
	AnswerType       string
	DependsOn        []int64
	Distractors      []string
}

type gPart struct {
	Narrative string
	Questions []gQuestion
}

type gSet struct {
	Domain string
	Kind   string
	ID     string
	Parts  []gPart
	Source string
}

// ---- verification.md: norm, white space, tokens ----

func isWS(r rune) bool { return unicode.Is(unicode.White_Space, r) }

func trimWS(s string) string { return strings.TrimFunc(s, isWS) }

var folder = cases.Fold()

func vnorm(s string) string { return folder.String(norm.NFC.String(trimWS(s))) }

func countWords(s string) int {
	n, in := 0, false
	for _, r := range s {
		if isWS(r) {
			in = false
		} else if !in {
			in = true
			n++
		}
	}
	return n
}

// tokens is L of verification.md, "Human timing model".
func tokens(s string) int { return (4*countWords(s) + 1) / 3 }

// lowerBoundNs and derivedBudgetMs are verification.md's exact formulas.
func lowerBoundNs(l int) int64 {
	x := float64(l) / 5
	x += 0.35
	x += 10 / 0.9
	return int64(x * 1e9)
}

func derivedBudgetMs(alpha float64, l int) int64 {
	tauNs := int64(alpha * float64(lowerBoundNs(l)))
	return (tauNs + 500_000) / 1_000_000
}

// ---- attestation.md §3.3 ----

func contentID(s *gSet) string {
	var in []byte
	f := func(x string) {
		in = binary.BigEndian.AppendUint64(in, uint64(len(x)))
		in = append(in, x...)
	}
	if s.Kind != "" && s.Kind != "narrative" {
		in = append(in, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
		f(s.Kind)
	}
	f(s.Domain)
	for _, p := range s.Parts {
		f(p.Narrative)
		for _, q := range p.Questions {
			f(q.Question)
			f(q.Answer)
		}
	}
	h := sha256.Sum256(in)
	return hex.EncodeToString(h[:16])
}

// ---- "Format": decoding ----

type ferr struct{ msg string }

func (e *ferr) Error() string { return e.msg }

func bad(format string, a ...any) error { return &ferr{fmt.Sprintf(format, a...)} }

func members(v *jval, where string, allowed ...string) error {
	if v.k != jObj {
		return bad("%s is not an object", where)
	}
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	for _, k := range v.keys {
		if !ok[k] {
			return bad("%s: unknown member %q", where, k)
		}
	}
	return nil
}

// optional members: absent or null is absent (a guess the spec settles).
func getStr(v *jval, name string, required bool, where string) (string, error) {
	m, ok := v.obj[name]
	if !ok || m.k == jNull {
		if required {
			return "", bad("%s: %s missing", where, name)
		}
		return "", nil
	}
	if m.k != jStr {
		return "", bad("%s: %s is not a string", where, name)
	}
	return m.s, nil
}

func getArr(v *jval, name, where string) ([]*jval, error) {
	m, ok := v.obj[name]
	if !ok || m.k == jNull {
		return nil, nil
	}
	if m.k != jArr {
		return nil, bad("%s: %s is not an array", where, name)
	}
	return m.arr, nil
}

func getStrs(v *jval, name, where string) ([]string, error) {
	a, err := getArr(v, name, where)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range a {
		if e.k != jStr {
			return nil, bad("%s: %s holds a non-string", where, name)
		}
		out = append(out, e.s)
	}
	return out, nil
}

// decode reads a set file as generation.md "Format" says, and applies its
// rules (validateFormat).
func decode(b []byte) (*gSet, error) {
	v, err := parseStrict(b)
	if err != nil {
		return nil, err
	}
	if err := members(v, "set", "domain", "parts", "id", "kind", "provenance"); err != nil {
		return nil, err
	}
	s := &gSet{}
	if s.Domain, err = getStr(v, "domain", true, "set"); err != nil {
		return nil, err
	}
	if s.ID, err = getStr(v, "id", false, "set"); err != nil {
		return nil, err
	}
	if s.Kind, err = getStr(v, "kind", false, "set"); err != nil {
		return nil, err
	}
	if pv, ok := v.obj["provenance"]; ok && pv.k != jNull {
		if err := members(pv, "provenance", "source", "model", "llm_questions"); err != nil {
			return nil, err
		}
		if s.Source, err = getStr(pv, "source", false, "provenance"); err != nil {
			return nil, err
		}
		model, err := getStr(pv, "model", false, "provenance")
		if err != nil {
			return nil, err
		}
		if lq, ok := pv.obj["llm_questions"]; ok && lq.k != jNull && lq.k != jBool {
			return nil, bad("llm_questions is not a boolean")
		}
		switch s.Source {
		case "", "procedural", "corpus", "hybrid", "llm":
		default:
			return nil, bad("provenance source %q", s.Source)
		}
		if len(model) > 128 {
			return nil, bad("provenance model of %d bytes", len(model))
		}
	}
	parts, err := getArr(v, "parts", "set")
	if err != nil {
		return nil, err
	}
	if _, ok := v.obj["parts"]; !ok {
		return nil, bad("parts missing")
	}
	for pi, pv := range parts {
		where := fmt.Sprintf("part %d", pi+1)
		if err := members(pv, where, "narrative", "questions"); err != nil {
			return nil, err
		}
		var p gPart
		if p.Narrative, err = getStr(pv, "narrative", true, where); err != nil {
			return nil, err
		}
		qs, err := getArr(pv, "questions", where)
		if err != nil {
			return nil, err
		}
		for qi, qv := range qs {
			where := fmt.Sprintf("part %d question %d", pi+1, qi+1)
			if err := members(qv, where, "question", "answer", "answers", "reasoning_type", "answer_type", "depends_on", "distractors"); err != nil {
				return nil, err
			}
			var q gQuestion
			if q.Question, err = getStr(qv, "question", true, where); err != nil {
				return nil, err
			}
			if q.Answer, err = getStr(qv, "answer", true, where); err != nil {
				return nil, err
			}
			if q.ReasoningType, err = getStr(qv, "reasoning_type", false, where); err != nil {
				return nil, err
			}
			if q.AnswerType, err = getStr(qv, "answer_type", false, where); err != nil {
				return nil, err
			}
			if q.Answers, err = getStrs(qv, "answers", where); err != nil {
				return nil, err
			}
			if q.Distractors, err = getStrs(qv, "distractors", where); err != nil {
				return nil, err
			}
			deps, err := getArr(qv, "depends_on", where)
			if err != nil {
				return nil, err
			}
			for _, d := range deps {
				if d.k != jNum {
					return nil, bad("%s: depends_on holds a non-number", where)
				}
				n, err := parseInt(d.num)
				if err != nil {
					return nil, bad("%s: depends_on %s", where, d.num)
				}
				q.DependsOn = append(q.DependsOn, n)
			}
			p.Questions = append(p.Questions, q)
		}
		s.Parts = append(s.Parts, p)
	}
	if err := validateFormat(s); err != nil {
		return nil, err
	}
	return s, nil
}

func parseInt(num string) (int64, error) {
	var n int64
	if _, err := fmt.Sscan(num, &n); err != nil || fmt.Sprint(n) != num {
		return 0, fmt.Errorf("not an integer: %s", num)
	}
	return n, nil
}

var reasoningTypes = map[string]bool{"negation": true, "comparison": true, "temporal": true, "multi_hop": true, "conditional": true, "causal": true}
var answerTypes = map[string]bool{"entity": true, "numeric": true, "label": true}

func blank(s string) bool { return trimWS(s) == "" }

// validateFormat is generation.md "Format" (Set.Validate's rules).
func validateFormat(s *gSet) error {
	if s.Kind != "" && s.Kind != "narrative" {
		return bad("kind %q is not registered", s.Kind)
	}
	if blank(s.Domain) || len(s.Domain) > 256 {
		return bad("domain %q", s.Domain)
	}
	if len(s.Parts) != 3 {
		return bad("%d parts", len(s.Parts))
	}
	for pi, p := range s.Parts {
		if blank(p.Narrative) || len(p.Narrative) > 32768 {
			return bad("part %d narrative", pi+1)
		}
		if len(p.Questions) < 1 || len(p.Questions) > 8 {
			return bad("part %d has %d questions", pi+1, len(p.Questions))
		}
		for qi, q := range p.Questions {
			at := fmt.Sprintf("part %d question %d", pi+1, qi+1)
			if blank(q.Question) || len(q.Question) > 2048 {
				return bad("%s: question", at)
			}
			if blank(q.Answer) || utf8.RuneCountInString(trimWS(q.Answer)) > 20 {
				return bad("%s: canonical answer %q", at, q.Answer)
			}
			if len(q.Answers) > 8 {
				return bad("%s: %d answers", at, len(q.Answers))
			}
			accepted := []string{q.Answer}
			if len(q.Answers) > 0 {
				accepted = q.Answers
				in := false
				for _, a := range q.Answers {
					if n := len(trimWS(a)); n < 1 || n > 64 {
						return bad("%s: variant %q", at, a)
					}
					if vnorm(a) == vnorm(q.Answer) {
						in = true
					}
				}
				if !in {
					return bad("%s: canonical answer not among the variants", at)
				}
			}
			if len(q.Distractors) > 32 {
				return bad("%s: %d distractors", at, len(q.Distractors))
			}
			for _, d := range q.Distractors {
				if n := len(trimWS(d)); n < 1 || n > 64 {
					return bad("%s: distractor %q", at, d)
				}
				for _, a := range accepted {
					if vnorm(a) == vnorm(d) {
						return bad("%s: distractor %q is an accepted answer", at, d)
					}
				}
			}
			if !reasoningTypes[q.ReasoningType] {
				return bad("%s: reasoning_type %q", at, q.ReasoningType)
			}
			if q.AnswerType != "" && !answerTypes[q.AnswerType] {
				return bad("%s: answer_type %q", at, q.AnswerType)
			}
			for _, d := range q.DependsOn {
				if d < 1 || d > int64(pi) {
					return bad("%s: depends_on %d is not an earlier part", at, d)
				}
			}
		}
	}
	return nil
}

// stage1 is generation.md validation stage 1 on a set that passed
// "Format". fresh applies the rules a re-check skips.
func stage1(s *gSet, fresh bool) error {
	const q = 3
	types := map[string]bool{}
	seen := map[string]bool{}
	for pi, p := range s.Parts {
		if l := tokens(p.Narrative); l < 280 || l > 1320 {
			return bad("part %d narrative of %d tokens", pi+1, l)
		}
		if fresh && len(p.Questions) < q {
			return bad("part %d has %d questions", pi+1, len(p.Questions))
		}
		ptypes := map[string]bool{}
		atypes := map[string]bool{}
		dep := false
		for qi, x := range p.Questions {
			at := fmt.Sprintf("part %d question %d", pi+1, qi+1)
			if x.AnswerType == "" || len(x.Answers) == 0 || trimWS(x.Answers[0]) != trimWS(x.Answer) {
				return bad("%s: answer_type or first variant", at)
			}
			atypes[x.AnswerType] = true
			if len(p.Questions) <= 6 && ptypes[x.ReasoningType] {
				return bad("%s: reasoning type %s twice in the part", at, x.ReasoningType)
			}
			ptypes[x.ReasoningType] = true
			types[x.ReasoningType] = true
			if x.AnswerType == "numeric" && !strings.ContainsFunc(x.Answer, func(r rune) bool { return unicode.Is(unicode.Nd, r) }) {
				return bad("%s: numeric answer without a digit", at)
			}
			k := strings.Join(strings.FieldsFunc(vnorm(x.Question), isWS), " ")
			if seen[k] {
				return bad("%s: question twice", at)
			}
			seen[k] = true
			for _, d := range x.DependsOn {
				if d >= 1 && d <= int64(pi) {
					dep = true
				}
			}
		}
		if fresh && len(atypes) < 3 {
			return bad("part %d lacks an answer type", pi+1)
		}
		if fresh && pi > 0 && !dep {
			return bad("part %d depends on no earlier part", pi+1)
		}
	}
	if fresh && len(types) < 4 {
		return bad("%d reasoning types", len(types))
	}
	return nil
}
