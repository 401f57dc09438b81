package pool

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

// setsProducer hands out its sets in turn, then blocks.
type setsProducer struct {
	mu   sync.Mutex
	sets []*skill.Set
}

func (p *setsProducer) Produce(ctx context.Context) (*skill.Set, error) {
	p.mu.Lock()
	if len(p.sets) > 0 {
		s := p.sets[0]
		p.sets = p.sets[1:]
		p.mu.Unlock()
		return s, nil
	}
	p.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestDrawTakesPreparedSet: a draw hands out the set the worker stored,
// prepared (not a decoding of its stored copy); a pool started anew on
// the same store decodes and prepares its sets; a set given back is
// served again, prepared.
func TestDrawTakesPreparedSet(t *testing.T) {
	g, err := procedural.New(procedural.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var sets []*skill.Set
	for range 3 {
		s, err := g.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, s)
	}
	byID := map[string]*skill.Set{}
	for _, s := range sets {
		byID[s.ID] = s
	}
	st := NewMemStore()
	quiet := slog.New(slog.DiscardHandler)
	p, err := New(Config{Size: len(sets), Store: st, Logger: quiet}, &setsProducer{sets: sets[:2]})
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, p, 2)
	a, err := p.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if a != byID[a.ID] || !a.MarkedValid() {
		t.Fatalf("draw did not hand out the stored set as prepared (same %v, marked %v)", a == byID[a.ID], a.MarkedValid())
	}
	if err := p.Return(a); err != nil {
		t.Fatal(err)
	}
	again, err := p.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if again != byID[again.ID] || !again.MarkedValid() {
		t.Fatalf("draw after a return: %s not prepared", again.ID)
	}
	p.Close()

	// Anew on the same store: the set left is decoded, and prepared.
	p2, err := New(Config{Size: len(sets), Store: st, Logger: quiet, Wait: 10 * time.Millisecond}, &setsProducer{})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	b, err := p2.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b == byID[b.ID] || !b.MarkedValid() || b.ContentID() != byID[b.ID].ContentID() {
		t.Fatalf("restarted pool: set %s not decoded and prepared", b.ID)
	}
}

func waitReady(t *testing.T, p *Pool, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ch := p.Added()
		if p.Ready() >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatal("pool did not fill")
		}
	}
}

// TestPreparedSetsExpire: the prepared sets kept for draws go when the
// store's copies expire (MaxAge), not later.
func TestPreparedSetsExpire(t *testing.T) {
	g, err := procedural.New(procedural.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var sets []*skill.Set
	for range 2 {
		s, err := g.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, s)
	}
	var mu sync.Mutex
	now := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	p, err := New(Config{Size: 2, Logger: slog.New(slog.DiscardHandler), Now: clock, MaxAge: time.Hour, PruneInterval: time.Millisecond},
		&setsProducer{sets: sets})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	waitReady(t, p, 2)
	kept := func() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.prepared) }
	time.Sleep(20 * time.Millisecond) // some prunes at the same hour
	if n := kept(); n != 2 {
		t.Fatalf("%d sets kept, want 2", n)
	}
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	for deadline := time.Now().Add(10 * time.Second); kept() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d expired sets still kept", kept())
		}
	}
}
