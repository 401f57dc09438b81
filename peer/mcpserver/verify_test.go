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
