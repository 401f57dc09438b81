package store

import (
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// TestIssuedRejectionKeepsSupersedingRejection: an issued rejection
// replaces only the older rejections of its subject that it supersedes
// (spec/trust.md §1: at equal issued_at the later expires_at wins). Two
// rejections of one second, the one written second expiring sooner: the
// store deleted the first, which supersedes it, so after a restart the
// node's newest record of the peer was the expired one and the peer read
// `expired` (a quorum could then admit it) instead of `rejected`. Found by
// internal/secondtrust's differential test. Both the checkpoint
// (putIssuedRejection) and a read-only replay of the log (overlay).
func TestIssuedRejectionKeepsSupersedingRejection(t *testing.T) {
	key, _ := testutil.NewKey(t)
	_, subject := testutil.NewKey(t)
	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	long, la := sealedVerdict(t, key, subject, false, at, 24*time.Hour)
	short, sa := sealedVerdict(t, key, subject, false, at, 30*time.Second) // expired by now
	newer, na := sealedVerdict(t, key, subject, false, at.Add(time.Second), 30*time.Second)

	check := func(s *Store, when string, wantExpiry time.Time) {
		t.Helper()
		es, bad, err := s.NewestSound(Issued, key.GetPublic())
		if err != nil || bad != 0 {
			t.Fatal(when, err, bad)
		}
		if len(es) != 1 {
			t.Fatalf("%s: %d newest records, want 1", when, len(es))
		}
		if got := es[0].Attestation.ExpiresAt; !got.Equal(wantExpiry) {
			t.Errorf("%s: newest rejection expires %v, want %v (the superseding one)", when, got, wantExpiry)
		}
	}

	s, path := openTemp(t)
	if err := s.PutIssued(long, la); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIssued(short, sa); err != nil {
		t.Fatal(err)
	}
	s.crash(t)
	ro, err := OpenWith(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	check(ro, "read-only replay", la.ExpiresAt)
	ro.Close()
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	check(s, "after the checkpoint", la.ExpiresAt)
	// A later second supersedes both: they coalesce into it.
	if err := s.PutIssued(newer, na); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s, "after a newer rejection", na.ExpiresAt)
	all, err := s.List(Issued, subject)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 {
		t.Errorf("%d rejections of the subject kept, want 1 (the newest)", len(all))
	}
}

// TestIssuedFullTieLowerSourceCounts: of the node's own records of one
// subject that tie fully (same issued_at, verdict and expires_at), the one
// on the weaker challenge source is the newest (spec/trust.md §1, document
// 1.6.15), whatever the order they were written in. The store keeps every
// acceptance under a key ending in a digest of the envelope, and the
// start-up index took the first in key order: the same two records made a
// peer admitted directly or `source_below_minimum` by their digests.
func TestIssuedFullTieLowerSourceCounts(t *testing.T) {
	key, _ := testutil.NewKey(t)
	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	for trial := range 8 {
		_, subject := testutil.NewKey(t)
		mk := func(src skill.SourceKind) ([]byte, *protocol.Attestation) {
			_, a := sealed(t, key, subject, at, time.Hour)
			a.Provenance = skill.Provenance{Source: src}
			env, err := protocol.Seal(a, key)
			if err != nil {
				t.Fatal(err)
			}
			return env, a
		}
		e1, a1 := mk(skill.SourceHybrid)
		e2, a2 := mk(skill.SourceProcedural)
		s, _ := openTemp(t)
		if trial%2 == 1 {
			e1, a1, e2, a2 = e2, a2, e1, a1
		}
		if err := s.PutIssued(e1, a1); err != nil {
			t.Fatal(err)
		}
		if err := s.PutIssued(e2, a2); err != nil {
			t.Fatal(err)
		}
		es, _, err := s.NewestSound(Issued, key.GetPublic())
		if err != nil || len(es) != 1 {
			t.Fatal(err, len(es))
		}
		if got := es[0].Attestation.Provenance.Source; got != skill.SourceProcedural {
			t.Errorf("trial %d: newest of a full tie is on %q, want procedural (the lower rank)", trial, got)
		}
		s.Close()
	}
}
