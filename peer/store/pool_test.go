package store_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/peer/store"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/pool"
	"github.com/acaptcha/acaptcha/spec"
)

var _ pool.Store = (*store.Store)(nil)

func openStore(t testing.TB, path string) *store.Store {
	t.Helper()
	s, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var t0 = time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)

func TestPoolStoreTakeOldestFirstAndOnce(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "db"))
	defer s.Close()
	if n, err := s.PoolLen(t0, time.Hour); n != 0 || err != nil {
		t.Fatalf("empty store: %d, %v", n, err)
	}
	if _, ok, err := s.PoolTake(t0, time.Hour, 1); ok || err != nil {
		t.Fatalf("take from empty store: %v %v", ok, err)
	}
	for i, id := range []string{"b", "a", "c"} {
		ok, err := s.PoolAdd(id, t0.Add(time.Duration(i)*time.Minute), []byte(`"`+id+`"`))
		if !ok || err != nil {
			t.Fatalf("add %s: %v %v", id, ok, err)
		}
	}
	if ok, _ := s.PoolAdd("a", t0, nil); ok {
		t.Error("a ready id was added twice")
	}
	if _, err := s.PoolAdd("", t0, nil); err == nil {
		t.Error("empty id accepted")
	}
	for _, want := range []string{"b", "a", "c"} {
		tk, ok, err := s.PoolTake(t0.Add(10*time.Minute), time.Hour, 1)
		if !ok || err != nil || tk.ID != want || string(tk.Data) != `"`+want+`"` {
			t.Fatalf("take: %+v %v %v, want %q", tk, ok, err, want)
		}
	}
	if ok, _ := s.PoolAdd("b", t0, nil); ok {
		t.Error("a served id was added again")
	}
}

func TestPoolStoreConcurrentTakes(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "db"))
	defer s.Close()
	const n = 40
	for i := range n {
		if ok, err := s.PoolAdd(fmt.Sprintf("set-%02d", i), t0, []byte("{}")); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				tk, ok, err := s.PoolTake(t0, time.Hour, 1)
				id := tk.ID
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				seen[id]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("%d distinct sets taken, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("%s taken %d times", id, c)
		}
	}
}

func TestPoolStoreServesAndExpiry(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "db"))
	defer s.Close()
	mustAdd := func(id string, at time.Time) {
		if ok, err := s.PoolAdd(id, at, []byte(id)); !ok || err != nil {
			t.Fatalf("add %s: %v %v", id, ok, err)
		}
	}
	mustAdd("twice", t0)
	for range 2 {
		if tk, ok, _ := s.PoolTake(t0, time.Hour, 2); !ok || tk.ID != "twice" {
			t.Fatalf("take: %q %v", tk.ID, ok)
		}
	}
	if _, ok, _ := s.PoolTake(t0, time.Hour, 2); ok {
		t.Fatal("set served a third time")
	}

	mustAdd("old", t0)
	mustAdd("half", t0)
	mustAdd("new", t0.Add(50*time.Minute))
	if _, ok, _ := s.PoolTake(t0, time.Hour, 2); !ok {
		t.Fatal("take")
	}
	now := t0.Add(time.Hour)
	if n, _ := s.PoolLen(now, time.Hour); n != 1 {
		t.Errorf("%d unexpired sets, want 1", n)
	}
	if tk, ok, _ := s.PoolTake(now, time.Hour, 2); !ok || tk.ID != "new" {
		t.Errorf("take after expiry: %q %v, want new", tk.ID, ok)
	}
	if n, err := s.PoolPrune(now, time.Hour); n != 2 || err != nil {
		t.Errorf("pruned %d (%v), want 2", n, err)
	}
	// The partly served set is remembered as served; the unserved one may
	// come back.
	if ok, _ := s.PoolAdd("old", now, []byte("x")); !ok {
		t.Error("an expired, never served set could not be added again")
	}
	if ok, _ := s.PoolAdd("half", now, []byte("x")); ok {
		t.Error("an expired set that was served once was added again")
	}
}

// A pool on the node's store keeps its unserved sets over a restart and
// never serves a used one again.
func TestPoolOnStoreSurvivesRestart(t *testing.T) {
	sets, err := spec.Examples()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "db")
	s1 := openStore(t, path)
	p1, err := pool.New(pool.Config{Size: len(sets), Store: s1}, &listProducer{sets: sets})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ch := p1.Added()
		if p1.Ready() == len(sets) {
			break
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("pool did not fill")
		}
	}
	served, err := p1.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p1.Close()
	s1.Close()

	s2 := openStore(t, path)
	defer s2.Close()
	// The restarted producer offers the same sets again: the served one
	// must not come back.
	p2, err := pool.New(pool.Config{Size: len(sets), Store: s2, Wait: 20 * time.Millisecond, RetryBackoff: time.Millisecond}, &listProducer{sets: sets})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	got := map[string]bool{}
	for {
		s, err := p2.Next(context.Background())
		if errors.Is(err, skill.ErrExhausted) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if s.ID == served.ID {
			t.Fatalf("set %s served again after restart", s.ID)
		}
		got[s.ID] = true
	}
	if len(got) != len(sets)-1 {
		t.Errorf("served %d sets after restart, want %d", len(got), len(sets)-1)
	}
}

// listProducer offers sets in turn, then blocks.
type listProducer struct {
	mu   sync.Mutex
	sets []*skill.Set
	i    int
}

func (l *listProducer) Produce(ctx context.Context) (*skill.Set, error) {
	l.mu.Lock()
	if l.i < len(l.sets) {
		s := l.sets[l.i]
		l.i++
		l.mu.Unlock()
		return s, nil
	}
	l.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

// cycleProducer offers distinct copies of a set at once.
type cycleProducer struct {
	mu   sync.Mutex
	base *skill.Set
	n    int
}

func (c *cycleProducer) Produce(context.Context) (*skill.Set, error) {
	c.mu.Lock()
	c.n++
	n := c.n
	c.mu.Unlock()
	s := *c.base
	s.Parts = append([]skill.Part(nil), c.base.Parts...)
	s.Parts[2].Narrative += fmt.Sprintf("\n\nCopy %d.", n)
	s.ID = s.ContentID()
	return &s, nil
}

// BenchmarkPoolOnStore measures refilling a pool of 32 sets kept in the
// bbolt store (every add is a committed transaction), and taking a set
// from a full pool.
func BenchmarkPoolOnStore(b *testing.B) {
	sets, err := spec.Examples()
	if err != nil {
		b.Fatal(err)
	}
	const size = 32
	quiet := slog.New(slog.DiscardHandler)
	wait := func(p *pool.Pool) {
		for {
			ch := p.Added()
			if p.Ready() >= size {
				return
			}
			select {
			case <-ch:
			case <-time.After(30 * time.Second):
				b.Fatal("pool did not fill")
			}
		}
	}
	b.Run("refill", func(b *testing.B) {
		for range b.N {
			s := openStore(b, filepath.Join(b.TempDir(), "db"))
			p, err := pool.New(pool.Config{Size: size, Store: s, Logger: quiet}, &cycleProducer{base: sets[0]})
			if err != nil {
				b.Fatal(err)
			}
			wait(p)
			p.Close()
			s.Close()
		}
		b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "sets/s")
	})
	b.Run("next-warm", func(b *testing.B) {
		s := openStore(b, filepath.Join(b.TempDir(), "db"))
		defer s.Close()
		p, err := pool.New(pool.Config{Size: size, Store: s, Logger: quiet}, &cycleProducer{base: sets[0]})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			wait(p)
			b.StartTimer()
			if _, err := p.Next(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestPoolStoreReturn: a set given back unseen is servable again, under its
// original creation time (so it still expires on schedule), and only one
// serve is undone per return.
func TestPoolStoreReturn(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "db"))
	defer s.Close()
	if ok, err := s.PoolAdd("once", t0, []byte(`"once"`)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	tk, ok, err := s.PoolTake(t0, time.Hour, 1)
	if !ok || err != nil || tk.ID != "once" || !tk.Created.Equal(t0) {
		t.Fatalf("take: %+v %v %v", tk, ok, err)
	}
	if _, ok, _ := s.PoolTake(t0, time.Hour, 1); ok {
		t.Fatal("a set served once was served again before its return")
	}
	if err := s.PoolReturn(tk, 1); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.PoolLen(t0, time.Hour); n != 1 {
		t.Fatalf("%d ready after the return, want 1", n)
	}
	again, ok, err := s.PoolTake(t0.Add(time.Minute), time.Hour, 1)
	if !ok || err != nil || again.ID != "once" || string(again.Data) != `"once"` || !again.Created.Equal(t0) {
		t.Fatalf("take after return: %+v %v %v", again, ok, err)
	}
	// Served out again: a second add is still refused.
	if ok, _ := s.PoolAdd("once", t0, nil); ok {
		t.Error("a served id was added again after its return was served")
	}
	// A returned set keeps its age: it expires an hour after t0.
	if err := s.PoolReturn(again, 1); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.PoolLen(t0.Add(time.Hour), time.Hour); n != 0 {
		t.Errorf("returned set outlived its max age: %d ready", n)
	}

	// maxServes 2: one return undoes one serve only.
	if ok, err := s.PoolAdd("twice", t0.Add(time.Minute), []byte("x")); !ok || err != nil {
		t.Fatal(ok, err)
	}
	now := t0.Add(2 * time.Minute)
	if _, err := s.PoolPrune(now.Add(time.Hour-2*time.Minute), time.Hour); err != nil {
		t.Fatal(err) // drops "once"
	}
	first, ok, _ := s.PoolTake(now, time.Hour, 2)
	if !ok || first.ID != "twice" {
		t.Fatalf("take: %+v", first)
	}
	if err := s.PoolReturn(first, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.PoolReturn(first, 2); err != nil {
		t.Fatal(err) // a second return of the same serve is a no-op
	}
	for i := range 2 {
		if tk, ok, _ := s.PoolTake(now, time.Hour, 2); !ok || tk.ID != "twice" {
			t.Fatalf("take %d after return: %+v %v", i, tk, ok)
		}
	}
	if _, ok, _ := s.PoolTake(now, time.Hour, 2); ok {
		t.Fatal("served a third time")
	}
	if err := s.PoolReturn(pool.Taken{ID: "never"}, 1); err != nil {
		t.Errorf("return of an unknown id: %v", err)
	}
	if n, _ := s.PoolLen(now, time.Hour); n != 0 {
		t.Errorf("an unknown id became ready: %d", n)
	}
}
