// Package pool keeps a store of challenge sets ready, refilled by
// background workers from a Producer (an LLM generator, the hybrid
// rewording, any other). It lives apart from the generators so that a
// node (package peer) serves pooled sets without linking the LLM stack:
// the producers enter through cmd.
package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acaptcha/acaptcha/skill"
)

// Producer makes one validated set per call. The LLM and hybrid
// generators implement it; so can any other generator (the procedural
// one, a test stub).
type Producer interface {
	Produce(ctx context.Context) (*skill.Set, error)
}

// Accountant is implemented by producers with accounting of their own;
// Stats carries it as Generator.
type Accountant interface {
	Accounting() any
}

// Rejection is implemented by the errors of a producer that rejected
// what it produced: RejectReason names the reason (counted in
// Stats.FailureReasons); ProviderFailure tells a failure of the provider
// (an LLM error, a deadline, a rate limit, an empty reply), logged at
// once, from a rejection of the content, logged when it repeats.
type Rejection interface {
	error
	RejectReason() string
	ProviderFailure() bool
}

// BudgetSpent is implemented by the error of a producer whose token
// budget is spent: the pool pauses BudgetRetryAfter without counting a
// failure.
type BudgetSpent interface {
	error
	BudgetRetryAfter() time.Duration
}

// ProviderWait is implemented by the error of a producer whose provider
// said how long to wait before the next call (an HTTP 429 or 503 with
// Retry-After: llm.ErrRateLimited's error). The pool pauses at least that
// long, up to MaxProviderWait, whatever its own back-off: a provider that
// asks for an hour (a daily quota spent) is not called every
// MaxRetryBackoff in the meantime.
type ProviderWait interface {
	error
	RetryAfter() time.Duration
}

// MaxProviderWait bounds the pause a ProviderWait can ask of the pool.
const MaxProviderWait = 24 * time.Hour

// Store keeps the pool's ready sets. Implementations must make each
// method atomic: the node's bbolt store (peer.Store) and MemStore.
type Store interface {
	// PoolAdd stores a ready set, encoded as data, under id. It stores
	// nothing and reports false when id is ready already or was served
	// out before (and is still remembered: see PoolPrune), so a set is
	// never served again after it was used up.
	PoolAdd(id string, created time.Time, data []byte) (bool, error)
	// PoolTake takes the oldest ready set created less than maxAge before
	// now: it counts one serve and, when the set has been served maxServes
	// times, removes it and remembers its id as served. It reports false
	// when no such set is ready.
	PoolTake(now time.Time, maxAge time.Duration, maxServes int) (t Taken, ok bool, err error)
	// PoolReturn undoes one PoolTake of t that no peer saw: the serve is
	// uncounted and a set removed at maxServes is ready again under its
	// original creation time (so MaxAge still applies).
	PoolReturn(t Taken, maxServes int) error
	// PoolLen counts the ready sets created less than maxAge before now.
	PoolLen(now time.Time, maxAge time.Duration) (int, error)
	// PoolPrune removes the sets created maxAge or longer before now and
	// returns how many it removed. It also forgets the ids served out
	// ServedRetention or longer before now, and the oldest ones beyond
	// MaxServedIDs, so that what the sessions of remote peers consume is
	// not remembered for the node's life.
	PoolPrune(now time.Time, maxAge time.Duration) (int, error)
}

// Taken is a set taken from a Store: its id, creation time and
// encoding.
type Taken struct {
	ID      string
	Created time.Time
	Data    []byte
}

// Config configures a Pool.
type Config struct {
	// Size is how many sets the workers keep ready (DefaultSize).
	Size int
	// Workers is how many sets are generated at once (DefaultWorkers,
	// at most Size).
	Workers int
	// MaxServes is how often one set is served (skill.DefaultMaxServes).
	MaxServes int
	// MaxAge is how long a ready set stays servable (DefaultMaxAge).
	MaxAge time.Duration
	// Wait bounds how long Next waits for a set when the pool is empty
	// (DefaultWait).
	Wait time.Duration
	// Store keeps the sets (a new MemStore when nil).
	Store Store
	// Name names the source ("pool" when empty).
	Name string
	// Kind is the kind of set the producer makes, which the pool
	// reports as a skill.Provenancer (Pool.Kind). Empty: the producer's
	// own Kind when it is a skill.Provenancer (the LLM and hybrid
	// generators, procedural.Generator), else skill.SourceUnknown. A kind
	// with no rank is refused.
	Kind skill.SourceKind
	// RetryBackoff is the pause of a worker after a failed production
	// (DefaultRetryBackoff). It doubles with each further consecutive
	// failure of the pool (a content rejection or a failure of the
	// provider or the store, from any worker), up to MaxRetryBackoff
	// (DefaultMaxRetryBackoff), and starts again from RetryBackoff after
	// the next set is stored. A spent token budget (a BudgetSpent error) pauses
	// until the budget has room, without counting as a failure. A failure
	// whose error asks for a longer wait (a ProviderWait: the provider's
	// Retry-After) pauses that long, up to MaxProviderWait.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// WarnAfter is how many consecutive failures make the pool log a
	// WARN naming their reasons and counts (DefaultWarnAfter). It logs
	// it again each time the back-off grows and, once the back-off is at
	// MaxRetryBackoff, at most once per hour of the pool's clock.
	WarnAfter int
	// PruneInterval is how often expired sets are removed
	// (DefaultPruneInterval).
	PruneInterval time.Duration
	// Logger receives pool logs (slog.Default() when nil).
	Logger *slog.Logger
	// Now is the pool's clock (time.Now when nil).
	Now func() time.Time
}

// Defaults of Config.
const (
	DefaultSize            = 8
	DefaultWorkers         = 1
	DefaultMaxAge          = 24 * time.Hour
	DefaultWait            = 10 * time.Second
	DefaultRetryBackoff    = 2 * time.Second
	DefaultMaxRetryBackoff = 5 * time.Minute
	DefaultPruneInterval   = time.Minute
	DefaultWarnAfter       = 3
	// ServedRetention is how long a Store remembers the id of a set
	// served out (PoolAdd refuses it meanwhile). Every session a remote
	// peer opens can use a set up, so the ids are bounded in time and
	// number (MaxServedIDs): an id is a content digest (skill.ContentID),
	// and a set generated again identically after 30 days is a collision
	// of fresh LLM output, not a replay a prover can arrange.
	ServedRetention = 30 * 24 * time.Hour
	// MaxServedIDs bounds the served ids a Store remembers (about 90 MB
	// in bbolt); the oldest beyond it are forgotten first.
	MaxServedIDs = 1 << 20
	// DefaultTokenBudget is the default hourly token cap of a node's
	// challenge generation (the node's --pool-token-budget). A stub
	// generation attempt costs about 6,000 tokens and an accepted set
	// about 16,600 (14,400 in, 2,300 out, its share of the rejected
	// attempts included); 2,000,000 tokens an hour is about 120 accepted
	// sets, more than one worker makes with a real model, so the cap
	// binds only runaway generation and bounds it to 48M tokens a day.
	DefaultTokenBudget = 2_000_000
	// MaxSize caps Size.
	MaxSize = 10000
)

// Stats is the pool's accounting.
type Stats struct {
	// Ready is the number of servable sets; Generating the number being
	// produced right now.
	Ready      int `json:"ready"`
	Generating int `json:"generating"`
	// Added counts sets produced and stored; Failed counts productions
	// that yielded no set (rejections included).
	Added  int `json:"added"`
	Failed int `json:"failed"`
	// Served counts sets handed out; Returned those of them given back
	// unseen (see skill.Returner); Expired counts sets pruned unserved or
	// not fully served.
	Served   int `json:"served"`
	Returned int `json:"returned"`
	Expired  int `json:"expired"`
	// Waited counts Next calls that found the pool empty; Exhausted those
	// of them that got no set within the wait.
	Waited    int `json:"waited"`
	Exhausted int `json:"exhausted"`
	// ConsecutiveFailures counts the failed productions since the last
	// set was stored (0 after a success); FailureReasons counts them by
	// reason (the RejectReason of a Rejection, "error" for other failures);
	// Backoff is the pause after the latest of them (0 after a success).
	// A spent token budget is not counted.
	ConsecutiveFailures int            `json:"consecutive_failures"`
	FailureReasons      map[string]int `json:"failure_reasons,omitempty"`
	Backoff             time.Duration  `json:"backoff_ns"`
	// LastError is the error of the latest failure ("" after a success).
	LastError string `json:"last_error,omitempty"`
	// Generator is the producer's accounting when it has one (see
	// Accountant); the key is "generator" for the LLM generators.
	Generator any `json:"generator,omitempty"`
}

// Pool is a skill.Source that serves validated sets from a store kept
// full by background workers. Generation is bounded by the pool size:
// Next never generates, it only wakes the workers, so opening sessions
// cannot make the node spend more than refilling Size sets costs.
type Pool struct {
	cfg  Config
	prod Producer
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{} // buffered(1): a set was taken or pruned

	refreshMu sync.Mutex // serialises refresh

	mu         sync.Mutex
	ready      int
	generating int
	added      chan struct{} // closed and replaced when a set is stored
	st         Stats
	closed     bool
	// out remembers the last maxOutstanding sets taken (id and creation
	// time), so Return can put one back; outNext is the next slot.
	out     []Taken
	outNext int
	// warnedBackoff is the back-off of the last streak WARN (0: none
	// since the last success), warnedAt its time on the pool clock;
	// budgetWarnedAt is the time of the last WARN about the token budget.
	warnedBackoff time.Duration
	warnedAt      time.Time
	// heldUntil is when the provider's last asked-for wait (ProviderWait)
	// ends, on the monotonic clock the workers' timers use: no worker
	// starts a production before it.
	heldUntil      time.Time
	budgetWarnedAt time.Time
	// prepared holds the sets this pool stored, as the workers prepared
	// them (skill.Set.Prepare: validated, narratives fingerprinted), by
	// ID, at most maxPrepared: a draw takes its set from here rather
	// than checking and decoding the stored copy (strict JSON, Validate,
	// the protocol's fingerprints) on the session's path, work the worker
	// did already in the background. The store stays the record: a set
	// it holds that is not here (stored before a restart or while this
	// was full, served again under MaxServes > 1) is decoded as before.
	prepared map[string]keptSet
}

// keptSet is a prepared set and when it was created (for MaxAge).
type keptSet struct {
	set     *skill.Set
	created time.Time
}

// maxPrepared bounds Pool.prepared: LLM-written sets are tens of KiB, and
// a pool may hold up to MaxSize of them in its store.
const maxPrepared = 256

// streakReminder is how often a streak WARN is repeated once the
// back-off is at its cap.
const streakReminder = time.Hour

// maxOutstanding bounds how many served sets the pool remembers for
// Return. A verifier returns a set within one handshake (seconds), far
// fewer sessions than this run at once.
const maxOutstanding = 1024

var (
	_ skill.Source   = (*Pool)(nil)
	_ skill.Returner = (*Pool)(nil)
)

// New starts a pool over prod. Close stops its workers.
func New(cfg Config, prod Producer) (*Pool, error) {
	if prod == nil {
		return nil, errors.New("pool: no producer")
	}
	if cfg.Size == 0 {
		cfg.Size = DefaultSize
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.MaxServes == 0 {
		cfg.MaxServes = skill.DefaultMaxServes
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.Wait == 0 {
		cfg.Wait = DefaultWait
	}
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = DefaultRetryBackoff
	}
	if cfg.MaxRetryBackoff == 0 {
		cfg.MaxRetryBackoff = max(DefaultMaxRetryBackoff, cfg.RetryBackoff)
	}
	if cfg.PruneInterval == 0 {
		cfg.PruneInterval = DefaultPruneInterval
	}
	if cfg.WarnAfter == 0 {
		cfg.WarnAfter = DefaultWarnAfter
	}
	switch {
	case cfg.Size < 1 || cfg.Size > MaxSize:
		return nil, fmt.Errorf("pool: size %d, want 1..%d", cfg.Size, MaxSize)
	case cfg.Workers < 1:
		return nil, fmt.Errorf("pool: %d workers, want at least 1", cfg.Workers)
	case cfg.MaxServes < 1:
		return nil, fmt.Errorf("pool: max serves %d, want at least 1", cfg.MaxServes)
	case cfg.MaxAge < 0 || cfg.Wait < 0 || cfg.RetryBackoff < 0 || cfg.MaxRetryBackoff < 0 || cfg.PruneInterval < 0:
		return nil, errors.New("pool: negative duration")
	case cfg.WarnAfter < 1:
		return nil, fmt.Errorf("pool: warn after %d failures, want at least 1", cfg.WarnAfter)
	}
	cfg.Workers = min(cfg.Workers, cfg.Size)
	if cfg.Kind == skill.SourceUnknown {
		if k, ok := prod.(skill.Provenancer); ok {
			cfg.Kind = k.Kind()
		}
	}
	if cfg.Kind != skill.SourceUnknown && !cfg.Kind.Valid() {
		return nil, fmt.Errorf("pool: kind %q: want one of %v, or empty", cfg.Kind, skill.SourceKinds)
	}
	if cfg.Store == nil {
		cfg.Store = NewMemStore()
	}
	if cfg.Name == "" {
		cfg.Name = "pool"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &Pool{cfg: cfg, prod: prod, log: cfg.Logger, wake: make(chan struct{}, 1), added: make(chan struct{}),
		out: make([]Taken, maxOutstanding), prepared: map[string]keptSet{}}
	if p.log == nil {
		p.log = slog.Default()
	}
	if n, err := cfg.Store.PoolPrune(cfg.Now(), cfg.MaxAge); err != nil {
		return nil, fmt.Errorf("pool: prune store: %w", err)
	} else if n > 0 {
		p.st.Expired += n
		p.log.Info("challenge pool: dropped expired sets", "n", n)
	}
	n, err := cfg.Store.PoolLen(cfg.Now(), cfg.MaxAge)
	if err != nil {
		return nil, fmt.Errorf("pool: count store: %w", err)
	}
	p.ready = n
	p.ctx, p.cancel = context.WithCancel(context.Background())
	for range cfg.Workers {
		p.wg.Add(1)
		go p.worker()
	}
	p.wg.Add(1)
	go p.janitor()
	return p, nil
}

// Name implements skill.Source.
func (p *Pool) Name() string { return p.cfg.Name }

// Kind implements skill.Provenancer: the kind of set the producer makes
// (Config.Kind), so that a node serving the pool without naming its kind
// (peer.Config.SourceKind) still warns about a weak source, applies its
// source policy to first contact and tells a pool writing its first sets
// from one used up. It is skill.SourceUnknown when neither Config.Kind
// nor the producer says.
//
// It is the kind the pool writes, not a promise about every set it
// serves: a persistent Store may still hold sets an earlier producer of
// another kind left there, and the pool serves the oldest first (within
// MaxAge). Each set carries its own provenance, which is what the
// attestations of its sessions name, so no record overstates its
// challenges; only the node's own start-up warning and source checks go
// by this kind until those sets are used up.
func (p *Pool) Kind() skill.SourceKind { return p.cfg.Kind }

// Close stops the workers, abandoning productions under way, and waits
// for them; every call waits, the first one also stops them (a caller
// that closes after another must not go on while a worker still runs and
// logs). Sets already stored stay in the store.
func (p *Pool) Close() error {
	p.mu.Lock()
	first := !p.closed
	p.closed = true
	p.mu.Unlock()
	if first {
		p.cancel()
	}
	p.wg.Wait()
	return nil
}

// Stats returns the pool's accounting.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	s := p.st
	s.Ready, s.Generating = p.ready, p.generating
	s.FailureReasons = maps.Clone(s.FailureReasons)
	p.mu.Unlock()
	if g, ok := p.prod.(Accountant); ok {
		s.Generator = g.Accounting()
	}
	return s
}

// Ready returns the number of servable sets.
func (p *Pool) Ready() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready
}

// ConsecutiveFailures returns the number of failed productions since
// the last set was stored (the node's acaptcha_pool_consecutive_failures
// gauge).
func (p *Pool) ConsecutiveFailures() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st.ConsecutiveFailures
}

// failureNote says why the pool is empty when its productions keep
// failing (the caller's "no challenge set ready" alone reads as a pool
// drained by demand, not one whose LLM writes nothing usable); "" when
// the latest production succeeded. It names the failures' reasons only:
// the error reaches remote peers (the HTTP door's result detail), and
// the last error's text (a provider's message, an address, a fragment of
// a rejected set) is for the log.
func (p *Pool) failureNote() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.st.ConsecutiveFailures == 0 {
		return ""
	}
	return fmt.Sprintf(" (generation failed %d time(s) in a row: %s; the log has the last error)", p.st.ConsecutiveFailures, formatReasons(p.st.FailureReasons))
}

// Added returns a channel closed when the next set is stored (tests and
// monitoring wait on it instead of polling).
func (p *Pool) Added() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.added
}

// Next implements skill.Source: it takes a ready set atomically. When the
// pool is empty it waits up to Config.Wait (or until ctx ends) for a
// worker to store one, then fails with an error wrapping
// skill.ErrExhausted, so the session ends inconclusive.
func (p *Pool) Next(ctx context.Context) (*skill.Set, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for waited := false; ; {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, fmt.Errorf("%s: pool closed: %w", p.cfg.Name, skill.ErrExhausted)
		}
		added := p.added
		p.mu.Unlock()
		set, ok, err := p.take()
		if err != nil {
			return nil, err
		}
		if ok {
			return set, nil
		}
		p.kick()
		if !waited {
			waited = true
			p.count(func(s *Stats) { s.Waited++ })
			timer = time.NewTimer(p.cfg.Wait)
		}
		select {
		case <-added:
		case <-timer.C:
			p.count(func(s *Stats) { s.Exhausted++ })
			return nil, fmt.Errorf("%s: no challenge set ready within %s%s: %w", p.cfg.Name, p.cfg.Wait, p.failureNote(), skill.ErrExhausted)
		case <-ctx.Done():
			p.count(func(s *Stats) { s.Exhausted++ })
			return nil, fmt.Errorf("%s: no challenge set ready%s: %w (%w)", p.cfg.Name, p.failureNote(), skill.ErrExhausted, ctx.Err())
		}
	}
}

// take takes and decodes one set; a stored set that no longer decodes is
// logged and skipped (it has been removed or counted already).
func (p *Pool) take() (*skill.Set, bool, error) {
	for {
		t, ok, err := p.cfg.Store.PoolTake(p.cfg.Now(), p.cfg.MaxAge, p.cfg.MaxServes)
		if err != nil {
			return nil, false, fmt.Errorf("%s: take from store: %w", p.cfg.Name, err)
		}
		p.refresh()
		if !ok {
			return nil, false, nil
		}
		p.kick()
		p.mu.Lock()
		set := p.prepared[t.ID].set
		delete(p.prepared, t.ID)
		p.mu.Unlock()
		if set == nil || set.ID != t.ID || !set.MarkedValid() {
			set, err = skill.DecodeSet(t.Data)
			if err != nil || set.ID != t.ID {
				p.log.Error("challenge pool: stored set does not decode, skipped", "set", t.ID, "err", err)
				continue
			}
		}
		p.mu.Lock()
		p.st.Served++
		p.out[p.outNext] = Taken{ID: t.ID, Created: t.Created}
		p.outNext = (p.outNext + 1) % len(p.out)
		p.mu.Unlock()
		return set, true, nil
	}
}

// Return implements skill.Returner: a set Next handed out that no peer saw
// is made servable again, so the generation it cost is not lost. Only one
// of the last maxOutstanding sets taken can be given back; an older one
// (or one this pool did not serve) is refused with an error.
func (p *Pool) Return(set *skill.Set) error {
	if set == nil {
		return nil
	}
	p.mu.Lock()
	var t Taken
	for i := range p.out {
		if p.out[i].ID == set.ID && set.ID != "" {
			t, p.out[i] = p.out[i], Taken{}
			break
		}
	}
	p.mu.Unlock()
	if t.ID == "" {
		return fmt.Errorf("%s: return %s: not among the last %d sets served", p.cfg.Name, set.ID, maxOutstanding)
	}
	data, err := json.Marshal(set)
	if err != nil {
		return fmt.Errorf("%s: return %s: encode: %w", p.cfg.Name, set.ID, err)
	}
	t.Data = data
	if err := p.cfg.Store.PoolReturn(t, p.cfg.MaxServes); err != nil {
		return fmt.Errorf("%s: return %s: %w", p.cfg.Name, set.ID, err)
	}
	p.refresh()
	p.mu.Lock()
	p.keepLocked(set, t.Created)
	p.st.Returned++
	close(p.added) // a waiting session may take it
	p.added = make(chan struct{})
	p.mu.Unlock()
	return nil
}

// keepLocked keeps set, prepared, for the draw that takes it (see
// Pool.prepared), unless maxPrepared sets are kept: the store serves the
// oldest first, and those are kept already.
func (p *Pool) keepLocked(set *skill.Set, created time.Time) {
	if set.MarkedValid() && len(p.prepared) < maxPrepared {
		p.prepared[set.ID] = keptSet{set, created}
	}
}

func (p *Pool) count(f func(*Stats)) {
	p.mu.Lock()
	f(&p.st)
	p.mu.Unlock()
}

// refresh re-reads the number of ready sets from the store. Reads and
// writes of the count are serialised, so the last write always reflects
// the newest store state.
func (p *Pool) refresh() {
	p.refreshMu.Lock()
	defer p.refreshMu.Unlock()
	n, err := p.cfg.Store.PoolLen(p.cfg.Now(), p.cfg.MaxAge)
	if err != nil {
		p.log.Warn("challenge pool: count store", "err", err)
		return
	}
	p.mu.Lock()
	p.ready = n
	p.mu.Unlock()
}

// kick wakes a waiting worker.
func (p *Pool) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// claim reserves a production slot when the pool plus the productions
// under way are below Size.
func (p *Pool) claim() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ready+p.generating >= p.cfg.Size {
		return false
	}
	p.generating++
	return true
}

// room reports whether another production slot is free.
func (p *Pool) room() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready+p.generating < p.cfg.Size
}

func (p *Pool) worker() {
	defer p.wg.Done()
	for {
		if d := p.held(); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-p.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		if !p.claim() {
			select {
			case <-p.ctx.Done():
				return
			case <-p.wake:
			}
			continue
		}
		if p.room() {
			// Another waiting worker can start too.
			p.kick()
		}
		set, err := p.prod.Produce(p.ctx)
		if err == nil {
			err = p.store(set)
		}
		p.mu.Lock()
		p.generating--
		p.mu.Unlock()
		if p.ctx.Err() != nil {
			return
		}
		if err == nil {
			p.succeeded()
			continue
		}
		t := time.NewTimer(p.failed(err))
		select {
		case <-p.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// held is how long the provider's asked-for wait still holds every
// worker (0 when none).
func (p *Pool) held() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Until(p.heldUntil)
}

// succeeded ends a streak of failures: the back-off starts again from
// RetryBackoff.
func (p *Pool) succeeded() {
	p.mu.Lock()
	n, warned := p.st.ConsecutiveFailures, p.warnedBackoff > 0
	p.st.ConsecutiveFailures, p.st.FailureReasons, p.st.Backoff, p.st.LastError = 0, nil, 0, ""
	p.warnedBackoff = 0
	p.mu.Unlock()
	if warned {
		p.log.Info("challenge pool: a generated set passed validation again", "after_failures", n)
	}
}

// failed accounts a failed production, logs it and returns the pause
// before the worker's next attempt. Consecutive failures double the
// pause up to MaxRetryBackoff; from WarnAfter consecutive failures on, a
// WARN names their reasons, once per back-off step (hourly at the cap).
func (p *Pool) failed(err error) time.Duration {
	var be BudgetSpent
	if errors.As(err, &be) {
		wait := max(be.BudgetRetryAfter(), p.cfg.RetryBackoff)
		now := p.cfg.Now()
		p.mu.Lock()
		p.st.Failed++
		loud := p.budgetWarnedAt.IsZero() || now.Sub(p.budgetWarnedAt) >= streakReminder
		if loud {
			p.budgetWarnedAt = now
		}
		p.mu.Unlock()
		level := slog.LevelDebug
		if loud {
			level = slog.LevelWarn
		}
		p.log.Log(context.Background(), level, "challenge pool: generation token budget spent; sessions end inconclusive while the pool is empty",
			"pause", wait, "ready", p.Ready())
		return wait
	}
	key := "error"
	var re Rejection
	if errors.As(err, &re) {
		key = re.RejectReason()
	}
	now := p.cfg.Now()
	p.mu.Lock()
	p.st.Failed++
	p.st.ConsecutiveFailures++
	n := p.st.ConsecutiveFailures
	if p.st.FailureReasons == nil {
		p.st.FailureReasons = map[string]int{}
	}
	p.st.FailureReasons[key]++
	p.st.LastError = err.Error()
	wait := p.cfg.RetryBackoff
	for i := 1; i < n && wait < p.cfg.MaxRetryBackoff; i++ {
		wait *= 2
	}
	wait = min(wait, p.cfg.MaxRetryBackoff)
	var pw ProviderWait
	if errors.As(err, &pw) && pw.RetryAfter() > 0 {
		ra := min(pw.RetryAfter(), MaxProviderWait)
		wait = max(wait, ra)
		if until := time.Now().Add(ra); until.After(p.heldUntil) {
			p.heldUntil = until
		}
	}
	p.st.Backoff = wait
	warn := n >= p.cfg.WarnAfter &&
		(wait > p.warnedBackoff || now.Sub(p.warnedAt) >= streakReminder)
	var reasons string
	if warn {
		p.warnedBackoff, p.warnedAt = wait, now
		reasons = formatReasons(p.st.FailureReasons)
	}
	ready := p.ready
	p.mu.Unlock()
	switch {
	case warn:
		p.log.Warn("challenge pool: generated sets keep failing; sessions end inconclusive while the pool is empty",
			"consecutive_failures", n, "reasons", reasons, "pause", wait, "ready", ready, "last_err", err)
	case n < p.cfg.WarnAfter && !contentRejection(err):
		// A failure of the provider or the store is news at once; a
		// content rejection only when it repeats.
		p.log.Warn("challenge pool: production failed", "err", err, "pause", wait)
	default:
		p.log.Debug("challenge pool: production failed", "err", err, "consecutive_failures", n, "pause", wait)
	}
	return wait
}

// formatReasons renders reason counts as "cross_check=2, leakage=1",
// most frequent first.
func formatReasons(m map[string]int) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// contentRejection reports whether err rejects a set for its content
// rather than for a failure of the provider.
func contentRejection(err error) bool {
	var re Rejection
	return errors.As(err, &re) && !re.ProviderFailure()
}

// store adds a produced set to the store and wakes the waiting sessions.
func (p *Pool) store(set *skill.Set) error {
	if set == nil {
		return errors.New("producer returned no set")
	}
	if set.ID == "" {
		set.ID = set.ContentID()
	}
	if err := set.Prepare(); err != nil {
		return fmt.Errorf("produced set: %w", err)
	}
	data, err := json.Marshal(set)
	if err != nil {
		return fmt.Errorf("encode set: %w", err)
	}
	created := p.cfg.Now()
	ok, err := p.cfg.Store.PoolAdd(set.ID, created, data)
	if err != nil {
		return fmt.Errorf("store set: %w", err)
	}
	if !ok {
		return fmt.Errorf("set %s is ready or was served already", set.ID)
	}
	p.refresh()
	p.mu.Lock()
	p.keepLocked(set, created)
	p.st.Added++
	close(p.added)
	p.added = make(chan struct{})
	p.mu.Unlock()
	p.log.Debug("challenge pool: set ready", "set", set.ID, "domain", set.Domain, "ready", p.Ready())
	return nil
}

func (p *Pool) janitor() {
	defer p.wg.Done()
	t := time.NewTicker(p.cfg.PruneInterval)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		now := p.cfg.Now()
		p.mu.Lock()
		for id, k := range p.prepared {
			if !now.Before(k.created.Add(p.cfg.MaxAge)) { // the store's expiry
				delete(p.prepared, id)
			}
		}
		p.mu.Unlock()
		n, err := p.cfg.Store.PoolPrune(now, p.cfg.MaxAge)
		if err != nil {
			p.log.Warn("challenge pool: prune", "err", err)
			continue
		}
		if n > 0 {
			p.count(func(s *Stats) { s.Expired += n })
			p.refresh()
			p.kick()
		}
	}
}

// MemStore is an in-memory Store.
type MemStore struct {
	mu    sync.Mutex
	ready []memEntry
	// served maps the ids served out to when (see Store.PoolPrune).
	served map[string]time.Time
}

type memEntry struct {
	id      string
	created time.Time
	serves  int
	data    []byte
}

// NewMemStore returns an empty in-memory pool store.
func NewMemStore() *MemStore { return &MemStore{served: map[string]time.Time{}} }

// PoolAdd implements Store.
func (m *MemStore) PoolAdd(id string, created time.Time, data []byte) (bool, error) {
	if id == "" {
		return false, errors.New("pool store: empty id")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.served[id]; ok {
		return false, nil
	}
	for _, e := range m.ready {
		if e.id == id {
			return false, nil
		}
	}
	// Keep the slice ordered by creation time.
	i := len(m.ready)
	for i > 0 && m.ready[i-1].created.After(created) {
		i--
	}
	e := memEntry{id: id, created: created, data: append([]byte(nil), data...)}
	m.ready = append(m.ready[:i], append([]memEntry{e}, m.ready[i:]...)...)
	return true, nil
}

// PoolTake implements Store.
func (m *MemStore) PoolTake(now time.Time, maxAge time.Duration, maxServes int) (Taken, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.ready {
		e := &m.ready[i]
		if now.Sub(e.created) >= maxAge {
			continue
		}
		e.serves++
		t := Taken{ID: e.id, Created: e.created, Data: append([]byte(nil), e.data...)}
		if e.serves >= maxServes {
			m.served[e.id] = now
			m.ready = append(m.ready[:i], m.ready[i+1:]...)
		}
		return t, true, nil
	}
	return Taken{}, false, nil
}

// PoolReturn implements Store.
func (m *MemStore) PoolReturn(t Taken, maxServes int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.ready {
		if e := &m.ready[i]; e.id == t.ID {
			if e.serves > 0 {
				e.serves--
			}
			return nil
		}
	}
	if _, ok := m.served[t.ID]; !ok {
		return nil // neither ready nor served out: nothing to undo
	}
	delete(m.served, t.ID)
	i := len(m.ready)
	for i > 0 && m.ready[i-1].created.After(t.Created) {
		i--
	}
	e := memEntry{id: t.ID, created: t.Created, serves: max(maxServes-1, 0), data: append([]byte(nil), t.Data...)}
	m.ready = append(m.ready[:i], append([]memEntry{e}, m.ready[i:]...)...)
	return nil
}

// PoolLen implements Store.
func (m *MemStore) PoolLen(now time.Time, maxAge time.Duration) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, e := range m.ready {
		if now.Sub(e.created) < maxAge {
			n++
		}
	}
	return n, nil
}

// PoolPrune implements Store.
func (m *MemStore) PoolPrune(now time.Time, maxAge time.Duration) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	kept := m.ready[:0]
	n := 0
	for _, e := range m.ready {
		if now.Sub(e.created) >= maxAge {
			if e.serves > 0 {
				m.served[e.id] = now
			}
			n++
			continue
		}
		kept = append(kept, e)
	}
	m.ready = kept
	for id, at := range m.served {
		if now.Sub(at) >= ServedRetention {
			delete(m.served, id)
		}
	}
	if extra := len(m.served) - MaxServedIDs; extra > 0 {
		ats := slices.SortedFunc(maps.Values(m.served), func(a, b time.Time) int { return a.Compare(b) })
		cut := ats[extra-1]
		for id, at := range m.served {
			if !at.After(cut) {
				delete(m.served, id)
			}
		}
	}
	return n, nil
}
