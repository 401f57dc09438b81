package generate_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/generate"
)

// FuzzInspectSet runs what acaptcha challenge inspect runs on a set file
// (a file anyone may hand a user): the model-output decoder, the strict
// set decoder a node loads a corpus with, and the offline validation
// pipeline. No panic and a bounded time; a refusal is ErrMalformed
// (DecodeOutput) or a decode error (DecodeSet); a set DecodeSet takes
// round-trips through its JSON to the same content ID, and
// DecodeOutput takes it too (inspect would otherwise reject a file a
// node loads); the validator's verdict is one of the documented reasons
// and an accepted set is structurally valid. The pipeline runs on the
// inputs whose validate flag is set (it takes a second or more a set).
func FuzzInspectSet(f *testing.F) {
	for _, dir := range []string{"../../spec/examples", "../../spec/examples/generated", "testdata"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			if len(data) <= skill.MaxSetFileBytes {
				// The pipeline on one file only: seconds a set, ten
				// times that under -race, where CI runs the seeds.
				f.Add(string(data), len(files) > 0 && file == files[0] && dir == "testdata")
			}
		}
	}
	f.Add(reply(f, goodSet(f)), false)
	f.Add("{}", false)
	f.Add(`{"domain":"x","parts":[{"narrative":"n","questions":[{"question":"q","answer":"a","Answer":"b"}]}]}`, true)
	pol := skill.DefaultPolicy()
	v, err := generate.NewValidator(generate.ValidatorConfig{Policy: &pol})
	if err != nil {
		f.Fatal(err)
	}
	// validate runs the validation pipeline too (seconds a set: the
	// script attackers), on the inputs the fuzzer marks.
	f.Fuzz(func(t *testing.T, text string, validate bool) {
		if len(text) > skill.MaxSetFileBytes {
			return // the command refuses a larger file before decoding
		}
		start := time.Now()
		strict, serr := skill.DecodeSet([]byte(text))
		set, err := generate.DecodeOutput(text)
		if err != nil && !errors.Is(err, generate.ErrMalformed) {
			t.Fatalf("DecodeOutput refused with %v, not ErrMalformed", err)
		}
		if serr == nil {
			if err != nil {
				t.Fatalf("a set a node loads is malformed to inspect: %v", err)
			}
			b, err := json.Marshal(strict)
			if err != nil {
				t.Fatal(err)
			}
			again, err := skill.DecodeSet(b)
			if err != nil {
				t.Fatalf("a decoded set does not decode again from its JSON: %v", err)
			}
			if again.ContentID() != strict.ContentID() || again.ID != strict.ID {
				t.Fatalf("round trip changed the set: %s/%s, %s/%s", again.ID, again.ContentID(), strict.ID, strict.ContentID())
			}
		}
		if set == nil || !validate {
			return
		}
		if set.ID == "" {
			set.ID = set.ContentID()
		}
		limit := 20 * time.Second
		if testutil.RaceEnabled {
			limit *= 10
		}
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		rep, err := v.Run(ctx, set, generate.Mode{Full: true})
		if err != nil {
			t.Fatalf("offline validation: %v", err)
		}
		if !rep.Accepted() {
			if !slices.Contains(generate.SetReasons, rep.Reason) {
				t.Fatalf("rejected with reason %q", rep.Reason)
			}
		} else if rep.Set == nil {
			t.Fatal("accepted without a set")
		} else if err := rep.Set.Validate(); err != nil {
			t.Fatalf("accepted a set that is not valid: %v", err)
		}
		if d := time.Since(start); d > limit {
			t.Fatalf("inspecting %d bytes took %s", len(text), d)
		}
	})
}
