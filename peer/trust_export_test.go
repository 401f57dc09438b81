package peer

import (
	"crypto/rand"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// Test hooks for the external tests of trust, gossip and presentation.

// SetTrustClock makes n's admission decisions use now.
func SetTrustClock(n *Node, now func() time.Time) { n.trust.now.Store(&now) }

// LearnEnvelope verifies env and learns it as if it came via from.
func LearnEnvelope(n *Node, env []byte, via Via, from peer.ID) (string, error) {
	a, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{Now: n.trustNow()})
	if err != nil {
		return "", err
	}
	return n.learn(a, env, via, from, "").String(), nil
}

// MakeTestAttestation builds a well-formed attestation of subject by the
// holder of key: accepted (three correct rounds) or rejected (wrong answer
// in round 1), issued at issued and valid for ttl, on challenges from a
// hybrid source (which the default policy accepts).
func MakeTestAttestation(key crypto.PrivKey, subject peer.ID, accepted bool, issued time.Time, ttl time.Duration) *protocol.Attestation {
	return MakeTestAttestationFrom(key, subject, accepted, issued, ttl, skill.SourceHybrid)
}

// MakeTestAttestationFrom is MakeTestAttestation on challenges from src
// (skill.SourceUnknown: a record that names no source).
func MakeTestAttestationFrom(key crypto.PrivKey, subject peer.ID, accepted bool, issued time.Time, ttl time.Duration, src skill.SourceKind) *protocol.Attestation {
	issuer, err := peer.IDFromPrivateKey(key)
	if err != nil {
		panic(err)
	}
	nonce, digest := make([]byte, protocol.NonceBytes), make([]byte, protocol.DigestBytes)
	_, _ = rand.Read(nonce)
	_, _ = rand.Read(digest)
	a := &protocol.Attestation{
		Issuer: issuer, Subject: subject, Accepted: accepted, Reason: skill.ReasonOK,
		Nonce: nonce, TranscriptDigest: digest,
		Policy:          protocol.PolicySummary{Rounds: 3, Tau: 15 * time.Second, Total: 2 * time.Minute, RTTCredit: 500 * time.Millisecond},
		ChallengeDomain: "test", SetID: "set",
		IssuedAt: issued.UTC().Truncate(time.Second), ExpiresAt: issued.UTC().Truncate(time.Second).Add(ttl),
		SpecVersion: protocol.SpecVersion,
		Provenance:  skill.Provenance{Source: src},
	}
	if accepted {
		for i := 1; i <= 3; i++ {
			a.Rounds = append(a.Rounds, protocol.RoundTiming{Round: i, Budget: 15 * time.Second, Effective: time.Second, NarrativeTokens: 500, Correct: true})
		}
	} else {
		a.Reason, a.FailedRound = skill.ReasonWrongAnswer, 1
		a.Rounds = []protocol.RoundTiming{{Round: 1, Budget: 15 * time.Second, Effective: time.Second, NarrativeTokens: 500}}
	}
	return a
}

// SealTest seals a test attestation (hybrid source), panicking on failure.
func SealTest(key crypto.PrivKey, subject peer.ID, accepted bool, issued time.Time, ttl time.Duration) []byte {
	return SealTestFrom(key, subject, accepted, issued, ttl, skill.SourceHybrid)
}

// SealTestFrom seals a test attestation on challenges from src.
func SealTestFrom(key crypto.PrivKey, subject peer.ID, accepted bool, issued time.Time, ttl time.Duration, src skill.SourceKind) []byte {
	env, err := protocol.Seal(MakeTestAttestationFrom(key, subject, accepted, issued, ttl, src), key)
	if err != nil {
		panic(err)
	}
	return env
}

// NeedsChallenge exposes first contact's decision for p at now.
func NeedsChallenge(n *Node, p peer.ID, now time.Time) (bool, string) {
	return n.needsChallenge(p, now)
}

// IssueEnvelope stores env as an attestation n issued and indexes it, as
// a finished verifier session would (without publishing it).
func IssueEnvelope(n *Node, env []byte) error {
	a, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{Issuer: n.ID(), AllowExpired: true})
	if err != nil {
		return err
	}
	if err := n.store.Put(Issued, env, a); err != nil {
		return err
	}
	n.indexIssued(a)
	return nil
}

// PruneExpired runs the node's prune of its store's expired attestations
// (the janitor's, at start and hourly) at now.
func PruneExpired(n *Node, now time.Time) { n.pruneExpired(now) }
