package procedural

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/acaptcha/acaptcha/skill"
)

// Most property tests run over this many seeds (each set takes well under
// a millisecond, so the suite stays fast).
const manySeeds = 300

func mustNew(t testing.TB, cfg Config) *Generator {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return g
}

func traced(t testing.TB, g *Generator, seed uint64) (*skill.Set, *trace) {
	t.Helper()
	tr := &trace{}
	set, err := g.generate(seed, tr)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	return set, tr
}

func blocks(narr string) []string { return strings.Split(narr, "\n\n") }

// blockOf returns the index of the "\n\n"-separated block containing s.
func blockOf(narr, s string) int {
	for i, b := range blocks(narr) {
		if strings.Contains(b, s) {
			return i
		}
	}
	return -1
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// containsWord reports whether w occurs in s case-insensitively with no
// letter or digit directly before or after it.
func containsWord(s, w string) bool {
	ls, lw := strings.ToLower(s), strings.ToLower(w)
	for off := 0; ; {
		i := strings.Index(ls[off:], lw)
		if i < 0 {
			return false
		}
		i += off
		before, _ := utf8.DecodeLastRuneInString(ls[:i])
		after, _ := utf8.DecodeRuneInString(ls[i+len(lw):])
		if (i == 0 || !isWordRune(before)) && (i+len(lw) == len(ls) || !isWordRune(after)) {
			return true
		}
		off = i + 1
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	bad := []Config{
		{Domains: []string{"astrology"}},
		{MinTokens: 100},
		{MinTokens: 900, MaxTokens: 500},
		{MinTokens: 350, MaxTokens: MinMaxTokens - 1},
		{MaxTokens: MaxPartTokens + 1},
		{QuestionsPerPart: -1},
		{QuestionsPerPart: MaxQuestionsPerPart + 1},
	}
	for _, cfg := range bad {
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) = %v, want ErrConfig", cfg, err)
		}
	}
	var zero Generator
	if _, err := zero.Generate(1); !errors.Is(err, ErrConfig) {
		t.Errorf("zero Generator: %v, want ErrConfig", err)
	}
	g := mustNew(t, Config{})
	if g.Name() != "procedural" {
		t.Errorf("Name() = %q", g.Name())
	}
	if g.minTok != DefaultMinTokens || g.maxTok != DefaultMaxTokens || g.qpp != DefaultQuestionsPerPart {
		t.Errorf("defaults not applied: %+v", g)
	}
}

func TestDomainsListed(t *testing.T) {
	ds := Domains()
	want := []string{"biochemistry", "cybersecurity", "clinical_trials", "food_safety", "financial_markets"}
	var got []string
	for _, d := range ds {
		got = append(got, d.Name)
		if len(d.Description) < 20 {
			t.Errorf("domain %s: description %q too short", d.Name, d.Description)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("domain %s missing from %v", w, got)
		}
	}
}

// Each domain has its own entity morphology per part and realistic
// numeric values with units.
func TestDomainMorphology(t *testing.T) {
	type morph struct {
		parts [3]*regexp.Regexp // entity code shape per part
		units [3]string         // a unit (or label) the part's values carry
		names *regexp.Regexp    // full names or aliases that must occur somewhere
	}
	ms := map[string]morph{
		"biochemistry": {
			parts: [3]*regexp.Regexp{
				regexp.MustCompile(`^[A-Z][A-Za-z0-9]*([1-4]|-(I|II|III|IV)|-[αβγδ])$`),
				regexp.MustCompile(`^[A-Z]{2,3}-\d{3,4}$`),
				regexp.MustCompile(`^[A-Za-z0-9-]+-c\d+$`),
			},
			units: [3]string{"%", " µM", "%"},
			names: regexp.MustCompile(`(kinase|dehydrogenase|synthase|isomerase|oxidase|reductase|lyase|aldolase|enolase|mutase|transferase|deaminase|dismutase|cyclooxygenase|tyrosinase|glutaminase|hydratase|anhydrase|esterase)`),
		},
		"cybersecurity": {
			parts: [3]*regexp.Regexp{
				regexp.MustCompile(`^CVE-20\d\d-\d{4,5}$`),
				regexp.MustCompile(`^[A-Z][a-z]+[A-Z][a-z]+$`),
				regexp.MustCompile(`^[a-z]{3}-[a-z]+-\d{3}$`),
			},
			units: [3]string{"", " GB", ""},
			names: regexp.MustCompile(`Win64/[A-Z][a-z]+[A-Z][a-z]+`),
		},
		"clinical_trials": {
			parts: [3]*regexp.Regexp{
				regexp.MustCompile(`^[A-Z]{2,3}-\d{3,4}$`),
				regexp.MustCompile(`^[A-Za-z]{2,4}$`),
				regexp.MustCompile(`^[A-Z0-9-]+\*\d+[A-Z]?(:\d\d)?$`),
			},
			units: [3]string{" points", "%", ""},
			names: regexp.MustCompile(`[a-z]+(tinib|parib|mab|gliptin|ciclib|sartan|lisib|vastatin|glutide|prazole|lukast|setron)`),
		},
		"food_safety": {
			parts: [3]*regexp.Regexp{
				regexp.MustCompile(`^[A-Za-z]{2,4}-\S+$`),
				regexp.MustCompile(`^[A-Z]-\d{4}-[A-Z]$`),
				regexp.MustCompile(`^SUP-\d{4}$`),
			},
			units: [3]string{"%", " log CFU/g", "%"},
			names: regexp.MustCompile(`(Listeria|Salmonella|Escherichia|Campylobacter|Bacillus|Staphylococcus|Vibrio|Yersinia|Cronobacter|norovirus|hepatitis A virus|Shigella)`),
		},
		"financial_markets": {
			parts: [3]*regexp.Regexp{
				regexp.MustCompile(`^(US|EZ|UK|JP|CA|AU|DE|CN) [A-Z]{2,4}$`),
				regexp.MustCompile(`^[A-Z]{3}/[A-Z]{3}$`),
				regexp.MustCompile(`^[A-Z]{4}$`),
			},
			units: [3]string{" standard deviations", "%", "%"},
			names: regexp.MustCompile(`[A-Z][a-z]+ [A-Z][a-z]+ Fund`),
		},
	}
	for name, m := range ms {
		g := mustNew(t, Config{Domains: []string{name}})
		withNames := 0
		for seed := uint64(0); seed < 40; seed++ {
			set, tr := traced(t, g, seed)
			if set.Domain != name {
				t.Fatalf("domain %q, want %q", set.Domain, name)
			}
			all := ""
			for p := range set.Parts {
				narr := set.Parts[p].Narrative
				all += narr
				for _, c := range tr.parts[p].cands {
					if !m.parts[p].MatchString(c.e.code) {
						t.Errorf("%s part %d: code %q does not match %v", name, p+1, c.e.code, m.parts[p])
					}
					if !strings.Contains(narr, c.e.code) {
						t.Errorf("%s part %d: code %q not in narrative", name, p+1, c.e.code)
					}
				}
				v := tr.parts[p].cands[0].val
				st := tr.parts[p].stage
				want := fixedString(v, st.metric.dec) + m.units[p]
				if m.units[p] == "%" {
					if !strings.Contains(narr, fixedString(v, st.metric.dec)+"%") && !strings.Contains(narr, fixedString(v, st.metric.dec)+" percent") {
						t.Errorf("%s part %d: value %q with unit not in narrative", name, p+1, want)
					}
				} else if !strings.Contains(narr, want) {
					t.Errorf("%s part %d: value %q not in narrative", name, p+1, want)
				}
			}
			if m.names.MatchString(all) {
				withNames++
			}
		}
		if withNames < 30 {
			t.Errorf("%s: only %d of 40 sets use full names matching %v", name, withNames, m.names)
		}
	}
}

var banned = regexp.MustCompile(`(?i)\b(confirm\w*|ruled? out|primary suspect|suspect\w*|target\w*|most likely|likely|culprit\w*|definitive\w*|conclusive\w*|root cause)\b`)

// Candidates are described in neutral terms: no explicit verdict labels in
// narratives or questions.
func TestNeutralTerms(t *testing.T) {
	g := mustNew(t, Config{})
	for seed := uint64(0); seed < manySeeds; seed++ {
		set, _ := traced(t, g, seed)
		for p, part := range set.Parts {
			if m := banned.FindString(part.Narrative); m != "" {
				t.Fatalf("seed %d part %d: banned label %q in narrative", seed, p+1, m)
			}
			for _, q := range part.Questions {
				if m := banned.FindString(q.Question); m != "" {
					t.Fatalf("seed %d part %d: banned label %q in question %q", seed, p+1, m, q.Question)
				}
			}
		}
	}
	// The template tables themselves carry no banned label either.
	for _, pool := range [][]tpl{tx.persistPos, tx.persistNeg, tx.replPos, tx.replNeg, tx.intrinsic, tx.attrib, tx.wide, tx.local,
		tx.value, tx.first, tx.tag, tx.link, tx.cat, tx.neutral, tx.prelim, tx.revise, tx.bridge2, tx.bridge3, tx.ruleHi, tx.ruleLo, tx.filler} {
		for _, tp := range pool {
			if m := banned.FindString(tp.src); m != "" {
				t.Errorf("template %q carries %q", tp.src, m)
			}
		}
	}
}

// Every fact kind has at least five paraphrases.
func TestParaphrasePools(t *testing.T) {
	pools := map[string][]tpl{
		"persistPos": tx.persistPos, "persistNeg": tx.persistNeg, "replPos": tx.replPos, "replNeg": tx.replNeg,
		"intrinsic": tx.intrinsic, "attrib": tx.attrib, "wide": tx.wide, "local": tx.local, "value": tx.value,
		"first": tx.first, "tag": tx.tag, "link": tx.link, "cat": tx.cat, "neutral": tx.neutral,
		"prelim": tx.prelim, "revise": tx.revise, "bridge2": tx.bridge2, "bridge3": tx.bridge3,
		"ruleHi": tx.ruleHi, "ruleLo": tx.ruleLo,
	}
	for name, p := range pools {
		if len(p) < 5 {
			t.Errorf("fact kind %s has %d templates, want >= 5", name, len(p))
		}
	}
	if tablesErr != nil {
		t.Fatal(tablesErr)
	}
}

// passFail derives each candidate's checks from the facts actually present
// in the narrative: +1 passed, -1 failed, 0 not stated.
func passFail(t *testing.T, narr string, pt *partTrace) [][nCrit]int {
	t.Helper()
	out := make([][nCrit]int, len(pt.cands))
	for _, f := range pt.facts {
		if f.text == "" || !strings.Contains(narr, f.text) {
			t.Fatalf("fact %+v not found in narrative", f)
		}
		for cr := range nCrit {
			for _, k := range []factKind{f.kind, f.kind2} {
				switch k {
				case critFacts[cr][0]:
					out[f.cand][cr] = +1
				case critFacts[cr][1]:
					out[f.cand][cr] = -1
				}
			}
		}
	}
	// Relations take the related candidate's stated outcome, which is
	// never itself a relation.
	for _, f := range pt.facts {
		if f.kind == fkSame {
			if f.other < 0 || out[f.other][f.rel] == 0 {
				t.Fatalf("relation %+v: the other candidate's outcome is not stated", f)
			}
			out[f.cand][f.rel] = out[f.other][f.rel]
		}
	}
	return out
}

// Exactly one candidate per part passes every check (and, from part 2 on,
// is tied to the previous standout); every distractor fails at least one
// check yet also has a positive fact; without the earlier answer at least
// two candidates would qualify.
func TestUniqueTruthAndPositiveDistractors(t *testing.T) {
	g := mustNew(t, Config{})
	for seed := uint64(0); seed < manySeeds; seed++ {
		set, tr := traced(t, g, seed)
		for p := range set.Parts {
			pt := &tr.parts[p]
			if n := len(pt.cands); n < 4 || n > 6 {
				t.Fatalf("seed %d part %d: %d candidates, want 4..6", seed, p+1, n)
			}
			pf := passFail(t, set.Parts[p].Narrative, pt)
			var qualify, local []int
			for i, c := range pf {
				allPass, anyFail, anyPass := true, false, false
				for _, v := range c {
					allPass = allPass && v == +1
					anyFail = anyFail || v == -1
					anyPass = anyPass || v == +1
				}
				if allPass {
					local = append(local, i)
					if p == 0 || pt.cands[i].link == tr.parts[p-1].truth {
						qualify = append(qualify, i)
					}
				} else if !anyFail {
					t.Fatalf("seed %d part %d: candidate %d neither passes nor fails", seed, p+1, i)
				}
				if !anyPass {
					t.Fatalf("seed %d part %d: candidate %d has no positive fact", seed, p+1, i)
				}
			}
			if len(qualify) != 1 || qualify[0] != pt.truth {
				t.Fatalf("seed %d part %d: qualifying %v, want exactly the truth %d", seed, p+1, qualify, pt.truth)
			}
			if p > 0 && len(local) < 2 {
				t.Fatalf("seed %d part %d: only %v pass locally; the part would not need memory", seed, p+1, local)
			}
		}
	}
}

// Each part carries an early conclusion favouring a distractor that a
// later paragraph revises, citing one of the distractor's failed checks.
func TestMisleadingConclusionRevised(t *testing.T) {
	g := mustNew(t, Config{})
	for seed := uint64(0); seed < manySeeds; seed++ {
		set, tr := traced(t, g, seed)
		for p := range set.Parts {
			pt := &tr.parts[p]
			narr := set.Parts[p].Narrative
			if pt.misled == pt.truth {
				t.Fatalf("seed %d part %d: the interim view favours the truth", seed, p+1)
			}
			pre, rev, mf := pt.facts[pt.prelimFact], pt.facts[pt.reviseFact], pt.facts[pt.misledFact]
			if pre.cand != pt.misled || rev.cand != pt.misled || mf.cand != pt.misled || !isNegative(mf.kind) {
				t.Fatalf("seed %d part %d: interim/revision facts not about the misled candidate", seed, p+1)
			}
			bp, br, bm := blockOf(narr, pre.text), blockOf(narr, rev.text), blockOf(narr, mf.text)
			if bp < 0 || br < 0 || bm != br {
				t.Fatalf("seed %d part %d: blocks %d/%d/%d", seed, p+1, bp, br, bm)
			}
			if br-bp < 2 {
				t.Fatalf("seed %d part %d: revision in block %d too close to interim view in %d", seed, p+1, br, bp)
			}
			if !strings.Contains(blocks(narr)[br], rev.text+" "+mf.text) {
				t.Fatalf("seed %d part %d: revision does not cite the failed check", seed, p+1)
			}
		}
	}
}

// The facts each answer needs are scattered over non-adjacent paragraphs.
func TestAnswerFactsScattered(t *testing.T) {
	g := mustNew(t, Config{})
	for seed := uint64(0); seed < manySeeds; seed++ {
		set, tr := traced(t, g, seed)
		for p := range set.Parts {
			pt := &tr.parts[p]
			narr := set.Parts[p].Narrative
			for qi, keys := range pt.keyCands {
				if len(keys) == 0 {
					t.Fatalf("seed %d part %d question %d: no key candidates", seed, p+1, qi)
				}
				var bs []int
				for _, f := range pt.facts {
					if slices.Contains(keys, f.cand) {
						bs = append(bs, blockOf(narr, f.text))
					}
				}
				if slices.Max(bs)-slices.Min(bs) < 2 {
					t.Fatalf("seed %d part %d question %d: key facts only in blocks %v", seed, p+1, qi, bs)
				}
			}
		}
	}
}

// Entities are referred to by several names: code, full name, alias.
func TestAliases(t *testing.T) {
	g := mustNew(t, Config{})
	total, multi := 0, 0
	for seed := uint64(0); seed < manySeeds; seed++ {
		set, tr := traced(t, g, seed)
		for p := range set.Parts {
			narr := set.Parts[p].Narrative
			for i, c := range tr.parts[p].cands {
				forms := 0
				for _, f := range []string{c.e.code, c.e.full, "the " + c.e.desc, "The " + c.e.desc} {
					if f != "" && strings.Contains(narr, f) {
						forms++
					}
				}
				total++
				if forms >= 2 {
					multi++
				} else if i == tr.parts[p].truth {
					t.Fatalf("seed %d part %d: the standout appears under %d form(s)", seed, p+1, forms)
				}
			}
		}
	}
	if multi*10 < total*9 {
		t.Errorf("only %d of %d candidates appear under two or more names", multi, total)
	}
}

var formatMarkers = [nFormats]*regexp.Regexp{
	fmtReport:     regexp.MustCompile(`^[A-Z ]+REPORT: .*\n(?s:.*)\n\nSECTION A: `),
	fmtMemo:       regexp.MustCompile(`^MEMORANDUM\nTo: .*\nFrom: .*\nDate: `),
	fmtAuditLog:   regexp.MustCompile(`^AUDIT LOG: (?s:.*)\n\n\[\d{4}-\d\d-\d\d \d\d:\d\d\] [A-Z][a-z]+: `),
	fmtEmail:      regexp.MustCompile(`^Subject: (?s:.*)\n\nFrom: [A-Z][a-z]+ [A-Z][a-z]+ <[a-z.]+@[a-z.]+>\nSent: (?s:.*)\nRegards,\n[A-Z][a-z]+`),
	fmtFieldNotes: regexp.MustCompile(`^[A-Z ]+NOTES: .*\nObserver: (?s:.*)\n\nEntry 1, `),
	fmtIncident:   regexp.MustCompile(`^INCIDENT REPORT IR-\d{4}-\d{3}\n(?s:.*)\n\n1\. [A-Z]`),
}

// Parts use different document formats, and all six occur across sets.
func TestFormatVariety(t *testing.T) {
	g := mustNew(t, Config{})
	var seen [nFormats]int
	for seed := uint64(0); seed < manySeeds; seed++ {
		set, tr := traced(t, g, seed)
		var fs []formatID
		for p := range set.Parts {
			f := tr.parts[p].format
			if !formatMarkers[f].MatchString(set.Parts[p].Narrative) {
				t.Fatalf("seed %d part %d: narrative does not look like a %s:\n%.300s", seed, p+1, docNames[f], set.Parts[p].Narrative)
			}
			if slices.Contains(fs, f) {
				t.Fatalf("seed %d: format %s used twice", seed, docNames[f])
			}
			fs = append(fs, f)
			seen[f]++
		}
	}
	for f, n := range seen {
		if n < manySeeds/10 {
			t.Errorf("format %s used %d times in %d sets", docNames[f], n, manySeeds)
		}
	}
}

// containsNumber reports whether the decimal num occurs in s as a number
// of its own: not inside a longer number or a dotted sequence such as an
// IP address (10.5.135.74 does not state 10.5).
func containsNumber(s, num string) bool {
	isDigit := func(c byte) bool { return c >= '0' && c <= '9' }
	for off := 0; ; {
		i := strings.Index(s[off:], num)
		if i < 0 {
			return false
		}
		i += off
		j := i + len(num)
		before := i > 0 && (isDigit(s[i-1]) || (s[i-1] == '.' && i > 1 && isDigit(s[i-2])))
		after := j < len(s) && (isDigit(s[j]) || (s[j] == '.' && j+1 < len(s) && isDigit(s[j+1])))
		if !before && !after {
			return true
		}
		off = i + 1
	}
}

// answerForms lists the strings that would state an earlier answer: every
// variant of entity and label answers, and decimal numeric answers. An
// entity's description is left out: later parts refer back to every
// earlier candidate by description or tag, the standout's among them, by
// design (the links), so stating one singles nothing out.
func answerForms(q skill.Question, pt *partTrace) []string {
	if q.AnswerType == skill.NumericAnswer {
		if strings.Contains(q.Answer, ".") {
			return []string{q.Answer}
		}
		return nil
	}
	var out []string
	for _, v := range q.Variants() {
		desc := false
		for _, c := range pt.cands {
			desc = desc || (q.AnswerType == skill.EntityAnswer && v == c.e.desc)
		}
		if !desc {
			out = append(out, v)
		}
	}
	return out
}

// Later parts refer to earlier candidates only indirectly and never state
// an earlier answer (or listed variant) or an earlier candidate's name.
func TestIndirectReferencesOnly(t *testing.T) {
	g := mustNew(t, Config{})
	for seed := uint64(0); seed < manySeeds; seed++ {
		set, tr := traced(t, g, seed)
		for p := 1; p < skill.Parts; p++ {
			later := set.Parts[p].Narrative
			for _, q := range set.Parts[p].Questions {
				later += "\n" + q.Question
			}
			for e := 0; e < p; e++ {
				for _, q := range set.Parts[e].Questions {
					for _, f := range answerForms(q, &tr.parts[e]) {
						stated := containsWord(later, f)
						if q.AnswerType == skill.NumericAnswer {
							stated = containsNumber(later, f)
						}
						if stated {
							t.Fatalf("seed %d: part %d states part %d answer %q", seed, p+1, e+1, f)
						}
					}
				}
				for _, c := range tr.parts[e].cands {
					for _, v := range c.e.variants {
						if containsWord(later, v) {
							t.Fatalf("seed %d: part %d names part %d candidate %q", seed, p+1, e+1, v)
						}
					}
				}
			}
			// Every link is an indirect reference that resolves in the
			// previous part: a tag stated there or a descriptive alias.
			pt, prev := &tr.parts[p], &tr.parts[p-1]
			narr, prevNarr := set.Parts[p].Narrative, set.Parts[p-1].Narrative
			for i, c := range pt.cands {
				pc := prev.cands[c.link]
				var ref, anchor string
				if c.refStyle == 0 {
					ref = "the " + prev.stage.kind + " " + pc.tagVerb + " " + prev.stage.tagNoun + " " + pc.tag
					anchor = pc.tag
				} else {
					ref = "the " + pc.e.desc
					anchor = "the " + strings.ToLower(pc.e.desc)
				}
				stmt := pt.stage.linkSg + " " + ref
				if !strings.Contains(narr, stmt) {
					t.Fatalf("seed %d part %d: candidate %d: link %q not stated", seed, p+1, i, stmt)
				}
				if !strings.Contains(strings.ToLower(prevNarr), strings.ToLower(anchor)) {
					t.Fatalf("seed %d part %d: reference %q does not resolve in part %d", seed, p+1, ref, p)
				}
			}
		}
	}
}

// Part 2 questions depend on part 1, part 3 questions on parts 1 and 2.
func TestDependsOn(t *testing.T) {
	g := mustNew(t, Config{})
	for seed := uint64(0); seed < manySeeds; seed++ {
		set, _ := traced(t, g, seed)
		want := [][]int{nil, {1}, {1, 2}}
		for p, part := range set.Parts {
			n := 0
			for _, q := range part.Questions {
				if !slices.Equal(q.DependsOn, want[p]) {
					t.Fatalf("seed %d part %d: DependsOn %v, want %v", seed, p+1, q.DependsOn, want[p])
				}
				n++
			}
			if p > 0 && n == 0 {
				t.Fatalf("seed %d part %d: no dependent question", seed, p+1)
			}
		}
	}
}

func coverage(t *testing.T, set *skill.Set, qpp int) {
	t.Helper()
	rts := map[skill.ReasoningType]bool{}
	ats := map[skill.AnswerType]bool{}
	for p, part := range set.Parts {
		if len(part.Questions) != qpp {
			t.Fatalf("part %d: %d questions, want %d", p+1, len(part.Questions), qpp)
		}
		partRT := map[skill.ReasoningType]bool{}
		partAT := map[skill.AnswerType]bool{}
		for _, q := range part.Questions {
			if partRT[q.ReasoningType] {
				t.Fatalf("part %d: reasoning type %s twice", p+1, q.ReasoningType)
			}
			partRT[q.ReasoningType], partAT[q.AnswerType] = true, true
			rts[q.ReasoningType], ats[q.AnswerType] = true, true
			if q.ReasoningType == skill.Conditional && q.AnswerType == skill.EntityAnswer {
				t.Fatalf("part %d: conditional entity question", p+1)
			}
		}
		if qpp >= 3 && len(partAT) != 3 {
			t.Fatalf("part %d: answer types %v, want all three", p+1, partAT)
		}
	}
	if qpp >= 2 && len(rts) != 6 {
		t.Fatalf("reasoning types %v, want all six", rts)
	}
	if len(ats) != 3 {
		t.Fatalf("answer types %v, want all three", ats)
	}
}

// All six reasoning types and three answer types appear in every set.
func TestReasoningAndAnswerTypes(t *testing.T) {
	for _, qpp := range []int{1, 2, 3, 4, 6} {
		g := mustNew(t, Config{QuestionsPerPart: qpp})
		for seed := uint64(0); seed < 100; seed++ {
			set, _ := traced(t, g, seed)
			coverage(t, set, qpp)
		}
	}
}

var greek = regexp.MustCompile(`[αβγδ]`)

// Answers come with variants: units, bare numbers, spelled-out Greek
// letters, codes and full names; all within the answer limits.
func TestAnswerVariants(t *testing.T) {
	g := mustNew(t, Config{})
	sawGreek := false
	for seed := uint64(0); seed < manySeeds; seed++ {
		set, _ := traced(t, g, seed)
		for p, part := range set.Parts {
			for _, q := range part.Questions {
				vs := q.Variants()
				if vs[0] != q.Answer || len(vs) > skill.MaxVariants {
					t.Fatalf("seed %d part %d: bad variants %v for %q", seed, p+1, vs, q.Answer)
				}
				if n := utf8.RuneCountInString(q.Answer); n == 0 || n > skill.MaxAnswerChars {
					t.Fatalf("seed %d: canonical answer %q has %d characters", seed, q.Answer, n)
				}
				for _, v := range vs {
					if n := len(v); n == 0 || n > skill.MaxAnswerBytes {
						t.Fatalf("seed %d: variant %q has %d bytes", seed, v, n)
					}
				}
				switch q.AnswerType {
				case skill.EntityAnswer, skill.NumericAnswer:
					if len(vs) < 2 {
						t.Fatalf("seed %d part %d: %s answer %q has no variants", seed, p+1, q.AnswerType, q.Answer)
					}
				}
				if greek.MatchString(q.Answer) {
					sawGreek = true
					spelled := false
					for _, v := range vs {
						spelled = spelled || strings.Contains(v, "gamma") || strings.Contains(v, "alpha") || strings.Contains(v, "beta") || strings.Contains(v, "delta")
					}
					if !spelled {
						t.Fatalf("seed %d: Greek answer %q without spelled-out variant: %v", seed, q.Answer, vs)
					}
				}
				if q.AnswerType == skill.NumericAnswer && strings.Contains(q.Answer, ".") {
					withUnit := false
					for _, v := range vs[1:] {
						withUnit = withUnit || strings.HasPrefix(v, q.Answer) || strings.HasSuffix(v, q.Answer)
					}
					if !withUnit {
						t.Fatalf("seed %d: numeric answer %q lacks unit variants %v", seed, q.Answer, vs)
					}
				}
			}
		}
	}
	if !sawGreek {
		t.Error("no Greek-letter answer in the sample")
	}
}

// Narrative length per part stays within 15% of the requested range and
// of the part's own target, across many seeds and ranges.
func TestLengthWithinRange(t *testing.T) {
	ranges := [][2]int{{350, 1100}, {350, MinMaxTokens}, {350, 500}, {500, 800}, {800, 1100}, {1100, 2000}, {2500, 4000}}
	for _, r := range ranges {
		g := mustNew(t, Config{MinTokens: r[0], MaxTokens: r[1]})
		lo, hi := r[1], r[0]
		worst := 0.0
		raised, parts := 0, 0
		seeds := uint64(150)
		if r[1] > 2000 {
			seeds = 40
		}
		for seed := uint64(0); seed < seeds; seed++ {
			set, tr := traced(t, g, seed)
			for p, part := range set.Parts {
				n := skill.CountTokens(part.Narrative)
				if w := countWords(part.Narrative); w != len(strings.Fields(part.Narrative)) {
					t.Fatalf("countWords %d != strings.Fields %d", w, len(strings.Fields(part.Narrative)))
				}
				if float64(n) < 0.85*float64(r[0]) || float64(n) > 1.15*float64(r[1]) {
					t.Fatalf("range %v seed %d part %d: %d tokens", r, seed, p+1, n)
				}
				target := tr.parts[p].effTarget
				if target < tr.parts[p].target {
					t.Fatalf("effective target %d below sampled %d", target, tr.parts[p].target)
				}
				if target > tr.parts[p].target {
					raised++
					// Only the world model's floor may lift a target by
					// more than a few percent.
					if float64(target) > 1.05*float64(tr.parts[p].target) && target > 520 {
						t.Fatalf("range %v seed %d part %d: target %d lifted to %d", r, seed, p+1, tr.parts[p].target, target)
					}
				}
				parts++
				dev := float64(n-target) / float64(target)
				if dev < -0.15 || dev > 0.15 {
					t.Fatalf("range %v seed %d part %d: %d tokens for target %d", r, seed, p+1, n, target)
				}
				worst = max(worst, dev, -dev)
				lo, hi = min(lo, n), max(hi, n)
			}
		}
		t.Logf("range %v: lengths %d..%d, worst deviation from target %.1f%%, %d of %d parts above the sampled target", r, lo, hi, 100*worst, raised, parts)

		if span := r[1] - r[0]; span > 200 && hi-lo < span/2 {
			t.Errorf("range %v: lengths only span %d..%d", r, lo, hi)
		}
	}
}

// Generate is deterministic per seed and differs across seeds; Next uses
// crypto randomness unless a seed is configured.
func TestDeterminism(t *testing.T) {
	g := mustNew(t, Config{})
	a, err := g.Generate(42)
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.Generate(42)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed gave different sets")
	}
	ids := map[string]bool{}
	for seed := uint64(0); seed < 200; seed++ {
		s, err := g.Generate(seed)
		if err != nil {
			t.Fatal(err)
		}
		if ids[s.ID] {
			t.Fatalf("seed %d repeats an earlier set", seed)
		}
		ids[s.ID] = true
	}

	seed := uint64(7)
	g1, g2 := mustNew(t, Config{Seed: &seed}), mustNew(t, Config{Seed: &seed})
	ctx := context.Background()
	for i := range 5 {
		x, err1 := g1.Next(ctx)
		y, err2 := g2.Next(ctx)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !reflect.DeepEqual(x, y) {
			t.Fatalf("seeded streams differ at set %d", i)
		}
		if ids[x.ID] && i > 0 {
			t.Fatalf("seeded stream repeats at set %d", i)
		}
		ids[x.ID] = true
	}

	r := mustNew(t, Config{})
	seen := map[string]bool{}
	for range 20 {
		s, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seen[s.ID] {
			t.Fatal("crypto-random generator repeated a set")
		}
		seen[s.ID] = true
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.Next(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next on a cancelled context: %v", err)
	}
}

// Every set validates, starts a session under the default policy and
// survives the paper-schema JSON round trip.
func TestValidAndSessionReady(t *testing.T) {
	for _, cfg := range []Config{{}, {MinTokens: 350, MaxTokens: MinMaxTokens}, {QuestionsPerPart: 1}, {QuestionsPerPart: 6, MinTokens: 2000, MaxTokens: 2500}} {
		g := mustNew(t, cfg)
		for seed := uint64(0); seed < 150; seed++ {
			set, err := g.Generate(seed)
			if err != nil {
				t.Fatal(err)
			}
			if err := set.Validate(); err != nil {
				t.Fatalf("%+v seed %d: %v", cfg, seed, err)
			}
			if _, err := skill.NewSession(set, skill.DefaultPolicy(), nil); err != nil {
				t.Fatalf("%+v seed %d: NewSession: %v", cfg, seed, err)
			}
			data, err := json.Marshal(set)
			if err != nil {
				t.Fatal(err)
			}
			back, err := skill.DecodeSet(data)
			if err != nil {
				t.Fatalf("seed %d: DecodeSet: %v", seed, err)
			}
			if back.ID != set.ID || back.ContentID() != set.ID {
				t.Fatalf("seed %d: ID %q does not survive the round trip", seed, set.ID)
			}
		}
	}
}

// Answers follow from the stated facts: values appear in the text, tiers
// follow the stated rule, counts match the failing candidates.
func TestAnswersMatchNarrative(t *testing.T) {
	g := mustNew(t, Config{})
	for seed := uint64(0); seed < manySeeds; seed++ {
		set, tr := traced(t, g, seed)
		for p, part := range set.Parts {
			pt := &tr.parts[p]
			truth := pt.cands[pt.truth]
			for _, q := range part.Questions {
				if q.AnswerType == skill.EntityAnswer {
					found := false
					for _, c := range pt.cands {
						found = found || c.e.variants[0] == q.Answer
					}
					if !found {
						t.Fatalf("seed %d part %d: entity answer %q is not a candidate", seed, p+1, q.Answer)
					}
				}
				if q.ReasoningType == skill.MultiHop && q.AnswerType == skill.NumericAnswer {
					// The standout's value against the highest or lowest
					// of the others, both stated.
					var lo, hi int64 = 1 << 62, -1 << 62
					for i, c := range pt.cands {
						if i != pt.truth {
							lo, hi = min(lo, c.val), max(hi, c.val)
						}
					}
					m := &pt.stage.metric
					want := []string{fixedString(absDiff(truth.val, lo), m.dec), fixedString(absDiff(truth.val, hi), m.dec)}
					if !slices.Contains(want, q.Answer) {
						t.Fatalf("seed %d part %d: difference answer %q, want one of %v", seed, p+1, q.Answer, want)
					}
					for _, v := range []int64{truth.val, lo, hi} {
						if !strings.Contains(part.Narrative, fixedString(v, m.dec)) {
							t.Fatalf("seed %d part %d: value %d not stated", seed, p+1, v)
						}
					}
				}
			}
		}
	}
}

func TestNextConcurrent(t *testing.T) {
	g := mustNew(t, Config{})
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for range 10 {
				s, err := g.Next(context.Background())
				if err == nil {
					err = s.Validate()
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// laterVocabulary lists every string that can appear in parts after stage
// s of d: generic templates, the domain's filler and decorations, the
// later stages' vocabulary and the aliases of stage s's entities (which
// later parts use to refer back).
func laterVocabulary(t *testing.T, d *domain, s int) []string {
	var out []string
	for _, pool := range [][]tpl{tx.persistPos, tx.persistNeg, tx.replPos, tx.replNeg, tx.intrinsic, tx.attrib, tx.wide, tx.local,
		tx.value, tx.first, tx.tag, tx.link, tx.cat, tx.neutral, tx.prelim, tx.revise, tx.bridge2, tx.bridge3, tx.ruleHi, tx.ruleLo,
		tx.ruleHiShort, tx.ruleLoShort, tx.profileLead, tx.filler, tx.sameFrames, tx.mixedFrames, d.filler} {
		for _, tp := range pool {
			out = append(out, tp.src)
		}
	}
	for _, pool := range tx.fmtFiller {
		for _, tp := range pool {
			out = append(out, tp.src)
		}
	}
	for _, pool := range tx.clause {
		for _, tp := range pool {
			out = append(out, tp.src)
		}
	}
	out = append(out, d.teams...)
	out = append(out, d.systems...)
	out = append(out, d.reportWord, d.fieldWord)
	out = append(out, reportHeadings[:]...)
	out = append(out, incidentHeadings[:]...)
	out = append(out, memoRoles[:]...)
	out = append(out, fillerCodes[:]...)
	for i := s + 1; i < len(d.stages); i++ {
		st := &d.stages[i]
		out = append(out, st.kind, st.kinds, st.siteNoun, st.siteNouns, st.catDim, st.tagNoun, st.linkSg, st.linkPl, st.tierDim, st.intervalNoun, st.metric.name)
		for _, l := range [][]string{st.sig, st.rep, st.recheck, st.sites, st.tagVerbs, st.titles} {
			out = append(out, l...)
		}
		for _, ls := range [][]label{st.causes, st.cats, st.tiers[:]} {
			for _, l := range ls {
				out = append(out, l.phrase)
			}
		}
		g := &gen{r: newGen(nil, 1, nil).r, year: 2024}
		for range 200 {
			var used usedSet
			e := st.names(g, &used)
			out = append(out, e.code, e.full, e.desc)
		}
	}
	// Aliases of this stage's entities: later parts refer back with them.
	g := &gen{r: newGen(nil, 2, nil).r, year: 2024}
	st := &d.stages[s]
	for range 400 {
		var used usedSet
		out = append(out, "the "+st.names(g, &used).desc, st.kind, st.tagNoun)
	}
	out = append(out, st.tagVerbs...)
	return out
}

// No answerable label of a stage (category, tier, cause) can occur in any
// text a later part may contain.
func TestVocabularyDisjoint(t *testing.T) {
	for di := range domainTable {
		d := &domainTable[di]
		for s := 0; s < len(d.stages)-1; s++ {
			later := laterVocabulary(t, d, s)
			st := &d.stages[s]
			for _, ls := range [][]label{st.causes, st.cats, st.tiers[:]} {
				for _, l := range ls {
					for _, v := range l.variants {
						for _, text := range later {
							if containsWord(text, v) {
								t.Errorf("%s stage %d: answer %q occurs in later text %q", d.name, s+1, v, text)
							}
						}
					}
				}
			}
		}
	}
}

// Aliases (used by later parts to refer back) never contain an answer
// variant of the entity they stand for.
func TestAliasesHideNames(t *testing.T) {
	for di := range domainTable {
		d := &domainTable[di]
		for s := range d.stages {
			g := &gen{r: newGen(nil, uint64(s), nil).r, year: 2024}
			for range 500 {
				var used usedSet
				e := d.stages[s].names(g, &used)
				if len(e.variants) == 0 || e.variants[0] != e.code {
					t.Fatalf("%s: variants %v do not start with the code %q", d.name, e.variants, e.code)
				}
				for _, v := range e.variants {
					if containsWord("the "+e.desc, v) {
						t.Errorf("%s stage %d: alias %q contains answer %q", d.name, s+1, e.desc, v)
					}
				}
			}
		}
	}
}

// A memoryless reader cannot find the previous standout by counting how
// often later candidates refer to each earlier one.
func TestLinkCountsDoNotRevealEarlierAnswer(t *testing.T) {
	g := mustNew(t, Config{})
	for seed := uint64(0); seed < manySeeds; seed++ {
		_, tr := traced(t, g, seed)
		for p := 1; p < skill.Parts; p++ {
			counts := map[int]int{}
			for _, c := range tr.parts[p].cands {
				counts[c.link]++
			}
			truth := tr.parts[p-1].truth
			top := 0
			for _, n := range counts {
				top = max(top, n)
			}
			tied := 0
			for _, n := range counts {
				if n == top {
					tied++
				}
			}
			if counts[truth] == top && tied < 2 {
				t.Fatalf("seed %d part %d: the earlier standout is the unique most-referenced candidate (%v)", seed, p+1, counts)
			}
		}
	}
}

// The standout's tier under the stated rule is spread evenly, so the
// conditional label cannot be guessed from the rule alone.
func TestTierAnswersBalanced(t *testing.T) {
	g := mustNew(t, Config{})
	counts := map[int]int{}
	total := 0
	for seed := uint64(0); seed < 3*manySeeds; seed++ {
		set, tr := traced(t, g, seed)
		for p, part := range set.Parts {
			if pt := &tr.parts[p]; pt.rule {
				seen := map[int]bool{}
				for _, c := range pt.cands {
					seen[tierOf(&pt.stage.metric, c.val, pt.t1, pt.t2)] = true
				}
				if len(seen) < 2 {
					t.Fatalf("seed %d part %d: every candidate falls in the same tier", seed, p+1)
				}
			}
			for _, q := range part.Questions {
				if q.ReasoningType != skill.Conditional || q.AnswerType != skill.LabelAnswer {
					continue
				}
				for i, l := range tr.parts[p].stage.tiers {
					if l.text == q.Answer {
						counts[i]++
						total++
					}
				}
			}
		}
	}
	for i := range 3 {
		if counts[i]*5 < total {
			t.Errorf("tier %d answers %d of %d conditional questions", i, counts[i], total)
		}
	}
	t.Logf("tier answers: %v of %d", counts, total)
}

var (
	badArticle = regexp.MustCompile(`\b[Aa] ([aeioAEIO][A-Za-z0-9-]*)`)
	badPunct   = regexp.MustCompile(`  | ,|,\.|\.\.|,,|\( |\s\)|,;|;\.`)
)

// A smoke test of the templates' grammar: articles agree with the next
// word, no doubled spaces or stray punctuation, sentences start with a
// capital or a code.
func TestGrammarSmoke(t *testing.T) {
	g := mustNew(t, Config{})
	for seed := uint64(0); seed < manySeeds; seed++ {
		set, _ := traced(t, g, seed)
		for p, part := range set.Parts {
			texts := []string{part.Narrative}
			for _, q := range part.Questions {
				texts = append(texts, q.Question)
			}
			for _, s := range texts {
				for _, loc := range badArticle.FindAllStringSubmatchIndex(s, -1) {
					w := strings.ToLower(s[loc[2]:loc[3]])
					if strings.HasSuffix(s[:loc[0]], "band ") || (loc[0] > 0 && strings.ContainsRune("-/*:", rune(s[loc[0]-1]))) {
						continue // the tier label "band A", or the end of a code (R-9126-A)
					}
					if !strings.HasPrefix(w, "one") && !strings.HasPrefix(w, "eu") {
						t.Fatalf("seed %d part %d: article before %q in %q", seed, p+1, w, s[loc[0]:loc[1]])
					}
				}
				if m := badPunct.FindString(s); m != "" {
					i := strings.Index(s, m)
					t.Fatalf("seed %d part %d: stray punctuation %q near %q", seed, p+1, m, s[max(0, i-60):min(len(s), i+40)])
				}
			}
		}
	}
}
