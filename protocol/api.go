// Package protocol is the libp2p wire protocol of acaptcha: varint-delimited
// protobuf frames over a stream opened by the verifier, the RTT probe, the
// verifier and prover stream handlers, and the signed attestation record.
// See spec/protocol.md and spec/attestation.md.
package protocol

import (
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/skill"
)

// ID is the protocol ID of the attestation protocol. The stream opener is
// the verifier.
const ID = "/acaptcha/attest/1.0.0"

// ServiceName names the protocol's resource-manager scope.
const ServiceName = "acaptcha.attest"

// SpecVersion is the version of the wire and record format this package
// implements, carried in every hello and attestation.
const SpecVersion = "1.0.0"

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
