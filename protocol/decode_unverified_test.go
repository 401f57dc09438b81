package protocol_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/libp2p/go-libp2p/core/record"

	"github.com/acaptcha/acaptcha/protocol"
)

// DecodeAttestationUnverified takes what VerifyAttestation takes, with the
// same record, and refuses what Verify refuses for the bytes alone; it
// does not check the signature: a flipped signature bit decodes (the
// caller verifies before it trusts the record), and Verify refuses it.
func TestDecodeAttestationUnverified(t *testing.T) {
	a, ik, sk := attestFixture(t)
	env, err := protocol.Seal(a, ik)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{AllowExpired: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := protocol.DecodeAttestationUnverified(env)
	if err != nil {
		t.Fatalf("DecodeAttestationUnverified refused what Verify accepts: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v, verified %+v", got, want)
	}
	flipped := bytes.Clone(env)
	flipped[len(flipped)-1] ^= 1
	if _, err := protocol.DecodeAttestationUnverified(flipped); err != nil {
		t.Errorf("a flipped signature bit: %v, want decoded (not verified)", err)
	}
	if _, _, err := protocol.VerifyAttestation(flipped, protocol.VerifyOptions{AllowExpired: true}); !errors.Is(err, protocol.ErrBadSignature) {
		t.Errorf("Verify of a flipped signature bit: %v, want ErrBadSignature", err)
	}
	// Sealed by another key than the issuer's (Seal refuses to).
	re, err := record.Seal(a, sk)
	if err != nil {
		t.Fatal(err)
	}
	other, err := re.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := protocol.DecodeAttestationUnverified(other); !errors.Is(err, protocol.ErrIssuerMismatch) {
		t.Errorf("sealed by the subject: %v, want ErrIssuerMismatch", err)
	}
	for name, data := range map[string][]byte{"empty": nil, "garbage": []byte("not an envelope"), "cut short": env[:len(env)-20]} {
		if _, err := protocol.DecodeAttestationUnverified(data); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}
