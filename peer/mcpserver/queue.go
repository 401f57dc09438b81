package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/acaptcha/acaptcha/skill"
)

// Queue is a skill.Prover whose brain is an MCP client: every challenge a
// remote verifier sends this node is held as a pending challenge until the
// client fetches it (Next) and answers it (Answer). The node keeps the clock
// and signs as usual; the queue only carries the text both ways.
//
// At most one challenge of a prover session is pending at a time (rounds
// are sequential), and at most MaxPending in total: a challenge beyond the
// cap is declined at once. A pending challenge expires with its round's
// deadline (the context the protocol gives the answerer); an answer after
// that gets ErrExpired.
type Queue struct {
	max int
	now func() time.Time
	log *slog.Logger

	mu      sync.Mutex
	pending map[string]*pending
	order   []string             // pending IDs, oldest first
	expired map[string]time.Time // recently expired or withdrawn IDs -> when
	expOrd  []string
	changed chan struct{} // closed and replaced whenever a challenge arrives
	closed  bool
}

// QueueConfig configures a Queue.
type QueueConfig struct {
	// MaxPending caps the challenges pending at once across all prover
	// sessions (DefaultMaxPending when 0).
	MaxPending int
	// Now is the clock (time.Now when nil).
	Now    func() time.Time
	Logger *slog.Logger
}

// DefaultMaxPending is the default cap on pending challenges.
const DefaultMaxPending = 4

// maxExpiredKept bounds the memory of expired IDs kept to tell a late
// answer from an unknown one.
const maxExpiredKept = 256

// Queue errors. Tool handlers return them wrapped; clients see the text.
var (
	ErrUnknownChallenge = errors.New("no such challenge: it was never issued here, or it was already answered")
	ErrExpired          = errors.New("challenge expired: its round's deadline passed (or the verifier ended the session) before the answer came")
	ErrQueueFull        = errors.New("too many challenges pending")
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
	answer chan answerMsg // buffered 1
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
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Queue{
		max: cfg.MaxPending, now: cfg.Now, log: cfg.Logger,
		pending: map[string]*pending{}, expired: map[string]time.Time{},
		changed: make(chan struct{}),
	}
}

// NewSession implements skill.Prover: one answerer per remote verifier's
// session.
func (q *Queue) NewSession() skill.Answerer {
	return &queueSession{q: q, id: newID()}
}

type queueSession struct {
	q  *Queue
	id string

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
	p, err := s.q.add(s.id, c, ctx)
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

func (q *Queue) add(session string, c skill.Challenge, ctx context.Context) (*pending, error) {
	now := q.now()
	expires := now.Add(c.Budget)
	if d, ok := ctx.Deadline(); ok {
		expires = d
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.closed:
		return nil, ErrQueueClosed
	case len(q.pending) >= q.max:
		q.log.Warn("challenge declined: queue full", "pending", len(q.pending), "max", q.max, "round", c.Round)
		return nil, fmt.Errorf("%w (%d, the cap): the MCP client is not answering fast enough", ErrQueueFull, len(q.pending))
	}
	p := &pending{
		Pending: Pending{
			ID: newID(), Session: session, Challenge: c,
			Received: now, Deadline: now.Add(c.Budget), Expires: expires,
		},
		answer: make(chan answerMsg, 1),
	}
	q.pending[p.ID] = p
	q.order = append(q.order, p.ID)
	close(q.changed)
	q.changed = make(chan struct{})
	q.log.Info("challenge pending for the MCP client", "id", p.ID, "round", c.Round, "rounds", c.Rounds, "budget", c.Budget)
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
	q.log.Info("pending challenge expired unanswered", "id", id)
}

func (q *Queue) removeLocked(id string) {
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
	close(q.changed)
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
