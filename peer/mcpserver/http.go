package mcpserver

import (
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acaptcha/acaptcha/protocol"
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
	// when 0); an initialize beyond it is refused with 503. Callers
	// beyond loopback (--http bound to another address) share it by
	// network: one network (protocol.DrawPrefix: an IPv4 /24, an IPv6
	// /48, NAT64 as the IPv4 address it carries) holds at most an eighth
	// of it (at least 1), the /48s of one IPv6 /32 (protocol.BlockOf)
	// twice that, and all of them together three quarters: the last
	// quarter is kept for loopback callers (the node's own agent).
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

	// perGroup, perBlock and remote are the shares of callers beyond
	// loopback (HTTPConfig.MaxSessions).
	perGroup, perBlock, remote int

	mu       sync.Mutex
	starting int // initializing requests being served
	// owner is the network of each session a caller beyond loopback
	// opened, by session ID (forgotten once the session is closed), and
	// startingIn counts those networks' initializing requests.
	owner      map[string]netip.Prefix
	startingIn map[netip.Prefix]int
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
	perGroup := max(1, cfg.MaxSessions/8)
	return &HTTPHandler{
		srv: srv, max: cfg.MaxSessions, log: cfg.Logger,
		perGroup: perGroup, perBlock: 2 * perGroup, remote: max(1, cfg.MaxSessions-cfg.MaxSessions/4),
		owner: map[string]netip.Prefix{}, startingIn: map[netip.Prefix]int{},
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
// the cap, or the share of the caller's network (HTTPConfig.MaxSessions).
func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
		h.inner.ServeHTTP(w, r)
		return
	}
	group, grouped := callerGroup(r.RemoteAddr)
	h.mu.Lock()
	open := h.Sessions()
	why := ""
	switch {
	case open+h.starting >= h.max:
		why = "too many MCP sessions open (" + strconv.Itoa(open) + ", the cap): close one (DELETE) or wait for an idle one to time out"
	case grouped:
		why = h.overShareLocked(group)
	}
	if why != "" {
		h.mu.Unlock()
		h.log.Debug("MCP session refused", "open", open, "max", h.max, "remote", r.RemoteAddr, "why", why)
		w.Header().Set("Retry-After", "60")
		http.Error(w, why, http.StatusServiceUnavailable)
		return
	}
	h.starting++
	if grouped {
		h.startingIn[group]++
	}
	h.mu.Unlock()
	// The session is counted by the server once the SDK answers: stop
	// counting it as starting at its response's first byte, not when
	// the handler returns (the client may have sent its next initialize
	// by then, and found its own session counted twice). Its ID, in the
	// response's header then, names its network from then on.
	var once sync.Once
	done := func() {
		once.Do(func() {
			h.mu.Lock()
			h.starting--
			if grouped {
				if h.startingIn[group]--; h.startingIn[group] <= 0 {
					delete(h.startingIn, group)
				}
				if id := w.Header().Get("Mcp-Session-Id"); id != "" {
					h.owner[id] = group
				}
			}
			h.mu.Unlock()
		})
	}
	defer done()
	h.inner.ServeHTTP(&startWriter{ResponseWriter: w, started: done}, r)
}

// overShareLocked reports why a caller of group may open no session now
// (empty: it may): its network's, its IPv6 /32's or all networks' share
// is held by sessions open or being opened. It forgets the owners of
// closed sessions.
func (h *HTTPHandler) overShareLocked(group netip.Prefix) string {
	openIDs := map[string]bool{}
	for ss := range h.srv.Sessions() {
		openIDs[ss.ID()] = true
	}
	blk, hasBlk := protocol.BlockOf(group)
	inGroup, inBlock, remote := 0, 0, 0
	count := func(g netip.Prefix, n int) {
		remote += n
		if g == group {
			inGroup += n
		}
		if b, ok := protocol.BlockOf(g); hasBlk && ok && b == blk {
			inBlock += n
		}
	}
	for id, g := range h.owner {
		if !openIDs[id] {
			delete(h.owner, id)
			continue
		}
		count(g, 1)
	}
	for g, n := range h.startingIn {
		count(g, n)
	}
	switch {
	case inGroup >= h.perGroup:
		return "too many MCP sessions open from this network (" + strconv.Itoa(inGroup) + ", its share): close one (DELETE) or wait for an idle one to time out"
	case hasBlk && inBlock >= h.perBlock:
		return "too many MCP sessions open from this IPv6 /32 (" + strconv.Itoa(inBlock) + ", its share): close one (DELETE) or wait for an idle one to time out"
	case remote >= h.remote:
		return "too many MCP sessions open from beyond loopback (" + strconv.Itoa(remote) + ", their share): close one (DELETE) or wait for an idle one to time out"
	}
	return ""
}

// callerGroup is the network whose share a caller at remote (an
// http.Request's RemoteAddr) takes: ok is false for loopback and an
// address that does not parse, which take none.
func callerGroup(remote string) (netip.Prefix, bool) {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Prefix{}, false
	}
	return protocol.DrawPrefix(ap.Addr(), false)
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
