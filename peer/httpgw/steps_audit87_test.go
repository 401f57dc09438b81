package httpgw

import (
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestIdleStepsAreReads (audit 87): reads (GETs, requests naming no route
// or no session) are rate-limited, but a step request (start, probe,
// answer) naming a session of the client's own was not, whatever it
// did: an answer to a done session is the session's GET by another
// name (200 with its verdict, an attestation and all), and a step in
// the wrong state, to an expired session or with a body refused changes
// nothing either. One created session let its client send such requests
// without any limit (past the read bucket's 50: 110 of 110 answered).
// A step request that leaves its session as it was is now a read.
func TestIdleStepsAreReads(t *testing.T) {
	key, _ := newAnswerKey(t)
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	_, _, base := fakeDoor(t, func(c *Config) { c.TrustedProxies = loopbackProxies; c.Now = clock })
	const client = "198.51.100.7"

	// A session awaiting its start: steps in the wrong state, and a start
	// with a body refused, leave it as it was.
	var v Session
	if st, code := as(t, base, client, http.MethodPost, "/v1/sessions", createBody(t), &v); st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, code)
	}
	idle := []struct{ path, body, code string }{
		{"/answer", `{"round":1,"answer":"x"}`, CodeWrongState},
		{"/probe", `{"seq":1,"nonce":"AAAAAAAAAAA="}`, CodeWrongState},
		{"/start", `{"pow":"AA=="}`, CodeBadRequest},
		{"/start", `[]`, CodeBadRequest},
	}
	served, limited := 0, 0
	for i := range DefaultRequestBurst + 10 {
		c := idle[i%len(idle)]
		st, code := as(t, base, client, http.MethodPost, "/v1/sessions/"+v.SessionID+c.path, c.body, nil)
		switch {
		case st == http.StatusTooManyRequests && code == CodeRateLimited:
			limited++
		case code == c.code:
			served++
		default:
			t.Fatalf("request %d (%s %s): %d %s, want %s or rate_limited", i, c.path, c.body, st, code, c.code)
		}
	}
	t.Logf("%d steps that change nothing: %d answered, %d rate_limited", DefaultRequestBurst+10, served, limited)
	if served > DefaultRequestBurst {
		t.Fatalf("%d idle steps answered, want at most the read burst (%d)", served, DefaultRequestBurst)
	}
	// The session is as it was: its own client starts and runs it once
	// the bucket has refilled (steps that advance it are not reads).
	mu.Lock()
	now = now.Add(10 * time.Second)
	mu.Unlock()
	if st, code := as(t, base, client, http.MethodGet, "/v1/sessions/"+v.SessionID, "", &v); st != http.StatusOK || v.State != StateAwaitingStart {
		t.Fatalf("the session after the idle steps: %d %s %s", st, code, v.State)
	}
	// An honest client (its own prefix) runs a whole session with its
	// reads spent: start, probes and answers are not reads.
	a := newAgent(t, base)
	a.hc.Transport = xffTransport{client: "203.0.113.9"}
	for range DefaultRequestBurst {
		if st, _ := as(t, base, "203.0.113.9", http.MethodGet, "/openapi.json", "", nil); st != http.StatusOK {
			t.Fatalf("read %d: %d", 0, st)
		}
	}
	done := a.run(key.answer)
	if !done.Result.Accepted {
		t.Fatalf("the honest session: %+v", done.Result)
	}
	// Answers to the done session are reads: past the bucket, limited.
	mu.Lock()
	now = now.Add(10 * time.Second)
	mu.Unlock()
	served, limited = 0, 0
	for range DefaultRequestBurst + 10 {
		st, code := as(t, base, client, http.MethodPost, "/v1/sessions/"+done.SessionID+"/answer", `{"round":1,"answer":"x"}`, nil)
		switch {
		case st == http.StatusOK:
			served++
		case st == http.StatusTooManyRequests && code == CodeRateLimited:
			limited++
		default:
			t.Fatalf("answer to a done session: %d %s", st, code)
		}
	}
	t.Logf("answers to a done session: %d answered, %d rate_limited", served, limited)
	if served > DefaultRequestBurst || limited == 0 {
		t.Fatalf("%d answers to a done session answered, %d limited: want at most the read burst (%d)", served, limited, DefaultRequestBurst)
	}
}

// xffTransport names its client in X-Forwarded-For (the door trusts the
// loopback test client as a proxy).
type xffTransport struct{ client string }

func (x xffTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Forwarded-For", x.client)
	return http.DefaultTransport.RoundTrip(r)
}
