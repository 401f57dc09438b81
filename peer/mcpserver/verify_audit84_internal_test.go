package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// audit84: verify_attestation read require_source "" or " " as no
// minimum: a record on procedural challenges came back ok (valid,
// accepted), where the HTTP door's verify route refuses an empty or blank
// require_source (http.md §4.6: an empty value from an unset variable in
// the caller's template widens the check without a word) and the CLI's
// --require-source " " is a usage error. Absent (or null) means any; a
// string must name a source or any.
func TestVerifyAttestationAudit84EmptyRequireSource(t *testing.T) {
	key, issuer := testutil.NewKey(t)
	_, subject := testutil.NewKey(t)
	now := time.Now().UTC().Truncate(time.Second)
	a := &protocol.Attestation{
		Issuer: issuer, Subject: subject, Accepted: true, Reason: skill.ReasonOK,
		Nonce: make([]byte, protocol.NonceBytes), TranscriptDigest: make([]byte, protocol.DigestBytes),
		Policy:   protocol.PolicySummary{Rounds: 1, Tau: 15 * time.Second, Total: time.Minute},
		Rounds:   []protocol.RoundTiming{{Round: 1, Budget: 15 * time.Second, Effective: time.Second, Correct: true}},
		IssuedAt: now, ExpiresAt: now.Add(time.Hour), SpecVersion: protocol.SpecVersion,
		Provenance: skill.Provenance{Source: skill.SourceProcedural},
	}
	_, _ = rand.Read(a.Nonce)
	env, err := protocol.Seal(a, key)
	if err != nil {
		t.Fatal(err)
	}
	rec := hex.EncodeToString(env)
	s := &Server{}
	str := func(v string) *string { return &v }
	for _, rs := range []string{"", " ", "\t"} {
		_, out, err := s.verifyAttestation(context.Background(), nil, VerifyInput{Record: rec, RequireSource: str(rs)})
		if err == nil {
			t.Errorf("require_source %q: %+v, want an error (a string must name a source or any)", rs, out)
		}
	}
	for _, rs := range []*string{nil, str("any"), str(" ANY "), str("procedural")} {
		_, out, err := s.verifyAttestation(context.Background(), nil, VerifyInput{Record: rec, RequireSource: rs})
		if err != nil || out == nil || !out.OK {
			t.Errorf("require_source %v: %+v, %v; want ok", rs, out, err)
		}
	}
	_, out, err := s.verifyAttestation(context.Background(), nil, VerifyInput{Record: rec, RequireSource: str("hybrid")})
	if err != nil || out == nil || out.OK || !out.SourceBelowMinimum {
		t.Errorf("require_source hybrid: %+v, %v; want refused below the minimum", out, err)
	}
}
