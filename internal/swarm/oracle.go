package swarm

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acaptcha/acaptcha/skill"
)

// BenchOracle is the swarm simulation's shared answer key. It is a
// BENCH-ONLY device: every verifier's source is wrapped so that each set it
// serves is registered here, and every prover answers by looking the
// challenge up in this table. It lets hundreds of in-process agents answer
// instantly (or after a sampled, LLM-like delay) without an LLM, so the
// simulation measures the protocol, first contact, gossip and the trust
// quorum rather than a model. A real node never holds its verifiers'
// answer keys: `acaptcha node` and `acaptcha demo` never use this type.
type BenchOracle struct {
	mu      sync.RWMutex
	answers map[[32]byte]string

	served  atomic.Int64
	unknown atomic.Int64
}

// NewBenchOracle returns an empty answer key.
func NewBenchOracle() *BenchOracle {
	return &BenchOracle{answers: map[[32]byte]string{}}
}

func oracleKey(narrative, question string) [32]byte {
	h := sha256.New()
	h.Write([]byte(strings.Join(strings.Fields(narrative), " ")))
	h.Write([]byte{0})
	h.Write([]byte(strings.Join(strings.Fields(question), " ")))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// Register adds every question of s to the answer key.
func (o *BenchOracle) Register(s *skill.Set) {
	if s == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range s.Parts {
		for _, q := range p.Questions {
			o.answers[oracleKey(p.Narrative, q.Question)] = q.Answer
		}
	}
}

// Lookup returns the registered answer to a challenge.
func (o *BenchOracle) Lookup(c skill.Challenge) (string, bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	a, ok := o.answers[oracleKey(c.Narrative, c.Question)]
	return a, ok
}

// Served is the number of sets served by wrapped sources: every verifier
// session draws one before it opens its stream.
func (o *BenchOracle) Served() int64 { return o.served.Load() }

// Unknown counts challenges a prover could not find in the key (it then
// answers wrong); it stays 0 unless something is broken.
func (o *BenchOracle) Unknown() int64 { return o.unknown.Load() }

// Gate holds the challenges of gated sources while it is shut. The
// simulation uses it to let a swarm assemble before some verifiers start.
type Gate struct {
	mu sync.Mutex
	ch chan struct{} // closed while open
}

// NewGate returns an open gate.
func NewGate() *Gate {
	ch := make(chan struct{})
	close(ch)
	return &Gate{ch: ch}
}

// Open lets waiting and future challenges through.
func (g *Gate) Open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.ch:
	default:
		close(g.ch)
	}
}

// Shut makes future challenges wait for the next Open.
func (g *Gate) Shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.ch:
		g.ch = make(chan struct{})
	default:
	}
}

// Wait returns when the gate is open or ctx ends.
func (g *Gate) Wait(ctx context.Context) error {
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Source wraps a verifier's source: every served set is registered and
// counted. When gate is not nil, Next first waits for it to be open.
func (o *BenchOracle) Source(inner skill.Source, gate *Gate) skill.Source {
	return &oracleSource{o: o, inner: inner, gate: gate}
}

type oracleSource struct {
	o     *BenchOracle
	inner skill.Source
	gate  *Gate
}

func (s *oracleSource) Name() string { return "bench-oracle(" + s.inner.Name() + ")" }

func (s *oracleSource) Next(ctx context.Context) (*skill.Set, error) {
	if s.gate != nil {
		if err := s.gate.Wait(ctx); err != nil {
			return nil, fmt.Errorf("bench source: waiting for the swarm to assemble: %w", err)
		}
	}
	set, err := s.inner.Next(ctx)
	if err != nil {
		return nil, err
	}
	s.o.Register(set)
	s.o.served.Add(1)
	return set, nil
}

// Latency selects how fast bench provers answer.
type Latency string

// Latency models.
const (
	// LatencyInstant answers at once.
	LatencyInstant Latency = "instant"
	// LatencyRealistic waits a lognormal delay per round (median
	// RealisticMedian, log-sd RealisticSigma, like an LLM API call),
	// multiplied by the configured scale.
	LatencyRealistic Latency = "realistic"
)

// Parameters of the realistic latency model.
const (
	RealisticMedian = 2500 * time.Millisecond
	RealisticSigma  = 0.6
	// realisticCap keeps one sampled delay below half of the default
	// round budget before scaling.
	realisticCap = 7 * time.Second
)

// ParseLatency parses a latency model name.
func ParseLatency(s string) (Latency, error) {
	switch l := Latency(s); l {
	case LatencyInstant, LatencyRealistic:
		return l, nil
	case "":
		return LatencyInstant, nil
	}
	return "", fmt.Errorf("latency %q: want instant or realistic", s)
}

// Prover returns a prover that answers from the key, after a delay drawn
// from the latency model (scale multiplies realistic delays; <= 0 means 1).
func (o *BenchOracle) Prover(l Latency, scale float64) skill.Prover {
	if scale <= 0 {
		scale = 1
	}
	return skill.ProverFunc(func() skill.Answerer {
		return skill.AnswerFunc(func(ctx context.Context, c skill.Challenge) (string, error) {
			if l == LatencyRealistic {
				d := time.Duration(float64(realisticDelay()) * scale)
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return "", ctx.Err()
				}
			}
			a, ok := o.Lookup(c)
			if !ok {
				o.unknown.Add(1)
				return "unknown", nil
			}
			return a, nil
		})
	})
}

func realisticDelay() time.Duration {
	d := time.Duration(float64(RealisticMedian) * math.Exp(RealisticSigma*rand.NormFloat64()))
	return min(d, realisticCap)
}
