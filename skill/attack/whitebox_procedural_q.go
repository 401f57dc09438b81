package attack

import (
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"github.com/acaptcha/acaptcha/skill"
)

// solveProcedural answers one round of the procedural inverter.
func solveProcedural(s *wbSession, part int, c *skill.Challenge) string {
	w := s.procWorld(part, c.Domain)
	return w.answer(c.Question, part)
}

// procWorld parses the part's narrative (and, once, the earlier parts'
// narratives it needs for links).
func (s *wbSession) procWorld(part int, domain string) *pWorld {
	var prev *pWorld
	if part > 0 && part-1 < len(s.narratives) && s.narratives[part-1] != "" {
		prev = s.procWorld(part-1, domain)
	}
	return s.cached("proc", part, func() any {
		return parseProceduralShared(s.narratives[part], domain, part, prev)
	}).(*pWorld)
}

var (
	reqTruth  = regexp.MustCompile(`leaving aside|is left\?|passed all four|passed every check|no outside cause|no external explanation|not explained by|nor turned out to have an outside cause|or by an external cause|nor had an outside cause|not traced to an outside cause|held up on every count|neither faded|did not fade|not transient`)
	reqAttr   = regexp.MustCompile(`outside cause|outside explanation|outside factor|external cause|outside reason`)
	reqHi     = regexp.MustCompile(`\b(highest|largest|greatest|biggest)\b`)
	reqLo     = regexp.MustCompile(`\b(lowest|smallest)\b`)
	reqEarly  = regexp.MustCompile(`\bearliest\b|\bsoonest\b|\bfirst to have\b`)
	reqLate   = regexp.MustCompile(`\blatest\b|\blast to have\b`)
	reqDiff   = regexp.MustCompile(`by how much|\bdiffer|\bgap\b|\bdifference\b|how far apart`)
	reqCause  = regexp.MustCompile(`explanation\?|what was that explanation|outside factor (?:explained|accounted)|which outside factor|what outside factor|what explained|name the factor`)
	reqNumIns = regexp.MustCompile(`\bnumber\b|how many|how much|\bcount\b|plain number|\bvalue\b|in days`)
	reqEntIns = regexp.MustCompile(`code or name|identifier or name|refers to it|which (?:one|of the)\b|which one's`)
	reqOthers = regexp.MustCompile(`among the other|the other [\w' -]+ of this`)
	// reqAttrOf: the question's subject is the outside-cause candidate
	// (not the standout's "no outside cause").
	reqAttrOf = regexp.MustCompile(`(?:but was|yet had|one's [\w' -]+ was|whose [\w' -]+ had|[\w-]+'s [\w' -]+ was) (?:traced to )?an outside cause|yet had an outside cause`)
	reqLabIns = regexp.MustCompile(`\bas (?:the )?[\w' -]+ (?:records|names|lists|logs) it|\bas recorded|\bas logged|\bas the rule names|\bname the (?:factor|explanation|cause|tier|class|grade|label|category|status)\b`)
)

// answer applies the generator's question semantics to the world.
func (w *pWorld) answer(question string, part int) string {
	q := strings.ToLower(question)
	if len(w.cand) == 0 {
		return fallback
	}
	ent := func(i int) string {
		if i < 0 {
			return fallback
		}
		return w.ents[i].name()
	}
	val := func(i int) string {
		if i < 0 || w.ents[i].val == nil {
			return fallback
		}
		return w.ents[i].valText
	}
	cat := func(i int) string {
		if i < 0 || w.ents[i].cat == "" {
			return fallback
		}
		return w.ents[i].cat
	}
	scope := w.cand
	if part > 0 {
		scope = w.group
	}
	rule := strings.Contains(q, " rule")
	// The answer form, from the instruction a question carries, else from
	// its wording.
	form := ""
	switch {
	case reqLabIns.MatchString(q):
		form = "label"
	case reqEntIns.MatchString(q) && !strings.Contains(q, "how many"):
		form = "entity"
	case reqNumIns.MatchString(q):
		form = "number"
	case strings.HasPrefix(q, "which") && !rule:
		form = "entity"
	}
	switch {
	case rule && (strings.Contains(q, "in days") || strings.Contains(q, "how many days") || strings.Contains(q, "interval") || form == "number"):
		if w.rule == nil || !w.rule.hasInterva || w.truth < 0 || w.ents[w.truth].val == nil {
			return fallback
		}
		return w.rule.intervals[w.rule.tierOf(w.ents[w.truth].val)]
	case rule:
		if w.rule == nil || !w.rule.hasTiers || w.truth < 0 || w.ents[w.truth].val == nil {
			return fallback
		}
		return w.rule.tiers[w.rule.tierOf(w.ents[w.truth].val)]
	case strings.Contains(q, "how many days") || strings.Contains(q, "days passed") || strings.Contains(q, "days later"):
		t := w.truth
		if t < 0 || !w.ents[t].hasRecheck || !w.hasPrelim {
			return fallback
		}
		return strconv.Itoa(w.ents[t].recheck - w.prelimDay)
	case strings.Contains(q, "how many"):
		cr := pcRepl
		switch {
		case strings.Contains(q, "keep") || strings.Contains(q, "through to") || strings.Contains(q, "persist") || strings.Contains(q, "last") || strings.Contains(q, "fade"):
			cr = pcPersist
		case strings.Contains(q, "more than one") || strings.Contains(q, "every ") || strings.Contains(q, "one "):
			cr = pcWide
		case strings.Contains(q, "outside"):
			cr = pcIntrinsic
		}
		n := 0
		for _, i := range scope {
			if w.ents[i].st[cr] < 0 {
				n++
			}
		}
		return strconv.Itoa(n)
	case reqDiff.MatchString(q) && reqOthers.MatchString(q):
		// X against the highest or lowest value among every other
		// candidate of the part: X is the outside-cause candidate when
		// the question describes one, else the standout.
		x := w.truth
		if reqAttrOf.MatchString(q) {
			x = w.attribFor(q, scope)
		}
		if x < 0 || w.ents[x].val == nil {
			return fallback
		}
		hi := reqHi.MatchString(q)
		y := -1
		for _, i := range w.cand {
			if i == x || w.ents[i].val == nil {
				continue
			}
			if y < 0 || (hi && w.ents[i].val.Cmp(w.ents[y].val) > 0) || (!hi && w.ents[i].val.Cmp(w.ents[y].val) < 0) {
				y = i
			}
		}
		if y < 0 {
			return fallback
		}
		d := new(big.Rat).Sub(w.ents[x].val, w.ents[y].val)
		d.Abs(d)
		return wbRatFmt(d, w.dec)
	case reqDiff.MatchString(q):
		var other int
		if strings.Contains(q, "early assessment") || strings.Contains(q, "favoured") || strings.Contains(q, "preliminary") || strings.Contains(q, "interim") || strings.Contains(q, "revised") {
			other = w.misled
		} else {
			other = w.attribFor(q, scope)
		}
		if w.truth < 0 || other < 0 || w.ents[w.truth].val == nil || w.ents[other].val == nil {
			return fallback
		}
		d := new(big.Rat).Sub(w.ents[w.truth].val, w.ents[other].val)
		d.Abs(d)
		return wbRatFmt(d, w.dec)
	case strings.Contains(q, "exactly one other") || strings.Contains(q, "shares its") || strings.Contains(q, "same "):
		t := w.truth
		if t < 0 || w.ents[t].cat == "" {
			return fallback
		}
		for _, i := range w.cand {
			if i != t && strings.EqualFold(w.ents[i].cat, w.ents[t].cat) {
				return ent(i)
			}
		}
		return fallback
	case reqCause.MatchString(q) && form != "number" && (form != "entity" || strings.Contains(q, "factor") || strings.Contains(q, "explanation")):
		a := w.attribFor(q, scope)
		if a < 0 || w.ents[a].cause == "" {
			return fallback
		}
		return w.ents[a].cause
	}
	// Target selection.
	target := -1
	switch {
	case reqHi.MatchString(q) || reqLo.MatchString(q):
		sc := scope
		if part == 0 && strings.Contains(q, "replicated") {
			sc = nil
			for _, i := range w.cand {
				if w.ents[i].st[pcRepl] >= 0 {
					sc = append(sc, i)
				}
			}
		}
		hi := reqHi.MatchString(q)
		for _, i := range sc {
			if w.ents[i].val == nil {
				continue
			}
			if target < 0 || (hi && w.ents[i].val.Cmp(w.ents[target].val) > 0) || (!hi && w.ents[i].val.Cmp(w.ents[target].val) < 0) {
				target = i
			}
		}
	case reqEarly.MatchString(q) || reqLate.MatchString(q):
		early := reqEarly.MatchString(q)
		for _, i := range scope {
			if !w.ents[i].hasRecheck {
				continue
			}
			if target < 0 || (early && w.ents[i].recheck < w.ents[target].recheck) || (!early && w.ents[i].recheck > w.ents[target].recheck) {
				target = i
			}
		}
	case reqTruth.MatchString(q):
		target = w.truth
	case reqAttr.MatchString(q):
		target = w.attribFor(q, scope)
	default:
		target = w.truth
	}
	switch form {
	case "entity":
		return ent(target)
	case "number":
		return val(target)
	case "label":
		if c := cat(target); c != fallback {
			return c
		}
		return val(target)
	}
	for _, m := range w.vocab.metrics {
		if strings.Contains(q, m) {
			return val(target)
		}
	}
	if c := cat(target); c != fallback {
		return c
	}
	return val(target)
}

// attribFor picks the outside-cause candidate a question describes: of
// the candidates in scope whose outside-cause check failed, the one that
// passes the checks the question says it passed.
func (w *pWorld) attribFor(q string, scope []int) int {
	var need []int
	if strings.Contains(q, "persist") {
		need = append(need, pcPersist)
	}
	if strings.Contains(q, "replicat") {
		need = append(need, pcRepl)
	}
	if strings.Contains(q, "every ") || strings.Contains(q, "each ") {
		need = append(need, pcWide)
	}
	best, bs := -1, -1<<30
	for _, i := range scope {
		e := w.ents[i]
		if i == w.truth || (e.st[pcIntrinsic] >= 0 && e.cause == "") {
			continue
		}
		s := 0
		if e.st[pcIntrinsic] < 0 {
			s += 4
		}
		for _, cr := range need {
			switch {
			case e.st[cr] > 0:
				s += 2
			case e.st[cr] < 0:
				s -= 3
			}
		}
		if s > bs {
			best, bs = i, s
		}
	}
	if best < 0 {
		return w.attrib
	}
	return best
}
