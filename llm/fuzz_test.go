package llm_test

import (
	"bytes"
	"context"
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
)

// recordingTransport keeps the body of the last response it passed on.
type recordingTransport struct {
	mu   sync.Mutex
	last []byte
	ct   string
}

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.last, r.ct = b, resp.Header.Get("Content-Type")
	r.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

// replyTransport answers every request with one canned response.
type replyTransport struct {
	status int
	header http.Header
	body   []byte
}

func (r replyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{StatusCode: r.status, Status: http.StatusText(r.status), Header: r.header.Clone(),
		Body: io.NopCloser(bytes.NewReader(r.body)), ContentLength: -1, Request: req, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

// fuzzStatuses are the statuses a fuzzed reply comes with.
var fuzzStatuses = []int{200, 200, 200, 201, 204, 400, 401, 404, 429, 500, 503, 529}

// FuzzProviderReply gives each provider's real client (the langchaingo
// client a Model built by New wraps, with the transport that sniffs and
// bounds bodies) a reply of the fuzzer's: status, Content-Type,
// Retry-After and body, seeded with the stub servers' real replies. No
// panic escapes Generate; it returns within its timeout; a success has
// text, a status below 400 and counts no negative tokens; an error
// status is an error, a 429 ErrRateLimited with a Retry-After of at most
// a day.
func FuzzProviderReply(f *testing.F) {
	for pi, p := range testutil.Providers {
		for _, brain := range []testutil.Brain{
			testutil.Text("Meridian"),
			testutil.Sequence(testutil.BrainReply{Text: "one two three four five", FinishReason: testutil.FinishLength}),
			testutil.Sequence(testutil.BrainReply{Status: http.StatusTooManyRequests, RetryAfter: time.Second}),
			testutil.Sequence(testutil.BrainReply{Text: "Meridian", NoUsage: true}),
		} {
			srv, err := testutil.NewServer(p, brain)
			if err != nil {
				f.Fatal(err)
			}
			rec := &recordingTransport{}
			cfg := srv.Config()
			cfg.HTTPClient = &http.Client{Transport: rec}
			cfg.Logger = slog.New(slog.DiscardHandler)
			m, err := llm.New(context.Background(), cfg)
			if err != nil {
				f.Fatal(err)
			}
			_, _ = m.Generate(context.Background(), msgs("s", "u"))
			_ = m.Close()
			srv.Close()
			status := uint8(0)
			if bytes.Contains(rec.last, []byte("rror")) {
				status = 8
			}
			f.Add(uint8(pi), status, rec.ct, "", rec.last)
		}
	}
	f.Add(uint8(0), uint8(0), "application/json", "", []byte(`{"choices":[null]}`))
	f.Add(uint8(0), uint8(0), "text/event-stream", "", []byte("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]\n\n"))
	f.Add(uint8(1), uint8(0), "application/json", "", []byte(`{"content":[{"type":"text"}],"stop_reason":"max_tokens","usage":{"input_tokens":-5}}`))
	f.Add(uint8(2), uint8(0), "application/x-ndjson", "", []byte("{\"message\":{\"content\":\"a\"}}\n{\"done\":true,\"done_reason\":\"length\"}\n"))
	f.Add(uint8(3), uint8(0), "application/json", "", []byte(`[{"candidates":[{"content":{"parts":[{"text":"x"}]}}],"usageMetadata":{"candidatesTokenCount":-1,"thoughtsTokenCount":9223372036854775807}}]`))
	f.Add(uint8(0), uint8(8), "application/json", "1e300", []byte(`{"error":{"message":"slow down"}}`))
	f.Add(uint8(2), uint8(8), "", "Wed, 21 Oct 2099 07:28:00 GMT", []byte{})
	f.Fuzz(func(t *testing.T, provider, statusIdx uint8, ctype, retryAfter string, body []byte) {
		p := testutil.Providers[int(provider)%len(testutil.Providers)]
		status := fuzzStatuses[int(statusIdx)%len(fuzzStatuses)]
		h := http.Header{}
		if ctype != "" {
			h.Set("Content-Type", ctype)
		}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		base := "http://provider.test/v1"
		if p == "ollama" || p == "googleai" {
			base = "http://provider.test"
		}
		m, err := llm.New(context.Background(), llm.Config{Spec: p + ":m", BaseURL: base, APIKey: "k", Timeout: 5 * time.Second,
			HTTPClient: &http.Client{Transport: replyTransport{status: status, header: h, body: body}}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		start := time.Now()
		resp, err := m.Generate(context.Background(), msgs("system", "question"))
		if d := time.Since(start); d > 6*time.Second {
			t.Fatalf("%s: Generate took %s", p, d)
		}
		if resp.Usage.InputTokens < 0 || resp.Usage.OutputTokens < 0 {
			t.Fatalf("%s: negative usage %+v", p, resp.Usage)
		}
		if err == nil {
			if strings.TrimSpace(resp.Text) == "" {
				t.Fatalf("%s: success without text", p)
			}
			if status >= 400 {
				t.Fatalf("%s: HTTP %d taken as a success: %q", p, status, resp.Text)
			}
			return
		}
		if status == http.StatusTooManyRequests && !errors.Is(err, llm.ErrRateLimited) {
			t.Fatalf("%s: a 429 is not ErrRateLimited: %v", p, err)
		}
		if ra := llm.RetryAfter(err); ra < 0 || ra > 24*time.Hour {
			t.Fatalf("%s: RetryAfter %s", p, ra)
		}
	})
}
