package generate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/acaptcha/acaptcha/skill"
)

// Producer makes one validated set per call. Generator implements it;
// so can any other generator (the procedural one, a test stub).
type Producer interface {
	Produce(ctx context.Context) (*skill.Set, error)
}

// PoolStore keeps the pool's ready sets. Implementations must make each
// method atomic: the node's bbolt store (peer.Store) and MemPoolStore.
type PoolStore interface {
	// PoolAdd stores a ready set, encoded as data, under id. It stores
	// nothing and reports false when id is ready already or was served
	// out before, so a set is never served again after it was used up.
	PoolAdd(id string, created time.Time, data []byte) (bool, error)
	// PoolTake takes the oldest ready set created less than maxAge before
	// now: it counts one serve and, when the set has been served maxServes
	// times, removes it and remembers its id as served. It reports false
	// when no such set is ready.
	PoolTake(now time.Time, maxAge time.Duration, maxServes int) (t PoolTaken, ok bool, err error)
	// PoolReturn undoes one PoolTake of t that no peer saw: the serve is
	// uncounted and a set removed at maxServes is ready again under its
	// original creation time (so MaxAge still applies).
	PoolReturn(t PoolTaken, maxServes int) error
	// PoolLen counts the ready sets created less than maxAge before now.
	PoolLen(now time.Time, maxAge time.Duration) (int, error)
	// PoolPrune removes the sets created maxAge or longer before now and
	// returns how many it removed.
	PoolPrune(now time.Time, maxAge time.Duration) (int, error)
}

// PoolTaken is a set taken from a PoolStore: its id, creation time and
// encoding.
type PoolTaken struct {
	ID      string
	Created time.Time
	Data    []byte
}

// PoolConfig configures a Pool.
type PoolConfig struct {
	// Size is how many sets the workers keep ready (DefaultPoolSize).
	Size int
	// Workers is how many sets are generated at once (DefaultPoolWorkers,
	// at most Size).
	Workers int
	// MaxServes is how often one set is served (skill.DefaultMaxServes).
	MaxServes int
	// MaxAge is how long a ready set stays servable (DefaultMaxAge).
	MaxAge time.Duration
	// Wait bounds how long Next waits for a set when the pool is empty
	// (DefaultPoolWait).
	Wait time.Duration
	// Store keeps the sets (a new MemPoolStore when nil).
	Store PoolStore
	// Name names the source ("pool" when empty).
	Name string
	// RetryBackoff is the pause of a worker after a failed production
	// (DefaultRetryBackoff). After a failure of the provider (an error
	// that is not a content rejection) it doubles for each further
	// consecutive such failure, up to MaxRetryBackoff
	// (DefaultMaxRetryBackoff).
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// PruneInterval is how often expired sets are removed
	// (DefaultPruneInterval).
	PruneInterval time.Duration
	// Logger receives pool logs (slog.Default() when nil).
	Logger *slog.Logger
	// Now is the pool's clock (time.Now when nil).
	Now func() time.Time
}

// Defaults of PoolConfig.
const (
	DefaultPoolSize        = 8
	DefaultPoolWorkers     = 1
	DefaultMaxAge          = 24 * time.Hour
	DefaultPoolWait        = 10 * time.Second
	DefaultRetryBackoff    = 2 * time.Second
	DefaultMaxRetryBackoff = 5 * time.Minute
	DefaultPruneInterval   = time.Minute
	// MaxPoolSize caps Size.
	MaxPoolSize = 10000
)

// PoolStats is the pool's accounting.
type PoolStats struct {
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
	// Generator is the producer's accounting when it is a Generator.
	Generator *Stats `json:"generator,omitempty"`
}

// Pool is a skill.Source that serves validated sets from a store kept
// full by background workers. Generation is bounded by the pool size:
// Next never generates, it only wakes the workers, so opening sessions
// cannot make the node spend more than refilling Size sets costs.
type Pool struct {
	cfg  PoolConfig
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
	st         PoolStats
	closed     bool
	// out remembers the last maxOutstanding sets taken (id and creation
	// time), so Return can put one back; outNext is the next slot.
	out     []PoolTaken
	outNext int
}

// maxOutstanding bounds how many served sets the pool remembers for
// Return. A verifier returns a set within one handshake (seconds), far
// fewer sessions than this run at once.
const maxOutstanding = 1024

var (
	_ skill.Source   = (*Pool)(nil)
	_ skill.Returner = (*Pool)(nil)
)

// NewPool starts a pool over prod. Close stops its workers.
func NewPool(cfg PoolConfig, prod Producer) (*Pool, error) {
	if prod == nil {
		return nil, errors.New("pool: no producer")
	}
	if cfg.Size == 0 {
		cfg.Size = DefaultPoolSize
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultPoolWorkers
	}
	if cfg.MaxServes == 0 {
		cfg.MaxServes = skill.DefaultMaxServes
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.Wait == 0 {
		cfg.Wait = DefaultPoolWait
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
	switch {
	case cfg.Size < 1 || cfg.Size > MaxPoolSize:
		return nil, fmt.Errorf("pool: size %d, want 1..%d", cfg.Size, MaxPoolSize)
	case cfg.Workers < 1:
		return nil, fmt.Errorf("pool: %d workers, want at least 1", cfg.Workers)
	case cfg.MaxServes < 1:
		return nil, fmt.Errorf("pool: max serves %d, want at least 1", cfg.MaxServes)
	case cfg.MaxAge < 0 || cfg.Wait < 0 || cfg.RetryBackoff < 0 || cfg.PruneInterval < 0:
		return nil, errors.New("pool: negative duration")
	}
	cfg.Workers = min(cfg.Workers, cfg.Size)
	if cfg.Store == nil {
		cfg.Store = NewMemPoolStore()
	}
	if cfg.Name == "" {
		cfg.Name = "pool"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &Pool{cfg: cfg, prod: prod, log: cfg.Logger, wake: make(chan struct{}, 1), added: make(chan struct{}),
		out: make([]PoolTaken, maxOutstanding)}
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

// Close stops the workers, abandoning productions under way, and waits
// for them. Sets already stored stay in the store.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	return nil
}

// Stats returns the pool's accounting.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	s := p.st
	s.Ready, s.Generating = p.ready, p.generating
	p.mu.Unlock()
	if g, ok := p.prod.(interface{ Stats() Stats }); ok {
		gs := g.Stats()
		s.Generator = &gs
	}
	return s
}

// Ready returns the number of servable sets.
func (p *Pool) Ready() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready
}

// Added returns a channel closed when the next set is stored (tests and
// monitoring wait on it instead of polling).
func (p *Pool) Added() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.added
}

// Next implements skill.Source: it takes a ready set atomically. When the
// pool is empty it waits up to PoolConfig.Wait (or until ctx ends) for a
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
			p.count(func(s *PoolStats) { s.Waited++ })
			timer = time.NewTimer(p.cfg.Wait)
		}
		select {
		case <-added:
		case <-timer.C:
			p.count(func(s *PoolStats) { s.Exhausted++ })
			return nil, fmt.Errorf("%s: no challenge set ready within %s: %w", p.cfg.Name, p.cfg.Wait, skill.ErrExhausted)
		case <-ctx.Done():
			p.count(func(s *PoolStats) { s.Exhausted++ })
			return nil, fmt.Errorf("%s: no challenge set ready: %w (%w)", p.cfg.Name, skill.ErrExhausted, ctx.Err())
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
		set, err := skill.DecodeSet(t.Data)
		if err != nil || set.ID != t.ID {
			p.log.Error("challenge pool: stored set does not decode, skipped", "set", t.ID, "err", err)
			continue
		}
		p.mu.Lock()
		p.st.Served++
		p.out[p.outNext] = PoolTaken{ID: t.ID, Created: t.Created}
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
	var t PoolTaken
	for i := range p.out {
		if p.out[i].ID == set.ID && set.ID != "" {
			t, p.out[i] = p.out[i], PoolTaken{}
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
	p.st.Returned++
	close(p.added) // a waiting session may take it
	p.added = make(chan struct{})
	p.mu.Unlock()
	return nil
}

func (p *Pool) count(f func(*PoolStats)) {
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
	failures := 0
	for {
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
			failures = 0
			continue
		}
		p.count(func(s *PoolStats) { s.Failed++ })
		// A set rejected for its content is the normal cost of generation:
		// pause briefly. Failures of the provider or the store back off
		// exponentially.
		wait := p.cfg.RetryBackoff
		if !contentRejection(err) {
			for i := 0; i < failures && wait < p.cfg.MaxRetryBackoff; i++ {
				wait *= 2
			}
			wait = min(wait, p.cfg.MaxRetryBackoff)
			failures++
		}
		var be *BudgetError
		if errors.As(err, &be) {
			wait = max(wait, be.RetryAfter)
		}
		if errors.Is(err, ErrRejected) {
			p.log.Debug("challenge pool: set rejected", "err", err, "pause", wait)
		} else {
			p.log.Warn("challenge pool: production failed", "err", err, "pause", wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-p.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// contentRejection reports whether err rejects a set for its content
// rather than for a failure of the provider.
func contentRejection(err error) bool {
	var re *RejectError
	if !errors.As(err, &re) {
		return false
	}
	switch re.Reason {
	case RejectLLMError, RejectDeadline, RejectRateLimited, RejectEmpty:
		return false
	}
	return true
}

// store adds a produced set to the store and wakes the waiting sessions.
func (p *Pool) store(set *skill.Set) error {
	if set == nil {
		return errors.New("producer returned no set")
	}
	if err := set.Validate(); err != nil {
		return fmt.Errorf("produced set: %w", err)
	}
	if set.ID == "" {
		set.ID = set.ContentID()
	}
	data, err := json.Marshal(set)
	if err != nil {
		return fmt.Errorf("encode set: %w", err)
	}
	ok, err := p.cfg.Store.PoolAdd(set.ID, p.cfg.Now(), data)
	if err != nil {
		return fmt.Errorf("store set: %w", err)
	}
	if !ok {
		return fmt.Errorf("set %s is ready or was served already", set.ID)
	}
	p.refresh()
	p.mu.Lock()
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
		n, err := p.cfg.Store.PoolPrune(p.cfg.Now(), p.cfg.MaxAge)
		if err != nil {
			p.log.Warn("challenge pool: prune", "err", err)
			continue
		}
		if n > 0 {
			p.count(func(s *PoolStats) { s.Expired += n })
			p.refresh()
			p.kick()
		}
	}
}

// MemPoolStore is an in-memory PoolStore.
type MemPoolStore struct {
	mu     sync.Mutex
	ready  []memEntry
	served map[string]bool
}

type memEntry struct {
	id      string
	created time.Time
	serves  int
	data    []byte
}

// NewMemPoolStore returns an empty in-memory pool store.
func NewMemPoolStore() *MemPoolStore { return &MemPoolStore{served: map[string]bool{}} }

// PoolAdd implements PoolStore.
func (m *MemPoolStore) PoolAdd(id string, created time.Time, data []byte) (bool, error) {
	if id == "" {
		return false, errors.New("pool store: empty id")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.served[id] {
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

// PoolTake implements PoolStore.
func (m *MemPoolStore) PoolTake(now time.Time, maxAge time.Duration, maxServes int) (PoolTaken, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.ready {
		e := &m.ready[i]
		if now.Sub(e.created) >= maxAge {
			continue
		}
		e.serves++
		t := PoolTaken{ID: e.id, Created: e.created, Data: append([]byte(nil), e.data...)}
		if e.serves >= maxServes {
			m.served[e.id] = true
			m.ready = append(m.ready[:i], m.ready[i+1:]...)
		}
		return t, true, nil
	}
	return PoolTaken{}, false, nil
}

// PoolReturn implements PoolStore.
func (m *MemPoolStore) PoolReturn(t PoolTaken, maxServes int) error {
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
	if !m.served[t.ID] {
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

// PoolLen implements PoolStore.
func (m *MemPoolStore) PoolLen(now time.Time, maxAge time.Duration) (int, error) {
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

// PoolPrune implements PoolStore.
func (m *MemPoolStore) PoolPrune(now time.Time, maxAge time.Duration) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	kept := m.ready[:0]
	n := 0
	for _, e := range m.ready {
		if now.Sub(e.created) >= maxAge {
			if e.serves > 0 {
				m.served[e.id] = true
			}
			n++
			continue
		}
		kept = append(kept, e)
	}
	m.ready = kept
	return n, nil
}
