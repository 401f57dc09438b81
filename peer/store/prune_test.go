package store

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	bolt "go.etcd.io/bbolt"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// sealed returns a signed acceptance by key about subject, issued at
// issued and valid for ttl, and the attestation it holds.
func sealed(t testing.TB, key crypto.PrivKey, subject peer.ID, issued time.Time, ttl time.Duration) ([]byte, *protocol.Attestation) {
	t.Helper()
	issuer, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	nonce, digest := make([]byte, protocol.NonceBytes), make([]byte, protocol.DigestBytes)
	_, _ = rand.Read(nonce)
	_, _ = rand.Read(digest)
	at := issued.UTC().Truncate(time.Second)
	a := &protocol.Attestation{
		Issuer: issuer, Subject: subject, Accepted: true, Reason: skill.ReasonOK,
		Nonce: nonce, TranscriptDigest: digest,
		Policy:          protocol.PolicySummary{Rounds: 3, Tau: 15 * time.Second, Total: 2 * time.Minute, RTTCredit: 500 * time.Millisecond},
		ChallengeDomain: "test", SetID: "set", IssuedAt: at, ExpiresAt: at.Add(ttl),
		SpecVersion: protocol.SpecVersion, Provenance: skill.Provenance{Source: skill.SourceHybrid},
	}
	for i := 1; i <= 3; i++ {
		a.Rounds = append(a.Rounds, protocol.RoundTiming{Round: i, Budget: 15 * time.Second, Effective: time.Second, NarrativeTokens: 500, Correct: true})
	}
	env, err := protocol.Seal(a, key)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{AllowExpired: true})
	if err != nil {
		t.Fatal(err)
	}
	return env, got
}

// PruneExpired deletes exactly the records that expired before the
// cutoff, in both directions, across more than one batch, and leaves a
// record that does not decode for List to report.
func TestPruneExpired(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	now := time.Now()
	cutoff := now.Add(-30 * 24 * time.Hour)
	day := 24 * time.Hour
	me, meID := testutil.NewKey(t)
	_, otherID := testutil.NewKey(t)
	type rec struct {
		d       Direction
		issued  time.Time
		ttl     time.Duration
		pruned  bool
		subject peer.ID
	}
	recs := []rec{
		{Issued, now.Add(-100 * day), day, true, otherID},                        // expired 99 days ago
		{Issued, now.Add(-100 * day), 200 * day, false, otherID},                 // issued long ago, still valid
		{Issued, now.Add(-31 * day), 2 * time.Hour, true, otherID},               // expired just over 30 days ago
		{Received, now.Add(-32 * day), day, true, meID},                          // expired 31 days ago
		{Received, now.Add(-30 * day), day, false, meID},                         // expired 29 days ago
		{Received, now.Add(-time.Hour), day, false, meID},                        // valid
		{Issued, cutoff.Add(-time.Hour), time.Hour - time.Second, true, otherID}, // expired a second before the cutoff
		{Issued, cutoff.Add(-time.Hour), time.Hour + 2*time.Second, false, otherID},
	}
	keys := make([][]byte, len(recs))
	for i, r := range recs {
		key := me
		if r.d == Received {
			// A verifier of its own per record: the store keeps one
			// record per issuer (putReceived).
			key, _ = testutil.NewKey(t)
		}
		env, a := sealed(t, key, r.subject, r.issued, r.ttl)
		if err := s.Put(r.d, env, a); err != nil {
			t.Fatal(err)
		}
		p := a.Subject
		if r.d == Received {
			p = a.Issuer
		}
		keys[i] = entryKey(p, a.IssuedAt, env)
	}
	// More expired records than one batch deletes, of many subjects, and
	// a record under an old key that does not verify.
	junk := entryKey(otherID, now.Add(-400*day), []byte("junk"))
	bulk := pruneBatch + 7
	err := s.db.Update(func(tx *bolt.Tx) error {
		for range bulk {
			_, subject := testutil.NewKey(t)
			env, a := sealed(t, me, subject, now.Add(-60*day), day)
			if err := tx.Bucket(bucketIssued).Put(entryKey(subject, a.IssuedAt, env), env); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketIssued).Put(junk, []byte("not an envelope"))
	})
	if err != nil {
		t.Fatal(err)
	}
	c0, _ := s.Commits()
	n, err := s.PruneExpired(context.Background(), cutoff, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	want := bulk
	for _, r := range recs {
		if r.pruned {
			want++
		}
	}
	if n != want {
		t.Errorf("pruned %d records, want %d", n, want)
	}
	if c, _ := s.Commits(); c-c0 < 2 {
		t.Errorf("%d commits for %d deletions, want one per batch of %d", c-c0, n, pruneBatch)
	}
	_ = s.db.View(func(tx *bolt.Tx) error {
		for i, r := range recs {
			b, _ := bucketFor(r.d)
			if kept := tx.Bucket(b).Get(keys[i]) != nil; kept == r.pruned {
				t.Errorf("record %d (%s, issued %v, ttl %v): kept %v, want %v", i, r.d, r.issued, r.ttl, kept, !r.pruned)
			}
		}
		if tx.Bucket(bucketIssued).Get(junk) == nil {
			t.Error("a record that does not verify was deleted")
		}
		if k := tx.Bucket(bucketIssued).Stats().KeyN; k != 3 {
			t.Errorf("%d issued records left, want 3 (2 kept and the junk)", k)
		}
		return nil
	})
	// Nothing left to prune: no commit at all.
	c1, _ := s.Commits()
	if n, err := s.PruneExpired(context.Background(), cutoff, time.Time{}); err != nil || n != 0 {
		t.Errorf("second prune: %d, %v", n, err)
	}
	if c2, _ := s.Commits(); c2 != c1 {
		t.Errorf("a prune with nothing to delete committed %d transactions", c2-c1)
	}
}

// A prune stops when its context ends, and a later one finishes the work.
func TestPruneExpiredCancelled(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	me, _ := testutil.NewKey(t)
	now := time.Now()
	err := s.db.Update(func(tx *bolt.Tx) error {
		for range pruneBatch + 1 {
			_, subject := testutil.NewKey(t)
			env, a := sealed(t, me, subject, now.Add(-60*24*time.Hour), time.Hour)
			if err := tx.Bucket(bucketIssued).Put(entryKey(subject, a.IssuedAt, env), env); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if n, err := s.PruneExpired(ctx, now, time.Time{}); !errors.Is(err, context.Canceled) || n != 0 {
		t.Fatalf("cancelled prune: %d, %v", n, err)
	}
	if n, err := s.PruneExpired(context.Background(), now, time.Time{}); err != nil || n != pruneBatch+1 {
		t.Fatalf("prune: %d, %v; want %d", n, err, pruneBatch+1)
	}
}
