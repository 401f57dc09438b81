package httpgw

import (
	"fmt"
	"net/http"
	"runtime"
	"testing"
	"weak"
)

// A session that ended without a verdict (here: aborted at its start
// with a bad key, two requests and no proof of work) is forgotten early
// when the table holds 4 times the open-session limit (http.md §4.5),
// but its forget timer still held it, its core session and its state
// for the 2 minutes of KeepDone: forgetting it saved no memory, and
// clients at the door's request rate (200 creates a second) kept some
// 24,000 such sessions alive at once. A session forgotten early now has
// its timer stopped, and the garbage collector takes it.
func TestSessionsForgottenEarlyAreFreed_h129(t *testing.T) {
	g, _, base := fakeDoor(t, func(c *Config) {
		c.TrustedProxies = loopbackProxies
		c.MaxSessions = 4 // a table of 16
	})
	const churn = 96
	var held []weak.Pointer[session]
	for i := range churn {
		client := fmt.Sprintf("198.51.%d.7", 100+i%16) // within each /24's request rate
		var v Session
		if st, code := as(t, base, client, http.MethodPost, "/v1/sessions", createBody(t), &v); st != http.StatusCreated {
			t.Fatalf("create %d: %d %s", i, st, code)
		}
		g.mu.Lock()
		s := g.sessions[v.SessionID]
		g.mu.Unlock()
		held = append(held, weak.Make(s))
		if st, code := as(t, base, client, http.MethodPost, "/v1/sessions/"+v.SessionID+"/start", `{"public_key":"AAAA","signature":"AAAA"}`, nil); code != CodeBadKey {
			t.Fatalf("bad start %d: %d %s", i, st, code)
		}
	}
	g.mu.Lock()
	tracked := len(g.sessions)
	g.mu.Unlock()
	alive := 0
	for range 3 {
		runtime.GC()
		alive = 0
		for _, w := range held {
			if w.Value() != nil {
				alive++
			}
		}
		if alive <= tracked {
			break
		}
	}
	t.Logf("%d sessions created and aborted: %d in the table, %d still in memory", churn, tracked, alive)
	if alive > tracked {
		t.Fatalf("%d of %d aborted sessions still in memory with %d in the table: those forgotten early are held by their timers", alive, churn, tracked)
	}
}
