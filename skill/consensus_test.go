package skill

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func consensusSet() *Set {
	s := &Set{Domain: "d", Parts: make([]Part, 3)}
	for i := range s.Parts {
		s.Parts[i].Narrative = fmt.Sprintf("narrative %d", i+1)
		for j := 0; j < 2; j++ {
			s.Parts[i].Questions = append(s.Parts[i].Questions, Question{
				Question: fmt.Sprintf("q%d.%d?", i+1, j+1), Answer: fmt.Sprintf("a%d%d", i+1, j+1), ReasoningType: Causal})
		}
	}
	s.ID = s.ContentID()
	return s
}

// failAt is a verdict that passed rounds before r and gave answer at r.
func failAt(s *Set, r int, answer string, late bool) Verdict {
	v := Verdict{Reason: ReasonWrongAnswer, SetID: s.ID}
	for i := 1; i <= r; i++ {
		q := s.Parts[i-1].Questions[0]
		rec := RoundRecord{Round: i, Question: q.Question, Answered: true, Correct: i < r, Budget: 15 * time.Second, Effective: time.Second, Answer: q.Answer}
		if i == r {
			rec.Answer = answer
			if late {
				rec.Effective = 20 * time.Second
			}
		}
		v.Rounds = append(v.Rounds, rec)
	}
	return v
}

func TestConsensusRetiresAfterThresholdDistinctProvers(t *testing.T) {
	c, err := NewConsensus(ConsensusConfig{Threshold: 3})
	if err != nil {
		t.Fatal(err)
	}
	s := consensusSet()
	q := s.Parts[1].Questions[0].Question
	// Round-1 failures, late answers, duplicates and different answers do
	// not count.
	for i := 0; i < 5; i++ {
		c.Observe(s, failAt(s, 1, "x", false), fmt.Sprintf("r1-%d", i))
		c.Observe(s, failAt(s, 2, "x", true), fmt.Sprintf("late-%d", i))
		c.Observe(s, failAt(s, 2, "x", false), "same-peer")
	}
	c.Observe(s, failAt(s, 2, "y", false), "p-y")
	if c.Retired(s.ID, 1, q) {
		t.Fatal("retired without a consensus")
	}
	c.Observe(s, failAt(s, 2, " X ", false), "p2")
	if !c.Observe(s, failAt(s, 2, "x", false), "p3") {
		t.Fatal("third distinct prover with the same answer did not retire the question")
	}
	if !c.Retired(s.ID, 1, q) {
		t.Fatal("question not retired")
	}
	got, err := RetiringSource{Source: mustCorpus(t, s), Consensus: c}.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.Parts[1].Questions); n != 1 || got.Parts[1].Questions[0].Question == q {
		t.Fatalf("served part 2 has %d questions including the retired one", n)
	}
	if len(s.Parts[1].Questions) != 2 {
		t.Fatal("the source's own set was modified")
	}
	// The last live question of a part is never retired.
	q2 := s.Parts[1].Questions[1]
	v := failAt(s, 2, "z", false)
	v.Rounds[1].Question = q2.Question
	for i := 0; i < 3; i++ {
		c.Observe(s, v, fmt.Sprintf("z-%d", i))
	}
	if c.Retired(s.ID, 1, q2.Question) {
		t.Fatal("the last question of a part was retired")
	}
	st := c.Stats()
	if st.Retired != 1 || st.Disputed != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestConsensusBounded(t *testing.T) {
	c, _ := NewConsensus(ConsensusConfig{Threshold: 2, MaxQuestions: 4, MaxAnswers: 2})
	s := consensusSet()
	for i := 0; i < 100; i++ {
		c.Observe(s, failAt(s, 2, fmt.Sprintf("w%d", i), false), fmt.Sprintf("p%d", i))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.tally) > 4 || len(c.tally[questionKey(s.ID, 1, s.Parts[1].Questions[0].Question)]) > 2 {
		t.Fatalf("tally unbounded: %d questions", len(c.tally))
	}
}

func mustCorpus(t *testing.T, s *Set) *Corpus {
	c, err := NewCorpus("t", []*Set{s}, nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
