package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/llm"
)

// endlessServer answers every request with status and a body that opens
// like the provider's reply (or error) and then never ends; it counts the
// bytes it managed to write.
func endlessServer(t *testing.T, provider string, status int) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var wrote atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		head, chunk := `{"error":{"message":"`, strings.Repeat("a", 32<<10)
		if status == http.StatusOK {
			switch provider {
			case "openai":
				head = `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"`
			case "anthropic":
				head = `{"id":"x","type":"message","role":"assistant","content":[{"type":"text","text":"`
			case "ollama":
				// NDJSON: endless well-formed lines, each short enough
				// for the client's line scanner (512 kB). The client
				// appends each line's content to a string, so that
				// short lines cost it time quadratic in their number
				// (bounded by the call's deadline).
				head = ""
				chunk = `{"model":"m","message":{"role":"assistant","content":"` + strings.Repeat("a", 256<<10) + `"},"done":false}` + "\n"
			case "googleai":
				head = `[{"candidates":[{"content":{"role":"model","parts":[{"text":"`
			}
		}
		if _, err := w.Write([]byte(head)); err != nil {
			return
		}
		// Bounded: 4 GiB at most, and the client hanging up ends it.
		for range 4 << 30 / len(chunk) {
			n, err := w.Write([]byte(chunk))
			wrote.Add(int64(n))
			if err != nil || r.Context().Err() != nil {
				return
			}
		}
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv, &wrote
}

// TestEndlessResponseBodyIsCut: a provider (or a proxy in front of it)
// whose reply never ends costs at most MaxResponseBytes of reading, not
// everything it can send before the call's deadline (about 130 MB a
// second over loopback, read into memory by the client libraries), and
// the call fails at once with ErrResponseTooLarge. Google AI's client
// read an endless error body past the deadline (44 s against 2 s).
func TestEndlessResponseBodyIsCut(t *testing.T) {
	// The call's deadline is a guard, well above the time reading
	// MaxResponseBytes takes (the clients decode every byte): 10.4 s
	// under -race at load 10, 20.3-21.2 s for ollama's 64 lines with
	// GOMAXPROCS=1 or two more busy loops at load 14 (which a 20 s
	// deadline cut: "context deadline exceeded, want
	// ErrResponseTooLarge"). A call that is cut by the cap returns as
	// soon as it is, whatever the deadline.
	const deadline = 60 * time.Second
	forEachProvider(t, func(t *testing.T, provider string) {
		for _, status := range []int{http.StatusOK, http.StatusInternalServerError} {
			srv, wrote := endlessServer(t, provider, status)
			base := srv.URL
			if provider == "openai" || provider == "anthropic" {
				base += "/v1"
			}
			m, err := llm.New(context.Background(), llm.Config{Spec: provider + ":m", BaseURL: base, APIKey: "k", Timeout: deadline})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = m.Generate(context.Background(), msgs("system", "question"))
			elapsed := time.Since(start)
			_ = m.Close()
			if err == nil {
				t.Fatalf("HTTP %d: an endless reply was taken as a success", status)
			}
			// Ollama's client gives up on an over-long error line by
			// itself, having read little.
			if !errors.Is(err, llm.ErrResponseTooLarge) && (provider != "ollama" || status == http.StatusOK) {
				t.Errorf("HTTP %d: err = %v, want ErrResponseTooLarge", status, err)
			}
			// The server's count includes what socket buffers hold.
			if w := wrote.Load(); w > 4*llm.MaxResponseBytes {
				t.Errorf("HTTP %d: the server wrote %d MiB before the client stopped reading, want about %d", status, w>>20, llm.MaxResponseBytes>>20)
			}
			// Cut by the cap, not by the call's deadline: what it read
			// is bounded above; how long reading it takes is the
			// machine's (above).
			if elapsed >= deadline {
				t.Errorf("HTTP %d: the call took %s, its whole deadline", status, elapsed)
			}
		}
	})
}

// TestProviderErrorHidesKeyAndIsShort: an error reply that echoes the API
// key (as some OpenAI-compatible proxies do: "Invalid API key: ...") and
// runs long does not put the key, or the whole reply, into the error the
// caller logs or shows.
func TestProviderErrorHidesKeyAndIsShort(t *testing.T) {
	const key = "sk-test-0123456789abcdefSECRET"
	for _, provider := range []string{"openai", "anthropic", "googleai"} {
		t.Run(provider, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				msg := "Invalid API key: " + key + ". " + strings.Repeat("Check your plan and billing details. ", 3000)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				body := map[string]any{"error": map[string]any{"message": msg, "type": "authentication_error", "code": 401, "status": "UNAUTHENTICATED"}}
				if provider == "anthropic" {
					body["type"] = "error"
				}
				_ = json.NewEncoder(w).Encode(body)
			}))
			t.Cleanup(srv.Close)
			base := srv.URL
			if provider != "googleai" {
				base += "/v1"
			}
			m, err := llm.New(context.Background(), llm.Config{Spec: provider + ":m", BaseURL: base, APIKey: key, Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close() })
			_, err = m.Generate(context.Background(), msgs("system", "question"))
			if err == nil {
				t.Fatal("a 401 was taken as a success")
			}
			s := err.Error()
			if strings.Contains(s, key) || strings.Contains(s, "SECRET") {
				t.Errorf("the error shows the API key: %.300s", s)
			}
			if len(s) > 2048 {
				t.Errorf("the error is %d bytes long", len(s))
			}
			if !strings.Contains(s, "Invalid API key") {
				t.Errorf("the error lost the provider's message: %.300s", s)
			}
		})
	}
}

// TestRetryAfterHonoured: a 429 with Retry-After is retried no sooner
// than the provider asked (not after the policy's shorter back-off, which
// only earns another 429), and one that asks for longer than MaxBackoff
// is not retried at all.
func TestRetryAfterHonoured(t *testing.T) {
	forEachProvider(t, func(t *testing.T, p string) {
		brain := testutil.Sequence(testutil.BrainReply{Status: http.StatusTooManyRequests, RetryAfter: time.Second}, testutil.BrainReply{Text: "Meridian"})
		m, srv := testutil.NewModelFor(t, p, brain, func(c *llm.Config) {
			c.Retry = llm.RetryPolicy{Attempts: 2, Backoff: 10 * time.Millisecond}
		})
		start := time.Now()
		resp, err := m.Generate(context.Background(), msgs("s", "u"))
		if err != nil || resp.Text != "Meridian" || srv.Requests() != 2 {
			t.Fatalf("%+v %v, %d requests", resp, err, srv.Requests())
		}
		if d := time.Since(start); d < time.Second {
			t.Errorf("retried after %s, the provider asked for 1 s", d)
		}
		if ra := llm.RetryAfter(err); ra != 0 {
			t.Errorf("RetryAfter of a success: %s", ra)
		}

		brain = testutil.Sequence(testutil.BrainReply{Status: http.StatusTooManyRequests, RetryAfter: time.Hour}, testutil.BrainReply{Text: "Meridian"})
		m, srv = testutil.NewModelFor(t, p, brain, func(c *llm.Config) {
			c.Retry = llm.RetryPolicy{Attempts: 3, Backoff: 10 * time.Millisecond}
		})
		start = time.Now()
		_, err = m.Generate(context.Background(), msgs("s", "u"))
		if !errors.Is(err, llm.ErrRateLimited) || srv.Requests() != 1 || time.Since(start) > 5*time.Second {
			t.Fatalf("Retry-After 1 h: err %v, %d requests after %s", err, srv.Requests(), time.Since(start))
		}
		if ra := llm.RetryAfter(err); ra != time.Hour {
			t.Errorf("RetryAfter(err) = %s, want 1h", ra)
		}
	})
}

// TestUsageEstimatedWhenProviderOmitsIt: a provider that reports no
// token usage (some OpenAI-compatible servers) is not counted as free:
// the tokens are estimated from the text (4 bytes a token), so token
// budgets still bind.
func TestUsageEstimatedWhenProviderOmitsIt(t *testing.T) {
	reply := strings.Repeat("word ", 200)
	m, _ := testutil.NewModelFor(t, "openai", testutil.BrainFunc(func(testutil.BrainRequest) testutil.BrainReply {
		return testutil.BrainReply{Text: reply, NoUsage: true}
	}))
	user := strings.Repeat("question ", 100)
	resp, err := m.Generate(context.Background(), msgs("system prompt", user))
	if err != nil {
		t.Fatal(err)
	}
	if !resp.UsageEstimated {
		t.Error("UsageEstimated is false")
	}
	if resp.Usage.OutputTokens < len(strings.TrimSpace(reply))/4 || resp.Usage.InputTokens < len(user)/4 {
		t.Errorf("usage %+v for %d bytes in, %d out", resp.Usage, len(user), len(reply))
	}
	if u := m.Usage(); u != resp.Usage {
		t.Errorf("model usage %+v, reply %+v", u, resp.Usage)
	}

	// A provider that reports usage is believed.
	m, _ = testutil.NewModelFor(t, "openai", testutil.Text(reply))
	resp, err = m.Generate(context.Background(), msgs("system prompt", user))
	if err != nil || resp.UsageEstimated || resp.Usage.OutputTokens != 200 {
		t.Fatalf("%+v %v", resp, err)
	}
}

// TestClientPanicIsAnError: replies that make a langchaingo client panic
// (a null choice for OpenAI; an empty array or an empty body for Google
// AI, as a flaky proxy sends) fail the call with ErrClientPanic instead
// of bringing the process down.
func TestClientPanicIsAnError(t *testing.T) {
	for _, c := range []struct{ provider, body string }{
		{"openai", `{"choices":[null]}`},
		{"googleai", `[]`},
		{"googleai", ``},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(c.body))
		}))
		base := srv.URL
		if c.provider == "openai" {
			base += "/v1"
		}
		m, err := llm.New(context.Background(), llm.Config{Spec: c.provider + ":m", BaseURL: base, APIKey: "k", Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.Generate(context.Background(), msgs("system", "question"))
		if !errors.Is(err, llm.ErrClientPanic) {
			t.Errorf("%s %q: err %v, want ErrClientPanic", c.provider, c.body, err)
		}
		_ = m.Close()
		srv.Close()
	}
}

// TestCutCallIsCharged: a call whose deadline passed after the provider
// had the request is not free: the provider bills the prompt it read
// (and what it generated), so the prompt's estimate is charged to the
// model's usage and returned with the error, for token budgets.
func TestCutCallIsCharged(t *testing.T) {
	forEachProvider(t, func(t *testing.T, p string) {
		m, _ := testutil.NewModelFor(t, p, testutil.Slow(testutil.Text("Meridian"), 5*time.Second), func(c *llm.Config) {
			c.Timeout = 200 * time.Millisecond
		})
		user := strings.Repeat("question ", 100)
		resp, err := m.Generate(context.Background(), msgs("system", user))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v", err)
		}
		if resp.Usage.InputTokens < len(user)/4 || !resp.UsageEstimated || m.Usage() != resp.Usage {
			t.Errorf("reply usage %+v (estimated %v), model usage %+v: want the prompt's %d bytes charged", resp.Usage, resp.UsageEstimated, m.Usage(), len(user))
		}
	})
}

// TestOverloadedIsRetried: Anthropic answers 529 overloaded_error when its
// API is busy for everyone. It was an ErrProviderStatus (not retried; the
// node's LLM check counted it as the model being down); it is a rate
// limit now, retried under the policy.
func TestOverloadedIsRetried(t *testing.T) {
	brain := testutil.Sequence(testutil.BrainReply{Status: 529}, testutil.BrainReply{Text: "Meridian"})
	m, srv := testutil.NewModelFor(t, "anthropic", brain, func(c *llm.Config) {
		c.Retry = llm.RetryPolicy{Attempts: 2, Backoff: 10 * time.Millisecond}
	})
	resp, err := m.Generate(context.Background(), msgs("s", "u"))
	if err != nil || resp.Text != "Meridian" || srv.Requests() != 2 {
		t.Fatalf("after a 529: %+v %v, %d requests; want Meridian after a retry", resp, err, srv.Requests())
	}
	m, _ = testutil.NewModelFor(t, "anthropic", testutil.Sequence(testutil.BrainReply{Status: 529}), func(c *llm.Config) {
		c.Retry = llm.RetryPolicy{Attempts: 1}
	})
	if _, err := m.Generate(context.Background(), msgs("s", "u")); !errors.Is(err, llm.ErrRateLimited) {
		t.Fatalf("a 529 without retries: %v, want ErrRateLimited", err)
	}
}
