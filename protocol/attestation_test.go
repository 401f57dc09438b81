package protocol_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha512"
	"encoding/asn1"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	secpecdsa "github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"
	recordpb "github.com/libp2p/go-libp2p/core/record/pb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// The flag has a long, specific name because other test files of this
// package may define their own golden-file flags.
var updateAttestationVector = flag.Bool("update-attestation-vector", false, "rewrite spec/vectors/attestation.json")

const attestVectorPath = "../spec/vectors/attestation.json"

// attestSentinels lists every verification error with its code in the
// vector file.
var attestSentinels = []struct {
	code string
	err  error
}{
	{"malformed", protocol.ErrMalformed},
	{"too_large", protocol.ErrTooLarge},
	{"bad_signature", protocol.ErrBadSignature},
	{"issuer_mismatch", protocol.ErrIssuerMismatch},
	{"subject_mismatch", protocol.ErrSubjectMismatch},
	{"expired", protocol.ErrExpired},
	{"not_yet_valid", protocol.ErrNotYetValid},
	{"unsupported_version", protocol.ErrUnsupportedVersion},
	{"source_below_minimum", protocol.ErrSourceBelowMinimum},
}

func attestSentinel(code string) error {
	for _, s := range attestSentinels {
		if s.code == code {
			return s.err
		}
	}
	return nil
}

// attestMatched returns the codes of the sentinels err wraps.
func attestMatched(err error) []string {
	var out []string
	for _, s := range attestSentinels {
		if errors.Is(err, s.err) {
			out = append(out, s.code)
		}
	}
	return out
}

// attestWantErr fails unless err wraps want and no other sentinel.
func attestWantErr(t testing.TB, err error, want error) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", want)
	}
	if !errors.Is(err, want) {
		t.Fatalf("error %q does not wrap %q", err, want)
	}
	if m := attestMatched(err); len(m) != 1 {
		t.Fatalf("error %q wraps %d sentinels %v, want exactly one", err, len(m), m)
	}
}

func attestSeq(start byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = start + byte(i)
	}
	return b
}

// Fixed inputs of the test vector.
var (
	attestIssuerSeed  = attestSeq(0x00, 32)
	attestSubjectSeed = attestSeq(0x20, 32)
	attestOtherSeed   = attestSeq(0x40, 32)
	attestNonce       = attestSeq(0xa0, 32)
	attestIssuedAt    = time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)
	attestVerifyAt    = attestIssuedAt.Add(time.Hour)
	attestProvenance  = skill.Provenance{Source: skill.SourceHybrid, Model: "openai:gpt-4o-mini", LLMQuestions: true}
	attestTranscript  = []skill.RoundRecord{
		{Round: 1, Narrative: "LAB NOTE 1. Three kinases were screened; only KX-7 kept its shift across replicates.", Question: "Which kinase kept its shift?", Answer: "KX-7"},
		{Round: 2, Narrative: "MEMO 2. The kinase from the first note was re-run at 37 degrees; its Km rose to 41 uM.", Question: "What Km did the re-run give?", Answer: "41 uM"},
		{Round: 3, Narrative: "AUDIT 3. The re-run kinase was assigned tier amber after the review board met.", Question: "Which tier was assigned?", Answer: "amber"},
	}
)

func attestKey(t testing.TB, seed []byte) (crypto.PrivKey, peer.ID) {
	t.Helper()
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

// attestFixture returns the vector's attestation and keys.
func attestFixture(t testing.TB) (*protocol.Attestation, crypto.PrivKey, crypto.PrivKey) {
	t.Helper()
	ik, iid := attestKey(t, attestIssuerSeed)
	sk, sid := attestKey(t, attestSubjectSeed)
	d := skill.TranscriptDigest(attestTranscript)
	a := &protocol.Attestation{
		Issuer: iid, Subject: sid,
		Accepted: true, Reason: skill.ReasonOK,
		Nonce:            bytes.Clone(attestNonce),
		TranscriptDigest: d[:],
		Rounds: []protocol.RoundTiming{
			{Round: 1, Budget: 15 * time.Second, Effective: 4210 * time.Millisecond, NarrativeTokens: 533, Correct: true},
			{Round: 2, Budget: 15 * time.Second, Effective: 6875 * time.Millisecond, NarrativeTokens: 612, Correct: true},
			{Round: 3, Budget: 15 * time.Second, Effective: 5302 * time.Millisecond, NarrativeTokens: 701, Correct: true},
		},
		Policy: protocol.PolicySummary{
			Rounds: 3, Tau: 15 * time.Second, Total: 120 * time.Second, RTTCredit: 500 * time.Millisecond,
		},
		ChallengeDomain: "biochemistry",
		SetID:           "9b1c5e0d2a7f4b6c8e3d1a0f5c7b9e2d",
		IssuedAt:        attestIssuedAt,
		ExpiresAt:       attestIssuedAt.Add(protocol.DefaultAttestationTTL),
		SpecVersion:     protocol.SpecVersion,
		Provenance:      attestProvenance,
	}
	return a, ik, sk
}

// attestRejected is a rejected attestation under a derived-tau policy:
// the first two rounds of attestTranscript, each budget_ms the derived
// budget of its narrative_tokens (the transcript narrative's token count)
// and alpha 0.1, as an issuer MUST write it (attestation.md §3,
// verification.md "Human timing model"; TestAttestationVectorDerivedBudgets
// recomputes them), round 2 answered 1 ms late.
func attestRejected(t testing.TB) (*protocol.Attestation, crypto.PrivKey) {
	a, ik, _ := attestFixture(t)
	a.Accepted, a.Reason, a.FailedRound = false, skill.ReasonTimeout, 2
	a.Rounds = []protocol.RoundTiming{
		// 14 words, L = 19: lower bound 15.261 s, budget 1526 ms.
		{Round: 1, Budget: 1_526 * time.Millisecond, Effective: 1_201 * time.Millisecond, NarrativeTokens: 19, Correct: true},
		// 19 words, L = 25: lower bound 16.461 s, budget 1646 ms.
		{Round: 2, Budget: 1_646 * time.Millisecond, Effective: 1_647 * time.Millisecond, NarrativeTokens: 25, Correct: true},
	}
	a.Policy = protocol.PolicySummary{Rounds: 3, DerivedTau: true, Alpha: 0.1, Total: 90 * time.Second, RTTCredit: 250 * time.Millisecond}
	a.ChallengeDomain, a.SetID = "cybersecurity", "set-0042"
	a.Provenance = skill.Provenance{Source: skill.SourceProcedural}
	return a, ik
}

// attestRawRecord signs arbitrary payload bytes under the attestation
// domain, to reach the checks behind the signature. It is never
// registered.
type attestRawRecord struct {
	payload []byte
	codec   []byte
}

func (r *attestRawRecord) Domain() string { return protocol.AttestationDomain }
func (r *attestRawRecord) Codec() []byte {
	if r.codec != nil {
		return r.codec
	}
	return binary.AppendUvarint(nil, protocol.AttestationCodec)
}
func (r *attestRawRecord) MarshalRecord() ([]byte, error) { return r.payload, nil }
func (r *attestRawRecord) UnmarshalRecord(b []byte) error { r.payload = b; return nil }

func attestSealRaw(t testing.TB, rec record.Record, key crypto.PrivKey) []byte {
	t.Helper()
	env, err := record.Seal(rec, key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawAttestRecord is payload bytes signed as an attestation as they are
// (for vectors that Seal and protobuf would not write).
type rawAttestRecord []byte

func (r rawAttestRecord) Domain() string                 { return protocol.AttestationDomain }
func (r rawAttestRecord) Codec() []byte                  { return []byte{0x81, 0x94, 0xeb, 0x01} }
func (r rawAttestRecord) MarshalRecord() ([]byte, error) { return r, nil }
func (r rawAttestRecord) UnmarshalRecord([]byte) error   { return nil }

// attestPayloadWith is a's payload with spec_version set to mark and then
// mark's bytes replaced by raw (which protobuf would refuse to write).
func attestPayloadWith(t testing.TB, a *protocol.Attestation, mark, raw string) []byte {
	t.Helper()
	b := *a
	b.SpecVersion = mark
	payload, err := b.MarshalRecord()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(payload, []byte(mark)) != 1 || len(mark) != len(raw) {
		t.Fatalf("mark %q not once in the payload", mark)
	}
	return bytes.Replace(payload, []byte(mark), []byte(raw), 1)
}

// attestOffCurveEnvelope is an envelope whose public key is the Ed25519
// encoding of y = 2 (no point of the curve: x² would be a non-residue),
// over a with that key's peer ID as issuer, signed with 64 zero bytes.
func attestOffCurveEnvelope(t testing.TB, a *protocol.Attestation) []byte {
	t.Helper()
	keyData := make([]byte, 32)
	keyData[0] = 2
	return attestRawEd25519Envelope(t, a, keyData, func([]byte) []byte { return make([]byte, 64) })
}

// attestRawEd25519Envelope is an envelope whose public key is the Ed25519
// encoding keyData, over a with that key's peer ID as issuer, signed with
// sign(the bytes a signature covers).
func attestRawEd25519Envelope(t testing.TB, a *protocol.Attestation, keyData []byte, sign func(signed []byte) []byte) []byte {
	t.Helper()
	pub, err := crypto.UnmarshalEd25519PublicKey(keyData)
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
	pk, err := crypto.PublicKeyToProto(pub)
	if err != nil {
		t.Fatal(err)
	}
	typ := []byte{0x81, 0x94, 0xeb, 0x01}
	sig := sign(attestSignedBytes(protocol.AttestationDomain, typ, payload))
	out, err := proto.Marshal(&recordpb.Envelope{PublicKey: pk, PayloadType: typ, Payload: payload, Signature: sig})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// attestSmallOrderEnvelope is an envelope whose public key is the
// Ed25519 encoding of the curve's identity point (01 00...00, of order
// 1), over a with that key's peer ID as issuer, with the signature
// R || S of R = [s]B and S = s for the scalar s of seed 07 00...00
// (RFC 8032 clamping, reduced mod L): [S]B = R + [k]A holds for every k,
// so this "signature" verifies over any message under the identity key
// (attestation.md §2 refuses keys of small order: anyone signs for them).
func attestSmallOrderEnvelope(t testing.TB, a *protocol.Attestation) []byte {
	t.Helper()
	keyData := make([]byte, 32)
	keyData[0] = 1
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = 7
	h := sha512.Sum512(seed)
	h[0] &= 248
	h[31] &= 127
	h[31] |= 64
	le := make([]byte, 32)
	for i := range le {
		le[i] = h[31-i]
	}
	l, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
	sb := new(big.Int).Mod(new(big.Int).SetBytes(le), l).FillBytes(make([]byte, 32))
	slices.Reverse(sb)
	sig := append(bytes.Clone(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)), sb...)
	return attestRawEd25519Envelope(t, a, keyData, func(signed []byte) []byte {
		if !ed25519.Verify(ed25519.PublicKey(keyData), signed, sig) {
			t.Fatal("the identity key's forged signature does not verify under crypto/ed25519")
		}
		return sig
	})
}

// attestSealUnchecked signs a without Seal's refusals.
func attestSealUnchecked(t testing.TB, a *protocol.Attestation, key crypto.PrivKey) []byte {
	t.Helper()
	return attestSealRaw(t, a, key)
}

func attestMustSeal(t testing.TB, a *protocol.Attestation, key crypto.PrivKey) []byte {
	t.Helper()
	b, err := protocol.Seal(a, key)
	if err != nil {
		t.Fatalf("seal: %v", err)
	}
	return b
}

func TestAttestationRecordInterface(t *testing.T) {
	var r protocol.AttestationRecord
	if got := r.Domain(); got != "acaptcha-attestation" {
		t.Fatalf("Domain() = %q", got)
	}
	want := []byte{0x81, 0x94, 0xeb, 0x01}
	if got := r.Codec(); !bytes.Equal(got, want) {
		t.Fatalf("Codec() = %x, want %x", got, want)
	}
	if protocol.AttestationCodec < 0x300000 || protocol.AttestationCodec > 0x3fffff {
		t.Fatalf("codec %#x outside the private range", protocol.AttestationCodec)
	}
	// Mutating the returned codec must not change the next one.
	r.Codec()[0] = 0
	if got := r.Codec(); !bytes.Equal(got, want) {
		t.Fatalf("Codec() shares its backing array: %x", got)
	}
}

func TestAttestationSealVerifyRoundTrip(t *testing.T) {
	accepted, ik, _ := attestFixture(t)
	rejected, rk := attestRejected(t)
	for _, tc := range []struct {
		name string
		a    *protocol.Attestation
		key  crypto.PrivKey
	}{{"accepted fixed tau", accepted, ik}, {"rejected derived tau", rejected, rk}} {
		t.Run(tc.name, func(t *testing.T) {
			data := attestMustSeal(t, tc.a, tc.key)
			got, env, err := protocol.VerifyAttestation(data, protocol.VerifyOptions{
				Subject: tc.a.Subject, Issuer: tc.a.Issuer, Now: attestVerifyAt,
			})
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			if !reflect.DeepEqual(got, tc.a) {
				t.Fatalf("round trip changed the attestation:\n got %+v\nwant %+v", got, tc.a)
			}
			if !bytes.Equal(env.PayloadType, []byte{0x81, 0x94, 0xeb, 0x01}) {
				t.Fatalf("payload type %x", env.PayloadType)
			}
			signer, err := peer.IDFromPublicKey(env.PublicKey)
			if err != nil || signer != tc.a.Issuer {
				t.Fatalf("envelope key belongs to %s (%v), want %s", signer, err, tc.a.Issuer)
			}
			// The generic libp2p path finds the registered type too.
			_, rec, err := record.ConsumeEnvelope(data, protocol.AttestationDomain)
			if err != nil {
				t.Fatalf("ConsumeEnvelope: %v", err)
			}
			ar, ok := rec.(*protocol.AttestationRecord)
			if !ok || !reflect.DeepEqual(ar, tc.a) {
				t.Fatalf("ConsumeEnvelope returned %T %+v", rec, rec)
			}
			if !got.Valid(attestVerifyAt) {
				t.Fatal("Valid() is false inside the validity window")
			}
		})
	}
}

func TestAttestationMillisecondTruncation(t *testing.T) {
	a, ik, _ := attestFixture(t)
	a.Rounds[0].Effective = 4210*time.Millisecond + 999*time.Microsecond
	a.IssuedAt = a.IssuedAt.Add(700 * time.Millisecond)
	got, _, err := protocol.VerifyAttestation(attestMustSeal(t, a, ik), protocol.VerifyOptions{Now: attestVerifyAt})
	if err != nil {
		t.Fatal(err)
	}
	if got.Rounds[0].Effective != 4210*time.Millisecond {
		t.Fatalf("effective %s, want truncation to 4.21s", got.Rounds[0].Effective)
	}
	if !got.IssuedAt.Equal(attestIssuedAt) {
		t.Fatalf("issued at %s, want truncation to %s", got.IssuedAt, attestIssuedAt)
	}
}

func TestAttestationVerifyErrors(t *testing.T) {
	a, ik, sk := attestFixture(t)
	good := attestMustSeal(t, a, ik)
	_, sid := attestKey(t, attestSubjectSeed)
	_, iid := attestKey(t, attestIssuerSeed)
	ok := protocol.VerifyOptions{Now: attestVerifyAt}

	tampered := bytes.Clone(good)
	i := bytes.Index(tampered, []byte("biochemistry"))
	if i < 0 {
		t.Fatal("domain string not found in envelope")
	}
	tampered[i] = 'B'

	otherKey, _ := attestKey(t, attestOtherSeed)
	wrongKey := attestSealUnchecked(t, a, otherKey)

	v2 := *a
	v2.SpecVersion = "2.0.0"
	unsupported := attestSealUnchecked(t, &v2, ik)
	junkVersion := *a
	junkVersion.SpecVersion = "one"
	unparsable := attestSealUnchecked(t, &junkVersion, ik)

	badType := attestSealRaw(t, &attestRawRecord{payload: mustPayload(t, a), codec: []byte{0x03, 0x02}}, ik)
	badPayload := attestSealRaw(t, &attestRawRecord{payload: []byte{0xff, 0xff, 0xff}}, ik)

	for _, tc := range []struct {
		name string
		data []byte
		opts protocol.VerifyOptions
		want error
	}{
		{"tampered payload byte", tampered, ok, protocol.ErrBadSignature},
		{"wrong issuer key", wrongKey, ok, protocol.ErrIssuerMismatch},
		{"unexpected issuer", good, protocol.VerifyOptions{Now: attestVerifyAt, Issuer: sid}, protocol.ErrIssuerMismatch},
		{"wrong expected subject", good, protocol.VerifyOptions{Now: attestVerifyAt, Subject: iid}, protocol.ErrSubjectMismatch},
		{"expired", good, protocol.VerifyOptions{Now: a.ExpiresAt}, protocol.ErrExpired},
		{"long expired", good, protocol.VerifyOptions{Now: a.ExpiresAt.Add(365 * 24 * time.Hour)}, protocol.ErrExpired},
		{"not yet valid", good, protocol.VerifyOptions{Now: a.IssuedAt.Add(-protocol.MaxClockSkew - time.Second)}, protocol.ErrNotYetValid},
		{"unsupported version", unsupported, ok, protocol.ErrUnsupportedVersion},
		{"unparsable version", unparsable, ok, protocol.ErrUnsupportedVersion},
		{"oversized", make([]byte, protocol.MaxEnvelopeBytes+1), ok, protocol.ErrTooLarge},
		{"garbage", []byte("this is not a protobuf envelope \x00\xff\xfe"), ok, protocol.ErrMalformed},
		{"empty", nil, ok, protocol.ErrMalformed},
		{"truncated", good[:len(good)/2], ok, protocol.ErrMalformed},
		{"foreign payload type", badType, ok, protocol.ErrMalformed},
		{"undecodable payload", badPayload, ok, protocol.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, env, err := protocol.VerifyAttestation(tc.data, tc.opts)
			attestWantErr(t, err, tc.want)
			if got != nil || env != nil {
				t.Fatalf("got a record or envelope alongside error %v", err)
			}
		})
	}

	t.Run("expired allowed", func(t *testing.T) {
		got, _, err := protocol.VerifyAttestation(good, protocol.VerifyOptions{Now: a.ExpiresAt.Add(time.Hour), AllowExpired: true})
		if err != nil || got == nil {
			t.Fatalf("AllowExpired: %v", err)
		}
	})
	t.Run("skew tolerated", func(t *testing.T) {
		if _, _, err := protocol.VerifyAttestation(good, protocol.VerifyOptions{Now: a.IssuedAt.Add(-protocol.MaxClockSkew)}); err != nil {
			t.Fatalf("issued %s ahead: %v", protocol.MaxClockSkew, err)
		}
	})
	t.Run("last second", func(t *testing.T) {
		if _, _, err := protocol.VerifyAttestation(good, protocol.VerifyOptions{Now: a.ExpiresAt.Add(-time.Nanosecond)}); err != nil {
			t.Fatalf("just before expiry: %v", err)
		}
	})
	_ = sk
}

func mustPayload(t testing.TB, a *protocol.Attestation) []byte {
	t.Helper()
	b, err := a.MarshalRecord()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAttestationStructuralChecks signs inconsistent records with the
// issuer's key (bypassing Seal) and expects ErrMalformed from verification
// and a refusal from Seal.
func TestAttestationStructuralChecks(t *testing.T) {
	_, oid := attestKey(t, attestOtherSeed)
	for _, tc := range []struct {
		name   string
		mutate func(a *protocol.Attestation)
	}{
		{"short nonce", func(a *protocol.Attestation) { a.Nonce = a.Nonce[:31] }},
		{"no digest", func(a *protocol.Attestation) { a.TranscriptDigest = nil }},
		{"long digest", func(a *protocol.Attestation) { a.TranscriptDigest = append(a.TranscriptDigest, 0) }},
		{"unknown reason", func(a *protocol.Attestation) { a.Reason = "bogus" }},
		{"inconclusive", func(a *protocol.Attestation) {
			a.Accepted, a.Reason, a.FailedRound = false, skill.ReasonInconclusive, 1
		}},
		{"accepted with failure reason", func(a *protocol.Attestation) { a.Reason = skill.ReasonWrongAnswer }},
		{"rejected with ok reason", func(a *protocol.Attestation) { a.Accepted, a.FailedRound = false, 1 }},
		{"rejected without failed round", func(a *protocol.Attestation) { a.Accepted, a.Reason = false, skill.ReasonWrongAnswer }},
		{"failed round beyond policy", func(a *protocol.Attestation) { a.Accepted, a.Reason, a.FailedRound = false, skill.ReasonWrongAnswer, 4 }},
		{"accepted with failed round", func(a *protocol.Attestation) { a.FailedRound = 2 }},
		{"accepted with a wrong round", func(a *protocol.Attestation) { a.Rounds[1].Correct = false }},
		{"accepted over budget", func(a *protocol.Attestation) { a.Rounds[2].Effective = a.Rounds[2].Budget + time.Millisecond }},
		{"accepted missing a round", func(a *protocol.Attestation) { a.Rounds = a.Rounds[:2] }},
		{"misnumbered rounds", func(a *protocol.Attestation) { a.Rounds[0].Round, a.Rounds[1].Round = 2, 1 }},
		{"issuer is subject", func(a *protocol.Attestation) { a.Subject = a.Issuer }},
		{"subject not a peer ID", func(a *protocol.Attestation) { a.Subject = "not a multihash" }},
		{"zero policy", func(a *protocol.Attestation) { a.Policy = protocol.PolicySummary{} }},
		{"fixed tau with alpha", func(a *protocol.Attestation) { a.Policy.Alpha = 0.1 }},
		{"derived tau with tau", func(a *protocol.Attestation) { a.Policy.DerivedTau, a.Policy.Alpha = true, 0.1 }},
		{"four rounds", func(a *protocol.Attestation) { a.Policy.Rounds = 4 }},
		{"expiry before issue", func(a *protocol.Attestation) { a.ExpiresAt = a.IssuedAt }},
		{"zero issue time", func(a *protocol.Attestation) { a.IssuedAt = time.Time{} }},
		{"oversized domain", func(a *protocol.Attestation) {
			a.ChallengeDomain = strings.Repeat("d", protocol.MaxAttestationString+1)
		}},
		{"other subject but wrong digest", func(a *protocol.Attestation) { a.Subject = oid; a.TranscriptDigest = a.TranscriptDigest[:16] }},
		{"oversized provenance model", func(a *protocol.Attestation) { a.Provenance.Model = strings.Repeat("m", skill.MaxModelBytes+1) }},
		{"provenance model not UTF-8", func(a *protocol.Attestation) { a.Provenance.Model = "openai:\xff" }},
		{"oversized provenance source", func(a *protocol.Attestation) {
			a.Provenance.Source = skill.SourceKind(strings.Repeat("s", protocol.MaxSourceBytes+1))
		}},
		{"provenance source not UTF-8", func(a *protocol.Attestation) { a.Provenance.Source = "llm\xfe" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, ik, _ := attestFixture(t)
			tc.mutate(a)
			if _, err := protocol.Seal(a, ik); !errors.Is(err, protocol.ErrMalformed) {
				t.Fatalf("Seal: got %v, want ErrMalformed", err)
			}
			if a.Valid(attestVerifyAt) {
				t.Fatal("Valid() accepted an inconsistent attestation")
			}
			b, err := a.MarshalRecord()
			if err != nil {
				// Not even encodable: nothing to verify.
				attestWantErr(t, err, protocol.ErrMalformed)
				return
			}
			_, _, err = protocol.VerifyAttestation(attestSealRaw(t, &attestRawRecord{payload: b}, ik), protocol.VerifyOptions{Now: attestVerifyAt})
			attestWantErr(t, err, protocol.ErrMalformed)
		})
	}
}

func TestAttestationSealRefusals(t *testing.T) {
	a, ik, sk := attestFixture(t)
	if _, err := protocol.Seal(a, sk); !errors.Is(err, protocol.ErrIssuerMismatch) {
		t.Fatalf("seal with the subject's key: %v, want ErrIssuerMismatch", err)
	}
	if _, err := protocol.Seal(nil, ik); !errors.Is(err, protocol.ErrMalformed) {
		t.Fatalf("seal nil: %v", err)
	}
	if _, err := protocol.Seal(a, nil); err == nil {
		t.Fatal("sealed with a nil key")
	}
	v := *a
	v.SpecVersion = "2.1.0"
	if _, err := protocol.Seal(&v, ik); !errors.Is(err, protocol.ErrUnsupportedVersion) {
		t.Fatalf("seal v2: %v, want ErrUnsupportedVersion", err)
	}
	neg := *a
	neg.Rounds = append([]protocol.RoundTiming(nil), a.Rounds...)
	neg.Rounds[0].Effective = -time.Second
	if _, err := protocol.Seal(&neg, ik); !errors.Is(err, protocol.ErrMalformed) {
		t.Fatalf("seal negative duration: %v", err)
	}
	// Expired attestations still seal (verification decides), and the
	// same key and content always give the same bytes.
	old := *a
	old.IssuedAt, old.ExpiresAt = a.IssuedAt.AddDate(-1, 0, 0), a.ExpiresAt.AddDate(-1, 0, 0)
	b1, b2 := attestMustSeal(t, &old, ik), attestMustSeal(t, &old, ik)
	if !bytes.Equal(b1, b2) {
		t.Fatal("sealing is not deterministic")
	}
}

func TestAttestationCheckAndValid(t *testing.T) {
	a, _, _ := attestFixture(t)
	if err := a.Check(attestVerifyAt); err != nil {
		t.Fatal(err)
	}
	if a.Valid(a.ExpiresAt) {
		t.Fatal("valid at its expiry instant")
	}
	attestWantErr(t, a.Check(a.ExpiresAt), protocol.ErrExpired)
	attestWantErr(t, a.Check(a.IssuedAt.Add(-time.Hour)), protocol.ErrNotYetValid)
	var nilA *protocol.Attestation
	if nilA.Valid(attestVerifyAt) {
		t.Fatal("nil attestation is valid")
	}
	// A zero now means the wall clock: the fixture expired in 2026-01-16.
	if time.Now().After(a.ExpiresAt) && a.Valid(time.Time{}) {
		t.Fatal("zero now did not use the wall clock")
	}
}

func TestAttestationJSON(t *testing.T) {
	a, _, _ := attestFixture(t)
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"issuer":       a.Issuer.String(),
		"subject":      a.Subject.String(),
		"accepted":     true,
		"reason":       "ok",
		"nonce":        hex.EncodeToString(attestNonce),
		"issued_at":    "2026-01-15T12:00:00Z",
		"expires_at":   "2026-01-16T12:00:00Z",
		"domain":       "biochemistry",
		"set_id":       a.SetID,
		"spec_version": protocol.SpecVersion,
	} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	rounds, _ := m["rounds"].([]any)
	if len(rounds) != 3 {
		t.Fatalf("rounds = %v", m["rounds"])
	}
	r0, _ := rounds[0].(map[string]any)
	if r0["budget_ms"] != 15000.0 || r0["effective_ms"] != 4210.0 || r0["narrative_tokens"] != 533.0 {
		t.Errorf("round 1 = %v", r0)
	}
	pol, _ := m["policy"].(map[string]any)
	if pol["tau_ms"] != 15000.0 || pol["total_ms"] != 120000.0 || pol["rtt_credit_ms"] != 500.0 || pol["derived_tau"] != false {
		t.Errorf("policy = %v", pol)
	}
	pv, _ := m["provenance"].(map[string]any)
	if pv["source"] != "hybrid" || pv["rank"] != 3.0 || pv["model"] != "openai:gpt-4o-mini" || pv["llm_questions"] != true {
		t.Errorf("provenance = %v", pv)
	}
	legacy := *a
	legacy.Provenance = skill.Provenance{}
	if b, err = json.Marshal(&legacy); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"provenance":{"source":"","rank":0,"model":"","llm_questions":false}`) {
		t.Errorf("record without provenance renders as %s", b)
	}
	var nilA *protocol.Attestation
	if b, err := json.Marshal(nilA); err != nil || string(b) != "null" {
		t.Errorf("nil attestation marshals to %s, %v", b, err)
	}
}

// TestAttestationProvenance covers the provenance fields: every kind
// round-trips, a record without them (as issued before they existed)
// decodes as unknown, issuers refuse what verifiers tolerate, and the
// minimum-source policy follows the ranks.
func TestAttestationProvenance(t *testing.T) {
	base, ik, _ := attestFixture(t)
	at := func(pv skill.Provenance) *protocol.Attestation {
		a := *base
		a.Provenance = pv
		return &a
	}
	for _, k := range skill.SourceKinds {
		pv := skill.Provenance{Source: k}
		if k != skill.SourceProcedural {
			pv.Model, pv.LLMQuestions = "ollama:qwen3", true
		}
		got, _, err := protocol.VerifyAttestation(attestMustSeal(t, at(pv), ik), protocol.VerifyOptions{Now: attestVerifyAt})
		if err != nil || got.Provenance != pv {
			t.Fatalf("%s: %+v, %v", k, got, err)
		}
	}

	// A payload without field 15, as a record from before the field.
	legacy := at(skill.Provenance{})
	m := &pb.AttestationRecord{}
	if err := proto.Unmarshal(mustPayload(t, legacy), m); err != nil {
		t.Fatal(err)
	}
	if m.Provenance != nil {
		t.Fatalf("a record naming no source still encodes field 15: %v", m.Provenance)
	}
	legacyEnv := attestMustSeal(t, legacy, ik)
	got, _, err := protocol.VerifyAttestation(legacyEnv, protocol.VerifyOptions{Now: attestVerifyAt})
	if err != nil || got.Provenance != (skill.Provenance{}) || got.Provenance.Source.Rank() != 0 {
		t.Fatalf("legacy record: %+v, %v", got, err)
	}

	// Issuers refuse an unlisted source and details without a source;
	// verifiers accept such records and rank them 0.
	for _, pv := range []skill.Provenance{{Source: "crowd"}, {Model: "openai:gpt-4o"}, {LLMQuestions: true}} {
		if _, err := protocol.Seal(at(pv), ik); !errors.Is(err, protocol.ErrMalformed) {
			t.Errorf("Seal(%+v) = %v, want ErrMalformed", pv, err)
		}
		env := attestSealUnchecked(t, at(pv), ik)
		got, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{Now: attestVerifyAt})
		if err != nil || got.Provenance != pv {
			t.Errorf("verify %+v: %+v, %v", pv, got, err)
		}
		_, _, err = protocol.VerifyAttestation(env, protocol.VerifyOptions{Now: attestVerifyAt, MinSource: skill.SourceProcedural})
		attestWantErr(t, err, protocol.ErrSourceBelowMinimum)
	}

	// The policy: rank(source) >= rank(min).
	sources := append([]skill.SourceKind{skill.SourceUnknown}, skill.SourceKinds...)
	for _, src := range sources {
		env := attestMustSeal(t, at(skill.Provenance{Source: src}), ik)
		for _, min := range sources {
			_, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{Now: attestVerifyAt, MinSource: min})
			want := min == skill.SourceUnknown || src.Rank() >= min.Rank()
			if (err == nil) != want {
				t.Errorf("source %q, minimum %q: err %v, want pass=%v", src, min, err, want)
			}
			if err != nil {
				attestWantErr(t, err, protocol.ErrSourceBelowMinimum)
			}
			if got := protocol.CheckSource(at(skill.Provenance{Source: src}), min); (got == nil) != want {
				t.Errorf("CheckSource(%q, %q) = %v", src, min, got)
			}
		}
	}
	// The acceptance case: procedural challenges do not meet llm, and
	// the message says why.
	_, _, err = protocol.VerifyAttestation(attestMustSeal(t, at(skill.Provenance{Source: skill.SourceProcedural}), ik),
		protocol.VerifyOptions{Now: attestVerifyAt, MinSource: skill.SourceLLM})
	attestWantErr(t, err, protocol.ErrSourceBelowMinimum)
	if !strings.Contains(err.Error(), "procedural") || !strings.Contains(err.Error(), "llm") {
		t.Errorf("message %q does not name both sources", err)
	}
	// A minimum that is not a source kind fails closed.
	_, _, err = protocol.VerifyAttestation(attestMustSeal(t, base, ik), protocol.VerifyOptions{Now: attestVerifyAt, MinSource: "any"})
	attestWantErr(t, err, protocol.ErrSourceBelowMinimum)
	// Other failures come first: an expired weak record is expired.
	_, _, err = protocol.VerifyAttestation(legacyEnv, protocol.VerifyOptions{Now: base.ExpiresAt, MinSource: skill.SourceLLM})
	attestWantErr(t, err, protocol.ErrExpired)
}

// TestAttestationFromSession drives a real skill session to a verdict and
// checks that NewAttestation's output seals and verifies, with the
// transcript digest the session implies.
func TestAttestationFromSession(t *testing.T) {
	narr := strings.Repeat("The assay panel recorded a steady drift in the third channel. ", 40)
	q := skill.Question{Question: "Which channel drifted?", Answer: "third", Answers: []string{"third", "3"}, ReasoningType: skill.MultiHop, AnswerType: skill.LabelAnswer}
	set := &skill.Set{ID: "session-set", Domain: "biochemistry", Parts: []skill.Part{
		{Narrative: narr, Questions: []skill.Question{q}},
		{Narrative: narr, Questions: []skill.Question{q}},
		{Narrative: narr, Questions: []skill.Question{q}},
	}}
	_, iid := attestKey(t, attestIssuerSeed)
	_, sid := attestKey(t, attestSubjectSeed)
	ik, _ := attestKey(t, attestIssuerSeed)
	now := attestIssuedAt.Add(123 * time.Millisecond)

	run := func(t *testing.T, answers []string) (skill.Verdict, *skill.Session) {
		s, err := skill.NewSession(set, skill.DefaultPolicy(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, ans := range answers {
			if _, err := s.Submit(ans, skill.Timing{Elapsed: time.Duration(i+2)*time.Second + 777*time.Microsecond, RTT: 40 * time.Millisecond, SinceStart: time.Duration(i+1) * 5 * time.Second}); err != nil {
				t.Fatal(err)
			}
		}
		v, ok := s.Verdict()
		if !ok {
			t.Fatal("no verdict")
		}
		return v, s
	}

	set.Provenance = &skill.Provenance{Source: skill.SourceLLM, Model: "anthropic:claude-x", LLMQuestions: true}
	for _, tc := range []struct {
		name    string
		answers []string
		accept  bool
	}{{"accepted", []string{"third", "3", " Third "}, true}, {"wrong answer", []string{"third", "second"}, false}} {
		t.Run(tc.name, func(t *testing.T) {
			v, s := run(t, tc.answers)
			a := protocol.NewAttestation(iid, sid, attestNonce, s, v, now, 0)
			if a == nil {
				t.Fatal("NewAttestation returned nil for a decided verdict")
			}
			got, _, err := protocol.VerifyAttestation(attestMustSeal(t, a, ik), protocol.VerifyOptions{Subject: sid, Issuer: iid, Now: now})
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			d := skill.TranscriptDigest(v.Rounds)
			if got.Accepted != tc.accept || !bytes.Equal(got.TranscriptDigest, d[:]) || len(got.Rounds) != len(v.Rounds) {
				t.Fatalf("got %+v for verdict %+v", got, v)
			}
			for i, r := range got.Rounds {
				if r.Effective != v.Rounds[i].Effective.Truncate(time.Millisecond) || r.Budget != v.Rounds[i].Budget {
					t.Errorf("round %d timing %+v, verdict %+v", i+1, r, v.Rounds[i])
				}
			}
			if !tc.accept && got.FailedRound != 2 {
				t.Errorf("failed round %d, want 2", got.FailedRound)
			}
			// Accepted and rejected records both carry the set's provenance.
			if got.Provenance != *set.Provenance {
				t.Errorf("provenance %+v, want the set's %+v", got.Provenance, *set.Provenance)
			}
		})
	}

	t.Run("provenance as recorded", func(t *testing.T) {
		defer func(pv *skill.Provenance) { set.Provenance = pv }(set.Provenance)
		for _, c := range []struct {
			name string
			in   *skill.Provenance
			want skill.Provenance
		}{
			{"none", nil, skill.Provenance{}},
			{"procedural", &skill.Provenance{Source: skill.SourceProcedural}, skill.Provenance{Source: skill.SourceProcedural}},
			{"corpus with LLM questions", &skill.Provenance{Source: skill.SourceCorpus, LLMQuestions: true}, skill.Provenance{Source: skill.SourceCorpus, LLMQuestions: true}},
		} {
			set.Provenance = c.in
			v, s := run(t, []string{"third", "second"})
			a := protocol.NewAttestation(iid, sid, attestNonce, s, v, now, 0)
			if a.Provenance != c.want {
				t.Errorf("%s: recorded %+v, want %+v", c.name, a.Provenance, c.want)
			}
			got, _, err := protocol.VerifyAttestation(attestMustSeal(t, a, ik), protocol.VerifyOptions{Now: now})
			if err != nil || got.Provenance != c.want {
				t.Errorf("%s: verified %+v (%v), want %+v", c.name, got, err, c.want)
			}
		}
		// Sets that Validate refuses never reach a session; the issuer's
		// mapping still never records what Seal would refuse.
		for _, c := range []struct {
			in, want skill.Provenance
		}{
			{skill.Provenance{Source: "bogus", Model: "m", LLMQuestions: true}, skill.Provenance{}},
			{skill.Provenance{Source: skill.SourceHybrid, Model: strings.Repeat("m", skill.MaxModelBytes+1), LLMQuestions: true}, skill.Provenance{Source: skill.SourceHybrid, LLMQuestions: true}},
			{skill.Provenance{Source: skill.SourceLLM, Model: "x\xff"}, skill.Provenance{Source: skill.SourceLLM}},
		} {
			if got := protocol.RecordedProvenance(&c.in); got != c.want {
				t.Errorf("RecordedProvenance(%+v) = %+v, want %+v", c.in, got, c.want)
			}
		}
	})

	t.Run("inconclusive is never attested", func(t *testing.T) {
		s, err := skill.NewSession(set, skill.DefaultPolicy(), nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Fail(skill.ReasonInconclusive, "verifier LLM down", false)
		v, _ := s.Verdict()
		if a := protocol.NewAttestation(iid, sid, attestNonce, s, v, now, 0); a != nil {
			t.Fatalf("inconclusive verdict produced %+v", a)
		}
	})
}

// ---- Test vector -------------------------------------------------------

type attestVectorFile struct {
	Description     string                 `json:"description"`
	SpecVersion     string                 `json:"spec_version"`
	RecordDomain    string                 `json:"record_domain"`
	PayloadTypeHex  string                 `json:"payload_type_hex"`
	IssuerSeedHex   string                 `json:"issuer_seed_hex"`
	SubjectSeedHex  string                 `json:"subject_seed_hex"`
	IssuerPeerID    string                 `json:"issuer_peer_id"`
	SubjectPeerID   string                 `json:"subject_peer_id"`
	IssuerPubKeyHex string                 `json:"issuer_public_key_hex"`
	Transcript      []attestVectorRound    `json:"transcript"`
	PayloadHex      string                 `json:"payload_hex"`
	SignedBytesHex  string                 `json:"signed_bytes_hex"`
	SignatureHex    string                 `json:"signature_hex"`
	EnvelopeHex     string                 `json:"envelope_hex"`
	VerifyAt        string                 `json:"verify_at"`
	VerifyMinSource string                 `json:"verify_min_source"`
	Expected        json.RawMessage        `json:"expected"`
	Negative        []attestVectorNegative `json:"negative"`
	Variants        []attestVectorVariant  `json:"variants"`
	// Valid are envelopes of other bytes that verify, as envelope_hex,
	// with the subject expected, to the record of expected.
	Valid []attestVectorValid `json:"valid"`
}

// attestVectorValid is an envelope in other bytes that verifies to the
// vector's record (attestation.md §2: the issuer's peer ID is derived
// from the key decoded, not from public_key's bytes).
type attestVectorValid struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	EnvelopeHex string `json:"envelope_hex"`
	VerifyAt    string `json:"verify_at"`
}

// attestVectorVariant is another valid record of the same issuer and
// subject: its payload is the deterministic encoding of its fields
// (attestation.md §3, "Encoding notes"), which expected lists.
type attestVectorVariant struct {
	Name        string              `json:"name"`
	Description string              `json:"description"`
	Transcript  []attestVectorRound `json:"transcript"`
	PayloadHex  string              `json:"payload_hex"`
	EnvelopeHex string              `json:"envelope_hex"`
	VerifyAt    string              `json:"verify_at"`
	Expected    json.RawMessage     `json:"expected"`
}

// attestVariants are the vector's other valid records: a late answer
// under a derived tau, a round left unanswered, and a decline before
// round 1, each with the transcript its digest covers.
func attestVariants(t testing.TB) []struct {
	name, desc string
	a          *protocol.Attestation
	transcript []skill.RoundRecord
} {
	late, _ := attestRejected(t)
	lateT := attestTranscript[:2]
	d := skill.TranscriptDigest(lateT)
	late.TranscriptDigest = bytes.Clone(d[:])

	unanswered, _, _ := attestFixture(t)
	unanswered.Accepted, unanswered.Reason, unanswered.FailedRound = false, skill.ReasonTimeout, 2
	unansweredT := []skill.RoundRecord{attestTranscript[0], {Round: 2, Narrative: attestTranscript[1].Narrative, Question: attestTranscript[1].Question}}
	d = skill.TranscriptDigest(unansweredT)
	unanswered.TranscriptDigest = bytes.Clone(d[:])
	unanswered.Rounds = []protocol.RoundTiming{
		unanswered.Rounds[0],
		// Unanswered: the verifier waited budget + credit + the 250 ms
		// grace (15.75 s) and records max(waited - credit, 0).
		{Round: 2, Budget: 15 * time.Second, Effective: 15_250 * time.Millisecond, NarrativeTokens: 612},
	}

	declined, _, _ := attestFixture(t)
	declined.Accepted, declined.Reason, declined.FailedRound = false, skill.ReasonDeclined, 1
	d = skill.TranscriptDigest(nil)
	declined.TranscriptDigest, declined.Rounds = bytes.Clone(d[:]), nil
	declined.ChallengeDomain, declined.SetID = "", ""

	return []struct {
		name, desc string
		a          *protocol.Attestation
		transcript []skill.RoundRecord
	}{
		{"rejected_late_derived_tau", "a timeout in round 2: answered (correct) 1 ms past its derived budget; policy derived_tau with alpha 0.1 (tau_ms absent), total 90 s, credit 250 ms; " +
			"each round's narrative_tokens is its transcript narrative's token count and its budget_ms the derived budget of that count and alpha (verification.md, \"Human timing model\"), as an issuer writes them; " +
			"set_id \"set-0042\" is a set's own name as a 1.0.0 issuer wrote it (verifiers accept any string); source procedural (model absent, llm_questions false); failed_round 2", late, lateT},
		{"rejected_unanswered", "a timeout in round 2 with no answer: the round's entry has correct false (absent) and effective_ms = waited - credit; the transcript digest covers round 2 with an empty answer; failed_round 2", unanswered, unansweredT},
		{"declined_before_round_1", "declined after the paid hello ack, before any challenge: no round entries, failed_round 1, no domain and no set_id (the set went back unseen); the transcript digest covers no round", declined, nil},
	}
}

type attestVectorRound struct {
	Round     int    `json:"round"`
	Narrative string `json:"narrative"`
	Question  string `json:"question"`
	Answer    string `json:"answer"`
}

type attestVectorNegative struct {
	Name            string `json:"name"`
	Description     string `json:"description"`
	EnvelopeHex     string `json:"envelope_hex,omitempty"`
	VerifyAt        string `json:"verify_at"`
	ExpectedSubject string `json:"expected_subject,omitempty"`
	MinSource       string `json:"min_source,omitempty"`
	Error           string `json:"error"`
}

// attestSignedBytes rebuilds the bytes an envelope signature covers, as
// spec/attestation.md describes them (independently of libp2p).
func attestSignedBytes(domain string, payloadType, payload []byte) []byte {
	var b []byte
	for _, f := range [][]byte{[]byte(domain), payloadType, payload} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

func attestBuildVector(t testing.TB) []byte {
	t.Helper()
	a, ik, _ := attestFixture(t)
	_, oid := attestKey(t, attestOtherSeed)
	otherKey, _ := attestKey(t, attestOtherSeed)
	data := attestMustSeal(t, a, ik)
	var env recordpb.Envelope
	if err := proto.Unmarshal(data, &env); err != nil {
		t.Fatal(err)
	}
	pub, err := crypto.MarshalPublicKey(ik.GetPublic())
	if err != nil {
		t.Fatal(err)
	}
	expected, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}

	tampered := bytes.Clone(data)
	tampered[bytes.Index(tampered, []byte("biochemistry"))] = 'B'
	v2 := *a
	v2.SpecVersion = "2.0.0"
	procedural := *a
	procedural.Provenance = skill.Provenance{Source: skill.SourceProcedural}
	legacy := *a
	legacy.Provenance = skill.Provenance{}
	secpKey, secpID := attestSecpKey(t)
	secpRec := *a
	secpRec.Issuer = secpID
	stamp := func(tm time.Time) string { return tm.UTC().Format(time.RFC3339) }
	badSubject := *a
	badSubject.Subject = peer.ID([]byte{0x55, 0x00})
	badVersion := attestPayloadWith(t, a, "1.0.0+X", "1.0.0+\xff")
	// Payloads the reference decoder refuses (attestation.md §3,
	// "Decoding"): the record's bytes with bytes appended.
	appended := func(extra ...byte) []byte { return append(mustPayload(t, a), extra...) }
	undecodable := []struct {
		name, desc string
		payload    []byte
	}{
		{"payload_varint_overflow", "the record with 88 01 ff ff ff ff ff ff ff ff ff 02 appended (field 17, varint, a ten-byte varint whose last byte exceeds 1: above 2^64 - 1)",
			appended(0x88, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02)},
		{"payload_varint_eleven_bytes", "the record with 88 01 ff ff ff ff ff ff ff ff ff ff 01 appended (field 17, varint, an eleven-byte varint)",
			appended(0x88, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)},
		{"payload_field_number_above_max", "the record with 80 80 80 80 10 01 appended (a varint field of number 2^29, one above the largest)",
			appended(0x80, 0x80, 0x80, 0x80, 0x10, 0x01)},
		{"payload_wire_type_6", "the record with 8e 01 00 appended (field 17 with wire type 6, which does not exist)",
			appended(0x8e, 0x01, 0x00)},
		{"payload_group_end_mismatch", "the record with a3 06 ac 06 appended (a group of field 100 closed by the end tag of field 101)",
			appended(0xa3, 0x06, 0xac, 0x06)},
		{"payload_lone_group_end", "the record with a4 06 appended (the end tag of a group of field 100 that never started)",
			appended(0xa4, 0x06)},
	}
	offCurve := attestOffCurveEnvelope(t, a)
	// y = 3 + p (2^255 - 16, little-endian f0 ff .. ff 7f): a y of p or
	// more is taken modulo p (attestation.md §2); y = 3 is a curve point
	// of large order, so the key decodes and only its signature fails.
	yAboveP := make([]byte, 32)
	for i := range yAboveP {
		yAboveP[i] = 0xff
	}
	yAboveP[0], yAboveP[31] = 0xf0, 0x7f
	nonCanonical := attestRawEd25519Envelope(t, a, yAboveP, func([]byte) []byte { return make([]byte, 64) })
	smallOrder := attestSmallOrderEnvelope(t, a)

	f := attestVectorFile{
		Description: "acaptcha signed attestation, spec/attestation.md. Keys are Ed25519 from the given seeds " +
			"(RFC 8032 private-key seeds); the attestation is accepted, fixed tau 15 s, three rounds, challenges from source hybrid. " +
			"Verify envelope_hex at verify_at with the subject expected and minimum source verify_min_source; each negative case must fail with its error code.",
		SpecVersion:     protocol.SpecVersion,
		RecordDomain:    protocol.AttestationDomain,
		PayloadTypeHex:  hex.EncodeToString(env.PayloadType),
		IssuerSeedHex:   hex.EncodeToString(attestIssuerSeed),
		SubjectSeedHex:  hex.EncodeToString(attestSubjectSeed),
		IssuerPeerID:    a.Issuer.String(),
		SubjectPeerID:   a.Subject.String(),
		IssuerPubKeyHex: hex.EncodeToString(pub),
		PayloadHex:      hex.EncodeToString(env.Payload),
		SignedBytesHex:  hex.EncodeToString(attestSignedBytes(protocol.AttestationDomain, env.PayloadType, env.Payload)),
		SignatureHex:    hex.EncodeToString(env.Signature),
		EnvelopeHex:     hex.EncodeToString(data),
		VerifyAt:        stamp(attestVerifyAt),
		VerifyMinSource: string(skill.SourceLLM),
		Expected:        expected,
		Negative: []attestVectorNegative{
			{Name: "tampered_payload", Description: "envelope_hex with the first byte of the domain string changed from 'b' to 'B'", EnvelopeHex: hex.EncodeToString(tampered), VerifyAt: stamp(attestVerifyAt), Error: "bad_signature"},
			{Name: "wrong_issuer_key", Description: "the same record signed by the key of seed 404142...5f, which is not the issuer's", EnvelopeHex: hex.EncodeToString(attestSealUnchecked(t, a, otherKey)), VerifyAt: stamp(attestVerifyAt), Error: "issuer_mismatch"},
			{Name: "wrong_subject", Description: "envelope_hex verified by a peer expecting an attestation about " + oid.String(), VerifyAt: stamp(attestVerifyAt), ExpectedSubject: oid.String(), Error: "subject_mismatch"},
			{Name: "expired", Description: "envelope_hex verified at its expires_at instant", VerifyAt: stamp(a.ExpiresAt), Error: "expired"},
			{Name: "not_yet_valid", Description: "envelope_hex verified six minutes before its issued_at", VerifyAt: stamp(a.IssuedAt.Add(-6 * time.Minute)), Error: "not_yet_valid"},
			{Name: "unsupported_version", Description: "the record with spec_version 2.0.0, correctly signed by the issuer", EnvelopeHex: hex.EncodeToString(attestSealUnchecked(t, &v2, ik)), VerifyAt: stamp(attestVerifyAt), Error: "unsupported_version"},
			{Name: "procedural_below_llm", Description: "the record with provenance {source: procedural} (no model, llm_questions false), correctly signed by the issuer, verified by a party requiring source llm", EnvelopeHex: hex.EncodeToString(attestMustSeal(t, &procedural, ik)), VerifyAt: stamp(attestVerifyAt), MinSource: string(skill.SourceLLM), Error: "source_below_minimum"},
			{Name: "secp256k1_high_s", Description: "the record with issuer " + secpID.String() + " (the Secp256k1 key of scalar 0101...01), signed by that key, with the signature's S replaced by n-S: valid ECDSA, but S is high", EnvelopeHex: hex.EncodeToString(attestHighS(t, attestMustSeal(t, &secpRec, secpKey))), VerifyAt: stamp(attestVerifyAt), Error: "bad_signature"},
			{Name: "secp256k1_signature_trailing_byte", Description: "the record with issuer " + secpID.String() + " (the Secp256k1 key of scalar 0101...01), signed by that key (low S), with a byte 00 appended after its DER SEQUENCE", EnvelopeHex: hex.EncodeToString(attestSecpSig(t, attestMustSeal(t, &secpRec, secpKey), derTrailingByte)), VerifyAt: stamp(attestVerifyAt), Error: "bad_signature"},
			{Name: "secp256k1_signature_non_minimal_integer", Description: "the same Secp256k1 record and signature with r written with one superfluous leading 00 byte (its INTEGER length one more, the SEQUENCE's too): BER, not DER", EnvelopeHex: hex.EncodeToString(attestSecpSig(t, attestMustSeal(t, &secpRec, secpKey), derPadR)), VerifyAt: stamp(attestVerifyAt), Error: "bad_signature"},
			{Name: "secp256k1_key_uncompressed", Description: "the record with issuer " + secpID.String() + " (the Secp256k1 key of scalar 0101...01), signed by that key (low S), in an envelope whose public_key Data is the key's 65-byte uncompressed point (04 || x || y) instead of its 33-byte compressed one: the same key and peer ID to go-libp2p", EnvelopeHex: hex.EncodeToString(attestUncompressedKey(t, attestMustSeal(t, &secpRec, secpKey))), VerifyAt: stamp(attestVerifyAt), Error: "malformed"},
			{Name: "subject_not_peer_id", Description: "the record with subject 55 00 (a multihash of an unknown code with an empty digest, no peer ID), correctly signed by the issuer", EnvelopeHex: hex.EncodeToString(attestSealUnchecked(t, &badSubject, ik)), VerifyAt: stamp(attestVerifyAt), Error: "malformed"},
			{Name: "spec_version_not_utf8", Description: "the record with spec_version the bytes 1.0.0+ and ff (not UTF-8; the version rule alone would take it), correctly signed by the issuer", EnvelopeHex: hex.EncodeToString(attestSealRaw(t, rawAttestRecord(badVersion), ik)), VerifyAt: stamp(attestVerifyAt), Error: "malformed"},
			{Name: "ed25519_key_not_on_curve", Description: "an envelope whose public_key is the Ed25519 key 02 00...00 (y = 2, no curve point), over the record with that key's peer ID as issuer, with a signature of 64 zero bytes", EnvelopeHex: hex.EncodeToString(offCurve), VerifyAt: stamp(attestVerifyAt), Error: "bad_signature"},
			{Name: "ed25519_key_y_above_p", Description: "an envelope whose public_key is the Ed25519 key f0 ff ... ff 7f (y = 3 + p, a non-canonical encoding of the large-order point with y = 3, which section 2 decodes modulo p, as Go does; libraries that refuse non-canonical keys at decoding must not report malformed), over the record with that key's peer ID (the identity multihash of those bytes) as issuer, with a signature of 64 zero bytes", EnvelopeHex: hex.EncodeToString(nonCanonical), VerifyAt: stamp(attestVerifyAt), Error: "bad_signature"},
			{Name: "ed25519_key_small_order", Description: "an envelope whose public_key is the Ed25519 key 01 00...00 (the identity point, of order 1), over the record with that key's peer ID as issuer, signed R || S with R = [s]B and S = s (s the clamped scalar of seed 07 00...00 mod L): RFC 8032's check [S]B = R + [k]A holds for any message, so anyone signs for this key", EnvelopeHex: hex.EncodeToString(smallOrder), VerifyAt: stamp(attestVerifyAt), Error: "malformed"},
			{Name: "ecdsa_signature_trailing_byte", Description: "the record with the ECDSA P-256 key of scalar 0303...03 as issuer, signed by that key (a valid signature, k = SHA-256(scalar || SHA-256(signed bytes)) mod n), with a byte 00 appended after its DER SEQUENCE", EnvelopeHex: hex.EncodeToString(attestECDSAEnvelope(t, a, ecdsaTrailingByte)), VerifyAt: stamp(attestVerifyAt), Error: "bad_signature"},
			{Name: "ecdsa_signature_extra_element", Description: "the same ECDSA record and signature with an INTEGER 0 (02 01 00) added inside its DER SEQUENCE after s", EnvelopeHex: hex.EncodeToString(attestECDSAEnvelope(t, a, ecdsaExtraElement)), VerifyAt: stamp(attestVerifyAt), Error: "bad_signature"},
			{Name: "ecdsa_key_compressed", Description: "the ecdsa_signature_* record and key (issuer the key's peer ID) with a valid DER signature, in an envelope whose public_key Data is the SubjectPublicKeyInfo of the key's compressed point (59 bytes; attestation.md §2 takes only the 91-byte uncompressed form, which Go's x509 alone parses and a DER parser such as OpenSSL's takes too)", EnvelopeHex: hex.EncodeToString(attestECDSACompressedKey(t, attestECDSAEnvelope(t, a, func(b []byte) []byte { return b }))), VerifyAt: stamp(attestVerifyAt), Error: "malformed"},
			{Name: "ecdsa_key_trailing_element", Description: "the same record, key and signature, in an envelope whose public_key Data is the key's 91-byte SubjectPublicKeyInfo with a DER NULL (05 00) added inside its outer SEQUENCE after the BIT STRING (93 bytes, outer length 5b): Go's x509 ignores the element and libp2p derives the issuer's peer ID from the key re-encoded, a DER parser refuses it; attestation.md §2 makes it malformed", EnvelopeHex: hex.EncodeToString(rewriteKeyData(t, attestECDSAEnvelope(t, a, func(b []byte) []byte { return b }), func(d []byte) []byte { return spkiTrailingElement(t, d) })), VerifyAt: stamp(attestVerifyAt), Error: "malformed"},
			{Name: "no_provenance", Description: "the record without field 15, as issued before provenance existed, correctly signed by the issuer: it names no source (rank 0), so a party requiring even source procedural refuses it", EnvelopeHex: hex.EncodeToString(attestMustSeal(t, &legacy, ik)), VerifyAt: stamp(attestVerifyAt), MinSource: string(skill.SourceProcedural), Error: "source_below_minimum"},
		},
	}
	reordered := attestReorderedKey(t, data)
	byBytes := *a
	byBytes.Issuer = peer.ID(append([]byte{0x00, byte(len(reorderedKeyField(t, data)))}, reorderedKeyField(t, data)...))
	f.Negative = append(f.Negative, attestVectorNegative{Name: "public_key_reordered_issuer_of_bytes",
		Description: "the record with issuer the identity multihash of the bytes 12 20 <issuer key> 08 01 (00 24 12 20 ...), signed by the issuer key, in an envelope whose public_key is those bytes (Data first, then Type): the key decodes to the issuer's, whose peer ID is that of its canonical encoding 08 01 12 20 <key>, not of the bytes received",
		EnvelopeHex: hex.EncodeToString(attestReorderedKey(t, attestSealUnchecked(t, &byBytes, ik))), VerifyAt: stamp(attestVerifyAt), Error: "issuer_mismatch"})
	f.Valid = []attestVectorValid{{Name: "public_key_reordered",
		Description: "envelope_hex with its public_key written 12 20 <key> 08 01 (Data first, then Type) and the other fields as they were: the same key, so the same issuer (the peer ID of 08 01 12 20 <key>); it verifies to expected",
		EnvelopeHex: hex.EncodeToString(reordered), VerifyAt: stamp(attestVerifyAt)}}
	for _, u := range undecodable {
		f.Negative = append(f.Negative, attestVectorNegative{Name: u.name, Description: u.desc + ", correctly signed by the issuer", EnvelopeHex: hex.EncodeToString(attestSealRaw(t, rawAttestRecord(u.payload), ik)), VerifyAt: stamp(attestVerifyAt), Error: "malformed"})
	}
	for _, r := range attestTranscript {
		f.Transcript = append(f.Transcript, attestVectorRound{Round: r.Round, Narrative: r.Narrative, Question: r.Question, Answer: r.Answer})
	}
	for _, v := range attestVariants(t) {
		data := attestMustSeal(t, v.a, ik)
		var venv recordpb.Envelope
		if err := proto.Unmarshal(data, &venv); err != nil {
			t.Fatal(err)
		}
		exp, err := json.Marshal(v.a)
		if err != nil {
			t.Fatal(err)
		}
		vv := attestVectorVariant{Name: v.name, Description: v.desc, PayloadHex: hex.EncodeToString(venv.Payload),
			EnvelopeHex: hex.EncodeToString(data), VerifyAt: stamp(attestVerifyAt), Expected: exp, Transcript: []attestVectorRound{}}
		for _, r := range v.transcript {
			vv.Transcript = append(vv.Transcript, attestVectorRound{Round: r.Round, Narrative: r.Narrative, Question: r.Question, Answer: r.Answer})
		}
		f.Variants = append(f.Variants, vv)
	}
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

// reorderedKeyField is the public_key of env written Data first, then Type.
func reorderedKeyField(t testing.TB, env []byte) []byte {
	t.Helper()
	var e recordpb.Envelope
	if err := proto.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	var pk []byte
	pk = protowire.AppendTag(pk, 2, protowire.BytesType)
	pk = protowire.AppendBytes(pk, e.PublicKey.GetData())
	pk = protowire.AppendTag(pk, 1, protowire.VarintType)
	return protowire.AppendVarint(pk, uint64(e.PublicKey.GetType()))
}

// attestReorderedKey is env with its public_key field written as
// reorderedKeyField and its other fields as they were (protobuf would
// write the key in field order).
func attestReorderedKey(t testing.TB, env []byte) []byte {
	t.Helper()
	var e recordpb.Envelope
	if err := proto.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, f := range []struct {
		num protowire.Number
		b   []byte
	}{{1, reorderedKeyField(t, env)}, {2, e.PayloadType}, {3, e.Payload}, {5, e.Signature}} {
		out = protowire.AppendTag(out, f.num, protowire.BytesType)
		out = protowire.AppendBytes(out, f.b)
	}
	return out
}

// TestAttestationVectorRegenerate checks that spec/vectors/attestation.json
// is what the fixed seeds produce; with -update-attestation-vector it
// rewrites the file.
func TestAttestationVectorRegenerate(t *testing.T) {
	want := attestBuildVector(t)
	if *updateAttestationVector {
		if err := os.MkdirAll(filepath.Dir(attestVectorPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(attestVectorPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(attestVectorPath)
	if err != nil {
		t.Fatalf("%v (run go test ./protocol -run TestAttestationVectorRegenerate -update-attestation-vector)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("spec/vectors/attestation.json is stale: the fixed seeds now produce different bytes (rerun with -update-attestation-vector and review the diff)")
	}
}

// TestAttestationVectorDecode reads the vector as an independent
// implementation would and checks every documented field.
func TestAttestationVectorDecode(t *testing.T) {
	raw, err := os.ReadFile(attestVectorPath)
	if err != nil {
		t.Fatal(err)
	}
	var f attestVectorFile
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	unhex := func(name, s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return b
	}
	parseTime := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}

	// Keys from seeds.
	ik, iid := attestKey(t, unhex("issuer seed", f.IssuerSeedHex))
	_, sid := attestKey(t, unhex("subject seed", f.SubjectSeedHex))
	if iid.String() != f.IssuerPeerID || sid.String() != f.SubjectPeerID {
		t.Fatalf("peer IDs from seeds %s %s, file says %s %s", iid, sid, f.IssuerPeerID, f.SubjectPeerID)
	}
	if f.RecordDomain != "acaptcha-attestation" || f.PayloadTypeHex != "8194eb01" {
		t.Fatalf("domain %q payload type %s", f.RecordDomain, f.PayloadTypeHex)
	}

	// The signature over the documented signed bytes, with plain Ed25519.
	payload := unhex("payload", f.PayloadHex)
	signed := unhex("signed bytes", f.SignedBytesHex)
	if !bytes.Equal(signed, attestSignedBytes(f.RecordDomain, unhex("payload type", f.PayloadTypeHex), payload)) {
		t.Fatal("signed_bytes_hex is not varint(len)||domain||varint(len)||type||varint(len)||payload")
	}
	rawPub, err := ik.GetPublic().Raw()
	if err != nil {
		t.Fatal(err)
	}
	if !ed25519.Verify(rawPub, signed, unhex("signature", f.SignatureHex)) {
		t.Fatal("signature_hex does not verify over signed_bytes_hex with the issuer key")
	}

	// The payload decodes to the documented protobuf fields.
	var m pb.AttestationRecord
	if err := proto.Unmarshal(payload, &m); err != nil {
		t.Fatal(err)
	}
	digest := skill.TranscriptDigest(attestVectorTranscript(f.Transcript))
	if !bytes.Equal(m.GetIssuer(), []byte(iid)) || !bytes.Equal(m.GetSubject(), []byte(sid)) ||
		!m.GetAccepted() || m.GetReason() != "ok" || m.GetFailedRound() != 0 ||
		!bytes.Equal(m.GetNonce(), attestNonce) || !bytes.Equal(m.GetTranscriptDigest(), digest[:]) ||
		len(m.GetRounds()) != 3 || m.GetRounds()[1].GetEffectiveMs() != 6875 || m.GetRounds()[2].GetNarrativeTokens() != 701 ||
		m.GetPolicy().GetTauMs() != 15000 || m.GetPolicy().GetTotalMs() != 120000 || m.GetPolicy().GetRttCreditMs() != 500 ||
		m.GetDomain() != "biochemistry" || m.GetIssuedAt() != attestIssuedAt.Unix() || m.GetExpiresAt() != attestIssuedAt.Unix()+86400 ||
		m.GetSpecVersion() != "1.0.0" ||
		m.GetProvenance().GetSource() != "hybrid" || m.GetProvenance().GetModel() != "openai:gpt-4o-mini" || !m.GetProvenance().GetLlmQuestions() {
		t.Fatalf("payload fields differ from the documentation: %v", &m)
	}

	// Full verification, and the JSON view matches "expected".
	at := parseTime(f.VerifyAt)
	if f.VerifyMinSource != "llm" {
		t.Fatalf("verify_min_source %q, want llm (hybrid ranks with llm)", f.VerifyMinSource)
	}
	a, env, err := protocol.VerifyAttestation(unhex("envelope", f.EnvelopeHex), protocol.VerifyOptions{Subject: sid, Issuer: iid, Now: at, MinSource: skill.SourceKind(f.VerifyMinSource)})
	if err != nil {
		t.Fatalf("vector does not verify: %v", err)
	}
	if !bytes.Equal(env.RawPayload, payload) {
		t.Fatal("envelope payload differs from payload_hex")
	}
	want, _, _ := attestFixture(t)
	if !reflect.DeepEqual(a, want) {
		t.Fatalf("decoded %+v\nwant %+v", a, want)
	}
	gotJSON, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(gotJSON, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(f.Expected, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("JSON view %s\nexpected %s", gotJSON, f.Expected)
	}

	if len(f.Negative) == 0 {
		t.Fatal("no negative cases")
	}
	codes := map[string]bool{}
	for _, n := range f.Negative {
		codes[n.Error] = true
	}
	if !codes["source_below_minimum"] {
		t.Fatal("no negative case covers the minimum source")
	}
	// Variants: each verifies, its digest is its transcript's, its JSON
	// view is expected, and its payload is the deterministic encoding of
	// what it decodes to (an issuer writing the same fields writes the
	// same bytes).
	if len(f.Variants) < 3 {
		t.Fatalf("%d variants", len(f.Variants))
	}
	for _, v := range f.Variants {
		t.Run("variant_"+v.Name, func(t *testing.T) {
			a, env, err := protocol.VerifyAttestation(unhex("envelope", v.EnvelopeHex), protocol.VerifyOptions{Subject: sid, Issuer: iid, Now: parseTime(v.VerifyAt)})
			if err != nil {
				t.Fatalf("does not verify: %v", err)
			}
			if !bytes.Equal(env.RawPayload, unhex("payload", v.PayloadHex)) {
				t.Fatal("envelope payload differs from payload_hex")
			}
			if got := mustPayload(t, a); !bytes.Equal(got, env.RawPayload) {
				t.Fatalf("re-encoding the decoded record gives other bytes:\n%x\n%x", got, env.RawPayload)
			}
			if d := skill.TranscriptDigest(attestVectorTranscript(v.Transcript)); !bytes.Equal(a.TranscriptDigest, d[:]) {
				t.Fatal("transcript_digest is not the digest of the variant's transcript")
			}
			got, err := json.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(v.Expected, &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("JSON view %s\nexpected %s", got, v.Expected)
			}
		})
	}
	// Envelopes in other bytes that verify to the same record.
	if len(f.Valid) == 0 {
		t.Fatal("no valid cases")
	}
	for _, v := range f.Valid {
		t.Run("valid_"+v.Name, func(t *testing.T) {
			got, _, err := protocol.VerifyAttestation(unhex("envelope", v.EnvelopeHex), protocol.VerifyOptions{Subject: sid, Issuer: iid, Now: parseTime(v.VerifyAt)})
			if err != nil {
				t.Fatalf("does not verify: %v", err)
			}
			if bytes.Equal(unhex("envelope", v.EnvelopeHex), unhex("envelope", f.EnvelopeHex)) {
				t.Fatal("the same bytes as envelope_hex")
			}
			if !reflect.DeepEqual(got, a) {
				t.Fatalf("decoded %+v\nwant %+v", got, a)
			}
		})
	}
	// One cache for every case, each verified twice (a miss, then a
	// hit): the same outcome as without it (AttestationCache).
	var cache protocol.AttestationCache
	for _, n := range f.Negative {
		t.Run(n.Name, func(t *testing.T) {
			data := unhex("envelope", f.EnvelopeHex)
			if n.EnvelopeHex != "" {
				data = unhex("envelope", n.EnvelopeHex)
			}
			opts := protocol.VerifyOptions{Subject: sid, Now: parseTime(n.VerifyAt), MinSource: skill.SourceKind(n.MinSource)}
			if n.ExpectedSubject != "" {
				id, derr := peer.Decode(n.ExpectedSubject)
				if derr != nil {
					t.Fatal(derr)
				}
				opts.Subject = id
			}
			want := attestSentinel(n.Error)
			if want == nil {
				t.Fatalf("unknown error code %q", n.Error)
			}
			_, _, err := protocol.VerifyAttestation(data, opts)
			attestWantErr(t, err, want)
			if got := protocol.AttestationErrorCode(err); got != n.Error {
				t.Fatalf("AttestationErrorCode = %q, want %q", got, n.Error)
			}
			for i := range 2 {
				if _, _, cerr := cache.Verify(data, opts); protocol.AttestationErrorCode(cerr) != n.Error {
					t.Fatalf("cached verification %d: %v, want %s", i+1, cerr, n.Error)
				}
			}
			if n.MinSource != "" {
				// Without the minimum the record is valid: only the policy refuses it.
				opts.MinSource = ""
				if _, _, err := protocol.VerifyAttestation(data, opts); err != nil {
					t.Fatalf("without min_source: %v", err)
				}
			}
		})
	}
}

// TestAttestationVectorDerivedBudgets: in every variant under a derived
// tau, each round's narrative_tokens is the token count of its transcript
// narrative and its budget_ms the derived budget of that count and alpha,
// recomputed here from verification.md ("Human timing model") as an
// independent reader would, so the vector shows what an issuer MUST
// write (attestation.md §3). Verifiers do not check this (the record
// carries no narrative): attestation.Verify accepts any budget in range.
func TestAttestationVectorDerivedBudgets(t *testing.T) {
	raw, err := os.ReadFile(attestVectorPath)
	if err != nil {
		t.Fatal(err)
	}
	var f attestVectorFile
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	derived := 0
	for _, v := range f.Variants {
		var view struct {
			Reason      string `json:"reason"`
			FailedRound int    `json:"failed_round"`
			Rounds      []struct {
				Round           int   `json:"round"`
				BudgetMs        int64 `json:"budget_ms"`
				EffectiveMs     int64 `json:"effective_ms"`
				NarrativeTokens int   `json:"narrative_tokens"`
			} `json:"rounds"`
			Policy struct {
				DerivedTau bool    `json:"derived_tau"`
				Alpha      float64 `json:"alpha"`
				TotalMs    int64   `json:"total_ms"`
			} `json:"policy"`
		}
		if err := json.Unmarshal(v.Expected, &view); err != nil {
			t.Fatal(err)
		}
		if !view.Policy.DerivedTau {
			continue
		}
		derived++
		if len(view.Rounds) != len(v.Transcript) {
			t.Fatalf("%s: %d round entries, %d transcript rounds", v.Name, len(view.Rounds), len(v.Transcript))
		}
		p := skill.DefaultPolicy()
		p.DeriveTau, p.Alpha, p.Total = true, view.Policy.Alpha, time.Duration(view.Policy.TotalMs)*time.Millisecond
		for i, r := range view.Rounds {
			words := len(strings.Fields(v.Transcript[i].Narrative)) // ASCII narratives
			L := (4*words + 1) / 3
			lb := int64((float64(L)/5 + 0.35 + 10/0.9) * 1e9)
			tauNs := int64(view.Policy.Alpha * float64(lb))
			want := (tauNs + 500_000) / 1_000_000
			if r.NarrativeTokens != L || r.NarrativeTokens != skill.CountTokens(v.Transcript[i].Narrative) {
				t.Errorf("%s round %d: narrative_tokens %d, the transcript narrative has %d (%d words)", v.Name, r.Round, r.NarrativeTokens, L, words)
			}
			if r.BudgetMs != want {
				t.Errorf("%s round %d: budget_ms %d, derived from L=%d and alpha %v: %d", v.Name, r.Round, r.BudgetMs, L, view.Policy.Alpha, want)
			}
			if b, err := p.Budget(L); err != nil || b != time.Duration(want)*time.Millisecond {
				t.Errorf("%s round %d: Policy.Budget %s %v, want %d ms", v.Name, r.Round, b, err, want)
			}
		}
		if v.Name == "rejected_late_derived_tau" {
			last := view.Rounds[len(view.Rounds)-1]
			if view.Reason != "timeout" || view.FailedRound != last.Round || last.EffectiveMs != last.BudgetMs+1 {
				t.Errorf("%s: %s in round %d, effective %d ms for a %d ms budget; want a timeout 1 ms late", v.Name, view.Reason, view.FailedRound, last.EffectiveMs, last.BudgetMs)
			}
		}
	}
	if derived == 0 {
		t.Fatal("no variant under a derived tau")
	}
}

func attestVectorTranscript(rs []attestVectorRound) []skill.RoundRecord {
	var out []skill.RoundRecord
	for _, r := range rs {
		out = append(out, skill.RoundRecord{Round: r.Round, Narrative: r.Narrative, Question: r.Question, Answer: r.Answer})
	}
	return out
}

// ---- Fuzzing -----------------------------------------------------------

func attestFuzzCheck(t *testing.T, data []byte, now time.Time) {
	a, env, err := protocol.VerifyAttestation(data, protocol.VerifyOptions{Now: now})
	if err != nil {
		if a != nil || env != nil {
			t.Fatalf("result alongside error %v", err)
		}
		if m := attestMatched(err); len(m) != 1 {
			t.Fatalf("error %q wraps sentinels %v, want exactly one", err, m)
		}
		return
	}
	if a == nil || env == nil {
		t.Fatal("nil result without error")
	}
	if !a.Valid(now) {
		t.Fatalf("verified attestation is not Valid: %v", a.Check(now))
	}
	signer, err := peer.IDFromPublicKey(env.PublicKey)
	if err != nil || signer != a.Issuer {
		t.Fatalf("verified attestation signed by %s, issuer %s", signer, a.Issuer)
	}
	if _, err := json.Marshal(a); err != nil {
		t.Fatalf("JSON view: %v", err)
	}
}

func FuzzVerifyAttestation(f *testing.F) {
	a, ik, _ := attestFixture(f)
	good := attestMustSeal(f, a, ik)
	rej, rk := attestRejected(f)
	f.Add(good)
	f.Add(attestMustSeal(f, rej, rk))
	f.Add(binary.AppendUvarint(nil, uint64(len(good))))
	f.Add(append(binary.AppendUvarint(nil, uint64(len(good))), good...))
	f.Add(good[:len(good)-1])
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x00})
	f.Add([]byte{0x0a, 0x04, 0x08, 0x00, 0x12, 0x00, 0x12, 0x04, 0x81, 0x94, 0xeb, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		attestFuzzCheck(t, data, attestVerifyAt)
	})
}

// FuzzVerifyAttestationPayload signs arbitrary payloads with the issuer's
// key, so the fuzzer reaches the decoding and structural checks behind the
// signature.
func FuzzVerifyAttestationPayload(f *testing.F) {
	a, ik, _ := attestFixture(f)
	rej, _ := attestRejected(f)
	f.Add(mustPayload(f, a))
	f.Add(mustPayload(f, rej))
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x00, 0x12, 0x00})
	f.Fuzz(func(t *testing.T, payload []byte) {
		env, err := record.Seal(&attestRawRecord{payload: payload}, ik)
		if err != nil {
			t.Fatal(err)
		}
		data, err := env.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		attestFuzzCheck(t, data, attestVerifyAt)
		// What Verify accepts (its signature good), DecodeOwn decodes
		// alike without checking the signature.
		if a, _, err := protocol.VerifyAttestation(data, protocol.VerifyOptions{AllowExpired: true, Now: attestVerifyAt}); err == nil {
			own, err := protocol.DecodeOwnAttestation(data, ik.GetPublic(), "")
			if err != nil {
				t.Fatalf("DecodeOwn refused what Verify accepts: %v", err)
			}
			if own.Issuer != a.Issuer || own.Subject != a.Subject || !own.IssuedAt.Equal(a.IssuedAt) || !own.ExpiresAt.Equal(a.ExpiresAt) || own.Accepted != a.Accepted {
				t.Fatalf("DecodeOwn %+v, Verify %+v", own, a)
			}
		}
	})
}

// AttestationErrorCode names every sentinel by its code in the vector
// file, also wrapped, and nil by "".
func TestAttestationErrorCode(t *testing.T) {
	for _, c := range attestSentinels {
		if got := protocol.AttestationErrorCode(fmt.Errorf("context: %w", c.err)); got != c.code {
			t.Errorf("%v: code %q, want %q", c.err, got, c.code)
		}
	}
	if got := protocol.AttestationErrorCode(nil); got != "" {
		t.Errorf("nil: %q", got)
	}
}

// TestAttestationKeyRules checks the key rules of attestation.md §2 that
// go-libp2p alone does not apply: ECDSA keys on P-256 only, Secp256k1
// signatures with a low S.
func TestAttestationKeyRules(t *testing.T) {
	a, _, _ := attestFixture(t)
	withIssuer := func(k crypto.PrivKey) *protocol.Attestation {
		id, err := peer.IDFromPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		c := *a
		c.Issuer = id
		return &c
	}
	now := attestIssuedAt.Add(time.Minute)

	p256, _, err := crypto.GenerateECDSAKeyPairWithCurve(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := protocol.VerifyAttestation(attestMustSeal(t, withIssuer(p256), p256), protocol.VerifyOptions{Now: now}); err != nil {
		t.Fatalf("P-256 issuer: %v", err)
	}
	p384, _, err := crypto.GenerateECDSAKeyPairWithCurve(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := protocol.Seal(withIssuer(p384), p384); !errors.Is(err, protocol.ErrMalformed) {
		t.Fatalf("Seal with a P-384 key: %v, want malformed", err)
	}
	_, _, err = protocol.VerifyAttestation(attestSealUnchecked(t, withIssuer(p384), p384), protocol.VerifyOptions{Now: now})
	attestWantErr(t, err, protocol.ErrMalformed)

	k1, _, err := crypto.GenerateSecp256k1Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	low := attestMustSeal(t, withIssuer(k1), k1)
	if _, _, err := protocol.VerifyAttestation(low, protocol.VerifyOptions{Now: now}); err != nil {
		t.Fatalf("Secp256k1 issuer: %v", err)
	}
	high := attestHighS(t, low)
	if _, err := record.ConsumeTypedEnvelope(high, &protocol.Attestation{}); err != nil {
		t.Fatalf("go-libp2p refuses the high-S signature itself (%v): the test no longer shows our rule", err)
	}
	_, _, err = protocol.VerifyAttestation(high, protocol.VerifyOptions{Now: now})
	attestWantErr(t, err, protocol.ErrBadSignature)
}

// attestHighS is low, a record signed by a Secp256k1 key, with its
// signature's S replaced by N-S: a valid ECDSA signature that go-libp2p
// takes, but with a high S (attestation.md §2 refuses it).
func attestHighS(t testing.TB, low []byte) []byte {
	t.Helper()
	var env recordpb.Envelope
	if err := proto.Unmarshal(low, &env); err != nil {
		t.Fatal(err)
	}
	sig, err := secpecdsa.ParseDERSignature(env.Signature)
	if err != nil {
		t.Fatal(err)
	}
	// decred's Serialize normalises S, so the DER is written by hand.
	r, s := sig.R(), sig.S()
	s.Negate()
	if !s.IsOverHalfOrder() {
		t.Fatal("negated S is not high")
	}
	rb, sb := r.Bytes(), s.Bytes()
	env.Signature, err = asn1.Marshal(struct{ R, S *big.Int }{new(big.Int).SetBytes(rb[:]), new(big.Int).SetBytes(sb[:])})
	if err != nil {
		t.Fatal(err)
	}
	high, err := proto.Marshal(&env)
	if err != nil {
		t.Fatal(err)
	}
	return high
}

// attestSecpSig is env, a record signed by a Secp256k1 key, with its
// signature rewritten by f (attestation.md §2: a Secp256k1 signature is
// exactly DER, as an ECDSA one is).
func attestSecpSig(t testing.TB, env []byte, f func([]byte) []byte) []byte {
	t.Helper()
	var e recordpb.Envelope
	if err := proto.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	e.Signature = f(bytes.Clone(e.Signature))
	b, err := proto.Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// derTrailingByte appends a byte after a DER SEQUENCE.
func derTrailingByte(sig []byte) []byte { return append(sig, 0x00) }

// derPadR writes the r INTEGER of a short-form DER ECDSA-Sig-Value with
// one more leading 00 byte than DER allows.
func derPadR(sig []byte) []byte {
	rlen := int(sig[3])
	out := []byte{0x30, sig[1] + 1, 0x02, byte(rlen + 1), 0x00}
	return append(out, sig[4:]...)
}

// attestUncompressedKey is a Secp256k1 envelope with its key's Data in
// the 65-byte uncompressed form (the signature covers no key byte).
func attestUncompressedKey(t testing.TB, compressed []byte) []byte {
	t.Helper()
	var env recordpb.Envelope
	if err := proto.Unmarshal(compressed, &env); err != nil {
		t.Fatal(err)
	}
	pk, err := secp256k1.ParsePubKey(env.PublicKey.Data)
	if err != nil {
		t.Fatal(err)
	}
	env.PublicKey.Data = pk.SerializeUncompressed()
	b, err := proto.Marshal(&env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// attestSecpKey is the Secp256k1 key of the vector's high-S case (the
// scalar 0x01 repeated; decred signs deterministically, RFC 6979).
func attestSecpKey(t testing.TB) (crypto.PrivKey, peer.ID) {
	t.Helper()
	k, err := crypto.UnmarshalSecp256k1PrivateKey(bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return k, id
}

// A fixed-tau record with alpha -0.0 is sealed as alpha 0 (no field), so
// that issuers stay byte-deterministic and a verifier comparing bits
// agrees (attestation.md §3).
func TestAttestationNegativeZeroAlpha(t *testing.T) {
	a, ik, _ := attestFixture(t)
	want := attestMustSeal(t, a, ik)
	neg := *a
	neg.Policy.Alpha = math.Copysign(0, -1)
	if got := attestMustSeal(t, &neg, ik); !bytes.Equal(got, want) {
		t.Fatal("alpha -0.0 sealed to other bytes than alpha 0")
	}
}

// A cache of verified envelopes checks the signature of the same bytes
// once, and gives each later call the outcome Verify gives: the issuer,
// the subject, the validity window and the source are checked again.
func TestAttestationCache(t *testing.T) {
	a, ik, _ := attestFixture(t)
	env := attestMustSeal(t, a, ik)
	var c protocol.AttestationCache
	at := a.IssuedAt.Add(time.Minute)
	other := peer.ID("someone else")
	cases := []struct {
		opts protocol.VerifyOptions
		want error
	}{
		{protocol.VerifyOptions{Subject: a.Subject, Issuer: a.Issuer, Now: at}, nil},
		{protocol.VerifyOptions{Subject: other, Now: at}, protocol.ErrSubjectMismatch},
		{protocol.VerifyOptions{Issuer: other, Now: at}, protocol.ErrIssuerMismatch},
		{protocol.VerifyOptions{Now: a.ExpiresAt}, protocol.ErrExpired},
		{protocol.VerifyOptions{Now: a.ExpiresAt, AllowExpired: true}, nil},
		{protocol.VerifyOptions{Now: a.IssuedAt.Add(-time.Hour)}, protocol.ErrNotYetValid},
		{protocol.VerifyOptions{Subject: other, Now: a.IssuedAt.Add(-time.Hour)}, protocol.ErrSubjectMismatch},
		{protocol.VerifyOptions{Now: at, MinSource: skill.SourceKind("llm")}, nil},
	}
	for i, tc := range cases {
		_, _, direct := protocol.VerifyAttestation(env, tc.opts)
		got, _, err := c.Verify(env, tc.opts)
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) || protocol.AttestationErrorCode(err) != protocol.AttestationErrorCode(direct) {
			t.Fatalf("case %d: %v, want %v (uncached: %v)", i, err, tc.want, direct)
		}
		if err == nil && !reflect.DeepEqual(got, a) {
			t.Fatalf("case %d: record %+v", i, got)
		}
	}
	if n := c.Checked(); n != 1 {
		t.Fatalf("%d envelopes checked in full for one envelope verified %d times", n, len(cases))
	}
	// A forged copy is other bytes: checked, and refused.
	bad := bytes.Clone(env)
	bad[len(bad)-1] ^= 1
	if _, _, err := c.Verify(bad, protocol.VerifyOptions{Now: at}); err == nil {
		t.Fatal("a forged envelope verified")
	}
	// Bounded.
	small := protocol.AttestationCache{Max: 32}
	for i := range 100 {
		b := *a
		b.SetID = fmt.Sprintf("set-%d", i)
		if _, _, err := small.Verify(attestMustSeal(t, &b, ik), protocol.VerifyOptions{Now: at}); err != nil {
			t.Fatal(err)
		}
	}
	if small.Len() > 32 {
		t.Fatalf("%d envelopes kept, want at most 32", small.Len())
	}
}
