package peer

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// A flood of fresh peer IDs opening streams on a gated protocol wrote an
// INFO line per peer, and once the decision table was full scanned all of
// it under the trust lock per new peer for the oldest entry. Now the
// lines are rate-limited (a burst, then about one a second) and a full
// table forgets refusals and stale decisions first, in batches: a peer
// admitted lately keeps its entry.
func TestGateFloodBounded(t *testing.T) {
	var logs lockedBuffer
	n := newBareNode(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	_, friend := testutil.NewKey(t)
	n.noteGate("/app/1", friend, Admission{Admitted: true, Via: AdmittedDirect})
	refused := Admission{Reason: NotAdmittedUnattested}
	const flood = maxGateDecisions + 1000
	start := time.Now()
	for range flood {
		_, p := testutil.NewKey(t)
		n.noteGate("/app/1", p, refused)
	}
	elapsed := time.Since(start)
	lines := logs.lines("INFO", "refused peer on gated protocol")
	if want := warnBurst + 1 + int(elapsed/warnRefill); lines > want {
		t.Fatalf("%d INFO lines for %d fresh peers in %s, want at most %d", lines, flood, elapsed.Round(time.Millisecond), want)
	}
	n.trust.mu.RLock()
	size, kept := len(n.trust.gates), n.trust.gates[friend] != nil
	n.trust.mu.RUnlock()
	if size > maxGateDecisions {
		t.Fatalf("%d gate decisions remembered, bound %d", size, maxGateDecisions)
	}
	if !kept {
		t.Fatal("the decision for a peer admitted a moment ago was forgotten for fresh refused peers")
	}
	t.Logf("%d fresh peers in %s: %d INFO lines, %d decisions kept", flood, elapsed.Round(time.Millisecond), lines, size)
}

// The per-peer log limiter allows a burst of warnBurst lines, then about
// one a second, as its comment says (it let ten a second through).
func TestLogLimiterSustainedRate(t *testing.T) {
	var l lineLimiter
	now := time.Unix(10000, 0)
	written := 0
	for i := range 60 * 100 { // 100 fresh peers a second for a minute
		now = now.Add(10 * time.Millisecond)
		if ok, _, _ := l.allow(warnKey{peer.ID(fmt.Sprint(i)), "m"}, now); ok {
			written++
		}
	}
	if max := warnBurst + 61; written > max {
		t.Fatalf("%d lines in 60 s, want at most %d (a burst of %d, then one a second)", written, max, warnBurst)
	}
	if written < warnBurst+50 {
		t.Fatalf("only %d lines in 60 s", written)
	}
}
