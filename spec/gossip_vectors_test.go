package spec

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/encoding/protowire"

	apeer "github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

var updateGossipVector = flag.Bool("update-gossip-msgid-vector", false, "rewrite spec/vectors/gossip_msgid.json")

type gossipIDVector struct {
	Description string `json:"description"`
	Cases       []struct {
		Name           string `json:"name"`
		Description    string `json:"description"`
		DataHex        string `json:"data_hex"`
		NamedBy        string `json:"named_by"` // "record" or "data"
		HashedInputHex string `json:"hashed_input_hex"`
		MessageIDHex   string `json:"message_id_hex"`
		SameIDAs       string `json:"same_id_as,omitempty"`
	} `json:"cases"`
	KeyUnits []struct {
		KeyType int `json:"key_type"`
		DataLen int `json:"data_len"`
		RSABits int `json:"rsa_bits,omitempty"`
		Units   int `json:"units"`
	} `json:"key_units"`
}

// specEnvelope is the part of an envelope the message ID reads, decoded
// from the text of trust.md §3.4 and attestation.md §3 "Decoding" (not
// with the reference's protobuf library).
type specEnvelope struct {
	keyType                      uint64
	keyData, ptype, payload, sig []byte
}

var errSpecDecode = errors.New("not an envelope")

// specFields reads protobuf fields; groups are skipped whole.
func specFields(b []byte, f func(num protowire.Number, typ protowire.Type, v uint64, data []byte)) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errSpecDecode
		}
		b = b[n:]
		var v uint64
		var data []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			data, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return errSpecDecode
		}
		b = b[n:]
		f(num, typ, v, data)
	}
	return nil
}

// specDecode: at most 8192 bytes; field 1 (merged over its occurrences)
// a PublicKey whose Type (int32: the varint's low 32 bits, 0 to 3) and
// Data are both present; fields 2, 3 and 5 the last of their values.
func specDecode(data []byte) (*specEnvelope, error) {
	if len(data) > 8192 {
		return nil, errSpecDecode
	}
	e := &specEnvelope{}
	var keys [][]byte
	err := specFields(data, func(num protowire.Number, typ protowire.Type, _ uint64, d []byte) {
		if typ != protowire.BytesType {
			return
		}
		switch num {
		case 1:
			keys = append(keys, d)
		case 2:
			e.ptype = d
		case 3:
			e.payload = d
		case 5:
			e.sig = d
		}
	})
	if err != nil || len(keys) == 0 {
		return nil, errSpecDecode
	}
	hasType, hasData := false, false
	for _, k := range keys {
		if err := specFields(k, func(num protowire.Number, typ protowire.Type, v uint64, d []byte) {
			switch {
			case num == 1 && typ == protowire.VarintType:
				e.keyType, hasType = uint64(int32(v)), true
			case num == 2 && typ == protowire.BytesType:
				e.keyData, hasData = d, true
			}
		}); err != nil {
			return nil, err
		}
	}
	if !hasType || !hasData || e.keyType > 3 {
		return nil, errSpecDecode
	}
	return e, nil
}

// specIDInput frames the fields as trust.md §3.4 says.
func specIDInput(e *specEnvelope) []byte {
	b := append([]byte("acaptcha gossip record"), 0)
	b = binary.AppendUvarint(b, e.keyType)
	for _, f := range [][]byte{e.keyData, e.ptype, e.payload, e.sig} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

// TestGossipMessageIDVector: the message IDs of spec/vectors/
// gossip_msgid.json are what trust.md §3.4 says (recomputed here from
// the text, with a decoder of this file) and what the Go node computes.
func TestGossipMessageIDVector(t *testing.T) {
	if *updateGossipVector {
		writeGossipVector(t)
	}
	var v gossipIDVector
	decodeVector(t, "gossip_msgid.json", &v)
	if len(v.Cases) < 12 || len(v.KeyUnits) < 6 {
		t.Fatalf("%d cases, %d key units", len(v.Cases), len(v.KeyUnits))
	}
	ids := map[string]string{}
	types := map[uint64]bool{}
	for _, c := range v.Cases {
		data, err := hex.DecodeString(c.DataHex)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := hex.DecodeString(c.MessageIDHex)
		var in []byte
		switch c.NamedBy {
		case "record":
			e, err := specDecode(data)
			if err != nil {
				t.Errorf("%s: named by its record, but %v", c.Name, err)
				continue
			}
			types[e.keyType] = true
			in = specIDInput(e)
		case "data":
			if _, err := specDecode(data); err == nil {
				t.Errorf("%s: named by its data, but it decodes as an envelope with a key", c.Name)
			}
			in = data
		default:
			t.Fatalf("%s: named_by %q", c.Name, c.NamedBy)
		}
		if c.NamedBy == "record" && hex.EncodeToString(in) != c.HashedInputHex || c.NamedBy == "data" && c.HashedInputHex != "" {
			t.Errorf("%s: hashed input differs from the rule", c.Name)
		}
		if sum := sha256.Sum256(in); !bytes.Equal(sum[:], want) {
			t.Errorf("%s: SHA-256 of the input is %x, vector %x", c.Name, sum, want)
		}
		if got := apeer.GossipMessageID(data); !bytes.Equal(got, want) {
			t.Errorf("%s: Go node's message ID %x, vector %x", c.Name, got, want)
		}
		if c.SameIDAs != "" && ids[c.SameIDAs] != c.MessageIDHex {
			t.Errorf("%s: ID differs from %s's", c.Name, c.SameIDAs)
		}
		ids[c.Name] = c.MessageIDHex
	}
	if len(types) != 4 {
		t.Errorf("record cases cover key types %v, want all four", types)
	}
	for _, k := range v.KeyUnits {
		b := 8 * max(0, k.DataLen-38)
		q := (b + 1023) / 1024
		want := map[int]int{0: max(1, q*q), 1: 1}[k.KeyType]
		if k.KeyType >= 2 {
			want = 2
		}
		if k.Units != want {
			t.Errorf("key type %d, %d bytes: vector says %d units, the rule %d", k.KeyType, k.DataLen, k.Units, want)
		}
	}
}

func writeGossipVector(t *testing.T) {
	t.Helper()
	issued := time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)
	subjectKey := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x20}, 32))
	subPub, err := crypto.UnmarshalEd25519PublicKey(subjectKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	subject, _ := peer.IDFromPublicKey(subPub)
	seal := func(key crypto.PrivKey) []byte {
		issuer, _ := peer.IDFromPrivateKey(key)
		a := &protocol.Attestation{
			Issuer: issuer, Subject: subject, Accepted: true, Reason: skill.ReasonOK,
			Nonce: bytes.Repeat([]byte{0xa0}, 32), TranscriptDigest: bytes.Repeat([]byte{0x2a}, 32),
			Policy:   protocol.PolicySummary{Rounds: 1, Tau: 15 * time.Second, Total: 2 * time.Minute},
			IssuedAt: issued, ExpiresAt: issued.Add(24 * time.Hour), SpecVersion: protocol.SpecVersion,
			Rounds:     []protocol.RoundTiming{{Round: 1, Budget: 15 * time.Second, Effective: 4 * time.Second, NarrativeTokens: 500, Correct: true}},
			Provenance: skill.Provenance{Source: skill.SourceHybrid},
		}
		env, err := protocol.Seal(a, key)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{Now: issued}); err != nil {
			t.Fatal(err)
		}
		return env
	}
	edKey, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x01}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	secpKey, err := crypto.UnmarshalSecp256k1PrivateKey(bytes.Repeat([]byte{0x02}, 32))
	if err != nil {
		t.Fatal(err)
	}
	ecKey, _, err := crypto.GenerateECDSAKeyPair(nil)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, _, err := crypto.GenerateRSAKeyPair(2048, nil)
	if err != nil {
		t.Fatal(err)
	}
	type cs struct {
		name, desc, same string
		data             []byte
	}
	var cases []cs
	field := func(b []byte, num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
	}
	keyMsg := func(typ uint64, withType bool, data []byte) []byte {
		var b []byte
		if withType {
			b = protowire.AppendVarint(protowire.AppendTag(b, 1, protowire.VarintType), typ)
		}
		if data != nil {
			b = field(b, 2, data)
		}
		return b
	}
	rebuild := func(keys [][]byte, e *specEnvelope) []byte {
		var b []byte
		for _, k := range keys {
			b = field(b, 1, k)
		}
		return field(field(field(b, 2, e.ptype), 3, e.payload), 5, e.sig)
	}
	ed := seal(edKey)
	e, err := specDecode(ed)
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases,
		cs{"ed25519", "a record sealed by an Ed25519 key (key type 1, 32 key bytes)", "", ed},
		cs{"ed25519_unknown_field", "the ed25519 envelope with an unknown field 15 (varint 7) appended: the same record", "ed25519",
			protowire.AppendVarint(protowire.AppendTag(append([]byte(nil), ed...), 15, protowire.VarintType), 7)},
		cs{"ed25519_key_split", "the same record with public_key given twice, Type in the first and Data in the second (the two merge), payload type, payload and signature after", "ed25519",
			rebuild([][]byte{keyMsg(1, true, nil), keyMsg(0, false, e.keyData)}, e)},
		cs{"ed25519_payload_type_twice", "the same record with payload_type written twice, 00 first: the last value counts", "ed25519",
			append(field(nil, 2, []byte{0}), ed...)},
		cs{"secp256k1", "a record sealed by a Secp256k1 key (key type 2, 33-byte compressed key)", "", seal(secpKey)},
		cs{"ecdsa", "a record sealed by an ECDSA P-256 key (key type 3, PKIX DER key)", "", seal(ecKey)},
		cs{"rsa2048", "a record sealed by an RSA-2048 key (key type 0, PKIX DER key)", "", seal(rsaKey)},
		cs{"not_an_envelope", "data that is no protobuf message", "", []byte("not an envelope")},
		cs{"no_public_key", "the ed25519 record's envelope without field 1", "", rebuild(nil, e)},
		cs{"key_without_data", "public_key with Type 1 and no Data (a proto2 required field missing)", "", rebuild([][]byte{keyMsg(1, true, nil)}, e)},
		cs{"key_without_type", "public_key with Data and no Type (a proto2 required field missing)", "", rebuild([][]byte{keyMsg(0, false, e.keyData)}, e)},
		cs{"key_type_4", "public_key with Type 4, no key type", "", rebuild([][]byte{keyMsg(4, true, e.keyData)}, e)},
		cs{"key_type_2_pow_32", "public_key with Type written as the varint 2^32 (int32 0: RSA) and the Ed25519 key bytes: named by its record, type 0", "",
			rebuild([][]byte{keyMsg(1<<32, true, e.keyData)}, e)},
		cs{"oversized", "the ed25519 envelope with an unknown field of 8 200 bytes appended (over 8192 bytes in all)", "",
			field(append([]byte(nil), ed...), 15, make([]byte, 8200))},
	)
	type vc struct {
		Name           string `json:"name"`
		Description    string `json:"description"`
		DataHex        string `json:"data_hex"`
		NamedBy        string `json:"named_by"`
		HashedInputHex string `json:"hashed_input_hex"`
		MessageIDHex   string `json:"message_id_hex"`
		SameIDAs       string `json:"same_id_as,omitempty"`
	}
	out := struct {
		Description string `json:"description"`
		Cases       []vc   `json:"cases"`
		KeyUnits    []any  `json:"key_units"`
	}{Description: "GossipSub message IDs of trust.md §3.4: message_id_hex is SHA-256 of hashed_input_hex (named_by record) or of data_hex itself (named_by data, hashed_input_hex empty). Regenerate with go test ./spec -run TestGossipMessageIDVector -update-gossip-msgid-vector. key_units: the signature-check price of one key (key type, length of its Data, units)."}
	for _, c := range cases {
		x := vc{Name: c.name, Description: c.desc, DataHex: hex.EncodeToString(c.data), SameIDAs: c.same, NamedBy: "data"}
		in := c.data
		if e, err := specDecode(c.data); err == nil {
			x.NamedBy, in = "record", specIDInput(e)
			x.HashedInputHex = hex.EncodeToString(in)
		}
		sum := sha256.Sum256(in)
		x.MessageIDHex = hex.EncodeToString(sum[:])
		out.Cases = append(out.Cases, x)
	}
	for _, k := range []struct{ typ, n, bits, units int }{
		{1, 32, 0, 1}, {2, 33, 0, 2}, {3, 91, 0, 2}, {0, 294, 2048, 4}, {0, 422, 3072, 9}, {0, 550, 4096, 16}, {0, 1062, 8192, 64}, {0, 300, 0, 9}, {0, 10, 0, 1},
	} {
		m := map[string]int{"key_type": k.typ, "data_len": k.n, "units": k.units}
		if k.bits > 0 {
			m["rsa_bits"] = k.bits
		}
		out.KeyUnits = append(out.KeyUnits, m)
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("vectors/gossip_msgid.json", append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
