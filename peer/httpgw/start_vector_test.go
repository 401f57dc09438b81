package httpgw

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol"
)

var updateStartVector = flag.Bool("update-start-vector", false, "rewrite spec/vectors/http_start.json")

const startVectorPath = "../../spec/vectors/http_start.json"

// startVector is spec/vectors/http_start.json: the start of an HTTP
// session (spec/http.md §4.2), byte for byte.
type startVector struct {
	Description     string `json:"description"`
	VerifierSeedHex string `json:"verifier_seed_hex"`
	SubjectSeedHex  string `json:"subject_seed_hex"`
	Verifier        string `json:"verifier_peer_id"`
	Subject         string `json:"subject_peer_id"`
	SessionID       string `json:"session_id"`
	NonceB64        string `json:"nonce"`
	PowDifficulty   int    `json:"pow_difficulty"`
	StartMessageHex string `json:"start_message_hex"`
	StartMessageB64 string `json:"start_message"`
	Request         struct {
		PublicKey string `json:"public_key"`
		Signature string `json:"signature"`
		Pow       string `json:"pow"`
	} `json:"request"`
	OtherSessionSignature string `json:"signature_of_another_session"`
}

func seedKey(t *testing.T, seedHex string) (crypto.PrivKey, peer.ID) {
	t.Helper()
	seed, err := hex.DecodeString(seedHex)
	if err != nil {
		t.Fatal(err)
	}
	k, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return k, id
}

// buildStartVector computes the vector from its inputs (seeds, session
// ID, nonce, difficulty).
func buildStartVector(t *testing.T, in startVector) startVector {
	t.Helper()
	_, vid := seedKey(t, in.VerifierSeedHex)
	sk, sid := seedKey(t, in.SubjectSeedHex)
	nonce, err := base64.StdEncoding.DecodeString(in.NonceB64)
	if err != nil {
		t.Fatal(err)
	}
	out := in
	out.Verifier, out.Subject = vid.String(), sid.String()
	msg := StartMessage(in.SessionID, nonce, vid, sid)
	out.StartMessageHex, out.StartMessageB64 = hex.EncodeToString(msg), base64.StdEncoding.EncodeToString(msg)
	pub, err := crypto.MarshalPublicKey(sk.GetPublic())
	if err != nil {
		t.Fatal(err)
	}
	sig, err := sk.Sign(msg)
	if err != nil {
		t.Fatal(err)
	}
	pow, err := protocol.SolvePow(context.Background(), nonce, sid, in.PowDifficulty, protocol.MaxPowDifficulty)
	if err != nil {
		t.Fatal(err)
	}
	out.Request.PublicKey = base64.StdEncoding.EncodeToString(pub)
	out.Request.Signature = base64.StdEncoding.EncodeToString(sig)
	out.Request.Pow = base64.StdEncoding.EncodeToString(pow)
	other, err := sk.Sign(StartMessage(in.SessionID+"A", nonce, vid, sid))
	if err != nil {
		t.Fatal(err)
	}
	out.OtherSessionSignature = base64.StdEncoding.EncodeToString(other)
	return out
}

// TestStartVector checks spec/vectors/http_start.json against the door's
// start message, its key proof and its proof of work.
func TestStartVector(t *testing.T) {
	var v startVector
	if *updateStartVector {
		v = startVector{
			Description: "The start of an HTTP session, spec/http.md §4.2. Keys are Ed25519 from the given seeds (those of attestation.json: the verifier is its issuer, the subject its subject). " +
				"start_message = \"acaptcha/http/start/v1\" || 0x00 || u32(len(session_id)) || session_id (ASCII) || u32(32) || nonce || u32(len(V)) || V || u32(len(S)) || S, u32 big-endian, V and S the binary peer IDs of the verifier and the subject; " +
				"start_message (base64) is what the create's session shows. request is the start's body: public_key the subject's libp2p protobuf PublicKey, signature its RFC 8032 signature of start_message, " +
				"pow the first 8-byte big-endian counter whose SHA-256(acaptcha/attest/pow/v1 || 0x00 || nonce || S || pow) has pow_difficulty leading zero bits (spec/vectors/pow.json). " +
				"signature_of_another_session signs the start message of session_id + \"A\": it does not verify here (bad_signature).",
			VerifierSeedHex: "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
			SubjectSeedHex:  "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f",
			SessionID:       base64.RawURLEncoding.EncodeToString([]byte("acaptcha-session")),
			NonceB64:        base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xa5, 0x5a}, 16)),
			PowDifficulty:   12,
		}
		v = buildStartVector(t, v)
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(startVectorPath, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(filepath.FromSlash(startVectorPath))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	if got := buildStartVector(t, v); got != v {
		t.Fatalf("spec/vectors/http_start.json is not what the door computes (rerun with -update-start-vector and review):\n%+v\nwant\n%+v", got, v)
	}
	// The key proof and the payment, checked as the door checks them.
	vid, _ := peer.Decode(v.Verifier)
	sid, _ := peer.Decode(v.Subject)
	if len(v.SessionID) != 22 {
		t.Fatalf("session_id %q: 128 bits are 22 base64url characters", v.SessionID)
	}
	nonce, _ := base64.StdEncoding.DecodeString(v.NonceB64)
	pubB, _ := base64.StdEncoding.DecodeString(v.Request.PublicKey)
	sig, _ := base64.StdEncoding.DecodeString(v.Request.Signature)
	other, _ := base64.StdEncoding.DecodeString(v.OtherSessionSignature)
	pow, _ := base64.StdEncoding.DecodeString(v.Request.Pow)
	pub, err := crypto.UnmarshalPublicKey(pubB)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := peer.IDFromPublicKey(pub); err != nil || id != sid {
		t.Fatalf("public_key is %s's (%v), not the subject's", id, err)
	}
	msg := StartMessage(v.SessionID, nonce, vid, sid)
	if ok, err := pub.Verify(msg, sig); !ok || err != nil {
		t.Fatalf("signature does not verify: %v", err)
	}
	if ok, _ := pub.Verify(msg, other); ok {
		t.Fatal("another session's signature verifies")
	}
	if !protocol.CheckPow(nonce, sid, pow, v.PowDifficulty) {
		t.Fatal("pow does not pay")
	}
}
