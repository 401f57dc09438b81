// Package secondtrust is a second implementation of the decision rules of
// spec/trust.md §1 (admission, superseding, revocation, the quorum of
// vouchers) and the validity window of spec/attestation.md §7, written
// from the text alone (not from peer/trust.go, peer/admission*.go,
// peer/store or protocol/attestation). Its tests check it against the
// spec vectors and, differentially, against the Go node.
//
// Every time is an int64 Unix second, compared as such (attestation.md
// §6; trust.md §1 Superseding).
//
// Where the text had to be read (trust.md document 1.6.14, as found):
//
//   - §1 Superseding, the node's own records: "on a full tie the record
//     held stays" names none of the node's own records, which it keeps
//     all of. Read as "the first issued"; the Go node kept that one while
//     running and the first in store key order after a restart. Resolved
//     in document 1.6.15: the lower source rank counts (CurrentOwn).
//   - §1 "own newest attestation ... valid": the newest record that counts,
//     then its validity (not the newest valid one). An own rejection that
//     expired hides an older acceptance still valid: `expired`. The Go
//     node agrees; vector case
//     newest_own_rejection_expired_hides_older_valid_acceptance.
//   - §1 precedence table: no row for an own newest record not yet valid
//     (issued more than 5 min ahead), which no issuer dates (attestation.md
//     §5: at most a minute ahead); read as `expired` and not generated.
//   - §1 Quorum: "names the K or more issuers" read as every issuer that
//     weighs, not K of them (the Go node agrees).
//   - §1 Blocking: the block's end is read as exclusive (blocked while
//     now < until); the differential test cannot set a block (none is
//     stored), so Blocked is checked by no Go comparison.
//   - §1 Revocation dating: "the node's own newest attestation" read as
//     the current one of all the node's records of the peer (revoked ones
//     included), honoured when at most 300 s ahead of the clock.
package secondtrust

import "sort"

// MaxClockSkew is the clock-skew allowance of attestation.md §6 step 11,
// in seconds.
const MaxClockSkew = 300

// Record is what the decision rules read of an attestation: the parties,
// the verdict, the two times and the provenance source (attestation.md §3).
type Record struct {
	Issuer, Subject string
	Accepted        bool
	IssuedAt        int64
	ExpiresAt       int64
	Source          string
}

// Rank is the rank of a provenance source (attestation.md §3.1): any
// value outside the four kinds, the empty one included, is rank 0.
func Rank(source string) int {
	switch source {
	case "procedural":
		return 1
	case "corpus":
		return 2
	case "hybrid", "llm":
		return 3
	}
	return 0
}

// AnySource is the minimum that every record meets (trust.md §1,
// --require-source any).
const AnySource = "any"

// Meets reports whether a record of source src meets the minimum min
// (attestation.md §3.1, trust.md §1): min is AnySource or one of the four
// kinds; a record naming no source meets only AnySource. A minimum that is
// none of these is met by nothing (attestation.md §6 step 13).
func Meets(src, min string) bool {
	if min == AnySource {
		return true
	}
	rm := Rank(min)
	if rm == 0 {
		return false
	}
	return Rank(src) >= rm
}

// ValidAt is attestation.md §7 for a record that passed steps 5-7:
// issued_at − 5 min ≤ t < expires_at.
func ValidAt(r Record, t int64) bool {
	return r.IssuedAt-MaxClockSkew <= t && t < r.ExpiresAt
}

// Supersedes reports whether a supersedes b (trust.md §1 Superseding): the
// later issued_at; at equal issued_at a rejection beats an acceptance; then
// the later expires_at. Neither supersedes the other on a full tie.
func Supersedes(a, b Record) bool {
	if a.IssuedAt != b.IssuedAt {
		return a.IssuedAt > b.IssuedAt
	}
	if a.Accepted != b.Accepted {
		return !a.Accepted
	}
	return a.ExpiresAt > b.ExpiresAt
}

// Offer is the outcome of offering a record of a pair to the holder of
// the pair's current record (trust.md §1; gossip validation step 9).
type Offer string

const (
	OfferNew       Offer = "new"       // nothing held, or the newcomer supersedes the held record
	OfferDuplicate Offer = "duplicate" // a full tie: the held record stays
	OfferStale     Offer = "stale"     // the held record supersedes the newcomer
)

// Consider says what a newcomer does to the held record of its pair
// (held nil: none).
func Consider(held *Record, r Record) Offer {
	switch {
	case held == nil || Supersedes(r, *held):
		return OfferNew
	case Supersedes(*held, r):
		return OfferStale
	}
	return OfferDuplicate
}

// Current is the current record among records of one (issuer, subject)
// pair taken in the order they were held: each replaces the one held only
// when it supersedes it, so on a full tie the first stays. ok is false for
// no records.
func Current(rs []Record) (cur Record, ok bool) {
	for _, r := range rs {
		if !ok || Supersedes(r, cur) {
			cur, ok = r, true
		}
	}
	return cur, ok
}

// CurrentOwn is Current for the node's own records of one subject, which
// it keeps all of (trust.md §1, document 1.6.15): on a full tie the record
// of the lower source rank is current, whatever the order they are read in.
func CurrentOwn(rs []Record) (cur Record, ok bool) {
	for _, r := range rs {
		if !ok || Supersedes(r, cur) || (!Supersedes(cur, r) && Rank(r.Source) < Rank(cur.Source)) {
			cur, ok = r, true
		}
	}
	return cur, ok
}

// Learned is a record learned from a third party (trust.md §3.4
// Learning, §3.5): From is the peer that brought it.
type Learned struct {
	Record
	Via  string
	From string
}

// State is what a node holds: its identity, the records it issued (in
// the order it issued them), the records it learned (in the order they
// arrived), its revocations and its blocks (Unix seconds).
type State struct {
	Self    string
	Own     []Record
	Learned []Learned
	// Revoked is the time of the last revocation of a peer.
	Revoked map[string]int64
	// BlockedUntil is the end of a peer's block at the gater (exclusive).
	BlockedUntil map[string]int64
}

// Policy is the node's admission policy: the trust quorum K (0: direct
// only) and the minimum challenge source ("" is the default, hybrid).
type Policy struct {
	Quorum    int
	MinSource string
}

func (p Policy) min() string {
	if p.MinSource == "" {
		return "hybrid"
	}
	return p.MinSource
}

// Reasons and ways of trust.md §1 (precedence table) and §2.
const (
	ViaDirect = "direct"
	ViaQuorum = "quorum"

	ReasonBlocked     = "blocked"
	ReasonRejected    = "rejected"
	ReasonBelowSource = "source_below_minimum"
	ReasonExpired     = "expired"
	ReasonRevoked     = "revoked"
	ReasonUnattested  = "unattested"
)

// Decision is an admission decision: Via when admitted, Reason when not,
// and for a quorum admission the issuers that weigh (sorted).
type Decision struct {
	Admitted bool
	Via      string
	Reason   string
	Issuers  []string
}

func (s *State) revokedAt(p string) (int64, bool) {
	t, ok := s.Revoked[p]
	return t, ok
}

// counts reports whether a record of p still counts after the
// revocations: every attestation of p issued up to the second of a
// revocation stops counting (trust.md §1 Revocation).
func (s *State) counts(r Record) bool {
	t, ok := s.revokedAt(r.Subject)
	return !ok || r.IssuedAt > t
}

// OwnNewest is the node's own newest attestation of p that counts (issued
// after the last revocation of p), in the superseding order with the
// own-record tie rule (CurrentOwn; trust.md §1: "Own newest attestation"
// in the precedence table is one that counts).
func (s *State) OwnNewest(p string) (Record, bool) {
	var rs []Record
	for _, r := range s.Own {
		if r.Issuer == s.Self && r.Subject == p && s.counts(r) {
			rs = append(rs, r)
		}
	}
	return CurrentOwn(rs)
}

// Blocked reports whether p is blocked at the gater at now.
func (s *State) Blocked(p string, now int64) bool {
	until, ok := s.BlockedUntil[p]
	return ok && now < until
}

// Direct reports whether the node admits p directly at now (trust.md §1):
// its own newest attestation of p that counts is valid now, an acceptance,
// meets the minimum source, and p is not blocked.
func (s *State) Direct(p string, now int64, pol Policy) bool {
	if s.Blocked(p, now) {
		return false
	}
	r, ok := s.OwnNewest(p)
	return ok && ValidAt(r, now) && r.Accepted && Meets(r.Source, pol.min())
}

// LearnedCurrent is the current learned record per issuer about subject
// p (trust.md §1: the node keeps only the current record per (issuer,
// subject)); records the node issued itself are not learned (§3.5).
func (s *State) LearnedCurrent(p string) map[string]Record {
	out := map[string]Record{}
	for _, l := range s.Learned {
		if l.Subject != p || l.Issuer == s.Self {
			continue
		}
		held, ok := out[l.Issuer]
		var h *Record
		if ok {
			h = &held
		}
		if Consider(h, l.Record) == OfferNew {
			out[l.Issuer] = l.Record
		}
	}
	return out
}

// Weighs reports whether a learned record r, the current one of its
// issuer about its subject, gives its issuer weight in the subject's
// quorum at now (trust.md §1 Quorum, conditions 1-3).
func (s *State) Weighs(r Record, now int64, pol Policy) bool {
	i, p := r.Issuer, r.Subject
	return i != p && i != s.Self &&
		s.Direct(i, now, pol) &&
		r.Accepted && Meets(r.Source, pol.min()) && ValidAt(r, now) && s.counts(r)
}

// Admission decides whether the node admits p at now (trust.md §1).
func (s *State) Admission(p string, now int64, pol Policy) Decision {
	if s.Blocked(p, now) {
		return Decision{Reason: ReasonBlocked}
	}
	var reason string
	own, ok := s.OwnNewest(p)
	_, revoked := s.revokedAt(p)
	switch {
	case ok && ValidAt(own, now):
		if !own.Accepted {
			return Decision{Reason: ReasonRejected}
		}
		if Meets(own.Source, pol.min()) {
			return Decision{Admitted: true, Via: ViaDirect}
		}
		reason = ReasonBelowSource
	case ok:
		// Expired (or, not met by any record a node dates, not yet valid).
		reason = ReasonExpired
	case revoked:
		reason = ReasonRevoked
	default:
		reason = ReasonUnattested
	}
	if pol.Quorum > 0 {
		var issuers []string
		for _, r := range s.LearnedCurrent(p) {
			if s.Weighs(r, now, pol) {
				issuers = append(issuers, r.Issuer)
			}
		}
		if len(issuers) >= pol.Quorum {
			sort.Strings(issuers)
			return Decision{Admitted: true, Via: ViaQuorum, Issuers: issuers}
		}
	}
	return Decision{Reason: reason}
}

// RevocationTime is the time a revocation of p made at now is dated
// (trust.md §1 Revocation): now, or the issue time of the node's own
// newest attestation of p when that is later and lies within the
// clock-skew allowance ahead of now.
func (s *State) RevocationTime(p string, now int64) int64 {
	var rs []Record
	for _, r := range s.Own {
		if r.Issuer == s.Self && r.Subject == p {
			rs = append(rs, r)
		}
	}
	if r, ok := CurrentOwn(rs); ok && r.IssuedAt > now && r.IssuedAt <= now+MaxClockSkew {
		return r.IssuedAt
	}
	return now
}
