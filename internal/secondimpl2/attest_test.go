package secondimpl2

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

// encodeRecord writes the deterministic encoding of attestation.md §3
// "Encoding notes".
func encodeRecord(r *attRecord) []byte {
	var e enc
	e.bytes(1, r.Issuer)
	e.bytes(2, r.Subject)
	e.boolean(3, r.Accepted)
	e.bytes(4, []byte(r.Reason))
	e.varint(5, uint64(r.FailedRound))
	e.bytes(6, r.Nonce)
	e.bytes(7, r.Digest)
	for _, rd := range r.Rounds {
		var re enc
		re.varint(1, uint64(rd.Round))
		re.varint(2, rd.BudgetMs)
		re.varint(3, rd.EffectiveMs)
		re.varint(4, uint64(rd.NarrativeTokens))
		re.boolean(5, rd.Correct)
		e.message(8, re, true)
	}
	var pe enc
	pe.varint(1, uint64(r.Policy.Rounds))
	pe.varint(2, r.Policy.TauMs)
	pe.boolean(3, r.Policy.DerivedTau)
	pe.double(4, r.Policy.Alpha)
	pe.varint(5, r.Policy.TotalMs)
	pe.varint(6, r.Policy.RTTCreditMs)
	e.message(9, pe, true)
	e.bytes(10, []byte(r.Domain))
	e.bytes(11, []byte(r.SetID))
	e.varint(12, uint64(r.IssuedAt))
	e.varint(13, uint64(r.ExpiresAt))
	e.bytes(14, []byte(r.SpecVersion))
	if r.Provenance.Source != "" {
		var pv enc
		pv.bytes(1, []byte(r.Provenance.Source))
		pv.bytes(2, []byte(r.Provenance.Model))
		pv.boolean(3, r.Provenance.LLMQuestions)
		e.message(15, pv, true)
	}
	e.bytes(16, []byte(r.Kind))
	return e
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

// sealRecord signs a record with an Ed25519 key into an envelope.
func sealRecord(r *attRecord, priv ed25519.PrivateKey) []byte {
	payload := encodeRecord(r)
	sig := ed25519.Sign(priv, signedBytes(payload))
	var e enc
	e.message(1, marshalPubKey(1, priv.Public().(ed25519.PublicKey)), true)
	e.bytes(2, attPayloadType)
	e.bytes(3, payload)
	e.bytes(5, sig)
	return e
}

// smallOrderEd: attestation.md §2, an Ed25519 key that decodes (y mod p,
// the sign bit ignored) to a point of order dividing 8. Such points have
// y = 1, p − 1, 0, or y with y² = −x² and d·x⁴ − 2x² − 1 = 0; here they
// are told apart by [8]P = identity, computed in extended coordinates
// from the decoded y and the spec's x.
func smallOrderEd(k []byte) bool {
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	be := make([]byte, 32)
	for i := range k {
		be[31-i] = k[i]
	}
	be[0] &= 0x7f
	y := new(big.Int).Mod(new(big.Int).SetBytes(be), p)
	d := new(big.Int).Mul(big.NewInt(-121665), new(big.Int).ModInverse(big.NewInt(121666), p))
	d.Mod(d, p)
	// x² = (y² − 1) / (d·y² + 1)
	y2 := new(big.Int).Mul(y, y)
	num := new(big.Int).Sub(y2, big.NewInt(1))
	den := new(big.Int).Add(new(big.Int).Mul(d, y2), big.NewInt(1))
	den.Mod(den, p)
	if den.Sign() == 0 {
		return false
	}
	x2 := new(big.Int).Mul(num, new(big.Int).ModInverse(den, p))
	x2.Mod(x2, p)
	x := new(big.Int).ModSqrt(x2, p)
	if x == nil {
		return false // not a point: its signature fails
	}
	// Affine doubling on −x² + y² = 1 + d·x²·y², three times.
	mod := func(v *big.Int) *big.Int { return v.Mod(v, p) }
	inv := func(v *big.Int) *big.Int { return new(big.Int).ModInverse(mod(v), p) }
	for range 3 {
		xy := mod(new(big.Int).Mul(x, y))
		xx := mod(new(big.Int).Mul(x, x))
		yy := mod(new(big.Int).Mul(y, y))
		dxy2 := mod(new(big.Int).Mul(d, mod(new(big.Int).Mul(xy, xy))))
		dx := new(big.Int).Add(big.NewInt(1), dxy2) // 1 + d·x²y²
		dy := new(big.Int).Sub(big.NewInt(1), dxy2) // 1 − d·x²y²
		if mod(dx).Sign() == 0 || mod(dy).Sign() == 0 {
			return false
		}
		nx := mod(new(big.Int).Mul(new(big.Int).Lsh(xy, 1), inv(dx)))
		ny := mod(new(big.Int).Mul(new(big.Int).Add(yy, xx), inv(dy)))
		x, y = nx, ny
	}
	return x.Sign() == 0 && y.Cmp(big.NewInt(1)) == 0
}

// smallOrderID: the peer ID libp2p derives from such a key.
func smallOrderID(id []byte) bool {
	pre := []byte{0x00, 0x24, 0x08, 0x01, 0x12, 0x20}
	return len(id) == 38 && bytes.Equal(id[:6], pre) && smallOrderEd(id[6:])
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
		if len(d) != ed25519.PublicKeySize || smallOrderEd(d) {
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
		if err != nil || !canonicalSPKI(p, d) {
			return nil, eMalformed
		}
		ec, ok := p.(*ecdsa.PublicKey)
		if !ok || ec.Curve != elliptic.P256() {
			return nil, eMalformed
		}
		k.ec = ec
	case 0:
		p, err := x509.ParsePKIXPublicKey(d)
		if err != nil || !canonicalSPKI(p, d) {
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

// canonicalSPKI reports whether d is exactly the DER SubjectPublicKeyInfo
// of the key p (attestation.md §2, document 1.8.0): x509 parses a
// SubjectPublicKeyInfo with an element after its BIT STRING too.
func canonicalSPKI(p any, d []byte) bool {
	c, err := x509.MarshalPKIXPublicKey(p)
	return err == nil && bytes.Equal(c, d)
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
	if !structureOK(r) || smallOrderID(r.Issuer) || smallOrderID(r.Subject) { // 7
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
