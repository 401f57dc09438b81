package testutil

import (
	"encoding/json"
	"net/http"
	"strings"
)

// NewGoogleAIServer serves the Google AI (Gemini) REST method that the
// langchaingo googleai client calls through Google's generativelanguage
// client, authenticated with the x-goog-api-key header or a key query
// parameter: POST /v1beta/models/MODEL:generateContent (one JSON reply;
// langchaingo uses it for a single message) and
// POST /v1beta/models/MODEL:streamGenerateContent (a JSON array of chunks;
// langchaingo uses it for every multi-message conversation, including a
// system prompt plus one user message). The last chunk has finishReason
// "STOP" or "MAX_TOKENS"; every chunk carries usageMetadata
// (promptTokenCount, candidatesTokenCount so far, totalTokenCount), as
// Gemini sends it. Errors use Google's {"error":{"code","message","status"}}
// shape. The SSE variant (alt=sse) is not served.
func NewGoogleAIServer(b Brain) *StubServer { return newStub("googleai", b, serveGoogleAI) }

type googleContent struct {
	Role  string `json:"role"`
	Parts []struct {
		Text string `json:"text"`
	} `json:"parts"`
}

func (c *googleContent) text() string {
	if c == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range c.Parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

type googleGenConfig struct {
	MaxOutputTokens      int `json:"maxOutputTokens"`
	MaxOutputTokensSnake int `json:"max_output_tokens"`
}

type googleRequest struct {
	Model                  string           `json:"model"`
	Contents               []googleContent  `json:"contents"`
	SystemInstruction      *googleContent   `json:"systemInstruction"`
	SystemInstructionSnake *googleContent   `json:"system_instruction"`
	GenerationConfig       *googleGenConfig `json:"generationConfig"`
	GenerationConfigSnake  *googleGenConfig `json:"generation_config"`
}

func serveGoogleAI(s *StubServer, w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1beta/models/")
	if !ok {
		rest, ok = strings.CutPrefix(r.URL.Path, "/v1/models/")
	}
	model, method, _ := strings.Cut(rest, ":")
	if !ok || model == "" || (method != "generateContent" && method != "streamGenerateContent") {
		googleError(w, http.StatusNotFound, "unknown path "+r.URL.Path)
		return
	}
	if method == "streamGenerateContent" && r.URL.Query().Get("alt") == "sse" {
		googleError(w, http.StatusBadRequest, "the stub serves streamGenerateContent as a JSON array only")
		return
	}
	if r.Header.Get("x-goog-api-key") == "" && r.URL.Query().Get("key") == "" {
		googleError(w, http.StatusForbidden, "missing API key")
		return
	}
	var in googleRequest
	if !readJSON(w, r, &in) {
		return
	}
	req := BrainRequest{Provider: "googleai", Model: model, Stream: method == "streamGenerateContent"}
	sys := in.SystemInstruction
	if sys == nil {
		sys = in.SystemInstructionSnake
	}
	req.System = sys.text()
	for _, gc := range []*googleGenConfig{in.GenerationConfig, in.GenerationConfigSnake} {
		if gc != nil && req.MaxTokens == 0 {
			req.MaxTokens = max(gc.MaxOutputTokens, gc.MaxOutputTokensSnake, 0)
		}
	}
	for i := range in.Contents {
		role := in.Contents[i].Role
		switch role {
		case "model":
			role = "assistant"
		case "":
			role = "user"
		}
		req.Messages = append(req.Messages, Message{Role: role, Content: in.Contents[i].text()})
	}

	rep := s.ask(req)
	if isError(rep.Status) {
		if s.wait(r, rep.Delay) {
			setRetryAfter(w, rep.RetryAfter)
			googleError(w, rep.Status, errorMessage(rep))
		}
		return
	}
	finish := "STOP"
	if rep.FinishReason == FinishLength {
		finish = "MAX_TOKENS"
	}
	in0 := req.InputTokens()
	chunk := func(text string, outSoFar int, last bool) map[string]any {
		cand := map[string]any{
			"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": text}}},
			"index":   0,
		}
		if last {
			cand["finishReason"] = finish
		}
		return map[string]any{
			"candidates": []any{cand},
			"usageMetadata": map[string]any{
				"promptTokenCount": in0, "candidatesTokenCount": outSoFar, "totalTokenCount": in0 + outSoFar,
			},
			"modelVersion": model,
		}
	}
	if method == "generateContent" {
		if s.wait(r, rep.Delay) {
			writeJSON(w, http.StatusOK, chunk(rep.Text, Tokens(rep.Text), true))
		}
		return
	}

	// streamGenerateContent without alt=sse: one JSON array, an element
	// per chunk, each with the usage so far (as Gemini sends it).
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	ps := pieces(rep.Text)
	sofar := ""
	for i, p := range ps {
		sofar += p
		b, _ := json.Marshal(chunk(p, Tokens(sofar), i == len(ps)-1))
		sep := "[\n"
		if i > 0 {
			sep = ",\r\n"
		}
		_, _ = w.Write(append([]byte(sep), b...))
		flush(w)
		if i == 0 && !s.wait(r, rep.Delay) {
			return
		}
	}
	_, _ = w.Write([]byte("\n]\n"))
	flush(w)
}

func googleError(w http.ResponseWriter, status int, msg string) {
	st := "INVALID_ARGUMENT"
	switch {
	case status == http.StatusTooManyRequests:
		st = "RESOURCE_EXHAUSTED"
	case status == http.StatusForbidden:
		st = "PERMISSION_DENIED"
	case status == http.StatusNotFound:
		st = "NOT_FOUND"
	case status == http.StatusServiceUnavailable:
		st = "UNAVAILABLE"
	case status >= 500:
		st = "INTERNAL"
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": status, "message": msg, "status": st}})
}
