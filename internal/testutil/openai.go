package testutil

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// NewOpenAIServer serves the OpenAI Chat Completions API
// (POST /v1/chat/completions) with b: a JSON reply, or server-sent events
// when the request has "stream": true (with a final usage chunk when
// stream_options.include_usage is set). finish_reason is "stop" or
// "length". Errors use OpenAI's {"error":{...}} shape.
func NewOpenAIServer(b Brain) *StubServer { return newStub("openai", b, serveOpenAI) }

type openaiRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	MaxTokens           int  `json:"max_tokens"`
	MaxCompletionTokens int  `json:"max_completion_tokens"`
	Stream              bool `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func serveOpenAI(s *StubServer, w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		openaiError(w, http.StatusNotFound, "unknown path "+r.URL.Path)
		return
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") || strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") == "" {
		openaiError(w, http.StatusUnauthorized, "missing bearer token")
		return
	}
	var in openaiRequest
	if !readJSON(w, r, &in) {
		return
	}
	req := BrainRequest{Provider: "openai", Model: in.Model, Stream: in.Stream, MaxTokens: in.MaxCompletionTokens}
	if req.MaxTokens == 0 {
		req.MaxTokens = in.MaxTokens
	}
	var system []string
	for _, m := range in.Messages {
		text := textOf(m.Content)
		if m.Role == "system" || m.Role == "developer" {
			system = append(system, text)
			continue
		}
		req.Messages = append(req.Messages, Message{Role: m.Role, Content: text})
	}
	req.System = strings.Join(system, "\n\n")

	rep := s.ask(req)
	if isError(rep.Status) {
		if s.wait(r, rep.Delay) {
			setRetryAfter(w, rep.RetryAfter)
			openaiError(w, rep.Status, errorMessage(rep))
		}
		return
	}
	finish := "stop"
	if rep.FinishReason == FinishLength {
		finish = "length"
	}
	var usage map[string]any
	if !rep.NoUsage {
		usage = map[string]any{
			"prompt_tokens":     req.InputTokens(),
			"completion_tokens": Tokens(rep.Text),
			"total_tokens":      req.InputTokens() + Tokens(rep.Text),
		}
	}
	id, created := "chatcmpl-stub", time.Now().Unix()

	if !in.Stream {
		if !s.wait(r, rep.Delay) {
			return
		}
		out := map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": in.Model,
			"choices": []any{map[string]any{
				"index":         0,
				"message":       map[string]any{"role": "assistant", "content": rep.Text},
				"finish_reason": finish,
			}},
		}
		if usage != nil {
			out["usage"] = usage
		}
		writeJSON(w, http.StatusOK, out)
		return
	}

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": in.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		}
	}
	for i, p := range pieces(rep.Text) {
		delta := map[string]any{"content": p}
		if i == 0 {
			delta["role"] = "assistant"
		}
		sse(w, "", chunk(delta, nil))
		if i == 0 && !s.wait(r, rep.Delay) {
			return
		}
	}
	sse(w, "", chunk(map[string]any{}, finish))
	if in.StreamOptions != nil && in.StreamOptions.IncludeUsage && usage != nil {
		sse(w, "", map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": in.Model,
			"choices": []any{}, "usage": usage,
		})
	}
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
	flush(w)
}

func openaiError(w http.ResponseWriter, status int, msg string) {
	typ := "invalid_request_error"
	switch {
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": nil}})
}
