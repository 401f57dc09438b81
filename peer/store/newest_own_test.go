package store

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
)

// TestNewestSoundChecksNoOwnSignature: the trust index read the issued
// records at start-up with List, which verifies every signature again:
// remote peers make the node issue one per session drawn, kept for their
// lifetime and the keep-expired time (some 744,000 at the default draw
// budget, one per fresh peer ID), ~110-150 µs each on a loaded 2-core
// machine, so a flooded store cost minutes of start-up for signatures
// the node made itself. NewestSound with the node's key decodes the
// records sealed with it without a second check, and verifies the others
// as List does; the entries (one per subject here) are the same.
func TestNewestSoundChecksNoOwnSignature(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	key, _ := testutil.NewKey(t)
	other, _ := testutil.NewKey(t)
	const n = 200
	base := time.Now().Add(-time.Hour)
	for i := range n {
		_, subject := testutil.NewKey(t)
		env, a := sealed(t, key, subject, base.Add(time.Duration(i)*time.Second), 24*time.Hour)
		if err := s.Put(Issued, env, a); err != nil {
			t.Fatal(err)
		}
	}
	_, subject := testutil.NewKey(t)
	env, a := sealed(t, other, subject, base, 24*time.Hour) // a store used with another key
	if err := s.Put(Issued, env, a); err != nil {
		t.Fatal(err)
	}
	var checks atomic.Int64
	old := verifyEnvelope
	verifyEnvelope = func(env []byte, o protocol.VerifyOptions) (*protocol.Attestation, error) {
		checks.Add(1)
		return old(env, o)
	}
	t.Cleanup(func() { verifyEnvelope = old })

	all, err := s.List(Issued, "")
	if err != nil {
		t.Fatal(err)
	}
	listChecks := checks.Swap(0)
	own, bad, err := s.NewestSound(Issued, key.GetPublic())
	if err != nil || bad != 0 {
		t.Fatal(err, bad)
	}
	t.Logf("%d own records and 1 of another key: List checked %d signatures, NewestSound %d", n, listChecks, checks.Load())
	if checks.Load() != 1 {
		t.Errorf("NewestSound checked %d signatures, want 1 (the other key's record)", checks.Load())
	}
	if len(own) != len(all) {
		t.Fatalf("NewestSound: %d entries, List %d", len(own), len(all))
	}
	for i := range all {
		if own[i].Key != all[i].Key || own[i].Attestation.Subject != all[i].Attestation.Subject ||
			!own[i].Attestation.IssuedAt.Equal(all[i].Attestation.IssuedAt) || own[i].Attestation.Accepted != all[i].Attestation.Accepted {
			t.Fatalf("entry %d: NewestSound %+v, List %+v", i, own[i], all[i])
		}
	}
	// Without the node's key every record it returns is verified.
	checks.Store(0)
	if _, _, err := s.NewestSound(Issued, nil); err != nil || checks.Load() != n+1 {
		t.Errorf("NewestSound without a key: %d checks, %v; want %d", checks.Load(), err, n+1)
	}
}

// A record sealed with the node's key that does not decode is refused by
// DecodeOwnAttestation (NewestSound then counts it damaged).
func TestDecodeOwnRefusesMalformed(t *testing.T) {
	key, _ := testutil.NewKey(t)
	_, subject := testutil.NewKey(t)
	env, _ := sealed(t, key, subject, time.Now(), time.Hour)
	if _, err := protocol.DecodeOwnAttestation(env, key.GetPublic(), ""); err != nil {
		t.Fatalf("own record: %v", err)
	}
	other, _ := testutil.NewKey(t)
	if _, err := protocol.DecodeOwnAttestation(env, other.GetPublic(), ""); !errors.Is(err, protocol.ErrIssuerMismatch) {
		t.Errorf("another key: %v, want ErrIssuerMismatch", err)
	}
	for cut := 1; cut < len(env); cut += 7 {
		if _, err := protocol.DecodeOwnAttestation(env[:cut], key.GetPublic(), ""); err == nil {
			t.Fatalf("a record cut to %d of %d bytes decoded", cut, len(env))
		}
	}
}
