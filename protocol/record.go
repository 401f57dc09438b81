package protocol

import (
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"

	"github.com/acaptcha/acaptcha/protocol/attestation"
	"github.com/acaptcha/acaptcha/skill"
)

// The signed attestation record lives in package attestation; these names
// keep the protocol's API in one place for callers that verify sessions
// and their records together.
type (
	// Attestation is the signed verdict (attestation.Record).
	Attestation = attestation.Record
	// AttestationRecord is the same type under its 1.0 name (the record
	// now implements record.Record itself).
	AttestationRecord = attestation.Record
	// RoundTiming is one round's timing as the verifier measured it.
	RoundTiming = attestation.RoundTiming
	// PolicySummary is the policy a session ran under.
	PolicySummary = attestation.PolicySummary
	// VerifyOptions tells VerifyAttestation what to require.
	VerifyOptions = attestation.VerifyOptions
)

// SpecVersion is the version of the wire and record format.
const SpecVersion = attestation.SpecVersion

// Record constants (see package attestation).
const (
	AttestationDomain      = attestation.AttestationDomain
	AttestationCodec       = attestation.AttestationCodec
	DefaultAttestationTTL  = attestation.DefaultAttestationTTL
	MaxEnvelopeBytes       = attestation.MaxEnvelopeBytes
	MaxClockSkew           = attestation.MaxClockSkew
	NonceBytes             = attestation.NonceBytes
	DigestBytes            = attestation.DigestBytes
	MaxAttestationString   = attestation.MaxAttestationString
	MaxAttestationDuration = attestation.MaxAttestationDuration
	MaxSourceBytes         = attestation.MaxSourceBytes
)

// Record errors (see package attestation).
var (
	ErrMalformed          = attestation.ErrMalformed
	ErrTooLarge           = attestation.ErrTooLarge
	ErrBadSignature       = attestation.ErrBadSignature
	ErrIssuerMismatch     = attestation.ErrIssuerMismatch
	ErrSubjectMismatch    = attestation.ErrSubjectMismatch
	ErrExpired            = attestation.ErrExpired
	ErrNotYetValid        = attestation.ErrNotYetValid
	ErrUnsupportedVersion = attestation.ErrUnsupportedVersion
	ErrSourceBelowMinimum = attestation.ErrSourceBelowMinimum
)

// Seal signs a as an envelope (attestation.Seal).
func Seal(a *Attestation, key crypto.PrivKey) ([]byte, error) { return attestation.Seal(a, key) }

// VerifyAttestation checks a sealed attestation (attestation.Verify).
func VerifyAttestation(data []byte, opts VerifyOptions) (*Attestation, *record.Envelope, error) {
	return attestation.Verify(data, opts)
}

// DecodeOwnAttestation decodes an envelope this node sealed with the key
// whose public key is signer, without checking its signature again
// (attestation.DecodeOwn: for the node's own store only).
func DecodeOwnAttestation(data []byte, signer crypto.PubKey, id peer.ID) (*Attestation, error) {
	return attestation.DecodeOwn(data, signer, id)
}

// DecodeAttestationUnverified decodes an envelope without checking its
// signature (attestation.DecodeUnverified): the record is not
// authenticated until VerifyAttestation of the same bytes succeeds.
func DecodeAttestationUnverified(data []byte) (*Attestation, error) {
	return attestation.DecodeUnverified(data)
}

// AttestationCache is a bounded cache of verified envelopes
// (attestation.Cache): VerifyAttestation of bytes it verified before runs
// only the checks that depend on the options and the time.
type AttestationCache = attestation.Cache

// CheckSource refuses a record below min (attestation.CheckSource).
func CheckSource(a *Attestation, min skill.SourceKind) error { return attestation.CheckSource(a, min) }

// SourceName names a source kind as records carry it.
func SourceName(k skill.SourceKind) string { return attestation.SourceName(k) }

// RecordedProvenance is the provenance a record carries for a set's.
func RecordedProvenance(pv *skill.Provenance) skill.Provenance {
	return attestation.RecordedProvenance(pv)
}

// IssuedFailedRound is the failed_round an issuer writes.
func IssuedFailedRound(accepted bool, entries int) int {
	return attestation.IssuedFailedRound(accepted, entries)
}

// checkVersion is attestation.CheckVersion (hellos carry the same version).
func checkVersion(v string) error { return attestation.CheckVersion(v) }

// CutAnswer cuts an answer for the transcript digest.
func CutAnswer(s string) string { return attestation.CutAnswer(s) }

// AttestationErrorCode is the stable code of a verification error
// (attestation.ErrorCode; spec/attestation.md §6).
func AttestationErrorCode(err error) string { return attestation.ErrorCode(err) }
