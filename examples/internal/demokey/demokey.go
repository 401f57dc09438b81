// Package demokey is a DEMO-ONLY answer key shared by the examples, so
// that they run offline in seconds without an LLM: it plays the agents'
// reading. A real agent answers each challenge with its own model and
// memory (see skill/solve and `acaptcha node --llm`); a real verifier
// never shares its answer key with anyone.
package demokey

import (
	"context"
	"crypto/sha256"
	"strings"
	"sync"

	"github.com/acaptcha/acaptcha/skill"
)

// Key maps a challenge (narrative and question, white space collapsed)
// to its canonical answer. It is safe for concurrent use.
type Key struct {
	mu      sync.RWMutex
	answers map[[32]byte]string
}

// New returns a key that knows every question of sets.
func New(sets ...*skill.Set) *Key {
	k := &Key{answers: map[[32]byte]string{}}
	for _, s := range sets {
		k.Learn(s)
	}
	return k
}

func keyOf(narrative, question string) [32]byte {
	return sha256.Sum256([]byte(strings.Join(strings.Fields(narrative), " ") + "\x00" + strings.Join(strings.Fields(question), " ")))
}

// Learn adds every question of set.
func (k *Key) Learn(set *skill.Set) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range set.Parts {
		for _, q := range p.Questions {
			k.answers[keyOf(p.Narrative, q.Question)] = q.Answer
		}
	}
}

// Answer looks a challenge up; "unknown" (a wrong answer) when absent.
func (k *Key) Answer(narrative, question string) string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if a, ok := k.answers[keyOf(narrative, question)]; ok {
		return a
	}
	return "unknown"
}

// Prover answers every challenge from the key, at once.
func (k *Key) Prover() skill.Prover {
	return skill.ProverFunc(func() skill.Answerer {
		return skill.AnswerFunc(func(_ context.Context, c skill.Challenge) (string, error) {
			return k.Answer(c.Narrative, c.Question), nil
		})
	})
}

// Source wraps a challenge source so that the key learns every set it
// serves.
func (k *Key) Source(inner skill.Source) skill.Source { return &source{k: k, inner: inner} }

type source struct {
	k     *Key
	inner skill.Source
}

func (s *source) Name() string { return "demo-key(" + s.inner.Name() + ")" }

func (s *source) Next(ctx context.Context) (*skill.Set, error) {
	set, err := s.inner.Next(ctx)
	if err != nil {
		return nil, err
	}
	s.k.Learn(set)
	return set, nil
}
