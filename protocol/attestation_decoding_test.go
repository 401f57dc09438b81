package protocol_test

import (
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/acaptcha/acaptcha/protocol"
)

// TestAttestationProto3Decoding pins how a payload is decoded where
// proto3 encodings differ from what an issuer writes (attestation.md §3,
// "Decoding"): every verifier must read these alike, or a record valid
// on one node is malformed on another.
func TestAttestationProto3Decoding(t *testing.T) {
	a, key, _ := attestFixture(t)
	base := mustPayload(t, a)
	for _, tc := range []struct {
		name  string
		extra func(b []byte) []byte // appended after the issuer's fields: a later value wins
		check func(t *testing.T, r *protocol.Attestation)
		fail  bool
	}{
		{"uint32 above 2^32 is cut to its low 32 bits", func(b []byte) []byte {
			b = protowire.AppendTag(b, 5, protowire.VarintType)
			return protowire.AppendVarint(b, 1<<32) // failed_round 0
		}, func(t *testing.T, r *protocol.Attestation) {
			if r.FailedRound != 0 {
				t.Errorf("failed_round %d", r.FailedRound)
			}
		}, false},
		{"bool is any non-zero varint", func(b []byte) []byte {
			b = protowire.AppendTag(b, 3, protowire.VarintType)
			return protowire.AppendVarint(b, 1<<40)
		}, func(t *testing.T, r *protocol.Attestation) {
			if !r.Accepted {
				t.Error("accepted false")
			}
		}, false},
		{"known field with another wire type is an unknown field", func(b []byte) []byte {
			b = protowire.AppendTag(b, 4, protowire.VarintType) // reason as a varint
			return protowire.AppendVarint(b, 7)
		}, func(t *testing.T, r *protocol.Attestation) {
			if r.Reason != "ok" {
				t.Errorf("reason %q", r.Reason)
			}
		}, false},
		{"unknown group is skipped", func(b []byte) []byte {
			b = protowire.AppendTag(b, 99, protowire.StartGroupType)
			b = protowire.AppendTag(b, 1, protowire.VarintType)
			b = protowire.AppendVarint(b, 5)
			return protowire.AppendTag(b, 99, protowire.EndGroupType)
		}, nil, false},
		{"a message field given twice is merged", func(b []byte) []byte {
			var p []byte
			p = protowire.AppendTag(p, 6, protowire.VarintType) // rtt_credit_ms
			p = protowire.AppendVarint(p, 123)
			b = protowire.AppendTag(b, 9, protowire.BytesType)
			return protowire.AppendBytes(b, p)
		}, func(t *testing.T, r *protocol.Attestation) {
			if r.Policy.RTTCredit.Milliseconds() != 123 || r.Policy.Rounds != a.Policy.Rounds {
				t.Errorf("policy %+v", r.Policy)
			}
		}, false},
		{"a scalar given twice takes the last", func(b []byte) []byte {
			b = protowire.AppendTag(b, 10, protowire.BytesType)
			return protowire.AppendString(b, "genomics")
		}, func(t *testing.T, r *protocol.Attestation) {
			if r.ChallengeDomain != "genomics" {
				t.Errorf("domain %q", r.ChallengeDomain)
			}
		}, false},
		{"a ten-byte varint whose last byte exceeds 1 is malformed", func(b []byte) []byte {
			b = protowire.AppendTag(b, 17, protowire.VarintType)
			return append(b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02)
		}, nil, true},
		{"a varint over ten bytes is malformed", func(b []byte) []byte {
			b = protowire.AppendTag(b, 17, protowire.VarintType)
			return append(b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)
		}, nil, true},
		{"a ten-byte varint whose last byte is 1 is read", func(b []byte) []byte {
			b = protowire.AppendTag(b, 17, protowire.VarintType)
			return append(b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)
		}, nil, false},
		{"a non-minimal varint is read by its value", func(b []byte) []byte {
			b = protowire.AppendTag(b, 3, protowire.VarintType) // accepted, 1 padded to two bytes
			return append(b, 0x81, 0x00)
		}, func(t *testing.T, r *protocol.Attestation) {
			if !r.Accepted {
				t.Error("accepted false")
			}
		}, false},
		{"a non-minimal tag is read by its value", func(b []byte) []byte {
			b = append(b, 0xd2, 0x80, 0x00) // field 10 (challenge_domain), bytes, tag padded to three bytes
			return protowire.AppendString(b, "genomics")
		}, func(t *testing.T, r *protocol.Attestation) {
			if r.ChallengeDomain != "genomics" {
				t.Errorf("domain %q", r.ChallengeDomain)
			}
		}, false},
		{"field number 0 is malformed", func(b []byte) []byte { return append(b, 0x00, 0x01) }, nil, true},
		{"the largest field number is skipped", func(b []byte) []byte {
			b = protowire.AppendTag(b, protowire.MaxValidNumber, protowire.VarintType)
			return protowire.AppendVarint(b, 1)
		}, nil, false},
		{"a field number above the largest is malformed", func(b []byte) []byte {
			return append(b, 0x80, 0x80, 0x80, 0x80, 0x10, 0x01) // tag 2^32: field 2^29, varint
		}, nil, true},
		{"wire type 6 is malformed", func(b []byte) []byte { return append(b, 0x8e, 0x01, 0x00) }, nil, true},
		{"wire type 7 is malformed", func(b []byte) []byte { return append(b, 0x8f, 0x01, 0x00) }, nil, true},
		{"a group closed by another field's end tag is malformed", func(b []byte) []byte {
			b = protowire.AppendTag(b, 100, protowire.StartGroupType)
			return protowire.AppendTag(b, 101, protowire.EndGroupType)
		}, nil, true},
		{"an end-group tag without its start is malformed", func(b []byte) []byte {
			return protowire.AppendTag(b, 100, protowire.EndGroupType)
		}, nil, true},
		{"an unterminated group is malformed", func(b []byte) []byte {
			return protowire.AppendTag(b, 100, protowire.StartGroupType)
		}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := attestSealRaw(t, rawAttestRecord(tc.extra(append([]byte(nil), base...))), key)
			r, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{Now: a.IssuedAt})
			if tc.fail {
				if protocol.AttestationErrorCode(err) != "malformed" {
					t.Fatalf("err %v, want malformed", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

// TestAttestationTimesBeyondGoTime: issued_at and expires_at are int64 Unix
// seconds compared as such (attestation.md §6 steps 11 and 12). Go's
// time.Time cannot hold a Unix second above about 2^63 − 6.2·10^10 and
// wrapped: an expires_at of 2^63 − 1 read as expired, and an issued_at of
// 2^63 − 2 as expired instead of not yet valid. A second implementation with
// 64-bit seconds found both (the record is valid, and not_yet_valid).
func TestAttestationTimesBeyondGoTime(t *testing.T) {
	a, key, _ := attestFixture(t)
	base := mustPayload(t, a)
	for _, tc := range []struct {
		name            string
		issued, expires int64
		want            string
	}{
		{"expires_at 2^63-1 is valid", 0, math.MaxInt64, ""},
		{"expires_at just past Go's range is valid", 0, math.MaxInt64 - 62135596799, ""},
		{"issued_at 2^63-2 is not yet valid", math.MaxInt64 - 1, math.MaxInt64, "not_yet_valid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := append([]byte(nil), base...)
			if tc.issued != 0 {
				b = protowire.AppendTag(b, 12, protowire.VarintType)
				b = protowire.AppendVarint(b, uint64(tc.issued))
			}
			b = protowire.AppendTag(b, 13, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(tc.expires))
			env := attestSealRaw(t, rawAttestRecord(b), key)
			_, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{Now: a.IssuedAt.Add(time.Hour)})
			if got := protocol.AttestationErrorCode(err); got != tc.want {
				t.Fatalf("error %v (code %q), want %q", err, got, tc.want)
			}
		})
	}
}
