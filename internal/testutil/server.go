package testutil

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
)

// StubServer is a loopback HTTP server speaking one provider's wire API,
// with a Brain deciding the replies.
type StubServer struct {
	// URL is the server root, "http://127.0.0.1:PORT".
	URL string
	// Provider is "openai", "anthropic", "ollama" or "googleai".
	Provider string

	srv       *httptest.Server
	brain     Brain
	closed    chan struct{}
	closeOnce sync.Once
	requests  atomic.Int64

	mu       sync.Mutex
	received []BrainRequest
}

// maxRequestBytes bounds a request body the stubs read.
const maxRequestBytes = 8 << 20

func newStub(provider string, b Brain, handle func(s *StubServer, w http.ResponseWriter, r *http.Request)) *StubServer {
	if b == nil {
		b = Text(Unknown)
	}
	s := &StubServer{Provider: provider, brain: b, closed: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		handle(s, w, r)
	}))
	s.URL = s.srv.URL
	return s
}

// BaseURL returns the base URL to configure the provider's client with:
// URL/v1 for openai and anthropic, URL for ollama and googleai.
func (s *StubServer) BaseURL() string {
	switch s.Provider {
	case "openai", "anthropic":
		return s.URL + "/v1"
	default:
		return s.URL
	}
}

// Requests returns the number of HTTP requests the server has received.
func (s *StubServer) Requests() int { return int(s.requests.Load()) }

// Received returns the well-formed requests the brain was asked about,
// oldest first.
func (s *StubServer) Received() []BrainRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]BrainRequest(nil), s.received...)
}

// LastRequest returns the last request the brain was asked about.
func (s *StubServer) LastRequest() (BrainRequest, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.received) == 0 {
		return BrainRequest{}, false
	}
	return s.received[len(s.received)-1], true
}

// Close ends pending replies and shuts the server down.
func (s *StubServer) Close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// ask records req and asks the brain, enforcing the request's token cap.
func (s *StubServer) ask(req BrainRequest) BrainReply {
	s.mu.Lock()
	s.received = append(s.received, req)
	s.mu.Unlock()
	r := s.brain.Reply(req)
	if req.MaxTokens > 0 && Tokens(r.Text) > req.MaxTokens {
		r.Text = cutWords(r.Text, req.MaxTokens)
		r.FinishReason = FinishLength
	}
	return r
}

// wait holds a reply back for d; it reports false when the request was
// cancelled or the server closed first.
func (s *StubServer) wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-s.closed:
		return false
	}
}

// setRetryAfter sets a Retry-After header of d in whole seconds (rounded
// up) when d is positive.
func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	if d > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((d+time.Second-1)/time.Second)))
	}
}

// errorMessage is the message of an error reply.
func errorMessage(rep BrainReply) string {
	if rep.ErrorMessage != "" {
		return rep.ErrorMessage
	}
	return "stub error: " + statusText(rep.Status)
}

// isError reports whether a BrainReply status asks for an error reply.
func isError(status int) bool { return status != 0 && status != http.StatusOK }

// cutWords keeps the first n words of s with their original spacing.
func cutWords(s string, n int) string {
	words, in := 0, false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if !space && !in {
			if words == n {
				return strings.TrimRightFunc(s[:i], unicode.IsSpace)
			}
			words++
		}
		in = !space
	}
	return s
}

var pieceRe = regexp.MustCompile(`\S+\s*`)

// pieces splits text into word chunks whose concatenation is text.
func pieces(text string) []string {
	rest := strings.TrimLeftFunc(text, unicode.IsSpace)
	lead := text[:len(text)-len(rest)]
	ps := pieceRe.FindAllString(rest, -1)
	if len(ps) == 0 {
		return []string{text}
	}
	ps[0] = lead + ps[0]
	return ps
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err == nil {
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": fmt.Sprintf("bad request body: %v", err)}})
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// sse writes one server-sent event and flushes it.
func sse(w http.ResponseWriter, event string, v any) {
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "data: %s\n\n", b)
	flush(w)
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// textOf reads a message content that is either a string or a list of
// {"type":"text","text":...} parts.
func textOf(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "" || p.Type == "text" {
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return ""
}

func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return t
	}
	return fmt.Sprintf("status %d", code)
}
