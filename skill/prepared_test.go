package skill

import (
	"errors"
	"testing"
	"time"
)

// TestPreparedSetChangedIsValidated: NewSession skips its check only for
// the set Prepare marked, as Prepare saw it. A copy, an invalid set
// prepared never, and a prepared set whose parts, questions, kind or
// domain changed since are validated (and refused) as before.
func TestPreparedSetChangedIsValidated(t *testing.T) {
	p := DefaultPolicy()
	s := testSet()
	if err := s.Prepare(); err != nil {
		t.Fatal(err)
	}
	if !s.MarkedValid() {
		t.Fatal("a prepared set is not marked")
	}
	if _, err := NewSession(s, p, nil); err != nil {
		t.Fatalf("prepared set: %v", err)
	}
	bad := testSet()
	bad.Parts[1].Questions = nil
	if err := bad.Prepare(); !errors.Is(err, ErrInvalidSet) || bad.MarkedValid() {
		t.Fatalf("an invalid set was prepared: %v", err)
	}
	changes := map[string]func(*Set) *Set{
		"copy with a part's questions dropped": func(s *Set) *Set {
			c := *s
			c.Parts = append([]Part(nil), s.Parts...)
			c.Parts[0].Questions = nil
			return &c
		},
		"questions dropped in place": func(s *Set) *Set { s.Parts[2].Questions = s.Parts[2].Questions[:0]; return s },
		"question list replaced":     func(s *Set) *Set { s.Parts[0].Questions = []Question{{Question: "?"}}; return s },
		"part dropped":               func(s *Set) *Set { s.Parts = s.Parts[:2]; return s },
		"domain emptied":             func(s *Set) *Set { s.Domain = " "; return s },
		"kind changed":               func(s *Set) *Set { s.Kind = "no-such-kind"; return s },
		"provenance replaced":        func(s *Set) *Set { s.Provenance = &Provenance{Source: "bogus"}; return s },
		"provenance changed":         func(s *Set) *Set { s.Provenance.Source = "bogus"; return s },
		"narrative emptied in place": func(s *Set) *Set { s.Parts[1].Narrative = ""; return s },
		"answer emptied in place":    func(s *Set) *Set { s.Parts[0].Questions[1].Answer = ""; return s },
		"variants replaced":          func(s *Set) *Set { s.Parts[0].Questions[0].Answers = []string{"other"}; return s },
		"answer type changed":        func(s *Set) *Set { s.Parts[2].Questions[0].AnswerType = "bogus"; return s },
	}
	for name, change := range changes {
		s := testSet()
		s.Provenance = &Provenance{Source: SourceCorpus}
		if err := s.Prepare(); err != nil {
			t.Fatal(err)
		}
		c := change(s)
		if c.MarkedValid() {
			t.Errorf("%s: still marked valid", name)
		}
		if _, err := NewSession(c, p, nil); !errors.Is(err, ErrInvalidSet) {
			t.Errorf("%s: NewSession = %v, want ErrInvalidSet", name, err)
		}
	}
}

// TestPreparerValues: a registered preparer's value is kept with a
// prepared set, and not handed out for a set changed since.
func TestPreparerValues(t *testing.T) {
	type key struct{}
	RegisterPreparer(Preparer{Key: key{}, Prepare: func(s *Set) any { return len(s.Parts) }})
	s := testSet()
	if _, ok := s.PreparedValue(key{}); ok {
		t.Fatal("a value for a set never prepared")
	}
	if err := s.Prepare(); err != nil {
		t.Fatal(err)
	}
	if v, ok := s.PreparedValue(key{}); !ok || v != 3 {
		t.Fatalf("PreparedValue = %v, %v", v, ok)
	}
	s.Parts[0].Questions = append([]Question(nil), s.Parts[0].Questions...)
	if _, ok := s.PreparedValue(key{}); ok {
		t.Fatal("a value for a set changed since")
	}
}

// TestPreparedNarrativeTokens: a round records its narrative's token
// count, counted at Prepare for the narrative prepared, counted anew for
// one edited in place since.
func TestPreparedNarrativeTokens(t *testing.T) {
	s := testSet()
	if err := s.Prepare(); err != nil {
		t.Fatal(err)
	}
	if got, want := s.narrativeTokens(0), CountTokens(s.Parts[0].Narrative); got != want {
		t.Fatalf("prepared: %d tokens, want %d", got, want)
	}
	s.Parts[0].Narrative += " " + words(300)
	if got, want := s.narrativeTokens(0), CountTokens(s.Parts[0].Narrative); got != want {
		t.Fatalf("edited in place: %d tokens, want %d", got, want)
	}
}

// TestSessionBudgetsPrepared: the budgets NewSession derives from a
// prepared set's token counts are BudgetFor's, for the set as prepared
// and for one whose narrative was edited in place since.
func TestSessionBudgetsPrepared(t *testing.T) {
	p := DefaultPolicy()
	p.DeriveTau = true
	k, ok := LookupKind(NarrativeKind)
	if !ok {
		t.Fatal("narrative kind not registered")
	}
	s := testSet()
	if err := s.Prepare(); err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		sess, err := NewSession(s, p, nil)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for i := range p.Rounds {
			want, err := p.BudgetFor(k, &s.Parts[i], &s.Parts[i].Questions[sess.picks[i]])
			if err != nil {
				t.Fatal(err)
			}
			if sess.budgets[i] != want {
				t.Fatalf("%s: round %d budget %s, BudgetFor %s", what, i+1, sess.budgets[i], want)
			}
		}
	}
	check("prepared")
	s.Parts[1].Narrative += " " + words(300)
	check("edited in place")
}

// A copy of the narrative kind registered under another name with a
// LowerBound of its own is budgeted by that LowerBound, not by the
// prepared token counts the narrative kind uses.
func TestSessionBudgetsCopiedKind(t *testing.T) {
	k, ok := LookupKind(NarrativeKind)
	if !ok {
		t.Fatal("narrative kind not registered")
	}
	k.Name = "narrative-copy"
	k.LowerBound = func(p Policy, part *Part, _ *Question) time.Duration {
		return 3 * p.Human.LowerBound(CountTokens(part.Narrative))
	}
	if err := RegisterKind(k); err != nil {
		t.Fatal(err)
	}
	p := DefaultPolicy()
	p.DeriveTau = true
	s := testSet()
	s.Kind = k.Name
	if err := s.Prepare(); err != nil {
		t.Fatal(err)
	}
	sess, err := NewSession(s, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Rounds {
		want, err := p.BudgetFor(k, &s.Parts[i], &s.Parts[i].Questions[sess.picks[i]])
		if err != nil {
			t.Fatal(err)
		}
		if sess.budgets[i] != want {
			t.Fatalf("round %d budget %s, the copy's LowerBound gives %s", i+1, sess.budgets[i], want)
		}
	}
}
