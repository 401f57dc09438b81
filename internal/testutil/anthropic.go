package testutil

import (
	"encoding/json"
	"net/http"
	"strings"
)

// NewAnthropicServer serves the Anthropic Messages API as langchaingo
// v0.1.14 calls it: POST /v1/messages with the x-api-key and
// anthropic-version headers. It answers JSON, or server-sent events
// (message_start ... message_stop) when the request has "stream": true.
// stop_reason is "end_turn" or "max_tokens"; usage carries input_tokens
// and output_tokens. Errors use Anthropic's {"type":"error",...} shape.
func NewAnthropicServer(b Brain) *StubServer { return newStub("anthropic", b, serveAnthropic) }

type anthropicRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	System    json.RawMessage `json:"system"`
	MaxTokens int             `json:"max_tokens"`
	Stream    bool            `json:"stream"`
}

func serveAnthropic(s *StubServer, w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/messages" {
		anthropicError(w, http.StatusNotFound, "unknown path "+r.URL.Path)
		return
	}
	if r.Header.Get("x-api-key") == "" {
		anthropicError(w, http.StatusUnauthorized, "missing x-api-key header")
		return
	}
	if r.Header.Get("anthropic-version") == "" {
		anthropicError(w, http.StatusBadRequest, "missing anthropic-version header")
		return
	}
	var in anthropicRequest
	if !readJSON(w, r, &in) {
		return
	}
	if in.MaxTokens <= 0 {
		anthropicError(w, http.StatusBadRequest, "max_tokens is required")
		return
	}
	req := BrainRequest{Provider: "anthropic", Model: in.Model, System: textOf(in.System), MaxTokens: in.MaxTokens, Stream: in.Stream}
	for _, m := range in.Messages {
		req.Messages = append(req.Messages, Message{Role: m.Role, Content: textOf(m.Content)})
	}

	rep := s.ask(req)
	if isError(rep.Status) {
		if s.wait(r, rep.Delay) {
			setRetryAfter(w, rep.RetryAfter)
			anthropicError(w, rep.Status, errorMessage(rep))
		}
		return
	}
	stop := "end_turn"
	if rep.FinishReason == FinishLength {
		stop = "max_tokens"
	}
	in0, out := req.InputTokens(), Tokens(rep.Text)
	const id = "msg_stub"

	if !in.Stream {
		if !s.wait(r, rep.Delay) {
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": in.Model,
			"content":       []any{map[string]any{"type": "text", "text": rep.Text}},
			"stop_reason":   stop,
			"stop_sequence": nil,
			"usage":         map[string]any{"input_tokens": in0, "output_tokens": out},
		})
		return
	}

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": in.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": in0, "output_tokens": 1},
	}})
	sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
		"content_block": map[string]any{"type": "text", "text": ""}})
	for i, p := range pieces(rep.Text) {
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": p}})
		if i == 0 && !s.wait(r, rep.Delay) {
			return
		}
	}
	sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	sse(w, "message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": out}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

func anthropicError(w http.ResponseWriter, status int, msg string) {
	typ := "invalid_request_error"
	switch {
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	case status == http.StatusNotFound:
		typ = "not_found_error"
	case status == 529:
		typ = "overloaded_error"
	case status >= 500:
		typ = "api_error"
	}
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": strings.TrimSpace(msg)}})
}
