package httpgw

import (
	"net/http"
	"testing"
)

// TestVerdictsOutliveChurn (audit 87): an ended session stays readable
// for 2 minutes (http.md §4.5), and an answer to a done session (the
// server timed its round out) gets the verdict (§4.4). But the session
// table forgot every ended session at once whenever it held 4 times the
// session limit: a client that created sessions and aborted each with a
// bad start key (two requests each, no proof of work) made every
// verdict unreadable within seconds (unknown_session), while the
// sessions stayed in memory anyway (each one's forget timer holds it for
// the 2 minutes). Only sessions that ended without a verdict are
// forgotten early now; one with a verdict was paid and drew a set, so
// the draw budgets bound them.
func TestVerdictsOutliveChurn(t *testing.T) {
	key, _ := newAnswerKey(t)
	_, _, base := fakeDoor(t, func(c *Config) {
		c.TrustedProxies = loopbackProxies
		c.MaxSessions = 4 // a table of 16
	})
	a := newAgent(t, base)
	a.hc.Transport = xffTransport{client: "203.0.113.9"}
	done := a.run(key.answer)
	if !done.Result.Accepted {
		t.Fatalf("honest session: %+v", done.Result)
	}
	const churn = 40
	for i := range churn {
		var v Session
		if st, code := as(t, base, "198.51.100.7", http.MethodPost, "/v1/sessions", createBody(t), &v); st != http.StatusCreated {
			t.Fatalf("create %d: %d %s", i, st, code)
		}
		if st, code := as(t, base, "198.51.100.7", http.MethodPost, "/v1/sessions/"+v.SessionID+"/start", `{"public_key":"AAAA","signature":"AAAA"}`, nil); code != CodeBadKey {
			t.Fatalf("bad start %d: %d %s", i, st, code)
		}
	}
	var v Session
	st, code := as(t, base, "203.0.113.9", http.MethodGet, "/v1/sessions/"+done.SessionID, "", &v)
	t.Logf("after %d sessions created and aborted by another client: GET of a session done a moment before: %d %s %s", churn, st, code, v.State)
	if st != http.StatusOK || v.State != StateDone || v.Result == nil {
		t.Fatalf("a done session was forgotten within its 2 minutes: %d %s", st, code)
	}
	if st, _ := as(t, base, "203.0.113.9", http.MethodPost, "/v1/sessions/"+done.SessionID+"/answer", `{"round":3,"answer":"x"}`, &v); st != http.StatusOK || v.State != StateDone {
		t.Fatalf("a late answer to the done session: %d, want 200 with its verdict", st)
	}
}
