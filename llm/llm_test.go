package llm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/llm"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/solve"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/ollama"
	"github.com/tmc/langchaingo/llms/openai"
)

// testSet is a three-part set whose part-2 question needs part 1.
func testSet(t testing.TB) *skill.Set {
	t.Helper()
	s := &skill.Set{
		Domain: "maritime logistics",
		Parts: []skill.Part{
			{
				Narrative: "In the harbor town of Velmora the lighthouse keeper Ansel Brask kept a careful logbook. " +
					"On the night of the storm he wrote that the supply ship Meridian arrived two hours late, carrying lamp oil.",
				Questions: []skill.Question{{
					Question: "Which supply ship arrived late on the night of the storm?", Answer: "Meridian",
					ReasoningType: skill.Temporal, AnswerType: skill.EntityAnswer,
				}},
			},
			{
				Narrative: "The next morning the harbor master, Ilse Varga, found that the late ship's lamp oil had spoiled in the damp hold. " +
					"She had the whole cargo carried to the north pier and burned.",
				Questions: []skill.Question{{
					Question: "Who wrote down the arrival of the ship whose cargo was burned?", Answer: "Ansel Brask",
					Answers:       []string{"Ansel Brask", "Brask"},
					ReasoningType: skill.MultiHop, AnswerType: skill.EntityAnswer, DependsOn: []int{1},
				}},
			},
			{
				Narrative: "A replacement shipment reached Velmora aboard the Caldera two days later. " +
					"That evening the lighthouse was lit again at nine o'clock, and the harbor reopened the following dawn.",
				Questions: []skill.Question{{
					Question: "At what hour was the lighthouse lit again?", Answer: "nine",
					Answers:       []string{"nine", "9", "nine o'clock", "9:00"},
					ReasoningType: skill.Temporal, AnswerType: skill.NumericAnswer,
				}},
			},
		},
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	s.ID = s.ContentID()
	return s
}

func testPolicy() skill.Policy {
	p := skill.DefaultPolicy()
	p.Tau = 5 * time.Second
	p.MaxHumanFraction = 0.5
	p.Total = 20 * time.Second
	return p
}

func challenges(s *skill.Set) []skill.Challenge {
	var cs []skill.Challenge
	for i, p := range s.Parts {
		cs = append(cs, skill.Challenge{Round: i + 1, Rounds: len(s.Parts), Domain: s.Domain, Narrative: p.Narrative, Question: p.Questions[0].Question, Budget: 5 * time.Second})
	}
	return cs
}

func msgs(system, user string) []llms.MessageContent {
	return []llms.MessageContent{
		llms.TextParts(llms.ChatMessageTypeSystem, system),
		llms.TextParts(llms.ChatMessageTypeHuman, user),
	}
}

func forEachProvider(t *testing.T, f func(t *testing.T, provider string)) {
	for _, p := range testutil.Providers {
		t.Run(p, func(t *testing.T) { f(t, p) })
	}
}

func TestSolverWithMemoryPassesAllRounds(t *testing.T) {
	forEachProvider(t, func(t *testing.T, p string) {
		set := testSet(t)
		m, srv := testutil.NewModelFor(t, p, testutil.NewOracle(set))
		solver := solve.New(m, solve.Config{Memory: true})

		sess, err := skill.NewSession(set, testPolicy(), nil)
		if err != nil {
			t.Fatal(err)
		}
		v := skill.Run(context.Background(), sess, solver.NewSession(), nil)
		if !v.Accepted {
			t.Fatalf("verdict %+v", v)
		}
		for _, r := range v.Rounds {
			if !r.Correct {
				t.Errorf("round %d answer %q", r.Round, r.Answer)
			}
		}
		reqs := srv.Received()
		if len(reqs) != 3 {
			t.Fatalf("%d requests, want 3", len(reqs))
		}
		for i, r := range reqs {
			if n := len(r.Messages); n != 2*i+1 {
				t.Errorf("request %d carries %d messages, want %d", i+1, n, 2*i+1)
			}
			if !strings.Contains(r.System, "untrusted") {
				t.Errorf("request %d system prompt %q", i+1, r.System)
			}
			if r.MaxTokens != solve.DefaultMaxAnswerTokens {
				t.Errorf("request %d max tokens %d", i+1, r.MaxTokens)
			}
		}
		if last := reqs[2].Messages; last[1].Role != "assistant" || last[1].Content != "Meridian" || last[3].Content != "Ansel Brask" {
			t.Errorf("history not kept: %+v", last)
		}
		if u := m.Usage(); u.InputTokens == 0 || u.OutputTokens != 1+2+1 {
			t.Errorf("usage %+v, want output 4", u)
		}
	})
}

func TestForgetfulSolverFailsDependentQuestion(t *testing.T) {
	forEachProvider(t, func(t *testing.T, p string) {
		set := testSet(t)
		m, srv := testutil.NewModelFor(t, p, testutil.NewOracle(set))
		solver := solve.New(m, solve.Config{Memory: false})

		a := solver.NewSession()
		var got []string
		for _, c := range challenges(set) {
			ans, err := a.Answer(context.Background(), c)
			if err != nil {
				t.Fatalf("round %d: %v", c.Round, err)
			}
			got = append(got, ans)
		}
		if got[0] != "Meridian" || got[1] != testutil.Unknown || !skill.MatchAny(got[2], set.Parts[2].Questions[0].Variants()) {
			t.Errorf("answers %q", got)
		}
		for i, r := range srv.Received() {
			if len(r.Messages) != 1 {
				t.Errorf("request %d carries %d messages, want 1", i+1, len(r.Messages))
			}
		}

		sess, err := skill.NewSession(set, testPolicy(), nil)
		if err != nil {
			t.Fatal(err)
		}
		v := skill.Run(context.Background(), sess, solver.NewSession(), nil)
		if v.Accepted || v.Reason != skill.ReasonWrongAnswer || v.FailedRound != 2 {
			t.Errorf("verdict %+v, want wrong answer in round 2", v)
		}
	})
}

func TestTruncatedReply(t *testing.T) {
	forEachProvider(t, func(t *testing.T, p string) {
		brain := testutil.Sequence(
			testutil.BrainReply{Text: "The supply ship was", FinishReason: testutil.FinishLength},
			testutil.BrainReply{Text: strings.Repeat("word ", 50)},
		)
		m, _ := testutil.NewModelFor(t, p, brain)
		resp, err := m.Generate(context.Background(), msgs("sys", "Which ship?"))
		if !errors.Is(err, llm.ErrTruncated) {
			t.Fatalf("brain-truncated: err %v", err)
		}
		if resp.Text != "The supply ship was" {
			t.Errorf("partial text %q", resp.Text)
		}
		// The stub cuts at the request's cap and reports the limit.
		resp, err = m.Generate(context.Background(), msgs("sys", "Say a lot"), llms.WithMaxTokens(5))
		if !errors.Is(err, llm.ErrTruncated) {
			t.Fatalf("cap-truncated: err %v", err)
		}
		if testutil.Tokens(resp.Text) != 5 || resp.Usage.OutputTokens != 5 {
			t.Errorf("partial %q usage %+v", resp.Text, resp.Usage)
		}
	})
}

// Without our transport an Ollama truncation is only visible as output
// tokens reaching the cap: langchaingo drops done_reason.
func TestWrappedOllamaTruncationHeuristic(t *testing.T) {
	srv := testutil.NewOllamaServer(testutil.Text(strings.Repeat("word ", 50)))
	defer srv.Close()
	c, err := ollama.New(ollama.WithModel("m"), ollama.WithServerURL(srv.URL), ollama.WithHTTPClient(&http.Client{}))
	if err != nil {
		t.Fatal(err)
	}
	m := llm.Wrap(c, "ollama", llm.WithTimeout(5*time.Second))
	if _, err := m.Generate(context.Background(), msgs("s", "u"), llms.WithMaxTokens(8)); !errors.Is(err, llm.ErrTruncated) {
		t.Fatalf("err %v", err)
	}
	if r, err := m.Generate(context.Background(), msgs("s", "u"), llms.WithMaxTokens(80)); err != nil || r.Usage.OutputTokens != 50 {
		t.Fatalf("uncut: %+v %v", r, err)
	}
}

func TestDeadline(t *testing.T) {
	const slow = 20 * time.Second
	for _, stream := range []bool{false, true} {
		name := "plain"
		if stream {
			name = "stream"
		}
		t.Run(name, func(t *testing.T) {
			forEachProvider(t, func(t *testing.T, p string) {
				m, _ := testutil.NewModelFor(t, p, testutil.Slow(testutil.Text("Meridian arrived late"), slow),
					func(c *llm.Config) { c.Timeout = 300 * time.Millisecond })
				var (
					mu     sync.Mutex
					chunks []string
				)
				var opts []llms.CallOption
				if stream {
					opts = append(opts, llms.WithStreamingFunc(func(_ context.Context, b []byte) error {
						mu.Lock()
						chunks = append(chunks, string(b))
						mu.Unlock()
						return nil
					}))
				}
				start := time.Now()
				resp, err := m.Generate(context.Background(), msgs("sys", "Which ship?"), opts...)
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("err %v (resp %+v), want one wrapping context.DeadlineExceeded", err, resp)
				}
				if d := time.Since(start); d > slow/2 {
					t.Errorf("took %s", d)
				}
				if resp.Text != "" {
					t.Errorf("partial text leaked: %q", resp.Text)
				}
				mu.Lock()
				defer mu.Unlock()
				if stream && p != "googleai" && (len(chunks) == 0 || chunks[0] != "Meridian ") {
					// The stub sent the first word before stalling: the
					// client saw part of the reply when the deadline hit.
					t.Errorf("streamed chunks %q", chunks)
				}
			})
		})
	}
}

// The caller's own deadline counts too. When its context ends
// mid-stream the OpenAI client returns success with the text received so
// far about half of the time (its reader goroutine races the context),
// and the error it returns otherwise does not wrap the context error:
// Generate must turn both into context.DeadlineExceeded.
func TestCallerDeadlineMidStreamOpenAI(t *testing.T) {
	m, srv := testutil.NewModelFor(t, "openai", testutil.Slow(testutil.Text("Meridian arrived late"), time.Minute))
	const n = 16
	// The deadline must fall after the stub's first chunk: 150 ms leaves
	// room for a loaded machine under -race (40 ms saw nothing streamed
	// once in CI); at least half the attempts must be mid-stream.
	const deadline = 150 * time.Millisecond
	rawSuccess, midStream := 0, 0
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		got := make(chan string, 8)
		_, err := m.Generate(ctx, msgs("sys", "Which ship?"), llms.WithStreamingFunc(func(_ context.Context, b []byte) error {
			got <- string(b)
			return nil
		}))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("attempt %d: err %v", i, err)
		}
		if len(got) > 0 {
			midStream++
		}

		// The same call on the raw client, for the record.
		ctx, cancel = context.WithTimeout(context.Background(), deadline)
		r, err := m.LLM().GenerateContent(ctx, msgs("sys", "Which ship?"), llms.WithStreamingFunc(func(context.Context, []byte) error { return nil }))
		cancel()
		if err == nil && len(r.Choices) > 0 && r.Choices[0].Content == "Meridian " {
			rawSuccess++
		}
	}
	if midStream < n/2 {
		t.Fatalf("only %d of %d deadlines hit mid-stream (after the first chunk)", midStream, n)
	}
	t.Logf("raw langchaingo openai client returned success with partial text in %d of %d deadline hits", rawSuccess, n)
	// One request per call, none retried after its deadline. A request
	// whose 150 ms ended before the stub's handler ran is not counted
	// (31 of 32 once, under -race with two busy loops at load 14),
	// so the count is a bound, not an exact figure.
	if r := srv.Requests(); r > 2*n || r < n {
		t.Errorf("%d requests for %d calls", r, 2*n)
	}
}

func TestCancelledCall(t *testing.T) {
	forEachProvider(t, func(t *testing.T, p string) {
		m, _ := testutil.NewModelFor(t, p, testutil.Slow(testutil.Text("x"), time.Minute))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		if _, err := m.Generate(ctx, msgs("s", "u")); !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
	})
}

func TestRateLimitRetry(t *testing.T) {
	forEachProvider(t, func(t *testing.T, p string) {
		seq := func() testutil.Brain {
			return testutil.Sequence(testutil.BrainReply{Status: http.StatusTooManyRequests}, testutil.BrainReply{Text: "Meridian"})
		}
		m, srv := testutil.NewModelFor(t, p, seq(), func(c *llm.Config) {
			c.Retry = llm.RetryPolicy{Attempts: 3, Backoff: 5 * time.Millisecond}
		})
		resp, err := m.Generate(context.Background(), msgs("s", "u"))
		if err != nil || resp.Text != "Meridian" {
			t.Fatalf("with retry: %+v %v", resp, err)
		}
		if srv.Requests() != 2 || m.Calls() != 2 {
			t.Errorf("requests %d calls %d, want 2", srv.Requests(), m.Calls())
		}

		m, srv = testutil.NewModelFor(t, p, seq())
		_, err = m.Generate(context.Background(), msgs("s", "u"))
		if !errors.Is(err, llm.ErrRateLimited) {
			t.Fatalf("without retry: err %v", err)
		}
		if srv.Requests() != 1 {
			t.Errorf("requests %d, want 1", srv.Requests())
		}

		// A backoff longer than the time left gives up at once.
		m, srv = testutil.NewModelFor(t, p, seq(), func(c *llm.Config) {
			c.Retry = llm.RetryPolicy{Attempts: 3, Backoff: time.Minute}
		})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err = m.Generate(ctx, msgs("s", "u"))
		if !errors.Is(err, llm.ErrRateLimited) || time.Since(start) > 4*time.Second || srv.Requests() != 1 {
			t.Fatalf("long backoff: err %v after %s, %d requests", err, time.Since(start), srv.Requests())
		}
	})
}

func TestRetryWaitHonoursCancel(t *testing.T) {
	m, srv := testutil.NewModelFor(t, "openai", testutil.Sequence(testutil.BrainReply{Status: http.StatusTooManyRequests}),
		func(c *llm.Config) { c.Retry = llm.RetryPolicy{Attempts: 5, Backoff: time.Minute} })
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := m.Generate(ctx, msgs("s", "u"))
	if !errors.Is(err, llm.ErrRateLimited) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if srv.Requests() != 1 {
		t.Errorf("%d requests", srv.Requests())
	}
}

func TestServerErrorIsNotRateLimit(t *testing.T) {
	forEachProvider(t, func(t *testing.T, p string) {
		m, _ := testutil.NewModelFor(t, p, testutil.Sequence(testutil.BrainReply{Status: http.StatusInternalServerError}),
			func(c *llm.Config) { c.Retry = llm.RetryPolicy{Attempts: 3} })
		_, err := m.Generate(context.Background(), msgs("s", "u"))
		if err == nil || errors.Is(err, llm.ErrRateLimited) {
			t.Fatalf("err %v", err)
		}
		if m.Calls() != 1 {
			t.Errorf("%d calls: a server error must not be retried", m.Calls())
		}
	})
}

// A model wrapped without our transport still classifies a 429 by the
// client's error text.
func TestWrappedOpenAIRateLimit(t *testing.T) {
	srv := testutil.NewOpenAIServer(testutil.Sequence(testutil.BrainReply{Status: http.StatusTooManyRequests}, testutil.BrainReply{Text: "ok"}))
	defer srv.Close()
	c, err := openai.New(openai.WithToken("k"), openai.WithBaseURL(srv.BaseURL()), openai.WithModel("m"), openai.WithHTTPClient(&http.Client{}))
	if err != nil {
		t.Fatal(err)
	}
	m := llm.Wrap(c, "openai", llm.WithRetry(llm.RetryPolicy{Attempts: 2, Backoff: time.Millisecond}))
	if r, err := m.Generate(context.Background(), msgs("s", "u")); err != nil || r.Text != "ok" {
		t.Fatalf("%+v %v", r, err)
	}
	if m.Calls() != 2 {
		t.Errorf("%d calls", m.Calls())
	}
}

func TestUsageNormalised(t *testing.T) {
	forEachProvider(t, func(t *testing.T, p string) {
		m, _ := testutil.NewModelFor(t, p, testutil.Text("alpha beta gamma"))
		for i := 1; i <= 2; i++ {
			resp, err := m.Generate(context.Background(), msgs("one two", "three four five"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Usage != (llm.Usage{InputTokens: 5, OutputTokens: 3}) {
				t.Errorf("call %d usage %+v", i, resp.Usage)
			}
			if u := m.Usage(); u != (llm.Usage{InputTokens: 5 * i, OutputTokens: 3 * i}) {
				t.Errorf("after %d calls cumulative usage %+v", i, u)
			}
		}
		// Streaming reports the same usage.
		resp, err := m.Generate(context.Background(), msgs("one two", "three four five"),
			llms.WithStreamingFunc(func(context.Context, []byte) error { return nil }))
		if err != nil || resp.Usage != (llm.Usage{InputTokens: 5, OutputTokens: 3}) {
			t.Errorf("streamed: %+v %v", resp, err)
		}
	})
}

func TestEmptyReply(t *testing.T) {
	forEachProvider(t, func(t *testing.T, p string) {
		m, _ := testutil.NewModelFor(t, p, testutil.Text("  \n "))
		if _, err := m.Generate(context.Background(), msgs("s", "u")); !errors.Is(err, llm.ErrEmptyOutput) {
			t.Fatalf("err %v", err)
		}
		solver := solve.New(m, solve.Config{})
		if _, err := solver.NewSession().Answer(context.Background(), challenges(testSet(t))[0]); !errors.Is(err, llm.ErrEmptyOutput) {
			t.Fatalf("solver err %v", err)
		}
	})
}

func TestSolverAnswerCapped(t *testing.T) {
	long := strings.Repeat("Meridianus ", 20) // 220 bytes, 20 tokens: under the 32-token cap
	forEachProvider(t, func(t *testing.T, p string) {
		m, _ := testutil.NewModelFor(t, p, testutil.Text(long))
		ans, err := solve.New(m, solve.Config{}).NewSession().Answer(context.Background(), challenges(testSet(t))[0])
		if err != nil {
			t.Fatal(err)
		}
		if len(ans) > skill.MaxAnswerBytes || !utf8.ValidString(ans) || !strings.HasPrefix(long, ans) || len(ans) < skill.MaxAnswerBytes-10 {
			t.Errorf("answer %q (%d bytes)", ans, len(ans))
		}
	})
}

func TestSolverPostProcessesAndSalvages(t *testing.T) {
	rambling := "Answer: \"Meridian.\"\nThe narrative says " + strings.Repeat("so much more ", 20)
	forEachProvider(t, func(t *testing.T, p string) {
		m, _ := testutil.NewModelFor(t, p, testutil.Text(rambling))
		ans, err := solve.New(m, solve.Config{MaxAnswerTokens: 16}).NewSession().Answer(context.Background(), challenges(testSet(t))[0])
		if err != nil || ans != "Meridian" {
			t.Fatalf("answer %q, err %v", ans, err)
		}
		// A reply cut inside its first line is an error, not an answer.
		m, _ = testutil.NewModelFor(t, p, testutil.Text("The ship that arrived late was the Meridian"))
		_, err = solve.New(m, solve.Config{MaxAnswerTokens: 4}).NewSession().Answer(context.Background(), challenges(testSet(t))[0])
		if !errors.Is(err, llm.ErrTruncated) {
			t.Fatalf("err %v", err)
		}
	})
}

func TestSolverRejectsBadChallenges(t *testing.T) {
	m, srv := testutil.NewModelFor(t, "openai", testutil.Text("x"))
	a := solve.New(m, solve.Config{}).NewSession()
	for _, c := range []skill.Challenge{
		{Round: 1, Narrative: "", Question: "q?"},
		{Round: 1, Narrative: "n", Question: " "},
		{Round: 1, Narrative: strings.Repeat("n", skill.MaxNarrativeBytes+1), Question: "q?"},
	} {
		if _, err := a.Answer(context.Background(), c); err == nil {
			t.Errorf("accepted %+.40v", c)
		}
	}
	if srv.Requests() != 0 {
		t.Errorf("%d requests sent", srv.Requests())
	}
	if _, err := solve.New(nil, solve.Config{}).NewSession().Answer(context.Background(), challenges(testSet(t))[0]); err == nil {
		t.Error("nil model accepted")
	}
}

func TestSolverSessionsAreIndependentAndConcurrent(t *testing.T) {
	set := testSet(t)
	m, _ := testutil.NewModelFor(t, "anthropic", testutil.NewOracle(set))
	solver := solve.New(m, solve.Config{Memory: true})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := solver.NewSession()
			for _, c := range challenges(set) {
				ans, err := a.Answer(context.Background(), c)
				if err != nil {
					errs <- err
					return
				}
				if !skill.MatchAny(ans, set.Parts[c.Round-1].Questions[0].Variants()) {
					errs <- errors.New("wrong answer " + ans)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if u := m.Usage(); u.OutputTokens != 8*4 {
		t.Errorf("usage %+v", u)
	}
}

func TestPlaceholderKeyAndCustomHTTPClient(t *testing.T) {
	t.Setenv(llm.EnvOpenAIKey, "")
	var mu sync.Mutex
	var auth []string
	rec := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		return http.DefaultTransport.RoundTrip(r)
	})
	m, _ := testutil.NewModelFor(t, "openai", testutil.Text("ok"), func(c *llm.Config) {
		c.APIKey = ""
		c.HTTPClient = &http.Client{Transport: rec}
	})
	if _, err := m.Generate(context.Background(), msgs("s", "u")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(auth) != 1 || auth[0] != "Bearer "+llm.PlaceholderAPIKey {
		t.Errorf("authorization headers %q", auth)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// stallModel stands for a client that, like langchaingo's OpenAI client
// when its context ends mid-stream, reports success with the text it had
// received so far.
type stallModel struct{ err error }

func (s stallModel) GenerateContent(ctx context.Context, _ []llms.MessageContent, _ ...llms.CallOption) (*llms.ContentResponse, error) {
	<-ctx.Done()
	if s.err != nil {
		return nil, s.err
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: "Meri"}}}, nil
}

func (s stallModel) Call(ctx context.Context, p string, o ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, s, p, o...)
}

func TestContextEndOverridesClientSuccess(t *testing.T) {
	m := llm.Wrap(stallModel{}, "openai", llm.WithTimeout(20*time.Millisecond))
	resp, err := m.Generate(context.Background(), msgs("s", "u"))
	if !errors.Is(err, context.DeadlineExceeded) || resp.Text != "" {
		t.Fatalf("per-call timeout: %+v %v", resp, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	if _, err := m.Generate(ctx, msgs("s", "u")); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v", err)
	}
	// The OpenAI client replaces the context error by its own text.
	m = llm.Wrap(stallModel{err: errors.New("request timeout: API call exceeded deadline")}, "openai", llm.WithTimeout(20*time.Millisecond))
	_, err = m.Generate(context.Background(), msgs("s", "u"))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "request timeout") {
		t.Fatalf("client timeout text: %v", err)
	}
	if u := m.Usage(); u != (llm.Usage{}) {
		t.Errorf("usage counted for a failed call: %+v", u)
	}
}

func TestLegacyMaxTokensField(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		var mu sync.Mutex
		var bodies []string
		rec := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			bodies = append(bodies, string(b))
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
			return http.DefaultTransport.RoundTrip(r)
		})
		m, srv := testutil.NewModelFor(t, "openai", testutil.Text("ok"), func(c *llm.Config) {
			c.HTTPClient = &http.Client{Transport: rec}
			c.LegacyMaxTokensField = legacy
			c.MaxTokens = 77
		})
		if _, err := m.Generate(context.Background(), msgs("s", "u")); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		body := bodies[0]
		mu.Unlock()
		hasLegacy, hasNew := strings.Contains(body, `"max_tokens":77`), strings.Contains(body, `"max_completion_tokens":77`)
		if hasLegacy != legacy || hasNew == legacy {
			t.Errorf("legacy=%v: body %s", legacy, body)
		}
		if r, _ := srv.LastRequest(); r.MaxTokens != 77 {
			t.Errorf("stub saw max tokens %d", r.MaxTokens)
		}
	}
}

func TestTemperatureSent(t *testing.T) {
	var mu sync.Mutex
	var body string
	rec := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		body = string(b)
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		return http.DefaultTransport.RoundTrip(r)
	})
	temp := 0.25
	m, _ := testutil.NewModelFor(t, "anthropic", testutil.Text("ok"), func(c *llm.Config) {
		c.HTTPClient = &http.Client{Transport: rec}
		c.Temperature = &temp
	})
	if _, err := m.Generate(context.Background(), msgs("s", "u")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(body, `"temperature":0.25`) || !strings.Contains(body, fmt.Sprintf(`"max_tokens":%d`, llm.DefaultMaxTokens)) {
		t.Errorf("body %s", body)
	}
}

// A lone user message takes other client paths (googleai: the
// non-streamed generateContent method).
func TestSingleUserMessage(t *testing.T) {
	forEachProvider(t, func(t *testing.T, p string) {
		m, srv := testutil.NewModelFor(t, p, testutil.Text("alpha beta"))
		resp, err := m.Generate(context.Background(), []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "one two three")})
		if err != nil || resp.Text != "alpha beta" || resp.Usage != (llm.Usage{InputTokens: 3, OutputTokens: 2}) {
			t.Fatalf("%+v %v", resp, err)
		}
		if r, _ := srv.LastRequest(); r.System != "" || len(r.Messages) != 1 {
			t.Errorf("request %+v", r)
		}
		if _, err := m.Generate(context.Background(), nil); err == nil {
			t.Error("no messages accepted")
		}
	})
}

// A keyword-matching script gets a plain lookup right but cannot chain
// rounds.
func TestKeywordScriptProverRejected(t *testing.T) {
	set := testSet(t)
	m, _ := testutil.NewModelFor(t, "openai", testutil.NewKeywordScript())
	sess, err := skill.NewSession(set, testPolicy(), nil)
	if err != nil {
		t.Fatal(err)
	}
	v := skill.Run(context.Background(), sess, solve.New(m, solve.Config{Memory: true}).NewSession(), nil)
	if v.Accepted || v.FailedRound != 2 || !v.Rounds[0].Correct {
		t.Errorf("verdict %+v", v)
	}
}
