package generate_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/llm"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/generate"
	"github.com/acaptcha/acaptcha/skill/pool"
)

const specDir = "../../spec"

// The spec's example sets pass the whole pipeline as raw generator output
// (with an oracle as the cross-checking solver) and, once validated, as a
// served set.
func TestSpecExamplesValidate(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(specDir, "examples", "generated", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	pol := skill.DefaultPolicy()
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s := loadSet(t, f)
			solver, _ := testutil.NewModelFor(t, "openai", testutil.NewOracle(s))
			v, err := generate.NewValidator(generate.ValidatorConfig{Policy: &pol, CrossCheck: []*llm.Model{solver}, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := v.Validate(context.Background(), s)
			if err != nil || !rep.Accepted() {
				t.Fatalf("example rejected: %v %s: %s", err, rep.Reason, rep.Detail)
			}
			if off := v.Offline(context.Background(), rep.Set); !off.Accepted() || off.Set.ID != rep.Set.ID {
				t.Fatalf("validated example does not re-validate: %s: %s", off.Reason, off.Detail)
			}
			if _, err := skill.NewSession(rep.Set, pol, nil); err != nil {
				t.Fatalf("validated example cannot be served: %v", err)
			}
		})
	}
}

// generation.md names every machine reason, every domain and the
// defaults the code uses.
func TestGenerationSpecMatchesCode(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(specDir, "generation.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, r := range append(append([]generate.Reason(nil), generate.SetReasons...), generate.DropReasons...) {
		if !strings.Contains(doc, "`"+string(r)+"`") {
			t.Errorf("generation.md does not document reason %s", r)
		}
	}
	for _, d := range generate.Domains() {
		if !strings.Contains(doc, "| "+d.Name+" |") {
			t.Errorf("generation.md does not list domain %s", d.Name)
		}
	}
	for _, want := range []string{
		fmt.Sprintf("%d–%s tokens per part", generate.DefaultMinTokens, "1,100"),
		fmt.Sprintf("(default %d)", pool.DefaultSize),
		fmt.Sprintf("(default %d)", skill.DefaultMaxServes),
		fmt.Sprintf("±%.0f %% accepted", generate.DefaultLengthSlack*100),
		"around 0.9",
		"8,192 tokens",
		"32,768",
		"up to 27",
		"24 hours",
		"`--pool-wait` (default\n  10 s)",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("generation.md lacks %q", want)
		}
	}
	if generate.DefaultMaxTokens != 1100 || generate.DefaultTemperature != 0.9 || generate.DefaultInitialMaxTokens != 8192 ||
		generate.DefaultMaxTokensCap != 32768 || generate.DefaultMaxScriptContexts != 27 || pool.DefaultMaxAge.Hours() != 24 ||
		pool.DefaultWait.Seconds() != 10 || generate.DefaultRateLimitRetries != 3 || generate.DefaultTruncationRetries != 2 {
		t.Error("a default changed: update generation.md and this test")
	}
}
