package attack

import (
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

// The procedural inverter reads the generator's vocabulary the way a
// script author with the source at hand would: it runs the public
// generator in-process and keeps what its questions and answers spell out
// (cause, category and tier labels; metric, category, site and replicate
// nouns), per domain and part. No answer of a served set is ever looked
// up: the harvest uses its own seeds.

// pVocab is the harvested vocabulary of one domain part.
type pVocab struct {
	causes, tiers, cats []string // lower case, longest first
	siteNouns, repNouns []string
	metrics, catDims    []string
	names               []string // entity full names and descriptions
}

const (
	vocabSetsPerDomain = 60
	vocabSeed          = 0x5eed_0f_ab1e
)

var (
	vocabOnce sync.Once
	vocabTab  map[string]*[skill.Parts]pVocab
)

var (
	vqRecorded = regexp.MustCompile(`(?i)\bwhat ([a-z0-9][\w '’-]*?) (?:was recorded|belongs|was logged)`)
	vqHighest  = regexp.MustCompile(`(?i)\bthe (?:highest|lowest) ([\w '’-]+?)(?: among|\?|,)`)
	vqSite     = regexp.MustCompile(`(?i)\b(?:at every|one|single|more than one) ([a-z][a-z '’-]*?)(?:,|\)| and| or| had| nor| was|\?)`)
	vqRep      = regexp.MustCompile(`(?i)\breplicat(?:ed|ion|e) (?:their [\w -]+ )?in ([a-z][\w '’-]*?)(?:,| and|\?|\))`)
	vqCatDim   = regexp.MustCompile(`(?i)\bshares its ([\w '’-]+?) with`)
)

func harvestVocab() {
	vocabTab = map[string]*[skill.Parts]pVocab{}
	add := func(list *[]string, v string) {
		v = strings.ToLower(strings.TrimSpace(v))
		if v == "" || len(v) > 64 || slices.Contains(*list, v) {
			return
		}
		*list = append(*list, v)
	}
	for _, d := range procedural.Domains() {
		seed := uint64(vocabSeed)
		g, err := procedural.New(procedural.Config{Domains: []string{d.Name}, QuestionsPerPart: procedural.MaxQuestionsPerPart, MinTokens: procedural.MinPartTokens, MaxTokens: procedural.MinMaxTokens, Seed: &seed})
		if err != nil {
			continue
		}
		tab := &[skill.Parts]pVocab{}
		for i := 0; i < vocabSetsPerDomain; i++ {
			set, err := g.Generate(seed + uint64(i))
			if err != nil || len(set.Parts) != skill.Parts {
				continue
			}
			for p := range set.Parts {
				v := &tab[p]
				for _, q := range set.Parts[p].Questions {
					if q.AnswerType == skill.EntityAnswer {
						for _, a := range append(append([]string(nil), q.Variants()...), q.Distractors...) {
							if !wbCodeLike(a) && len(wbTokens(a)) > 0 && !wbHasDigitWord(wbTokens(a)[0].text) {
								add(&v.names, a)
							}
						}
					}
					if q.AnswerType == skill.LabelAnswer {
						dst := &v.cats
						switch q.ReasoningType {
						case skill.Causal:
							dst = &v.causes
						case skill.Conditional:
							dst = &v.tiers
						}
						for _, a := range q.Variants() {
							add(dst, a)
						}
					}
					if m := vqRecorded.FindStringSubmatch(q.Question); m != nil {
						switch q.AnswerType {
						case skill.NumericAnswer:
							add(&v.metrics, m[1])
						case skill.LabelAnswer:
							add(&v.catDims, m[1])
						}
					}
					if m := vqHighest.FindStringSubmatch(q.Question); m != nil && q.AnswerType == skill.EntityAnswer {
						add(&v.metrics, m[1])
					}
					if m := vqCatDim.FindStringSubmatch(q.Question); m != nil {
						add(&v.catDims, m[1])
					}
					for _, m := range vqSite.FindAllStringSubmatch(q.Question, -1) {
						add(&v.siteNouns, m[1])
					}
					for _, m := range vqRep.FindAllStringSubmatch(q.Question, -1) {
						add(&v.repNouns, m[1])
					}
				}
			}
		}
		for p := range tab {
			v := &tab[p]
			for _, l := range []*[]string{&v.causes, &v.tiers, &v.cats, &v.siteNouns, &v.repNouns, &v.metrics, &v.catDims, &v.names} {
				slices.SortStableFunc(*l, func(a, b string) int { return len(b) - len(a) })
			}
			// A category that is also a cause or tier stays where the
			// questions put it; drop site nouns that are generic words.
			v.siteNouns = slices.DeleteFunc(v.siteNouns, func(s string) bool { return wbFunctionWords[s] || len(s) < 3 })
		}
		vocabTab[d.Name] = tab
	}
}

// procVocab returns the harvested vocabulary for a domain part, or an
// empty one.
func procVocab(domain string, part int) *pVocab {
	vocabOnce.Do(harvestVocab)
	if t, ok := vocabTab[domain]; ok && part >= 0 && part < skill.Parts {
		return &t[part]
	}
	return &pVocab{}
}

// wbHasDigitWord reports whether s has a word with a digit (a code
// spelled with spaces, such as "CYP2C9 *3").
func wbHasDigitWord(s string) bool {
	for _, t := range wbTokens(s) {
		if strings.ContainsAny(t.text, "0123456789") {
			return true
		}
	}
	return false
}
