package store

import (
	"bytes"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
)

// ListLearnedUnverified decodes every learned record without its
// signature check (the node's trust index checks them after start,
// trust.md §5): a record whose signature bit flipped is listed, and
// VerifyLearned refuses it; ListLearned skips it. A value that no longer
// decodes is skipped and counted by both.
func TestListLearnedUnverified(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	var ls []Learned
	for range 3 {
		key, _ := testutil.NewKey(t)
		_, subject := testutil.NewKey(t)
		env, a := sealed(t, key, subject, time.Now(), time.Hour)
		ls = append(ls, Learned{Attestation: a, Envelope: env, Via: ViaGossip, LearnedAt: time.Now()})
	}
	if err := s.PutLearned(ls...); err != nil {
		t.Fatal(err)
	}
	// Flip the last signature bit of the first, garble the second.
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLearned)
		for i, l := range ls[:2] {
			k := learnedKey(l.Attestation.Subject, l.Attestation.Issuer)
			var v learnedValue
			if err := json.Unmarshal(b.Get(k), &v); err != nil {
				return err
			}
			v.Envelope = bytes.Clone(v.Envelope)
			v.Envelope[len(v.Envelope)-1] ^= 1
			data, err := json.Marshal(v)
			if i == 1 {
				data, err = []byte("not json"), nil
			}
			if err != nil {
				return err
			}
			if err := b.Put(k, data); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var checks atomic.Int64
	old := verifyEnvelope
	verifyEnvelope = func(env []byte, o protocol.VerifyOptions) (*protocol.Attestation, error) {
		checks.Add(1)
		return old(env, o)
	}
	t.Cleanup(func() { verifyEnvelope = old })

	got, bad, err := s.ListLearnedUnverified("")
	if err != nil || bad != 1 || len(got) != 2 || checks.Load() != 0 {
		t.Fatalf("ListLearnedUnverified: %d listed, %d bad, %d checks, %v; want 2, 1, 0", len(got), bad, checks.Load(), err)
	}
	sound := 0
	for _, l := range got {
		err := VerifyLearned(l)
		switch l.Attestation.Issuer {
		case ls[0].Attestation.Issuer:
			if err == nil {
				t.Error("VerifyLearned took the flipped signature")
			}
		default:
			if err != nil {
				t.Errorf("VerifyLearned of a sound record: %v", err)
			}
			sound++
		}
	}
	if sound != 1 {
		t.Errorf("%d sound records listed, want 1", sound)
	}
	got, bad, err = s.ListLearned("")
	if err != nil || bad != 2 || len(got) != 1 || got[0].Attestation.Issuer != ls[2].Attestation.Issuer {
		t.Fatalf("ListLearned: %d listed, %d bad, %v; want the sound one, 2 bad", len(got), bad, err)
	}
}

// A learned record damaged in place is skipped when read (trust.md §5),
// so the node learns the pair again from a sound record; that record
// names an earlier issue time than the damaged value's copied one, and
// PutLearned kept the damaged value (it compared the copied times only):
// the sound record was never stored, and the pair was lost at the next
// start. Before: ListLearned listed nothing (1 damaged). A sound stored
// record still wins over an entry it supersedes.
func TestPutLearnedReplacesDamaged(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	key, _ := testutil.NewKey(t)
	_, subject := testutil.NewKey(t)
	now := time.Now()
	env, a := sealed(t, key, subject, now, time.Hour)
	if err := s.PutLearned(Learned{Attestation: a, Envelope: env, Via: ViaGossip, LearnedAt: now}); err != nil {
		t.Fatal(err)
	}
	older, ao := sealed(t, key, subject, now.Add(-time.Minute), time.Hour)
	// A sound stored record keeps an older entry out.
	if err := s.PutLearned(Learned{Attestation: ao, Envelope: older, Via: ViaGossip, LearnedAt: now}); err != nil {
		t.Fatal(err)
	}
	if got, _, err := s.ListLearned(""); err != nil || len(got) != 1 || !got[0].Attestation.IssuedAt.Equal(a.IssuedAt) {
		t.Fatalf("after an older entry: %d listed, %v; want the newer sound record", len(got), err)
	}
	k := learnedKey(subject, a.Issuer)
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLearned)
		var v learnedValue
		if err := json.Unmarshal(b.Get(k), &v); err != nil {
			return err
		}
		v.Envelope = bytes.Clone(v.Envelope)
		v.Envelope[len(v.Envelope)-1] ^= 1
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return b.Put(k, data)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutLearned(Learned{Attestation: ao, Envelope: older, Via: ViaGossip, LearnedAt: now}); err != nil {
		t.Fatal(err)
	}
	got, bad, err := s.ListLearned("")
	if err != nil || bad != 0 || len(got) != 1 || !got[0].Attestation.IssuedAt.Equal(ao.IssuedAt) {
		t.Fatalf("after the sound entry over a damaged one: %d listed, %d damaged, %v; want the sound entry", len(got), bad, err)
	}
}

// TestPruneLearnedKeepsRetraction: a learned rejection that expired is
// kept until maxLifetime after its issue, so that the acceptance it
// withdrew (issued before it, so expiring before then) is not learned
// again after a restart; an expired acceptance goes at its expiry.
func TestPruneLearnedKeepsRetraction(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	key, _ := testutil.NewKey(t)
	_, rejected := testutil.NewKey(t)
	_, accepted := testutil.NewKey(t)
	now := time.Now().Truncate(time.Second)
	rejEnv, rej := sealedVerdict(t, key, rejected, false, now, time.Hour)
	accEnv, acc := sealedVerdict(t, key, accepted, true, now, time.Hour)
	if err := s.PutLearned(Learned{Attestation: rej, Envelope: rejEnv, Via: ViaGossip, LearnedAt: now},
		Learned{Attestation: acc, Envelope: accEnv, Via: ViaGossip, LearnedAt: now}); err != nil {
		t.Fatal(err)
	}
	const maxLifetime = 30 * 24 * time.Hour
	for _, c := range []struct {
		at   time.Duration
		want int
	}{{2 * time.Hour, 1}, {maxLifetime, 0}} {
		if _, err := s.PruneLearned(now.Add(c.at), maxLifetime); err != nil {
			t.Fatal(err)
		}
		ls, _, err := s.ListLearnedUnverified("")
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) != c.want || (c.want == 1 && ls[0].Attestation.Accepted) {
			t.Fatalf("pruned at +%v: %d learned records left, want %d (the expired rejection)", c.at, len(ls), c.want)
		}
	}
}
