package attack

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

// The shared parses change no answer: every attacker, black-box and
// white-box, answers every question of the fixture, example and
// procedural sets (each part's questions in one session, the parts in
// order, as the validator asks them) the same with the memos as with a
// fresh parse per session; the memoized parses, read by sessions running
// concurrently (go test -race sees a write), still equal fresh parses
// afterwards.
func TestParseMemoMatchesFreshParses(t *testing.T) {
	sets := loadCorpus(t)
	seed := uint64(77)
	g, err := procedural.New(procedural.Config{Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		s, err := g.Generate(uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, s)
	}
	attackers := append(All(), WhiteBox("")...)
	attackers = append(attackers, Listing())
	answers := func(s *skill.Set, p skill.Prover) []string {
		var out []string
		sess := p.NewSession()
		for pi, part := range s.Parts {
			for _, q := range part.Questions {
				a, err := sess.Answer(context.Background(), skill.Challenge{Round: pi + 1, Rounds: skill.Parts, Domain: s.Domain, Narrative: part.Narrative, Question: q.Question})
				if err != nil {
					t.Error(err)
				}
				out = append(out, a)
			}
		}
		return out
	}
	memoOff.Store(true)
	fresh := map[string][]string{}
	for _, s := range sets {
		for _, a := range attackers {
			fresh[s.ID+" "+a.Name] = answers(s, a.Prover)
		}
	}
	memoOff.Store(false)
	for _, s := range sets {
		// Twice concurrently: the second reads the first's parses.
		var wg sync.WaitGroup
		got := make([]map[string][]string, 2)
		for r := range got {
			got[r] = map[string][]string{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, a := range attackers {
					got[r][a.Name] = answers(s, a.Prover)
				}
			}()
		}
		wg.Wait()
		for _, a := range attackers {
			want := fresh[s.ID+" "+a.Name]
			for r := range got {
				if g := got[r][a.Name]; !reflect.DeepEqual(g, want) {
					t.Errorf("%s on %s (run %d): %q with the memo, %q without", a.Name, s.ID, r, g, want)
				}
			}
		}
		checkMemosUnchanged(t, s.ID)
	}
}

// checkMemosUnchanged compares every memoized parse with a fresh one.
func checkMemosUnchanged(t *testing.T, set string) {
	t.Helper()
	n := 0
	docMemo.mu.Lock()
	for text, d := range docMemo.m {
		if f := analyse(text); !reflect.DeepEqual(d, f) {
			t.Errorf("%s: a memoized analysis changed after use:\n%s", set, diffHead(d, f))
		}
		n++
	}
	docMemo.mu.Unlock()
	llmMemo.mu.Lock()
	for text, w := range llmMemo.m {
		if f := parseLLM(text); !reflect.DeepEqual(w, f) {
			t.Errorf("%s: a memoized prompt-aware parse changed after use:\n%s", set, diffHead(w, f))
		}
		n++
	}
	llmMemo.mu.Unlock()
	procMemo.mu.Lock()
	for k, w := range procMemo.m {
		if f := parseProcedural(k.text, procVocab(k.domain, k.part), k.prev); !reflect.DeepEqual(w, f) {
			t.Errorf("%s: a memoized inverter parse changed after use:\n%s", set, diffHead(w, f))
		}
		n++
	}
	procMemo.mu.Unlock()
	n += checkMemo(t, set, "chained-round parse", &chainMemo, parseChainDoc)
	n += checkMemo(t, set, "number list", &numbersMemo, func(text string) []wbNum { return slices.Clip(wbNumbers(text)) })
	n += checkMemo(t, set, "scatter base", &scBaseMemo, func(text string) *scBase { return scBaseOf(text, parseLLM(text)) }, sortedAliases)
	n += checkMemo(t, set, "rule parse", &ruleMemo, func(k docQuestion) []ruleParse { return ruleParses(k.d, k.q) })
	n += checkMemo(t, set, "entity view", &viewMemo, func(k docQuestion) *entityView { return k.d.view(k.q) })
	if n == 0 {
		t.Errorf("%s: nothing memoized", set)
	}
}

// checkMemo compares every parse m holds with a fresh one and returns
// how many it holds.
// norm, when given, maps a parse to a canonical form first (outside the
// parse: it must not write into it).
func checkMemo[K comparable, V any](t *testing.T, set, what string, m *parseMemo[K, V], fresh func(K) V, norm ...func(V) V) int {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, v := range m.m {
		f := fresh(k)
		for _, n := range norm {
			v, f = n(v), n(f)
		}
		if !reflect.DeepEqual(v, f) {
			t.Errorf("%s: a memoized %s changed after use:\n%s", set, what, diffHead(v, f))
		}
	}
	return len(m.m)
}

// sortedAliases is a copy of b with each candidate's aliases sorted:
// scBaseOf lists them in map order, and scRank only asks whether any
// matches.
func sortedAliases(b *scBase) *scBase {
	c := *b
	c.cands = slices.Clone(b.cands)
	for i := range c.cands {
		c.cands[i].aliases = slices.Sorted(slices.Values(c.cands[i].aliases))
	}
	return &c
}

func diffHead(a, b any) string {
	s := fmt.Sprintf("memo  %+v\nfresh %+v", a, b)
	if len(s) > 2000 {
		s = s[:2000]
	}
	return s
}

// The memo keeps at most memoSize parses and evicts the oldest.
func TestParseMemoBounded(t *testing.T) {
	var m parseMemo[int, int]
	builds := 0
	build := func(k int) func() int { return func() int { builds++; return k * 10 } }
	for k := range memoSize + 5 {
		if v := m.get(k, build(k)); v != k*10 {
			t.Fatalf("get %d = %d", k, v)
		}
	}
	if len(m.m) != memoSize || builds != memoSize+5 {
		t.Fatalf("%d kept, %d builds", len(m.m), builds)
	}
	m.get(memoSize+4, build(memoSize+4)) // newest: kept
	m.get(5, build(5))                   // kept
	if builds != memoSize+5 {
		t.Errorf("a kept entry was rebuilt (%d builds)", builds)
	}
	m.get(0, build(0)) // oldest: evicted
	if builds != memoSize+6 {
		t.Errorf("an evicted entry was not rebuilt (%d builds)", builds)
	}
	if len(m.m) != memoSize {
		t.Errorf("%d kept", len(m.m))
	}
}
