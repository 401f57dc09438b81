package mcpserver_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/peer/mcpserver"
)

// TestDecodeRecordHTTPDoorShapes: verify_attestation's record may be "a
// JSON object holding it"; the HTTP door's result, session object and
// verify request hold the envelope as attestation beside record, a JSON
// view (spec/http.md §4.5, §4.6). On 809b1b3 each was refused ("field
// record is not a string", or "holds no signed envelope").
func TestDecodeRecordHTTPDoorShapes(t *testing.T) {
	env := []byte("\x0a\x24 some envelope bytes \x00\xff")
	b64 := base64.StdEncoding.EncodeToString(env)
	view := `{"issuer":"12D3KooW","accepted":true}`
	for _, tc := range []struct {
		name, in string
	}{
		{"door result", `{"accepted":true,"verdict":"ACCEPTED","attestation":"` + b64 + `","record":` + view + `}`},
		{"door session", `{"session_id":"s","state":"done","result":{"attestation":"` + b64 + `","record":` + view + `}}`},
		{"door error body", `{"code":"bad_probe","message":"m","session":{"state":"done","result":{"attestation":"` + b64 + `"}}}`},
		{"door verify request", `{"attestation":"` + b64 + `","require_source":"llm"}`},
		{"CLI verify --json", `{"ok":true,"attestation":` + view + `,"envelope_hex":"` + hex.EncodeToString(env) + `"}`},
		{"MCP view", `{"record":"` + b64 + `"}`},
	} {
		got, err := mcpserver.DecodeRecord(tc.in)
		if err != nil || !bytes.Equal(got, env) {
			t.Errorf("%s: %x, %v; want the envelope", tc.name, got, err)
		}
	}
	for _, in := range []string{
		`{"ok":true,"record":` + view + `}`,
		`{"result":{"accepted":false,"verdict":"INCONCLUSIVE"}}`,
		`{"attestation":null}`,
	} {
		if _, err := mcpserver.DecodeRecord(in); err == nil || !strings.Contains(err.Error(), "no signed envelope") {
			t.Errorf("%s: error %v, want one saying it holds no signed envelope", in, err)
		}
	}
	if _, err := mcpserver.DecodeRecord(`{"attestation":42}`); err == nil || !strings.Contains(err.Error(), "not a string") {
		t.Errorf("attestation 42: error %v, want one saying it is not a string", err)
	}
}

// A JSON array (what `acaptcha attestations list --json` and
// list_attestations print) was read as base64 or hex and refused as
// "record is neither base64 nor hex" (the CLI, reading it as raw bytes:
// "envelope: proto: cannot parse invalid wire-format data"). A
// one-element array is its element; a longer one is refused by name.
func TestDecodeRecordArray(t *testing.T) {
	env := []byte{0x0a, 0x24, 0x08, 0x01}
	one := `[{"key":"k","direction":"issued","envelope_hex":"` + hex.EncodeToString(env) + `"}]`
	if got, err := mcpserver.DecodeRecord(one); err != nil || !bytes.Equal(got, env) {
		t.Errorf("one-element array: %x, %v", got, err)
	}
	two := `[{"envelope_hex":"00"},{"envelope_hex":"01"}]`
	if _, err := mcpserver.DecodeRecord(two); err == nil || !strings.Contains(err.Error(), "array of 2") {
		t.Errorf("two-element array: %v", err)
	}
	for _, in := range []string{`[]`, `[1]`, `[`} {
		if _, err := mcpserver.DecodeRecord(in); err == nil || !strings.Contains(err.Error(), "array") {
			t.Errorf("%s: %v", in, err)
		}
	}
}
