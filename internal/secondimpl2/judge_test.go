package secondimpl2

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// matches is rule M1 of verification.md only (norm-equal to an accepted
// variant); the full matcher (M2–M5) is not part of this implementation.
func matches(q *specQuestion, ans string) bool {
	vars := q.Answers
	if len(vars) == 0 {
		vars = []string{q.Answer}
	}
	n := normAnswer(ans)
	for _, v := range vars {
		if normAnswer(v) == n {
			return true
		}
	}
	return false
}

// judgeAnswer applies the precedence of verification.md "Session verdict"
// to an answered round; "" means the round passes.
func judgeAnswer(q *specQuestion, ans string, elapsed, since, credit, budget, total time.Duration) (reason string, correct bool, effective time.Duration) {
	effective = elapsed - credit
	if effective < 0 {
		effective = 0
	}
	correct = len(ans) <= 64 && matches(q, ans)
	switch {
	case since-credit > total:
		reason = "total_timeout"
	case effective > budget:
		reason = "timeout"
	case !correct:
		reason = "wrong_answer"
	}
	return
}

// noAnswerReason: the round's deadline passed with no frame (protocol.md
// §5 step 5): total_timeout only when T_total set the deadline, strictly.
func noAnswerReason(roundStart, credit, budget, total time.Duration) string {
	if total-roundStart+credit < budget+credit {
		return "total_timeout"
	}
	return "timeout"
}

func TestVectorReasons(t *testing.T) {
	var v struct {
		Desc   string `json:"description"`
		Set    specSet
		Policy struct {
			Rounds             int
			Tau, Total, Credit int64
			TauMs              int64 `json:"tau_ms"`
			TotalMs            int64 `json:"total_ms"`
			CreditMs           int64 `json:"rtt_credit_ms"`
		}
		// The reason each end gives, as the vector defines it (since
		// document 1.5.31 of verification.md; before, its values had to
		// be read from their names).
		Events       map[string]struct{ Reason string } `json:"events"`
		BeforeEvents map[string]struct{ Reason string } `json:"before_round_1_events"`
		Cases        []struct {
			Name    string
			RTT     int64 `json:"rtt_ms"`
			Answers []struct {
				Answer  string
				Elapsed int64 `json:"elapsed_ms"`
				Since   int64 `json:"since_start_ms"`
			}
			End struct {
				Event      string
				Waited     int64  `json:"waited_ms"`
				RoundStart int64  `json:"round_start_ms"`
				Before     string `json:"before_round_1"`
			}
			Want struct {
				Accepted    bool
				Reason      string
				FailedRound int `json:"failed_round"`
				Rounds      []jsonRound
			}
		}
		Records []struct {
			Name         string
			Accepted     bool
			Reason       string
			FailedRound  uint32 `json:"failed_round"`
			Entries      int    `json:"round_entries"`
			Valid        bool
			IssuerWrites bool `json:"issuer_writes"`
		}
	}
	loadVector(t, "reasons.json", &v)
	// Part 1 has two questions: the vector must say which one is asked.
	if !strings.Contains(v.Desc, "first question of its part") {
		t.Errorf("reasons.json does not say which question each round asks")
	}
	ms := func(x int64) time.Duration { return time.Duration(x) * time.Millisecond }
	budget, total := ms(v.Policy.TauMs), ms(v.Policy.TotalMs)
	for _, c := range v.Cases {
		credit := ms(min(c.RTT, v.Policy.CreditMs))
		reason := ""
		var rounds []jsonRound
		for i, a := range c.Answers {
			// the first question of each part, as the vector says
			q := &v.Set.Parts[i].Questions[0]
			r, ok, eff := judgeAnswer(q, a.Answer, ms(a.Elapsed), ms(a.Since), credit, budget, total)
			rounds = append(rounds, jsonRound{Round: uint32(i + 1), BudgetMs: uint64(v.Policy.TauMs), EffectiveMs: uint64(eff / time.Millisecond), Correct: ok})
			if r != "" {
				reason = r
				break
			}
		}
		if reason == "" && c.End.Event != "" {
			eff := max(ms(c.End.Waited)-credit, 0)
			rounds = append(rounds, jsonRound{Round: uint32(len(rounds) + 1), BudgetMs: uint64(v.Policy.TauMs), EffectiveMs: uint64(eff / time.Millisecond)})
			reason = v.Events[c.End.Event].Reason
			if c.End.Event == "no_answer_deadline" {
				reason = noAnswerReason(ms(c.End.RoundStart), credit, budget, total)
			}
			if reason == "" {
				t.Fatalf("%s: unknown event %q", c.Name, c.End.Event)
			}
		}
		if c.End.Before != "" {
			reason = v.BeforeEvents[c.End.Before].Reason
		}
		accepted := reason == ""
		if accepted {
			reason = "ok"
		}
		fr := 0
		if !accepted {
			fr = max(len(rounds), 1)
		}
		if rounds == nil {
			rounds = []jsonRound{}
		}
		if c.Want.Rounds == nil {
			c.Want.Rounds = []jsonRound{}
		}
		if accepted != c.Want.Accepted || reason != c.Want.Reason || fr != c.Want.FailedRound || !reflect.DeepEqual(rounds, c.Want.Rounds) {
			t.Errorf("%s: got %v %s %d %+v, want %+v", c.Name, accepted, reason, fr, rounds, c.Want)
		}
	}
	for _, c := range v.Records {
		r := &attRecord{Issuer: []byte{0, 1, 1}, Subject: []byte{0, 1, 2}, Accepted: c.Accepted, Reason: c.Reason,
			FailedRound: c.FailedRound, Nonce: make([]byte, 32), Digest: make([]byte, 32),
			Policy: attPolicy{Rounds: 3, TauMs: 2000, TotalMs: 5000}, IssuedAt: 1, ExpiresAt: 2}
		for i := 0; i < c.Entries; i++ {
			r.Rounds = append(r.Rounds, attRound{Round: uint32(i + 1), BudgetMs: 2000, EffectiveMs: 100, Correct: c.Accepted})
		}
		if structureOK(r) != c.Valid {
			t.Errorf("record %s: valid %v", c.Name, !c.Valid)
		}
		writes := uint32(0)
		if !c.Accepted {
			writes = uint32(max(c.Entries, 1))
		}
		if (writes == c.FailedRound) != c.IssuerWrites {
			t.Errorf("record %s: issuer writes %d", c.Name, writes)
		}
	}
}
