// Package attestation is the signed acaptcha attestation record: the
// verdict a verifier (the issuer) signs about a prover (the subject) after
// one session, its protobuf encoding (spec/proto/attestation.proto), its
// structural, time and provenance checks, sealing into a libp2p signed
// envelope and verification (spec/attestation.md). Record implements
// libp2p's record.Record itself, like go-libp2p's circuit v2 voucher, so
// record.ConsumeEnvelope returns it for Codec.
package attestation

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	secpecdsa "github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
	"github.com/libp2p/go-libp2p/core/crypto"
	cryptopb "github.com/libp2p/go-libp2p/core/crypto/pb"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"
	recordpb "github.com/libp2p/go-libp2p/core/record/pb"
	"google.golang.org/protobuf/proto"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// SpecVersion is the version of the wire and record format (spec
// document versions are listed in spec/protocol.md §12; records and hellos
// carry this one).
const SpecVersion = "1.0.0"

// AttestationDomain is the libp2p signature domain of attestation records.
// The envelope signature covers it, so a signature made for another record
// type never verifies as an attestation.
const AttestationDomain = "acaptcha-attestation"

// AttestationCodec is the multicodec that names the attestation payload
// type. It lies in the private-use range 0x300000-0x3FFFFF (it is not
// registered in the multicodec table); the envelope's payload_type field
// carries its unsigned varint, the four bytes 0x81 0x94 0xeb 0x01.
const AttestationCodec uint64 = 0x3aca01

var attestationCodecBytes = binary.AppendUvarint(nil, AttestationCodec)

// Limits of the attestation format.
const (
	// MaxEnvelopeBytes caps a marshalled attestation envelope. Larger input
	// is refused before any decoding.
	MaxEnvelopeBytes = 8 << 10
	// MaxClockSkew is how far in the future an issued-at time may lie
	// before an attestation is refused as not yet valid.
	MaxClockSkew = 5 * time.Minute
	// NonceBytes and DigestBytes are the exact lengths of the session
	// nonce and the transcript digest.
	NonceBytes  = 32
	DigestBytes = 32
	// MaxAttestationString caps the domain and set_id strings.
	MaxAttestationString = 256
	// MaxAttestationDuration caps every duration an attestation carries.
	MaxAttestationDuration = 24 * time.Hour
	// MaxSourceBytes caps the provenance source string a verifier
	// accepts; the provenance model is capped at skill.MaxModelBytes.
	MaxSourceBytes = 32

	maxSpecVersionBytes = 32
)

// Verification errors. Every error VerifyAttestation returns wraps exactly
// one of them, so callers can branch with errors.Is.
var (
	// ErrMalformed: the bytes are not a well-formed attestation envelope or
	// the record inside is structurally inconsistent.
	ErrMalformed = errors.New("malformed attestation")
	// ErrTooLarge: the input exceeds MaxEnvelopeBytes.
	ErrTooLarge = errors.New("attestation too large")
	// ErrBadSignature: the envelope signature does not verify for the
	// attestation domain and payload.
	ErrBadSignature = errors.New("attestation signature invalid")
	// ErrIssuerMismatch: the signing key is not the issuer's, or the issuer
	// is not the one the caller expected.
	ErrIssuerMismatch = errors.New("attestation issuer mismatch")
	// ErrSubjectMismatch: the subject is not the one the caller expected.
	ErrSubjectMismatch = errors.New("attestation subject mismatch")
	// ErrExpired: the attestation's validity ended.
	ErrExpired = errors.New("attestation expired")
	// ErrNotYetValid: the attestation was issued further in the future
	// than MaxClockSkew allows.
	ErrNotYetValid = errors.New("attestation not yet valid")
	// ErrUnsupportedVersion: the record's spec version has a different
	// major version than SpecVersion, or cannot be parsed.
	ErrUnsupportedVersion = errors.New("unsupported attestation version")
	// ErrSourceBelowMinimum: the caller asked for a minimum challenge
	// source (VerifyOptions.MinSource) and the record's source ranks
	// below it, or the minimum named is not a source kind.
	ErrSourceBelowMinimum = errors.New("attestation challenge source below the required minimum")
)

// errorCodes are the stable names of the sentinels (spec/attestation.md
// §6, the code column), the most specific first: a verification error
// wraps exactly one.
var errorCodes = []struct {
	err  error
	code string
}{
	{ErrTooLarge, "too_large"},
	{ErrBadSignature, "bad_signature"},
	{ErrUnsupportedVersion, "unsupported_version"},
	{ErrIssuerMismatch, "issuer_mismatch"},
	{ErrSubjectMismatch, "subject_mismatch"},
	{ErrNotYetValid, "not_yet_valid"},
	{ErrExpired, "expired"},
	{ErrSourceBelowMinimum, "source_below_minimum"},
	{ErrMalformed, "malformed"},
}

// ErrorCode is the stable code of a verification error (spec
// attestation.md §6): "" for nil, "malformed" for an error that wraps
// none of the sentinels.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return "malformed"
}

func init() {
	record.RegisterType(&Record{})
}

// Record is the verdict a verifier (Issuer) signs about a prover
// (Subject). It is a libp2p record.Record and travels inside a signed
// record.Envelope; see spec/attestation.md for the encoding.
type Record struct {
	Issuer      peer.ID
	Subject     peer.ID
	Accepted    bool
	Reason      skill.Reason
	FailedRound int
	// Nonce is the session nonce from the verifier's hello (32 bytes).
	Nonce []byte
	// TranscriptDigest is skill.TranscriptDigest over the delivered rounds.
	TranscriptDigest []byte
	Rounds           []RoundTiming
	Policy           PolicySummary
	// ChallengeDomain is the challenge set's domain (field 10, "domain";
	// not the record's signature domain, which Domain returns).
	ChallengeDomain string
	SetID           string
	IssuedAt        time.Time
	ExpiresAt       time.Time
	SpecVersion     string
	// Provenance says what produced the challenges the session served
	// (skill.Set.Provenance; the zero value when the set named none).
	Provenance skill.Provenance
	// Kind is the challenge kind of the set the session drew (field 16,
	// spec/attestation.md §3.4): "" for narrative sets, which issuers never
	// spell out (skill.WireKind); KindName reads it.
	Kind string
}

// KindName is the record's challenge kind, skill.NarrativeKind when the
// record names none.
func (r *Record) KindName() string { return skill.CanonicalKind(r.Kind) }

// RoundTiming is one round's timing as the verifier measured it.
type RoundTiming struct {
	Round           int
	Budget          time.Duration
	Effective       time.Duration
	NarrativeTokens int
	Correct         bool
}

// PolicySummary is the policy a session ran under.
type PolicySummary struct {
	Rounds     int
	Tau        time.Duration // fixed tau; zero when derived
	DerivedTau bool
	Alpha      float64
	Total      time.Duration
	RTTCredit  time.Duration
}

// DefaultAttestationTTL is how long an attestation is valid by default.
const DefaultAttestationTTL = 24 * time.Hour

var _ record.Record = (*Record)(nil)

// Domain implements record.Record: it returns AttestationDomain.
func (r *Record) Domain() string { return AttestationDomain }

// Codec implements record.Record: the varint of AttestationCodec.
func (r *Record) Codec() []byte { return bytes.Clone(attestationCodecBytes) }

// MarshalRecord implements record.Record. Durations are truncated to whole
// milliseconds and times to whole seconds. It refuses values that cannot
// be encoded (negative or oversized durations, out-of-range counters) with
// an error wrapping ErrMalformed; it does not run the structural checks
// (Seal does).
func (r *Record) MarshalRecord() ([]byte, error) {
	m, err := r.toProto()
	if err != nil {
		return nil, err
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: encode payload: %w", ErrMalformed, err)
	}
	return b, nil
}

// UnmarshalRecord implements record.Record. It replaces the whole record;
// decoding failures wrap ErrMalformed. It checks encodings only (peer IDs
// are multihashes, numbers fit); VerifyAttestation applies the structural
// and time checks.
func (r *Record) UnmarshalRecord(data []byte) error {
	var m pb.AttestationRecord
	if err := proto.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%w: payload: %w", ErrMalformed, err)
	}
	a, err := attestationFromProto(&m)
	if err != nil {
		return err
	}
	*r = *a
	return nil
}

func durationToMs(name field, d time.Duration) (uint64, error) {
	if d < 0 || d > MaxAttestationDuration {
		return 0, fmt.Errorf("%w: %s %s outside 0..%s", ErrMalformed, name, d, MaxAttestationDuration)
	}
	return uint64(d.Milliseconds()), nil
}

// field names a record field in a decoding or encoding error, "round N
// name" for a round's. It is a value formatted only when an error is:
// names built with + beforehand cost five strings a round of every
// record encoded or decoded.
type field struct {
	round int // 0: not a round's
	name  string
}

func (f field) String() string {
	if f.round == 0 {
		return f.name
	}
	return "round " + strconv.Itoa(f.round) + " " + f.name
}

func msToDuration(name field, ms uint64) (time.Duration, error) {
	if ms > uint64(MaxAttestationDuration.Milliseconds()) {
		return 0, fmt.Errorf("%w: %s of %d ms exceeds %s", ErrMalformed, name, ms, MaxAttestationDuration)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func intToUint32(name field, v int) (uint32, error) {
	if v < 0 || int64(v) > math.MaxUint32 {
		return 0, fmt.Errorf("%w: %s %d outside 0..%d", ErrMalformed, name, v, uint32(math.MaxUint32))
	}
	return uint32(v), nil
}

func uint32ToInt(name field, v uint32) (int, error) {
	if uint64(v) > math.MaxInt32 {
		return 0, fmt.Errorf("%w: %s %d too large", ErrMalformed, name, v)
	}
	return int(v), nil
}

func (a *Record) toProto() (*pb.AttestationRecord, error) {
	var err error
	m := &pb.AttestationRecord{
		Issuer:           []byte(a.Issuer),
		Subject:          []byte(a.Subject),
		Accepted:         a.Accepted,
		Reason:           string(a.Reason),
		Nonce:            bytes.Clone(a.Nonce),
		TranscriptDigest: bytes.Clone(a.TranscriptDigest),
		Domain:           a.ChallengeDomain,
		SetId:            a.SetID,
		IssuedAt:         a.IssuedAt.Unix(),
		ExpiresAt:        a.ExpiresAt.Unix(),
		SpecVersion:      a.SpecVersion,
		Kind:             a.Kind,
	}
	if pv := a.Provenance; pv != (skill.Provenance{}) {
		m.Provenance = &pb.ChallengeProvenance{Source: string(pv.Source), Model: pv.Model, LlmQuestions: pv.LLMQuestions}
	}
	if m.FailedRound, err = intToUint32(field{0, "failed round"}, a.FailedRound); err != nil {
		return nil, err
	}
	for i, r := range a.Rounds {
		pr := &pb.AttestationRound{Correct: r.Correct}
		if pr.Round, err = intToUint32(field{i + 1, "number"}, r.Round); err != nil {
			return nil, err
		}
		if pr.BudgetMs, err = durationToMs(field{i + 1, "budget"}, r.Budget); err != nil {
			return nil, err
		}
		if pr.EffectiveMs, err = durationToMs(field{i + 1, "effective time"}, r.Effective); err != nil {
			return nil, err
		}
		if pr.NarrativeTokens, err = intToUint32(field{i + 1, "narrative tokens"}, r.NarrativeTokens); err != nil {
			return nil, err
		}
		m.Rounds = append(m.Rounds, pr)
	}
	p := &pb.AttestationPolicy{DerivedTau: a.Policy.DerivedTau, Alpha: a.Policy.Alpha}
	if p.Alpha == 0 {
		// -0.0 compares equal to 0 but protobuf writes its bits: an
		// issuer writes alpha 0 as no field (spec §3, Encoding).
		p.Alpha = 0
	}
	if p.Rounds, err = intToUint32(field{0, "policy rounds"}, a.Policy.Rounds); err != nil {
		return nil, err
	}
	if p.TauMs, err = durationToMs(field{0, "policy tau"}, a.Policy.Tau); err != nil {
		return nil, err
	}
	if p.TotalMs, err = durationToMs(field{0, "policy total"}, a.Policy.Total); err != nil {
		return nil, err
	}
	if p.RttCreditMs, err = durationToMs(field{0, "policy RTT credit"}, a.Policy.RTTCredit); err != nil {
		return nil, err
	}
	m.Policy = p
	return m, nil
}

func attestationFromProto(m *pb.AttestationRecord) (*Record, error) {
	issuer, err := peer.IDFromBytes(m.GetIssuer())
	if err != nil {
		return nil, fmt.Errorf("%w: issuer peer ID: %w", ErrMalformed, err)
	}
	subject, err := peer.IDFromBytes(m.GetSubject())
	if err != nil {
		return nil, fmt.Errorf("%w: subject peer ID: %w", ErrMalformed, err)
	}
	a := &Record{
		Issuer:           issuer,
		Subject:          subject,
		Accepted:         m.GetAccepted(),
		Reason:           skill.Reason(m.GetReason()),
		Nonce:            bytes.Clone(m.GetNonce()),
		TranscriptDigest: bytes.Clone(m.GetTranscriptDigest()),
		ChallengeDomain:  m.GetDomain(),
		SetID:            m.GetSetId(),
		IssuedAt:         time.Unix(m.GetIssuedAt(), 0).UTC(),
		ExpiresAt:        time.Unix(m.GetExpiresAt(), 0).UTC(),
		SpecVersion:      m.GetSpecVersion(),
		Kind:             m.GetKind(),
		Provenance: skill.Provenance{
			Source:       skill.SourceKind(m.GetProvenance().GetSource()),
			Model:        m.GetProvenance().GetModel(),
			LLMQuestions: m.GetProvenance().GetLlmQuestions(),
		},
	}
	if a.FailedRound, err = uint32ToInt(field{0, "failed round"}, m.GetFailedRound()); err != nil {
		return nil, err
	}
	for i, pr := range m.GetRounds() {
		var rt RoundTiming
		rt.Correct = pr.GetCorrect()
		if rt.Round, err = uint32ToInt(field{i + 1, "number"}, pr.GetRound()); err != nil {
			return nil, err
		}
		if rt.Budget, err = msToDuration(field{i + 1, "budget"}, pr.GetBudgetMs()); err != nil {
			return nil, err
		}
		if rt.Effective, err = msToDuration(field{i + 1, "effective time"}, pr.GetEffectiveMs()); err != nil {
			return nil, err
		}
		if rt.NarrativeTokens, err = uint32ToInt(field{i + 1, "narrative tokens"}, pr.GetNarrativeTokens()); err != nil {
			return nil, err
		}
		a.Rounds = append(a.Rounds, rt)
	}
	p := m.GetPolicy()
	a.Policy.DerivedTau = p.GetDerivedTau()
	a.Policy.Alpha = p.GetAlpha()
	if a.Policy.Rounds, err = uint32ToInt(field{0, "policy rounds"}, p.GetRounds()); err != nil {
		return nil, err
	}
	if a.Policy.Tau, err = msToDuration(field{0, "policy tau"}, p.GetTauMs()); err != nil {
		return nil, err
	}
	if a.Policy.Total, err = msToDuration(field{0, "policy total"}, p.GetTotalMs()); err != nil {
		return nil, err
	}
	if a.Policy.RTTCredit, err = msToDuration(field{0, "policy RTT credit"}, p.GetRttCreditMs()); err != nil {
		return nil, err
	}
	return a, nil
}

// CheckVersion reports whether v is MAJOR.MINOR.PATCH (optionally followed
// by a "-" or "+" suffix) with the same major version as SpecVersion.
func CheckVersion(v string) error {
	if len(v) > maxSpecVersionBytes {
		return fmt.Errorf("%w: spec version of %d bytes", ErrUnsupportedVersion, len(v))
	}
	theirs, ok := specMajor(v)
	if !ok {
		return fmt.Errorf("%w: cannot parse spec version %q", ErrUnsupportedVersion, v)
	}
	ours, _ := specMajor(SpecVersion)
	if theirs != ours {
		return fmt.Errorf("%w: spec version %q, this implementation speaks major version %d", ErrUnsupportedVersion, v, ours)
	}
	return nil
}

func specMajor(v string) (uint64, bool) {
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return 0, false
	}
	var major uint64
	for i, p := range parts {
		if p == "" || strings.TrimLeft(p, "0123456789") != "" {
			return 0, false
		}
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return 0, false
		}
		if i == 0 {
			major = n
		}
	}
	return major, true
}

// checkStructure applies the time-independent checks of the verification
// procedure (spec/attestation.md, step 5). Errors wrap ErrMalformed.
func (a *Record) checkStructure() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
	}
	switch {
	case a.Issuer == "":
		return bad("empty issuer")
	case a.Subject == "":
		return bad("empty subject")
	case a.Issuer == a.Subject:
		return bad("issuer and subject are the same peer")
	case !isPeerID(a.Issuer) || !isPeerID(a.Subject):
		return bad("issuer or subject is not a peer ID (identity multihash of 1 to 42 bytes, or SHA-256 multihash)")
	case SmallOrderPeerID(a.Issuer) || SmallOrderPeerID(a.Subject):
		return bad("issuer or subject is the peer ID of an Ed25519 key of small order, which anyone can sign for")
	case len(a.Nonce) != NonceBytes:
		return bad("nonce of %d bytes, want %d", len(a.Nonce), NonceBytes)
	case len(a.TranscriptDigest) != DigestBytes:
		return bad("transcript digest of %d bytes, want %d", len(a.TranscriptDigest), DigestBytes)
	case !a.Reason.Valid():
		return bad("unknown reason %q", a.Reason)
	case a.Reason == skill.ReasonInconclusive:
		return bad("inconclusive verdicts are never attested")
	case a.Accepted != (a.Reason == skill.ReasonOK):
		return bad("accepted=%t with reason %q", a.Accepted, a.Reason)
	case len(a.ChallengeDomain) > MaxAttestationString || !utf8.ValidString(a.ChallengeDomain):
		return bad("domain is not UTF-8 of at most %d bytes", MaxAttestationString)
	case len(a.SetID) > MaxAttestationString || !utf8.ValidString(a.SetID):
		return bad("set_id is not UTF-8 of at most %d bytes", MaxAttestationString)
	case a.IssuedAt.Unix() <= 0:
		return bad("issued_at %d is not a positive Unix time", a.IssuedAt.Unix())
	case a.ExpiresAt.Unix() <= a.IssuedAt.Unix():
		return bad("expires_at is not after issued_at")
	case len(a.Provenance.Source) > MaxSourceBytes || !utf8.ValidString(string(a.Provenance.Source)):
		return bad("provenance source is not UTF-8 of at most %d bytes", MaxSourceBytes)
	case len(a.Provenance.Model) > skill.MaxModelBytes || !utf8.ValidString(a.Provenance.Model):
		return bad("provenance model is not UTF-8 of at most %d bytes", skill.MaxModelBytes)
	case a.Kind != "" && !skill.ValidKindName(a.Kind):
		return bad("kind is not 1..%d bytes of a-z, 0-9, '-' or '_' starting with a letter", skill.MaxKindBytes)
	}
	if err := a.Policy.check(); err != nil {
		return err
	}
	if len(a.Rounds) > a.Policy.Rounds {
		return bad("%d round timings for a %d-round policy", len(a.Rounds), a.Policy.Rounds)
	}
	for i, r := range a.Rounds {
		switch {
		case r.Round != i+1:
			return bad("round timing %d is numbered %d", i+1, r.Round)
		case r.Budget < 0 || r.Budget > MaxAttestationDuration, r.Effective < 0 || r.Effective > MaxAttestationDuration:
			return bad("round %d durations outside 0..%s", r.Round, MaxAttestationDuration)
		case r.NarrativeTokens < 0:
			return bad("round %d has a negative token count", r.Round)
		}
	}
	if a.Accepted {
		if a.FailedRound != 0 {
			return bad("accepted verdict names failed round %d", a.FailedRound)
		}
		if len(a.Rounds) != a.Policy.Rounds {
			return bad("accepted verdict with %d of %d rounds", len(a.Rounds), a.Policy.Rounds)
		}
		for _, r := range a.Rounds {
			if !r.Correct || r.Effective.Milliseconds() > r.Budget.Milliseconds() {
				return bad("accepted verdict with round %d incorrect or over budget", r.Round)
			}
		}
	} else if !acceptedFailedRound(a.FailedRound, len(a.Rounds), a.Policy.Rounds) {
		return bad("rejected verdict with failed round %d and %d round entries (want the last entry's number, or 0 with none)", a.FailedRound, len(a.Rounds))
	}
	return nil
}

// acceptedFailedRound is the verifier's rule for the failed round of a
// rejection (spec/attestation.md §3.2): 1 or 0 when no round was delivered
// (issuers write 1, the 1.0.0 form; 0 is accepted from issuers that
// followed the Verdict table's older "0 if none"), otherwise 1..rounds
// (issuers write the number of the last entry; 1.0.0 said only 1..rounds).
func acceptedFailedRound(failed, entries, rounds int) bool {
	if entries == 0 {
		return failed == 0 || failed == 1
	}
	return failed >= 1 && failed <= rounds
}

// IssuedFailedRound is the failed_round an issuer writes, in the Verdict
// frame and in the record (spec/protocol.md §3, attestation.md §3.2): 0
// for an acceptance, otherwise the number of the last delivered round,
// which is the number of round entries, and 1 when no challenge was
// delivered. The 1 keeps such records valid under the 1.0.0 rule
// (rejected: failed_round in 1..rounds), which every deployed verifier
// applies; verifiers accept 0 there too.
func IssuedFailedRound(accepted bool, entries int) int {
	if accepted {
		return 0
	}
	return max(entries, 1)
}

// CutAnswer is the answer as the transcript digest takes it (spec
// attestation.md §4): the longest prefix of at most skill.MaxAnswerBytes
// bytes that ends on a UTF-8 character boundary. A received answer is
// valid UTF-8 (proto3 strings are), so the cut never splits a character.
// Both sides apply it: the prover to what it sends, the verifier to what
// it received.
func CutAnswer(s string) string { return skill.CapBytes(s, skill.MaxAnswerBytes) }

// checkIssuedRounds is the issuer's stricter rule for the failed round
// (spec/attestation.md §5): exactly IssuedFailedRound.
func checkIssuedRounds(a *Record) error {
	if want := IssuedFailedRound(a.Accepted, len(a.Rounds)); a.FailedRound != want {
		return fmt.Errorf("%w: failed round %d with %d round entries, an issuer writes %d", ErrMalformed, a.FailedRound, len(a.Rounds), want)
	}
	return nil
}

// isPeerID reports whether id is a peer ID as libp2p derives one from a
// key (spec/attestation.md §3): the identity multihash (code 0x00) of 1
// to 42 bytes, or the SHA-256 multihash (code 0x12) of 32 bytes, each
// code and length a one-byte varint. peer.IDFromBytes takes any
// multihash (any code, any length, 0 included), which another
// implementation following the peer-id specification would refuse.
func isPeerID(id peer.ID) bool {
	b := []byte(id)
	if len(b) < 2 || int(b[1]) != len(b)-2 {
		return false
	}
	switch b[0] {
	case 0x00:
		return b[1] >= 1 && b[1] <= 42
	case 0x12:
		return b[1] == 32
	}
	return false
}

func (p PolicySummary) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: policy: "+format, append([]any{ErrMalformed}, args...)...)
	}
	for _, d := range []time.Duration{p.Tau, p.Total, p.RTTCredit} {
		if d < 0 || d > MaxAttestationDuration {
			return bad("duration %s outside 0..%s", d, MaxAttestationDuration)
		}
	}
	switch {
	case p.Rounds < 1 || p.Rounds > skill.Parts:
		return bad("rounds %d, want 1..%d", p.Rounds, skill.Parts)
	case p.Total.Milliseconds() <= 0:
		return bad("total budget must be positive")
	case math.IsNaN(p.Alpha) || math.IsInf(p.Alpha, 0):
		return bad("alpha is not finite")
	case p.DerivedTau && (p.Tau != 0 || p.Alpha <= 0 || p.Alpha >= 1):
		return bad("derived tau needs tau 0 and 0 < alpha < 1")
	case !p.DerivedTau && (p.Tau.Milliseconds() <= 0 || p.Alpha != 0):
		return bad("fixed tau needs a positive tau and alpha 0")
	}
	return nil
}

// checkTime applies the validity-window checks at now.
// The window is compared in whole Unix seconds, the record's own unit: a
// time.Time made from a Unix second above about 2^63 − 6.2·10^10 (year
// 292 277 024 627) wraps around inside the time package, and Before/After on
// it would read an expires_at of 2^63 − 1 as long past (attestation.md §6
// steps 11 and 12 compare the int64 values).
func (a *Record) checkTime(now time.Time, allowExpired bool) error {
	if a.IssuedAt.Unix() > now.Add(MaxClockSkew).Unix() {
		return fmt.Errorf("%w: issued at %s, now %s", ErrNotYetValid, a.IssuedAt.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if !allowExpired && now.Unix() >= a.ExpiresAt.Unix() {
		return fmt.Errorf("%w: expired at %s, now %s", ErrExpired, a.ExpiresAt.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return nil
}

// Check applies every verification step that does not need the envelope:
// the spec version, the structural checks and the validity window at now
// (time.Now when zero). It says nothing about who signed the attestation;
// use VerifyAttestation on the sealed bytes for that.
func (a *Record) Check(now time.Time) error {
	if a == nil {
		return fmt.Errorf("%w: nil attestation", ErrMalformed)
	}
	if now.IsZero() {
		now = time.Now()
	}
	if err := CheckVersion(a.SpecVersion); err != nil {
		return err
	}
	if err := a.checkStructure(); err != nil {
		return err
	}
	return a.checkTime(now, false)
}

// Valid reports whether Check(now) passes: the attestation is well formed
// and now lies in its validity window. Like Check it does not verify a
// signature.
func (a *Record) Valid(now time.Time) bool { return a.Check(now) == nil }

// Seal signs a with key and returns the marshalled libp2p envelope. It
// refuses to seal (with the error VerifyAttestation would give) an
// attestation whose issuer is not key's peer ID, whose spec version is not
// ours, or that fails the structural checks; the validity window is not
// checked, so expired attestations can be sealed for tests.
func Seal(a *Record, key crypto.PrivKey) ([]byte, error) {
	if a == nil {
		return nil, fmt.Errorf("seal attestation: %w: nil attestation", ErrMalformed)
	}
	if key == nil {
		return nil, errors.New("seal attestation: nil private key")
	}
	signer, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("seal attestation: signer peer ID: %w", err)
	}
	if signer != a.Issuer {
		return nil, fmt.Errorf("seal attestation: %w: key belongs to %s, issuer is %s", ErrIssuerMismatch, signer, a.Issuer)
	}
	if ek, ok := key.GetPublic().(*crypto.ECDSAPublicKey); ok {
		if std, err := crypto.PubKeyToStdKey(ek); err != nil || std.(*ecdsa.PublicKey).Curve != elliptic.P256() {
			return nil, fmt.Errorf("seal attestation: %w: an ECDSA key must be on P-256", ErrMalformed)
		}
	}
	if err := CheckVersion(a.SpecVersion); err != nil {
		return nil, fmt.Errorf("seal attestation: %w", err)
	}
	if err := a.checkStructure(); err != nil {
		return nil, fmt.Errorf("seal attestation: %w", err)
	}
	if err := checkIssuedProvenance(a.Provenance); err != nil {
		return nil, fmt.Errorf("seal attestation: %w", err)
	}
	if err := checkIssuedRounds(a); err != nil {
		return nil, fmt.Errorf("seal attestation: %w", err)
	}
	if a.Kind == skill.NarrativeKind {
		return nil, fmt.Errorf("seal attestation: %w: an issuer omits the kind of a narrative set (spec/attestation.md §3.4)", ErrMalformed)
	}
	env, err := record.Seal(a, key)
	if err != nil {
		return nil, fmt.Errorf("seal attestation: %w", err)
	}
	data, err := env.Marshal()
	if err != nil {
		return nil, fmt.Errorf("seal attestation: marshal envelope: %w", err)
	}
	if len(data) > MaxEnvelopeBytes {
		return nil, fmt.Errorf("seal attestation: %w: %d bytes exceeds %d", ErrTooLarge, len(data), MaxEnvelopeBytes)
	}
	return data, nil
}

// VerifyOptions are the caller's expectations of an attestation.
type VerifyOptions struct {
	// Subject, when set, is the peer the attestation must be about.
	Subject peer.ID
	// Issuer, when set, is the peer that must have issued it.
	Issuer peer.ID
	// Now is the time the validity window is checked at; zero means
	// time.Now().
	Now time.Time
	// AllowExpired skips the expiry check (to display or audit an old
	// attestation). The issued-at check still applies.
	AllowExpired bool
	// MinSource, when set, is the weakest challenge source the caller
	// accepts: a record whose provenance source ranks below it
	// (skill.SourceKind.Rank; a record naming no source ranks 0) fails
	// with ErrSourceBelowMinimum. It must be a named source kind.
	MinSource skill.SourceKind
}

// Verify decodes and checks a marshalled attestation envelope
// following spec/attestation.md section 6: the size cap, the envelope
// encoding and payload type, the signature over AttestationDomain, the
// payload encoding, the spec version, the structural checks, that the
// signing key is the issuer's, the expected issuer and subject, the
// validity window and, with opts.MinSource, the challenge source (step
// 13). On success it returns the
// attestation and the envelope; on failure it returns only an error that
// wraps exactly one of the Err* sentinels of this file. A valid record of
// any verdict passes: a caller that admits on it checks Record.Accepted
// (as `acaptcha attestations verify` does unless --any-verdict).
func Verify(data []byte, opts VerifyOptions) (*Record, *record.Envelope, error) {
	a, env, err := verifySigned(data)
	if err != nil {
		return nil, nil, err
	}
	if err := checkOptions(a, opts); err != nil {
		return nil, nil, err
	}
	return a, env, nil
}

// DecodeOwn decodes an envelope this node sealed with its own key, whose
// public key is signer: Verify's steps (the size, the payload type, the
// version, the structure, issuer = signer) except the signature check,
// which costs ~50 µs a record where the rest costs a few. It is for the
// node's own store only: an envelope that does not carry signer's key is
// refused with ErrIssuerMismatch (another identity's record, not
// decoded), and bytes anyone else handed over go through Verify.
//
// id is signer's peer ID, computed when empty (a caller decoding many
// records passes it: computing it is half the cost of the rest).
func DecodeOwn(data []byte, signer crypto.PubKey, id peer.ID) (*Record, error) {
	const op = "decode own attestation"
	if len(data) > MaxEnvelopeBytes {
		return nil, fmt.Errorf("%s: %w: %d bytes exceeds %d", op, ErrTooLarge, len(data), MaxEnvelopeBytes)
	}
	raw, err := unmarshalEnvelope(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: envelope: %w", op, ErrMalformed, err)
	}
	if !bytes.Equal(raw.PayloadType, attestationCodecBytes) {
		return nil, fmt.Errorf("%s: %w: payload type %x is not an attestation (%x)", op, ErrMalformed, raw.PayloadType, attestationCodecBytes)
	}
	if signer == nil || !raw.PublicKey.Equals(signer) {
		return nil, fmt.Errorf("%s: %w: sealed with another key", op, ErrIssuerMismatch)
	}
	rec, err := decodeRecord(op, raw.RawPayload)
	if err != nil {
		return nil, err
	}
	if id == "" {
		if id, err = peer.IDFromPublicKey(signer); err != nil {
			return nil, fmt.Errorf("%s: %w: signer peer ID: %w", op, ErrMalformed, err)
		}
	}
	if id != rec.Issuer {
		return nil, fmt.Errorf("%s: %w: sealed by %s, issuer field is %s", op, ErrIssuerMismatch, id, rec.Issuer)
	}
	return rec, nil
}

// decodeRecord decodes an envelope's payload and checks its version and
// structure, the steps the decoders of a sealed record share after the
// envelope's own checks.
func decodeRecord(op string, payload []byte) (*Record, error) {
	var rec Record
	if err := decodePayload(payload, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w: payload: %w", op, ErrMalformed, err)
	}
	if err := CheckVersion(rec.SpecVersion); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := rec.checkStructure(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return &rec, nil
}

// DecodeUnverified decodes an envelope with every step of Verify that
// depends on the bytes alone (the size, the envelope, the payload type,
// the key rules, the payload, the version, the structure, issuer = the
// envelope's key) except the signature check, which costs ~50 µs a
// record where the rest costs a few. The record it returns is NOT
// authenticated: it is for a store's own records that are verified
// before they are trusted (the node's index of learned records,
// spec/trust.md §5); Verify of the same bytes returns the same record
// when the signature holds.
func DecodeUnverified(data []byte) (*Record, error) {
	const op = "decode attestation"
	if len(data) > MaxEnvelopeBytes {
		return nil, fmt.Errorf("%s: %w: %d bytes exceeds %d", op, ErrTooLarge, len(data), MaxEnvelopeBytes)
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("%s: %w: empty input", op, ErrMalformed)
	}
	raw, err := unmarshalEnvelope(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: envelope: %w", op, ErrMalformed, err)
	}
	if !bytes.Equal(raw.PayloadType, attestationCodecBytes) {
		return nil, fmt.Errorf("%s: %w: payload type %x is not an attestation (%x)", op, ErrMalformed, raw.PayloadType, attestationCodecBytes)
	}
	if err := checkKeyRules(raw, data); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	rec, err := decodeRecord(op, raw.RawPayload)
	if err != nil {
		return nil, err
	}
	signer, err := peer.IDFromPublicKey(raw.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: signer peer ID: %w", op, ErrMalformed, err)
	}
	if signer != rec.Issuer {
		return nil, fmt.Errorf("%s: %w: sealed by %s, issuer field is %s", op, ErrIssuerMismatch, signer, rec.Issuer)
	}
	return rec, nil
}

// decodePayload decodes a record's payload (UnmarshalRecord, which a
// malformed payload must not make panic).
func decodePayload(data []byte, rec *Record) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic decoding payload: %v", r)
		}
	}()
	return rec.UnmarshalRecord(data)
}

// verifySigned runs Verify's steps up to the signer's (issuer = signer):
// those that depend on the bytes alone.
func verifySigned(data []byte) (*Record, *record.Envelope, error) {
	const op = "verify attestation"
	if len(data) > MaxEnvelopeBytes {
		return nil, nil, fmt.Errorf("%s: %w: %d bytes exceeds %d", op, ErrTooLarge, len(data), MaxEnvelopeBytes)
	}
	if len(data) == 0 {
		return nil, nil, fmt.Errorf("%s: %w: empty input", op, ErrMalformed)
	}
	// Decode once without trusting anything, so that encoding problems are
	// told apart from signature failures.
	raw, err := unmarshalEnvelope(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w: envelope: %w", op, ErrMalformed, err)
	}
	if !bytes.Equal(raw.PayloadType, attestationCodecBytes) {
		return nil, nil, fmt.Errorf("%s: %w: payload type %x is not an attestation (%x)", op, ErrMalformed, raw.PayloadType, attestationCodecBytes)
	}
	if err := checkKeyRules(raw, data); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", op, err)
	}
	var rec Record
	env, err := consumeTypedEnvelope(data, &rec)
	if err != nil {
		if errors.Is(err, ErrMalformed) {
			return nil, nil, fmt.Errorf("%s: %w", op, err)
		}
		return nil, nil, fmt.Errorf("%s: %w: %w", op, ErrBadSignature, err)
	}
	a := &rec
	if err := CheckVersion(a.SpecVersion); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := a.checkStructure(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", op, err)
	}
	signer, err := peer.IDFromPublicKey(env.PublicKey)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w: signer peer ID: %w", op, ErrMalformed, err)
	}
	if signer != a.Issuer {
		return nil, nil, fmt.Errorf("%s: %w: signed by %s, issuer field is %s", op, ErrIssuerMismatch, signer, a.Issuer)
	}
	return a, env, nil
}

// checkOptions applies the steps of Verify that follow the signature's
// (the expected issuer and subject, the validity window, the source) to
// a record whose envelope verified.
func checkOptions(a *Record, opts VerifyOptions) error {
	const op = "verify attestation"
	if opts.Issuer != "" && a.Issuer != opts.Issuer {
		return fmt.Errorf("%s: %w: issued by %s, expected %s", op, ErrIssuerMismatch, a.Issuer, opts.Issuer)
	}
	if opts.Subject != "" && a.Subject != opts.Subject {
		return fmt.Errorf("%s: %w: about %s, expected %s", op, ErrSubjectMismatch, a.Subject, opts.Subject)
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	if err := a.checkTime(now, opts.AllowExpired); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := CheckSource(a, opts.MinSource); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// Cache remembers envelopes that passed Verify's checks up to the
// signer's (the signature, the key rules, the encoding, the version, the
// structure, issuer = signer), by the signed record they carry (cacheKey:
// a SHA-256 of the decoded key, payload type, payload and signature, so
// that the same record in other bytes, an unknown field appended, is one
// entry; of the bytes when they decode to no envelope): Verify of the
// same record again runs only the checks that depend on the options and
// the time, with the same outcome, and costs a decode and a hash instead
// of a signature check (a replayed envelope, or a variant of one, costs
// its sender nothing). It
// holds at most Max envelopes (DefaultCacheSize when 0) and, when full,
// forgets a sixteenth at once, expired records first. Safe for
// concurrent use; the zero Cache is ready.
type Cache struct {
	Max int

	mu     sync.Mutex
	m      map[[sha256.Size]byte]cached
	checks uint64
}

// Len is how many envelopes the cache holds.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// Checked is how many envelopes the cache has checked in full (its
// misses: a signature check each, unless the envelope failed before).
func (c *Cache) Checked() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checks
}

// DefaultCacheSize is a Cache's size when Max is 0.
const DefaultCacheSize = 4096

type cached struct {
	rec *Record
	env *record.Envelope
}

// Verify is the package's Verify with the cache. The record returned is
// shared with later calls for the same bytes: callers must not modify
// it.
func (c *Cache) Verify(data []byte, opts VerifyOptions) (*Record, *record.Envelope, error) {
	if len(data) > MaxEnvelopeBytes || len(data) == 0 {
		// What no envelope may be fails before any lookup: a variant of
		// a cached record larger than an envelope is refused as Verify
		// refuses it.
		return verifySigned(data)
	}
	key := cacheKey(data)
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if !ok {
		// The checks that depend on the bytes alone; the options' and
		// the time's below.
		c.mu.Lock()
		c.checks++
		c.mu.Unlock()
		a, env, err := verifySigned(data)
		if err != nil {
			return nil, nil, err
		}
		e = cached{a, env}
		now := opts.Now
		if now.IsZero() {
			now = time.Now()
		}
		c.mu.Lock()
		if c.m == nil {
			c.m = map[[sha256.Size]byte]cached{}
		}
		limit := c.Max
		if limit <= 0 {
			limit = DefaultCacheSize
		}
		if len(c.m) >= limit {
			target := limit - limit/16
			for k, v := range c.m {
				if len(c.m) <= target {
					break
				}
				if !now.Before(v.rec.ExpiresAt) {
					delete(c.m, k)
				}
			}
			for k := range c.m {
				if len(c.m) <= target {
					break
				}
				delete(c.m, k)
			}
		}
		c.m[key] = e
		c.mu.Unlock()
	}
	if err := checkOptions(e.rec, opts); err != nil {
		return nil, nil, err
	}
	return e.rec, e.env, nil
}

// cacheDomain separates the Cache's record keys from digests of bytes.
const cacheDomain = "acaptcha cached record\x00"

// KeyCost is what checking a signature of a key of type typ whose
// encoding (crypto.MarshalPublicKey's Data) is size bytes costs, in
// units of about one ed25519 check: an RSA key of b bits (b/1024)²,
// rounded up (b from the encoding's size: no key is decoded to price
// it), other keys 1 or 2. Gossip (trust.md §3.4) and the HTTP door's
// verify route (http.md §5) price signature checks with it.
func KeyCost(typ cryptopb.KeyType, size int) int {
	switch typ {
	case cryptopb.KeyType_Ed25519:
		return 1
	case cryptopb.KeyType_RSA:
		// A PKIX encoding holds the modulus and about 38 bytes more.
		kb := (max(0, size-rsaDEROverhead)*8 + 1023) / 1024
		return max(1, kb*kb)
	}
	return 2
}

// rsaDEROverhead is what a PKIX-encoded RSA public key holds besides its
// modulus (294 bytes for 2048 bits, 1062 for 8192).
const rsaDEROverhead = 38

// Cost is what Verify would spend on data now, in KeyCost units: 0 for
// a record the cache holds (a hash and a decode), KeyCost of the
// envelope's key for a new one, 1 for data that is no envelope (it fails
// before any signature check).
func (c *Cache) Cost(data []byte) int {
	if len(data) > MaxEnvelopeBytes || len(data) == 0 {
		return 1
	}
	var env recordpb.Envelope
	if err := proto.Unmarshal(data, &env); err != nil || env.GetPublicKey() == nil {
		return 1
	}
	key := cacheKey(data)
	c.mu.Lock()
	_, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return 0
	}
	return KeyCost(env.GetPublicKey().GetType(), len(env.GetPublicKey().GetData()))
}

// cacheKey names the signed record in data for the Cache: the SHA-256 of
// its envelope's key type and data, payload type, payload and signature,
// all Verify reads of it (the decoder skips unknown fields, keeps the
// last of a repeated one, and so does Verify's). Data that decodes to no
// envelope with a public key of a known type (0 to 3) is named by the
// SHA-256 of its bytes. Nothing is checked nor any key decoded.
func cacheKey(data []byte) [sha256.Size]byte {
	var env recordpb.Envelope
	if err := proto.Unmarshal(data, &env); err != nil || env.GetPublicKey() == nil ||
		env.GetPublicKey().GetType() < cryptopb.KeyType_RSA || env.GetPublicKey().GetType() > cryptopb.KeyType_ECDSA {
		return sha256.Sum256(data)
	}
	pk := env.GetPublicKey()
	h := sha256.New()
	h.Write([]byte(cacheDomain))
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(pk.GetType()))])
	for _, f := range [][]byte{pk.GetData(), env.GetPayloadType(), env.GetPayload(), env.GetSignature()} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(f)))])
		h.Write(f)
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// CheckSource applies the provenance policy of spec/attestation.md
// section 6, step 13: nil when min is empty (no requirement) or when the
// record's challenge source ranks at least as high as min; otherwise an
// error wrapping ErrSourceBelowMinimum. A min that is not a named source
// kind is refused the same way rather than read as "any".
func CheckSource(a *Record, min skill.SourceKind) error {
	if min == skill.SourceUnknown {
		return nil
	}
	if !min.Valid() {
		return fmt.Errorf("%w: minimum %q is not a source kind (want procedural, corpus, hybrid or llm)", ErrSourceBelowMinimum, min)
	}
	if a == nil {
		return fmt.Errorf("%w: nil attestation", ErrSourceBelowMinimum)
	}
	if got := a.Provenance.Source; !got.AtLeast(min) {
		return fmt.Errorf("%w: challenges from source %s (rank %d), at least %s (rank %d) required",
			ErrSourceBelowMinimum, SourceName(got), got.Rank(), min, min.Rank())
	}
	return nil
}

// SourceName renders a provenance source for people: the kind, or
// "unknown" for a record that names none.
func SourceName(k skill.SourceKind) string {
	if k == skill.SourceUnknown {
		return "unknown"
	}
	return string(k)
}

// RecordedProvenance is the provenance an issuer records for a served
// set: the set's own, or the zero value (unknown source) when the set has
// none or names a source that is not a known kind. A model that does not
// fit the record (invalid UTF-8, over skill.MaxModelBytes) is dropped
// rather than truncated.
func RecordedProvenance(pv *skill.Provenance) skill.Provenance {
	if pv == nil || !pv.Source.Valid() {
		return skill.Provenance{}
	}
	out := *pv
	if len(out.Model) > skill.MaxModelBytes || !utf8.ValidString(out.Model) {
		out.Model = ""
	}
	return out
}

// checkIssuedProvenance is the issuer's stricter rule (spec section 5):
// a record names a listed source or none, and one that names none says
// nothing else about its challenges.
func checkIssuedProvenance(pv skill.Provenance) error {
	switch {
	case pv.Source != skill.SourceUnknown && !pv.Source.Valid():
		return fmt.Errorf("%w: provenance source %q is not procedural, corpus, hybrid or llm", ErrMalformed, pv.Source)
	case pv.Source == skill.SourceUnknown && (pv.Model != "" || pv.LLMQuestions):
		return fmt.Errorf("%w: provenance names a model or LLM-worded questions but no source", ErrMalformed)
	}
	return nil
}

// unmarshalEnvelope and consumeTypedEnvelope guard the libp2p decoders:
// a panic on hostile input becomes an error rather than a crash.
// checkKeyRules applies the key rules of spec/attestation.md §2 that
// go-libp2p's own verification leaves out, so that a record verifies
// alike everywhere: an ECDSA key is on P-256 (go-libp2p also takes the
// other NIST curves) and its signature exact DER (go-libp2p ignores bytes
// after it), and a Secp256k1 key is compressed and its signature has a
// low S (go-libp2p also takes a high one, which libsecp256k1 refuses).
func checkKeyRules(env *record.Envelope, data []byte) error {
	var sig []byte
	switch env.PublicKey.(type) {
	case *crypto.Secp256k1PublicKey, *crypto.ECDSAPublicKey, *crypto.RsaPublicKey:
		// record.Envelope keeps its signature unexported: read it from
		// the envelope's encoding (decoded once already, so this succeeds).
		var pe recordpb.Envelope
		if err := proto.Unmarshal(data, &pe); err != nil {
			return fmt.Errorf("%w: envelope: %w", ErrMalformed, err)
		}
		sig = pe.GetSignature()
		if err := CheckKeyData(pe.GetPublicKey().GetType(), pe.GetPublicKey().GetData()); err != nil {
			return err
		}
	}
	return CheckKeyRules(env.PublicKey, sig)
}

// Secp256k1KeyBytes is the length of a Secp256k1 key's data: the
// compressed SEC1 point, the form the libp2p peer-id specification names.
const Secp256k1KeyBytes = 33

// CheckKeyData applies the key-encoding rules of spec/attestation.md §2 to
// the Type and Data of a marshalled libp2p public key: a Secp256k1 key is
// its 33-byte compressed point, and an ECDSA or RSA key is exactly the DER
// SubjectPublicKeyInfo that x509.MarshalPKIXPublicKey writes for it (for
// P-256, 91 bytes with the uncompressed point). go-libp2p also decodes the
// 65-byte uncompressed and hybrid Secp256k1 forms, and a
// SubjectPublicKeyInfo with an element after its BIT STRING, to the same
// key and peer ID (it derives the ID from the key re-encoded), so without
// these rules one record had several envelopes (gossip messages, signature
// checks), and a DER-strict verifier refused what Go verified.
// ErrMalformed otherwise; other types pass.
func CheckKeyData(typ cryptopb.KeyType, data []byte) error {
	switch typ {
	case cryptopb.KeyType_Secp256k1:
		if len(data) != Secp256k1KeyBytes {
			return fmt.Errorf("%w: a Secp256k1 key must be its %d-byte compressed point, not %d bytes", ErrMalformed, Secp256k1KeyBytes, len(data))
		}
	case cryptopb.KeyType_ECDSA, cryptopb.KeyType_RSA:
		pub, err := x509.ParsePKIXPublicKey(data)
		if err != nil {
			return fmt.Errorf("%w: %s key: %w", ErrMalformed, typ, err)
		}
		canon, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			return fmt.Errorf("%w: %s key: %w", ErrMalformed, typ, err)
		}
		if !bytes.Equal(canon, data) {
			return fmt.Errorf("%w: an %s key must be exactly the DER SubjectPublicKeyInfo of the key (%d bytes), not %d bytes", ErrMalformed, typ, len(canon), len(data))
		}
	}
	return nil
}

// CheckKeyRules applies the key rules of spec/attestation.md §2 to a
// public key and a signature it made: ErrMalformed for an ECDSA key on
// another curve than P-256, ErrBadSignature for an ECDSA signature that
// is not exactly DER and for a Secp256k1 signature that is not DER or
// has a high S. Other key types pass (their signature
// is checked by go-libp2p's Verify). The HTTP door applies the same rules
// to its proof of key possession (spec/http.md §1).
func CheckKeyRules(pub crypto.PubKey, sig []byte) error {
	switch k := pub.(type) {
	case *crypto.ECDSAPublicKey:
		std, err := crypto.PubKeyToStdKey(k)
		if err != nil {
			return fmt.Errorf("%w: ECDSA key: %w", ErrMalformed, err)
		}
		if pk, ok := std.(*ecdsa.PublicKey); !ok || pk.Curve != elliptic.P256() {
			return fmt.Errorf("%w: an ECDSA key must be on P-256", ErrMalformed)
		}
		if !exactECDSADER(sig) {
			return fmt.Errorf("%w: ECDSA signature is not exactly the DER of its (r, s)", ErrBadSignature)
		}
	case *crypto.Ed25519PublicKey:
		if raw, err := k.Raw(); err == nil && SmallOrderEd25519(raw) {
			return fmt.Errorf("%w: an Ed25519 key of small order, which anyone can sign for", ErrMalformed)
		}
	case *crypto.Secp256k1PublicKey:
		parsed, err := secpecdsa.ParseDERSignature(sig)
		if err != nil {
			return fmt.Errorf("%w: Secp256k1 signature: %w", ErrBadSignature, err)
		}
		if s := parsed.S(); s.IsOverHalfOrder() {
			return fmt.Errorf("%w: Secp256k1 signature with a high S", ErrBadSignature)
		}
	}
	return nil
}

// exactECDSADER reports whether sig is exactly the DER encoding of an
// ECDSA-Sig-Value, SEQUENCE { r INTEGER, s INTEGER } (RFC 3279 §2.2.3),
// with nothing after it nor after s: go-libp2p's Verify decodes it with
// encoding/asn1, which ignores both, so without this one signature had
// endless encodings (spec/attestation.md §2). encoding/asn1 already
// refuses non-minimal lengths and integers, so re-encoding what it read
// gives the input back exactly when nothing was ignored.
func exactECDSADER(sig []byte) bool {
	var v struct{ R, S *big.Int }
	rest, err := asn1.Unmarshal(sig, &v)
	if err != nil || len(rest) != 0 {
		return false
	}
	again, err := asn1.Marshal(v)
	return err == nil && bytes.Equal(again, sig)
}

func unmarshalEnvelope(data []byte) (env *record.Envelope, err error) {
	defer func() {
		if r := recover(); r != nil {
			env, err = nil, fmt.Errorf("panic decoding envelope: %v", r)
		}
	}()
	return record.UnmarshalEnvelope(data)
}

func consumeTypedEnvelope(data []byte, rec *Record) (env *record.Envelope, err error) {
	defer func() {
		if r := recover(); r != nil {
			env, err = nil, fmt.Errorf("%w: panic opening envelope: %v", ErrMalformed, r)
		}
	}()
	return record.ConsumeTypedEnvelope(data, rec)
}

// attestationJSON is the JSON view of an attestation used by the CLI:
// peer IDs in their string form, byte strings in hex, durations in whole
// milliseconds and times in RFC 3339 (UTC).
type attestationJSON struct {
	Issuer           string            `json:"issuer"`
	Subject          string            `json:"subject"`
	Accepted         bool              `json:"accepted"`
	Reason           skill.Reason      `json:"reason"`
	FailedRound      int               `json:"failed_round"`
	Nonce            string            `json:"nonce"`
	TranscriptDigest string            `json:"transcript_digest"`
	Rounds           []roundTimingJSON `json:"rounds"`
	Policy           policyJSON        `json:"policy"`
	Domain           string            `json:"domain"`
	SetID            string            `json:"set_id"`
	IssuedAt         string            `json:"issued_at"`
	ExpiresAt        string            `json:"expires_at"`
	SpecVersion      string            `json:"spec_version"`
	Provenance       provenanceJSON    `json:"provenance"`
	// Kind is the record's kind, omitted for narrative records (so the
	// view of a 1.0.0 record is unchanged).
	Kind string `json:"kind,omitempty"`
}

// provenanceJSON is the provenance in the JSON view: source is the
// record's value ("" when it names none), rank its skill.SourceKind.Rank.
type provenanceJSON struct {
	Source       skill.SourceKind `json:"source"`
	Rank         int              `json:"rank"`
	Model        string           `json:"model"`
	LLMQuestions bool             `json:"llm_questions"`
}

type roundTimingJSON struct {
	Round           int   `json:"round"`
	BudgetMs        int64 `json:"budget_ms"`
	EffectiveMs     int64 `json:"effective_ms"`
	NarrativeTokens int   `json:"narrative_tokens"`
	Correct         bool  `json:"correct"`
}

type policyJSON struct {
	Rounds      int     `json:"rounds"`
	TauMs       int64   `json:"tau_ms"`
	DerivedTau  bool    `json:"derived_tau"`
	Alpha       float64 `json:"alpha"`
	TotalMs     int64   `json:"total_ms"`
	RTTCreditMs int64   `json:"rtt_credit_ms"`
}

// MarshalJSON renders the attestation for people and scripts: peer IDs as
// strings, nonce and digest in hex, durations as whole milliseconds
// (*_ms fields) and times in RFC 3339. It is a display format; the signed
// form is the envelope.
func (a *Record) MarshalJSON() ([]byte, error) {
	if a == nil {
		return []byte("null"), nil
	}
	v := attestationJSON{
		Issuer:           a.Issuer.String(),
		Subject:          a.Subject.String(),
		Accepted:         a.Accepted,
		Reason:           a.Reason,
		FailedRound:      a.FailedRound,
		Nonce:            hex.EncodeToString(a.Nonce),
		TranscriptDigest: hex.EncodeToString(a.TranscriptDigest),
		Rounds:           make([]roundTimingJSON, 0, len(a.Rounds)),
		Policy: policyJSON{
			Rounds:      a.Policy.Rounds,
			TauMs:       a.Policy.Tau.Milliseconds(),
			DerivedTau:  a.Policy.DerivedTau,
			Alpha:       a.Policy.Alpha,
			TotalMs:     a.Policy.Total.Milliseconds(),
			RTTCreditMs: a.Policy.RTTCredit.Milliseconds(),
		},
		Domain:      a.ChallengeDomain,
		SetID:       a.SetID,
		IssuedAt:    a.IssuedAt.UTC().Format(time.RFC3339),
		ExpiresAt:   a.ExpiresAt.UTC().Format(time.RFC3339),
		SpecVersion: a.SpecVersion,
		Provenance: provenanceJSON{
			Source: a.Provenance.Source, Rank: a.Provenance.Source.Rank(),
			Model: a.Provenance.Model, LLMQuestions: a.Provenance.LLMQuestions,
		},
		Kind: skill.WireKind(a.Kind),
	}
	for _, r := range a.Rounds {
		v.Rounds = append(v.Rounds, roundTimingJSON{
			Round: r.Round, BudgetMs: r.Budget.Milliseconds(), EffectiveMs: r.Effective.Milliseconds(),
			NarrativeTokens: r.NarrativeTokens, Correct: r.Correct,
		})
	}
	return json.Marshal(v)
}
