package protocol_test

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/asn1"
	"errors"
	"math/big"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	recordpb "github.com/libp2p/go-libp2p/core/record/pb"
	"google.golang.org/protobuf/proto"

	"github.com/acaptcha/acaptcha/protocol"
)

// attestECDSAEnvelope seals a's record under the ECDSA P-256 key of the
// scalar 0x03 repeated, with a deterministic signature (k derived from
// the key and the hash: any k gives a valid signature, a fixed one keeps
// the vector reproducible), whose DER encoding der rewrites.
func attestECDSAEnvelope(t testing.TB, a *protocol.Attestation, der func([]byte) []byte) []byte {
	t.Helper()
	priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), make32(3))
	if err != nil {
		t.Fatal(err)
	}
	_, pub, err := crypto.ECDSAKeyPairFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	b := *a
	b.Issuer = id
	payload, err := b.MarshalRecord()
	if err != nil {
		t.Fatal(err)
	}
	ptype := []byte{0x81, 0x94, 0xeb, 0x01}
	h := sha256.Sum256(attestSignedBytes(protocol.AttestationDomain, ptype, payload))
	n := elliptic.P256().Params().N
	kh := sha256.Sum256(append(make32(3), h[:]...))
	k := new(big.Int).Mod(new(big.Int).SetBytes(kh[:]), n)
	// R = kG through crypto/ecdh (k is in [1, n) for this fixed key and
	// record: the vector is deterministic); its x is bytes 1..32 of the
	// uncompressed point.
	kp, err := ecdh.P256().NewPrivateKey(k.FillBytes(make([]byte, 32)))
	if err != nil {
		t.Fatal(err)
	}
	r := new(big.Int).Mod(new(big.Int).SetBytes(kp.PublicKey().Bytes()[1:33]), n)
	d := new(big.Int).SetBytes(make32(3))
	s := new(big.Int).Mul(r, d)
	s.Add(s, new(big.Int).SetBytes(h[:]))
	s.Mul(s, new(big.Int).ModInverse(k, n))
	s.Mod(s, n)
	sig, err := asn1.Marshal(struct{ R, S *big.Int }{r, s})
	if err != nil {
		t.Fatal(err)
	}
	pk, err := crypto.PublicKeyToProto(pub)
	if err != nil {
		t.Fatal(err)
	}
	out, err := proto.Marshal(&recordpb.Envelope{PublicKey: pk, PayloadType: ptype, Payload: payload, Signature: der(sig)})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func make32(b byte) []byte {
	out := make([]byte, 32)
	for i := range out {
		out[i] = b
	}
	return out
}

// ecdsaTrailingByte and ecdsaExtraElement are the DER rewrites go-libp2p
// accepts (encoding/asn1 ignores bytes after the value and elements after
// a struct's fields): a byte 00 after the SEQUENCE, and an INTEGER 0
// inside it after S.
func ecdsaTrailingByte(sig []byte) []byte { return append(append([]byte(nil), sig...), 0) }

func ecdsaExtraElement(sig []byte) []byte {
	inner := append(append([]byte(nil), sig[2:]...), 0x02, 0x01, 0x00)
	return append([]byte{0x30, byte(len(inner))}, inner...)
}

// An ECDSA signature is exactly the DER of its (r, s) (attestation.md
// §2): go-libp2p verifies one with bytes after it or an element more in
// its SEQUENCE, so a record signed once had endless envelopes, each its
// own gossip message (trust.md §3.4) and a signature check.
func TestAttestationECDSASignatureExactDER(t *testing.T) {
	a, _, _ := attestFixture(t)
	opts := protocol.VerifyOptions{Now: attestVerifyAt}
	if _, _, err := protocol.VerifyAttestation(attestECDSAEnvelope(t, a, func(b []byte) []byte { return b }), opts); err != nil {
		t.Fatalf("an exact DER signature: %v", err)
	}
	for name, der := range map[string]func([]byte) []byte{"trailing byte": ecdsaTrailingByte, "extra element": ecdsaExtraElement} {
		if _, _, err := protocol.VerifyAttestation(attestECDSAEnvelope(t, a, der), opts); !errors.Is(err, protocol.ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", name, err)
		}
	}
}
