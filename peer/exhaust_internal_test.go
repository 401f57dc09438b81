package peer

import (
	"testing"
	"time"
)

// The exhaustion warning comes at once, then at most once per interval,
// counting the occasions held back.
func TestExhaustWarningRateLimited(t *testing.T) {
	var w rateWarn
	t0 := time.Now()
	for _, c := range []struct {
		at     time.Duration
		ok     bool
		missed uint64
	}{
		{0, true, 0},
		{time.Minute, false, 0},
		{exhaustWarnEvery - time.Second, false, 0},
		{exhaustWarnEvery, true, 2},
		{exhaustWarnEvery + time.Second, false, 0},
		{3 * exhaustWarnEvery, true, 1},
	} {
		missed, ok := w.allow(t0.Add(c.at), exhaustWarnEvery)
		if ok != c.ok || missed != c.missed {
			t.Fatalf("at %s: allow = %d, %v; want %d, %v", c.at, missed, ok, c.missed, c.ok)
		}
	}
	if exhaustWarnEvery != 10*time.Minute {
		t.Fatalf("exhaustWarnEvery = %s, want 10 minutes", exhaustWarnEvery)
	}
}
