package httpgw

import (
	"net/http"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/skill"
)

// http.md §4: a session's expires_at is "when the current step times
// out". The response that delivers a step carried the previous step's
// instant: the start's response (probe 1, acked within 5 s) said the
// start window's 15 s, and the response carrying round 1 said probe 1's
// deadline, seconds before the round's own. Each delivering response now
// says when its step times out: within_ms after it for a probe, the
// answer wait plus the 250 ms grace for a challenge (the server's timer
// counts from the flush, a moment later).
func TestExpiresAtIsTheDeliveredStepsDeadline(t *testing.T) {
	key, sets := newAnswerKey(t)
	p := skill.DefaultPolicy()
	p.Rounds, p.Tau, p.Total, p.RTTCredit = 2, 20*time.Second, 60*time.Second, 10*time.Millisecond
	_, a := policyDoor(t, sets[0], p)
	v := a.create()
	near := func(what string, got time.Time, want time.Time) {
		t.Helper()
		if d := got.Sub(want); d < -time.Second || d > time.Second {
			t.Fatalf("%s: expires_at %s, want about %s (off by %v)", what, got.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano), d)
		}
	}
	var cur Session
	if st, eb := a.post("/v1/sessions/"+v.SessionID+"/start", a.startReq(v), &cur); st != http.StatusOK || cur.State != StateProbing {
		t.Fatalf("start: %d %+v %+v", st, eb, cur)
	}
	near("the start's response (probe 1)", cur.ExpiresAt, time.Now().Add(time.Duration(cur.Probe.WithinMs)*time.Millisecond))
	for range 16 {
		if cur.State != StateProbing {
			break
		}
		next := Session{}
		if st, eb := a.post("/v1/sessions/"+v.SessionID+"/probe", probeRequest{Seq: ptr(cur.Probe.Seq), Nonce: ptr(cur.Probe.Nonce)}, &next); st != http.StatusOK {
			t.Fatalf("probe: %d %+v", st, eb)
		}
		cur = next
	}
	for round := 1; round <= 2; round++ {
		if cur.State != StateAnswering || cur.Challenge.Round != round {
			t.Fatalf("round %d: %+v", round, cur)
		}
		near("the response carrying a round", cur.ExpiresAt,
			time.Now().Add(time.Duration(cur.Challenge.AnswerWithinMs)*time.Millisecond+AnswerGrace))
		var again Session
		if st, _ := a.get("/v1/sessions/"+v.SessionID, &again); st != http.StatusOK || !again.ExpiresAt.Equal(cur.ExpiresAt) && again.ExpiresAt.Sub(cur.ExpiresAt).Abs() > time.Second {
			t.Fatalf("a GET after delivery: %d, expires_at %s, the delivering response said %s", st, again.ExpiresAt, cur.ExpiresAt)
		}
		if round == 1 {
			// round 2's response comes after an answer
			ans := key.answer(cur.Challenge)
			next := Session{}
			if st, eb := a.post("/v1/sessions/"+v.SessionID+"/answer", answerRequest{Round: ptr(1), Answer: &ans}, &next); st != http.StatusOK {
				t.Fatalf("answer: %d %+v", st, eb)
			}
			cur = next
		}
	}
}
