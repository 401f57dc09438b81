package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	lpeer "github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/lograte"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// Queue is a skill.Prover whose brain is an MCP client: every challenge a
// remote verifier sends this node is held as a pending challenge until the
// client fetches it (Next) and answers it (Answer). The node keeps the clock
// and signs as usual; the queue only carries the text both ways.
//
// At most one challenge of a prover session is pending at a time (rounds
// are sequential), and at most MaxPending in total. The queue is the MCP
// client's attention, and a verifier chooses how long its challenge holds
// a slot (its budget, up to T_total), so no one verifier and no one
// network may hold all of it: a session opened with NewSessionFor names
// its verifier and the verifier's IP prefix, and at most
// MaxPendingPerVerifier challenges of one verifier,
// MaxPendingPerPrefix of one prefix and MaxPendingPerBlock of the /48s
// of one IPv6 /32 (protocol.BlockOf) are pending at once. A challenge
// beyond any cap is declined at once. A pending challenge expires with its
// round's deadline (the context the protocol gives the answerer); an
// answer after that gets ErrExpired.
type Queue struct {
	max, maxPerVerifier, maxPerPrefix, maxPerBlock int
	now                                            func() time.Time
	log                                            *slog.Logger

	mu         sync.Mutex
	pending    map[string]*pending
	order      []string             // pending IDs, oldest first
	expired    map[string]time.Time // recently expired or withdrawn IDs -> when
	expOrd     []string
	byVerifier map[lpeer.ID]int     // pending challenges per named verifier
	byPrefix   map[netip.Prefix]int // pending challenges per verifier prefix
	byBlock    map[netip.Prefix]int // pending challenges per IPv6 /32 of the prefixes
	changed    chan struct{}        // closed and replaced whenever a challenge arrives
	closed     bool
	stats      QueueStats
	// fullSince counts the queue-full refusals since fullWarned, the
	// last time one was logged at WARN (at most once per fullWarnEvery).
	fullSince  int
	fullWarned time.Time
	// lines is the budget of the INFO lines remote verifiers cause (a
	// challenge queued, one withdrawn: infoRemote).
	lines lograte.Limiter[queueLine]
}

// queueLine keys a line of one pending challenge: lines of different
// challenges never hold each other back one by one, only the budget's
// total does.
type queueLine struct{ id, msg string }

// infoRemote writes an INFO line about pending challenge id within a
// total budget (lograte: a burst of 20, then one a second), the next one
// saying how many were held back, the rest at DEBUG. A remote verifier
// decides when its challenge is queued and when it is withdrawn (it
// resets its session), so fresh peer IDs had the queue write two INFO
// lines a session as fast as the prover's budgets let sessions in; an
// honest verifier's few challenges a minute never reach the budget.
func (q *Queue) infoRemote(id, msg string, args ...any) {
	ok, _, held := q.lines.Allow(queueLine{id, msg}, q.now())
	if !ok {
		q.log.Debug(msg, args...)
		return
	}
	if held > 0 {
		args = append(args, "suppressed", held)
	}
	q.log.Info(msg, args...)
}

// QueueConfig configures a Queue.
type QueueConfig struct {
	// MaxPending caps the challenges pending at once across all prover
	// sessions (DefaultMaxPending when 0).
	MaxPending int
	// MaxPendingPerVerifier caps the challenges one verifier (peer ID)
	// has pending at once over all its sessions
	// (DefaultMaxPendingPerVerifier when 0).
	MaxPendingPerVerifier int
	// MaxPendingPerPrefix caps the challenges the verifiers of one IP
	// prefix have pending at once together (when 0: half of MaxPending,
	// at least 1).
	MaxPendingPerPrefix int
	// MaxPendingPerBlock caps the challenges the verifiers of the /48s
	// of one IPv6 /32 have pending at once together (when 0: twice
	// MaxPendingPerPrefix, at most MaxPending-1, at least
	// MaxPendingPerPrefix). Its holder has 65,536 /48s for nothing.
	MaxPendingPerBlock int
	// Now is the clock (time.Now when nil).
	Now    func() time.Time
	Logger *slog.Logger
}

// DefaultMaxPending is the default cap on pending challenges.
const DefaultMaxPending = 4

// DefaultMaxPendingPerVerifier is the default cap on one verifier's
// pending challenges. One is all an honest verifier needs: it runs its
// rounds one after another, and a node runs one session at a time with a
// given prover (concurrent attestations of one peer join one call). A
// second session of the same verifier (the protocol lets one peer hold
// two inbound sessions) would only take a slot another verifier needs.
//
// Peer IDs cost nothing, so the verifiers of one IP prefix (an IPv4 /24,
// an IPv6 /48: protocol.DrawPrefix, the prefix of the prover's budgets)
// share a cap as well, half the queue by default: one network cannot hold
// every slot, a second verifier of the same network is still served (two
// honest agents behind one NAT or in one cloud range), and only a third
// at once is declined. The /48s of one IPv6 /32 (protocol.BlockOf) share
// twice a prefix's cap, never the whole queue (three of the default
// four): one allocation's holder has 65,536 /48s for nothing. NAT64
// addresses count as the IPv4 address they carry (protocol.GroupAddr).
const DefaultMaxPendingPerVerifier = 1

// fullWarnEvery is how often at most a queue-full refusal is logged at
// WARN (with the count since the last one); every refusal is logged at
// DEBUG and counted in QueueStats. A verifier chooses how long its
// challenges hold their slots, so refusals come as fast as verifiers
// send: a WARN line each would let them flood the operator's log.
const fullWarnEvery = time.Minute

// maxExpiredKept bounds the memory of expired IDs kept to tell a late
// answer from an unknown one.
const maxExpiredKept = 256

// Queue errors. Tool handlers return them wrapped; clients see the text.
var (
	ErrUnknownChallenge = errors.New("no such challenge: it was never issued here, or it was already answered")
	ErrExpired          = errors.New("challenge expired: its round's deadline passed (or the verifier ended the session) before the answer came")
	ErrQueueFull        = errors.New("too many challenges pending")
	ErrVerifierShare    = errors.New("this verifier has its share of the challenge queue pending")
	ErrPrefixShare      = errors.New("the verifiers of this IP prefix have their share of the challenge queue pending")
	ErrBlockShare       = errors.New("the verifiers of this IPv6 /32 have their share of the challenge queue pending")
	ErrQueueClosed      = errors.New("challenge queue closed")
	ErrBadAnswer        = errors.New("unusable answer")
)

// Pending is a challenge waiting for the MCP client's answer.
type Pending struct {
	ID        string
	Session   string // the prover session (one remote verifier's session)
	Challenge skill.Challenge
	// Received is when this node got the challenge; Deadline is Received
	// plus the round's budget: the answer must reach the verifier before
	// it. Expires is when the node stops waiting (the budget plus the
	// verifier's RTT credit and a little slack).
	Received, Deadline, Expires time.Time
	// Delivered counts how often Next handed it out.
	Delivered int
}

type pending struct {
	Pending
	from   origin
	answer chan answerMsg // buffered 1
}

// origin is the verifier of a prover session, as far as it is known: its
// peer ID ("" when the session was opened without one, by NewSession)
// and its IP prefix (invalid when unknown or exempt, such as loopback).
type origin struct {
	verifier lpeer.ID
	prefix   netip.Prefix
	block    netip.Prefix // the IPv6 /32 of prefix (invalid for IPv4 and relay groups)
}

// QueueStats counts what a queue holds and what it declined since it was
// made.
type QueueStats struct {
	Pending int `json:"pending"`
	// DeclinedFull counts challenges declined because MaxPending were
	// pending: the MCP client is not answering fast enough.
	DeclinedFull uint64 `json:"declined_full"`
	// DeclinedVerifier and DeclinedPrefix count challenges declined
	// because their verifier, or its IP prefix, had its share pending.
	DeclinedVerifier uint64 `json:"declined_verifier"`
	DeclinedPrefix   uint64 `json:"declined_prefix"`
	// DeclinedBlock counts challenges declined because the verifiers of
	// their IPv6 /32 had its share pending.
	DeclinedBlock uint64 `json:"declined_block"`
}

type answerMsg struct {
	text    string
	decline bool
}

// NewQueue returns an empty queue.
func NewQueue(cfg QueueConfig) *Queue {
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.MaxPendingPerVerifier <= 0 {
		cfg.MaxPendingPerVerifier = DefaultMaxPendingPerVerifier
	}
	if cfg.MaxPendingPerPrefix <= 0 {
		cfg.MaxPendingPerPrefix = max(cfg.MaxPending/2, 1)
	}
	if cfg.MaxPendingPerBlock <= 0 {
		cfg.MaxPendingPerBlock = max(min(2*cfg.MaxPendingPerPrefix, cfg.MaxPending-1), cfg.MaxPendingPerPrefix)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Queue{
		max: cfg.MaxPending, maxPerVerifier: cfg.MaxPendingPerVerifier, maxPerPrefix: cfg.MaxPendingPerPrefix, maxPerBlock: cfg.MaxPendingPerBlock,
		now: cfg.Now, log: cfg.Logger,
		pending: map[string]*pending{}, expired: map[string]time.Time{},
		byVerifier: map[lpeer.ID]int{}, byPrefix: map[netip.Prefix]int{}, byBlock: map[netip.Prefix]int{},
		changed: make(chan struct{}),
	}
}

// NewSession implements skill.Prover: one answerer per remote verifier's
// session. A session opened this way does not name its verifier, so only
// the per-session and the total caps apply to it; a prover runtime that
// knows the verifier calls NewSessionFor.
func (q *Queue) NewSession() skill.Answerer {
	return &queueSession{q: q, id: newID()}
}

// The prover side calls NewSessionFor (protocol.VerifierProver).
var _ protocol.VerifierProver = (*Queue)(nil)

// NewSessionFor is NewSession for a session whose verifier is known: its
// peer ID and its IP prefix, as protocol.DrawPrefix computes it (an IPv4
// /24, an IPv6 /48; the prefix the prover's session budgets count the
// verifier in). The zero Prefix means none applies (an address the
// budgets exempt, such as loopback, or none known). The session's
// challenges count against the verifier's and the prefix's shares of the
// queue, and an IPv6 /48's against its /32's (protocol.BlockOf).
func (q *Queue) NewSessionFor(verifier lpeer.ID, prefix netip.Prefix) skill.Answerer {
	from := origin{verifier: verifier}
	if prefix.IsValid() {
		from.prefix = prefix.Masked()
		if blk, ok := protocol.BlockOf(from.prefix); ok {
			from.block = blk
		}
	}
	return &queueSession{q: q, id: newID(), from: from}
}

type queueSession struct {
	q    *Queue
	id   string
	from origin

	mu   sync.Mutex
	busy bool
}

// Answer implements skill.Answerer: it queues the challenge and waits for
// the client's answer until ctx ends (the round's deadline).
func (s *queueSession) Answer(ctx context.Context, c skill.Challenge) (string, error) {
	s.mu.Lock()
	if s.busy {
		s.mu.Unlock()
		return "", fmt.Errorf("%w: session %s already has a challenge pending", skill.ErrDeclined, s.id)
	}
	s.busy = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.busy = false
		s.mu.Unlock()
	}()
	p, err := s.q.add(s.id, s.from, c, ctx)
	if err != nil {
		// Declining says so to the verifier at once instead of letting
		// the round time out.
		return "", fmt.Errorf("%w: %w", skill.ErrDeclined, err)
	}
	select {
	case m := <-p.answer:
		if m.decline {
			return "", fmt.Errorf("%w: the MCP client declined round %d", skill.ErrDeclined, c.Round)
		}
		return m.text, nil
	case <-ctx.Done():
		s.q.expire(p.ID)
		return "", ctx.Err()
	}
}

func (q *Queue) add(session string, from origin, c skill.Challenge, ctx context.Context) (*pending, error) {
	now := q.now()
	expires := now.Add(c.Budget)
	if d, ok := ctx.Deadline(); ok {
		expires = d
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, ErrQueueClosed
	}
	// The shares first: a verifier over its share is told so, even when
	// the queue is full as well (it is the one holding the slots).
	switch {
	case from.verifier != "" && q.byVerifier[from.verifier] >= q.maxPerVerifier:
		q.stats.DeclinedVerifier++
		q.log.Debug("challenge declined: verifier's share pending", "verifier", from.verifier, "pending", q.byVerifier[from.verifier], "round", c.Round)
		return nil, fmt.Errorf("%w (%d, the cap per verifier): one challenge at a time", ErrVerifierShare, q.byVerifier[from.verifier])
	case from.prefix.IsValid() && q.byPrefix[from.prefix] >= q.maxPerPrefix:
		q.stats.DeclinedPrefix++
		q.log.Debug("challenge declined: prefix's share pending", "verifier", from.verifier, "prefix", from.prefix, "pending", q.byPrefix[from.prefix], "round", c.Round)
		return nil, fmt.Errorf("%w (%d of %s, the cap per prefix)", ErrPrefixShare, q.byPrefix[from.prefix], from.prefix)
	case from.block.IsValid() && q.byBlock[from.block] >= q.maxPerBlock:
		q.stats.DeclinedBlock++
		q.log.Debug("challenge declined: block's share pending", "verifier", from.verifier, "block", from.block, "pending", q.byBlock[from.block], "round", c.Round)
		return nil, fmt.Errorf("%w (%d of %s, the cap per IPv6 /32)", ErrBlockShare, q.byBlock[from.block], from.block)
	case len(q.pending) >= q.max:
		q.stats.DeclinedFull++
		q.fullSince++
		q.log.Debug("challenge declined: queue full", "pending", len(q.pending), "max", q.max, "round", c.Round)
		if now.Sub(q.fullWarned) >= fullWarnEvery {
			// declined: since the last such line.
			q.log.Warn("challenges declined: too many pending, the MCP client is not answering fast enough",
				"declined", q.fullSince, "declined_total", q.stats.DeclinedFull, "max", q.max)
			q.fullSince, q.fullWarned = 0, now
		}
		return nil, fmt.Errorf("%w (%d, the cap): the MCP client is not answering fast enough", ErrQueueFull, len(q.pending))
	}
	p := &pending{
		Pending: Pending{
			ID: newID(), Session: session, Challenge: c,
			Received: now, Deadline: now.Add(c.Budget), Expires: expires,
		},
		from:   from,
		answer: make(chan answerMsg, 1),
	}
	q.pending[p.ID] = p
	q.order = append(q.order, p.ID)
	if from.verifier != "" {
		q.byVerifier[from.verifier]++
	}
	if from.prefix.IsValid() {
		q.byPrefix[from.prefix]++
	}
	if from.block.IsValid() {
		q.byBlock[from.block]++
	}
	close(q.changed)
	q.changed = make(chan struct{})
	q.infoRemote(p.ID, "challenge pending for the MCP client", "id", p.ID, "round", c.Round, "rounds", c.Rounds, "budget", c.Budget)
	return p, nil
}

// expire withdraws a pending challenge whose round ended unanswered.
func (q *Queue) expire(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.pending[id]; !ok {
		return
	}
	q.removeLocked(id)
	q.expired[id] = q.now()
	q.expOrd = append(q.expOrd, id)
	if len(q.expOrd) > maxExpiredKept {
		delete(q.expired, q.expOrd[0])
		q.expOrd = q.expOrd[1:]
	}
	q.infoRemote(id, "pending challenge expired unanswered", "id", id)
}

func (q *Queue) removeLocked(id string) {
	p, ok := q.pending[id]
	if !ok {
		return
	}
	if v := p.from.verifier; v != "" {
		if q.byVerifier[v]--; q.byVerifier[v] <= 0 {
			delete(q.byVerifier, v)
		}
	}
	if pfx := p.from.prefix; pfx.IsValid() {
		if q.byPrefix[pfx]--; q.byPrefix[pfx] <= 0 {
			delete(q.byPrefix, pfx)
		}
	}
	if blk := p.from.block; blk.IsValid() {
		if q.byBlock[blk]--; q.byBlock[blk] <= 0 {
			delete(q.byBlock, blk)
		}
	}
	delete(q.pending, id)
	for i, o := range q.order {
		if o == id {
			q.order = append(q.order[:i], q.order[i+1:]...)
			break
		}
	}
}

// Next returns the oldest pending challenge not yet handed out, else the
// oldest one handed out but still unanswered, waiting up to wait for one to
// arrive. It returns nil when none is pending by then.
func (q *Queue) Next(ctx context.Context, wait time.Duration) (*Pending, error) {
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return nil, ErrQueueClosed
		}
		var pick *pending
		for _, id := range q.order {
			p := q.pending[id]
			if p.Delivered == 0 {
				pick = p
				break
			}
			if pick == nil {
				pick = p
			}
		}
		if pick != nil {
			pick.Delivered++
			out := pick.Pending
			q.mu.Unlock()
			return &out, nil
		}
		changed := q.changed
		q.mu.Unlock()
		if timer == nil {
			return nil, nil
		}
		select {
		case <-changed:
		case <-timer:
			return nil, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for a challenge: %w", ctx.Err())
		}
	}
}

// Answer delivers the client's answer to a pending challenge. An answer
// that cannot be sent (empty, longer than skill.MaxAnswerBytes, not UTF-8)
// is refused with ErrBadAnswer and the challenge stays pending, so the
// client can correct it in time. decline gives the round up instead.
func (q *Queue) Answer(id, answer string, decline bool) (*Pending, error) {
	answer = strings.TrimSpace(answer)
	if !decline {
		switch {
		case answer == "":
			return nil, fmt.Errorf("%w: the answer is empty (to give the round up, decline it)", ErrBadAnswer)
		case !utf8.ValidString(answer):
			return nil, fmt.Errorf("%w: the answer is not valid UTF-8", ErrBadAnswer)
		case len(answer) > skill.MaxAnswerBytes:
			return nil, fmt.Errorf("%w: the answer has %d bytes, at most %d are sent: give the answer alone, no explanation", ErrBadAnswer, len(answer), skill.MaxAnswerBytes)
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	p, ok := q.pending[id]
	if !ok {
		if at, late := q.expired[id]; late {
			return nil, fmt.Errorf("challenge %s: %w (at %s, %s ago)", id, ErrExpired, at.Format(time.RFC3339Nano), q.now().Sub(at).Round(time.Millisecond))
		}
		return nil, fmt.Errorf("challenge %q: %w", id, ErrUnknownChallenge)
	}
	q.removeLocked(id)
	p.answer <- answerMsg{text: answer, decline: decline}
	out := p.Pending
	return &out, nil
}

// Len returns the number of pending challenges.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

// Stats returns what the queue holds and the counts of what it declined.
func (q *Queue) Stats() QueueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := q.stats
	st.Pending = len(q.pending)
	return st
}

// Close declines every pending challenge and refuses new ones.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.closed = true
	for id, p := range q.pending {
		p.answer <- answerMsg{decline: true}
		delete(q.pending, id)
	}
	q.order = nil
	clear(q.byVerifier)
	clear(q.byPrefix)
	clear(q.byBlock)
	close(q.changed)
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
