package httpgw

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// audit-81: the verify route's cache named envelopes by the SHA-256 of
// their bytes, so one record in 20 variants (an unknown field appended,
// which the decoder skips) cost 20 signature checks, each one of the
// prefix's and the door's tokens spent on a check the sender never paid
// a signature for. The cache now names the signed record: 1 check.
func TestVerifyRouteChecksVariantsOnce(t *testing.T) {
	g, _, base := fakeDoor(t, nil)
	key, issuer := testutil.NewKey(t)
	_, subject := testutil.NewKey(t)
	nonce, digest := make([]byte, protocol.NonceBytes), make([]byte, protocol.DigestBytes)
	_, _ = rand.Read(nonce)
	_, _ = rand.Read(digest)
	now := time.Now().UTC().Truncate(time.Second)
	a := &protocol.Attestation{
		Issuer: issuer, Subject: subject, Accepted: true, Reason: skill.ReasonOK, Nonce: nonce, TranscriptDigest: digest,
		Policy:          protocol.PolicySummary{Rounds: 1, Tau: 15 * time.Second, Total: 2 * time.Minute, RTTCredit: 500 * time.Millisecond},
		ChallengeDomain: "test", SetID: "set", IssuedAt: now, ExpiresAt: now.Add(time.Hour),
		SpecVersion: protocol.SpecVersion, Provenance: skill.Provenance{Source: skill.SourceProcedural},
		Rounds: []protocol.RoundTiming{{Round: 1, Budget: 15 * time.Second, Effective: time.Second, NarrativeTokens: 500, Correct: true}},
	}
	env, err := protocol.Seal(a, key)
	if err != nil {
		t.Fatal(err)
	}
	const variants = 20
	for i := range variants {
		v := append([]byte(nil), env...)
		v = protowire.AppendTag(v, 15, protowire.VarintType)
		v = protowire.AppendVarint(v, uint64(i+1))
		resp, err := http.Post(base+"/v1/attestations/verify", "application/json",
			strings.NewReader(`{"attestation":"`+base64.StdEncoding.EncodeToString(v)+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("variant %d: status %d", i, resp.StatusCode)
		}
	}
	if n := g.verified.Checked(); n != 1 {
		t.Fatalf("%d signature checks for one record verified in %d variants, want 1", n, variants)
	}
}
