package main

import (
	"context"
	"crypto/sha256"
	"strings"

	"github.com/acaptcha/acaptcha/peer/httpgw"
	"github.com/acaptcha/acaptcha/skill"
)

// demoKey is a DEMO-ONLY answer key over the embedded example sets, so
// that this example runs offline in seconds: it stands in for an agent's
// reading. A real agent answers each challenge with its own model and
// memory; a real verifier never shares its answer key.
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
func (k demoKey) answer(_ context.Context, c *httpgw.Challenge) (string, error) {
	if a, ok := k[keyOf(c.Narrative, c.Question)]; ok {
		return a, nil
	}
	return "unknown", nil
}
