package testutil

import (
	"encoding/json"
	"net/http"
	"time"
)

// NewOllamaServer serves the Ollama chat API (POST /api/chat) as NDJSON:
// one JSON object per line, whether streamed or not. Like Ollama, it
// streams unless the request says "stream": false (langchaingo omits the
// field for non-streamed calls, so it gets a stream and assembles it).
// The final line has "done": true, done_reason "stop" or "length", and
// prompt_eval_count and eval_count. The token cap is options.num_predict.
// Errors are {"error": "..."} with the HTTP status.
func NewOllamaServer(b Brain) *StubServer { return newStub("ollama", b, serveOllama) }

type ollamaRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	Stream  *bool `json:"stream"`
	Options struct {
		NumPredict int `json:"num_predict"`
	} `json:"options"`
}

func serveOllama(s *StubServer, w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/chat" {
		ollamaError(w, http.StatusNotFound, "unknown path "+r.URL.Path)
		return
	}
	var in ollamaRequest
	if !readJSON(w, r, &in) {
		return
	}
	stream := in.Stream == nil || *in.Stream
	req := BrainRequest{Provider: "ollama", Model: in.Model, Stream: stream, MaxTokens: max(in.Options.NumPredict, 0)}
	var system string
	for _, m := range in.Messages {
		if m.Role == "system" {
			if system != "" {
				system += "\n\n"
			}
			system += m.Content
			continue
		}
		req.Messages = append(req.Messages, Message{Role: m.Role, Content: m.Content})
	}
	req.System = system

	rep := s.ask(req)
	if isError(rep.Status) {
		if s.wait(r, rep.Delay) {
			setRetryAfter(w, rep.RetryAfter)
			ollamaError(w, rep.Status, errorMessage(rep))
		}
		return
	}
	reason := "stop"
	if rep.FinishReason == FinishLength {
		reason = "length"
	}
	created := time.Now().UTC().Format(time.RFC3339Nano)
	final := func(content string) map[string]any {
		return map[string]any{
			"model": in.Model, "created_at": created,
			"message": map[string]any{"role": "assistant", "content": content},
			"done":    true, "done_reason": reason,
			"total_duration": 1000, "load_duration": 10,
			"prompt_eval_count": req.InputTokens(), "prompt_eval_duration": 100,
			"eval_count": Tokens(rep.Text), "eval_duration": 100,
		}
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w) // Encode ends each object with a newline

	if !stream {
		if !s.wait(r, rep.Delay) {
			return
		}
		w.WriteHeader(http.StatusOK)
		_ = enc.Encode(final(rep.Text))
		return
	}
	w.WriteHeader(http.StatusOK)
	for i, p := range pieces(rep.Text) {
		_ = enc.Encode(map[string]any{
			"model": in.Model, "created_at": created,
			"message": map[string]any{"role": "assistant", "content": p},
			"done":    false,
		})
		flush(w)
		if i == 0 && !s.wait(r, rep.Delay) {
			return
		}
	}
	_ = enc.Encode(final(""))
	flush(w)
}

func ollamaError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": msg})
}
