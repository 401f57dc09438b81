package secondgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/attack"
	"github.com/acaptcha/acaptcha/skill/generate"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

// verdicts of both implementations on one file.
type verdict struct {
	format, fresh, recheck error
	id                     string
	tokens                 []int
}

func mine(b []byte) verdict {
	var v verdict
	s, err := decode(b)
	if err != nil {
		v.format = err
		return v
	}
	v.fresh = stage1(s, true)
	v.recheck = stage1(s, false)
	v.id = contentID(s)
	for _, p := range s.Parts {
		v.tokens = append(v.tokens, tokens(p.Narrative))
	}
	return v
}

var refValidator *generate.Validator

func theirs(t *testing.T, b []byte) verdict {
	t.Helper()
	if refValidator == nil {
		v, err := generate.NewValidator(generate.ValidatorConfig{Attackers: []attack.Named{}, WhiteBox: generate.WhiteBoxOff})
		if err != nil {
			t.Fatal(err)
		}
		refValidator = v
	}
	var v verdict
	s, err := skill.DecodeSet(b)
	if err == nil {
		err = s.Validate()
	}
	if err != nil {
		v.format = err
		return v
	}
	stage := func(fresh bool) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, err := refValidator.Run(ctx, s, generate.Mode{Fresh: fresh})
		if err != nil {
			return err
		}
		if r.Reason == generate.RejectStructure || r.Reason == generate.RejectPolicy {
			return errors.New(string(r.Reason) + ": " + r.Detail)
		}
		return nil
	}
	v.fresh = stage(true)
	v.recheck = stage(false)
	v.id = s.ContentID()
	for _, p := range s.Parts {
		v.tokens = append(v.tokens, skill.CountTokens(p.Narrative))
	}
	return v
}

type tally struct {
	files, disagree              int
	fmtRej, freshRej, recheckRej int
}

func compare(t *testing.T, name string, b []byte, tl *tally) {
	t.Helper()
	tl.files++
	a, r := mine(b), theirs(t, b)
	var diffs []string
	if (a.format == nil) != (r.format == nil) {
		diffs = append(diffs, fmt.Sprintf("format: mine %v, theirs %v", a.format, r.format))
	} else if a.format == nil {
		if (a.fresh == nil) != (r.fresh == nil) {
			diffs = append(diffs, fmt.Sprintf("stage 1 fresh: mine %v, theirs %v", a.fresh, r.fresh))
		}
		if (a.recheck == nil) != (r.recheck == nil) {
			diffs = append(diffs, fmt.Sprintf("stage 1 re-check: mine %v, theirs %v", a.recheck, r.recheck))
		}
		if a.id != r.id {
			diffs = append(diffs, fmt.Sprintf("set id: mine %s, theirs %s", a.id, r.id))
		}
		if fmt.Sprint(a.tokens) != fmt.Sprint(r.tokens) {
			diffs = append(diffs, fmt.Sprintf("tokens: mine %v, theirs %v", a.tokens, r.tokens))
		}
	}
	if a.format != nil {
		tl.fmtRej++
	} else {
		if a.fresh != nil {
			tl.freshRej++
		}
		if a.recheck != nil {
			tl.recheckRej++
		}
	}
	if len(diffs) > 0 {
		tl.disagree++
		t.Errorf("%s: %s", name, strings.Join(diffs, "; "))
	}
}

func walkJSON(t *testing.T, root string, f func(name string, b []byte)) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f(p, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestDiffExamples(t *testing.T) {
	var tl tally
	walkJSON(t, filepath.Join("..", "..", "spec", "examples"), func(name string, b []byte) { compare(t, name, b, &tl) })
	t.Logf("spec/examples: %+v", tl)
	if tl.files == 0 {
		t.Fatal("no example")
	}
}

func TestDiffProcedural(t *testing.T) {
	n := 200
	if testing.Short() {
		n = 20
	}
	var tl tally
	for _, q := range []int{1, 2, 3, 4, 6} {
		g, err := procedural.New(procedural.Config{QuestionsPerPart: q})
		if err != nil {
			t.Fatal(err)
		}
		for seed := uint64(0); seed < uint64(n/5); seed++ {
			s, err := g.Generate(seed)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			b, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			compare(t, fmt.Sprintf("procedural q=%d seed %d", q, seed), b, &tl)
		}
	}
	t.Logf("procedural: %+v", tl)
}

func TestDiffLLMCorpus(t *testing.T) {
	root := filepath.Join("..", "..", "..", "shared", "llm-corpus")
	if _, err := os.Stat(root); err != nil {
		t.Skip("no ../shared/llm-corpus")
	}
	var tl tally
	walkJSON(t, root, func(name string, b []byte) {
		var probe map[string]json.RawMessage
		if json.Unmarshal(b, &probe) != nil || probe["parts"] == nil {
			return // not a set file
		}
		compare(t, name, b, &tl)
	})
	t.Logf("llm-corpus: %+v", tl)
}

// policyOK is stage 1's last rule: the policy gives every narrative a
// budget (verification.md, "Human timing model": the quarter check and the
// range 1 ms..T_total). tauMs 0 means derived with alpha.
func policyOK(l int, tauMs int64, alpha float64, totalMs int64) bool {
	budgetMs := tauMs
	if tauMs == 0 {
		budgetMs = derivedBudgetMs(alpha, l)
	}
	limit := int64(0.25 * float64(lowerBoundNs(l)))
	return budgetMs*1_000_000 <= limit && budgetMs >= 1 && budgetMs <= totalMs
}

func TestDiffPolicyBudgets(t *testing.T) {
	policies := []struct {
		tauMs   int64
		alpha   float64
		totalMs int64
	}{{15000, 0, 120000}, {20000, 0, 120000}, {0, 0.1, 120000}, {0, 0.25, 120000}, {0, 0.2500001, 120000}, {0, 0.24, 20000}, {0, 0.0000001, 120000}}
	disagree := 0
	for _, pc := range policies {
		p := skill.DefaultPolicy()
		p.Total = time.Duration(pc.totalMs) * time.Millisecond
		if pc.tauMs > 0 {
			p.Tau = time.Duration(pc.tauMs) * time.Millisecond
		} else {
			p.DeriveTau, p.Alpha = true, pc.alpha
		}
		for l := 0; l <= 6000; l++ {
			mineOK := policyOK(l, pc.tauMs, pc.alpha, pc.totalMs)
			b, err := p.Budget(l)
			if err == nil {
				err = p.CheckBudget(b)
			}
			if mineOK != (err == nil) {
				disagree++
				if disagree < 10 {
					t.Errorf("policy %+v L=%d: mine %v, theirs %v", pc, l, mineOK, err)
				}
			}
			if err == nil && pc.tauMs == 0 && b != time.Duration(derivedBudgetMs(pc.alpha, l))*time.Millisecond {
				disagree++
				t.Errorf("policy %+v L=%d: budget %v, mine %d ms", pc, l, b, derivedBudgetMs(pc.alpha, l))
			}
		}
	}
	if disagree > 0 {
		t.Errorf("%d disagreements", disagree)
	}
}

// TestDiffPolicyStage1: stage 1 under a timing policy that cannot budget
// the shorter narratives (tau 20 s: a quarter of the bound reaches 20 s at
// L = 344), both validators on narratives of 280..400 tokens.
func TestDiffPolicyStage1(t *testing.T) {
	p := skill.DefaultPolicy()
	p.Tau = 20 * time.Second
	ref, err := generate.NewValidator(generate.ValidatorConfig{Attackers: []attack.Named{}, WhiteBox: generate.WhiteBoxOff, Policy: &p})
	if err != nil {
		t.Fatal(err)
	}
	base := baseSet(t)
	rejected, disagree := 0, 0
	for w := 210; w <= 300; w++ {
		o := generic(t, base)
		for i := 0; i < 3; i++ {
			part(o, i)["narrative"] = words(w)
		}
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		s, err := decode(b)
		if err != nil {
			t.Fatal(err)
		}
		mineOK := stage1(s, true) == nil
		for _, pt := range s.Parts {
			mineOK = mineOK && policyOK(tokens(pt.Narrative), 20000, 0, 120000)
		}
		rs, err := skill.DecodeSet(b)
		if err != nil {
			t.Fatal(err)
		}
		r, err := ref.Run(context.Background(), rs, generate.Mode{Fresh: true})
		if err != nil {
			t.Fatal(err)
		}
		theirsOK := r.Reason != generate.RejectStructure && r.Reason != generate.RejectPolicy
		if !mineOK {
			rejected++
		}
		if mineOK != theirsOK {
			disagree++
			t.Errorf("%d words (L=%d): mine %v, theirs %s %s", w, tokens(words(w)), mineOK, r.Reason, r.Detail)
		}
	}
	t.Logf("91 lengths, %d refused by the policy, %d disagreements", rejected, disagree)
	if rejected == 0 || rejected == 91 {
		t.Errorf("the policy case does not split the lengths (%d refused)", rejected)
	}
}
