package protocol

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// The prover charges a round the prompt tokens of the text its answerer
// reads (spec §9a): this round's challenge and every earlier round's (a
// chained answerer reads them again), each at least a token per 3 bytes.
// Counting white-space words alone charged a 32 KiB narrative without
// white space as one token, and rounds 2 and 3 re-read earlier rounds
// for free: 9 rounds of such text were charged 18 tokens.
func TestPromptTokensCharged(t *testing.T) {
	answer := skill.ProverFunc(func() skill.Answerer {
		return skill.AnswerFunc(func(context.Context, skill.Challenge) (string, error) { return "x", nil })
	})
	ma, mb := newHost(t), newHost(t)
	pr := newProved()
	svc := newService(t, mb, Config{Prover: answer, OnProved: pr.fn, HandshakeTimeout: 5 * time.Second})
	connect(t, ma, mb, "tcp")
	word := "cold-room-reading-at-site-B-logged-by-the-night-shift-"
	narr := strings.Repeat(word, skill.MaxNarrativeBytes/len(word))
	q := strings.Repeat("which-", skill.MaxQuestionBytes/6-1) + "x?"
	r := openRaw(t, ma, mb.ID())
	r.send(helloFrame(ma.ID(), mb.ID(), nil))
	if f, err := r.recv(); err != nil || f.GetHelloAck() == nil {
		t.Fatalf("ack: %v %v", f, err)
	}
	for round := uint32(1); round <= 3; round++ {
		r.send(challengeFrame(round, narr, q))
		if f, err := r.recv(); err != nil || f.GetAnswer() == nil {
			t.Fatalf("round %d: %v %v", round, f, err)
		}
	}
	r.send(&pb.Frame{Body: &pb.Frame_Verdict{Verdict: &pb.Verdict{Reason: "wrong_answer", FailedRound: 1}}})
	pr.next(t)
	svc.budgets.mu.Lock()
	left := svc.budgets.peers[ma.ID()].tokens.tokens
	svc.budgets.mu.Unlock()
	charged := float64(svc.cfg.MaxTokensPerVerifier) - left
	one := skill.PromptTokens(narr) + skill.PromptTokens(q)
	want := float64(one + 2*one + 3*one) // rounds 1, 1-2 and 1-3
	// The refill of the bucket while the session ran is a few tokens.
	if charged < want-50 || charged > want+1 {
		t.Fatalf("charged %.0f tokens for 3 rounds of %d bytes, want %.0f (%d a round's text, re-read by later rounds)",
			charged, len(narr)+len(q), want, one)
	}
	if one < (len(narr)+len(q))/3 {
		t.Fatalf("a round's text of %d bytes counted %d tokens", len(narr)+len(q), one)
	}
}
