package generate_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/generate"
)

// The fixtures: the generation spec's example (goodPath) passes every
// stage, with some questions dropped by the script attackers; the other
// sets are derived from it.

func loadSet(t testing.TB, path string) *skill.Set {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := generate.DecodeOutput(string(data))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s
}

// goodSet is the generation spec's example set.
func goodSet(t testing.TB) *skill.Set { return loadSet(t, goodPath) }

const goodPath = "../../spec/examples/generated/aviation_maintenance.json"

// marked returns a copy of s whose last narrative ends with a distinct
// sentence, so that several good replies are different sets.
func marked(t testing.TB, s *skill.Set, n int) *skill.Set {
	c := clone(t, s)
	c.Parts[2].Narrative += fmt.Sprintf("\n\nMinutes recorded by clerk number %d.", 700+n)
	return c
}

// leaky states part 1's answer in part 2, tied to the earlier finding.
func leaky(t testing.TB) *skill.Set {
	c := clone(t, goodSet(t))
	old := "Serial BV-5518 came off 403 with 2,870 hours."
	if !strings.Contains(c.Parts[1].Narrative, old) {
		t.Fatal("fixture changed: leak anchor missing")
	}
	c.Parts[1].Narrative = strings.Replace(c.Parts[1].Narrative, old,
		"Serial BV-5518 came off 403, the aircraft identified earlier as EI-FXC, with 2,870 hours.", 1)
	return c
}

// cueAnswerable describes part 1's standout with persistence and
// replication cue words right next to its name, and puts the numeric
// answer next to the question's words.
func cueAnswerable(t testing.TB) *skill.Set { return loadSet(t, "testdata/cue_answerable.json") }

// disagreeing is the good set with part 3's answers changed: a solver that
// reads correctly (the oracle over the good set) disagrees with them.
func disagreeing(t testing.TB) *skill.Set {
	c := clone(t, goodSet(t))
	qs := c.Parts[2].Questions
	qs[0].Answer, qs[0].Answers = "K-27", []string{"K-27", "K27"}
	qs[1].Answer, qs[1].Answers = "9", []string{"9", "nine"}
	qs[2].Answer, qs[2].Answers = "advisory", []string{"advisory", "advisory watch"}
	return c
}

func clone(t testing.TB, s *skill.Set) *skill.Set {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var c skill.Set
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

func reply(t testing.TB, s *skill.Set) string {
	t.Helper()
	c := clone(t, s)
	c.ID = ""
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// generatorSystem starts the generator's system prompt; the routing brain
// tells generation requests from solver requests by it.
const generatorSystem = "You write reading-comprehension puzzles"

// routing answers generation requests with gen and everything else (the
// cross-check solver) with solve.
func routing(gen, solve testutil.Brain) testutil.Brain {
	return testutil.BrainFunc(func(req testutil.BrainRequest) testutil.BrainReply {
		if strings.HasPrefix(req.System, generatorSystem) {
			return gen.Reply(req)
		}
		return solve.Reply(req)
	})
}

// generationRequests returns the generation requests a stub received.
func generationRequests(s *testutil.StubServer) []testutil.BrainRequest {
	var out []testutil.BrainRequest
	for _, r := range s.Received() {
		if strings.HasPrefix(r.System, generatorSystem) {
			out = append(out, r)
		}
	}
	return out
}
