package secondhttp

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"math"
	"math/big"
	"strings"

	secp "github.com/decred/dcrd/dcrec/secp256k1/v4"
	secpecdsa "github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
	"google.golang.org/protobuf/encoding/protowire"
)

// attestation.md §1
const (
	attDomain   = "acaptcha-attestation"
	maxEnvelope = 8192
	maxSkewSec  = 300
	maxMs       = 86_400_000
	maxCounter  = 2_147_483_647
)

var attPayloadType = []byte{0x81, 0x94, 0xeb, 0x01}

// verification error codes (attestation.md §6)
type attErr string

func (e attErr) Error() string { return string(e) }

const (
	eTooLarge       attErr = "too_large"
	eMalformed      attErr = "malformed"
	eBadSignature   attErr = "bad_signature"
	eIssuerMismatch attErr = "issuer_mismatch"
	eSubject        attErr = "subject_mismatch"
	eExpired        attErr = "expired"
	eNotYetValid    attErr = "not_yet_valid"
	eVersion        attErr = "unsupported_version"
	eSource         attErr = "source_below_minimum"
)

type attRound struct {
	Round                 uint32
	BudgetMs, EffectiveMs uint64
	NarrativeTokens       uint32
	Correct               bool
}

type attPolicy struct {
	Rounds      uint32
	TauMs       uint64
	DerivedTau  bool
	Alpha       float64
	TotalMs     uint64
	RTTCreditMs uint64
}

type attProvenance struct {
	Source, Model string
	LLMQuestions  bool
}

type attRecord struct {
	Issuer, Subject []byte
	Accepted        bool
	Reason          string
	FailedRound     uint32
	Nonce, Digest   []byte
	Rounds          []attRound
	Policy          attPolicy
	Domain, SetID   string
	IssuedAt        int64
	ExpiresAt       int64
	SpecVersion     string
	Provenance      attProvenance
	Kind            string
}

func signedBytes(payload []byte) []byte {
	var b []byte
	b = protowire.AppendBytes(b, []byte(attDomain))
	b = protowire.AppendBytes(b, attPayloadType)
	b = protowire.AppendBytes(b, payload)
	return b
}

// marshalPubKey is the crypto.pb.PublicKey encoding libp2p derives peer
// IDs from (proto2: Type always written).
func marshalPubKey(typ int32, data []byte) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(int64(typ)))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, data)
	return b
}

// peerIDFromKey: identity multihash up to 42 bytes, else SHA-256.
func peerIDFromKey(typ int32, data []byte) []byte {
	mk := marshalPubKey(typ, data)
	if len(mk) <= 42 {
		return append([]byte{0x00, byte(len(mk))}, mk...)
	}
	h := sha256.Sum256(mk)
	return append([]byte{0x12, 0x20}, h[:]...)
}

func isPeerID(b []byte) bool {
	if len(b) >= 2 && b[0] == 0x00 {
		l := int(b[1])
		return l >= 1 && l <= 42 && len(b) == 2+l
	}
	return len(b) == 34 && b[0] == 0x12 && b[1] == 0x20
}

var kindOK = func(k string) bool {
	if len(k) < 1 || len(k) > 32 || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// specMajor parses a spec_version (attestation.md §6 step 6).
func specMajor(v string) (uint64, bool) {
	if len(v) > 32 {
		return 0, false
	}
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return 0, false
	}
	var major uint64
	for i, p := range parts {
		if p == "" {
			return 0, false
		}
		var n uint64
		for _, c := range []byte(p) {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + uint64(c-'0')
			if n >= 1<<32 {
				return 0, false
			}
		}
		if i == 0 {
			major = n
		}
	}
	return major, true
}

var sourceRank = map[string]int{"procedural": 1, "corpus": 2, "hybrid": 3, "llm": 3}

type verifyOpts struct {
	Subject, Issuer []byte
	Now             int64 // Unix seconds
	AllowExpired    bool
	MinSource       string
}

type pubKey struct {
	typ  int32
	data []byte
	ed   ed25519.PublicKey
	secp *secp.PublicKey
	ec   *ecdsa.PublicKey
	rsa  *rsa.PublicKey
}

// parseKey decodes a crypto.pb.PublicKey (attestation.md §2, trust.md
// §3.4: Type and Data both required, Type an int32 enum).
func parseKey(m msg) (*pubKey, error) {
	t, okT := m.varint(1)
	d, okD := m.bytes(2)
	if !okT || !okD {
		return nil, eMalformed
	}
	k := &pubKey{typ: int32(t), data: d}
	switch k.typ {
	case 1:
		if len(d) != ed25519.PublicKeySize {
			return nil, eMalformed
		}
		k.ed = ed25519.PublicKey(d)
	case 2:
		if len(d) != 33 {
			return nil, eMalformed
		}
		p, err := secp.ParsePubKey(d)
		if err != nil {
			return nil, eMalformed
		}
		k.secp = p
	case 3:
		p, err := x509.ParsePKIXPublicKey(d)
		if err != nil {
			return nil, eMalformed
		}
		ec, ok := p.(*ecdsa.PublicKey)
		if !ok || ec.Curve != elliptic.P256() {
			return nil, eMalformed
		}
		k.ec = ec
	case 0:
		p, err := x509.ParsePKIXPublicKey(d)
		if err != nil {
			return nil, eMalformed
		}
		rk, ok := p.(*rsa.PublicKey)
		if !ok || rk.N.BitLen() < 2048 || rk.N.BitLen() > 8192 {
			return nil, eMalformed
		}
		k.rsa = rk
	default:
		return nil, eMalformed
	}
	return k, nil
}

// derLen reads a minimal DER length.
func derLen(b []byte) (int, []byte, bool) {
	if len(b) == 0 {
		return 0, nil, false
	}
	if b[0] < 0x80 {
		return int(b[0]), b[1:], true
	}
	if b[0] == 0x81 && len(b) >= 2 && b[1] >= 0x80 {
		return int(b[1]), b[2:], true
	}
	return 0, nil, false // ECDSA signatures never need more
}

func derInt(b []byte) (*big.Int, []byte, bool) {
	if len(b) < 2 || b[0] != 0x02 {
		return nil, nil, false
	}
	n, rest, ok := derLen(b[1:])
	if !ok || n == 0 || len(rest) < n {
		return nil, nil, false
	}
	v := rest[:n]
	if v[0]&0x80 != 0 { // negative
		return nil, nil, false
	}
	if n > 1 && v[0] == 0 && v[1]&0x80 == 0 { // not minimal
		return nil, nil, false
	}
	return new(big.Int).SetBytes(v), rest[n:], true
}

// strictDER parses exactly SEQUENCE { r INTEGER, s INTEGER }.
func strictDER(sig []byte) (r, s *big.Int, ok bool) {
	if len(sig) < 2 || sig[0] != 0x30 {
		return nil, nil, false
	}
	n, rest, ok := derLen(sig[1:])
	if !ok || n != len(rest) {
		return nil, nil, false
	}
	r, rest, ok = derInt(rest)
	if !ok {
		return nil, nil, false
	}
	s, rest, ok = derInt(rest)
	if !ok || len(rest) != 0 {
		return nil, nil, false
	}
	return r, s, true
}

func (k *pubKey) verify(msgBytes, sig []byte) bool {
	switch {
	case k.ed != nil:
		return ed25519.Verify(k.ed, msgBytes, sig)
	case k.secp != nil:
		r, s, ok := strictDER(sig)
		if !ok {
			return false
		}
		var rs, ss secp.ModNScalar
		if r.Sign() == 0 || s.Sign() == 0 || len(r.Bytes()) > 32 || len(s.Bytes()) > 32 {
			return false
		}
		if rs.SetByteSlice(r.Bytes()) || ss.SetByteSlice(s.Bytes()) {
			return false // not below n
		}
		if ss.IsOverHalfOrder() {
			return false
		}
		h := sha256.Sum256(msgBytes)
		return secpecdsa.NewSignature(&rs, &ss).Verify(h[:], k.secp)
	case k.ec != nil:
		r, s, ok := strictDER(sig)
		if !ok {
			return false
		}
		h := sha256.Sum256(msgBytes)
		return ecdsa.Verify(k.ec, h[:], r, s)
	case k.rsa != nil:
		h := sha256.Sum256(msgBytes)
		return rsa.VerifyPKCS1v15(k.rsa, 5 /* crypto.SHA256 */, h[:], sig) == nil
	}
	return false
}

// envelope is a decoded record.pb.Envelope.
type envelope struct {
	key                       *pubKey
	keyMsg                    msg
	payloadType, payload, sig []byte
}

func decodeEnvelope(data []byte) (*envelope, error) {
	if len(data) == 0 {
		return nil, eMalformed
	}
	fs, err := parseFields(data)
	if err != nil {
		return nil, eMalformed
	}
	m := msg(fs)
	km, ok, err := m.sub(1)
	if err != nil || !ok {
		return nil, eMalformed
	}
	k, err := parseKey(km)
	if err != nil {
		return nil, err
	}
	e := &envelope{key: k, keyMsg: km}
	e.payloadType, _ = m.bytes(2)
	e.payload, _ = m.bytes(3)
	e.sig, _ = m.bytes(5)
	return e, nil
}

func decodeRecord(p []byte) (*attRecord, error) {
	fs, err := parseFields(p)
	if err != nil {
		return nil, eMalformed
	}
	m := msg(fs)
	r := &attRecord{}
	var serr error
	s := func(m msg, n protowire.Number) string {
		v, e := m.str(n)
		if e != nil {
			serr = eMalformed
		}
		return v
	}
	r.Issuer, _ = m.bytes(1)
	r.Subject, _ = m.bytes(2)
	r.Accepted = m.boolean(3)
	r.Reason = s(m, 4)
	r.FailedRound = m.u32(5)
	r.Nonce, _ = m.bytes(6)
	r.Digest, _ = m.bytes(7)
	rs, err := m.repeated(8)
	if err != nil {
		return nil, eMalformed
	}
	for _, x := range rs {
		r.Rounds = append(r.Rounds, attRound{Round: x.u32(1), BudgetMs: x.u64(2), EffectiveMs: x.u64(3),
			NarrativeTokens: x.u32(4), Correct: x.boolean(5)})
	}
	pm, _, err := m.sub(9)
	if err != nil {
		return nil, eMalformed
	}
	r.Policy = attPolicy{Rounds: pm.u32(1), TauMs: pm.u64(2), DerivedTau: pm.boolean(3),
		Alpha: pm.double(4), TotalMs: pm.u64(5), RTTCreditMs: pm.u64(6)}
	r.Domain = s(m, 10)
	r.SetID = s(m, 11)
	r.IssuedAt = m.i64(12)
	r.ExpiresAt = m.i64(13)
	r.SpecVersion = s(m, 14)
	pv, _, err := m.sub(15)
	if err != nil {
		return nil, eMalformed
	}
	r.Provenance = attProvenance{Source: s(pv, 1), Model: s(pv, 2), LLMQuestions: pv.boolean(3)}
	r.Kind = s(m, 16)
	if serr != nil {
		return nil, serr
	}
	return r, nil
}

var reasons = map[string]bool{"ok": true, "wrong_answer": true, "timeout": true,
	"total_timeout": true, "protocol_error": true, "declined": true}

// structureOK is step 7 (attestation.md §3, §3.2, §3.4).
func structureOK(r *attRecord) bool {
	if len(r.Nonce) != 32 || len(r.Digest) != 32 || !reasons[r.Reason] {
		return false
	}
	if r.Accepted != (r.Reason == "ok") || bytes.Equal(r.Issuer, r.Subject) {
		return false
	}
	p := r.Policy
	if p.Rounds < 1 || p.Rounds > 3 || p.TotalMs == 0 {
		return false
	}
	if math.IsNaN(p.Alpha) || math.IsInf(p.Alpha, 0) {
		return false
	}
	if p.DerivedTau {
		if p.TauMs != 0 || !(p.Alpha > 0 && p.Alpha < 1) {
			return false
		}
	} else if p.TauMs == 0 || p.Alpha != 0 {
		return false
	}
	if len(r.Rounds) > int(p.Rounds) {
		return false
	}
	for i, rd := range r.Rounds {
		if rd.Round != uint32(i+1) {
			return false
		}
	}
	if r.Accepted {
		if r.FailedRound != 0 || len(r.Rounds) != int(p.Rounds) {
			return false
		}
		for _, rd := range r.Rounds {
			if !rd.Correct || rd.EffectiveMs > rd.BudgetMs {
				return false
			}
		}
	} else if len(r.Rounds) == 0 {
		if r.FailedRound > 1 {
			return false
		}
	} else if r.FailedRound < 1 || r.FailedRound > p.Rounds {
		return false
	}
	if len(r.Domain) > 256 || len(r.SetID) > 256 || len(r.Provenance.Source) > 32 || len(r.Provenance.Model) > 128 {
		return false
	}
	if r.Kind != "" && !kindOK(r.Kind) {
		return false
	}
	return r.IssuedAt > 0 && r.ExpiresAt > r.IssuedAt
}

// verifyAttestation is attestation.md §6.
func verifyAttestation(data []byte, o verifyOpts) (*attRecord, error) {
	if len(data) > maxEnvelope { // 1
		return nil, eTooLarge
	}
	env, err := decodeEnvelope(data) // 2
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(env.payloadType, attPayloadType) { // 3
		return nil, eMalformed
	}
	if !env.key.verify(signedBytes(env.payload), env.sig) { // 4
		return nil, eBadSignature
	}
	r, err := decodeRecord(env.payload) // 5
	if err != nil {
		return nil, err
	}
	if !isPeerID(r.Issuer) || !isPeerID(r.Subject) {
		return nil, eMalformed
	}
	if r.FailedRound > maxCounter || r.Policy.Rounds > maxCounter {
		return nil, eMalformed
	}
	for _, rd := range r.Rounds {
		if rd.Round > maxCounter || rd.NarrativeTokens > maxCounter || rd.BudgetMs > maxMs || rd.EffectiveMs > maxMs {
			return nil, eMalformed
		}
	}
	if r.Policy.TauMs > maxMs || r.Policy.TotalMs > maxMs || r.Policy.RTTCreditMs > maxMs {
		return nil, eMalformed
	}
	if maj, ok := specMajor(r.SpecVersion); !ok || maj != 1 { // 6
		return nil, eVersion
	}
	if !structureOK(r) { // 7
		return nil, eMalformed
	}
	if !bytes.Equal(peerIDFromKey(env.key.typ, env.key.data), r.Issuer) { // 8
		return nil, eIssuerMismatch
	}
	if o.Issuer != nil && !bytes.Equal(o.Issuer, r.Issuer) { // 9
		return nil, eIssuerMismatch
	}
	if o.Subject != nil && !bytes.Equal(o.Subject, r.Subject) { // 10
		return nil, eSubject
	}
	if r.IssuedAt-maxSkewSec > o.Now { // 11 (issued_at > 0, no overflow)
		return nil, eNotYetValid
	}
	if !o.AllowExpired && !(o.Now < r.ExpiresAt) { // 12
		return nil, eExpired
	}
	if o.MinSource != "" { // 13
		need, ok := sourceRank[o.MinSource]
		if !ok || sourceRank[r.Provenance.Source] < need {
			return nil, eSource
		}
	}
	return r, nil
}
