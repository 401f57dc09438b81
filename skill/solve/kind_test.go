package solve

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/skill"
)

// solveKind is a test-only second kind with its own solver prompt.
const (
	solveKind   = "glyph-solve"
	solvePrompt = "GLYPH SOLVER PROMPT: reply with one lower-case word."
)

func init() {
	if err := skill.RegisterKind(skill.Kind{
		Name:         solveKind,
		LowerBound:   func(skill.Policy, *skill.Part, *skill.Question) time.Duration { return 2 * time.Minute },
		SolverPrompt: solvePrompt,
	}); err != nil {
		panic(err)
	}
}

// TestSolverPicksTheKindsPrompt: each challenge is answered under the
// system prompt of its kind; a configured prompt replaces a kind's; an
// unknown kind is refused before any model call.
func TestSolverPicksTheKindsPrompt(t *testing.T) {
	brain := testutil.BrainFunc(func(testutil.BrainRequest) testutil.BrainReply { return testutil.BrainReply{Text: "sunflower"} })
	m, srv := testutil.NewModelFor(t, "openai", brain)
	ch := func(kind string) skill.Challenge {
		return skill.Challenge{Round: 1, Rounds: 3, Domain: "wordplay", Narrative: "sun + flower", Question: "Which word?", Budget: 5 * time.Second, Kind: kind}
	}
	ctx := context.Background()

	s := New(m, Config{})
	for _, kind := range []string{"", skill.NarrativeKind, solveKind} {
		if a, err := s.NewSession().Answer(ctx, ch(kind)); err != nil || a != "sunflower" {
			t.Fatalf("kind %q: %q %v", kind, a, err)
		}
	}
	got := srv.Received()
	if len(got) != 3 {
		t.Fatalf("%d requests", len(got))
	}
	for i, want := range []string{DefaultSystemPrompt, DefaultSystemPrompt, solvePrompt} {
		if got[i].System != want {
			t.Errorf("request %d system prompt %q, want %q", i+1, got[i].System, want)
		}
	}

	custom := New(m, Config{SystemPrompt: "NARRATIVE OVERRIDE", KindPrompts: map[string]string{solveKind: "GLYPH OVERRIDE"}})
	for _, kind := range []string{"", solveKind} {
		if _, err := custom.NewSession().Answer(ctx, ch(kind)); err != nil {
			t.Fatal(err)
		}
	}
	got = srv.Received()
	if got[3].System != "NARRATIVE OVERRIDE" || got[4].System != "GLYPH OVERRIDE" {
		t.Errorf("overrides not used: %q, %q", got[3].System, got[4].System)
	}

	if _, err := s.NewSession().Answer(ctx, ch("rebus-unregistered")); !errors.Is(err, skill.ErrKind) {
		t.Fatalf("unknown kind: %v", err)
	}
	if n := len(srv.Received()); n != 5 {
		t.Fatalf("an unknown kind reached the model (%d requests)", n)
	}
	if !s.AnswersKind(solveKind) || !s.AnswersKind("") || s.AnswersKind("rebus-unregistered") {
		t.Error("AnswersKind")
	}
	if a, ok := s.NewSession().(skill.KindAnswerer); !ok || !skill.Answers(a, solveKind) || skill.Answers(a, "rebus-unregistered") {
		t.Error("the solver's session does not tell the protocol which kinds it answers")
	}
	if !strings.Contains(DefaultSystemPrompt, "untrusted") {
		t.Error("the narrative prompt moved without its text")
	}
}
