package testutil

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, ctx context.Context, url string, header map[string]string, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return http.DefaultClient.Do(req)
}

type endpoint struct {
	path   string
	header map[string]string
	body   string
}

func endpoints() map[string]endpoint {
	return map[string]endpoint{
		"openai":    {"/v1/chat/completions", map[string]string{"Authorization": "Bearer k"}, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		"anthropic": {"/v1/messages", map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"}, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`},
		"ollama":    {"/api/chat", nil, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		"googleai":  {"/v1beta/models/m:generateContent", map[string]string{"x-goog-api-key": "k"}, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
	}
}

func TestServersRejectBadRequests(t *testing.T) {
	for p, ep := range endpoints() {
		s, err := NewServer(p, Text("x"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx := context.Background()
		resp, err := post(t, ctx, s.URL+"/nope", ep.header, ep.body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s unknown path: %d", p, resp.StatusCode)
		}
		resp, err = post(t, ctx, s.URL+ep.path, ep.header, "{not json")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s bad JSON: %d", p, resp.StatusCode)
		}
		if p != "ollama" {
			resp, err = post(t, ctx, s.URL+ep.path, nil, ep.body)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s without credentials: %d", p, resp.StatusCode)
			}
		}
		if len(s.Received()) != 0 {
			t.Errorf("%s: bad requests reached the brain", p)
		}
		if s.Requests() != 3 && !(p == "ollama" && s.Requests() == 2) {
			t.Errorf("%s: %d requests counted", p, s.Requests())
		}
	}
}

func TestServersErrorStatus(t *testing.T) {
	for p, ep := range endpoints() {
		s, _ := NewServer(p, Sequence(BrainReply{Status: http.StatusTooManyRequests}))
		defer s.Close()
		resp, err := post(t, context.Background(), s.URL+ep.path, ep.header, ep.body)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("%s: status %d", p, resp.StatusCode)
		}
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil || v["error"] == nil {
			t.Errorf("%s: error body %s", p, b)
		}
	}
}

// Ollama answers NDJSON, one JSON object per line, even for a request
// with "stream": false, and streams when the field is missing.
func TestOllamaNDJSON(t *testing.T) {
	s := NewOllamaServer(Text("Meridian arrived late"))
	defer s.Close()
	for _, c := range []struct {
		stream string
		lines  int
	}{{`,"stream":false`, 1}, {``, 4}, {`,"stream":true`, 4}} {
		resp, err := post(t, context.Background(), s.URL+"/api/chat", nil, `{"model":"m","messages":[{"role":"user","content":"a b"}],"options":{"num_predict":2}`+c.stream+`}`)
		if err != nil {
			t.Fatal(err)
		}
		var lines []map[string]any
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var v map[string]any
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			lines = append(lines, v)
		}
		resp.Body.Close()
		want := c.lines
		if want == 4 {
			want = 3 // num_predict 2 cuts the reply to two words, plus the final line
		}
		if len(lines) != want {
			t.Fatalf("stream%q: %d lines, want %d", c.stream, len(lines), want)
		}
		last := lines[len(lines)-1]
		if last["done"] != true || last["done_reason"] != "length" || last["eval_count"] != float64(2) || last["prompt_eval_count"] != float64(2) {
			t.Errorf("final line %v", last)
		}
	}
}

// A delayed reply ends when the client gives up, and Close does not wait
// for replies still being held back.
func TestDelayHonoursCancellation(t *testing.T) {
	for p, ep := range endpoints() {
		asked := make(chan struct{}, 2)
		s, _ := NewServer(p, BrainFunc(func(BrainRequest) BrainReply {
			asked <- struct{}{}
			return BrainReply{Text: "late reply", Delay: time.Hour}
		}))
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		resp, err := post(t, ctx, s.URL+ep.path, ep.header, ep.body)
		if err == nil {
			// Streaming replies send their headers first; reading stalls.
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		cancel()
		if err == nil {
			t.Errorf("%s: delayed reply arrived", p)
		}
		<-asked
		// A second request is left pending while the server closes.
		errc := make(chan error, 1)
		go func() {
			resp, err := post(t, context.Background(), s.URL+ep.path, ep.header, ep.body)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			errc <- err
		}()
		<-asked
		start := time.Now()
		s.Close()
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: Close took %s", p, d)
		}
		<-errc
	}
}

func TestOpenAIStream(t *testing.T) {
	s := NewOpenAIServer(Text("Meridian arrived late"))
	defer s.Close()
	resp, err := post(t, context.Background(), s.URL+"/v1/chat/completions", map[string]string{"Authorization": "Bearer k"},
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"s"},{"role":"user","content":"a b c"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var text strings.Builder
	var finish string
	var usage map[string]any
	for _, line := range strings.Split(string(b), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var v struct {
			Choices []struct {
				Delta        struct{ Content string }
				FinishReason *string `json:"finish_reason"`
			}
			Usage map[string]any
		}
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		for _, c := range v.Choices {
			text.WriteString(c.Delta.Content)
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
		if v.Usage != nil {
			usage = v.Usage
		}
	}
	if text.String() != "Meridian arrived late" || finish != "stop" || usage["prompt_tokens"] != float64(4) || usage["completion_tokens"] != float64(3) {
		t.Errorf("text %q finish %q usage %v", text.String(), finish, usage)
	}
	if !bytes.HasSuffix(bytes.TrimSpace(b), []byte("data: [DONE]")) {
		t.Error("no [DONE]")
	}
	r, _ := s.LastRequest()
	if r.System != "s" || len(r.Messages) != 1 || !r.Stream {
		t.Errorf("request %+v", r)
	}
}
