package eval_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/generate"
)

// llmAnswer is one line of the answers file of TestMeasureLLMAnswers: an
// answer a language model wrote to one question of the shared LLM corpus,
// with the writer's own label.
type llmAnswer struct {
	File     string `json:"file"`     // relative to the corpus: "sets/01-....json", "hybrid/01-hybrid-q.json"
	Part     int    `json:"part"`     // 1-based
	Question int    `json:"question"` // 1-based, in the file as written
	Answer   string `json:"answer"`
	Label    string `json:"label"`   // "right", "wrong", or anything else (e.g. "disputed": the set's key contradicts its narrative), listed apart
	Primary  bool   `json:"primary"` // the answer the solver prompt asks for (first written)
}

// TestMeasureLLMAnswers judges answers that a language model wrote to the
// questions of the shared LLM corpus (LLM-written sets, hybrid rewordings,
// hybrid rewordings with reworded questions), each labelled right or wrong
// by its writer before it saw the expected answer: the wording of a
// capable agent's right answer, with its natural variants (unit, article,
// short justification, capitals, number words, a lead-in), and plausible
// wrong answers (a misread, an earlier value, a distractor entity).
//
// LLM_ANSWERS names the answers file (JSON lines, llmAnswer); the corpus is
// ../../../shared/llm-corpus or $ACAPTCHA_LLM_CORPUS. Neither is part of the
// project: the test skips when either is absent. Every answer is judged as
// a verifier judges it: skill.JudgeRule on the question as the verifier
// serves it (the set after offline validation, generate.Validator with the
// corpus source's white-box attackers, so with model-written distractors
// unlisted where stage 1b removes them) and the narratives shown up to its
// part. Questions the validator drops (or of a set it rejects) are never
// served; they are judged as written and counted apart. The test reports
// right answers accepted and wrong answers accepted per source, and lists
// each refused right answer and accepted wrong answer (-v).
func TestMeasureLLMAnswers(t *testing.T) {
	path := os.Getenv("LLM_ANSWERS")
	if path == "" {
		t.Skip("set LLM_ANSWERS=<answers.jsonl> to measure")
	}
	dir := os.Getenv("ACAPTCHA_LLM_CORPUS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "llm-corpus")
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Skipf("LLM corpus %s absent", dir)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("answers file: %v", err)
	}
	defer f.Close()
	var answers []llmAnswer
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var a llmAnswer
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("answers file: %v", err)
		}
		answers = append(answers, a)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}

	pol := skill.DefaultPolicy()
	validators := map[skill.SourceKind]*generate.Validator{}
	validator := func(kind skill.SourceKind) *generate.Validator {
		if v := validators[kind]; v != nil {
			return v
		}
		v, err := generate.NewValidator(generate.ValidatorConfig{Policy: &pol, WhiteBoxKind: kind})
		if err != nil {
			t.Fatal(err)
		}
		validators[kind] = v
		return v
	}
	type served struct {
		raw *skill.Set
		rep *generate.Report
	}
	sets := map[string]*served{}
	load := func(file string) *served {
		if s, ok := sets[file]; ok {
			return s
		}
		raw, err := skill.LoadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		kind := skill.SourceCorpus
		if strings.HasPrefix(file, "hybrid/") {
			kind = skill.SourceHybrid
		}
		rep, err := validator(kind).Run(context.Background(), raw, generate.Mode{Full: true})
		if err != nil {
			t.Fatal(err)
		}
		s := &served{raw: raw, rep: rep}
		sets[file] = s
		return s
	}
	// question returns the question as the verifier judges it, the
	// narratives shown up to its part, and whether it is served.
	question := func(a llmAnswer) (*skill.Question, []string, bool) {
		s := load(a.File)
		pi, qi := a.Part-1, a.Question-1
		if pi < 0 || pi >= len(s.raw.Parts) || qi < 0 || qi >= len(s.raw.Parts[pi].Questions) {
			t.Fatalf("%s: no question %d.%d", a.File, a.Part, a.Question)
		}
		if s.rep.Accepted() {
			k := 0
			for _, qr := range s.rep.Questions {
				if qr.Part != a.Part || qr.Dropped != "" {
					continue
				}
				if qr.Question == a.Question {
					set := s.rep.Set
					return &set.Parts[pi].Questions[k], shownThrough(set, pi), true
				}
				k++
			}
		}
		return &s.raw.Parts[pi].Questions[qi], shownThrough(s.raw, pi), false
	}

	type tally struct{ right, rightOK, wrong, wrongOK, prim, primOK int }
	figures := map[string]*tally{}
	add := func(key string, a llmAnswer, ok bool) {
		x := figures[key]
		if x == nil {
			x = &tally{}
			figures[key] = x
		}
		if a.Label == "right" {
			x.right++
			if ok {
				x.rightOK++
			}
			if a.Primary {
				x.prim++
				if ok {
					x.primOK++
				}
			}
		} else {
			x.wrong++
			if ok {
				x.wrongOK++
			}
		}
	}
	questions := map[string]map[string]bool{}
	var listed []string
	for _, a := range answers {
		q, shown, isServed := question(a)
		ok, rule := skill.JudgeRule(q, a.Answer, shown)
		if a.Label != "right" && a.Label != "wrong" {
			listed = append(listed, fmt.Sprintf("%s (%v): %s %d.%d %q (canonical %q)", strings.ToUpper(a.Label), ok, a.File, a.Part, a.Question, a.Answer, q.Answer))
			continue
		}
		src := sourceOf(a.File)
		scope := "served"
		if !isServed {
			scope = "not served"
		}
		add(src+" all", a, ok)
		add(src+" "+scope, a, ok)
		add("total all", a, ok)
		add("total "+scope, a, ok)
		if questions[src] == nil {
			questions[src] = map[string]bool{}
		}
		questions[src][fmt.Sprintf("%s %d.%d", a.File, a.Part, a.Question)] = isServed
		if ok != (a.Label == "right") {
			what := "REFUSED RIGHT"
			if ok {
				what = "ACCEPTED WRONG (" + rule + ")"
			}
			listed = append(listed, fmt.Sprintf("%s: %s %d.%d [%s] %q (canonical %q, variants %q, distractors %q)",
				what, a.File, a.Part, a.Question, scope, a.Answer, q.Answer, q.Variants(), q.Distractors))
		}
	}
	sort.Strings(listed)
	for _, l := range listed {
		t.Log(l)
	}
	var keys []string
	for k := range figures {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, src := range []string{"sets", "hybrid", "hybrid-q"} {
		n, s := 0, 0
		for _, isServed := range questions[src] {
			n++
			if isServed {
				s++
			}
		}
		t.Logf("%s: %d questions answered, %d of them served", src, n, s)
	}
	for _, k := range keys {
		x := figures[k]
		t.Logf("%-22s right accepted %4d/%-4d (primary %3d/%-3d)  wrong accepted %3d/%-3d",
			k, x.rightOK, x.right, x.primOK, x.prim, x.wrongOK, x.wrong)
	}
}

// sourceOf names the corpus part of an answers-file path.
func sourceOf(file string) string {
	switch {
	case strings.HasSuffix(file, "-hybrid-q.json"):
		return "hybrid-q"
	case strings.HasPrefix(file, "hybrid/"):
		return "hybrid"
	}
	return "sets"
}

// shownThrough is the narratives of parts 0..pi: what a verifier has shown
// when it judges an answer of part pi.
func shownThrough(s *skill.Set, pi int) []string {
	out := make([]string, 0, pi+1)
	for r := 0; r <= pi; r++ {
		out = append(out, s.Parts[r].Narrative)
	}
	return out
}
