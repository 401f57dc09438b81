package pool_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/pool"
)

type failing struct{ err error }

func (f failing) Produce(context.Context) (*skill.Set, error) { return nil, f.err }

// TestNextSaysWhyGenerationFails: a pool whose productions keep failing
// (an LLM answering garbage) made Next fail with "no challenge set ready
// within 10s: challenge source exhausted" alone on 809b1b3, which demo
// printed on every row and a node logged, as for a pool drained by
// demand; the error now counts the failures by reason.
func TestNextSaysWhyGenerationFails(t *testing.T) {
	cause := errors.New("reply does not start with a JSON object")
	p, err := pool.New(pool.Config{Size: 1, Workers: 1, Wait: 200 * time.Millisecond, RetryBackoff: time.Millisecond, MaxRetryBackoff: 5 * time.Millisecond}, failing{cause})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	deadline := time.Now().Add(10 * time.Second)
	for p.ConsecutiveFailures() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no production failed")
		}
		time.Sleep(time.Millisecond)
	}
	_, err = p.Next(context.Background())
	if !errors.Is(err, skill.ErrExhausted) || !strings.Contains(err.Error(), "generation failed") || !strings.Contains(err.Error(), "error=") {
		t.Fatalf("Next of a failing pool: %v, want ErrExhausted naming the failures and their reasons", err)
	}
	// The error reaches remote peers (the HTTP door's result detail):
	// the failure's own text stays in the log.
	if strings.Contains(err.Error(), cause.Error()) {
		t.Fatalf("Next of a failing pool: %v, holds the last failure's text", err)
	}
}
