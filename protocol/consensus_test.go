package protocol

import (
	"context"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/skill"
)

// Provers that pass round 1 and give the same wrong answer in round 2
// retire that question once the threshold of distinct peers is reached;
// the source then serves the set without it.
func TestVerifierFeedsConsensus(t *testing.T) {
	set := testSet("consensus")
	fb, err := skill.NewConsensus(skill.ConsensusConfig{Threshold: 3})
	if err != nil {
		t.Fatal(err)
	}
	src := skill.RetiringSource{Source: &staticSource{sets: []*skill.Set{set}}, Consensus: fb}
	a := newHost(t)
	va := newService(t, a, Config{Source: src, Feedback: fb})
	answers := oracle(set)
	wrongInRound2 := skill.ProverFunc(func() skill.Answerer {
		return skill.AnswerFunc(func(_ context.Context, c skill.Challenge) (string, error) {
			if c.Round == 2 {
				return "LOT-0000", nil
			}
			return answers[c.Question], nil
		})
	})
	// Six distinct peers over two round-2 questions: at least three gave
	// the same wrong answer to one of them.
	for i := 0; i < 6; i++ {
		b := newHost(t)
		newService(t, b, Config{Prover: wrongInRound2})
		connect(t, a, b, "tcp")
		res, err := va.Verify(testCtx(t, 20*time.Second), b.ID(), false)
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict.Reason != skill.ReasonWrongAnswer || res.Verdict.FailedRound != 2 {
			t.Fatalf("verdict %+v", res.Verdict)
		}
	}
	st := fb.Stats()
	if st.Observed != 6 || st.Retired != 1 {
		t.Fatalf("consensus stats %+v, want 6 observed and 1 retired", st)
	}
	served, err := src.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(served.Parts[1].Questions) != 1 {
		t.Fatalf("part 2 serves %d questions after one was retired", len(served.Parts[1].Questions))
	}
	if !fb.Retired(set.ID, 1, set.Parts[1].Questions[0].Question) && !fb.Retired(set.ID, 1, set.Parts[1].Questions[1].Question) {
		t.Fatal("neither part-2 question is retired")
	}
}
