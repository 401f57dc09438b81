package eval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/acaptcha/acaptcha/skill"
)

// HumanMC is the Monte Carlo human timing model of the paper's §6.3: per
// round a human reads L tokens at a comprehension rate R drawn from a
// normal distribution clipped to [ReadRateMin, ReadRateMax], decides in
// U(DecideMin, DecideMax), types an AnswerTokens-token answer at TypeRate
// and spends U(OverheadMin, OverheadMax) on re-reading and working-memory
// refresh:
//
//	T = L/R + T_decide + A/R_type + T_overhead
//
// All rates are tokens per second and all times seconds. L is drawn from
// U(LMin, LMax) in the stand-alone simulation; a human prover facing a real
// challenge uses that challenge's narrative length.
type HumanMC struct {
	ReadRateMean float64 `json:"read_rate_mean"`
	ReadRateSD   float64 `json:"read_rate_sd"`
	ReadRateMin  float64 `json:"read_rate_min"`
	ReadRateMax  float64 `json:"read_rate_max"`
	DecideMin    float64 `json:"decide_min_s"`
	DecideMax    float64 `json:"decide_max_s"`
	OverheadMin  float64 `json:"overhead_min_s"`
	OverheadMax  float64 `json:"overhead_max_s"`
	TypeRate     float64 `json:"type_rate"`
	AnswerTokens float64 `json:"answer_tokens"`
	LMin         float64 `json:"l_min"`
	LMax         float64 `json:"l_max"`
}

// DefaultHumanMC returns the paper's parameters (§6.3): R ~ N(3.3, 0.5)
// clipped to [2.5, 5] tokens/s, decide ~ U(1.5, 3) s, overhead ~ U(5, 20) s,
// typing at 0.9 tokens/s, a 10-token answer, and L ~ U(352, 1124) tokens,
// the per-part length range of the paper's corpus.
func DefaultHumanMC() HumanMC {
	return HumanMC{
		ReadRateMean: 3.3, ReadRateSD: 0.5, ReadRateMin: 2.5, ReadRateMax: 5,
		DecideMin: 1.5, DecideMax: 3,
		OverheadMin: 5, OverheadMax: 20,
		TypeRate: 0.9, AnswerTokens: 10,
		LMin: 352, LMax: 1124,
	}
}

// ErrHumanModel is wrapped by every HumanMC validation failure.
var ErrHumanModel = errors.New("invalid human timing model")

// Validate checks that every parameter is finite and ordered.
func (m HumanMC) Validate() error {
	for _, v := range []float64{m.ReadRateMean, m.ReadRateSD, m.ReadRateMin, m.ReadRateMax, m.DecideMin, m.DecideMax,
		m.OverheadMin, m.OverheadMax, m.TypeRate, m.AnswerTokens, m.LMin, m.LMax} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("%w: parameters must be finite and non-negative", ErrHumanModel)
		}
	}
	switch {
	case m.ReadRateMin <= 0 || m.ReadRateMin > m.ReadRateMax:
		return fmt.Errorf("%w: read rate range [%g, %g]", ErrHumanModel, m.ReadRateMin, m.ReadRateMax)
	case m.ReadRateMean < m.ReadRateMin || m.ReadRateMean > m.ReadRateMax:
		return fmt.Errorf("%w: read rate mean %g outside [%g, %g]", ErrHumanModel, m.ReadRateMean, m.ReadRateMin, m.ReadRateMax)
	case m.DecideMin > m.DecideMax:
		return fmt.Errorf("%w: decide range [%g, %g]", ErrHumanModel, m.DecideMin, m.DecideMax)
	case m.OverheadMin > m.OverheadMax:
		return fmt.Errorf("%w: overhead range [%g, %g]", ErrHumanModel, m.OverheadMin, m.OverheadMax)
	case m.TypeRate <= 0:
		return fmt.Errorf("%w: type rate must be positive", ErrHumanModel)
	case m.LMin > m.LMax:
		return fmt.Errorf("%w: narrative length range [%g, %g]", ErrHumanModel, m.LMin, m.LMax)
	}
	return nil
}

func (m HumanMC) isZero() bool { return m == HumanMC{} }

// ReadRate draws a comprehension reading rate (tokens/s).
func (m HumanMC) ReadRate(rng *rand.Rand) float64 {
	r := m.ReadRateMean + m.ReadRateSD*rng.NormFloat64()
	return math.Min(math.Max(r, m.ReadRateMin), m.ReadRateMax)
}

func uniform(rng *rand.Rand, lo, hi float64) float64 { return lo + (hi-lo)*rng.Float64() }

// RoundTime draws the seconds a reader with rate readRate needs for one
// round over a narrative of tokens tokens.
func (m HumanMC) RoundTime(rng *rand.Rand, tokens, readRate float64) float64 {
	return tokens/readRate + uniform(rng, m.DecideMin, m.DecideMax) + m.AnswerTokens/m.TypeRate + uniform(rng, m.OverheadMin, m.OverheadMax)
}

// Sample draws one per-round time with L ~ U(LMin, LMax) and a fresh
// reading rate, as the paper's simulation does.
func (m HumanMC) Sample(rng *rand.Rand) float64 {
	return m.RoundTime(rng, uniform(rng, m.LMin, m.LMax), m.ReadRate(rng))
}

// Simulate returns n per-round samples from a generator seeded by seed.
func (m HumanMC) Simulate(n int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 0x68756d616e))
	out := make([]float64, max(n, 0))
	for i := range out {
		out[i] = m.Sample(rng)
	}
	return out
}

// SimulateSessions returns n session samples of rounds rounds each: one
// reader (one reading rate) per session, fresh L, decision and overhead per
// round. Each sample is the session's slowest round, which is what a per-
// round budget tau is compared against.
func (m HumanMC) SimulateSessions(n, rounds int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 0x73657373))
	out := make([]float64, max(n, 0))
	for i := range out {
		r := m.ReadRate(rng)
		worst := 0.0
		for j := 0; j < rounds; j++ {
			worst = math.Max(worst, m.RoundTime(rng, uniform(rng, m.LMin, m.LMax), r))
		}
		out[i] = worst
	}
	return out
}

// MinRoundTime is the fastest round the model can produce: the shortest
// narrative at the top reading rate with the quickest decision and the
// least overhead.
func (m HumanMC) MinRoundTime() float64 {
	return m.LMin/m.ReadRateMax + m.DecideMin + m.AnswerTokens/m.TypeRate + m.OverheadMin
}

// LowerBoundCompletion is the fraction of narrative lengths L ~ U(LMin,
// LMax) for which the Eq. 6 lower-bound reader lb (silent reading, one
// refractory period, expert typing, no comprehension overhead) finishes a
// round within tau seconds. It is the conservative human curve: the paper's
// Figure 3 human curve (zero until about 80 s, 5% at about 89 s) follows
// this model.
func (m HumanMC) LowerBoundCompletion(lb skill.HumanModel, tau float64) float64 {
	if lb.ReadTokensPerSec <= 0 || lb.TypeTokensPerSec <= 0 {
		return 0
	}
	lstar := (tau - lb.Decision.Seconds() - lb.AnswerTokens/lb.TypeTokensPerSec) * lb.ReadTokensPerSec
	if m.LMax <= m.LMin {
		if lstar >= m.LMin {
			return 1
		}
		return 0
	}
	return math.Min(1, math.Max(0, (lstar-m.LMin)/(m.LMax-m.LMin)))
}

// LowerBoundQuantile is the tau at which LowerBoundCompletion reaches q.
func (m HumanMC) LowerBoundQuantile(lb skill.HumanModel, q float64) float64 {
	l := m.LMin + q*(m.LMax-m.LMin)
	return l/lb.ReadTokensPerSec + lb.Decision.Seconds() + lb.AnswerTokens/lb.TypeTokensPerSec
}

// TruthFunc returns the canonical answer of a delivered challenge, or false
// when it does not know it.
type TruthFunc func(c skill.Challenge) (string, bool)

// TruthFromSets indexes the canonical answers of sets by narrative and
// question, so an answerer can look up the challenge it is shown.
func TruthFromSets(sets ...*skill.Set) TruthFunc {
	type key struct{ narrative, question string }
	idx := map[key]string{}
	for _, s := range sets {
		if s == nil {
			continue
		}
		for _, p := range s.Parts {
			for _, q := range p.Questions {
				idx[key{p.Narrative, q.Question}] = q.Answer
			}
		}
	}
	return func(c skill.Challenge) (string, bool) {
		a, ok := idx[key{c.Narrative, c.Question}]
		return a, ok
	}
}

// HumanProver is the human model as a prover: it answers every question
// correctly (humans understand the narratives) but needs the time the
// model draws for each round, so it fails on timing. Its answerers are
// skill.SimulatedAnswerers: skill.Run charges the drawn time without
// waiting for it, while a transport that calls Answer waits it out.
type HumanProver struct {
	Model HumanMC
	Truth TruthFunc
	Seed  uint64
	n     atomic.Uint64
}

// NewSession implements skill.Prover. Sessions draw from seeds derived
// from Seed and a per-prover counter, so a sequence of sessions is
// reproducible; NewHumanAnswerer gives full control over the seed.
func (p *HumanProver) NewSession() skill.Answerer {
	return NewHumanAnswerer(p.Model, p.Truth, p.Seed, p.n.Add(1))
}

// NewHumanAnswerer returns one human-model session seeded by (seed, stream).
// A zero model means DefaultHumanMC. The session draws one reading rate for
// its reader and a fresh decision time and overhead for every round; the
// narrative length is the delivered narrative's token count.
func NewHumanAnswerer(m HumanMC, truth TruthFunc, seed, stream uint64) skill.SimulatedAnswerer {
	if m.isZero() {
		m = DefaultHumanMC()
	}
	rng := rand.New(rand.NewPCG(seed, stream))
	return &humanAnswerer{m: m, truth: truth, rng: rng, rate: m.ReadRate(rng)}
}

type humanAnswerer struct {
	m     HumanMC
	truth TruthFunc
	rng   *rand.Rand
	rate  float64
}

// errNoTruth is returned when the human model is shown a challenge whose
// answer it was not given.
var errNoTruth = errors.New("human model: no ground truth for this challenge")

// AnswerSimulated implements skill.SimulatedAnswerer.
func (h *humanAnswerer) AnswerSimulated(ctx context.Context, c skill.Challenge) (string, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return "", 0, err
	}
	secs := h.m.RoundTime(h.rng, float64(skill.CountTokens(c.Narrative)), h.rate)
	took := time.Duration(secs * float64(time.Second))
	if h.truth == nil {
		return "", took, errNoTruth
	}
	a, ok := h.truth(c)
	if !ok {
		return "", took, errNoTruth
	}
	return a, took, nil
}

// Answer implements skill.Answerer by waiting out the drawn time.
func (h *humanAnswerer) Answer(ctx context.Context, c skill.Challenge) (string, error) {
	a, took, err := h.AnswerSimulated(ctx, c)
	if err != nil {
		return "", err
	}
	t := time.NewTimer(took)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-t.C:
		return a, nil
	}
}
