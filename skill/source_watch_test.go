package skill

import (
	"context"
	"errors"
	"testing"
)

// exhaustedSource refuses every draw, and takes nothing back (no
// Returner) and names no kind (no Provenancer).
type exhaustedSource struct{ err error }

func (s exhaustedSource) Next(context.Context) (*Set, error) { return nil, s.err }
func (exhaustedSource) Name() string                         { return "dry" }

// A watched source counts the sets served (a set given back is no longer
// one) and tells of every draw refused with ErrExhausted, with the count
// served; other errors are not exhaustion. Return and Kind pass through.
func TestWatchedSourceExhaustion(t *testing.T) {
	a, b := testSet(), testSet()
	b.Domain = "cybersecurity"
	a.ID, b.ID = a.ContentID(), b.ContentID()
	c, err := NewCorpus("t", []*Set{a, b}, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	type call struct {
		err    error
		served uint64
	}
	var calls []call
	w := NewWatchedSource(c, func(err error, served uint64) { calls = append(calls, call{err, served}) })
	var _ Returner = w
	if w.Name() != c.Name() || w.Kind() != SourceCorpus {
		t.Fatalf("Name %q Kind %q, want the corpus's", w.Name(), w.Kind())
	}
	ctx := context.Background()
	first, err := w.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 0 || w.Served() != 2 {
		t.Fatalf("after two draws: %d calls, %d served", len(calls), w.Served())
	}
	for range 2 {
		if _, err := w.Next(ctx); !errors.Is(err, ErrExhausted) {
			t.Fatalf("third draw: %v, want ErrExhausted", err)
		}
	}
	if len(calls) != 2 || !errors.Is(calls[0].err, ErrExhausted) || calls[0].served != 2 || w.Exhausted() != 2 {
		t.Fatalf("refusals: %+v, Exhausted %d; want two, each with 2 served", calls, w.Exhausted())
	}
	// A set given back unseen is served again, and counted once.
	if err := w.Return(first); err != nil {
		t.Fatal(err)
	}
	if w.Served() != 1 {
		t.Fatalf("after a return: %d served, want 1", w.Served())
	}
	if again, err := w.Next(ctx); err != nil || again.ID != first.ID || w.Served() != 2 {
		t.Fatalf("after a return: %v, %v, %d served", again, err, w.Served())
	}

	// A source that takes nothing back keeps its sets served; an error
	// that is not exhaustion is not reported.
	other := errors.New("disk on fire")
	n := 0
	d := NewWatchedSource(exhaustedSource{err: other}, func(error, uint64) { n++ })
	if _, err := d.Next(ctx); !errors.Is(err, other) || n != 0 || d.Exhausted() != 0 {
		t.Fatalf("other error: %v, %d calls", err, n)
	}
	if err := d.Return(a); err != nil || d.Kind() != SourceUnknown {
		t.Fatalf("Return %v, Kind %q", err, d.Kind())
	}
	d = NewWatchedSource(exhaustedSource{err: ErrExhausted}, nil)
	if _, err := d.Next(ctx); !errors.Is(err, ErrExhausted) || d.Exhausted() != 1 {
		t.Fatalf("no callback: %v, %d", err, d.Exhausted())
	}
}

// Remaining counts the sets a corpus can still serve, from its ledger's
// counts (a node's store outlives the process).
func TestCorpusRemaining(t *testing.T) {
	a, b := testSet(), testSet()
	b.Domain = "cybersecurity"
	a.ID, b.ID = a.ContentID(), b.ContentID()
	ledger := NewMemLedger()
	c, err := NewCorpus("r", []*Set{a, b}, ledger, 2)
	if err != nil {
		t.Fatal(err)
	}
	check := func(want int) {
		t.Helper()
		n, known, err := c.Remaining()
		if err != nil || !known || n != want {
			t.Fatalf("Remaining = %d, %v, %v; want %d", n, known, err, want)
		}
	}
	check(2)
	for range 2 {
		if ok, _ := ledger.TryServe(c.sets[0].ID, 2); !ok {
			t.Fatal("serve refused")
		}
	}
	check(1)
	ledger.TryServe(c.sets[1].ID, 2)
	ledger.TryServe(c.sets[1].ID, 2)
	check(0)
	if _, err := c.Next(context.Background()); !errors.Is(err, ErrExhausted) {
		t.Fatalf("Next of a used-up corpus: %v", err)
	}
	// A ledger that cannot count: unknown.
	c2, _ := NewCorpus("u", []*Set{a}, noCountLedger{}, 1)
	if _, known, _ := c2.Remaining(); known {
		t.Fatal("Remaining known without a ServeCounter")
	}
}

type noCountLedger struct{}

func (noCountLedger) TryServe(string, int) (bool, error) { return true, nil }
func (noCountLedger) Unserve(string) error               { return nil }
