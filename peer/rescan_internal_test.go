package peer

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Back-offs that end a few milliseconds apart (remote peers choose when:
// a decline's retry) wake the maintenance loop at most once per
// contactWakeGap, each wake walking the back-off table and the connected
// peers: 200 ends over 1 s woke it up to 100 times (every 10 ms) before.
func TestContactRescansSpaced(t *testing.T) {
	src := exampleCorpus(t)
	n := newBareNode(t, Config{Source: src, AttestPolicy: AttestAll, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	c := &n.contact
	time.Sleep(50 * time.Millisecond) // the loop is waiting
	start := time.Now()
	before := c.rescans.Load()
	const ends = 200
	for i := range ends {
		until := start.Add(time.Duration(i+1) * 5 * time.Millisecond)
		c.mu.Lock()
		c.putBackoffLocked(peer.ID(fmt.Sprint("staggered-", i)), &contactBackoff{until: until, reason: "test"}, start)
		c.mu.Unlock()
		n.wakeAt(until)
	}
	time.Sleep(time.Until(start.Add(ends*5*time.Millisecond + 300*time.Millisecond)))
	elapsed := time.Since(start)
	got := c.rescans.Load() - before
	// At most four a second (contactWakeGap), plus the two ends.
	if most := int64(elapsed.Seconds()*4) + 2; got > most || got == 0 {
		t.Fatalf("%d rescans in %s for %d staggered back-off ends, want 1..%d", got, elapsed.Round(time.Millisecond), ends, most)
	}
	t.Logf("%d rescans in %s", got, elapsed.Round(time.Millisecond))
}
