package attack

import (
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/acaptcha/acaptcha/skill"
)

// The scatter attacker: a script that knows three demands of the
// generation prompt (skill/generate/prompt.go) on a narrative. "The facts
// behind each answer sit in at least 3 paragraphs that are not next to
// each other" (scattering): the answer entity is the one written about in
// the most paragraphs apart from each other, while a distractor is
// introduced and then explained away in one place. "Call the same entity
// by different names, abbreviations or descriptions" (anti-parsing): the
// text introduces each candidate once with its description ("CLV-5649,
// a nucleotide-mimetic fragment") and later says "the fragment", so the
// attacker counts those descriptions as mentions. "At least one paragraph
// states an early or provisional conclusion that a later paragraph
// corrects" (misdirection): a candidate named in a draft, preliminary or
// headline paragraph is the misleading one. And the negation questions
// the prompt asks for name what to set aside ("once aggregation, optical
// interference and failure to reproduce are accounted for"): a candidate
// written about with those words is set aside.

// WhiteBoxScatter is the scatter attacker's name.
const WhiteBoxScatter = "whitebox-scatter"

// Scatter returns the scatter attacker.
func Scatter() Named {
	return Named{
		Name:        WhiteBoxScatter,
		Description: "answers an entity question with the candidate written about (by name or by its introduced description) in the most separate paragraphs, less the draft's pick and those the question's set-aside words describe",
		Prover:      &wbProver{name: WhiteBoxScatter, solve: solveScatter},
	}
}

var (
	// scWhich asks for an item; scNotEntity for a number or a label.
	scWhich     = regexp.MustCompile(`(?i)\b(?:which|who)\s+([a-z][a-z-]*)`)
	scNotEntity = regexp.MustCompile(`(?i)\b(?:how many|how much|by what|by how)\b|^\s*what (?:is|was|were) the\b|\b(?:which|what)\s+(?:class|classes|tier|status|grade|category|label|level|outcome|role|code|rating|band)\b`)
	scAsideQ    = regexp.MustCompile(`(?i)\b(?:once|after|setting aside|set aside|leaving aside|excluding|discounting|without being explained by|not explained by|rather than|accounted for|explained away|ruling out)\b`)
	// scAppos is a candidate's introduction: "X, a nucleotide-mimetic
	// fragment" or "X (the converted boathouse)".
	scAppos = regexp.MustCompile(`^\s*(?:,|\()\s*(?:a|an|the|our|its)\s+((?:[a-z][a-z-]*\s+){0,3}[a-z][a-z-]*)`)
)

// scMaxCands bounds the candidates one question weighs (a narrative
// introduces 4 to 6), so hostile text stays cheap.
const scMaxCands = 48

type scCand struct {
	name    string
	aliases []string
	paras   map[int]bool
	misled  bool
	aside   int
	head    bool
}

func solveScatter(s *wbSession, part int, c *skill.Challenge) string {
	q := c.Question
	if !scWhich.MatchString(q) || scNotEntity.MatchString(q) {
		return fallback
	}
	r := scRank(s, part, q)
	if len(r) == 0 {
		return fallback
	}
	return r[0]
}

// scRank returns the entity candidates of part's narrative for question
// q, best first: those the question's head noun types (all when none is),
// by paragraph spread less the draft's pick and the set-aside words.
func scRank(s *wbSession, part int, q string) []string {
	text := s.narratives[part]
	lw := s.cached("llm", part, func() any { return parseLLMShared(text) }).(*lWorld)
	base := scBaseShared(text, lw)
	paras := base.paras
	if len(base.cands) == 0 {
		return nil
	}
	cands := make([]*scCand, len(base.cands))
	for i, b := range base.cands {
		cands[i] = &scCand{name: b.name, aliases: b.aliases, paras: map[int]bool{}}
	}
	names := make([]string, 0, len(cands))
	aside := scAsideWords(q)
	headNoun := ""
	if m := scWhich.FindStringSubmatch(q); m != nil && !wbFunctionWords[strings.ToLower(m[1])] {
		headNoun = strings.TrimSuffix(strings.ToLower(m[1]), "s")
	}
	for pi, p := range paras {
		pl, prelim := base.lower[pi], base.draft[pi]
		for _, cd := range cands {
			hit := wbContainsWord(pl, strings.ToLower(cd.name))
			for _, a := range cd.aliases {
				if !hit && wbContainsWord(pl, "the "+a) {
					hit = true
				}
			}
			if !hit {
				continue
			}
			cd.paras[pi] = true
			if prelim {
				cd.misled = true
			}
			for _, sent := range wbSentences(p) {
				sl := strings.ToLower(sent)
				if !wbContainsWord(sl, strings.ToLower(cd.name)) && !scAnyAlias(sl, cd.aliases) {
					continue
				}
				if headNoun != "" && scTyped(sl, strings.ToLower(cd.name), headNoun, cd.aliases) {
					cd.head = true
				}
				for _, w := range wbLowerWords(sl) {
					if len(w) >= 4 && aside[w[:min(5, len(w))]] {
						cd.aside++
						break
					}
				}
			}
		}
	}
	// The question's head noun ("which compound") picks the kind of
	// candidate when any candidate is written about with it.
	anyHead := false
	for _, cd := range cands {
		anyHead = anyHead || cd.head
	}
	type scored struct {
		name string
		sc   float64
	}
	var out []scored
	for _, cd := range cands {
		if anyHead && !cd.head {
			continue
		}
		sc := float64(scSpread(cd.paras))
		if cd.misled {
			sc -= 1.5
		}
		sc -= 0.75 * float64(cd.aside)
		out = append(out, scored{cd.name, sc})
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].sc > out[b].sc })
	for _, o := range out {
		names = append(names, o.name)
	}
	return names
}

// scBaseOf computes scBase.
func scBaseOf(text string, lw *lWorld) *scBase {
	paras := scParagraphs(text)
	var cands []*scCand
	names := scIntroduced(text)
	for _, e := range lw.ents {
		names = append(names, e.name)
	}
	seen := map[string]bool{}
	for _, name := range names {
		if seen[name] {
			continue
		}
		seen[name] = true
		if len(cands) >= scMaxCands {
			break
		}
		if scUnitLike(text, name) || scHeadingOnly(paras, name) {
			continue // a unit ("41 EBC") or a heading ("Samples."), not an item
		}
		cands = append(cands, &scCand{name: name, paras: map[int]bool{}})
	}
	if len(cands) == 0 {
		return &scBase{paras: paras}
	}
	lower, draft := make([]string, len(paras)), make([]bool, len(paras))
	for i, p := range paras {
		lower[i], draft[i] = strings.ToLower(p), lPrelim.MatchString(p)
	}
	// Descriptions from introductions; a description shared by two
	// candidates names neither.
	owner := map[string]int{}
	for ci, cd := range cands {
		for _, p := range paras {
			for k := wbIndexWord(strings.ToLower(p), strings.ToLower(cd.name)); k >= 0; {
				rest := p[k+len(cd.name):]
				if m := scAppos.FindStringSubmatch(rest); m != nil {
					fs := strings.Fields(m[1])
					head := fs[len(fs)-1]
					forms := []string{head, strings.Join(fs, " ")}
					for _, adj := range fs[:len(fs)-1] {
						forms = append(forms, adj+" "+head)
					}
					for _, a := range forms {
						if wbFunctionWords[a] || len(a) < 4 {
							continue
						}
						if o, ok := owner[a]; ok && o != ci {
							owner[a] = -1
						} else if !ok {
							owner[a] = ci
						}
					}
				}
				break
			}
		}
	}
	for a, ci := range owner {
		if ci >= 0 {
			cands[ci].aliases = append(cands[ci].aliases, a)
		}
	}
	base := &scBase{paras: slices.Clip(paras), lower: lower, draft: draft}
	for _, cd := range cands {
		base.cands = append(base.cands, scBaseCand{name: cd.name, aliases: slices.Clip(cd.aliases)})
	}
	return base
}

// scParagraphs splits a narrative at blank lines, or at line breaks when
// it has none.
func scParagraphs(text string) []string {
	ps := strings.Split(text, "\n\n")
	if len(ps) < 3 {
		ps = strings.Split(text, "\n")
	}
	var out []string
	for _, p := range ps {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// scSpread is the largest number of the paragraphs that are pairwise
// not next to each other.
func scSpread(ps map[int]bool) int {
	n, last := 0, -2
	for i := 0; i <= 256; i++ {
		if ps[i] && i > last+1 {
			n++
			last = i
		}
	}
	return n
}

// scAsideWords returns the five-letter stems of the content words of the
// question's set-aside phrase: from its first set-aside word to the
// question's end or to the clause that asks ("Once A, B and C are set
// aside, which ...").
func scAsideWords(q string) map[string]bool {
	out := map[string]bool{}
	loc := scAsideQ.FindStringIndex(q)
	if loc == nil {
		return out
	}
	rest := q[loc[0]:]
	if m := scAskClause.FindStringIndex(rest); m != nil {
		rest = rest[:m[0]]
	}
	for _, w := range wbLowerWords(rest) {
		switch w {
		case "once", "after", "setting", "aside", "leaving", "excluding", "discounting", "without", "being", "explained", "rather", "accounted", "away", "ruling", "every", "which":
			continue
		}
		if len(w) >= 4 && !wbFunctionWords[w] {
			out[w[:min(5, len(w))]] = true
		}
	}
	return out
}

var scAskClause = regexp.MustCompile(`(?i),\s+(?:\w+\s+)?(?:which|what|who)\b`)

func scAnyAlias(sl string, aliases []string) bool {
	for _, a := range aliases {
		if wbContainsWord(sl, "the "+a) {
			return true
		}
	}
	return false
}

// scUnitLike reports a name that stands right after a number in at least
// half of its occurrences.
func scUnitLike(text, name string) bool {
	n, after := 0, 0
	for i := 0; i < len(text); {
		k := strings.Index(text[i:], name)
		if k < 0 {
			break
		}
		k += i
		n++
		pre := strings.TrimRight(text[:k], " ")
		if pre != "" && pre[len(pre)-1] >= '0' && pre[len(pre)-1] <= '9' {
			after++
		}
		i = k + len(name)
	}
	return n > 0 && 2*after >= n
}

// scIntroduced lists the names and codes the text introduces with a
// description ("Vat Birch, the tall glass-lined tank"), the form the
// prompt's anti-parsing rule makes a model use before it switches to the
// description: such a name may be written only once.
func scIntroduced(text string) []string {
	var out []string
	for _, sent := range wbSentences(text) {
		for _, m := range lCapRun.FindAllStringSubmatchIndex(sent, -1) {
			name := strings.TrimSpace(sent[m[2]:m[3]])
			fs := strings.Fields(name)
			for len(fs) > 0 && lStopCaps[fs[0]] {
				fs = fs[1:]
			}
			if len(fs) == 0 || len(name) > 40 {
				continue
			}
			if scAppos.MatchString(sent[m[3]:]) {
				out = append(out, strings.Join(fs, " "))
			}
		}
		for _, t := range wbCodeTokens(sent) {
			if wbCodeLike(t.text) && !wbIsDateTok(t.text) {
				if k := strings.Index(sent, t.text); k >= 0 && scAppos.MatchString(sent[k+len(t.text):]) {
					out = append(out, t.text)
				}
			}
		}
	}
	return out
}

// scTyped reports that a sentence types the candidate by the question's
// head noun: the name or its description holds the noun, or the sentence
// enumerates candidates (three or more items between commas or
// semicolons) after the noun or its plural ("Five compounds ...:
// CLV-0495, ..., CLV-5649, ...").
func scTyped(sl, name, noun string, aliases []string) bool {
	if wbContainsWord(name, noun) {
		return true
	}
	for _, a := range aliases {
		if wbContainsWord(a, noun) {
			return true
		}
	}
	k := wbIndexWord(sl, name)
	if k < 0 || strings.Count(sl, ",")+strings.Count(sl, ";") < 2 {
		return false
	}
	pre := sl[:k]
	return wbContainsWord(pre, noun) || wbContainsWord(pre, noun+"s") || wbContainsWord(pre, noun+"es")
}

// scHeadingOnly reports a name written only as a paragraph's heading
// ("Samples. ...", "FIELD NOTES - ...").
func scHeadingOnly(paras []string, name string) bool {
	n, head := 0, 0
	for _, p := range paras {
		for i := 0; ; {
			k := strings.Index(p[i:], name)
			if k < 0 {
				break
			}
			k += i
			n++
			after := strings.TrimLeft(p[k+len(name):], " ")
			if k == 0 && (after == "" || strings.ContainsAny(after[:1], ".:-–—")) {
				head++
			}
			i = k + len(name)
		}
	}
	return n > 0 && head == n
}

// scBase is what scRank reads from a narrative alone, whatever the
// question: its paragraphs and the candidates with the descriptions they
// were introduced with. It is memoized per narrative (scBaseShared): the
// validator runs the scatter attacker, and the survivor runs it again,
// for every question and context of a set, each in a fresh session.
type scBase struct {
	paras []string
	lower []string // the paragraphs in lower case
	draft []bool   // the paragraph writes a preliminary view (lPrelim)
	cands []scBaseCand
}

type scBaseCand struct {
	name    string
	aliases []string
}

var scBaseMemo parseMemo[string, *scBase]

// scBaseShared is scBaseOf, memoized for narratives up to memoMaxText
// (lw is the narrative's parseLLMShared world, itself memoized by text).
// The slices are clipped and only read.
func scBaseShared(text string, lw *lWorld) *scBase {
	if len(text) > memoMaxText {
		return scBaseOf(text, lw)
	}
	return scBaseMemo.get(text, func() *scBase { return scBaseOf(text, lw) })
}
