package peer_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil/testnode"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/skill"
)

// lockedBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A node whose corpus is used up (one set, served once: --max-serves 1)
// says so at the default level: one warning when the first session finds
// no set, naming the sets served and what to do, and none for the next
// one (rate limited); the sessions are counted in Stats.
func TestSourceExhaustedWarns(t *testing.T) {
	sets := dependentSets(t)[:1]
	corpus, err := skill.NewCorpus("one", sets, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	v := testnode.New(t, testnode.Options{Config: peer.Config{
		Source: corpus,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}})
	prover := newGatedProver(sets)
	close(prover.release)
	b := testnode.New(t, testnode.Options{Config: peer.Config{Prover: prover}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := v.Host().Connect(ctx, addrInfo(b)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		res, err := v.Verify(ctx, b.ID())
		if err != nil {
			t.Fatalf("session %d: %v", i+1, err)
		}
		if want := i == 0; res.Verdict.Accepted != want || !want && res.Verdict.Reason != skill.ReasonInconclusive {
			t.Fatalf("session %d: accepted %v, reason %s; want the first accepted, then inconclusive", i+1, res.Verdict.Accepted, res.Verdict.Reason)
		}
		if i == 1 && strings.Count(logs.String(), `msg="challenge source exhausted`) != 1 {
			t.Fatalf("after the first session without a set, logs:\n%s", logs.String())
		}
	}
	out := logs.String()
	if n := strings.Count(out, `msg="challenge source exhausted`); n != 1 {
		t.Fatalf("%d exhaustion warnings, want 1 (rate limited):\n%s", n, out)
	}
	for _, want := range []string{"level=WARN", "source=corpus:one", "served=1", "--max-serves", "refused_since_last_warning=0"} {
		if !strings.Contains(out, want) {
			t.Errorf("the warning lacks %q:\n%s", want, out)
		}
	}
	if st := v.Stats(); st.ChallengesExhausted != 2 || st.ChallengesServed != 1 {
		t.Fatalf("Stats: %d sessions without a set, %d sets served; want 2 and 1", st.ChallengesExhausted, st.ChallengesServed)
	}
}

// emptyPool is an LLM pool that has written no set yet.
type emptyPool struct{}

func (emptyPool) Name() string { return "llm-pool" }
func (emptyPool) Kind() skill.SourceKind {
	return skill.SourceLLM
}
func (emptyPool) Next(context.Context) (*skill.Set, error) {
	return nil, fmt.Errorf("pool: no set ready: %w", skill.ErrExhausted)
}

// A pool still writing its first set is not used up: the warning says
// so, and the exhaustion warning (rate limited to one per 10 minutes)
// is kept for when the pool runs dry later.
func TestPoolFillingWarns(t *testing.T) {
	var logs lockedBuffer
	v := testnode.New(t, testnode.Options{Config: peer.Config{
		Source: emptyPool{},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}})
	prover := newGatedProver(dependentSets(t))
	close(prover.release)
	b := testnode.New(t, testnode.Options{Config: peer.Config{Prover: prover}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := v.Host().Connect(ctx, addrInfo(b)); err != nil {
		t.Fatal(err)
	}
	res, err := v.Verify(ctx, b.ID())
	if err != nil || res.Verdict.Reason != skill.ReasonInconclusive {
		t.Fatalf("verify with an empty pool: %v %+v", err, res)
	}
	out := logs.String()
	if !strings.Contains(out, "challenge pool still writing its first sets") || strings.Contains(out, `msg="challenge source exhausted`) {
		t.Fatalf("logs:\n%s", out)
	}
}
