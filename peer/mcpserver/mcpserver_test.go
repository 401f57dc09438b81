package mcpserver_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/internal/testutil/testnode"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/peer/mcpserver"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/spec"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// libp2p and quic-go keep process-wide background workers.
		goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"),
		// A protocol service makes the reflection guard's table of word
		// keys once, in the background; a run of one short test can end
		// before it (as in peer's TestMain).
		goleak.IgnoreAnyFunction("github.com/acaptcha/acaptcha/protocol.warmRuneKeys"),
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("github.com/libp2p/go-libp2p/p2p/transport/quicreuse.(*reuse).gc"),
		goleak.IgnoreAnyFunction("github.com/jackpal/go-nat-pmp.(*Client).GetExternalAddress"),
		goleak.IgnoreAnyFunction("internal/poll.runtime_pollWait"),
	)
}

// splitSets returns the example sets in two disjoint halves, so that the
// two sides of a mutual attestation never draw the same challenge (each
// would decline it as a reflection of its own).
func splitSets(t *testing.T) (a, b []*skill.Set, all []*skill.Set) {
	t.Helper()
	sets, err := spec.Examples()
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range sets {
		if i%2 == 0 {
			a = append(a, s)
		} else {
			b = append(b, s)
		}
	}
	return a, b, sets
}

// oracleProver answers from the answer key with an honest memory of the
// session's earlier narratives.
func oracleProver(o *testutil.Oracle) skill.Prover {
	return skill.ProverFunc(func() skill.Answerer {
		var hist []string
		return skill.AnswerFunc(func(_ context.Context, c skill.Challenge) (string, error) {
			a := o.Answer(c.Narrative, c.Question, hist)
			hist = append(hist, c.Narrative)
			return a, nil
		})
	})
}

// testLogger logs into the test's output (shown on failure or with -v).
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func startNode(t *testing.T, sets []*skill.Set, prover skill.Prover) *peer.Node {
	t.Helper()
	return testnode.New(t, testnode.Options{
		Config: peer.Config{Prover: prover, Logger: testLogger(t)},
		Sets:   sets,
	})
}

// connect serves srv to an SDK client over an in-memory transport.
func connect(t *testing.T, srv *mcpserver.Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// call calls a tool and decodes its structured output. A tool error is
// returned as an error with the tool's text.
func call[T any](ctx context.Context, cs *mcp.ClientSession, name string, args any) (T, error) {
	var out T
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return out, err
	}
	if res.IsError {
		var msg []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				msg = append(msg, tc.Text)
			}
		}
		return out, errors.New(strings.Join(msg, "; "))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return out, err
	}
	err = json.Unmarshal(b, &out)
	return out, err
}

type fixture struct {
	target *peer.Node // a running node, answered by the oracle
	self   *peer.Node // the MCP server's node, answered by the MCP client
	queue  *mcpserver.Queue
	srv    *mcpserver.Server
	cs     *mcp.ClientSession
	oracle *testutil.Oracle
}

func newFixture(t *testing.T, qcfg mcpserver.QueueConfig) *fixture {
	t.Helper()
	a, b, all := splitSets(t)
	f := &fixture{oracle: testutil.NewOracle(all...)}
	f.target = startNode(t, a, oracleProver(f.oracle))
	if qcfg.Logger == nil {
		qcfg.Logger = testLogger(t)
	}
	f.queue = mcpserver.NewQueue(qcfg)
	t.Cleanup(f.queue.Close)
	f.self = startNode(t, b, f.queue)
	srv, err := mcpserver.New(mcpserver.Config{Node: f.self, Queue: f.queue, Version: "test", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	f.srv = srv
	f.cs = connect(t, srv)
	return f
}

func (f *fixture) targetAddr() string { return f.target.Addrs()[0].String() }

// answerLoop plays the MCP client as prover: it fetches challenges with
// next_challenge and answers them with answer_challenge, from the answer
// key (with the session's memory) or, when wrong is set, with a wrong
// answer, until ctx ends. It returns the rounds it answered.
func (f *fixture) answerLoop(ctx context.Context, t *testing.T, wrong bool) <-chan []mcpserver.NextOutput {
	done := make(chan []mcpserver.NextOutput, 1)
	go func() {
		var got []mcpserver.NextOutput
		defer func() { done <- got }()
		hist := map[string][]string{}
		for ctx.Err() == nil {
			nx, err := call[mcpserver.NextOutput](ctx, f.cs, "next_challenge", map[string]any{"wait_ms": 200})
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("next_challenge: %v", err)
				}
				return
			}
			if !nx.Pending {
				continue
			}
			got = append(got, nx)
			ans := f.oracle.Answer(nx.Narrative, nx.Question, hist[nx.Session])
			if wrong {
				ans = "certainly-not-this"
			}
			hist[nx.Session] = append(hist[nx.Session], nx.Narrative)
			out, err := call[mcpserver.AnswerOutput](ctx, f.cs, "answer_challenge", map[string]any{"challenge_id": nx.ChallengeID, "answer": ans})
			if err != nil {
				t.Errorf("answer_challenge: %v", err)
				return
			}
			if !out.Delivered || out.Round != nx.Round {
				t.Errorf("answer_challenge: %+v", out)
			}
		}
	}()
	return done
}

func TestMCPToolsListed(t *testing.T) {
	f := newFixture(t, mcpserver.QueueConfig{})
	res, err := f.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"attest_peer": false, "attest_status": false, "verify_attestation": false, "list_attestations": false, "list_peers": false, "next_challenge": false, "answer_challenge": false}
	for _, tool := range res.Tools {
		if _, ok := want[tool.Name]; !ok {
			t.Errorf("unexpected tool %s", tool.Name)
		}
		want[tool.Name] = true
		if tool.InputSchema == nil || tool.OutputSchema == nil || tool.Description == "" {
			t.Errorf("tool %s lacks a schema or description", tool.Name)
		}
	}
	for name, seen := range want {
		if !seen {
			t.Errorf("tool %s missing", name)
		}
	}
}

// TestMCPAttestAndProveSelfAnswer attests a running node while the MCP
// client answers that node's challenges through next_challenge and
// answer_challenge, concurrently with the attest_peer call that waits for
// both verdicts.
func TestMCPAttestAndProveSelfAnswer(t *testing.T) {
	f := newFixture(t, mcpserver.QueueConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	loopCtx, stopLoop := context.WithCancel(ctx)
	answered := f.answerLoop(loopCtx, t, false)
	out, err := call[mcpserver.AttestOutput](ctx, f.cs, "attest_peer", map[string]any{"addr": f.targetAddr(), "self_answer": true, "timeout_seconds": 60})
	stopLoop()
	rounds := <-answered
	if err != nil {
		t.Fatalf("attest_peer: %v", err)
	}
	if out.Status != "done" || out.Peer != f.target.ID().String() || out.Self != f.self.ID().String() {
		t.Fatalf("attest_peer: %+v", out)
	}
	if out.Ours == nil || !out.Ours.Accepted || out.Ours.Verdict != "ACCEPTED" || len(out.Ours.Rounds) != skill.DefaultRounds || out.Ours.Record == "" {
		t.Fatalf("our verdict of the target: %+v", out.Ours)
	}
	th := out.Theirs
	if th == nil || !th.Accepted || th.Reason != "ok" || th.RoundsAnswered != skill.DefaultRounds || th.Record == "" || th.RecordError != "" {
		t.Fatalf("the target's verdict of us: %+v", th)
	}
	if len(rounds) != skill.DefaultRounds {
		t.Fatalf("the client answered %d rounds, want %d", len(rounds), skill.DefaultRounds)
	}
	for i, r := range rounds {
		if r.Round != i+1 || r.Rounds != skill.DefaultRounds || r.Narrative == "" || r.Question == "" || r.BudgetMs <= 0 || r.AnswerForm == "" || r.Session != rounds[0].Session {
			t.Errorf("challenge %d: %+v", i, r)
		}
	}

	// The record the target signed about us verifies, bound to us.
	v, err := call[mcpserver.VerifyOutput](ctx, f.cs, "verify_attestation", map[string]any{"record": th.Record, "subject": f.self.ID().String(), "issuer": f.target.ID().String()})
	if err != nil || !v.OK || !v.Valid || !v.Accepted || v.Verdict != "ACCEPTED" {
		t.Fatalf("verify_attestation of their record: %+v, %v", v, err)
	}
	// Bound to the wrong subject, it does not.
	v, err = call[mcpserver.VerifyOutput](ctx, f.cs, "verify_attestation", map[string]any{"record": th.Record, "subject": f.target.ID().String()})
	if err != nil || v.OK || v.Valid || v.Error == "" || v.ErrorCode != "subject_mismatch" {
		t.Fatalf("verify_attestation with the wrong subject: %+v, %v", v, err)
	}
	// The example corpus ranks below hybrid.
	v, err = call[mcpserver.VerifyOutput](ctx, f.cs, "verify_attestation", map[string]any{"record": out.Ours.Record, "require_source": "hybrid"})
	if err != nil || v.OK || !v.SourceBelowMinimum || v.ErrorCode != "source_below_minimum" {
		t.Fatalf("verify_attestation with require_source hybrid: %+v, %v", v, err)
	}
	// A misspelt option is refused, not ignored (the tool's input schema
	// has additionalProperties false, as the HTTP door's verify route
	// refuses unknown members, http.md §4.6).
	if v, err = call[mcpserver.VerifyOutput](ctx, f.cs, "verify_attestation", map[string]any{"record": out.Ours.Record, "requre_source": "hybrid"}); err == nil {
		t.Fatalf("verify_attestation with a misspelt requre_source: %+v, want an error", v)
	}

	// Both records are in the store.
	la, err := call[mcpserver.ListAttestationsOutput](ctx, f.cs, "list_attestations", map[string]any{"peer": f.target.ID().String(), "include_records": true})
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]bool{}
	for _, e := range la.Attestations {
		dirs[e.Direction] = true
		if e.Record == "" || !e.ValidNow || !e.Accepted {
			t.Errorf("stored attestation %+v", e)
		}
	}
	if la.Total != 2 || !dirs["issued"] || !dirs["received"] {
		t.Fatalf("list_attestations: %+v", la)
	}
	lp, err := call[mcpserver.ListPeersOutput](ctx, f.cs, "list_peers", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range lp.Peers {
		if p.Peer == f.target.ID() {
			found = true
			if p.Direct == nil || !p.Direct.Accepted || p.AboutUs == nil || !p.AboutUs.Accepted {
				t.Errorf("list_peers entry %+v", p)
			}
		}
	}
	if !found || lp.Self != f.self.ID().String() || len(lp.Addrs) == 0 || lp.Count != len(lp.Peers) {
		t.Fatalf("list_peers: %+v", lp)
	}
}

// TestMCPProverWrongAnswersRejected: the client's answers decide the
// verdict; a wrong answer gets this node rejected at round 1.
func TestMCPProverWrongAnswersRejected(t *testing.T) {
	f := newFixture(t, mcpserver.QueueConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	loopCtx, stopLoop := context.WithCancel(ctx)
	answered := f.answerLoop(loopCtx, t, true)
	start, err := call[mcpserver.AttestOutput](ctx, f.cs, "attest_peer", map[string]any{"addr": f.targetAddr(), "self_answer": true, "background": true})
	if err != nil || start.Status != "running" || start.JobID == "" {
		t.Fatalf("attest_peer in the background: %+v, %v", start, err)
	}
	var out mcpserver.AttestOutput
	for i := 0; i < 30; i++ {
		out, err = call[mcpserver.AttestOutput](ctx, f.cs, "attest_status", map[string]any{"job_id": start.JobID, "wait_ms": 2000})
		if err != nil || out.Status != "running" {
			break
		}
	}
	stopLoop()
	rounds := <-answered
	if err != nil || out.Status != "done" {
		t.Fatalf("attest_status: %+v, %v", out, err)
	}
	if !out.Ours.Accepted {
		t.Errorf("our verdict of the target: %+v", out.Ours)
	}
	th := out.Theirs
	if th == nil || th.Accepted || th.Reason != string(skill.ReasonWrongAnswer) || th.FailedRound != 1 || th.Record == "" {
		t.Fatalf("the target's verdict of us: %+v", th)
	}
	if len(rounds) != 1 {
		t.Fatalf("the client answered %d rounds, want 1", len(rounds))
	}
	if _, err := call[mcpserver.AttestOutput](ctx, f.cs, "attest_status", map[string]any{"job_id": "nope"}); err == nil {
		t.Fatal("attest_status of an unknown job: no error")
	}
}

// TestMCPVerifyOnlyWithoutSelfAnswer: without self_answer a node answered
// by its MCP client verifies the peer and does not ask to be verified back.
func TestMCPVerifyOnlyWithoutSelfAnswer(t *testing.T) {
	f := newFixture(t, mcpserver.QueueConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := call[mcpserver.AttestOutput](ctx, f.cs, "attest_peer", map[string]any{"addr": f.targetAddr()})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Ours.Accepted || out.Theirs == nil || out.Theirs.Verdict != "NONE" || !strings.Contains(out.Theirs.Error, "not asked") {
		t.Fatalf("attest_peer: ours %+v theirs %+v", out.Ours, out.Theirs)
	}
	if n := f.queue.Len(); n != 0 {
		t.Fatalf("%d challenges pending", n)
	}
}

func TestMCPToolErrors(t *testing.T) {
	f := newFixture(t, mcpserver.QueueConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"attest_peer", map[string]any{"addr": "/ip4/127.0.0.1/tcp/1"}, "p2p"},
		{"attest_peer", map[string]any{"addr": f.self.Addrs()[0].String()}, "this node itself"},
		{"attest_peer", map[string]any{}, "addr"},
		{"attest_peer", map[string]any{"addr": f.targetAddr(), "timeout_seconds": -1}, "timeout_seconds"},
		{"answer_challenge", map[string]any{"challenge_id": "0011223344556677", "answer": "x"}, "no such challenge"},
		{"next_challenge", map[string]any{"wait_ms": -5}, "wait_ms"},
		{"verify_attestation", map[string]any{"record": "00", "require_source": "bogus"}, "require_source"},
		{"list_attestations", map[string]any{"direction": "sideways"}, "direction"},
		{"list_attestations", map[string]any{"peer": "not-a-peer"}, "peer"},
	} {
		_, err := call[map[string]any](ctx, f.cs, tc.tool, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: error %v, want one mentioning %q", tc.tool, tc.args, err, tc.want)
		}
	}
	// Garbage that decodes is an invalid record, not a tool error (and so
	// is text that decodes to no envelope: TestVerifyAttestationOutcomesDistinct).
	v, err := call[mcpserver.VerifyOutput](ctx, f.cs, "verify_attestation", map[string]any{"record": base64.StdEncoding.EncodeToString([]byte("not an envelope at all"))})
	if err != nil || v.Valid || v.OK || v.Error == "" {
		t.Fatalf("verify_attestation of garbage: %+v, %v", v, err)
	}
	nx, err := call[mcpserver.NextOutput](ctx, f.cs, "next_challenge", map[string]any{})
	if err != nil || nx.Pending || nx.Note != "none pending" {
		t.Fatalf("next_challenge with none pending: %+v, %v", nx, err)
	}
}

// TestMCPNoQueue: a node that answers by itself refuses the prover tools
// and self_answer with a clear error.
func TestMCPNoQueue(t *testing.T) {
	_, b, _ := splitSets(t)
	n := startNode(t, b, nil)
	srv, err := mcpserver.New(mcpserver.Config{Node: n, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cs := connect(t, srv)
	ctx := context.Background()
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"next_challenge", map[string]any{}},
		{"answer_challenge", map[string]any{"challenge_id": "x", "answer": "y"}},
		{"attest_peer", map[string]any{"addr": "/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN", "self_answer": true}},
	} {
		_, err := call[map[string]any](ctx, cs, tc.tool, tc.args)
		if err == nil || !strings.Contains(err.Error(), "--answer-with agent") {
			t.Errorf("%s: error %v", tc.tool, err)
		}
	}
}

func TestQueueExpiryAndLateAnswer(t *testing.T) {
	q := mcpserver.NewQueue(mcpserver.QueueConfig{Logger: testLogger(t)})
	defer q.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := q.NewSession().Answer(ctx, skill.Challenge{Round: 1, Rounds: 3, Narrative: "n", Question: "q", Budget: 50 * time.Millisecond})
		errc <- err
	}()
	p, err := q.Next(context.Background(), time.Second)
	if err != nil || p == nil || p.Challenge.Round != 1 || p.Expires.Sub(p.Received) > 150*time.Millisecond {
		t.Fatalf("Next: %+v, %v", p, err)
	}
	if err := <-errc; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("answerer after its deadline: %v", err)
	}
	if _, err := q.Answer(p.ID, "late", false); !errors.Is(err, mcpserver.ErrExpired) {
		t.Fatalf("late answer: %v, want ErrExpired", err)
	}
	if q.Len() != 0 {
		t.Fatalf("%d pending after expiry", q.Len())
	}
}

func TestQueueCapAndBadAnswers(t *testing.T) {
	q := mcpserver.NewQueue(mcpserver.QueueConfig{MaxPending: 1, Logger: testLogger(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type res struct {
		a   string
		err error
	}
	first := make(chan res, 1)
	go func() {
		a, err := q.NewSession().Answer(ctx, skill.Challenge{Round: 1, Rounds: 1, Narrative: "n", Question: "q", Budget: 5 * time.Second})
		first <- res{a, err}
	}()
	p, err := q.Next(ctx, 5*time.Second)
	if err != nil || p == nil {
		t.Fatalf("Next: %v", err)
	}
	// A second session finds the queue full and declines at once.
	if _, err := q.NewSession().Answer(ctx, skill.Challenge{Round: 1, Rounds: 1, Budget: time.Second}); !errors.Is(err, skill.ErrDeclined) || !errors.Is(err, mcpserver.ErrQueueFull) {
		t.Fatalf("second session: %v", err)
	}
	// Asking again hands out the same challenge.
	if again, _ := q.Next(ctx, 0); again == nil || again.ID != p.ID || again.Delivered != 2 {
		t.Fatalf("Next again: %+v", again)
	}
	for _, bad := range []string{"", "   ", strings.Repeat("x", skill.MaxAnswerBytes+1), "\xff"} {
		if _, err := q.Answer(p.ID, bad, false); !errors.Is(err, mcpserver.ErrBadAnswer) {
			t.Errorf("answer %q: %v, want ErrBadAnswer", bad, err)
		}
	}
	if _, err := q.Answer(p.ID, " KX-7 ", false); err != nil {
		t.Fatal(err)
	}
	if r := <-first; r.err != nil || r.a != "KX-7" {
		t.Fatalf("answerer got %q, %v", r.a, r.err)
	}
	if _, err := q.Answer(p.ID, "again", false); !errors.Is(err, mcpserver.ErrUnknownChallenge) {
		t.Fatalf("second answer: %v", err)
	}
	// Close declines a pending challenge and refuses new ones.
	declined := make(chan error, 1)
	go func() {
		_, err := q.NewSession().Answer(ctx, skill.Challenge{Round: 1, Rounds: 1, Budget: 5 * time.Second})
		declined <- err
	}()
	if p, _ := q.Next(ctx, 5*time.Second); p == nil {
		t.Fatal("no second challenge")
	}
	q.Close()
	if err := <-declined; !errors.Is(err, skill.ErrDeclined) {
		t.Fatalf("pending at Close: %v", err)
	}
	if _, err := q.Next(ctx, time.Second); !errors.Is(err, mcpserver.ErrQueueClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
}

// TestQueueConcurrentSessions answers several sessions at once from
// several goroutines (run with -race).
func TestQueueConcurrentSessions(t *testing.T) {
	q := mcpserver.NewQueue(mcpserver.QueueConfig{MaxPending: 8, Logger: testLogger(t)})
	defer q.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const sessions, rounds = 6, 3
	var wg sync.WaitGroup
	for s := 0; s < sessions; s++ {
		wg.Go(func() {
			a := q.NewSession()
			for r := 1; r <= rounds; r++ {
				q := strings.Repeat("q", s+1) + string(rune('0'+r))
				got, err := a.Answer(ctx, skill.Challenge{Round: r, Rounds: rounds, Narrative: "n", Question: q, Budget: 10 * time.Second})
				if err != nil || got != "re:"+q {
					t.Errorf("session %d round %d: %q, %v", s, r, got, err)
					return
				}
			}
		})
	}
	var answerers sync.WaitGroup
	var mu sync.Mutex
	answeredN := 0
	for w := 0; w < 3; w++ {
		answerers.Go(func() {
			for ctx.Err() == nil {
				mu.Lock()
				if answeredN == sessions*rounds {
					mu.Unlock()
					return
				}
				mu.Unlock()
				p, err := q.Next(ctx, 50*time.Millisecond)
				if err != nil || p == nil {
					continue
				}
				if _, err := q.Answer(p.ID, "re:"+p.Challenge.Question, false); err != nil {
					// Another worker got there first with the same challenge.
					if !errors.Is(err, mcpserver.ErrUnknownChallenge) {
						t.Errorf("answer: %v", err)
					}
					continue
				}
				mu.Lock()
				answeredN++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	answerers.Wait()
	if answeredN != sessions*rounds {
		t.Fatalf("answered %d, want %d", answeredN, sessions*rounds)
	}
}

// attest_peer waits for Config.Ready (the node's first challenge set)
// within its timeout, and an attestation that cannot wait it out ends
// before any peer is contacted.
func TestMCPAttestWaitsUntilReady(t *testing.T) {
	f := newFixture(t, mcpserver.QueueConfig{})
	ready := make(chan struct{})
	var waited atomic.Int64
	srv, err := mcpserver.New(mcpserver.Config{Node: f.self, Version: "test", Logger: testLogger(t), Ready: func(ctx context.Context) error {
		waited.Add(1)
		select {
		case <-ready:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cs := connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Not ready within the call's timeout: an error, and the target saw
	// no session.
	if _, err := call[mcpserver.AttestOutput](ctx, cs, "attest_peer", map[string]any{"addr": f.targetAddr(), "timeout_seconds": 0.3}); err == nil || !strings.Contains(err.Error(), "cannot verify yet") {
		t.Fatalf("attest_peer before the node is ready: %v", err)
	}
	if u := f.self.PeerUsage(f.target.ID()); u.Drawn != 0 || u.Paid != 0 {
		t.Fatalf("a session ran before the node was ready: %+v", u)
	}
	close(ready)
	out, err := call[mcpserver.AttestOutput](ctx, cs, "attest_peer", map[string]any{"addr": f.targetAddr()})
	if err != nil || !out.Ours.Accepted || waited.Load() != 2 {
		t.Fatalf("attest_peer once ready: %+v %v (Ready called %d times)", out, err, waited.Load())
	}
}

// attest_peer's description gives the default time limit this server
// applies (acaptcha mcp sets it from --attest-timeout, 270 s by default):
// before, its timeout_seconds said "default 300" whatever the server used.
func TestMCPAttestPeerDescribesItsTimeout(t *testing.T) {
	n := startNode(t, nil, nil)
	srv, err := mcpserver.New(mcpserver.Config{Node: n, AttestTimeout: 270 * time.Second, Version: "test", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	res, err := connect(t, srv).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name != "attest_peer" {
			continue
		}
		schema, _ := json.Marshal(tool.InputSchema)
		if !strings.Contains(tool.Description, "gives up after 270 s") || strings.Contains(string(schema), "default 300") {
			t.Errorf("attest_peer: description %q\nschema %s", tool.Description, schema)
		}
		return
	}
	t.Fatal("no attest_peer tool")
}

// TestMCPHugeTimeoutsClamped: a time limit beyond the cap is the cap, as
// the tools say. timeout_seconds 1e300 (or 1e10) overflowed the
// conversion to a time.Duration into a negative one, and attest_peer
// failed at once with "context deadline exceeded"; wait_ms 1e13
// overflowed too, and next_challenge returned at once instead of
// waiting its 60 s.
func TestMCPHugeTimeoutsClamped(t *testing.T) {
	f := newFixture(t, mcpserver.QueueConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, secs := range []float64{1e10, 1e300} {
		out, err := call[mcpserver.AttestOutput](ctx, f.cs, "attest_peer", map[string]any{"addr": f.targetAddr(), "timeout_seconds": secs})
		if err != nil || out.Status != "done" {
			t.Errorf("attest_peer with timeout_seconds %g: %+v, %v; want done within the 1800 s cap", secs, out, err)
		}
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	start := time.Now()
	nx, err := call[mcpserver.NextOutput](short, f.cs, "next_challenge", map[string]any{"wait_ms": int64(1e13)})
	if err == nil {
		t.Errorf("next_challenge with wait_ms 1e13 returned after %v (%+v), want it to wait (up to 60 s) until the client gave up", time.Since(start), nx)
	}
}

// TestMCPAttestationsInFlightBounded: an MCP client could run any number
// of attest_peer calls at once (background ones were capped, foreground
// ones not): each holds a goroutine, dials an address the client names
// and draws a set for a peer ID the client makes up. Attestations in
// flight are capped per MCP session and in total; a call beyond a cap is
// refused at once.
func TestMCPAttestationsInFlightBounded(t *testing.T) {
	n := startNode(t, nil, nil)
	release := make(chan struct{})
	var inReady, maxInReady atomic.Int64
	srv, err := mcpserver.New(mcpserver.Config{Node: n, Version: "test", Logger: testLogger(t), Ready: func(ctx context.Context) error {
		v := inReady.Add(1)
		defer inReady.Add(-1)
		for {
			m := maxInReady.Load()
			if v <= m || maxInReady.CompareAndSwap(m, v) {
				break
			}
		}
		select {
		case <-release:
			return errors.New("released")
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	a, b := connect(t, srv), connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const calls = 20
	var wg sync.WaitGroup
	var refused atomic.Int64
	for i := range calls {
		cs := a
		if i%4 == 3 {
			cs = b
		}
		_, id := testutil.NewKey(t)
		args := map[string]any{"addr": "/ip4/127.0.0.1/tcp/9/p2p/" + id.String(), "timeout_seconds": 20, "background": i%2 == 1}
		wg.Go(func() {
			_, err := call[mcpserver.AttestOutput](ctx, cs, "attest_peer", args)
			if err != nil && strings.Contains(err.Error(), "attestations running") {
				refused.Add(1)
			}
		})
	}
	deadline := time.Now().Add(5 * time.Second)
	for inReady.Load()+refused.Load() < calls && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	peak := maxInReady.Load()
	close(release)
	wg.Wait()
	t.Logf("%d of %d concurrent attest_peer calls of 2 sessions in flight at once, %d refused", peak, calls, refused.Load())
	if peak > mcpserver.DefaultMaxAttests {
		t.Fatalf("%d attestations in flight at once, want at most %d", peak, mcpserver.DefaultMaxAttests)
	}
	if peak == 0 {
		t.Fatal("no attestation ran")
	}
}
