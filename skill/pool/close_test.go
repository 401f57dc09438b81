package pool_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/pool"
)

// slowStop produces nothing: it waits for its context to end and then
// takes a while to return, as a generator abandoning an LLM call does.
type slowStop struct {
	started  chan struct{}
	returned atomic.Bool
}

func (s *slowStop) Produce(ctx context.Context) (*skill.Set, error) {
	select {
	case s.started <- struct{}{}:
	default:
	}
	<-ctx.Done()
	time.Sleep(200 * time.Millisecond)
	s.returned.Store(true)
	return nil, ctx.Err()
}

// TestCloseWaitsWhenCalledTwice: every Close returns only once the
// workers have stopped. A second Close (the CLI's, after the pool's own
// context.AfterFunc had called the first) returned at once while a worker
// still ran and logged: a race with the command's last words.
func TestCloseWaitsWhenCalledTwice(t *testing.T) {
	prod := &slowStop{started: make(chan struct{}, 1)}
	p, err := pool.New(pool.Config{Size: 1, Workers: 1}, prod)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-prod.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker never started producing")
	}
	first := make(chan struct{})
	go func() { p.Close(); close(first) }()
	time.Sleep(20 * time.Millisecond) // the first Close is waiting for the worker
	p.Close()
	if !prod.returned.Load() {
		t.Fatal("the second Close returned while a worker was still running")
	}
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the first Close never returned")
	}
}
