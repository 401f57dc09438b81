package main

import (
	"context"
	"crypto/sha256"
	"strings"
	"sync"

	"github.com/acaptcha/acaptcha/skill"
)

// demoOracle is a DEMO-ONLY answer key, so that this example runs offline
// without an LLM: the verifiers' challenge sources register every set they
// serve here, and the "agents" answer by looking the question up. A real
// agent answers with its LLM (see solve.New in skill/solve and `acaptcha node --llm`);
// a real verifier never shares its answer key with anyone.
type demoOracle struct {
	mu      sync.RWMutex
	answers map[[32]byte]string
}

func newDemoOracle() *demoOracle { return &demoOracle{answers: map[[32]byte]string{}} }

func demoKey(narrative, question string) [32]byte {
	return sha256.Sum256([]byte(strings.Join(strings.Fields(narrative), " ") + "\x00" + strings.Join(strings.Fields(question), " ")))
}

// source wraps a challenge source so that every served set is registered.
func (o *demoOracle) source(inner skill.Source) skill.Source {
	return &demoSource{o: o, inner: inner}
}

type demoSource struct {
	o     *demoOracle
	inner skill.Source
}

func (s *demoSource) Name() string { return "demo-oracle(" + s.inner.Name() + ")" }

func (s *demoSource) Next(ctx context.Context) (*skill.Set, error) {
	set, err := s.inner.Next(ctx)
	if err != nil {
		return nil, err
	}
	s.o.mu.Lock()
	for _, p := range set.Parts {
		for _, q := range p.Questions {
			s.o.answers[demoKey(p.Narrative, q.Question)] = q.Answer
		}
	}
	s.o.mu.Unlock()
	return set, nil
}

// prover answers every challenge from the answer key, at once.
func (o *demoOracle) prover() skill.Prover {
	return skill.ProverFunc(func() skill.Answerer {
		return skill.AnswerFunc(func(_ context.Context, c skill.Challenge) (string, error) {
			o.mu.RLock()
			defer o.mu.RUnlock()
			if a, ok := o.answers[demoKey(c.Narrative, c.Question)]; ok {
				return a, nil
			}
			return "unknown", nil
		})
	})
}
