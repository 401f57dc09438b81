package skill

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Source hands out challenge sets to verifier sessions. Implementations
// are safe for concurrent use: the corpus here, the LLM generator pool and
// the procedural generator of later packages.
type Source interface {
	// Next returns a fresh set for one session. A source that cannot
	// provide one returns an error wrapping ErrExhausted (or another
	// error); the session then ends inconclusive, never as a reject.
	Next(ctx context.Context) (*Set, error)
	// Name describes the source for logs and status output.
	Name() string
}

// Provenancer is implemented by sources that know the kind of set they
// serve before serving one (for start-up warnings and policy checks).
type Provenancer interface {
	Kind() SourceKind
}

// ErrExhausted reports that a source has no set left to serve.
var ErrExhausted = errors.New("challenge source exhausted")

// Returner is implemented by sources that can take back a set Next drew
// but no peer saw: the stream never opened, or the prover declined, was
// busy or fell silent before round 1. Return undoes that draw's serve, so a
// set (for the pool, an LLM generation's worth of tokens) is not spent on a
// session that never ran. A verifier returns a set only when no challenge
// frame of it was written; the hello carries nothing of the set.
type Returner interface {
	Return(set *Set) error
}

// Ledger records how often each set was served, so that a verifier serves
// a set at most a configured number of times across restarts. The node
// keeps its ledger in its bbolt store; MemLedger serves tests and demos.
type Ledger interface {
	// TryServe increments the serve count of id if it is below max and
	// reports whether it did, atomically.
	TryServe(id string, max int) (bool, error)
	// Unserve undoes one TryServe of id that was granted (a set given
	// back unseen); it does nothing for an id with no serves.
	Unserve(id string) error
}

// ServeCounter is a Ledger that tells how often a set was served (the
// node's store and MemLedger are), so that a corpus can say how many of
// its sets it can still serve.
type ServeCounter interface {
	Serves(id string) (int, error)
}

// MemLedger is an in-memory Ledger.
type MemLedger struct {
	mu     sync.Mutex
	serves map[string]int
}

// NewMemLedger returns an empty in-memory ledger.
func NewMemLedger() *MemLedger { return &MemLedger{serves: map[string]int{}} }

// Serves implements ServeCounter.
func (l *MemLedger) Serves(id string) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.serves[id], nil
}

// TryServe implements Ledger.
func (l *MemLedger) TryServe(id string, max int) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.serves[id] >= max {
		return false, nil
	}
	l.serves[id]++
	return true, nil
}

// Unserve implements Ledger.
func (l *MemLedger) Unserve(id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.serves[id] > 0 {
		l.serves[id]--
	}
	return nil
}

// Corpus serves sets from a fixed collection (the paper's prototype served
// a pre-generated corpus), each at most MaxServes times as recorded by its
// Ledger.
type Corpus struct {
	name      string
	sets      []*Set
	ledger    Ledger
	maxServes int

	mu  sync.Mutex
	rng *mrand.Rand // nil: crypto/rand (see Reproducible)
}

// Reproducible makes the corpus pick where each draw starts from a
// ChaCha8 stream keyed by seed rather than from crypto/rand, so that an
// evaluation run with a seed draws the same sets in the same order every
// time. A node must not use it: whoever knows the seed knows which set
// comes next.
func (c *Corpus) Reproducible(seed uint64) {
	var k [32]byte
	copy(k[:], "acaptcha/corpus/draws/v1")
	binary.BigEndian.PutUint64(k[24:], seed)
	c.mu.Lock()
	c.rng = mrand.New(mrand.NewChaCha8(k))
	c.mu.Unlock()
}

// start is where a draw begins its walk over the sets.
func (c *Corpus) start() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rng != nil {
		return c.rng.IntN(len(c.sets)), nil
	}
	n, err := rand.Int(rand.Reader, big.NewInt(int64(len(c.sets))))
	if err != nil {
		return 0, err
	}
	return int(n.Int64()), nil
}

// DefaultMaxServes is how often a corpus set is served per verifier by
// default: once, so a peer that saw a set can never be asked it again.
const DefaultMaxServes = 1

// NewCorpus returns a corpus over sets. A nil ledger means an in-memory
// one; maxServes < 1 means DefaultMaxServes.
func NewCorpus(name string, sets []*Set, ledger Ledger, maxServes int) (*Corpus, error) {
	if len(sets) == 0 {
		return nil, fmt.Errorf("corpus %s: no challenge sets", name)
	}
	if ledger == nil {
		ledger = NewMemLedger()
	}
	if maxServes < 1 {
		maxServes = DefaultMaxServes
	}
	// Whatever wrote a set, a static collection is served as a corpus:
	// anyone holding the files can pre-solve them. The generator's own
	// record of its model and question wording is kept.
	stamped := make([]*Set, len(sets))
	for i, s := range sets {
		if s == nil {
			return nil, fmt.Errorf("corpus %s: set %d is nil", name, i)
		}
		c := *s
		pv := Provenance{Source: SourceCorpus}
		if s.Provenance != nil {
			pv.Model, pv.LLMQuestions = s.Provenance.Model, s.Provenance.LLMQuestions
		}
		c.Provenance = &pv
		stamped[i] = &c
	}
	return &Corpus{name: name, sets: stamped, ledger: ledger, maxServes: maxServes}, nil
}

// LoadDir reads every *.json file in dir as one challenge set. It fails on
// the first file that does not decode or validate, naming it, so a broken
// corpus is noticed at start-up rather than mid-session.
func LoadDir(dir string) ([]*Set, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read corpus directory: %w", err)
	}
	var sets []*Set
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		s, err := LoadFile(p)
		if err != nil {
			return nil, err
		}
		sets = append(sets, s)
	}
	if len(sets) == 0 {
		return nil, fmt.Errorf("corpus directory %s holds no *.json challenge sets", dir)
	}
	sort.Slice(sets, func(i, j int) bool { return sets[i].ID < sets[j].ID })
	return sets, nil
}

// MaxSetFileBytes caps the size of one challenge-set file.
const MaxSetFileBytes = 1 << 20

// LoadFile reads and validates one challenge-set JSON file.
func LoadFile(path string) (*Set, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("challenge set %s: %w", path, err)
	}
	if fi.Size() > MaxSetFileBytes {
		return nil, fmt.Errorf("challenge set %s: %d bytes exceeds %d", path, fi.Size(), MaxSetFileBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("challenge set %s: %w", path, err)
	}
	s, err := DecodeSet(data)
	if err != nil {
		return nil, fmt.Errorf("challenge set %s: %w", path, err)
	}
	return s, nil
}

// Name implements Source.
func (c *Corpus) Name() string { return "corpus:" + c.name }

// Len returns the number of sets in the corpus.
func (c *Corpus) Len() int { return len(c.sets) }

// Kind implements Provenancer.
func (c *Corpus) Kind() SourceKind { return SourceCorpus }

// Remaining is how many of the corpus's sets can still be served (served
// fewer than MaxServes times); known is false when the ledger cannot tell
// (it is no ServeCounter).
func (c *Corpus) Remaining() (n int, known bool, err error) {
	sc, ok := c.ledger.(ServeCounter)
	if !ok {
		return 0, false, nil
	}
	for _, s := range c.sets {
		k, err := sc.Serves(s.ID)
		if err != nil {
			return 0, false, fmt.Errorf("corpus %s: %w", c.name, err)
		}
		if k < c.maxServes {
			n++
		}
	}
	return n, true, nil
}

// Next implements Source: it starts at a uniformly random set and serves
// the first one whose serve count is below the limit.
func (c *Corpus) Next(ctx context.Context) (*Set, error) {
	start, err := c.start()
	if err != nil {
		return nil, fmt.Errorf("corpus %s: %w", c.name, err)
	}
	for i := range c.sets {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s := c.sets[(start+i)%len(c.sets)]
		ok, err := c.ledger.TryServe(s.ID, c.maxServes)
		if err != nil {
			return nil, fmt.Errorf("corpus %s: ledger: %w", c.name, err)
		}
		if ok {
			return s, nil
		}
	}
	return nil, fmt.Errorf("corpus %s: all %d sets served %d time(s): %w", c.name, len(c.sets), c.maxServes, ErrExhausted)
}

// Return implements Returner: the set's serve is undone in the ledger.
func (c *Corpus) Return(set *Set) error {
	if set == nil {
		return nil
	}
	if err := c.ledger.Unserve(set.ID); err != nil {
		return fmt.Errorf("corpus %s: return %s: %w", c.name, set.ID, err)
	}
	return nil
}

// WatchedSource wraps a Source to notice when it runs out: a verifier
// whose sets are used up (a corpus served MaxServes times each, a pool
// with none ready) only ends sessions inconclusive, which nothing else
// says aloud. It counts the sets served (drawn and not given back) and the
// draws refused with ErrExhausted, and tells OnExhausted of each refusal.
// It passes Return and Kind through, as RetiringSource does. Use it by
// pointer (NewWatchedSource).
type WatchedSource struct {
	source Source
	// onExhausted is called after every draw refused with an error
	// wrapping ErrExhausted, on the drawing goroutine (keep it quick),
	// with the error and the sets served until then.
	onExhausted func(err error, served uint64)
	served      atomic.Int64
	refused     atomic.Uint64
}

// NewWatchedSource wraps src; onExhausted (nil: none) is told of every
// draw refused with ErrExhausted.
func NewWatchedSource(src Source, onExhausted func(err error, served uint64)) *WatchedSource {
	return &WatchedSource{source: src, onExhausted: onExhausted}
}

// Next implements Source.
func (w *WatchedSource) Next(ctx context.Context) (*Set, error) {
	s, err := w.source.Next(ctx)
	switch {
	case err == nil:
		w.served.Add(1)
	case errors.Is(err, ErrExhausted):
		w.refused.Add(1)
		if w.onExhausted != nil {
			w.onExhausted(err, w.Served())
		}
	}
	return s, err
}

// Name implements Source.
func (w *WatchedSource) Name() string { return w.source.Name() }

// Return implements Returner when the wrapped source does; a set given
// back is no longer counted served.
func (w *WatchedSource) Return(set *Set) error {
	rt, ok := w.source.(Returner)
	if !ok {
		return nil
	}
	if err := rt.Return(set); err != nil {
		return err
	}
	if set != nil {
		w.served.Add(-1)
	}
	return nil
}

// Kind implements Provenancer when the wrapped source does.
func (w *WatchedSource) Kind() SourceKind {
	if p, ok := w.source.(Provenancer); ok {
		return p.Kind()
	}
	return SourceUnknown
}

// Served is how many sets the source served through w (draws not given
// back).
func (w *WatchedSource) Served() uint64 { return uint64(max(w.served.Load(), 0)) }

// Exhausted is how many draws the source refused with ErrExhausted.
func (w *WatchedSource) Exhausted() uint64 { return w.refused.Load() }

// Answerer answers the rounds of one session. It is the prover's brain:
// an LLM solver, a script attacker, a human model. Implementations keep
// whatever memory they have between the rounds of their session.
//
// Answer runs on the prover session's own goroutine: it must return soon
// after ctx is done (the round's time is up, the verifier gave up on the
// round, or the node is closing); the session waits for it.
type Answerer interface {
	Answer(ctx context.Context, c Challenge) (string, error)
}

// Prover starts one Answerer per session.
type Prover interface {
	NewSession() Answerer
}

// ProverFunc adapts a function to Prover.
type ProverFunc func() Answerer

// NewSession implements Prover.
func (f ProverFunc) NewSession() Answerer { return f() }

// AnswerFunc adapts a function to Answerer.
type AnswerFunc func(ctx context.Context, c Challenge) (string, error)

// Answer implements Answerer.
func (f AnswerFunc) Answer(ctx context.Context, c Challenge) (string, error) { return f(ctx, c) }
