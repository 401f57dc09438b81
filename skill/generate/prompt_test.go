package generate_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/generate"
)

func TestDomains(t *testing.T) {
	ds := generate.Domains()
	if len(ds) < 15 {
		t.Fatalf("%d domains, want at least 15", len(ds))
	}
	names := map[string]bool{}
	fields := map[string]bool{}
	for _, d := range ds {
		if names[d.Name] {
			t.Errorf("duplicate domain %s", d.Name)
		}
		names[d.Name] = true
		fields[d.Field] = true
		if d.Field == "" || len(d.Description) < 30 || len(d.Entities) < 3 || len(d.Patterns) < 3 {
			t.Errorf("domain %s is incomplete: %+v", d.Name, d)
		}
		if d.Name != strings.ToLower(d.Name) || strings.ContainsAny(d.Name, " -") {
			t.Errorf("domain name %q is not a machine name", d.Name)
		}
	}
	// The paper's five and all five FORD fields it draws from.
	for _, n := range []string{"biochemistry", "cybersecurity", "clinical_trials", "food_safety", "financial_markets"} {
		if !names[n] {
			t.Errorf("paper domain %s missing", n)
		}
	}
	if len(fields) != 5 {
		t.Errorf("domains cover %d FORD fields, want 5", len(fields))
	}
	if d, err := generate.LookupDomain(" Site-Reliability "); err != nil || d.Name != "site_reliability" {
		t.Errorf("LookupDomain: %v %v", d, err)
	}
	if _, err := generate.LookupDomain("poetry"); err == nil {
		t.Error("unknown domain found")
	}
	// Domains returns copies.
	ds[0].Entities[0] = "changed"
	if generate.Domains()[0].Entities[0] == "changed" {
		t.Error("Domains exposes its table")
	}
}

// The prompt asks for everything the paper's Appendix A asks for, with
// the configured numbers, in our own words.
func TestPromptDemands(t *testing.T) {
	d, _ := generate.LookupDomain("genomics")
	p := generate.Params{QuestionsPerPart: 4, MinTokens: 400, MaxTokens: 900, MinEntities: 5, MaxEntities: 7, MinMisleading: 2, MinNumbers: 6, MinScatter: 3, MaxAnswerChars: 18, MinSetReasoningTypes: 5}
	v := generate.NewVariation(rand.New(rand.NewPCG(1, 2)), 0.9)
	pr := generate.BuildPrompt(d, p, v)
	all := pr.System + "\n" + pr.User
	for _, want := range []string{
		// chain and indirect reference
		"Part 1 stands on its own", "only by description", "Never repeat an earlier part's answer",
		"cannot be answered without knowing part 1's answers", "draws on both earlier parts",
		// neutral candidates and implicit distinctions
		"5 to 7 named candidate entities", "neutral or favourable", `"confirmed"`, `"ruled out"`, `"primary suspect"`,
		"persists over time", "independent repeats", "explains it away", "widespread",
		// misdirection, numbers, scattering, formats, aliases
		"at least 2 paragraph(s)", "at least 6 numeric values", "distractors", "at least 3 paragraphs that are not next to each other",
		"document format", "different names, abbreviations or descriptions",
		// lengths and questions
		"400 to 900 tokens", "exactly 4 questions", "at most 18 characters", "entity name", "a number", "label or classification",
		"at least 5 different reasoning types", "does not contain its own answer", "never where it is",
		// answers
		"2 to 8 accepted spellings", "equals \"answer\"", "Greek", "percent sign", "descriptive phrase the text itself uses",
		// distractors and the expected form (issue 13)
		`"distractors"`, "every other candidate the question weighs", "code, full name and descriptive phrase", "at most 32 entries",
		"a number without its unit", "a label as the text names it",
		// stated rules: the rule's own order, the answer's place drawn
		"at least three cases", "in the rule's own order", "no case is listed first because it applies",
		"Stated rules: where a part's label answer applies a stated rule", v.RuleCases[0].String(),
		// output
		"no code fence", "depends_on", `"answers"`,
		// domain section and variation
		d.Description, d.Entities[0], d.Patterns[0], v.CaseKey, v.Formats[0], v.Words[0],
	} {
		if !strings.Contains(all, want) {
			t.Errorf("prompt lacks %q", want)
		}
	}
	for _, r := range skill.ReasoningTypes {
		if !strings.Contains(pr.System, "- "+string(r)+":") {
			t.Errorf("prompt does not explain reasoning type %s", r)
		}
	}
	// Not the paper's template: none of its distinctive phrases or
	// examples.
	for _, paper := range []string{"Generate a three-part narrative sequence", "anaphoric", "LDH-", "HK-II", "18.6", "uncompetitive",
		"Return ONLY a JSON object", "S-Hard", "$min_", "NLU"} {
		if strings.Contains(all, paper) {
			t.Errorf("prompt contains the paper's %q", paper)
		}
	}
}

func TestVariations(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	seen := map[string]bool{}
	var cases [skill.Parts]map[generate.RuleCase]int
	for i := range cases {
		cases[i] = map[generate.RuleCase]int{}
	}
	for range 50 {
		v := generate.NewVariation(r, 0.9)
		key := fmt.Sprint(v.CaseKey, v.Formats, v.Words, v.Seed)
		if seen[key] {
			t.Fatal("variation repeated")
		}
		seen[key] = true
		if v.Temperature < 0.8 || v.Temperature > 1.0 {
			t.Errorf("temperature %v", v.Temperature)
		}
		if v.Formats[0] == v.Formats[1] || v.Formats[1] == v.Formats[2] || v.Formats[0] == v.Formats[2] || len(v.Words) != 3 {
			t.Errorf("variation %+v", v)
		}
		for i, c := range v.RuleCases {
			if c != generate.RuleMiddle && c != generate.RuleLast {
				t.Errorf("part %d rule case %d", i+1, c)
			}
			cases[i][c]++
		}
		d, _ := generate.LookupDomain("agronomy")
		user := generate.BuildPrompt(d, generate.Params{QuestionsPerPart: 3}, v).User
		want := fmt.Sprintf("it is, in the rule's own order, %s of the rule in part 1, %s in part 2 and %s in part 3",
			v.RuleCases[0], v.RuleCases[1], v.RuleCases[2])
		if !strings.Contains(user, want) {
			t.Errorf("user prompt lacks %q:\n%s", want, user)
		}
	}
	// Every place is drawn for every part: the answer's place in its rule
	// follows from nothing a script sees.
	for i, m := range cases {
		if m[generate.RuleMiddle] < 10 || m[generate.RuleLast] < 10 {
			t.Errorf("part %d rule cases over 50 variations: %v", i+1, m)
		}
	}
	// The rule cases come from the variation's seed: the random stream,
	// and with it the case keys, formats and words a seed gives, is what
	// it was before they existed (the LLM corpus's first set has case key
	// VJ-4171 from this seed).
	if v := generate.NewVariation(rand.New(rand.NewPCG(7305, 2291)), 0.9); v.CaseKey != "VJ-4171" {
		t.Errorf("case key %s: the variation's random stream changed", v.CaseKey)
	}
}
