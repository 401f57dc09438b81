package httpgw

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	cryptopb "github.com/libp2p/go-libp2p/core/crypto/pb"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"

	"github.com/acaptcha/acaptcha/internal/strictjson"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/protocol/attestation"
	"github.com/acaptcha/acaptcha/skill"
)

// route is one route of the gateway; TestOpenAPIMatchesRoutes checks the
// table against openapi.json.
type route struct {
	method, path string
	handle       func(g *Gateway, w http.ResponseWriter, r *http.Request)
}

var routeTable = []route{
	{http.MethodPost, "/v1/sessions", (*Gateway).createSession},
	{http.MethodGet, "/v1/sessions/{id}", (*Gateway).getSession},
	{http.MethodPost, "/v1/sessions/{id}/start", (*Gateway).startSession},
	{http.MethodPost, "/v1/sessions/{id}/probe", (*Gateway).probeSession},
	{http.MethodPost, "/v1/sessions/{id}/answer", (*Gateway).answerSession},
	{http.MethodPost, "/v1/attestations/verify", (*Gateway).verifyAttestation},
	{http.MethodGet, "/openapi.json", (*Gateway).serveOpenAPI},
	{http.MethodGet, "/.well-known/acaptcha.json", (*Gateway).serveManifest},
}

func (g *Gateway) routes() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range routeTable {
		h, read := rt.handle, rt.method == http.MethodGet
		mux.HandleFunc(rt.method+" "+rt.path, func(w http.ResponseWriter, r *http.Request) {
			if read && !g.allowRead(w, r) {
				return
			}
			if !read {
				if err := checkJSONContentType(r.Header); err != nil {
					if g.allowRead(w, r) {
						g.writeError(w, err)
					}
					return
				}
			}
			h(g, w, r)
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if !g.allowRead(w, r) {
			return
		}
		// A known path with another method is 405 (with Allow), not 404.
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			c := r.Clone(r.Context())
			c.Method = m
			if _, pat := mux.Handler(c); pat != "/" && pat != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			g.writeError(w, errorf(errMethod, "%s %s: use %s", r.Method, r.URL.Path, strings.Join(allow, " or ")))
			return
		}
		g.writeError(w, errorf(errNotFound, "%s %s: see /openapi.json", r.Method, r.URL.Path))
	})
	return mux
}

// ---- helpers ----

// checkJSONContentType refuses a body not declared application/json
// (http.md §1), before it is read: a browser sends a text/plain or form
// body to another origin without asking it first (a CORS "simple
// request"), so a web page could otherwise make its visitors create
// sessions here; application/json needs a preflight the door does not
// answer. Parameters are allowed, a charset only if it is utf-8.
func checkJSONContentType(h http.Header) error {
	ct := h.Get("Content-Type")
	if ct == "" {
		return errorf(errMediaType, "no Content-Type: send application/json")
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return errorf(errMediaType, "Content-Type %q: %v", ct, err)
	}
	if mt != "application/json" {
		return errorf(errMediaType, "Content-Type %s: send application/json", mt)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return errorf(errMediaType, "charset %q: JSON bodies are utf-8", cs)
	}
	return nil
}

// allowRead spends one read of the client's prefix and of the door
// (spec/http.md §5); when either bucket is empty it answers rate_limited
// and reports false. Reads are GETs and requests that name no route or no
// session: cheap each, but free to send, and each keeps its connection
// alive.
func (g *Gateway) allowRead(w http.ResponseWriter, r *http.Request) bool {
	ip := clientIP(r, g.cfg.TrustedProxies)
	prefix := g.prefixOf(ip)
	if g.reads.allow(prefix, g.blockOf(ip), g.now()) {
		return true
	}
	g.writeError(w, errorf(errRateLimited, "too many reads from %s, its IPv6 block or in total; retry after a second", cmp.Or(prefix, "this client")))
	return false
}

func (g *Gateway) writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		g.log.Error("encode response", "err", err)
		status, b = http.StatusInternalServerError, []byte(`{"code":"internal","message":"cannot encode the response"}`)
	}
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write response: %w", err)
	}
	return nil
}

// writeTimed writes a response and flushes it to the connection, and
// returns the gateway's clock right after: the moment a probe or a
// challenge counts as delivered.
func (g *Gateway) writeTimed(w http.ResponseWriter, status int, v any) (time.Time, error) {
	err := g.writeJSON(w, status, v)
	if err == nil {
		if ferr := http.NewResponseController(w).Flush(); ferr != nil {
			err = fmt.Errorf("flush response: %w", ferr)
		}
	}
	return g.now(), err
}

func (g *Gateway) writeError(w http.ResponseWriter, err error) {
	g.writeErrorView(w, err, nil)
}

func (g *Gateway) writeErrorView(w http.ResponseWriter, err error, v *Session) {
	row := classify(err)
	if row.Code == CodeInternal {
		g.log.Error("http gateway error", "err", err)
	}
	_ = g.writeJSON(w, row.Status, ErrorBody{Code: row.Code, Message: err.Error(), Session: v})
}

// decode reads a JSON object of at most max bytes into v. The body must
// be valid UTF-8 with no unpaired surrogate escape and no object with a
// duplicate member (http.md §1): encoding/json would take the last
// duplicate and turn a lone surrogate into U+FFFD, where other parsers
// fail or take the first, and an answer's bytes enter the transcript
// digest.
//
// members, when not nil, is called with each member name, exactly as
// sent (encoding/json alone would match names case-insensitively), and
// refuses the body when it returns an error.
func decode(w http.ResponseWriter, r *http.Request, max int64, v any, members func(string) error) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errorf(errBodyTooLarge, "body over %d bytes", max)
		}
		// Not the socket's error: it names the door's own address
		// (http.md §6).
		return errorf(errBadRequest, "body not received whole (the connection failed or timed out)")
	}
	if err := strictjson.Check(data, members); err != nil {
		return errorf(errBadRequest, "body: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return errorf(errBadRequest, "body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errorf(errBadRequest, "body: trailing data after the JSON object")
	}
	return nil
}

// onlyMembers refuses a member name that is not one of names (http.md
// §4.6: the verify route's options narrow what it accepts, so a
// misspelt one, ignored, would widen it silently).
func onlyMembers(names ...string) func(string) error {
	return func(name string) error {
		if slices.Contains(names, name) {
			return nil
		}
		return fmt.Errorf("unknown member %q (this route takes %s; a misspelt option is refused, not ignored)", name, strings.Join(names, ", "))
	}
}

// asciiLower lowers ASCII letters only: require_source is matched ASCII
// case-insensitively (http.md §4.6), and Unicode folding would take
// "corpuſ" for corpus.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// exactNames refuses a member whose name differs from one of names only
// in case (Unicode simple folding, as encoding/json matches): the decoder
// would read it as that member, the last one winning, so {"answer":
// "x", "ANSWER": "y"} was judged "y" where http.md §1 reads "x" (names
// are exact). Other unknown members are ignored, as §1 says.
func exactNames(names ...string) func(string) error {
	return func(name string) error {
		for _, n := range names {
			if name != n && strings.EqualFold(name, n) {
				return fmt.Errorf("member %q: member names are exact, this route reads %q (spec/http.md §1)", name, n)
			}
		}
		return nil
	}
}

// sessionFor looks up the {id} session.
func (g *Gateway) sessionFor(r *http.Request) (*session, error) {
	id := r.PathValue("id")
	if id == "" || len(id) > 64 {
		return nil, errorf(errUnknownSession, "bad session id")
	}
	return g.lookup(id)
}

// stepSession is sessionFor for the POST steps of a session (start,
// probe, answer), which are not rate-limited when they advance it: a
// request naming no session is a read (allowRead), and so is one that
// leaves its session as it was (stepApplies, writeRead). It reports
// false when it answered.
func (g *Gateway) stepSession(w http.ResponseWriter, r *http.Request) (*session, bool) {
	s, err := g.sessionFor(r)
	if err != nil {
		if g.allowRead(w, r) {
			g.writeError(w, err)
		}
		return nil, false
	}
	return s, true
}

// writeRead answers err to a step request that left its session as it
// was (a state the route does not apply to, a body refused): such a
// request is a read (http.md §5), answered rate_limited once the
// client's reads are spent. Without it one session of a client's own let
// it send requests, each a body parsed and a session rendered, without
// any limit.
func (g *Gateway) writeRead(w http.ResponseWriter, r *http.Request, err error) {
	if g.allowRead(w, r) {
		g.writeError(w, err)
	}
}

// stepApplies checks, before the body is read, that route want applies
// to s's state: when it does not (an answer to a done session, given the
// session; expired_session, wrong_state) it answers, as a read, and
// reports false. The handler checks the state again once the body is in.
func (g *Gateway) stepApplies(w http.ResponseWriter, r *http.Request, s *session, want string) bool {
	s.mu.Lock()
	if want == StateAnswering && s.state == StateDone {
		v := g.view(s)
		s.mu.Unlock()
		if g.allowRead(w, r) {
			_ = g.writeJSON(w, http.StatusOK, v)
		}
		return false
	}
	err := checkState(s, want)
	s.mu.Unlock()
	if err != nil {
		g.writeRead(w, r, err)
		return false
	}
	return true
}

// checkState refuses a route in the wrong state. Called with s.mu held.
func checkState(s *session, want string) error {
	switch s.state {
	case want:
		return nil
	case StateExpired:
		return errorf(errExpiredSession, "session %s ended without a verdict: %v", s.id, s.endErr)
	default:
		return errorf(errWrongState, "session %s is %s, not %s", s.id, s.state, want)
	}
}

// errConnFailed is what a client is told of a response the door could
// not write: the socket's error names the door's own address (behind a
// NAT or a load balancer, a private one), so it goes to the log only
// (http.md §6).
const errConnFailed = "the connection failed"

// ---- sessions ----

type createRequest struct {
	// A pointer: a body without peer_id is bad_request, one with a
	// peer_id that is no peer ID bad_peer_id (http.md §6).
	PeerID *string `json:"peer_id"`
}

func (g *Gateway) createSession(w http.ResponseWriter, r *http.Request) {
	// The rate's token before the body is read, as for a verify: a
	// create refused for its body cost the door a read and a parse and
	// counted in no limit (http.md §5).
	ip := clientIP(r, g.cfg.TrustedProxies)
	prefix, block := g.prefixOf(ip), g.blockOf(ip)
	if !g.rates.allow(prefix, block, g.now()) {
		g.writeError(w, errorf(errRateLimited, "too many creates and verifies from %s, its IPv6 block or in total; retry after a second", cmp.Or(prefix, "this client")))
		return
	}
	var req createRequest
	if err := decode(w, r, MaxBodyBytes, &req, exactNames("peer_id")); err != nil {
		g.writeError(w, err)
		return
	}
	if req.PeerID == nil {
		g.writeError(w, errorf(errBadRequest, "peer_id missing"))
		return
	}
	p, err := peer.Decode(*req.PeerID)
	if err != nil {
		g.writeError(w, errorf(errBadPeerID, "peer_id %q: %v", *req.PeerID, err))
		return
	}
	if p == g.cfg.Core.Self() {
		g.writeError(w, errorf(errBadPeerID, "peer_id is this node's own"))
		return
	}
	// The session's slot before the core's Begin. The core counts the
	// session as load of the node's verifier (which raises the proof of
	// work every peer is asked) only once the client paid (DeferLoad):
	// unstarted sessions raise nobody's difficulty, and the unstarted
	// limits bound what they hold.
	if err := g.reserve(prefix, block); err != nil {
		g.writeError(w, err)
		return
	}
	// A loopback client is counted as one network in the node's draw
	// budgets as in the door's own limits (CountLoopback): behind a
	// proxy the door does not trust, every client is loopback.
	cs, err := g.cfg.Core.Begin(p, BeginOptions{Addr: ip, CountLoopback: true, MinPowDifficulty: g.cfg.PowDifficulty, DeferLoad: true})
	if err != nil {
		g.unreserve(prefix, block)
		g.writeError(w, fmt.Errorf("begin session for %s: %w", p, err))
		return
	}
	id, err := g.newSessionID()
	if err != nil {
		cs.Abort(err)
		g.unreserve(prefix, block)
		g.writeError(w, err)
		return
	}
	s := &session{id: id, peer: p, prefix: prefix, block: block, created: g.now(), core: cs, state: StateAwaitingStart, rtt: -1}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := g.insert(s); err != nil {
		cs.Abort(err)
		g.unreserve(prefix, block)
		g.writeError(w, err)
		return
	}
	cs.OnReflected(func() { go g.reflected(s) })
	g.arm(s, g.cfg.StartTTL+powAllowance(cs.PowDifficulty()), func() {
		if s.state == StateAwaitingStart {
			g.abort(s, errNotStarted)
		}
	})
	g.log.Debug("session created", "peer", p, "session", id, "prefix", prefix, "pow", cs.PowDifficulty())
	_ = g.writeJSON(w, http.StatusCreated, g.view(s))
}

// powAllowance is the extra start time for a proof of work of d bits, as
// on libp2p: 50 ms per 2^16 expected hashes above 2^16.
func powAllowance(d int) time.Duration {
	if d <= 16 {
		return 0
	}
	return time.Duration(1<<(d-16)) * 50 * time.Millisecond
}

func (g *Gateway) getSession(w http.ResponseWriter, r *http.Request) {
	s, err := g.sessionFor(r)
	if err != nil {
		g.writeError(w, err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = g.writeJSON(w, http.StatusOK, g.view(s))
}

type startRequest struct {
	PublicKey []byte `json:"public_key"`
	Signature []byte `json:"signature"`
	Pow       []byte `json:"pow"`
}

func (g *Gateway) startSession(w http.ResponseWriter, r *http.Request) {
	// The response (probe 1, or the inconclusive verdict) is written
	// within the server's write timeout from the request's header: the
	// draw waits at most what that leaves (http.md §4.2).
	drawBy := time.Now().Add(writeTimeout - drawMargin)
	s, ok := g.stepSession(w, r)
	if !ok || !g.stepApplies(w, r, s, StateAwaitingStart) {
		return
	}
	var req startRequest
	derr := decode(w, r, MaxBodyBytes, &req, exactNames("public_key", "signature", "pow"))
	s.mu.Lock()
	defer s.mu.Unlock()
	// The session's state first, then the body, as on every step route
	// (http.md §4): an expired session is expired_session whatever the
	// body. A request refused so leaves the session as it was: a read.
	if err := checkState(s, StateAwaitingStart); err != nil {
		g.writeRead(w, r, err)
		return
	}
	if derr != nil {
		g.writeRead(w, r, derr)
		return
	}
	// A missing (or null) key or signature is a malformed request, as a
	// missing field of every route (http.md §6): the session stays as it
	// was; one present but empty or undecodable aborts it (bad_key,
	// bad_signature).
	if req.PublicKey == nil || req.Signature == nil {
		g.writeRead(w, r, errorf(errBadRequest, "start: public_key and signature are required"))
		return
	}
	// Proof of key possession first: until it holds, the peer ID is only
	// a claim, so nothing is charged to it.
	if err := g.checkKey(s, req); err != nil {
		g.abort(s, err)
		g.writeError(w, err)
		return
	}
	if err := g.admitStart(s); err != nil {
		g.abort(s, err)
		g.writeError(w, err)
		return
	}
	// Cost before work: the core checks the proof of work, then draws.
	ctx, cancel := context.WithDeadline(r.Context(), drawBy)
	err := s.core.Pay(ctx, req.Pow)
	cancel()
	if err != nil {
		g.abort(s, err)
		g.writeError(w, fmt.Errorf("session %s: %w", s.id, err))
		return
	}
	if s.core.Done() { // no set could be drawn: inconclusive
		s.noSet = true
		g.finish(s)
		_ = g.writeJSON(w, http.StatusOK, g.view(s))
		return
	}
	g.sendProbe(w, s, 1)
}

// drawMargin is what a start's draw leaves of the write timeout for the
// rest of its work and its response. The node's draw may wait for its
// source some 40 s (a pool's --pool-wait up to 30 s), and a start whose
// set came after the write timeout got no response at all.
const drawMargin = 3 * time.Second

// checkKey checks the proof of key possession. Called with s.mu held.
func (g *Gateway) checkKey(s *session, req startRequest) error {
	if len(req.PublicKey) == 0 || len(req.PublicKey) > 2048 {
		return errorf(errBadKey, "public_key: want a libp2p protobuf public key (base64), got %d bytes", len(req.PublicKey))
	}
	pub, err := crypto.UnmarshalPublicKey(req.PublicKey)
	if err != nil {
		return errorf(errBadKey, "public_key: %v", err)
	}
	// UnmarshalPublicKey decoded the same message: this cannot fail.
	var pk cryptopb.PublicKey
	if err := proto.Unmarshal(req.PublicKey, &pk); err != nil {
		return errorf(errBadKey, "public_key: %v", err)
	}
	if err := attestation.CheckKeyData(pk.GetType(), pk.GetData()); err != nil {
		return errorf(errBadKey, "public_key: %v", err)
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		return errorf(errBadKey, "public_key: %v", err)
	}
	if id != s.peer {
		return errorf(errBadKey, "public_key is %s's, the session is %s's", id, s.peer)
	}
	// The key rules of attestation.md §2 (http.md §1): an ECDSA key on
	// P-256 only, an Ed25519 key not of small order, a Secp256k1 key
	// compressed (above) and its signature with a low S. A key they
	// refuse is bad_key whatever the signature (http.md §4.2: the key,
	// step 1, before the signature, step 2), so the signature's length
	// is checked after them.
	if err := attestation.CheckKeyRules(pub, req.Signature); err != nil {
		if errors.Is(err, attestation.ErrMalformed) {
			return errorf(errBadKey, "public_key: %v", err)
		}
		return errorf(errBadSignature, "signature: %v", err)
	}
	if len(req.Signature) == 0 || len(req.Signature) > 1024 {
		return errorf(errBadSignature, "signature of %d bytes", len(req.Signature))
	}
	ok, err := pub.Verify(StartMessage(s.id, s.core.Nonce(), g.cfg.Core.Self(), s.peer), req.Signature)
	if err != nil || !ok {
		return errorf(errBadSignature, "signature over the start message does not verify with public_key")
	}
	return nil
}

// sendProbe delivers probe seq. Called with s.mu held.
func (g *Gateway) sendProbe(w http.ResponseWriter, s *session, seq int) {
	nonce, err := g.randomBytes(probeNonceBytes)
	if err != nil {
		s.core.Fail(skill.ReasonInconclusive, "probe nonce: "+err.Error(), false)
		g.finish(s)
		g.writeError(w, err)
		return
	}
	s.state, s.probeSeq, s.probeNonce = StateProbing, seq, nonce
	// The response says when this step times out (http.md §4,
	// expires_at): the timer armed below runs from the flush, a moment
	// later, so this is at most that moment early.
	s.expires = g.now().Add(g.cfg.ProbeTimeout)
	status := http.StatusOK
	t0, err := g.writeTimed(w, status, g.view(s))
	s.probeSent = t0
	if err != nil {
		// The socket's error names the door's own address: it stays in
		// the log (http.md §6).
		g.log.Debug("probe not delivered", "session", s.id, "seq", seq, "err", err)
		g.abort(s, fmt.Errorf("%w: probe %d not delivered: %s", protocol.ErrNetwork, seq, errConnFailed))
		return
	}
	g.arm(s, g.cfg.ProbeTimeout, func() {
		if s.state == StateProbing {
			g.abort(s, errUnresponsive)
		}
	})
}

// The step bodies' fields are pointers so that a missing one is told
// from a zero one: a missing field is bad_request (http.md §6), a present
// one that does not match is judged (bad_probe, wrong_round).
type probeRequest struct {
	Seq   *int    `json:"seq"`
	Nonce *[]byte `json:"nonce"`
}

func (g *Gateway) probeSession(w http.ResponseWriter, r *http.Request) {
	s, ok := g.stepSession(w, r)
	if !ok || !g.stepApplies(w, r, s, StateProbing) {
		return
	}
	var req probeRequest
	derr := decode(w, r, MaxBodyBytes, &req, exactNames("seq", "nonce"))
	t1 := g.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := checkState(s, StateProbing); err != nil {
		g.writeRead(w, r, err)
		return
	}
	if derr != nil {
		g.writeRead(w, r, derr)
		return
	}
	if req.Seq == nil || req.Nonce == nil {
		g.writeRead(w, r, errorf(errBadRequest, "seq or nonce missing"))
		return
	}
	if *req.Seq != s.probeSeq || !bytes.Equal(*req.Nonce, s.probeNonce) {
		// After payment a broken exchange is a signed protocol_error,
		// as on libp2p (nothing was delivered yet).
		err := errorf(errBadProbe, "probe ack %d does not match probe %d", *req.Seq, s.probeSeq)
		s.core.Fail(skill.ReasonProtocolError, err.Error(), false)
		g.finish(s)
		g.writeErrorView(w, err, g.view(s))
		return
	}
	if rtt := max(t1.Sub(s.probeSent), 0); s.rtt < 0 || rtt < s.rtt {
		s.rtt = rtt
	}
	if s.probeSeq < g.cfg.Probes {
		g.sendProbe(w, s, s.probeSeq+1)
		return
	}
	s.core.SetRTT(s.rtt)
	g.deliver(w, s)
}

// deliver sends the current round's challenge, or the verdict when the
// session is over. Called with s.mu held.
func (g *Gateway) deliver(w http.ResponseWriter, s *session) {
	c, ok := s.core.Next()
	if !ok {
		g.finish(s)
		_ = g.writeJSON(w, http.StatusOK, g.view(s))
		return
	}
	s.state, s.ch, s.answerBy = StateAnswering, c, time.Time{}
	began := g.now()
	// The response says when the round ends (http.md §4, expires_at):
	// the answer wait the view renders plus the grace, from now; the
	// timer armed below counts from the flush, so at most that moment
	// later.
	since := time.Duration(0)
	if c.Round > 1 {
		since = began.Sub(s.start)
	}
	s.expires = began.Add(s.core.AnswerDeadline(since) + AnswerGrace)
	written, err := g.writeTimed(w, http.StatusOK, g.view(s))
	// The round's clock starts when the flush returned, but at most
	// MaxChallengeWrite after the write began (http.md §2): a client that
	// read the narrative and the question and then stopped reading (its
	// receive window closed) holds the write and the flush open, and
	// would otherwise start its own clock when it liked, up to the
	// server's write timeout later.
	t0 := written
	if limit := began.Add(MaxChallengeWrite); written.After(limit) {
		t0 = limit
	}
	s.sent, s.flushed = t0, written
	if c.Round == 1 {
		s.start = t0
	}
	if err != nil {
		// A partly written challenge counts as delivered (peek and
		// abort is a signed rejection, as on libp2p).
		g.log.Debug("challenge not delivered", "session", s.id, "round", c.Round, "err", err)
		s.core.FailRound(skill.ReasonProtocolError, "challenge not delivered: "+errConnFailed, s.waited(g.now()))
		g.finish(s)
		return
	}
	deadline := s.core.AnswerDeadline(t0.Sub(s.start))
	s.answerBy = t0.Add(deadline)
	s.totalCut = deadline < c.Budget+s.core.Credit()
	// The timer runs from now (the flush returned): what the write held
	// past MaxChallengeWrite is already spent.
	g.arm(s, deadline+AnswerGrace-written.Sub(t0), func() { g.timeout(s) })
}

type answerRequest struct {
	Round  *int    `json:"round"`
	Answer *string `json:"answer"`
}

func (g *Gateway) answerSession(w http.ResponseWriter, r *http.Request) {
	s, ok := g.stepSession(w, r)
	if !ok || !g.stepApplies(w, r, s, StateAnswering) {
		return
	}
	var req answerRequest
	derr := decode(w, r, MaxBodyBytes, &req, exactNames("round", "answer"))
	t1 := g.now() // the answer has arrived
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == StateDone {
		// Timed out (or ended) while this answer came: the verdict. The
		// answer changed nothing: a read, but one owed its verdict (the
		// client sent it in time to be read), so not refused.
		_ = g.writeJSON(w, http.StatusOK, g.view(s))
		return
	}
	if err := checkState(s, StateAnswering); err != nil {
		g.writeRead(w, r, err)
		return
	}
	if derr != nil {
		g.writeRead(w, r, derr)
		return
	}
	if req.Answer == nil || req.Round == nil {
		g.writeRead(w, r, errorf(errBadRequest, "round or answer missing"))
		return
	}
	if t1.Before(s.flushed) {
		// A request that passed the state check before this round's
		// challenge went out (another connection, opened earlier) and
		// whose body came while the client held the challenge's flush:
		// it is read no earlier than the flush returned, as an answer
		// read after a held write on libp2p (http.md §2). Its arrival
		// could precede t0: a negative elapsed time, effective 0
		// however long the client held the question.
		t1 = s.flushed
	}
	t := s.waited(t1)
	if *req.Round != s.ch.Round {
		err := errorf(errWrongRound, "answer for round %d in round %d", *req.Round, s.ch.Round)
		s.core.FailRound(skill.ReasonProtocolError, err.Error(), t)
		g.finish(s)
		g.writeErrorView(w, err, g.view(s))
		return
	}
	s.disarm()
	rec, err := s.core.Submit(*req.Answer, t)
	if err != nil {
		g.finish(s)
		g.writeError(w, fmt.Errorf("submit round %d: %w", s.ch.Round, err))
		return
	}
	g.log.Debug("round judged", "peer", s.peer, "round", rec.Round, "correct", rec.Correct,
		"elapsed", rec.Elapsed, "effective", rec.Effective, "budget", rec.Budget)
	g.deliver(w, s)
}

// ---- attestations ----

// verifyMembers are the members of a verifyRequest, the only ones the
// verify route takes.
var verifyMembers = []string{"attestation", "require_source", "any_verdict", "subject", "issuer", "allow_expired"}

type verifyRequest struct {
	Attestation []byte `json:"attestation"`
	// A pointer: absent or null means any; a string, empty included,
	// must name a source (an empty one from an unset variable would
	// widen the check without a word).
	RequireSource *string `json:"require_source,omitempty"`
	AnyVerdict    bool    `json:"any_verdict,omitempty"`
	Subject       string  `json:"subject,omitempty"`
	Issuer        string  `json:"issuer,omitempty"`
	AllowExpired  bool    `json:"allow_expired,omitempty"`
}

// verifyResponse mirrors `acaptcha attestations verify --json` and the MCP
// door's verify_attestation.
type verifyResponse struct {
	OK                 bool   `json:"ok"`
	Valid              bool   `json:"valid"`
	Accepted           bool   `json:"accepted"`
	Verdict            string `json:"verdict,omitempty"`
	Reason             string `json:"reason,omitempty"`
	SourceBelowMinimum bool   `json:"source_below_minimum"`
	Error              string `json:"error,omitempty"`
	// ErrorCode is the stable code of Error: the verification step's
	// (spec/attestation.md §6) for an invalid record, NotAccepted for a
	// valid one whose verdict is not an acceptance.
	ErrorCode string          `json:"error_code,omitempty"`
	Record    json.RawMessage `json:"record,omitempty"`
}

// NotAccepted is the verify error code of a valid record whose verdict
// is not an acceptance (without any_verdict).
const NotAccepted = "not_accepted"

func (g *Gateway) verifyAttestation(w http.ResponseWriter, r *http.Request) {
	ip := clientIP(r, g.cfg.TrustedProxies)
	prefix, block := g.prefixOf(ip), g.blockOf(ip)
	if !g.rates.allow(prefix, block, g.now()) {
		g.writeError(w, errorf(errRateLimited, "too many creates and verifies from %s, its IPv6 block or in total; retry after a second", cmp.Or(prefix, "this client")))
		return
	}
	var req verifyRequest
	if err := decode(w, r, MaxVerifyBodyBytes, &req, onlyMembers(verifyMembers...)); err != nil {
		g.writeError(w, err)
		return
	}
	opts := protocol.VerifyOptions{AllowExpired: req.AllowExpired}
	var err error
	if req.RequireSource != nil {
		// Trimmed of ASCII white space only (http.md §4.6).
		rs := asciiLower(strings.Trim(*req.RequireSource, " \t\r\n"))
		switch {
		case rs == "any":
		case skill.SourceKind(rs).Valid():
			opts.MinSource = skill.SourceKind(rs)
		default:
			g.writeError(w, errorf(errBadRequest, "require_source %q: want procedural, corpus, hybrid, llm or any (or leave it out)", *req.RequireSource))
			return
		}
	}
	if req.Subject != "" {
		if opts.Subject, err = peer.Decode(req.Subject); err != nil {
			g.writeError(w, errorf(errBadPeerID, "subject %q: %v", req.Subject, err))
			return
		}
	}
	if req.Issuer != "" {
		if opts.Issuer, err = peer.Decode(req.Issuer); err != nil {
			g.writeError(w, errorf(errBadPeerID, "issuer %q: %v", req.Issuer, err))
			return
		}
	}
	if len(req.Attestation) == 0 {
		g.writeError(w, errorf(errBadRequest, "attestation missing: give the signed envelope in standard base64"))
		return
	}
	// A record not checked before costs its signature check in rate
	// tokens, priced by its key as gossip prices it (an RSA-8192 key 64
	// ed25519 checks; at most the prefix's burst): the request's own
	// token paid one (http.md §5).
	if cost := g.verified.Cost(req.Attestation); cost > 1 && !g.rates.charge(prefix, block, cost-1, g.now()) {
		g.writeError(w, errorf(errRateLimited, "verifying a record signed with this key costs %d requests' worth of %s's rate or the door's; retry later", cost, cmp.Or(prefix, "this client")))
		return
	}
	a, _, err := g.verified.Verify(req.Attestation, opts)
	if err != nil {
		_ = g.writeJSON(w, http.StatusOK, verifyResponse{Error: err.Error(), ErrorCode: protocol.AttestationErrorCode(err),
			SourceBelowMinimum: errors.Is(err, protocol.ErrSourceBelowMinimum)})
		return
	}
	out := verifyResponse{Valid: true, Accepted: a.Accepted, Verdict: VerdictWord(a.Accepted, a.Reason), Reason: string(a.Reason)}
	if b, err := json.Marshal(a); err == nil {
		out.Record = b
	}
	out.OK = a.Accepted || req.AnyVerdict
	if !out.OK {
		out.Error = fmt.Sprintf("valid signature, but the record's verdict is %s (%s), not an acceptance", out.Verdict, a.Reason)
		out.ErrorCode = NotAccepted
	}
	_ = g.writeJSON(w, http.StatusOK, out)
}
