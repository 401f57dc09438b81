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
