package mcpserver_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/lograte"
	"github.com/acaptcha/acaptcha/peer/mcpserver"
	"github.com/acaptcha/acaptcha/skill"
)

// infoCounter counts the records of each level.
type infoCounter struct {
	mu sync.Mutex
	n  map[slog.Level]int
}

func (c *infoCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *infoCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[slog.Level]int{}
	}
	c.n[r.Level]++
	return nil
}
func (c *infoCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *infoCounter) WithGroup(string) slog.Handler      { return c }

func (c *infoCounter) at(l slog.Level) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[l]
}

// A remote verifier decides when its challenge reaches the queue and when
// it is withdrawn (it resets its session): each session of fresh peer IDs
// wrote two INFO lines ("challenge pending for the MCP client", "pending
// challenge expired unanswered"), as fast as the prover's budgets let
// sessions in (1,800 answerer calls at once by default). The two lines
// now pass a total budget of remote-triggered lines (a burst of 20, then
// one a second; the rest at DEBUG), which an honest verifier's few
// challenges a minute never reach.
func TestQueueLinesLimited_h129(t *testing.T) {
	logs := &infoCounter{}
	q := mcpserver.NewQueue(mcpserver.QueueConfig{Logger: slog.New(logs)})
	defer q.Close()
	const sessions = 200
	start := time.Now()
	for i := range sessions {
		a := q.NewSessionFor(newVerifier(t), prefixOf(t, "198.51.100.7"))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := a.Answer(ctx, skill.Challenge{Round: 1, Rounds: 3, Narrative: "n", Question: "q", Budget: time.Minute})
			done <- err
		}()
		// Withdrawn as soon as it is pending (the verifier resets).
		deadline := time.Now().Add(5 * time.Second)
		for q.Len() == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("session %d: the challenge never reached the queue", i)
			}
			time.Sleep(time.Millisecond)
		}
		cancel()
		<-done
	}
	info := logs.at(slog.LevelInfo)
	allowed := lograte.Burst + int(time.Since(start)/lograte.Refill) + 1
	t.Logf("%d challenges queued and withdrawn: %d INFO lines, %d at DEBUG (at most %d at INFO)", sessions, info, logs.at(slog.LevelDebug), allowed)
	if info > allowed {
		t.Fatalf("%d INFO lines for %d challenges a verifier queued and withdrew, want at most %d", info, sessions, allowed)
	}
}
