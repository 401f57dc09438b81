package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/acaptcha/acaptcha/internal/bounded"
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
	// DefaultMaxHTTPConns caps the connections open at once
	// (HTTPConfig.MaxConns): a connection holds a goroutine and its
	// buffers for as long as its client keeps it.
	DefaultMaxHTTPConns = 256
	// DefaultHTTPBodyTimeout bounds the arrival of a request's body
	// (HTTPConfig.BodyTimeout): the server's header timeout did not
	// cover it, so a client that trickled a body held its connection
	// and goroutine for as long as it liked.
	DefaultHTTPBodyTimeout = 10 * time.Second
	// DefaultHTTPWriteStall bounds one write of a response to a
	// connection (HTTPConfig.WriteStall): the server has no write
	// timeout, as a tool call's response may stream for minutes, so a
	// client that read nothing held the write, its connection and the
	// calls of its session waiting behind it with no end. A client
	// reading a few hundred bytes a second keeps every write within it.
	DefaultHTTPWriteStall = 30 * time.Second
	// DefaultMaxHTTPBodyBytes caps a request's body. A tool call's
	// arguments are small: the largest, verify_attestation's record, is
	// a few KiB.
	DefaultMaxHTTPBodyBytes = 1 << 20
	// HTTPReadHeaderTimeout, HTTPIdleTimeout and HTTPMaxHeaderBytes are
	// NewHTTPServer's header timeout, keep-alive idle timeout and header
	// size cap.
	// DefaultHTTPRequestRate and DefaultHTTPRequestBurst are one
	// network's requests per second beyond loopback (HTTPConfig; the
	// /48s of one IPv6 /32 twice that together), and
	// DefaultHTTPRemoteRate all networks' together: as the HTTP door's
	// creates and verifies (spec/http.md §5), since a request may be a
	// signature check (verify_attestation) or a read of the whole store
	// (list_attestations).
	DefaultHTTPRequestRate  = 10
	DefaultHTTPRequestBurst = 50
	DefaultHTTPRemoteRate   = 200
	// maxRateGroups bounds the table of networks' buckets (a sixteenth
	// is forgotten when full, full buckets first).
	maxRateGroups         = 1 << 12
	HTTPReadHeaderTimeout = 10 * time.Second
	HTTPIdleTimeout       = 5 * time.Minute
	HTTPMaxHeaderBytes    = 64 << 10
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
	// MaxConns caps the connections open at once (DefaultMaxHTTPConns
	// when 0) on the listener Listener wraps; a connection beyond it, or
	// beyond its network's share, is closed at once. The shares are the
	// sessions': beyond loopback an eighth per network (at least 1),
	// twice that per IPv6 /32, three quarters for all networks together;
	// loopback callers count against the total only.
	MaxConns int
	// BodyTimeout bounds the time a request's body takes to arrive from
	// the end of its header (DefaultHTTPBodyTimeout when 0); a body not
	// in by then is answered 408 and its connection closed.
	BodyTimeout time.Duration
	// MaxBodyBytes caps a request's body (DefaultMaxHTTPBodyBytes when
	// 0); a longer one is answered 413.
	MaxBodyBytes int64
	// WriteStall bounds a write on a connection Listener accepted
	// (DefaultHTTPWriteStall when 0): a write that makes no progress
	// for this long (its client reads nothing) fails, and the
	// connection is closed.
	WriteStall time.Duration
	// RequestRate and RequestBurst are the requests per second one
	// network beyond loopback may send (DefaultHTTPRequestRate,
	// DefaultHTTPRequestBurst when 0), the /48s of one IPv6 /32 twice
	// that together; all networks beyond loopback together get
	// RemoteRate per second (bursts of twice it; DefaultHTTPRemoteRate
	// when 0). A request beyond is answered 429
	// before its body is read. A request counts as one per BodyUnit of
	// its body, a JSON-RPC batch as one per message when that is more
	// (chargeBody); a batch of more messages than RequestBurst is
	// answered 400, a body of more units 413. Loopback callers are not
	// limited.
	RequestRate  float64
	RequestBurst int
	RemoteRate   float64
	// Logger receives the handler's lines and the SDK's transport's,
	// these within the bounds of the server's SDK lines (Server's
	// sdkLogger).
	Logger *slog.Logger
}

// HTTPHandler serves a Server over MCP's streamable HTTP transport, with
// its sessions bounded: the SDK's handler keeps every session it opened
// until its client deletes it, so a caller that initializes and goes
// away (or loops) grew the server by a goroutine and its state each time.
type HTTPHandler struct {
	srv *mcp.Server
	// stopCalls ends the server's tool calls in flight (Server.Close).
	stopCalls func()
	inner     http.Handler
	max       int
	log       *slog.Logger

	bodyTimeout time.Duration
	maxBody     int64
	conns       *connLimits
	rates       *rateLimits

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
// for s (mount it at /mcp). It refuses a rate that is NaN or infinite: a
// NaN passed the defaults' check (NaN <= 0 is false) and refused every
// request beyond loopback, +Inf lifted the limit.
func NewHTTPHandler(s *Server, cfg HTTPConfig) (*HTTPHandler, error) {
	for _, r := range []struct {
		name string
		v    float64
	}{{"RequestRate", cfg.RequestRate}, {"RemoteRate", cfg.RemoteRate}} {
		if math.IsNaN(r.v) || math.IsInf(r.v, 0) {
			return nil, fmt.Errorf("mcpserver: HTTPConfig.%s %v: want a finite rate (0: the default)", r.name, r.v)
		}
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxHTTPSessions
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = DefaultHTTPSessionTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxHTTPConns
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultHTTPBodyTimeout
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxHTTPBodyBytes
	}
	if cfg.WriteStall <= 0 {
		cfg.WriteStall = DefaultHTTPWriteStall
	}
	if cfg.RequestRate <= 0 {
		cfg.RequestRate = DefaultHTTPRequestRate
	}
	if cfg.RequestBurst <= 0 {
		cfg.RequestBurst = DefaultHTTPRequestBurst
	}
	if cfg.RemoteRate <= 0 {
		cfg.RemoteRate = DefaultHTTPRemoteRate
	}
	srv := s.MCP()
	perGroup := max(1, cfg.MaxSessions/8)
	h := &HTTPHandler{
		srv: srv, stopCalls: s.endCalls, max: cfg.MaxSessions, log: cfg.Logger,
		perGroup: perGroup, perBlock: 2 * perGroup, remote: max(1, cfg.MaxSessions-cfg.MaxSessions/4),
		owner: map[string]netip.Prefix{}, startingIn: map[netip.Prefix]int{},
		bodyTimeout: cfg.BodyTimeout, maxBody: cfg.MaxBodyBytes, conns: newConnLimits(cfg.MaxConns, cfg.WriteStall),
		rates: &rateLimits{rate: rate.Limit(cfg.RequestRate), burst: cfg.RequestBurst,
			remote: rate.NewLimiter(rate.Limit(cfg.RemoteRate), max(1, int(2*cfg.RemoteRate))), groups: map[netip.Prefix]*rate.Limiter{}},
		inner: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
			&mcp.StreamableHTTPOptions{Logger: s.sdkLogger(cfg.Logger), SessionTimeout: cfg.SessionTimeout, MaxRequestBodyBytes: cfg.MaxBodyBytes}),
	}
	s.setGroupOf(h.sessionGroup)
	s.setCharge(h.chargeSession)
	return h, nil
}

// sessionGroup is the network of a session opened from beyond loopback
// (ok false for a session opened from loopback, or unknown).
func (h *HTTPHandler) sessionGroup(ss *mcp.ServerSession) (netip.Prefix, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	g, ok := h.owner[ss.ID()]
	return g, ok
}

// chargeSession spends n more requests (at most a network's burst, so
// that a full bucket serves any one call) of the rate of ss's network
// when ss was opened from beyond loopback (true, spending nothing, for
// any other session); false when a bucket holds less.
func (h *HTTPHandler) chargeSession(ss *mcp.ServerSession, n int) bool {
	group, ok := h.sessionGroup(ss)
	if !ok {
		return true
	}
	return h.rates.allowN(group, min(n, h.rates.burst), time.Now())
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
	// The calls in flight end first: a session closes once its calls
	// have returned.
	h.stopCalls()
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
	group, grouped := callerGroup(r.RemoteAddr)
	if grouped && !h.rates.allow(group, time.Now()) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many requests from this network or from beyond loopback: retry after a second", http.StatusTooManyRequests)
		return
	}
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	if grouped && !h.chargeBody(w, r, body, group) {
		return
	}
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
		h.inner.ServeHTTP(w, r)
		return
	}
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

// rateLimits are the request buckets of the networks beyond loopback.
type rateLimits struct {
	rate   rate.Limit
	burst  int
	remote *rate.Limiter

	mu     sync.Mutex
	groups map[netip.Prefix]*rate.Limiter
}

// allow spends a request of group's bucket, of its IPv6 /32's
// (protocol.BlockOf: twice a network's rate and burst, as the sessions'
// and connections' shares) and of the remote one; it reports false,
// spending nothing, when any is empty. Without the /32's bucket the
// holder of one /32 spent as many networks' buckets as it had /48s, and
// so the whole remote rate: every other caller beyond loopback was
// answered 429.
func (l *rateLimits) allow(group netip.Prefix, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	gl := l.bucket(group, now, 1)
	var bl *rate.Limiter
	if blk, ok := protocol.BlockOf(group); ok {
		bl = l.bucket(blk, now, 2)
	}
	if gl.TokensAt(now) < 1 || (bl != nil && bl.TokensAt(now) < 1) || l.remote.TokensAt(now) < 1 {
		return false
	}
	gl.AllowN(now, 1)
	if bl != nil {
		bl.AllowN(now, 1)
	}
	l.remote.AllowN(now, 1)
	return true
}

// allowN is allow for n requests at once (n at most the burst of a
// network: more could never be served).
func (l *rateLimits) allowN(group netip.Prefix, n int, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	gl := l.bucket(group, now, 1)
	var bl *rate.Limiter
	if blk, ok := protocol.BlockOf(group); ok {
		bl = l.bucket(blk, now, 2)
	}
	f := float64(n)
	if gl.TokensAt(now) < f || (bl != nil && bl.TokensAt(now) < f) || l.remote.TokensAt(now) < f {
		return false
	}
	gl.AllowN(now, n)
	if bl != nil {
		bl.AllowN(now, n)
	}
	l.remote.AllowN(now, n)
	return true
}

// BodyUnit is the body size one request token pays for, from beyond
// loopback (chargeBody): the SDK decodes a request several times over,
// some 0.2 to 0.5 s of CPU per MiB of JSON here, whatever the method.
const BodyUnit = 4 << 10

// chargeBody takes the tokens of a request beyond the one ServeHTTP took
// from the buckets of a caller beyond loopback: one per BodyUnit of body,
// or one per message of a JSON-RPC batch when that is more. It reports
// false when it answered: 400 for a batch of more messages than a
// network's burst (or an array that does not parse), 413 for a body of
// more units than the burst, 429 when the buckets hold too few.
//
// The SDK takes a batch (a JSON array of messages) from a client that
// names no protocol version, or an older one than 2025-06-18, and runs
// each call of it on a goroutine of its own: counted as one request, a
// batch of a network whose burst is 50 ran some 15,000 tool calls per
// MiB of body. Priced as one request whatever its size, a MiB of body
// cost the node up to half a second of CPU for a token: one network
// within its rate kept several cores busy.
func (h *HTTPHandler) chargeBody(w http.ResponseWriter, r *http.Request, body []byte, group netip.Prefix) bool {
	// The size first: it costs nothing to read, where counting a
	// batch's messages decodes it.
	units := (len(body) + BodyUnit - 1) / BodyUnit
	if units > h.rates.burst {
		http.Error(w, "a request of "+strconv.Itoa(len(body))+" bytes: a caller beyond loopback sends at most "+
			strconv.Itoa(h.rates.burst*BodyUnit)+" in one request (each "+strconv.Itoa(BodyUnit)+" bytes count as a request against its network's rate)",
			http.StatusRequestEntityTooLarge)
		return false
	}
	msgs, ok := batchLen(w, r, body)
	if !ok {
		return false
	}
	if msgs > h.rates.burst {
		http.Error(w, "a JSON-RPC batch of "+strconv.Itoa(msgs)+" messages: a caller beyond loopback sends at most "+
			strconv.Itoa(h.rates.burst)+" in one request (each counts as a request against its network's rate)", http.StatusBadRequest)
		return false
	}
	n := max(msgs, units, 1)
	if n > 1 && !h.rates.allowN(group, n-1, time.Now()) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many requests from this network or from beyond loopback (a request counts as one per message of a batch or per "+
			strconv.Itoa(BodyUnit)+" bytes of body, here "+strconv.Itoa(n)+"): retry after a second", http.StatusTooManyRequests)
		return false
	}
	return true
}

// batchLen is the number of messages of a POST's JSON-RPC batch (0 for a
// body that is not one); it reports false when it answered 400.
//
// It reads the body as the SDK reads a batch: its decoder stops at the
// end of the array and ignores what follows, where json.Unmarshal
// refuses it (a batch with a byte after it was counted as one request
// and run whole). An array this decoder cannot read is answered here:
// the SDK refuses it too, unless its decoder reads what this one does
// not, which would run it uncounted.
func batchLen(w http.ResponseWriter, r *http.Request, body []byte) (int, bool) {
	if r.Method != http.MethodPost {
		return 0, true
	}
	t := bytes.TrimLeft(body, " \t\r\n")
	if len(t) == 0 || t[0] != '[' {
		return 0, true
	}
	var msgs []json.RawMessage
	if err := json.NewDecoder(bytes.NewReader(t)).Decode(&msgs); err != nil {
		http.Error(w, "malformed JSON-RPC batch: "+err.Error(), http.StatusBadRequest)
		return 0, false
	}
	return len(msgs), true
}

// bucket is the bucket of a network or an IPv6 /32 (one table: a /48
// and a /32 never share a key), factor times a network's rate and burst.
func (l *rateLimits) bucket(key netip.Prefix, now time.Time, factor int) *rate.Limiter {
	b, ok := l.groups[key]
	if !ok {
		bounded.MakeRoom(l.groups, maxRateGroups, func(v *rate.Limiter) bool { return v.TokensAt(now) >= float64(v.Burst()) })
		b = rate.NewLimiter(l.rate*rate.Limit(factor), factor*l.burst)
		l.groups[key] = b
	}
	return b
}

// readBody reads r's body within the body timeout and at most the body
// cap, and hands it on from memory (and returns it, for chargeBody);
// it reports false when it answered
// (408, 413, 400). The server's header timeout ends at the header: the
// SDK read the body with no deadline, so a client that sent a byte now
// and then held its connection and goroutine without end.
func (h *HTTPHandler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(h.bodyTimeout))
	// A request whose context ends (the server stopping: its
	// http.Server.BaseContext) stops waiting for its body then, rather
	// than holding the shutdown up to the body timeout.
	unwatch := context.AfterFunc(r.Context(), func() { _ = rc.SetReadDeadline(time.Now()) })
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	unwatch()
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case err == nil:
	case r.Context().Err() != nil:
		w.Header().Set("Connection", "close")
		http.Error(w, "the server is stopping", http.StatusServiceUnavailable)
		return nil, false
	case errors.As(err, &mbe):
		http.Error(w, "request body over "+strconv.FormatInt(h.maxBody, 10)+" bytes", http.StatusRequestEntityTooLarge)
		return nil, false
	case errors.As(err, &ne) && ne.Timeout():
		w.Header().Set("Connection", "close")
		http.Error(w, "request body not received within "+h.bodyTimeout.String(), http.StatusRequestTimeout)
		return nil, false
	default:
		http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
		return nil, false
	}
	// No deadline from here: a tool call's response may stream for
	// minutes (attest_peer), and the server watches the connection for
	// its client going away.
	_ = rc.SetReadDeadline(time.Time{})
	r.Body = io.NopCloser(bytes.NewReader(data))
	return data, true
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

// NewHTTPServer is the http.Server acaptcha mcp --http serves handler
// with (serve it on HTTPHandler.Listener): a header must arrive within
// HTTPReadHeaderTimeout and hold at most HTTPMaxHeaderBytes, an idle
// keep-alive connection is closed after HTTPIdleTimeout. (No read or
// write timeout on the whole request: a tool call's response may stream
// for minutes; HTTPHandler bounds the body's arrival.)
func NewHTTPServer(handler http.Handler) *http.Server {
	return &http.Server{Handler: handler, ReadHeaderTimeout: HTTPReadHeaderTimeout, IdleTimeout: HTTPIdleTimeout, MaxHeaderBytes: HTTPMaxHeaderBytes}
}

// Listener wraps l so that the connections it accepts are capped in total
// and per network (HTTPConfig.MaxConns): one beyond a cap is closed at
// once. Without it, a client opened any number of connections, each a
// goroutine of the server for as long as it kept it. A write on one of
// them that makes no progress for HTTPConfig.WriteStall fails (and the
// server closes the connection).
func (h *HTTPHandler) Listener(l net.Listener) net.Listener {
	return &limitedListener{Listener: l, lim: h.conns}
}

// connLimits counts open connections in total and, beyond loopback, per
// network (protocol.DrawPrefix), per IPv6 /32 and for all networks, with
// the sessions' shares.
type connLimits struct {
	max, perGroup, perBlock, remote int
	// stall bounds each write on a connection (HTTPConfig.WriteStall).
	stall time.Duration

	mu               sync.Mutex
	open, remoteOpen int
	group, block     map[netip.Prefix]int
}

func newConnLimits(maxConns int, stall time.Duration) *connLimits {
	perGroup := max(1, maxConns/8)
	return &connLimits{max: maxConns, perGroup: perGroup, perBlock: 2 * perGroup, remote: max(1, maxConns-maxConns/4), stall: stall,
		group: map[netip.Prefix]int{}, block: map[netip.Prefix]int{}}
}

// take counts a connection from remote (a net.Conn's RemoteAddr string);
// it reports false, counting nothing, when a cap is reached.
func (c *connLimits) take(remote string) (release func(), ok bool) {
	group, grouped := callerGroup(remote)
	blk, hasBlk := protocol.BlockOf(group)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.open >= c.max:
		return nil, false
	case grouped && (c.group[group] >= c.perGroup || hasBlk && c.block[blk] >= c.perBlock || c.remoteOpen >= c.remote):
		return nil, false
	}
	c.open++
	if grouped {
		c.remoteOpen++
		c.group[group]++
		if hasBlk {
			c.block[blk]++
		}
	}
	return sync.OnceFunc(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.open--
		if grouped {
			c.remoteOpen--
			if c.group[group]--; c.group[group] <= 0 {
				delete(c.group, group)
			}
			if hasBlk {
				if c.block[blk]--; c.block[blk] <= 0 {
					delete(c.block, blk)
				}
			}
		}
	}), true
}

type limitedListener struct {
	net.Listener
	lim *connLimits
}

func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		release, ok := l.lim.take(c.RemoteAddr().String())
		if !ok {
			_ = c.Close()
			continue
		}
		return &limitedConn{Conn: c, release: release, stall: l.lim.stall}, nil
	}
}

type limitedConn struct {
	net.Conn
	release func()
	stall   time.Duration
}

// Write writes b within the write stall from now: every write the
// server makes (a response, an event of a stream, its last flush) gets a
// deadline of its own, so a stream idle for an hour is not cut, but a
// client that stops reading is, within one stall.
func (c *limitedConn) Write(b []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.stall)); err != nil {
		return 0, fmt.Errorf("mcpserver: write deadline: %w", err)
	}
	return c.Conn.Write(b)
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
