package httpgw

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// The verify route checked the signature of every request, the same
// envelope replayed included (10 a second per prefix, 200 in all: with
// an RSA-8192 key, 2.4 ms each, half a core for nothing the sender
// computed). It now remembers the envelopes it verified; the subject,
// issuer, time and source are checked on each request.
func TestVerifyRouteChecksAnEnvelopeOnce(t *testing.T) {
	g, _, base := fakeDoor(t, nil)
	key, issuer := testutil.NewKey(t)
	_, subject := testutil.NewKey(t)
	env := sealedTestRecord(t, key, issuer, subject)
	b64 := base64.StdEncoding.EncodeToString(env)
	verify := func(extra string) verifyResponse {
		t.Helper()
		resp, err := http.Post(base+"/v1/attestations/verify", "application/json", strings.NewReader(`{"attestation":"`+b64+`"`+extra+`}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out verifyResponse
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %v", resp.StatusCode, err)
		}
		return out
	}
	for range 5 {
		if out := verify(""); !out.OK {
			t.Fatalf("verify: %+v", out)
		}
	}
	if out := verify(`,"subject":"` + issuer.String() + `"`); out.Valid || out.ErrorCode != protocol.AttestationErrorCode(protocol.ErrSubjectMismatch) {
		t.Fatalf("another subject: %+v", out)
	}
	if out := verify(`,"require_source":"llm"`); out.Valid || !out.SourceBelowMinimum {
		t.Fatalf("a source below the minimum: %+v", out)
	}
	// ASCII white space trimmed and ASCII case ignored; null is any.
	if out := verify(`,"require_source":" LLM\t"`); out.Valid || !out.SourceBelowMinimum {
		t.Fatalf("require_source \" LLM\\t\": %+v", out)
	}
	if out := verify(`,"require_source":null`); !out.OK {
		t.Fatalf("require_source null: %+v", out)
	}
	if n := g.verified.Checked(); n != 1 {
		t.Fatalf("%d signature checks for one envelope verified 9 times, want 1", n)
	}
}

// The verify route ignored members it did not know, so a misspelt
// option ("requre_source", or "Require_Source", which encoding/json
// alone matches case-insensitively) was dropped, or taken, silently: a
// procedural-backed record passed a check the caller meant to require
// llm. The route now refuses any member it does not know by its exact
// name (http.md 1.4.13, §4.6).
func TestVerifyRouteRefusesUnknownMembers(t *testing.T) {
	_, _, base := fakeDoor(t, nil)
	post := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post(base+"/v1/attestations/verify", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Code + ": " + e.Message
	}
	for _, body := range []string{
		`{"attestation":"AAAA","requre_source":"llm"}`,
		`{"attestation":"AAAA","Require_Source":"llm"}`,
		`{"attestation":"AAAA","subjekt":"12D3KooWxx"}`,
		`{"Attestation":"AAAA"}`,
	} {
		code, msg := post(body)
		if code != http.StatusBadRequest || !strings.HasPrefix(msg, CodeBadRequest+":") || !strings.Contains(msg, "unknown member") {
			t.Errorf("%s: %d %s, want 400 bad_request naming the unknown member", body, code, msg)
		}
	}
	// Every known member is taken (the record is refused as a record: 200).
	code, msg := post(`{"attestation":"AAAA","require_source":"any","any_verdict":true,"allow_expired":false}`)
	if code != http.StatusOK {
		t.Errorf("known members: %d %s, want 200", code, msg)
	}
}

// sealedTestRecord is an accepted record by issuer (key) about subject,
// valid for an hour from now, sealed.
func sealedTestRecord(t *testing.T, key crypto.PrivKey, issuer, subject peer.ID) []byte {
	t.Helper()
	nonce, digest := make([]byte, protocol.NonceBytes), make([]byte, protocol.DigestBytes)
	_, _ = rand.Read(nonce)
	_, _ = rand.Read(digest)
	now := time.Now().UTC().Truncate(time.Second)
	env, err := protocol.Seal(&protocol.Attestation{
		Issuer: issuer, Subject: subject, Accepted: true, Reason: skill.ReasonOK, Nonce: nonce, TranscriptDigest: digest,
		Policy:          protocol.PolicySummary{Rounds: 1, Tau: 15 * time.Second, Total: 2 * time.Minute, RTTCredit: 500 * time.Millisecond},
		ChallengeDomain: "test", SetID: "set", IssuedAt: now, ExpiresAt: now.Add(time.Hour),
		SpecVersion: protocol.SpecVersion, Provenance: skill.Provenance{Source: skill.SourceProcedural},
		Rounds: []protocol.RoundTiming{{Round: 1, Budget: 15 * time.Second, Effective: time.Second, NarrativeTokens: 500, Correct: true}},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	return env
}
