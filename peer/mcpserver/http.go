package mcpserver

import (
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults of the streamable HTTP transport (NewHTTPHandler).
const (
	// DefaultMaxHTTPSessions bounds the MCP sessions open at once over
	// HTTP. An MCP client holds one; each costs the server a goroutine
	// and its state until it is closed.
	DefaultMaxHTTPSessions = 64
	// DefaultHTTPSessionTimeout closes a session that sent no request
	// for this long (a client that went away without deleting it). A
	// client that comes back after it re-initializes, as the MCP
	// specification says for a session the server no longer knows.
	DefaultHTTPSessionTimeout = time.Hour
)

// HTTPConfig configures NewHTTPHandler.
type HTTPConfig struct {
	// MaxSessions caps the sessions open at once (DefaultMaxHTTPSessions
	// when 0); an initialize beyond it is refused with 503.
	MaxSessions int
	// SessionTimeout closes a session idle this long
	// (DefaultHTTPSessionTimeout when 0).
	SessionTimeout time.Duration
	Logger         *slog.Logger
}

// HTTPHandler serves a Server over MCP's streamable HTTP transport, with
// its sessions bounded: the SDK's handler keeps every session it opened
// until its client deletes it, so a caller that initializes and goes
// away (or loops) grew the server by a goroutine and its state each time.
type HTTPHandler struct {
	srv   *mcp.Server
	inner http.Handler
	max   int
	log   *slog.Logger

	mu       sync.Mutex
	starting int // initializing requests being served
}

// NewHTTPHandler returns the handler of the streamable HTTP transport
// for s (mount it at /mcp).
func NewHTTPHandler(s *Server, cfg HTTPConfig) *HTTPHandler {
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxHTTPSessions
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = DefaultHTTPSessionTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	srv := s.MCP()
	return &HTTPHandler{
		srv: srv, max: cfg.MaxSessions, log: cfg.Logger,
		inner: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
			&mcp.StreamableHTTPOptions{Logger: cfg.Logger, SessionTimeout: cfg.SessionTimeout}),
	}
}

// Sessions counts the sessions open.
func (h *HTTPHandler) Sessions() int {
	n := 0
	for range h.srv.Sessions() {
		n++
	}
	return n
}

// Close closes every open session and waits for each to end.
func (h *HTTPHandler) Close() {
	var open []*mcp.ServerSession
	for ss := range h.srv.Sessions() {
		open = append(open, ss)
	}
	for _, ss := range open {
		_ = ss.Close()
		_ = ss.Wait()
	}
}

// ServeHTTP implements http.Handler. A POST without a session ID opens a
// session: it is refused when the sessions open and being opened reach
// the cap.
func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
		h.inner.ServeHTTP(w, r)
		return
	}
	h.mu.Lock()
	open := h.Sessions()
	if open+h.starting >= h.max {
		h.mu.Unlock()
		h.log.Debug("MCP session refused: too many open", "open", open, "max", h.max)
		w.Header().Set("Retry-After", "60")
		http.Error(w, "too many MCP sessions open ("+strconv.Itoa(open)+", the cap): close one (DELETE) or wait for an idle one to time out", http.StatusServiceUnavailable)
		return
	}
	h.starting++
	h.mu.Unlock()
	// The session is counted by the server once the SDK answers: stop
	// counting it as starting at its response's first byte, not when
	// the handler returns (the client may have sent its next initialize
	// by then, and found its own session counted twice).
	var once sync.Once
	done := func() {
		once.Do(func() {
			h.mu.Lock()
			h.starting--
			h.mu.Unlock()
		})
	}
	defer done()
	h.inner.ServeHTTP(&startWriter{ResponseWriter: w, started: done}, r)
}

// startWriter calls started before the response's header is written.
type startWriter struct {
	http.ResponseWriter
	started func()
}

func (w *startWriter) WriteHeader(code int) {
	w.started()
	w.ResponseWriter.WriteHeader(code)
}

func (w *startWriter) Write(b []byte) (int, error) {
	w.started()
	return w.ResponseWriter.Write(b)
}

// Flush keeps server-sent events flowing (the SDK flushes each one).
func (w *startWriter) Flush() {
	w.started()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *startWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
