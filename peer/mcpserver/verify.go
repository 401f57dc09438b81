package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// maxRecordChars caps the record argument: an envelope is at most
// protocol.MaxEnvelopeBytes, and hex or base64 (inside JSON) inflate it.
const maxRecordChars = 4 * protocol.MaxEnvelopeBytes

// VerifyInput is verify_attestation's input.
type VerifyInput struct {
	Record string `json:"record" jsonschema:"the signed envelope: base64 or hex, or a JSON object holding it as record, envelope_base64, envelope_hex or attestation (the HTTP door's result or session)"`
	// RequireSource is a pointer, as the HTTP door's verify route takes
	// it (http.md §4.6): absent or null means any; a string, empty
	// included, must name a source or any (an empty one, from an unset
	// variable in the caller's template, would widen the check without a
	// word).
	RequireSource *string `json:"require_source,omitempty" jsonschema:"refuse unless the challenges came from a source ranked at least this: procedural, corpus, hybrid, llm or any (leave it out for any)"`
	AnyVerdict    bool    `json:"any_verdict,omitempty" jsonschema:"ok for any valid record, whatever its verdict (default: ok only when ACCEPTED)"`
	Subject       string  `json:"subject,omitempty" jsonschema:"expected subject peer ID"`
	Issuer        string  `json:"issuer,omitempty" jsonschema:"expected issuer peer ID"`
	AllowExpired  bool    `json:"allow_expired,omitempty" jsonschema:"accept an expired record (audits)"`
}

// VerifyOutput is verify_attestation's output; its fields mirror
// `acaptcha attestations verify --json`.
type VerifyOutput struct {
	// OK is what the CLI's exit status 0 means: valid, and accepted
	// unless any_verdict.
	OK                 bool           `json:"ok" jsonschema:"valid, and ACCEPTED unless any_verdict (the CLI's exit status 0)"`
	Valid              bool           `json:"valid" jsonschema:"signature, issuer key, subject, issuer, validity window, spec version and source all check"`
	Accepted           bool           `json:"accepted"`
	Verdict            string         `json:"verdict,omitempty" jsonschema:"ACCEPTED, REJECTED or INCONCLUSIVE (valid records only)"`
	Reason             string         `json:"reason,omitempty"`
	SourceBelowMinimum bool           `json:"source_below_minimum" jsonschema:"signed and valid, but its challenge source ranks below require_source"`
	Error              string         `json:"error,omitempty" jsonschema:"why the record is not valid, or why ok is false"`
	ErrorCode          string         `json:"error_code,omitempty" jsonschema:"stable code of error: too_large, malformed, bad_signature, unsupported_version, issuer_mismatch, subject_mismatch, not_yet_valid, expired, source_below_minimum (spec/attestation.md §6), or not_accepted"`
	Attestation        map[string]any `json:"attestation,omitempty"`
}

func (s *Server) verifyAttestation(_ context.Context, req *mcp.CallToolRequest, in VerifyInput) (*mcp.CallToolResult, *VerifyOutput, error) {
	opts := protocol.VerifyOptions{AllowExpired: in.AllowExpired}
	var err error
	if in.RequireSource != nil && !strings.EqualFold(strings.TrimSpace(*in.RequireSource), "any") {
		if opts.MinSource, err = skill.ParseSourceKind(*in.RequireSource); err != nil {
			return nil, nil, fmt.Errorf("require_source: %w, or any", err)
		}
	}
	if in.Subject != "" {
		if opts.Subject, err = lpeer.Decode(in.Subject); err != nil {
			return nil, nil, fmt.Errorf("subject %q: %w", in.Subject, err)
		}
	}
	if in.Issuer != "" {
		if opts.Issuer, err = lpeer.Decode(in.Issuer); err != nil {
			return nil, nil, fmt.Errorf("issuer %q: %w", in.Issuer, err)
		}
	}
	if len(in.Record) > maxRecordChars {
		// An oversized record is an invalid record, as in the CLI.
		return nil, &VerifyOutput{Error: fmt.Sprintf("record of %d characters: larger than the cap (%d)", len(in.Record), maxRecordChars),
			ErrorCode: protocol.AttestationErrorCode(protocol.ErrTooLarge)}, nil
	}
	data, err := DecodeRecord(in.Record)
	if err != nil {
		// Text that holds no envelope is a malformed record, an outcome
		// about the record as `acaptcha attestations verify` prints it
		// (exit 1), not a failed call: the caller's client then reads
		// every record's fate in the same fields (ok, valid, verdict,
		// error_code) and keeps tool errors for its own mistakes.
		err = fmt.Errorf("%w: %v", protocol.ErrMalformed, err)
		return nil, &VerifyOutput{Error: err.Error(), ErrorCode: protocol.AttestationErrorCode(err)}, nil
	}
	// A record not checked before costs its signature check in the
	// rate of a caller beyond loopback, priced by its key as gossip and
	// the HTTP door's verify route price it (an RSA-8192 key 64 Ed25519
	// checks); the call's request paid one. Without it a fresh or forged
	// record under an RSA-8192 key cost its sender one request and the
	// node 2.4 ms.
	if cost := s.verified.Cost(data); cost > 1 && !s.chargeVerify(req, cost-1) {
		return nil, nil, fmt.Errorf("verifying a record signed with this key costs %d requests' worth of this network's rate (or of all callers' beyond loopback): retry later", cost)
	}
	at, _, err := s.verified.Verify(data, opts)
	if err != nil {
		return nil, &VerifyOutput{Error: err.Error(), ErrorCode: protocol.AttestationErrorCode(err), SourceBelowMinimum: errors.Is(err, protocol.ErrSourceBelowMinimum)}, nil
	}
	out := &VerifyOutput{
		Valid: true, Accepted: at.Accepted, Verdict: verdictWord(at.Accepted, at.Reason), Reason: string(at.Reason),
		Attestation: attestationMap(at),
	}
	out.OK = at.Accepted || in.AnyVerdict
	if !out.OK {
		out.Error = fmt.Sprintf("valid signature, but the record's verdict is %s (%s), not an acceptance", out.Verdict, at.Reason)
		out.ErrorCode = "not_accepted"
	}
	return nil, out, nil
}

// DecodeRecord turns a textual record into envelope bytes: hex (what
// `acaptcha attestations export | xxd -p` and the CLI's JSON give), base64
// (standard or URL, padded or not), or a JSON object carrying either: the
// CLI's and the MCP tools' output (record, envelope_base64, envelope_hex),
// the HTTP door's result and verify request (attestation), or the door's
// session object (its result's attestation).
func DecodeRecord(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("record is empty: give the signed envelope in base64 or hex")
	}
	if strings.HasPrefix(s, "{") {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(s), &obj); err != nil {
			return nil, fmt.Errorf("record looks like JSON but does not parse: %w", err)
		}
		return decodeRecordObject(obj, 0)
	}
	if strings.HasPrefix(s, "[") {
		// A list (acaptcha attestations list --json, list_attestations'
		// attestations): one record is its element; of more, which one
		// is meant is the caller's to say.
		var arr []json.RawMessage
		if err := json.Unmarshal([]byte(s), &arr); err != nil {
			return nil, fmt.Errorf("record looks like a JSON array but does not parse: %w", err)
		}
		if len(arr) != 1 {
			return nil, fmt.Errorf("record is a JSON array of %d records (a list's output): give one of them, e.g. acaptcha attestations export KEY --json", len(arr))
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(arr[0], &obj); err != nil || obj == nil {
			return nil, errors.New("record is a JSON array whose element is not an object holding a signed envelope")
		}
		return decodeRecordObject(obj, 0)
	}
	// Line breaks and spaces (xxd -p, base64 -w 76) are no part of
	// either encoding: drop them all before trying hex, whose alphabet
	// base64 would also take (and decode to garbage).
	s = strings.Join(strings.Fields(s), "")
	if b, err := hex.DecodeString(s); err == nil {
		return b, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("record is neither base64 nor hex")
}

// recordFields are the members of a JSON object that may hold the signed
// envelope as a string, in the order they are tried. A member of the same
// name holding an object is a display view (the HTTP door's record, the
// CLI's attestation) and is passed over.
var recordFields = []string{"record", "envelope_base64", "record_base64", "envelope_hex", "envelope", "attestation"}

// decodeRecordObject finds the envelope in obj, or in the HTTP door's
// session object (result) or error body (session) it nests.
func decodeRecordObject(obj map[string]json.RawMessage, depth int) ([]byte, error) {
	for _, k := range recordFields {
		raw, ok := obj[k]
		if !ok {
			continue
		}
		if t := bytes.TrimSpace(raw); len(t) > 0 && (t[0] == '{' || string(t) == "null") {
			continue
		}
		var inner string
		if err := json.Unmarshal(raw, &inner); err != nil {
			return nil, fmt.Errorf("record JSON: field %s is not a string", k)
		}
		return DecodeRecord(inner)
	}
	if depth < 2 {
		for _, k := range []string{"result", "session"} {
			var nested map[string]json.RawMessage
			if raw, ok := obj[k]; !ok || json.Unmarshal(raw, &nested) != nil || nested == nil {
				continue
			}
			if b, err := decodeRecordObject(nested, depth+1); err == nil {
				return b, nil
			}
		}
	}
	return nil, errors.New("record JSON holds no signed envelope (record, attestation, envelope_base64 or envelope_hex, or an HTTP session's result.attestation): a display view alone cannot be verified, it carries no signature")
}
