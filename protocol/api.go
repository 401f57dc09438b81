// Package protocol is the libp2p wire protocol of acaptcha: varint-delimited
// protobuf frames over a stream opened by the verifier, the RTT probe, the
// verifier and prover stream handlers, and the signed attestation record.
// See spec/protocol.md and spec/attestation.md.
package protocol

import (
	"fmt"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// ID is the protocol ID of the attestation protocol. The stream opener is
// the verifier.
const ID = "/acaptcha/attest/1.0.0"

// ServiceName names the protocol's resource-manager scope.
const ServiceName = "acaptcha.attest"

// Result is the verifier's outcome of one session against a peer.
type Result struct {
	Peer    peer.ID
	Verdict skill.Verdict
	// RTT is the minimum of the probe round trips; Credit is what was
	// subtracted from each round (RTT capped by the policy).
	RTT, Credit time.Duration
	Nonce       []byte
	// Attestation is the record this node signed for the peer (accepted
	// and rejected verdicts are both signed; inconclusive ones are not),
	// and Envelope its sealed bytes.
	Attestation *Attestation
	Envelope    []byte
	Started     time.Time
	Duration    time.Duration
	// Reciprocal is the prover's answer to a reciprocal request, from its
	// HelloAck (spec §1a): UNSPECIFIED when none was made, when the
	// prover did not say (before document 1.6.0) or gave a value this
	// node does not know, or when the session ended before the ack.
	Reciprocal pb.Reciprocal
}

// ReciprocalDropped reports whether r says the prover will not verify the
// verifier back, and why, in words.
func ReciprocalDropped(r pb.Reciprocal) (string, bool) {
	switch r {
	case pb.Reciprocal_RECIPROCAL_ATTESTED:
		return "its own attestation of us still stands (an acceptance, or a rejection within its back-off)", true
	case pb.Reciprocal_RECIPROCAL_BACKING_OFF:
		return "we are in its back-off after a failed or declined session", true
	case pb.Reciprocal_RECIPROCAL_BUSY:
		return "its challenge draws for us are spent for now", true
	case pb.Reciprocal_RECIPROCAL_NOT_OFFERED:
		return "it does not verify us on request", true
	case pb.Reciprocal_RECIPROCAL_ADMITTED:
		return "it admits us through attestations by peers it trusts and runs no session of its own", true
	}
	return "", false
}

// ReciprocalName is r's name without its prefix, in lower case ("will",
// "busy"), or its number when this node does not know it.
func ReciprocalName(r pb.Reciprocal) string {
	if n, ok := pb.Reciprocal_name[int32(r)]; ok {
		return strings.ToLower(strings.TrimPrefix(n, "RECIPROCAL_"))
	}
	return fmt.Sprintf("reciprocal %d", int32(r))
}

// ProverResult is what the prover side learns from a session a remote
// verifier ran against this node.
type ProverResult struct {
	Verifier peer.ID
	// Accepted, Reason and FailedRound are as the verifier reported them.
	Accepted    bool
	Reason      skill.Reason
	FailedRound int
	Detail      string
	// Envelope is the verifier's sealed attestation when it sent one;
	// Attestation is that envelope verified against this node as subject
	// (nil when absent or invalid, with AttestationErr saying why).
	Envelope       []byte
	Attestation    *Attestation
	AttestationErr error
	// Err is set when the session broke before a verdict arrived.
	Err      error
	Rounds   int // rounds this node answered
	Duration time.Duration
}

// NewAttestation builds the attestation for a finished verifier session.
// It returns nil for inconclusive verdicts, which are never signed: the
// peer was neither accepted nor rejected.
func NewAttestation(issuer, subject peer.ID, nonce []byte, s *skill.Session, v skill.Verdict, now time.Time, ttl time.Duration) *Attestation {
	if v.Reason == skill.ReasonInconclusive {
		return nil
	}
	if ttl <= 0 {
		ttl = DefaultAttestationTTL
	}
	p := s.Policy()
	kind := s.Kind().Name
	d := skill.TranscriptDigestKind(kind, v.Rounds)
	a := &Attestation{
		Issuer: issuer, Subject: subject,
		Accepted: v.Accepted, Reason: v.Reason, FailedRound: v.FailedRound,
		Nonce:            append([]byte(nil), nonce...),
		TranscriptDigest: d[:],
		Policy: PolicySummary{
			Rounds: p.Rounds, DerivedTau: p.DeriveTau, Alpha: p.Alpha,
			Total: p.Total, RTTCredit: p.RTTCredit,
		},
		ChallengeDomain: v.Domain,
		SetID:           v.SetID,
		IssuedAt:        now.UTC().Truncate(time.Second),
		ExpiresAt:       now.UTC().Truncate(time.Second).Add(ttl),
		SpecVersion:     SpecVersion,
		Kind:            skill.WireKind(kind), // omitted for narratives
	}
	if set := s.Set(); set != nil {
		a.Provenance = RecordedProvenance(set.Provenance)
	}
	if !p.DeriveTau {
		a.Policy.Tau = p.Tau
		a.Policy.Alpha = 0
	}
	for _, r := range v.Rounds {
		a.Rounds = append(a.Rounds, RoundTiming{Round: r.Round, Budget: r.Budget, Effective: r.Effective, NarrativeTokens: r.NarrativeTokens, Correct: r.Correct})
	}
	return a
}
