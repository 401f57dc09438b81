package mcpserver_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/peer/mcpserver"
)

// verify_attestation answers every record with a result a client can act
// on, as `acaptcha attestations verify --json` does: a record that is
// valid and ACCEPTED (ok), one that is valid but records another verdict
// (valid, not accepted, verdict REJECTED, error_code not_accepted), and
// one that is not valid (valid false and the error_code of the check it
// failed), text that is no record at all included (malformed). Before,
// text that decoded to no envelope (empty, neither base64 nor hex, JSON
// holding none) was a tool error, while the CLI printed it as an invalid
// record (malformed, exit 1) and garbage that happened to decode was an
// invalid record: a client had to parse error text to tell "this record
// is bad" from "my call was wrong". Bad options stay tool errors.
func TestVerifyAttestationOutcomesDistinct(t *testing.T) {
	raw, err := os.ReadFile("../../spec/vectors/attestation.json")
	if err != nil {
		t.Fatal(err)
	}
	var vec struct {
		EnvelopeHex string `json:"envelope_hex"`
		Variants    []struct {
			Name        string `json:"name"`
			EnvelopeHex string `json:"envelope_hex"`
		} `json:"variants"`
	}
	if err := json.Unmarshal(raw, &vec); err != nil {
		t.Fatal(err)
	}
	var rejected string
	for _, v := range vec.Variants {
		if v.Name == "rejected_unanswered" {
			rejected = v.EnvelopeHex
		}
	}
	if rejected == "" || vec.EnvelopeHex == "" {
		t.Fatal("vectors lack the accepted record or rejected_unanswered")
	}
	f := newFixture(t, mcpserver.QueueConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	verify := func(args map[string]any) mcpserver.VerifyOutput {
		t.Helper()
		v, err := call[mcpserver.VerifyOutput](ctx, f.cs, "verify_attestation", args)
		if err != nil {
			t.Fatalf("verify_attestation %v: tool error %v, want a result", args, err)
		}
		return v
	}
	// The vectors' records expired in January 2026: allow_expired.
	if v := verify(map[string]any{"record": vec.EnvelopeHex, "allow_expired": true}); !v.OK || !v.Valid || !v.Accepted || v.Verdict != "ACCEPTED" || v.ErrorCode != "" {
		t.Errorf("accepted record: %+v", v)
	}
	if v := verify(map[string]any{"record": rejected, "allow_expired": true}); v.OK || !v.Valid || v.Accepted || v.Verdict != "REJECTED" || v.Reason == "" || v.ErrorCode != "not_accepted" {
		t.Errorf("rejected record: %+v", v)
	}
	if v := verify(map[string]any{"record": rejected, "allow_expired": true, "any_verdict": true}); !v.OK || !v.Valid || v.Verdict != "REJECTED" || v.ErrorCode != "" {
		t.Errorf("rejected record, any_verdict: %+v", v)
	}
	if v := verify(map[string]any{"record": vec.EnvelopeHex}); v.OK || v.Valid || v.ErrorCode != "expired" || v.Verdict != "" {
		t.Errorf("expired record: %+v", v)
	}
	for _, tc := range []struct{ record, says string }{
		{"", "empty"},
		{"   ", "empty"},
		{"!!!", "neither base64 nor hex"},
		{`{"issuer":"x"}`, "no signed envelope"},
		{`{"record":`, "does not parse"},
		{`[{"record":"00"},{"record":"01"}]`, "array of 2"},
	} {
		v := verify(map[string]any{"record": tc.record})
		if v.OK || v.Valid || v.Accepted || v.Verdict != "" || v.ErrorCode != "malformed" || !strings.Contains(v.Error, tc.says) {
			t.Errorf("record %q: %+v; want invalid, error_code malformed, error saying %q", tc.record, v, tc.says)
		}
	}
	// The caller's own mistakes are tool errors: nothing was checked.
	for _, args := range []map[string]any{
		{"record": "00", "require_source": "bogus"},
		{"record": "00", "subject": "not-a-peer"},
		{"record": "00", "issuer": "not-a-peer"},
	} {
		if _, err := call[mcpserver.VerifyOutput](ctx, f.cs, "verify_attestation", args); err == nil {
			t.Errorf("%v: a result, want a tool error", args)
		}
	}
}
