package protocol

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// issueClock makes the issued_at times of the records one verifier signs
// about one subject strictly increasing (spec/attestation.md §2,
// "issued_at"). issued_at has one-second resolution, and admission takes
// the newest record of an issuer about a subject, breaking ties in favour
// of the rejection: without this, a peer rejected and then accepted within
// the same second would stay refused everywhere the two records travel.
// A record that would tie with (or precede) the previous one is dated one
// second after it, as long as that stays within a minute of the local
// clock (far inside MaxClockSkew), and as the previous one (a tie) when
// that would not; the per-peer draw budget keeps the number of records
// per subject small, so the shift never accumulates.
//
// The table is bounded (maxIssueEntries). When it is full, the entries
// dated before the current second go first (a new record is dated at or
// after it, so they cannot tie with one), then the earliest dated ones,
// and floor keeps the latest date evicted that way: a subject not in the
// table is dated as if its previous record were dated floor. Evicting
// never lets a record be dated before the previous one about its subject.
// (The table was cleared when full: a subject whose newest record was
// dated ahead of the clock then had its next one dated by the clock,
// before it, so that a rejection lost to the acceptance before it; filling
// the table takes 16,384 records signed within a second, beyond the
// default draw budgets but not a raised --max-draws.)
type issueClock struct {
	mu   sync.Mutex
	last map[peer.ID]time.Time
	// floor is the latest date of an entry evicted while it could still
	// matter (dated at or after the second it was evicted in); zero when
	// none was.
	floor time.Time
}

// maxIssueLead is how far ahead of the local clock issueClock may date a
// record.
const maxIssueLead = time.Minute

// maxIssueEntries bounds issueClock's table; entries dated before the
// current second are useless (a new record cannot tie with them) and go
// first.
const maxIssueEntries = 1 << 14

// issueEvictShare: a full table frees at least this fraction of its
// entries at once (evictLocked), so that eviction costs O(1) per record
// amortised.
const issueEvictShare = 8

// at returns the issued_at time for a new record about subject at local
// time now (truncated to the second).
func (c *issueClock) at(subject peer.ID, now time.Time) time.Time {
	t := now.UTC().Truncate(time.Second)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[peer.ID]time.Time{}
	}
	prev, ok := c.last[subject]
	if !ok && !c.floor.IsZero() {
		// Its entry may have been evicted: dated floor at the latest.
		prev, ok = c.floor, true
	}
	if ok && !t.After(prev) {
		switch next := prev.Add(time.Second); {
		case next.Sub(t) <= maxIssueLead:
			t = next
		case prev.Sub(t) <= maxIssueLead:
			// The lead is used up: dated as the previous record (a tie,
			// which a rejection wins), never before it. Dated by the
			// clock, a rejection lost to the acceptance before it (the
			// later issued_at wins) and the peer stayed admitted.
			t = prev
		}
		// Otherwise the clock stepped back further than the lead: a
		// record dated after the previous one would not be valid yet
		// anywhere, so the clock dates it.
	}
	c.putLocked(subject, t, now)
	return t
}

// putLocked records at as the date of the newest record about subject,
// evicting first when the table is full.
func (c *issueClock) putLocked(subject peer.ID, at, now time.Time) {
	if _, ok := c.last[subject]; !ok && len(c.last) >= maxIssueEntries {
		c.evictLocked(now.UTC().Truncate(time.Second))
	}
	c.last[subject] = at
}

// evictLocked frees at least a issueEvictShare-th of the full table: every
// entry dated before t (the current second: at returns t or later, so no
// new record can tie with them), then the earliest dated entries, whose
// latest date becomes floor.
func (c *issueClock) evictLocked(t time.Time) {
	counts := map[time.Time]int{}
	for _, p := range c.last {
		counts[p]++
	}
	dates := slices.SortedFunc(maps.Keys(counts), time.Time.Compare)
	need := max(len(c.last)/issueEvictShare, 1)
	var cut time.Time
	freed := 0
	for _, d := range dates {
		if freed >= need && !d.Before(t) {
			break
		}
		cut, freed = d, freed+counts[d]
	}
	for id, p := range c.last {
		if !p.After(cut) {
			delete(c.last, id)
		}
	}
	if c.floor.Before(t) {
		c.floor = time.Time{} // no new record can tie with it any more
	}
	if !cut.Before(t) && cut.After(c.floor) {
		c.floor = cut
	}
}

// note records at, the issued_at of a record this verifier signed about
// subject before (read back from a store at start), as the previous
// record about subject when it is later than the one held and not more
// than a second before now: a node dated such a record up to maxIssueLead
// ahead of its clock, and a restart forgot it, so a rejection signed just
// after the restart was dated before that record and lost to it.
func (c *issueClock) note(subject peer.ID, at, now time.Time) {
	at = at.UTC().Truncate(time.Second)
	if at.Before(now.UTC().Truncate(time.Second).Add(-time.Second)) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[peer.ID]time.Time{}
	}
	if prev, ok := c.last[subject]; ok && !at.After(prev) {
		return
	}
	c.putLocked(subject, at, now)
}

// NoteIssued tells the verifier of a record it signed about subject
// before, dated at (its issued_at): a node calls it at start for the
// records of its store, so that the next record about subject is dated
// after that one even when it was dated ahead of the clock before a
// restart (spec/attestation.md §5). Records more than a second old are
// ignored: no new record can tie with them.
func (s *Service) NoteIssued(subject peer.ID, at time.Time) {
	s.issued.note(subject, at, s.now())
}
