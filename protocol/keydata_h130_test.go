package protocol_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	recordpb "github.com/libp2p/go-libp2p/core/record/pb"
	"google.golang.org/protobuf/proto"

	"github.com/acaptcha/acaptcha/protocol"
)

// spkiTrailingElement appends a DER NULL (05 00) inside the outer
// SEQUENCE of a SubjectPublicKeyInfo, after its BIT STRING (the outer
// length below 128 + 2 or at least 256, as for P-256 and RSA keys).
func spkiTrailingElement(t testing.TB, spki []byte) []byte {
	t.Helper()
	switch {
	case spki[1] < 0x80 && spki[1]+2 < 0x80:
		out := append([]byte{0x30, spki[1] + 2}, spki[2:]...)
		return append(out, 0x05, 0x00)
	case spki[1] == 0x82:
		n := int(spki[2])<<8 | int(spki[3])
		n += 2
		out := append([]byte{0x30, 0x82, byte(n >> 8), byte(n)}, spki[4:]...)
		return append(out, 0x05, 0x00)
	}
	t.Fatalf("unexpected SPKI header %x", spki[:4])
	return nil
}

// attestECDSACompressedKey is env, whose key is a P-256 key, with the key
// written as the SubjectPublicKeyInfo of its compressed point.
func attestECDSACompressedKey(t testing.TB, env []byte) []byte {
	t.Helper()
	return rewriteKeyData(t, env, func(d []byte) []byte {
		if _, err := x509.ParsePKIXPublicKey(d); err != nil || len(d) != 91 {
			t.Fatalf("not a P-256 key of 91 bytes: %v", err)
		}
		// The 26-byte header of a compressed P-256 SPKI, then 02/03 || X.
		hdr := []byte{0x30, 0x39, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x22, 0x00}
		pt := d[len(d)-65:]
		return append(hdr, append([]byte{0x02 | pt[64]&1}, pt[1:33]...)...)
	})
}

// rewriteKeyData is env with its public key's Data replaced by f(Data):
// the signature does not cover the key, so it still verifies under it.
func rewriteKeyData(t testing.TB, env []byte, f func([]byte) []byte) []byte {
	t.Helper()
	var e recordpb.Envelope
	if err := proto.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	e.PublicKey.Data = f(e.PublicKey.Data)
	b, err := proto.Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVerifyKeyDataCanonicalH130: an ECDSA or RSA key's Data is exactly
// the DER SubjectPublicKeyInfo x509 writes for the key (spec/attestation.md
// §2). Go's x509.ParsePKIXPublicKey ignores an element after the BIT
// STRING, and go-libp2p derives the peer ID from the key re-encoded, so
// such an envelope verified as the same issuer (another message ID on
// gossip for the same record, trust.md §3.4), while a DER-strict parser
// (OpenSSL) refuses it: a record one implementation verifies and another
// finds malformed. A compressed P-256 point, which OpenSSL takes and Go
// refuses, is malformed as before.
func TestVerifyKeyDataCanonicalH130(t *testing.T) {
	a, _, _ := attestFixture(t)
	good := attestECDSAEnvelope(t, a, func(b []byte) []byte { return b })
	opts := protocol.VerifyOptions{Now: attestVerifyAt}
	if _, _, err := protocol.VerifyAttestation(good, opts); err != nil {
		t.Fatalf("canonical ECDSA envelope: %v", err)
	}
	trailing := rewriteKeyData(t, good, func(d []byte) []byte { return spkiTrailingElement(t, d) })
	if _, _, err := protocol.VerifyAttestation(trailing, opts); !errors.Is(err, protocol.ErrMalformed) {
		t.Fatalf("ECDSA key with an element after its BIT STRING: %v, want malformed", err)
	}
	compressed := attestECDSACompressedKey(t, good)
	if _, _, err := protocol.VerifyAttestation(compressed, opts); !errors.Is(err, protocol.ErrMalformed) {
		t.Fatalf("ECDSA key as a compressed point: %v, want malformed", err)
	}

	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	priv, _, err := crypto.KeyPairFromStdKey(rk)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	b := *a
	b.Issuer = id
	rsaEnv := attestMustSeal(t, &b, priv)
	if _, _, err := protocol.VerifyAttestation(rsaEnv, opts); err != nil {
		t.Fatalf("canonical RSA envelope: %v", err)
	}
	rsaTrailing := rewriteKeyData(t, rsaEnv, func(d []byte) []byte { return spkiTrailingElement(t, d) })
	if _, _, err := protocol.VerifyAttestation(rsaTrailing, opts); !errors.Is(err, protocol.ErrMalformed) {
		t.Fatalf("RSA key with an element after its BIT STRING: %v, want malformed", err)
	}
}
