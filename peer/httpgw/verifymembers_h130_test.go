package httpgw

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// TestVerifyAnswerMembersH130 pins the verify route's answer as
// spec/http.md §4.6 (document 1.4.31) tabulates it: which members are
// present for an invalid record, a valid acceptance and a valid
// rejection, and the order of the body checks (require_source, then
// subject, then issuer, then a missing attestation).
func TestVerifyAnswerMembersH130(t *testing.T) {
	_, _, base := fakeDoor(t, nil)
	key, issuer := testutil.NewKey(t)
	_, subject := testutil.NewKey(t)
	accepted := sealedTestRecord(t, key, issuer, subject)
	nonce, digest := make([]byte, protocol.NonceBytes), make([]byte, protocol.DigestBytes)
	_, _ = rand.Read(nonce)
	now := time.Now().UTC().Truncate(time.Second)
	rejected, err := protocol.Seal(&protocol.Attestation{
		Issuer: issuer, Subject: subject, Reason: skill.ReasonWrongAnswer, FailedRound: 1, Nonce: nonce, TranscriptDigest: digest,
		Policy:          protocol.PolicySummary{Rounds: 1, Tau: 15 * time.Second, Total: 2 * time.Minute},
		ChallengeDomain: "test", SetID: "set", IssuedAt: now, ExpiresAt: now.Add(time.Hour), SpecVersion: protocol.SpecVersion,
		Rounds: []protocol.RoundTiming{{Round: 1, Budget: 15 * time.Second, Effective: time.Second}},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	post := func(body string) (int, map[string]json.RawMessage) {
		t.Helper()
		resp, err := http.Post(base+"/v1/attestations/verify", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return resp.StatusCode, m
	}
	b64 := base64.StdEncoding.EncodeToString
	members := func(m map[string]json.RawMessage) []string {
		var k []string
		for n := range m {
			k = append(k, n)
		}
		slices.Sort(k)
		return k
	}
	cases := []struct {
		name, body string
		want       []string
		ok, valid  string
		code       string
	}{
		{"acceptance", `{"attestation":"` + b64(accepted) + `"}`,
			[]string{"accepted", "ok", "reason", "record", "source_below_minimum", "valid", "verdict"}, "true", "true", ""},
		{"rejection, any_verdict", `{"attestation":"` + b64(rejected) + `","any_verdict":true}`,
			[]string{"accepted", "ok", "reason", "record", "source_below_minimum", "valid", "verdict"}, "true", "true", ""},
		{"rejection", `{"attestation":"` + b64(rejected) + `","any_verdict":null}`,
			[]string{"accepted", "error", "error_code", "ok", "reason", "record", "source_below_minimum", "valid", "verdict"}, "false", "true", `"not_accepted"`},
		{"below the minimum source (step 13)", `{"attestation":"` + b64(accepted) + `","require_source":"llm"}`,
			[]string{"accepted", "error", "error_code", "ok", "source_below_minimum", "valid"}, "false", "false", `"source_below_minimum"`},
		{"bad signature", `{"attestation":"` + b64(append(accepted[:len(accepted)-1:len(accepted)-1], accepted[len(accepted)-1]^1)) + `"}`,
			[]string{"accepted", "error", "error_code", "ok", "source_below_minimum", "valid"}, "false", "false", `"bad_signature"`},
	}
	for _, c := range cases {
		status, m := post(c.body)
		if status != http.StatusOK {
			t.Fatalf("%s: status %d", c.name, status)
		}
		if got := members(m); !slices.Equal(got, c.want) {
			t.Errorf("%s: members %v, want %v", c.name, got, c.want)
		}
		if string(m["ok"]) != c.ok || string(m["valid"]) != c.valid || string(m["error_code"]) != c.code {
			t.Errorf("%s: ok %s valid %s error_code %s", c.name, m["ok"], m["valid"], m["error_code"])
		}
	}
	if _, m := post(`{"attestation":"` + b64(accepted) + `","require_source":"llm"}`); string(m["source_below_minimum"]) != "true" {
		t.Errorf("step 13: source_below_minimum %s", m["source_below_minimum"])
	}
	// The order of the body checks.
	for _, c := range []struct{ body, code string }{
		{`{"require_source":"bogus","subject":"nope","issuer":"nope"}`, "bad_request"},
		{`{"subject":"nope","issuer":"nope"}`, "bad_peer_id"},
		{`{"subject":"` + subject.String() + `","issuer":"nope"}`, "bad_peer_id"},
		{`{"subject":"` + subject.String() + `","attestation":null}`, "bad_request"},
	} {
		status, m := post(c.body)
		if string(m["code"]) != `"`+c.code+`"` || status/100 != 4 {
			t.Errorf("%s: %d %s, want %s", c.body, status, m["code"], c.code)
		}
	}
}
