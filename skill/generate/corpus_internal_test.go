package generate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/internal/testutil"

	"github.com/acaptcha/acaptcha/skill"
)

// Measurements over the LLM-written sample data of the shared corpus
// (../../../shared/llm-corpus, or $ACAPTCHA_LLM_CORPUS). The project
// never depends on it: these tests skip when it is absent. Run with -v to
// see the figures.

func corpusDir(t *testing.T, sub string) string {
	t.Helper()
	dir := os.Getenv("ACAPTCHA_LLM_CORPUS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "llm-corpus")
	}
	dir = filepath.Join(dir, sub)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("LLM corpus %s absent", dir)
	}
	return dir
}

func readCorpusSet(t *testing.T, path string) *skill.Set {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s skill.Set
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &s
}

// naturalRatios rewrites a reply's ratio phrases into forms a model
// writes when it is not told to copy them: "none of the N" as "not one of
// the N", "2 of [the] 2 X" as "both X".
var (
	noneOf   = regexp.MustCompile(`\bnone of the\b`)
	twoOfTwo = regexp.MustCompile(`\b(?:2|two) (?:out )?of (?:the )?(?:2|two)\b`)
)

func naturalRatios(s string) string {
	return twoOfTwo.ReplaceAllString(noneOf.ReplaceAllString(s, "not one of the"), "both")
}

// TestCorpusHybridFactCheck runs the fact check over the corpus's
// rewording replies as written and with their ratio phrases in natural
// forms, and the question check over its reworded questions.
func TestCorpusHybridFactCheck(t *testing.T) {
	dir := corpusDir(t, "hybrid")
	skels, _ := filepath.Glob(filepath.Join(dir, "*-skeleton.json"))
	if len(skels) == 0 {
		t.Skip("no skeletons")
	}
	parts, natural, natChanged, qTotal, qPass := 0, 0, 0, 0, 0
	for _, sk := range skels {
		nn := strings.TrimSuffix(filepath.Base(sk), "-skeleton.json")
		skel := readCorpusSet(t, sk)
		inv := newInventory(skel)
		for pi := range skel.Parts {
			data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s-p%d.reply.txt", nn, pi+1)))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			} else if err != nil {
				t.Fatal(err)
			}
			narr, err := DecodeRewording(string(data))
			if err != nil {
				t.Errorf("%s p%d: %v", nn, pi+1, err)
				continue
			}
			parts++
			reason, detail := inv.checkRewording(pi, narr, DefaultLengthDrift)
			verdict := "PASS"
			if reason != "" {
				verdict = fmt.Sprintf("FAIL %s: %s", reason, detail)
				t.Errorf("%s p%d: the sample rewording fails: %s", nn, pi+1, verdict)
			}
			nat := naturalRatios(narr)
			nverdict := "unchanged"
			if nat != narr {
				natChanged++
				nverdict = "PASS"
				if r, d := inv.checkRewording(pi, nat, DefaultLengthDrift); r != "" {
					nverdict = fmt.Sprintf("FAIL %s: %s", r, d)
				} else {
					natural++
				}
			}
			t.Logf("%s p%d: as written %s; natural ratios %s", nn, pi+1, verdict, nverdict)
		}
		hq := filepath.Join(dir, nn+"-hybrid-q.json")
		if _, err := os.Stat(hq); err != nil {
			continue
		}
		q := readCorpusSet(t, hq)
		for pi := range skel.Parts {
			for qi := range skel.Parts[pi].Questions {
				if pi >= len(q.Parts) || qi >= len(q.Parts[pi].Questions) {
					continue
				}
				qTotal++
				if _, why, detail := inv.checkQuestion(pi, qi, q.Parts[pi].Questions[qi].Question); why != "" {
					t.Logf("%s Q%d.%d: rewording kept original: %s %s", nn, pi+1, qi+1, why, detail)
				} else {
					qPass++
				}
			}
		}
	}
	t.Logf("fact check: %d sample parts checked; natural ratio forms in %d parts, %d pass", parts, natChanged, natural)
	t.Logf("question check: %d of %d reworded questions pass", qPass, qTotal)
	if natural != natChanged {
		t.Errorf("natural ratio forms fail the fact check in %d of %d parts", natChanged-natural, natChanged)
	}
	if qTotal > 0 && qPass*10 < qTotal*8 {
		t.Errorf("only %d of %d reworded questions pass the question check", qPass, qTotal)
	}
}

// TestCorpusOfflineValidation validates the corpus's LLM-written sets and
// hybrid rewordings offline (structure, leakage, generic and white-box
// attackers, answers judged by skill.Judge) and logs the questions that
// survive per part.
func TestMeasureCorpusOfflineValidation(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	if testutil.RaceEnabled {
		t.Skip("measurement over one goroutine: run without -race (the README's test command does)")
	}
	root := corpusDir(t, "")
	var files []string
	for _, pat := range []string{"sets/*.json", "hybrid/*-hybrid*.json"} {
		m, _ := filepath.Glob(filepath.Join(root, pat))
		files = append(files, m...)
	}
	pol := skill.DefaultPolicy()
	v, err := NewValidator(ValidatorConfig{Policy: &pol})
	if err != nil {
		t.Fatal(err)
	}
	accepted, served, total := 0, 0, 0
	for _, f := range files {
		s := readCorpusSet(t, f)
		if strings.Contains(filepath.Base(f), "hybrid") {
			// The hybrid samples are rewordings of procedural skeletons.
			s.Provenance = &skill.Provenance{Source: skill.SourceHybrid, LLMQuestions: strings.Contains(f, "-hybrid-q")}
		}
		rep := v.Offline(context.Background(), s)
		per := make([]int, len(s.Parts))
		by := map[string]int{}
		for _, q := range rep.Questions {
			total++
			if q.Dropped == "" {
				per[q.Part-1]++
				served++
			}
		}
		for _, d := range rep.Drops {
			by[d.Key()]++
		}
		verdict := "ACCEPTED"
		if !rep.Accepted() {
			verdict = fmt.Sprintf("REJECTED %s: %s", rep.Reason, rep.Detail)
		} else {
			accepted++
		}
		t.Logf("%s: %s; kept per part %v; drops %v", filepath.Base(f), verdict, per, by)
		if rep.Accepted() {
			// A set that passes is servable: every part keeps a question
			// (issue 9's acceptance: "every part still serves at least
			// one question").
			for i, n := range per {
				if n == 0 {
					t.Errorf("%s accepted with no question left in part %d", filepath.Base(f), i+1)
				}
			}
		}
	}
	t.Logf("%d of %d files accepted; %d of %d questions survive", accepted, len(files), served, total)
	if len(files) > 0 && accepted == 0 {
		t.Errorf("no corpus file passes offline validation")
	}
}
