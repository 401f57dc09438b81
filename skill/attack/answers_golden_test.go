package attack

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

var updateAnswersGolden = flag.Bool("update-answers-golden", false, "rewrite testdata/answers.golden")

const answersGolden = "testdata/answers.golden"

// goldenSets is the fixed, varied body of sets the golden answers are
// taken on: procedural sets of fixed seeds, the LLM-shaped fixtures of
// this package (testdata, testdata/structure), the generator's
// cue-answerable fixture and the example corpus.
func goldenSets(t *testing.T) []*skill.Set {
	t.Helper()
	sets := append(procSets(t, 4, 5), procSets(t, 2, 23)...)
	for _, dir := range []string{"testdata", filepath.Join("testdata", "structure"), filepath.Join("..", "..", "spec", "examples"), filepath.Join("..", "..", "spec", "examples", "generated")} {
		more, err := skill.LoadDir(dir)
		if err != nil {
			t.Fatalf("load %s: %v", dir, err)
		}
		sets = append(sets, more...)
	}
	cue, err := skill.LoadFile(filepath.Join("..", "generate", "testdata", "cue_answerable.json"))
	if err != nil {
		t.Fatal(err)
	}
	return append(sets, cue)
}

// goldenAnswers runs p, in a fresh session per question, through the
// earlier parts of set in three contexts (the first question of each
// earlier part; a rotation of them; unnumbered rounds, the last part asked
// another question first) and lists every answer it gives.
func goldenAnswers(t *testing.T, set *skill.Set, p skill.Prover) []string {
	t.Helper()
	var out []string
	for pi := range set.Parts {
		for qi := range set.Parts[pi].Questions {
			for ctx := range 3 {
				s := p.NewSession()
				ask := func(r, q int) {
					c := skill.Challenge{Round: r + 1, Rounds: len(set.Parts), Domain: set.Domain,
						Narrative: set.Parts[r].Narrative, Question: set.Parts[r].Questions[q].Question}
					if ctx == 2 {
						c.Round = 0
					}
					ans, err := s.Answer(context.Background(), c)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, fmt.Sprintf("p%d q%d ctx%d r%d q%d: %s", pi, qi, ctx, r, q, ans))
				}
				for r := 0; r < pi; r++ {
					ask(r, (ctx%2)*(qi+r+1)%len(set.Parts[r].Questions))
				}
				if ctx == 2 {
					ask(pi, (qi+1)%len(set.Parts[pi].Questions))
				}
				ask(pi, qi)
			}
		}
	}
	return out
}

// TestAttackerAnswersGolden holds every attacker (All, every white-box
// attacker, the survivor's second level) to the answers it gave on the
// golden body when the file was written: work that makes the attackers
// cheaper must not change a single answer. A line per set and attacker
// holds a digest of its answers; on a mismatch the test prints the
// answers now given. Rewrite with -update-answers-golden only for a
// deliberate change of an attacker.
func TestAttackerAnswersGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every attacker over the golden body")
	}
	attackers := append(append(All(), allWhiteBox()...), survivorDepth(2))
	var lines []string
	got := map[string][]string{}
	for _, set := range goldenSets(t) {
		for _, a := range attackers {
			ans := goldenAnswers(t, set, a.Prover)
			key := set.ID + " " + a.Name
			got[key] = ans
			sum := sha256.Sum256([]byte(strings.Join(ans, "\x00")))
			lines = append(lines, fmt.Sprintf("%s %d %x", key, len(ans), sum[:8]))
		}
	}
	text := strings.Join(lines, "\n") + "\n"
	if *updateAnswersGolden {
		if err := os.WriteFile(answersGolden, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(answersGolden)
	if err != nil {
		t.Fatalf("read golden answers: %v", err)
	}
	wl := strings.Split(strings.TrimSuffix(string(want), "\n"), "\n")
	if len(wl) != len(lines) {
		t.Fatalf("%d set/attacker lines, golden file has %d", len(lines), len(wl))
	}
	bad := 0
	for i := range lines {
		if lines[i] == wl[i] {
			continue
		}
		bad++
		key := strings.Join(strings.Fields(lines[i])[:2], " ")
		t.Errorf("answers changed: got %q, golden %q; answers now:\n%s", lines[i], wl[i], strings.Join(got[key], "\n"))
		if bad >= 5 {
			t.Fatal("more than 5 set/attacker lines changed")
		}
	}
}
