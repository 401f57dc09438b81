package attack

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

func allWhiteBox() []Named { return append(WhiteBox(""), Listing()) }

func TestWhiteBoxKinds(t *testing.T) {
	names := func(ns []Named) string {
		var out []string
		for _, n := range ns {
			out = append(out, n.Name)
		}
		return strings.Join(out, ",")
	}
	for kind, want := range map[skill.SourceKind]string{
		skill.SourceProcedural: ProceduralInverter,
		skill.SourceCorpus:     PromptAware + "," + WhiteBoxSeries + "," + WhiteBoxScatter + "," + WhiteBoxChain + "," + WhiteBoxSurvivor,
		skill.SourceLLM:        PromptAware + "," + WhiteBoxSeries + "," + WhiteBoxScatter + "," + WhiteBoxChain + "," + WhiteBoxSurvivor,
		skill.SourceHybrid:     PromptAware + "," + ProceduralInverter + "," + WhiteBoxSeries + "," + WhiteBoxScatter + "," + WhiteBoxChain + "," + WhiteBoxSurvivor,
	} {
		if got := names(WhiteBox(kind)); got != want {
			t.Errorf("WhiteBox(%q) = %s, want %s", kind, got, want)
		}
	}
	if l := Listing(); l.Name != CandidateList || l.Prover == nil {
		t.Errorf("Listing() = %+v", l)
	}
	for _, n := range allWhiteBox() {
		if n.Description == "" || n.Prover == nil {
			t.Errorf("%s: no description or prover", n.Name)
		}
	}
}

func procSets(t testing.TB, n int, seed uint64) []*skill.Set {
	t.Helper()
	g, err := procedural.New(procedural.Config{Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	var out []*skill.Set
	for range n {
		set, err := g.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, set)
	}
	return out
}

// answerAll answers every question of a set in a fresh session that has
// seen the earlier parts first.
func answerAll(t testing.TB, set *skill.Set, p skill.Prover) []string {
	t.Helper()
	var out []string
	for k := range set.Parts {
		for j := range set.Parts[k].Questions {
			out = append(out, answerAt(t, set, p, k, j))
		}
	}
	return out
}

func checkAnswer(t testing.TB, who, ans string) {
	t.Helper()
	if ans == "" || len(ans) > skill.MaxAnswerBytes || !utf8.ValidString(ans) {
		t.Fatalf("%s: bad answer %q", who, ans)
	}
}

// TestWhiteBoxDeterministic: the same challenges give the same answers,
// every answer fits the wire cap, and sessions run to a verdict.
func TestWhiteBoxDeterministic(t *testing.T) {
	sets := procSets(t, 2, 11)
	for _, n := range allWhiteBox() {
		for _, set := range sets {
			a1, a2 := answerAll(t, set, n.Prover), answerAll(t, set, n.Prover)
			for i := range a1 {
				checkAnswer(t, n.Name, a1[i])
				if a1[i] != a2[i] {
					t.Fatalf("%s on %s: %q then %q", n.Name, set.ID, a1[i], a2[i])
				}
			}
			v := runSession(t, set, n.Prover, 1)
			if v.Reason != skill.ReasonOK && v.Reason != skill.ReasonWrongAnswer {
				t.Fatalf("%s: verdict %s (%s)", n.Name, v.Reason, v.Detail)
			}
		}
	}
}

// TestInverterAnswersFreshProcedural: the inverter answers a clearly
// non-trivial share of fresh procedural questions. The floor is well below
// what it measures (about 70% of questions at the time of writing; see
// TestWhiteBoxMeasureProcedural), so generator changes that make the
// inverter weaker show up here only when they are drastic.
func TestInverterAnswersFreshProcedural(t *testing.T) {
	inv := WhiteBox(skill.SourceProcedural)[0]
	var n, ok int
	for _, set := range procSets(t, 12, 4242) {
		answers := answerAll(t, set, inv.Prover)
		i := 0
		for k := range set.Parts {
			narr := narrativesUpTo(set, k)
			for j := range set.Parts[k].Questions {
				n++
				if skill.Judge(&set.Parts[k].Questions[j], answers[i], narr) {
					ok++
				}
				i++
			}
		}
	}
	const floor = 0.35
	t.Logf("inverter: %d of %d fresh procedural questions (%.1f%%)", ok, n, 100*float64(ok)/float64(n))
	if float64(ok) < floor*float64(n) {
		t.Fatalf("inverter answered %d of %d questions, below the floor of %.0f%%", ok, n, 100*floor)
	}
}

// TestListingAnswersLists: the listing attacker sends several candidates
// joined by a separator, within the wire cap, and the matcher refuses
// them where the question lists its distractors.
func TestListingAnswersLists(t *testing.T) {
	l := Listing()
	lists, total, accepted := 0, 0, 0
	for _, set := range procSets(t, 4, 99) {
		answers := answerAll(t, set, l.Prover)
		i := 0
		for k := range set.Parts {
			narr := narrativesUpTo(set, k)
			for j := range set.Parts[k].Questions {
				a := answers[i]
				i++
				checkAnswer(t, l.Name, a)
				total++
				if strings.Contains(a, ", ") || strings.Contains(a, " or ") {
					lists++
					q := &set.Parts[k].Questions[j]
					if len(q.Distractors) > 0 && skill.Judge(q, a, narr) {
						accepted++
					}
				}
			}
		}
	}
	if lists < total/2 {
		t.Fatalf("only %d of %d answers were lists", lists, total)
	}
	t.Logf("listing: %d lists of %d answers; %d accepted by Judge", lists, total, accepted)
	if accepted > lists/10 {
		t.Errorf("Judge accepted %d of %d candidate lists", accepted, lists)
	}
}

// TestWhiteBoxOnCorpus runs the white-box attackers over the shared LLM
// corpus when it is present: valid, deterministic answers.
func TestWhiteBoxOnCorpus(t *testing.T) {
	dir := llmCorpusDir(t)
	sets, err := skill.LoadDir(dir + "/sets")
	if err != nil {
		t.Skipf("corpus sets: %v", err)
	}
	if len(sets) > 4 {
		sets = sets[:4]
	}
	for _, n := range allWhiteBox() {
		for _, set := range sets {
			a1, a2 := answerAll(t, set, n.Prover), answerAll(t, set, n.Prover)
			for i := range a1 {
				checkAnswer(t, n.Name, a1[i])
				if a1[i] != a2[i] {
					t.Fatalf("%s: %q then %q", n.Name, a1[i], a2[i])
				}
			}
		}
	}
}

// FuzzWhiteBoxAnswer: no white-box attacker panics on arbitrary text, and
// every answer is valid UTF-8 within the wire cap.
func FuzzWhiteBoxAnswer(f *testing.F) {
	sets := procSets(f, 1, 5)
	p := sets[0].Parts[0]
	f.Add(p.Narrative, p.Questions[0].Question, sets[0].Domain, 1)
	f.Add(sets[0].Parts[1].Narrative, sets[0].Parts[1].Questions[0].Question, sets[0].Domain, 2)
	f.Add("X-1 (the a b) was 3.5. Above 2.0 means red, above 1.0 means amber, otherwise green; 3, 5 or 9 days.", "Which rule (in days)?", "", 3)
	f.Add("((((", "by how much", "biochemistry", -7)
	f.Add("\xff\xfe AB-12 (", "How many of the", "x", 0)
	f.Fuzz(func(t *testing.T, narrative, question, domain string, round int) {
		for _, n := range allWhiteBox() {
			a := n.Prover.NewSession()
			for r := range 2 {
				ans, err := a.Answer(context.Background(), skill.Challenge{Round: round + r, Rounds: 3, Domain: domain, Narrative: narrative, Question: question})
				if err != nil {
					t.Fatal(err)
				}
				checkAnswer(t, n.Name, ans)
			}
		}
	})
}

// BenchmarkWhiteBoxSession measures one three-round session per attacker
// (divide by three for the cost of a challenge); the vocabulary harvest is
// done once before the timer starts.
func BenchmarkWhiteBoxSession(b *testing.B) {
	sets := procSets(b, 8, 3)
	for _, n := range allWhiteBox() {
		runSession(b, sets[0], n.Prover, 0)
		b.Run(n.Name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				runSession(b, sets[i%len(sets)], n.Prover, i)
				i++
			}
		})
	}
}

// The inverter reads a part's stated bars and judges measurements against
// them, in both the present and the missing phrasing, and reads relation
// sentences as ties on one check.
func TestInverterBarsAndRelations(t *testing.T) {
	w := &pWorld{}
	w.parseBar(strings.ToLower("For this review, a load excursion only counts as lasting if at least 65% of it remains at the re-check."))
	w.parseBar(strings.ToLower("Fewer than 3 positive re-tests means the load excursion is treated as not replicated."))
	if w.bars[pcPersist] != 65 || w.bars[pcRepl] != 3 {
		t.Fatalf("bars %v, want 65%% and 3 runs", w.bars)
	}
	v := &pVocab{repNouns: []string{"re-tests"}, siteNouns: []string{"plant"}}
	for _, c := range []struct {
		clause string
		cr     int
		want   int
	}{
		{"retained 60% of its initial load excursion at the re-check on 3 may 2024", pcPersist, -1},
		{"retained 70% of its initial load excursion at the re-check on 3 may 2024", pcPersist, 1},
		{"had lost 30% of its initial load excursion by the re-check on 3 may 2024", pcPersist, 1},
		{"had lost 40% of its initial load excursion by the re-check on 3 may 2024", pcPersist, -1},
		{"came back clean in 1 of 4 re-tests", pcRepl, 1},
		{"came back clean in 2 of 4 re-tests", pcRepl, -1},
		{"showed the load excursion in 3 of 5 re-tests", pcRepl, 1},
		{"showed the load excursion in 2 of 5 re-tests", pcRepl, -1},
	} {
		if got := wbClassifyClause(c.clause, v, w.bars)[c.cr]; got != c.want {
			t.Errorf("%q: %d, want %d", c.clause, got, c.want)
		}
	}
	for _, c := range []struct {
		sentence string
		cr       int
	}{
		{"In the re-tests, CMP-418 fared exactly as CMP-77 did.", pcRepl},
		{"The checks for outside factors gave the same result for CMP-418 as for CMP-77.", pcIntrinsic},
		{"CMP-418 and CMP-77 had identical plant coverage.", pcWide},
		{"At its re-check on 3 May 2024, CMP-418 looked just as CMP-77 had at its own.", pcPersist},
	} {
		cr, ok := wbSameCheck(strings.ToLower(c.sentence), v)
		if !ok || cr != c.cr {
			t.Errorf("%q: check %d (%v), want %d", c.sentence, cr, ok, c.cr)
		}
	}
	if _, ok := wbSameCheck("cmp-418 was processed with the rest of the set.", v); ok {
		t.Error("a neutral sentence read as a relation")
	}
}
