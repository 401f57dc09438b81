package mcpserver_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acaptcha/acaptcha/peer/mcpserver"
	"github.com/acaptcha/acaptcha/skill"
)

// A pending challenge whose budget has run out (the verifier's RTT
// credit and read grace keep it pending a little longer) is handed out
// with remaining_ms 0: before, the member was left out (omitempty), so a
// client reading remaining_ms found none on a pending challenge.
func TestNextChallengeRemainingZeroIsPresent(t *testing.T) {
	_, sets, _ := splitSets(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	q := mcpserver.NewQueue(mcpserver.QueueConfig{Now: clock, Logger: testLogger(t)})
	t.Cleanup(q.Close)
	srv, err := mcpserver.New(mcpserver.Config{Node: startNode(t, sets, nil), Queue: q, Version: "test", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cs := connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	answered := make(chan error, 1)
	go func() {
		_, err := q.NewSession().Answer(ctx, skill.Challenge{Round: 1, Rounds: 3, Narrative: "n", Question: "q?", Budget: time.Second})
		answered <- err
	}()
	// The challenge is pending once next_challenge hands it out.
	var id string
	for range 100 {
		nx, err := call[mcpserver.NextOutput](ctx, cs, "next_challenge", map[string]any{"wait_ms": 200})
		if err != nil {
			t.Fatal(err)
		}
		if nx.Pending {
			id = nx.ChallengeID
			break
		}
	}
	if id == "" {
		t.Fatal("the challenge never became pending")
	}
	mu.Lock()
	now = now.Add(2 * time.Second) // past its 1 s budget
	mu.Unlock()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "next_challenge", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("next_challenge: %+v, %v", res, err)
	}
	m, _ := res.StructuredContent.(map[string]any)
	if m["pending"] != true {
		t.Fatalf("next_challenge: %v, want the challenge still pending", m)
	}
	if v, ok := m["remaining_ms"]; !ok || v != float64(0) {
		t.Errorf("pending challenge past its budget: remaining_ms %v (present %v), want 0", v, ok)
	}
	if _, err := call[mcpserver.AnswerOutput](ctx, cs, "answer_challenge", map[string]any{"challenge_id": id, "answer": "x"}); err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
}
