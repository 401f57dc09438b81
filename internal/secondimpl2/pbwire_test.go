// Package secondimpl2 is a second, independent implementation of the
// acaptcha specification (spec/), written from the spec text alone. It is
// test-only: it checks every vector of spec/vectors and interoperates with
// the reference implementation over loopback libp2p.
package secondimpl2

import (
	"errors"
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

var errDecode = errors.New("secondimpl2: does not decode")

// field is one field as read from the wire.
type field struct {
	num protowire.Number
	typ protowire.Type
	v   uint64 // varint / fixed values
	b   []byte // bytes (wire type 2)
}

// parseFields reads a whole message as proto3 does (attestation.md §3
// "Decoding"): groups and unknown fields skipped, non-minimal varints read
// by value; a truncated field, a varint over 10 bytes or above 2^64 - 1,
// a field number 0 or above 2^29 - 1, wire types 6 and 7, an end-group
// tag without its start and a length past the input fail.
func parseFields(b []byte) ([]field, error) {
	var out []field
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, errDecode
		}
		if num == 0 || num > protowire.MaxValidNumber {
			return nil, errDecode
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return nil, errDecode
			}
			f.v, b = v, b[m:]
		case protowire.Fixed64Type:
			v, m := protowire.ConsumeFixed64(b)
			if m < 0 {
				return nil, errDecode
			}
			f.v, b = v, b[m:]
		case protowire.Fixed32Type:
			v, m := protowire.ConsumeFixed32(b)
			if m < 0 {
				return nil, errDecode
			}
			f.v, b = uint64(v), b[m:]
		case protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return nil, errDecode
			}
			f.b, b = v, b[m:]
		case protowire.StartGroupType:
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return nil, errDecode
			}
			b = b[m:]
			continue // a group is never one of our fields
		default:
			return nil, errDecode
		}
		out = append(out, f)
	}
	return out, nil
}

// msg gives proto3 accessors over parsed fields: the last value of the
// field's own wire type wins, other wire types are unknown fields.
type msg []field

func (m msg) varint(n protowire.Number) (uint64, bool) {
	var v uint64
	ok := false
	for _, f := range m {
		if f.num == n && f.typ == protowire.VarintType {
			v, ok = f.v, true
		}
	}
	return v, ok
}

func (m msg) u32(n protowire.Number) uint32 { v, _ := m.varint(n); return uint32(v) }
func (m msg) u64(n protowire.Number) uint64 { v, _ := m.varint(n); return v }
func (m msg) i64(n protowire.Number) int64  { v, _ := m.varint(n); return int64(v) }
func (m msg) i32(n protowire.Number) int32  { v, _ := m.varint(n); return int32(v) }
func (m msg) boolean(n protowire.Number) bool {
	v, _ := m.varint(n)
	return v != 0
}

func (m msg) double(n protowire.Number) float64 {
	var v uint64
	for _, f := range m {
		if f.num == n && f.typ == protowire.Fixed64Type {
			v = f.v
		}
	}
	return math.Float64frombits(v)
}

func (m msg) bytes(n protowire.Number) ([]byte, bool) {
	var v []byte
	ok := false
	for _, f := range m {
		if f.num == n && f.typ == protowire.BytesType {
			v, ok = f.b, true
		}
	}
	return v, ok
}

// str is a string field; every occurrence must be valid UTF-8 (proto3).
func (m msg) str(n protowire.Number) (string, error) {
	var v []byte
	for _, f := range m {
		if f.num == n && f.typ == protowire.BytesType {
			if !utf8.Valid(f.b) {
				return "", errDecode
			}
			v = f.b
		}
	}
	return string(v), nil
}

// sub is a singular message field: the merge of its occurrences, which is
// the parse of their concatenation.
func (m msg) sub(n protowire.Number) (msg, bool, error) {
	var cat []byte
	ok := false
	for _, f := range m {
		if f.num == n && f.typ == protowire.BytesType {
			cat = append(cat, f.b...)
			ok = true
		}
	}
	if !ok {
		return nil, false, nil
	}
	fs, err := parseFields(cat)
	return msg(fs), true, err
}

// repeated is a repeated message field, one entry per occurrence.
func (m msg) repeated(n protowire.Number) ([]msg, error) {
	var out []msg
	for _, f := range m {
		if f.num == n && f.typ == protowire.BytesType {
			fs, err := parseFields(f.b)
			if err != nil {
				return nil, err
			}
			out = append(out, msg(fs))
		}
	}
	return out, nil
}

// enc is a proto3 encoder writing fields in the order called (callers
// call them in number order) and omitting defaults.
type enc []byte

func (e *enc) varint(n protowire.Number, v uint64) {
	if v == 0 {
		return
	}
	*e = protowire.AppendTag(*e, n, protowire.VarintType)
	*e = protowire.AppendVarint(*e, v)
}

func (e *enc) boolean(n protowire.Number, v bool) {
	if v {
		e.varint(n, 1)
	}
}

func (e *enc) bytes(n protowire.Number, v []byte) {
	if len(v) == 0 {
		return
	}
	*e = protowire.AppendTag(*e, n, protowire.BytesType)
	*e = protowire.AppendBytes(*e, v)
}

// message writes a nested message even when empty when force is set.
func (e *enc) message(n protowire.Number, v []byte, force bool) {
	if len(v) == 0 && !force {
		return
	}
	*e = protowire.AppendTag(*e, n, protowire.BytesType)
	*e = protowire.AppendBytes(*e, v)
}

func (e *enc) double(n protowire.Number, v float64) {
	if v == 0 {
		return
	}
	*e = protowire.AppendTag(*e, n, protowire.Fixed64Type)
	*e = protowire.AppendFixed64(*e, math.Float64bits(v))
}
