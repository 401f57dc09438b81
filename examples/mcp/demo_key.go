package main

import (
	"context"
	"crypto/sha256"
	"strings"

	"github.com/acaptcha/acaptcha/skill"
)

// demoKey is a DEMO-ONLY answer key over the embedded example sets, so that
// this example runs offline in seconds: it plays the assistant's reading
// (the "brain" that answers next_challenge) and the target node's LLM. A
// real assistant answers each challenge with its own model and memory; a
// real verifier never shares its answer key.
type demoKey map[[32]byte]string

func keyOf(narrative, question string) [32]byte {
	return sha256.Sum256([]byte(strings.Join(strings.Fields(narrative), " ") + "\x00" + strings.Join(strings.Fields(question), " ")))
}

func newDemoKey(sets []*skill.Set) demoKey {
	k := demoKey{}
	for _, s := range sets {
		for _, p := range s.Parts {
			for _, q := range p.Questions {
				k[keyOf(p.Narrative, q.Question)] = q.Answer
			}
		}
	}
	return k
}

// answer looks a challenge up; "unknown" (a wrong answer) when absent.
func (k demoKey) answer(narrative, question string) string {
	if a, ok := k[keyOf(narrative, question)]; ok {
		return a
	}
	return "unknown"
}

// prover answers every challenge from the key, at once.
func (k demoKey) prover() skill.Prover {
	return skill.ProverFunc(func() skill.Answerer {
		return skill.AnswerFunc(func(_ context.Context, c skill.Challenge) (string, error) {
			return k.answer(c.Narrative, c.Question), nil
		})
	})
}
