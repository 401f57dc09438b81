package attestation

import (
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/binary"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	cryptopb "github.com/libp2p/go-libp2p/core/crypto/pb"
	"github.com/libp2p/go-libp2p/core/peer"
	recordpb "github.com/libp2p/go-libp2p/core/record/pb"
	"google.golang.org/protobuf/proto"

	"github.com/acaptcha/acaptcha/skill"
)

// forgeSmallOrder signs msg under the Ed25519 public key small (a point
// of small order) without any secret of it: R = [a]B and S = a for a key
// pair (a, [a]B) of the forger's own verify, [S]B − [k]A = R, whenever
// [k]A is the identity, which for a point of order dividing 8 holds for
// one k in 8 (k = H(R‖A‖M) mod L); the forger varies msg by its suffix
// until it does. It returns the message signed and the signature, or nil
// when no suffix of 256 worked (a key that is not of small order).
func forgeSmallOrder(t *testing.T, small []byte, msg func(i int) []byte) ([]byte, []byte) {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = 7
	priv := ed25519.NewKeyFromSeed(seed)
	h := sha512.Sum512(seed)
	h[0] &= 248
	h[31] &= 127
	h[31] |= 64
	le := func(b []byte) *big.Int {
		r := make([]byte, len(b))
		for i := range b {
			r[len(b)-1-i] = b[i]
		}
		return new(big.Int).SetBytes(r)
	}
	l, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
	a := new(big.Int).Mod(le(h[:32]), l)
	s := make([]byte, 32)
	ab := a.Bytes()
	for i := range ab {
		s[i] = ab[len(ab)-1-i]
	}
	sig := append(append([]byte{}, priv.Public().(ed25519.PublicKey)...), s...)
	for i := 0; i < 256; i++ {
		m := msg(i)
		if ed25519.Verify(small, m, sig) {
			return m, sig
		}
	}
	return nil, nil
}

// smallOrderKeys are the encodings SmallOrderEd25519 refuses: the test
// forges a signature under each, so each is of small order.
func smallOrderKeys(t *testing.T) [][]byte {
	var out [][]byte
	for k := range ed25519SmallOrderKeys() {
		out = append(out, []byte(k))
	}
	if len(out) != 14 {
		t.Fatalf("%d small-order encodings, want 14 (5 y-coordinates, y + p below 2^255 for y = 0 and 1, each with either sign bit)", len(out))
	}
	return out
}

// audit84: an Ed25519 public key of small order (the identity, or a point
// of order 2, 4 or 8) is a key anyone can sign for: [k]A is the identity
// for one message in 8 (for the identity point, for every message), so
// [S]B = R + [k]A holds for an R and S anyone picks. The spec refused no
// such key ("they can sign nothing that verifies under another key's
// peer ID"), but its own peer ID is the problem: a record issued under
// it verified, so anyone could sign acceptances as that issuer (a peer a
// node admits directly after it passed one session under that key, and
// then weighs in every quorum for whomever anyone names); and a record
// about such a peer ID verified too, though whatever passed the session,
// anyone can be that peer (libp2p's handshakes and the HTTP door's start
// are signatures under the same key). Both are now malformed.
func TestVerifyAudit84SmallOrderEd25519(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	_, subjectKey := mustKey(t)
	subject, _ := peer.IDFromPublicKey(subjectKey)
	for i, small := range smallOrderKeys(t) {
		pub, err := crypto.UnmarshalEd25519PublicKey(small)
		if err != nil {
			t.Fatal(err)
		}
		issuer, err := peer.IDFromPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		rec := testRecord(issuer, subject, now)
		payload, err := rec.MarshalRecord()
		if err != nil {
			t.Fatal(err)
		}
		// The forger varies the nonce until the signature holds.
		signed, sig := forgeSmallOrder(t, small, func(j int) []byte {
			binary.BigEndian.PutUint32(rec.Nonce, uint32(j))
			payload, _ = rec.MarshalRecord()
			return signedBytes(payload)
		})
		if signed == nil {
			t.Fatalf("key %d (%x): no signature forged; not of small order", i, small)
		}
		env := envelope(t, small, payload, sig)
		if _, _, err := Verify(env, VerifyOptions{Now: now}); !errors.Is(err, ErrMalformed) {
			t.Errorf("key %d (%x): a record anyone can sign under this small-order issuer key: %v, want %v", i, small, err, ErrMalformed)
		}
		if _, err := DecodeUnverified(env); !errors.Is(err, ErrMalformed) {
			t.Errorf("key %d: DecodeUnverified: %v, want %v", i, err, ErrMalformed)
		}
		if err := CheckKeyRules(pub, sig); !errors.Is(err, ErrMalformed) {
			t.Errorf("key %d: CheckKeyRules (the HTTP door's start key): %v, want %v", i, err, ErrMalformed)
		}
		// A record about the small-order peer ID, by a real issuer.
		ik, ipub := mustKey(t)
		iid, _ := peer.IDFromPublicKey(ipub)
		about := testRecord(iid, issuer, now)
		if _, err := Seal(about, ik); !errors.Is(err, ErrMalformed) {
			t.Errorf("key %d: Seal of a record about a small-order peer ID: %v, want %v", i, err, ErrMalformed)
		}
	}
	// An ordinary key: no signature forged this way, records verify.
	_, pub := mustKey(t)
	raw, _ := pub.Raw()
	if m, _ := forgeSmallOrder(t, raw, func(j int) []byte { return []byte{byte(j)} }); m != nil {
		t.Fatal("forged a signature under an ordinary key: the test's forger is wrong")
	}
}

func mustKey(t *testing.T) (crypto.PrivKey, crypto.PubKey) {
	t.Helper()
	k, p, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k, p
}

func testRecord(issuer, subject peer.ID, now time.Time) *Record {
	r := &Record{
		Issuer: issuer, Subject: subject, Accepted: true, Reason: skill.ReasonOK,
		Nonce: make([]byte, NonceBytes), TranscriptDigest: make([]byte, DigestBytes),
		Policy:   PolicySummary{Rounds: 1, Tau: 15 * time.Second, Total: time.Minute},
		Rounds:   []RoundTiming{{Round: 1, Budget: 15 * time.Second, Effective: time.Second, Correct: true}},
		IssuedAt: now, ExpiresAt: now.Add(time.Hour), SpecVersion: SpecVersion,
		Provenance: skill.Provenance{Source: skill.SourceLLM},
	}
	return r
}

func signedBytes(payload []byte) []byte {
	var b []byte
	for _, f := range [][]byte{[]byte(AttestationDomain), attestationCodecBytes, payload} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

func envelope(t *testing.T, key, payload, sig []byte) []byte {
	t.Helper()
	b, err := proto.Marshal(&recordpb.Envelope{
		PublicKey:   &cryptopb.PublicKey{Type: cryptopb.KeyType_Ed25519.Enum(), Data: key},
		PayloadType: attestationCodecBytes, Payload: payload, Signature: sig,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
