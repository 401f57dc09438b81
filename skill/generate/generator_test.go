package generate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/llm"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/attack"
	"github.com/acaptcha/acaptcha/skill/generate"
)

// wire is one provider wire format the tests drive through the real
// langchaingo client.
type wire struct {
	name     string
	provider string
	stream   bool
}

var wires = []wire{
	{"openai-json", "openai", false},
	{"openai-sse", "openai", true},
	{"anthropic", "anthropic", false},
	{"ollama", "ollama", false},
}

// testCallTimeout bounds generation calls in the tests; the scenario of
// a reply slower than the deadline uses shortCallTimeout.
const (
	testCallTimeout  = 20 * time.Second
	shortCallTimeout = 400 * time.Millisecond
)

// quiet discards the logs of the code under test.
var quiet = slog.New(slog.DiscardHandler)

// newGenerator builds a generator over a stub server of w speaking with
// gen (generation) and solve (cross-check solver).
func newGenerator(t *testing.T, w wire, gen, solve testutil.Brain, edit ...func(*generate.Config)) (*generate.Generator, *testutil.StubServer) {
	t.Helper()
	m, srv := testutil.NewModelFor(t, w.provider, routing(gen, solve))
	pol := skill.DefaultPolicy()
	cfg := generate.Config{
		Model:            m,
		Domains:          []string{"aviation_maintenance"},
		Stream:           w.stream,
		CallTimeout:      testCallTimeout,
		CheckTimeout:     5 * time.Second,
		RateLimitBackoff: 5 * time.Millisecond,
		Policy:           &pol,
		Logger:           quiet,
	}
	for _, e := range edit {
		e(&cfg)
	}
	g, err := generate.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g, srv
}

// cut returns the first half of text's words: what a provider sends when
// it stops at the token limit.
func cut(text string) string {
	w := strings.Fields(text)
	return strings.Join(w[:len(w)/2], " ")
}

type scenario struct {
	name  string
	gen   func(t *testing.T) testutil.Brain
	solve func(t *testing.T) testutil.Brain
	// want is the rejection reason ("" for an accepted set).
	want    generate.Reason
	timeout time.Duration // generation call deadline (testCallTimeout)
	calls   int           // generation calls expected (0: don't check)
	check   func(t *testing.T, o *generate.Outcome, srv *testutil.StubServer)
}

func oracle(t *testing.T) testutil.Brain { return testutil.NewOracle(goodSet(t)) }

func scenarios() []scenario {
	text := func(f func(testing.TB) *skill.Set) func(t *testing.T) testutil.Brain {
		return func(t *testing.T) testutil.Brain { return testutil.Text(reply(t, f(t))) }
	}
	good := func(t testing.TB) *skill.Set { return goodSet(t) }
	return []scenario{
		{name: "good", gen: text(good), want: "", calls: 1, check: func(t *testing.T, o *generate.Outcome, _ *testutil.StubServer) {
			for i, p := range o.Set.Parts {
				if len(p.Questions) == 0 {
					t.Errorf("part %d has no questions", i+1)
				}
			}
			if o.Set.ID == "" || o.Set.ID != o.Set.ContentID() {
				t.Errorf("set id %q, content id %q", o.Set.ID, o.Set.ContentID())
			}
			if o.Generation.InputTokens == 0 || o.Generation.OutputTokens == 0 || o.Check.InputTokens == 0 || o.Check.OutputTokens == 0 {
				t.Errorf("usage not counted: generation %+v, check %+v", o.Generation, o.Check)
			}
			if o.CheckCalls < skill.Parts {
				t.Errorf("%d cross-check calls", o.CheckCalls)
			}
			want := skill.Provenance{Source: skill.SourceLLM, Model: testutil.StubModelName, LLMQuestions: true}
			if pv := o.Set.Provenance; pv == nil || pv.Source != want.Source || !strings.HasSuffix(pv.Model, ":"+want.Model) || !pv.LLMQuestions {
				t.Errorf("provenance %+v, want %+v", pv, want)
			}
		}},
		{name: "claimed-provenance-overridden", gen: func(t *testing.T) testutil.Brain {
			s := goodSet(t)
			s.Provenance = &skill.Provenance{Source: skill.SourceHybrid, Model: "someone:else"}
			return testutil.Text(reply(t, s))
		}, want: "", calls: 1, check: func(t *testing.T, o *generate.Outcome, _ *testutil.StubServer) {
			if pv := o.Set.Provenance; pv == nil || pv.Source != skill.SourceLLM || pv.Model == "someone:else" {
				t.Errorf("provenance %+v: the reply's claim was kept", pv)
			}
		}},
		{name: "fenced", gen: func(t *testing.T) testutil.Brain {
			return testutil.Text("```json\n" + reply(t, goodSet(t)) + "\n```")
		}, want: ""},
		{name: "malformed", gen: func(t *testing.T) testutil.Brain {
			return testutil.Text(`{"domain": "aviation_maintenance", "parts": [{"narrative": "x", "questions": [`)
		}, want: generate.RejectMalformed, calls: 1},
		{name: "prose-around-json", gen: func(t *testing.T) testutil.Brain {
			return testutil.Text("Here is the case you asked for:\n" + reply(t, goodSet(t)))
		}, want: generate.RejectMalformed},
		{name: "truncated-then-retried", gen: func(t *testing.T) testutil.Brain {
			r := reply(t, goodSet(t))
			return testutil.Sequence(testutil.BrainReply{Text: cut(r), FinishReason: testutil.FinishLength}, testutil.BrainReply{Text: r})
		}, want: "", calls: 2, check: func(t *testing.T, o *generate.Outcome, srv *testutil.StubServer) {
			reqs := generationRequests(srv)
			if len(reqs) != 2 || reqs[1].MaxTokens != 2*reqs[0].MaxTokens {
				t.Errorf("retry did not double the token limit: %d requests", len(reqs))
				for _, r := range reqs {
					t.Logf("max tokens %d", r.MaxTokens)
				}
			}
		}},
		{name: "truncated-always", gen: func(t *testing.T) testutil.Brain {
			return testutil.BrainFunc(func(testutil.BrainRequest) testutil.BrainReply {
				return testutil.BrainReply{Text: `{"domain": "aviation`, FinishReason: testutil.FinishLength}
			})
		}, want: generate.RejectTruncated, calls: 1 + generate.DefaultTruncationRetries},
		{name: "empty", gen: func(t *testing.T) testutil.Brain { return testutil.Text("") }, want: generate.RejectEmpty, calls: 1},
		{name: "leak", gen: text(leaky), want: generate.RejectLeakage, calls: 1},
		{name: "cue-word-script", gen: text(cueAnswerable), want: generate.RejectScript, calls: 1, check: func(t *testing.T, o *generate.Outcome, _ *testutil.StubServer) {
			found := false
			for _, q := range o.Report.Questions {
				for _, a := range q.Scripts {
					if q.Part == 1 && q.Question == 1 && a.Attacker == attack.CueProximity && a.Correct {
						found = true
					}
				}
			}
			if !found {
				t.Error("the cue-proximity attacker did not answer part 1's entity question")
			}
			if o.CheckCalls != 0 {
				t.Errorf("a script-answerable set was cross-checked (%d calls)", o.CheckCalls)
			}
		}},
		{name: "cross-check-disagrees", gen: text(disagreeing), want: generate.RejectCrossCheck, calls: 1, check: func(t *testing.T, o *generate.Outcome, _ *testutil.StubServer) {
			n := 0
			for _, d := range o.Drops {
				if d.Reason == generate.DropCrossCheckDisagree && d.Part == 3 {
					n++
				}
			}
			if n == 0 {
				t.Errorf("no cross-check drop in part 3: %+v", o.Drops)
			}
		}},
		{name: "slower-than-deadline", gen: func(t *testing.T) testutil.Brain {
			return testutil.Slow(testutil.Text(reply(t, goodSet(t))), 10*time.Second)
		}, want: generate.RejectDeadline, timeout: shortCallTimeout, calls: 1, check: func(t *testing.T, o *generate.Outcome, _ *testutil.StubServer) {
			if o.Elapsed > 5*time.Second {
				t.Errorf("deadline of %s not enforced: took %s", shortCallTimeout, o.Elapsed)
			}
			if o.Generation.InputTokens == 0 {
				t.Error("the cut call was charged no tokens: the provider had its prompt")
			}
		}},
		{name: "429-then-success", gen: func(t *testing.T) testutil.Brain {
			return testutil.Sequence(testutil.BrainReply{Status: http.StatusTooManyRequests}, testutil.BrainReply{Text: reply(t, goodSet(t))})
		}, want: "", calls: 2},
		{name: "429-retry-after", gen: func(t *testing.T) testutil.Brain {
			return testutil.Sequence(testutil.BrainReply{Status: http.StatusTooManyRequests, RetryAfter: time.Second}, testutil.BrainReply{Text: reply(t, goodSet(t))})
		}, want: "", calls: 2, check: func(t *testing.T, o *generate.Outcome, _ *testutil.StubServer) {
			if o.Elapsed < time.Second {
				t.Errorf("retried within %s, the provider asked for 1 s", o.Elapsed)
			}
		}},
		{name: "429-retry-after-an-hour", gen: func(t *testing.T) testutil.Brain {
			return testutil.Sequence(testutil.BrainReply{Status: http.StatusTooManyRequests, RetryAfter: time.Hour}, testutil.BrainReply{Text: reply(t, goodSet(t))})
		}, want: generate.RejectRateLimited, calls: 1},
		{name: "429-always", gen: func(t *testing.T) testutil.Brain {
			return testutil.BrainFunc(func(testutil.BrainRequest) testutil.BrainReply {
				return testutil.BrainReply{Status: http.StatusTooManyRequests}
			})
		}, want: generate.RejectRateLimited, calls: 1 + generate.DefaultRateLimitRetries},
	}
}

func TestGenerateScenarios(t *testing.T) {
	t.Parallel() // CPU-bound under -race: lets the package use both cores
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			for _, sc := range scenarios() {
				t.Run(sc.name, func(t *testing.T) {
					solve := oracle(t)
					if sc.solve != nil {
						solve = sc.solve(t)
					}
					g, srv := newGenerator(t, w, sc.gen(t), solve, func(c *generate.Config) {
						if sc.timeout > 0 {
							c.CallTimeout = sc.timeout
						}
					})
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					o, err := g.Generate(ctx, "aviation_maintenance")
					if err != nil {
						t.Fatal(err)
					}
					if o.Reason != sc.want {
						t.Fatalf("reason %q (%s), want %q", o.Reason, o.Detail, sc.want)
					}
					if (o.Set != nil) != (sc.want == "") {
						t.Fatalf("set %v with reason %q", o.Set != nil, o.Reason)
					}
					if sc.want != "" {
						var re *generate.RejectError
						if err := o.Err(); !errors.As(err, &re) || re.Reason != sc.want || !errors.Is(err, generate.ErrRejected) {
							t.Errorf("Err() = %v", err)
						}
					}
					if sc.calls > 0 && o.GenerationCalls != sc.calls {
						t.Errorf("%d generation calls, want %d", o.GenerationCalls, sc.calls)
					}
					st := g.Stats()
					if st.Attempts != 1 || (sc.want == "") != (st.Accepted == 1) || (sc.want != "" && st.Rejected[sc.want] != 1) {
						t.Errorf("stats %+v", st)
					}
					if st.Generation != o.Generation || st.Check != o.Check {
						t.Errorf("stats usage %+v/%+v, outcome %+v/%+v", st.Generation, st.Check, o.Generation, o.Check)
					}
					if sc.check != nil {
						sc.check(t, o, srv)
					}
				})
			}
		})
	}
}

// A second provider cross-checks too: when it disagrees, the set is
// rejected although the generating model's own solver agrees.
func TestSecondProviderCrossCheck(t *testing.T) {
	second, _ := testutil.NewModelFor(t, "anthropic", testutil.Text("unknown"))
	for _, tc := range []struct {
		name   string
		second *llm.Model
		want   generate.Reason
	}{{"agrees", nil, ""}, {"disagrees", second, generate.RejectCrossCheck}} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := newGenerator(t, wires[0], testutil.Text(reply(t, goodSet(t))), oracle(t), func(c *generate.Config) {
				c.CrossCheckWith = tc.second
			})
			o, err := g.Generate(context.Background(), "")
			if err != nil {
				t.Fatal(err)
			}
			if o.Reason != tc.want {
				t.Fatalf("reason %q (%s), want %q", o.Reason, o.Detail, tc.want)
			}
			if tc.second != nil {
				by := map[string]bool{}
				for _, d := range o.Drops {
					by[d.By] = true
				}
				if !by[second.Name()] {
					t.Errorf("no drop attributed to %s: %+v", second.Name(), o.Drops)
				}
			}
		})
	}
}

// Every request carries its own temperature and seed, and its own random
// case key, so that two requests (or two nodes) do not produce the same
// text.
func TestRequestsVary(t *testing.T) {
	var mu sync.Mutex
	var bodies []map[string]any
	rec := roundTrip(func(r *http.Request) (*http.Response, error) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		var m map[string]any
		if json.Unmarshal(b, &m) == nil && strings.Contains(string(b), generatorSystem) {
			mu.Lock()
			bodies = append(bodies, m)
			mu.Unlock()
		}
		return http.DefaultTransport.RoundTrip(r)
	})
	m, _ := testutil.NewModelFor(t, "openai", testutil.Text("not json"), func(c *llm.Config) {
		c.HTTPClient = &http.Client{Transport: rec}
	})
	g, err := generate.New(generate.Config{Model: m, SkipCrossCheck: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := g.Generate(context.Background(), "genomics"); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 {
		t.Fatalf("%d generation requests", len(bodies))
	}
	for _, b := range bodies {
		if _, ok := b["seed"]; !ok {
			t.Errorf("no seed in request")
		}
		if temp, _ := b["temperature"].(float64); temp < generate.DefaultTemperature-0.11 || temp > generate.DefaultTemperature+0.11 {
			t.Errorf("temperature %v", b["temperature"])
		}
		if rf, _ := b["response_format"].(map[string]any); rf["type"] != "json_object" {
			t.Errorf("no JSON mode: %v", b["response_format"])
		}
	}
	if b0, b1 := bodies[0], bodies[1]; b0["seed"] == b1["seed"] || b0["temperature"] == b1["temperature"] {
		t.Errorf("seed or temperature repeated: %v/%v %v/%v", b0["seed"], b1["seed"], b0["temperature"], b1["temperature"])
	}
	u0, _ := json.Marshal(bodies[0]["messages"])
	u1, _ := json.Marshal(bodies[1]["messages"])
	if bytes.Equal(u0, u1) {
		t.Error("two requests sent the same prompt")
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestCrossCheckErrorHidesKey: a cross-check call refused with an error
// that echoes the API key does not put the key into the validation report
// (CheckAnswer.Err), as the generation call's error does not.
func TestCrossCheckErrorHidesKey(t *testing.T) {
	solve := testutil.BrainFunc(func(testutil.BrainRequest) testutil.BrainReply {
		return testutil.BrainReply{Status: http.StatusUnauthorized, ErrorMessage: "Invalid API key provided: test-key"}
	})
	g, _ := newGenerator(t, wires[0], testutil.Text(reply(t, goodSet(t))), solve)
	o, err := g.Generate(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, q := range o.Report.Questions {
		for _, c := range q.Checks {
			if c.Err == "" {
				continue
			}
			n++
			if strings.Contains(c.Err, "test-key") {
				t.Fatalf("the report shows the API key: %s", c.Err)
			}
		}
	}
	if n == 0 {
		t.Fatalf("no cross-check error in the report (reason %q)", o.Reason)
	}
}

// A provider that reports no token usage still spends the hourly budget.
func TestTokenBudgetWithoutReportedUsage(t *testing.T) {
	m, srv := testutil.NewModelFor(t, "openai", testutil.BrainFunc(func(testutil.BrainRequest) testutil.BrainReply {
		return testutil.BrainReply{Text: "not json", NoUsage: true}
	}))
	g, err := generate.New(generate.Config{Model: m, SkipCrossCheck: true, TokenBudgetPerHour: 100, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := g.Generate(context.Background(), ""); err != nil {
			if !errors.Is(err, generate.ErrBudget) {
				t.Fatal(err)
			}
			break
		}
	}
	if n := len(srv.Received()); n != 1 {
		t.Fatalf("%d provider calls under a budget of 100 tokens an hour, want 1 (the prompt alone is thousands)", n)
	}
}

// The hourly token budget stops generation before a call and frees up as
// the window slides.
func TestTokenBudget(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	m, srv := testutil.NewModelFor(t, "openai", testutil.Text("not json"))
	g, err := generate.New(generate.Config{Model: m, SkipCrossCheck: true, TokenBudgetPerHour: 100, Now: clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Generate(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if used := g.Stats().Total(); used.InputTokens+used.OutputTokens < 100 {
		t.Fatalf("the first attempt used only %+v; the test needs more than the budget", used)
	}
	_, err = g.Generate(context.Background(), "")
	var be *generate.BudgetError
	if !errors.As(err, &be) || !errors.Is(err, generate.ErrBudget) || be.RetryAfter <= 59*time.Minute {
		t.Fatalf("second attempt: %v", err)
	}
	if n := len(srv.Received()); n != 1 {
		t.Fatalf("%d provider calls, want 1", n)
	}
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	if _, err := g.Generate(context.Background(), ""); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

// A cancelled context ends an attempt without a verdict; its tokens are
// still counted.
func TestGenerateCancelled(t *testing.T) {
	g, _ := newGenerator(t, wires[0], testutil.Slow(testutil.Text("x"), 10*time.Second), oracle(t), func(c *generate.Config) {
		c.CallTimeout = time.Minute
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := g.Generate(ctx, "")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	if st := g.Stats(); st.Attempts != 0 || st.GenerationCalls != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestGeneratorConfig(t *testing.T) {
	m, _ := testutil.NewModelFor(t, "openai", testutil.Text("x"))
	for _, c := range []generate.Config{
		{},
		{Model: m, Domains: []string{"astrology"}},
		{Model: m, Params: generate.Params{QuestionsPerPart: 99}},
		{Model: m, MaxTokens: 100, MaxTokensCap: 50},
		{Model: m, TokenBudgetPerHour: -1},
	} {
		if _, err := generate.New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
	g, err := generate.New(generate.Config{Model: m})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Generate(context.Background(), "astrology"); err == nil {
		t.Error("unknown domain accepted")
	}
	if g.Name() != "llm:"+m.Name() {
		t.Errorf("name %q", g.Name())
	}
}

// A cross-check call refused with HTTP 429 is retried like a generation
// call, so a passing rate limit does not cost the set.
func TestCrossCheckRateLimitRetried(t *testing.T) {
	var mu sync.Mutex
	first := true
	orc := oracle(t)
	solve := testutil.BrainFunc(func(r testutil.BrainRequest) testutil.BrainReply {
		mu.Lock()
		defer mu.Unlock()
		if first {
			first = false
			return testutil.BrainReply{Status: http.StatusTooManyRequests}
		}
		return orc.Reply(r)
	})
	g, _ := newGenerator(t, wires[0], testutil.Text(reply(t, goodSet(t))), solve)
	o, err := g.Generate(context.Background(), "")
	if err != nil || o.Reason != "" {
		t.Fatalf("%v %s %s", err, o.Reason, o.Detail)
	}
	for _, d := range o.Drops {
		if d.Reason == generate.DropCrossCheckError {
			t.Errorf("question dropped after a 429: %+v", d)
		}
	}
}
