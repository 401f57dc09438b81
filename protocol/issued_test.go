package protocol

import (
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

func TestIssueClockStrictlyIncreasingPerSubject(t *testing.T) {
	var c issueClock
	now := time.Unix(1_800_000_000, 400_000_000)
	a, b := peer.ID("a"), peer.ID("b")
	t1 := c.at(a, now)
	t2 := c.at(a, now.Add(100*time.Millisecond))
	t3 := c.at(a, now.Add(200*time.Millisecond))
	if !t1.Equal(now.Truncate(time.Second)) || !t2.Equal(t1.Add(time.Second)) || !t3.Equal(t2.Add(time.Second)) {
		t.Fatalf("same-second records dated %v %v %v", t1, t2, t3)
	}
	// Another subject is dated by the clock.
	if tb := c.at(b, now); !tb.Equal(t1) {
		t.Fatalf("other subject dated %v, want %v", tb, t1)
	}
	// Once the clock passes the last date, the clock wins again.
	if t4 := c.at(a, now.Add(10*time.Second)); !t4.Equal(now.Add(10 * time.Second).Truncate(time.Second)) {
		t.Fatalf("later record dated %v", t4)
	}
}

func TestIssueClockLeadBounded(t *testing.T) {
	var c issueClock
	now := time.Unix(1_800_000_000, 0)
	var last time.Time
	for i := 0; i < 200; i++ {
		last = c.at("a", now)
	}
	if lead := last.Sub(now); lead > maxIssueLead {
		t.Fatalf("issued_at ran %v ahead of the clock (cap %v)", lead, maxIssueLead)
	}
}

func TestIssueClockTableBounded(t *testing.T) {
	var c issueClock
	now := time.Unix(1_800_000_000, 0)
	for i := 0; i < maxIssueEntries+10; i++ {
		c.at(peer.ID(fmt.Sprint(i)), now.Add(time.Duration(i)*time.Second))
	}
	if n := len(c.last); n > maxIssueEntries {
		t.Fatalf("table holds %d entries, cap %d", n, maxIssueEntries)
	}
}

// A peer rejected and then accepted within the same second (issue 12:
// the rejection won the tie and the peer stayed refused): the verifier
// dates the second record after the first. The clock runs 1000 times
// slower than real time, so both sessions fall in one clock second.
func TestRecordsOfOneSubjectNeverTie(t *testing.T) {
	a, b := newHost(t), newHost(t)
	start := time.Now()
	base := start.Truncate(time.Second)
	slow := func() time.Time { return base.Add(time.Since(start) / 1000) }
	va := newService(t, a, Config{Source: sourceOf("tie-1", "tie-2"), Now: slow})
	newService(t, b, Config{Prover: constProver("definitely not it")})
	connect(t, a, b, "tcp")
	var dates []time.Time
	for i := 0; i < 2; i++ {
		res, err := va.Verify(testCtx(t, 20*time.Second), b.ID(), false)
		if err != nil {
			t.Fatal(err)
		}
		if res.Attestation == nil {
			t.Fatalf("session %d: no record (verdict %+v)", i, res.Verdict)
		}
		dates = append(dates, res.Attestation.IssuedAt)
	}
	if !dates[1].After(dates[0]) {
		t.Fatalf("second record dated %v, first %v: they tie", dates[1], dates[0])
	}
}

// audit84: once the lead is used up (maxIssueLead), a record that cannot
// be dated one second after the previous one was dated by the clock,
// before the previous record: a rejection issued then lost to the
// acceptance before it (later issued_at wins, attestation.md §5 and
// trust.md §1), so the verifier kept admitting the peer directly, and so
// did every node holding both records. The record is now dated as the
// previous one (a tie, which a rejection wins), never before it.
func TestIssueClockAudit84NeverBeforePrevious(t *testing.T) {
	var c issueClock
	now := time.Unix(1_800_000_000, 0)
	var prev time.Time
	for i := 0; i < 200; i++ {
		got := c.at("a", now.Add(time.Duration(i)*time.Millisecond))
		if i > 0 && got.Before(prev) {
			t.Fatalf("record %d dated %v, before the previous record's %v (a rejection dated so loses to the acceptance before it)", i+1, got, prev)
		}
		if lead := got.Sub(now); lead > maxIssueLead {
			t.Fatalf("record %d dated %v ahead of the clock (cap %v)", i+1, lead, maxIssueLead)
		}
		prev = got
	}
	// A clock stepped back far (beyond the lead) dates by the clock
	// again: a record an hour ahead would be not yet valid everywhere.
	if got := c.at("a", now.Add(-time.Hour)); !got.Equal(now.Add(-time.Hour)) {
		t.Fatalf("after the clock stepped back an hour, record dated %v", got)
	}
}

// audit84 (open, now fixed): the issue clock's lead was forgotten at a
// restart: a record dated ahead of the clock before it (up to a minute)
// was followed by one dated by the clock, before it, and a rejection so
// dated lost to the acceptance. NoteIssued (the node's start, from its
// store) makes the next record come after it; records over a second old
// are not kept (nothing new can tie with them).
func TestIssueClockSeededAfterRestart(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var c issueClock
	ahead := now.Add(30 * time.Second)
	c.note("a", ahead, now)
	c.note("a", now, now) // older than what it holds: ignored
	c.note("b", now.Add(-time.Hour), now)
	if got := c.at("a", now.Add(200*time.Millisecond)); !got.After(ahead) {
		t.Fatalf("record after the restart dated %v, not after the one dated %v before it", got, ahead)
	}
	c.mu.Lock()
	_, kept := c.last["b"]
	c.mu.Unlock()
	if kept {
		t.Fatal("a record dated an hour ago is kept")
	}
	if got := c.at("b", now); !got.Equal(now) {
		t.Fatalf("a subject last dated an hour ago: record dated %v, want the clock's %v", got, now)
	}
}

// A full table: 16,384 other subjects dated in the current second.
// Evicting must not let the next record about a subject be dated before
// (or with) its previous one. The table was cleared when full, so the
// subject's entry dated ahead of the clock was forgotten and its next
// record was dated by the clock, before the acceptance that preceded it.
func TestIssueClockFullTableKeepsOrder(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	fill := func(c *issueClock, n int) {
		for i := 0; i < n; i++ {
			c.at(peer.ID(fmt.Sprint("sybil-", i)), now.Add(time.Duration(i)*time.Microsecond))
		}
	}
	t.Run("ahead", func(t *testing.T) {
		var c issueClock
		var prev time.Time
		for i := 0; i < 4; i++ {
			prev = c.at("victim", now)
		}
		if !prev.Equal(now.Add(3 * time.Second)) {
			t.Fatalf("fourth record dated %v", prev)
		}
		fill(&c, maxIssueEntries+1)
		if next := c.at("victim", now.Add(500*time.Millisecond)); !next.After(prev) {
			t.Fatalf("after the table filled, the next record is dated %v, the previous %v", next, prev)
		}
		if n := len(c.last); n > maxIssueEntries {
			t.Fatalf("table holds %d entries, cap %d", n, maxIssueEntries)
		}
	})
	t.Run("evicted", func(t *testing.T) {
		// The subject's own entry is among the evicted ones.
		var c issueClock
		prev := c.at("victim", now)
		fill(&c, 2*maxIssueEntries)
		if next := c.at("victim", now.Add(900*time.Millisecond)); !next.After(prev) {
			t.Fatalf("after its entry was evicted, the next record is dated %v, the previous %v", next, prev)
		}
		if lead := c.at("fresh", now).Sub(now); lead > maxIssueLead {
			t.Fatalf("a fresh subject dated %v ahead", lead)
		}
	})
	t.Run("stale first", func(t *testing.T) {
		// Entries of past seconds go without raising the floor: a
		// fresh subject is dated by the clock.
		var c issueClock
		fill(&c, maxIssueEntries)
		later := now.Add(2 * time.Second)
		if got := c.at("fresh", later); !got.Equal(later) {
			t.Fatalf("fresh subject dated %v, want %v", got, later)
		}
		if !c.floor.IsZero() {
			t.Fatalf("floor %v after evicting only past entries", c.floor)
		}
	})
}
