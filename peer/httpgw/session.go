package httpgw

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// StartTag is the domain-separation tag of the start message.
const StartTag = "acaptcha/http/start/v1"

// StartMessage is the message an agent signs with its libp2p key to start
// a session (spec/http.md §4.2): the 22 ASCII bytes of StartTag, one 0x00
// byte, then the session ID (its ASCII form), the session nonce, the
// verifier's binary peer ID and the agent's binary peer ID, each as a
// big-endian uint32 length followed by the bytes. It binds the key to this
// session of this verifier: a signature cannot be replayed elsewhere.
func StartMessage(sessionID string, nonce []byte, verifier, subject peer.ID) []byte {
	out := make([]byte, 0, len(StartTag)+1+16+len(sessionID)+len(nonce)+len(verifier)+len(subject))
	out = append(append(out, StartTag...), 0)
	for _, f := range [][]byte{[]byte(sessionID), nonce, []byte(verifier), []byte(subject)} {
		out = binary.BigEndian.AppendUint32(out, uint32(len(f)))
		out = append(out, f...)
	}
	return out
}

// Session states (spec/http.md §4).
const (
	StateAwaitingStart = "awaiting_start"
	StateProbing       = "probing"
	StateAnswering     = "answering"
	StateDone          = "done"
	StateExpired       = "expired"
)

// probeNonceBytes is the size of a probe nonce, as on libp2p.
const probeNonceBytes = 8

// session is one HTTP session over a core session. Every field below mu
// is guarded by it, and so is every call into core.
type session struct {
	id      string
	peer    peer.ID
	prefix  string
	block   string // "" for IPv4
	created time.Time
	// released is set under Gateway.mu when the session ended (release):
	// insert reads it there without taking s.mu, whose holders take
	// Gateway.mu (release, admitStart), so the two locks are never taken
	// in the other order.
	released bool
	// verdict is set with released when the session ended with a
	// verdict (done): insert forgets ended sessions without one first.
	verdict bool
	// forget is the timer that forgets the ended session after KeepDone,
	// set under Gateway.mu (release): insert stops it there when it
	// forgets the session early, without taking s.mu.
	forget *time.Timer

	mu      sync.Mutex
	core    CoreSession
	state   string
	started bool // counted in Gateway.byPeer, no longer in the unstarted counts
	expires time.Time
	timer   *time.Timer
	gen     uint64 // generation of the armed timer

	probeSeq   int
	probeNonce []byte
	probeSent  time.Time
	rtt        time.Duration // minimum probe RTT; -1 until measured

	ch       skill.Challenge // the challenge out (answering)
	sent     time.Time       // t0: when its response was flushed, at most MaxChallengeWrite after its write began
	flushed  time.Time       // when its response's flush returned (sent, or later when the client held it)
	start    time.Time       // when round 1's was
	answerBy time.Time       // the answer deadline once delivered (zero while the response is rendered)
	totalCut bool            // T_total, not the round's budget, set the deadline

	result *protocol.Result // done
	noSet  bool             // done before a set was drawn: the detail stays local
	endErr error            // expired: why
}

// arm (re)sets the session's one timer: after d, fn runs with s.mu held,
// unless the session was re-armed or disarmed in between. Called with
// s.mu held.
func (g *Gateway) arm(s *session, d time.Duration, fn func()) {
	s.gen++
	gen := s.gen
	if s.timer != nil {
		s.timer.Stop()
	}
	s.expires = g.now().Add(d)
	s.timer = time.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.gen == gen {
			fn()
		}
	})
}

// disarm stops the timer. Called with s.mu held.
func (s *session) disarm() {
	s.gen++
	if s.timer != nil {
		s.timer.Stop()
	}
}

func (g *Gateway) randomBytes(n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(g.cfg.random, b); err != nil {
		return nil, fmt.Errorf("httpgw: random: %w", err)
	}
	return b, nil
}

func (g *Gateway) newSessionID() (string, error) {
	b, err := g.randomBytes(16)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// remoteIP is a request's remote IP address (invalid when it does not
// parse).
func remoteIP(remote string) netip.Addr {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap().WithZone("")
}

// maxForwardedHops bounds the X-Forwarded-For entries clientIP reads:
// proxies chained deeper than this are not a deployment anyone runs, and
// the header (at most maxHeaderBytes) could otherwise hold thousands.
const maxForwardedHops = 16

// clientIP is the address a request counts against. It is the direct
// peer's address unless that is a trusted proxy's: then the entries of
// X-Forwarded-For (all its header lines, in order, comma-separated) are
// read from the last one back, and the first that is not a trusted
// proxy's is the client. Entries to the left of it are the client's own
// claims and are never read. When the entries run out, one does not
// parse, or maxForwardedHops have been read, the last trusted address
// read stands (such requests share its count). An entry may carry a
// port ("192.0.2.1:4711", "[2001:db8::1]:4711").
func clientIP(r *http.Request, trusted []netip.Prefix) netip.Addr {
	ip := remoteIP(r.RemoteAddr)
	if !inPrefixes(ip, trusted) {
		return ip
	}
	lines := r.Header.Values("X-Forwarded-For")
	hops := 0
	for i := len(lines) - 1; i >= 0; i-- {
		for rest := lines[i]; ; {
			cut := strings.LastIndexByte(rest, ',')
			entry := strings.TrimSpace(rest[cut+1:])
			if entry != "" {
				if hops++; hops > maxForwardedHops {
					return ip
				}
				a := remoteIP(entry)
				if !a.IsValid() {
					return ip
				}
				if !inPrefixes(a, trusted) {
					return a
				}
				ip = a
			}
			if cut < 0 {
				break
			}
			rest = rest[:cut]
		}
	}
	return ip
}

// inPrefixes reports whether a is in one of ps.
func inPrefixes(a netip.Addr, ps []netip.Prefix) bool {
	if !a.IsValid() {
		return false
	}
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// prefixOf is the IP prefix an address counts its open sessions in (""
// for an invalid address: such requests share one count).
func (g *Gateway) prefixOf(a netip.Addr) string {
	if p := g.plan.keys(a).prefix; p.IsValid() {
		return p.String()
	}
	return ""
}

// blockOf is the IPv6 block an address counts its open sessions in (""
// for IPv4 and invalid addresses: no block limit applies).
func (g *Gateway) blockOf(a netip.Addr) string {
	if b := g.plan.keys(a).block; b.IsValid() {
		return b.String()
	}
	return ""
}

// reserve counts a new, unstarted session against the total, per-prefix
// and per-block limits of open sessions and of unstarted ones.
func (g *Gateway) reserve(prefix, block string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.closed:
		return errUnavailable
	case g.draining:
		return fmt.Errorf("%w: the node is stopping: it finishes the sessions under way and starts none", errUnavailable)
	case g.open >= g.cfg.MaxSessions:
		return errorf(errTooManySessions, "%d sessions open on this node", g.open)
	case g.byPrefix[prefix] >= g.cfg.MaxSessionsPerPrefix:
		return errorf(errTooManySessions, "%d sessions open from %s", g.byPrefix[prefix], prefix)
	case block != "" && g.byBlock[block] >= g.cfg.MaxSessionsPerBlock:
		return errorf(errTooManySessions, "%d sessions open from %s", g.byBlock[block], block)
	case g.unstarted >= g.cfg.MaxUnstarted:
		return errorf(errTooManySessions, "%d sessions awaiting their start on this node", g.unstarted)
	case g.unByPfx[prefix] >= g.cfg.MaxUnstartedPerPrefix:
		return errorf(errTooManySessions, "%d sessions awaiting their start from %s", g.unByPfx[prefix], prefix)
	case block != "" && g.unByBlock[block] >= g.cfg.MaxUnstartedPerBlock:
		return errorf(errTooManySessions, "%d sessions awaiting their start from %s", g.unByBlock[block], block)
	}
	g.open++
	g.byPrefix[prefix]++
	g.unstarted++
	g.unByPfx[prefix]++
	if block != "" {
		g.byBlock[block]++
		g.unByBlock[block]++
	}
	return nil
}

// unreserveLocked uncounts an open session (and, unless started, an
// unstarted one). Called with g.mu held.
func (g *Gateway) unreserveLocked(prefix, block string, started bool) {
	g.open--
	uncount(g.byPrefix, prefix)
	if block != "" {
		uncount(g.byBlock, block)
	}
	if !started {
		g.unstartedDoneLocked(prefix, block)
	}
}

// unreserve undoes reserve.
func (g *Gateway) unreserve(prefix, block string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.unreserveLocked(prefix, block, false)
}

// unstartedDoneLocked uncounts a session that leaves awaiting_start.
// Called with g.mu held.
func (g *Gateway) unstartedDoneLocked(prefix, block string) {
	g.unstarted--
	uncount(g.unByPfx, prefix)
	if block != "" {
		uncount(g.unByBlock, block)
	}
}

// admitStart counts a session whose key was proven as started: against
// the per-peer limit, and no longer as unstarted. Called with s.mu held.
func (g *Gateway) admitStart(s *session) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.draining || g.closed {
		return fmt.Errorf("%w: the node is stopping: it finishes the sessions under way and starts none", errUnavailable)
	}
	if g.byPeer[s.peer] >= g.cfg.MaxSessionsPerPeer {
		return errorf(errTooManySessions, "%d sessions running for %s", g.byPeer[s.peer], s.peer)
	}
	g.byPeer[s.peer]++
	g.unstartedDoneLocked(s.prefix, s.block)
	s.started = true
	return nil
}

// insert publishes a new session, forgetting the ended ones without a
// verdict (expired: aborted, not started, a probe unanswered) if the
// table is full. A session with a verdict stays readable for KeepDone
// (http.md §4.5), as its client's late answer is owed it (§4.4): those
// were paid and drew a set, so the draw budgets bound them, where a
// session aborted at its start costs two requests. (Forgetting every
// ended session, a client that created sessions and aborted them made
// every verdict unreadable within seconds.) A session forgotten so has
// its forget timer stopped: the timer held it, its core session and its
// state for KeepDone, so that forgetting it saved no memory and clients
// at the door's request rate kept some 24,000 aborted sessions alive.
// The forget timer is stopped under the door's lock alone (release arms
// it and records it there): a session's timer or handler holds the
// session's lock and then takes the door's (release, admitStart), so
// insert must not take a session's lock (TestInsertLockOrder), not even
// after releasing the door's, for a handler may hold it for a while.
// Stopped, a timer whose function already waits for the session's lock
// finds the session gone from the table and does nothing.
func (g *Gateway) insert(s *session) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return errUnavailable
	}
	if len(g.sessions) >= 4*g.cfg.MaxSessions {
		for id, o := range g.sessions {
			if o.released && !o.verdict {
				delete(g.sessions, id)
				if o.forget != nil {
					o.forget.Stop()
					o.forget = nil
				}
			}
		}
	}
	g.sessions[s.id] = s
	return nil
}

// lookup finds a session by ID.
func (g *Gateway) lookup(id string) (*session, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sessions[id]
	if s == nil {
		return nil, errorf(errUnknownSession, "no session %q", id)
	}
	return s, nil
}

// release uncounts an ended session and forgets it after KeepDone. Called
// with s.mu held, once per session.
func (g *Gateway) release(s *session) {
	g.mu.Lock()
	s.released, s.verdict = true, s.state == StateDone
	g.unreserveLocked(s.prefix, s.block, s.started)
	if s.started {
		uncount(g.byPeer, s.peer)
	}
	// Armed under the door's lock and recorded there, so that insert can
	// stop it when it forgets the session early (arm takes no lock).
	g.arm(s, g.cfg.KeepDone, func() {
		g.mu.Lock()
		if g.sessions[s.id] == s {
			delete(g.sessions, s.id)
		}
		g.mu.Unlock()
	})
	s.forget = s.timer
	g.mu.Unlock()
}

// finish ends a session with its verdict: the core signs, the node is
// told. Called with s.mu held.
func (g *Gateway) finish(s *session) {
	if s.state == StateDone || s.state == StateExpired {
		return
	}
	s.disarm()
	res := s.core.Finish()
	s.result, s.state = res, StateDone
	g.release(s)
	if res == nil {
		return
	}
	// The core logged the verdict; the node stores and shares the record.
	if g.cfg.OnIssued != nil {
		g.cfg.OnIssued(res)
	}
}

// abort ends a session that never ran. Called with s.mu held.
func (g *Gateway) abort(s *session, err error) {
	if s.state == StateDone || s.state == StateExpired {
		return
	}
	s.disarm()
	s.core.Abort(err)
	s.state, s.endErr = StateExpired, err
	g.release(s)
	g.log.Debug("session aborted", "peer", s.peer, "session", s.id, "err", err)
}

// waited is the timing of the current round at t1.
func (s *session) waited(t1 time.Time) skill.Timing {
	return skill.Timing{Elapsed: t1.Sub(s.sent), RTT: s.rtt, SinceStart: t1.Sub(s.start)}
}

// timeout ends the current round unanswered: timeout, or total_timeout
// when T_total set the deadline. Called by the timer with s.mu held.
func (g *Gateway) timeout(s *session) {
	if s.state != StateAnswering {
		return
	}
	reason, detail := skill.ReasonTimeout, fmt.Sprintf("no answer to round %d within the deadline", s.ch.Round)
	if s.totalCut {
		reason, detail = skill.ReasonTotalTimeout, fmt.Sprintf("no answer to round %d before T_total %s ran out", s.ch.Round, g.cfg.Core.Policy().Total)
	}
	s.core.FailRound(reason, detail, s.waited(g.now()))
	// The linger before the session is released: a Drain that sees no
	// session running must also see the linger it owes the late answer
	// (set after the release, a Drain polling between the two returned
	// at once: TestDrainServesLateAnswer, once under CI's load).
	g.mu.Lock()
	g.lateUntil = time.Now().Add(lateAnswerLinger)
	g.mu.Unlock()
	g.finish(s)
}

// reflected ends a session whose challenge came back to this node as a
// reflection (spec/protocol.md §7): protocol_error.
func (g *Gateway) reflected(s *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != StateAnswering {
		return
	}
	s.core.FailRound(skill.ReasonProtocolError, "reflected challenge: the peer relayed this node's challenge back to it", s.waited(g.now()))
	g.finish(s)
}

// closeSession ends a session when the gateway closes: a delivered round
// ends inconclusive (nothing signed, as when the libp2p service closes
// mid-session); a session that never ran is aborted.
func (g *Gateway) closeSession(s *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case StateAwaitingStart, StateProbing:
		g.abort(s, fmt.Errorf("%w: the gateway closed", errUnavailable))
	case StateAnswering:
		s.core.FailRound(skill.ReasonInconclusive, "verifier closed", s.waited(g.now()))
		g.finish(s)
	}
	s.disarm()
}

// errUnresponsive is why a session whose probe went unanswered ends
// without a verdict: hellos and probes are answered by the runtime, not by
// the agent's brain, so silence there says nothing about what it is.
var errUnresponsive = fmt.Errorf("%w: probe not acknowledged in time", protocol.ErrUnresponsive)

// errNotStarted is why a session not started within its TTL ends.
var errNotStarted = errors.New("session not started in time")
