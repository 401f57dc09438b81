package secondimpl2

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/protocol/pb"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"
)

func loadVector(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "spec", "vectors", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func b64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var declineNames = map[string]int32{"DECLINE_REASON_UNSPECIFIED": 0, "DECLINE_REASON_NO_PROVER": 1,
	"DECLINE_REASON_BUSY": 2, "DECLINE_REASON_BAD_HELLO": 3, "DECLINE_REASON_UNSUPPORTED_VERSION": 4,
	"DECLINE_REASON_PROVER_ERROR": 5, "DECLINE_REASON_REFUSED": 6, "DECLINE_REASON_REFLECTION": 7,
	"DECLINE_REASON_UNSUPPORTED_KIND": 8, "DECLINE_REASON_VERIFY_FIRST": 9}

var reciprocalNames = map[string]int32{"RECIPROCAL_UNSPECIFIED": 0, "RECIPROCAL_WILL": 1,
	"RECIPROCAL_ATTESTED": 2, "RECIPROCAL_BACKING_OFF": 3, "RECIPROCAL_BUSY": 4,
	"RECIPROCAL_NOT_OFFERED": 5, "RECIPROCAL_ADMITTED": 6}

// frameFromJSON builds a frame from the proto3 JSON mapping.
func frameFromJSON(t *testing.T, m map[string]json.RawMessage) *frame {
	t.Helper()
	type hj struct {
		SpecVersion, VerifierID, ProverID, Nonce string
		Rounds, TauMs, TotalMs                   uint32
		Reciprocal                               bool
		RttCreditMs, PowDifficulty               uint32
	}
	for k, raw := range m {
		switch k {
		case "hello":
			var h hj
			json.Unmarshal(raw, &h)
			return &frame{Body: bHello, Hello: &hello{h.SpecVersion, b64(t, h.VerifierID), b64(t, h.ProverID),
				b64(t, h.Nonce), h.Rounds, h.TauMs, h.TotalMs, h.Reciprocal, h.RttCreditMs, h.PowDifficulty}}
		case "helloAck":
			var a struct {
				Nonce, Pow, Reciprocal string
				PayDifficulty          uint32
				PayNonce               string
			}
			json.Unmarshal(raw, &a)
			return &frame{Body: bHelloAck, HelloAck: &helloAck{b64(t, a.Nonce), b64(t, a.Pow), reciprocalNames[a.Reciprocal],
				a.PayDifficulty, b64(t, a.PayNonce)}}
		case "probe", "probeAck":
			var p struct {
				Seq        uint32
				Nonce, Pay string
			}
			json.Unmarshal(raw, &p)
			body := bProbe
			if k == "probeAck" {
				body = bProbeAck
			}
			return &frame{Body: body, Probe: &probe{p.Seq, b64(t, p.Nonce), b64(t, p.Pay)}}
		case "challenge":
			var c challenge
			json.Unmarshal(raw, &c)
			return &frame{Body: bChallenge, Challenge: &c}
		case "answer":
			var a answer
			json.Unmarshal(raw, &a)
			return &frame{Body: bAnswer, Answer: &a}
		case "decline":
			var d struct{ Reason, Detail, Reciprocal string }
			json.Unmarshal(raw, &d)
			return &frame{Body: bDecline, Decline: &decline{declineNames[d.Reason], d.Detail, reciprocalNames[d.Reciprocal]}}
		case "verdict":
			var v struct {
				Accepted    bool
				Reason      string
				FailedRound uint32
				Detail      string
				Rounds      []roundResult
				Attestation string
			}
			json.Unmarshal(raw, &v)
			return &frame{Body: bVerdict, Verdict: &verdict{v.Accepted, v.Reason, v.FailedRound, v.Detail, v.Rounds, b64(t, v.Attestation)}}
		}
	}
	t.Fatalf("no body in %v", m)
	return nil
}

func TestVectorFrames(t *testing.T) {
	var v struct {
		Frames []struct {
			Name, Sender string
			Message      map[string]json.RawMessage
			FrameHex     string `json:"frame_hex"`
		}
	}
	loadVector(t, "frames.json", &v)
	bodies := map[int]bool{}
	byName := map[string]*frame{}
	for _, f := range v.Frames {
		want := frameFromJSON(t, f.Message)
		bodies[want.Body] = true
		enc := encodeFrame(want)
		if hex.EncodeToString(enc) != f.FrameHex {
			t.Errorf("%s: encoded %x, vector %s", f.Name, enc, f.FrameHex)
		}
		capB := capProver
		if f.Sender == "verifier" {
			capB = capVerifier
		}
		raw := unhex(t, f.FrameHex)
		if len(raw) > capB+3 {
			t.Errorf("%s: over the %s cap", f.Name, f.Sender)
		}
		got, err := readFrame(bufioReader(raw), capB)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if !reflect.DeepEqual(normFrame(got), normFrame(want)) {
			t.Errorf("%s: decoded %+v, want %+v", f.Name, got, want)
		}
		byName[f.Name] = got
	}
	if len(bodies) != 8 {
		t.Errorf("frames.json has frames of %d bodies, want every body (8)", len(bodies))
	}
	// §5b: probe_pay pays hello_ack_pay's ask, for the hello's verifier,
	// and hello_ack_pay is the hello_ack with a well-formed ask added.
	h, ack, ackPay, pr, prPay := byName["hello"], byName["hello_ack"], byName["hello_ack_pay"], byName["probe"], byName["probe_pay"]
	if h == nil || ack == nil || ackPay == nil || pr == nil || prPay == nil {
		t.Fatalf("frames.json lacks one of hello, hello_ack, hello_ack_pay, probe, probe_pay")
	}
	if ackPay.Body != bHelloAck || prPay.Body != bProbe {
		t.Fatalf("hello_ack_pay is body %d, probe_pay body %d", ackPay.Body, prPay.Body)
	}
	a := ackPay.HelloAck
	if a.PayDifficulty < 1 || askMalformed(a) {
		t.Errorf("hello_ack_pay asks no well-formed payment: D_v %d, nonce %x", a.PayDifficulty, a.PayNonce)
	}
	if ack.HelloAck.PayDifficulty != 0 || len(ack.HelloAck.PayNonce) != 0 || !bytes.Equal(a.Nonce, h.Hello.Nonce) ||
		!bytes.Equal(a.Pow, ack.HelloAck.Pow) || a.Reciprocal != ack.HelloAck.Reciprocal {
		t.Errorf("hello_ack_pay is not hello_ack with an ask added: %+v / %+v", a, ack.HelloAck)
	}
	if len(pr.Probe.Pay) != 0 || prPay.Probe.Seq != 1 || prPay.Probe.Seq != pr.Probe.Seq || !bytes.Equal(prPay.Probe.Nonce, pr.Probe.Nonce) {
		t.Errorf("probe_pay is not probe 1 with a pay added: %+v / %+v", prPay.Probe, pr.Probe)
	}
	if len(prPay.Probe.Pay) < 1 || len(prPay.Probe.Pay) > 32 {
		t.Errorf("probe_pay's pay is %d bytes", len(prPay.Probe.Pay))
	}
	if !payValid(a.PayNonce, h.Hello.VerifierID, prPay.Probe.Pay, int(a.PayDifficulty)) {
		d := payDigest(a.PayNonce, h.Hello.VerifierID, prPay.Probe.Pay)
		t.Errorf("probe_pay's pay %x does not pay %d bits for the hello's verifier (digest %x)", prPay.Probe.Pay, a.PayDifficulty, d)
	}
	// the smallest counter pay (the description says SolvePay counts up from 0)
	if sp := solvePay(context.Background(), a.PayNonce, h.Hello.VerifierID, int(a.PayDifficulty)); !bytes.Equal(sp, prPay.Probe.Pay) {
		t.Errorf("smallest counter pay %x, probe_pay has %x", sp, prPay.Probe.Pay)
	}
	// a ProbeAck carries no pay: field 3 on one is an unknown field
	pa := byName["probe_ack"]
	if pa == nil || len(pa.Probe.Pay) != 0 {
		t.Errorf("probe_ack: %+v", pa)
	}
	checkVerifyFirstVector(t, byName, v.Frames)
}

// checkVerifyFirstVector: §3, §5c: decline_verify_first is a prover's
// Decline with reason VERIFY_FIRST (9) and field 3 reciprocal WILL (1),
// byte for byte: Frame field 7 (length-delimited) holding field 1
// varint 9, field 2 the detail, field 3 varint 1, in number order, under
// the minimal uvarint of the Frame's length.
func checkVerifyFirstVector(t *testing.T, byName map[string]*frame, frames []struct {
	Name, Sender string
	Message      map[string]json.RawMessage
	FrameHex     string `json:"frame_hex"`
}) {
	t.Helper()
	vf := byName["decline_verify_first"]
	if vf == nil || vf.Body != bDecline {
		t.Fatalf("frames.json lacks the decline decline_verify_first: %+v", vf)
	}
	var hexStr, sender string
	for _, f := range frames {
		if f.Name == "decline_verify_first" {
			hexStr, sender = f.FrameHex, f.Sender
		}
	}
	if sender != "prover" {
		t.Errorf("decline_verify_first: sender %q, want prover", sender)
	}
	d := vf.Decline
	if d.Reason != drVerifyFirst || d.Reciprocal != reciprocalWill {
		t.Errorf("decline_verify_first: reason %d reciprocal %d, want 9 and 1 (WILL)", d.Reason, d.Reciprocal)
	}
	body := []byte{0x08, 0x09, 0x12, byte(len(d.Detail))}
	body = append(append(body, d.Detail...), 0x18, 0x01)
	fr := append([]byte{0x3a, byte(len(body))}, body...)
	want := append([]byte{byte(len(fr))}, fr...)
	if len(d.Detail) > 127 || len(body) > 127 || len(fr) > 127 {
		t.Fatalf("decline_verify_first: detail of %d bytes, not a one-byte length", len(d.Detail))
	}
	if got := unhex(t, hexStr); !bytes.Equal(got, want) {
		t.Errorf("decline_verify_first: vector %x, built by hand %x", got, want)
	}
	// A receiver that does not know field 3 (before document 1.13.0)
	// skips it and reads a decline of reason 9 with the same detail.
	stripped := append([]byte{0x3a, byte(len(body) - 2)}, body[:len(body)-2]...)
	old, err := decodeFrame(stripped)
	if err != nil || old.Decline.Reason != drVerifyFirst || old.Decline.Detail != d.Detail || old.Decline.Reciprocal != 0 {
		t.Errorf("decline_verify_first without field 3: %+v %v", old, err)
	}
	// and the generated message reads the same
	var pf pb.Frame
	if err := proto.Unmarshal(want[1:], &pf); err != nil {
		t.Fatal(err)
	}
	pd := pf.GetDecline()
	if pd == nil || pd.GetReason() != pb.DeclineReason_DECLINE_REASON_VERIFY_FIRST || pd.GetReciprocal() != pb.Reciprocal_RECIPROCAL_WILL || pd.GetDetail() != d.Detail {
		t.Errorf("decline_verify_first through protocol/pb: %v", pd)
	}
}

func TestVectorPay(t *testing.T) {
	var v struct {
		Description string
		Tag         string
		Cases       []struct {
			Name        string
			Nonce       string `json:"pay_nonce_hex"`
			Verifier    string `json:"verifier"`
			VerifierHex string `json:"verifier_hex"`
			Pay         string `json:"pay_hex"`
			Digest      string `json:"digest_hex"`
			LZ          int    `json:"leading_zero_bits"`
			Difficulty  int
			Valid       bool
		}
	}
	loadVector(t, "pay.json", &v)
	if v.Tag != payTag || len(payTag) != 23 {
		t.Errorf("tag %q, mine %q", v.Tag, payTag)
	}
	if len(v.Cases) == 0 {
		t.Fatal("pay.json has no cases")
	}
	valid, invalid := 0, 0
	for _, c := range v.Cases {
		ver := unhex(t, c.VerifierHex)
		id, err := lpeer.Decode(c.Verifier)
		if err != nil || !bytes.Equal([]byte(id), ver) {
			t.Errorf("%s: verifier %s is not %s", c.Name, c.Verifier, c.VerifierHex)
		}
		nonce, pay := unhex(t, c.Nonce), unhex(t, c.Pay)
		if len(nonce) != payNonceLen {
			t.Errorf("%s: pay nonce of %d bytes", c.Name, len(nonce))
		}
		d := payDigest(nonce, ver, pay)
		if hex.EncodeToString(d[:]) != c.Digest {
			t.Errorf("%s: digest %x want %s", c.Name, d, c.Digest)
		}
		// the digest spelled out: SHA-256 over the concatenation
		if d2 := sha256.Sum256(bytes.Join([][]byte{[]byte(payTag), nonce, ver, pay}, nil)); d2 != d {
			t.Errorf("%s: streamed digest differs from the one-shot one", c.Name)
		}
		if leadingZeros(d) != c.LZ {
			t.Errorf("%s: lz %d want %d", c.Name, leadingZeros(d), c.LZ)
		}
		if got := payValid(nonce, ver, pay, c.Difficulty); got != c.Valid {
			t.Errorf("%s: valid %v want %v", c.Name, got, c.Valid)
		}
		// the case that says it is a §5a proof of work of the same inputs
		// is one (under the pow tag), and fails as a pay
		if strings.Contains(c.Name, "§5a") && !powValid(nonce, ver, pay, c.Difficulty) {
			t.Errorf("%s: not a §5a proof of work of %d bits", c.Name, c.Difficulty)
		}
		if c.Valid {
			valid++
		} else {
			invalid++
		}
	}
	if valid == 0 || invalid == 0 {
		t.Errorf("pay.json: %d valid, %d invalid cases", valid, invalid)
	}
}

// normFrame maps nil and empty byte slices alike for comparison.
func normFrame(f *frame) string {
	b, _ := json.Marshal(f)
	return string(bytes.ReplaceAll(b, []byte("null"), []byte(`""`)))
}

func TestVectorPow(t *testing.T) {
	var v struct {
		Cases []struct {
			Name                                      string
			NonceHex, RequesterHex, PowHex, DigestHex string `json:"-"`
			Nonce                                     string `json:"nonce_hex"`
			Requester                                 string `json:"requester"`
			ReqHex                                    string `json:"requester_hex"`
			Pow                                       string `json:"pow_hex"`
			Digest                                    string `json:"digest_hex"`
			LZ                                        int    `json:"leading_zero_bits"`
			Difficulty                                int
			Valid                                     bool
		}
	}
	loadVector(t, "pow.json", &v)
	for _, c := range v.Cases {
		req := unhex(t, c.ReqHex)
		id, err := lpeer.Decode(c.Requester)
		if err != nil || !bytes.Equal([]byte(id), req) {
			t.Errorf("%s: requester %s is not %s", c.Name, c.Requester, c.ReqHex)
		}
		d := powDigest(unhex(t, c.Nonce), req, unhex(t, c.Pow))
		if c.Digest != "" && hex.EncodeToString(d[:]) != c.Digest {
			t.Errorf("%s: digest %x want %s", c.Name, d, c.Digest)
		}
		if c.Digest != "" && leadingZeros(d) != c.LZ {
			t.Errorf("%s: lz %d want %d", c.Name, leadingZeros(d), c.LZ)
		}
		if got := powValid(unhex(t, c.Nonce), req, unhex(t, c.Pow), c.Difficulty); got != c.Valid {
			t.Errorf("%s: valid %v want %v", c.Name, got, c.Valid)
		}
	}
}

func TestVectorSetIDAndCut(t *testing.T) {
	var v struct {
		Set          specSet
		HashedInput  string  `json:"hashed_input_hex"`
		SetID        string  `json:"set_id"`
		WithOwnID    specSet `json:"set_with_own_id"`
		SetIDWithOwn string  `json:"set_id_with_own_id"`
	}
	loadVector(t, "set_id.json", &v)
	if hex.EncodeToString(setIDInput(&v.Set)) != v.HashedInput || setID(&v.Set) != v.SetID {
		t.Errorf("set_id.json: %s", setID(&v.Set))
	}
	if setID(&v.WithOwnID) != v.SetIDWithOwn {
		t.Errorf("set_id.json own id: %s", setID(&v.WithOwnID))
	}
	var c struct {
		Max   int `json:"max_answer_bytes"`
		Cases []struct {
			Name, Answer string
			Cut          string `json:"cut_hex"`
			CutBytes     int    `json:"cut_bytes"`
		}
		Transcript struct {
			Rounds []struct {
				Round                       int
				Narrative, Question, Answer string
			}
			Digest string `json:"digest_hex"`
		}
	}
	loadVector(t, "answer_cut.json", &c)
	for _, k := range c.Cases {
		if got := cutAnswer(k.Answer); hex.EncodeToString([]byte(got)) != k.Cut || len(got) != k.CutBytes {
			t.Errorf("answer_cut %s: %x", k.Name, got)
		}
	}
	var rs []tRound
	for _, r := range c.Transcript.Rounds {
		rs = append(rs, tRound{r.Round, r.Narrative, r.Question, r.Answer})
	}
	if hex.EncodeToString(transcriptDigest("", rs)) != c.Transcript.Digest {
		t.Errorf("answer_cut transcript digest")
	}
}

func TestVectorDerivedTau(t *testing.T) {
	var v struct {
		Tokens []struct {
			Name, Text    string
			Words, Tokens int
		} `json:"token_cases"`
		Budgets []struct {
			L       int     `json:"narrative_tokens"`
			Alpha   float64 `json:"alpha"`
			LB      int64   `json:"lower_bound_ns"`
			Budget  int64   `json:"budget_ms"`
			Allowed bool
		} `json:"budget_cases"`
	}
	loadVector(t, "derived_tau.json", &v)
	for _, c := range v.Tokens {
		if got := narrativeTokens(c.Text); got != c.Tokens {
			t.Errorf("tokens %s: %d want %d", c.Name, got, c.Tokens)
		}
	}
	for _, c := range v.Budgets {
		if lowerBoundNs(c.L) != c.LB {
			t.Errorf("L=%d lower bound %d want %d", c.L, lowerBoundNs(c.L), c.LB)
		}
		ms, ok := derivedBudgetMs(c.L, c.Alpha)
		if !ok {
			ms = 0
		}
		if ok != c.Allowed || ms != c.Budget {
			t.Errorf("L=%d alpha=%v: %d %v want %d %v", c.L, c.Alpha, ms, ok, c.Budget, c.Allowed)
		}
	}
}

func TestVectorReflection(t *testing.T) {
	var v struct {
		Cases []struct {
			Name, Narrative, Question, Normalized, Digest string
			Words                                         []string
			WordHashes                                    []string `json:"word_hashes"`
			ShingleHashes                                 []string `json:"shingle_hashes"`
			Sketch                                        []string
		}
	}
	loadVector(t, "reflection.json", &v)
	hx := func(xs []uint64) []string {
		var out []string
		for _, x := range xs {
			out = append(out, fmt.Sprintf("%016x", x))
		}
		return out
	}
	for _, c := range v.Cases {
		n := reflNorm(c.Narrative) + "\x00" + reflNorm(c.Question)
		if n != c.Normalized {
			t.Errorf("%s: normalized %q", c.Name, n)
		}
		d := reflDigest(c.Narrative, c.Question)
		if hex.EncodeToString(d[:]) != c.Digest {
			t.Errorf("%s: digest", c.Name)
		}
		words := append(reflWords(reflNorm(c.Narrative)), reflWords(reflNorm(c.Question))...)
		if !reflect.DeepEqual(words, c.Words) {
			t.Errorf("%s: words %q want %q", c.Name, words, c.Words)
		}
		var wh []uint64
		for _, w := range words {
			wh = append(wh, wordHash(w))
		}
		if !reflect.DeepEqual(hx(wh), c.WordHashes) {
			t.Errorf("%s: word hashes", c.Name)
		}
		if !reflect.DeepEqual(hx(shingles(words)), c.ShingleHashes) {
			t.Errorf("%s: shingles", c.Name)
		}
		if !reflect.DeepEqual(hx(sketch(c.Narrative, c.Question)), c.Sketch) {
			t.Errorf("%s: sketch", c.Name)
		}
	}
}

type jsonRound struct {
	Round           uint32 `json:"round"`
	BudgetMs        uint64 `json:"budget_ms"`
	EffectiveMs     uint64 `json:"effective_ms"`
	NarrativeTokens uint32 `json:"narrative_tokens"`
	Correct         bool   `json:"correct"`
}

type jsonView struct {
	Issuer, Subject string
	Accepted        bool
	Reason          string
	FailedRound     uint32 `json:"failed_round"`
	Nonce           string
	Digest          string `json:"transcript_digest"`
	Rounds          []jsonRound
	Policy          struct {
		Rounds      uint32  `json:"rounds"`
		TauMs       uint64  `json:"tau_ms"`
		DerivedTau  bool    `json:"derived_tau"`
		Alpha       float64 `json:"alpha"`
		TotalMs     uint64  `json:"total_ms"`
		RTTCreditMs uint64  `json:"rtt_credit_ms"`
	}
	Domain      string
	SetID       string `json:"set_id"`
	IssuedAt    string `json:"issued_at"`
	ExpiresAt   string `json:"expires_at"`
	SpecVersion string `json:"spec_version"`
	Provenance  struct {
		Source       string `json:"source"`
		Rank         int    `json:"rank"`
		Model        string `json:"model"`
		LLMQuestions bool   `json:"llm_questions"`
	}
	Kind string `json:"kind,omitempty"`
}

func idString(b []byte) string {
	id, err := lpeer.IDFromBytes(b)
	if err != nil {
		return "!" + hex.EncodeToString(b)
	}
	return id.String()
}

// view renders a record as attestation.md §8's JSON view.
func view(r *attRecord) jsonView {
	var v jsonView
	v.Issuer, v.Subject = idString(r.Issuer), idString(r.Subject)
	v.Accepted, v.Reason, v.FailedRound = r.Accepted, r.Reason, r.FailedRound
	v.Nonce, v.Digest = hex.EncodeToString(r.Nonce), hex.EncodeToString(r.Digest)
	v.Rounds = []jsonRound{}
	for _, x := range r.Rounds {
		v.Rounds = append(v.Rounds, jsonRound(x))
	}
	p := r.Policy
	v.Policy.Rounds, v.Policy.TauMs, v.Policy.DerivedTau, v.Policy.Alpha = p.Rounds, p.TauMs, p.DerivedTau, p.Alpha
	v.Policy.TotalMs, v.Policy.RTTCreditMs = p.TotalMs, p.RTTCreditMs
	v.Domain, v.SetID, v.SpecVersion = r.Domain, r.SetID, r.SpecVersion
	v.IssuedAt = time.Unix(r.IssuedAt, 0).UTC().Format(time.RFC3339)
	v.ExpiresAt = time.Unix(r.ExpiresAt, 0).UTC().Format(time.RFC3339)
	v.Provenance.Source, v.Provenance.Rank = r.Provenance.Source, sourceRank[r.Provenance.Source]
	v.Provenance.Model, v.Provenance.LLMQuestions = r.Provenance.Model, r.Provenance.LLMQuestions
	if r.Kind != "narrative" {
		v.Kind = r.Kind
	}
	return v
}

func unixOf(t *testing.T, s string) int64 {
	tt, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tt.Unix()
}

func TestVectorAttestation(t *testing.T) {
	var v struct {
		IssuerSeed string `json:"issuer_seed_hex"`
		IssuerPK   string `json:"issuer_public_key_hex"`
		IssuerID   string `json:"issuer_peer_id"`
		SubjectID  string `json:"subject_peer_id"`
		Transcript []struct {
			Round                       int
			Narrative, Question, Answer string
		}
		Payload   string `json:"payload_hex"`
		Signed    string `json:"signed_bytes_hex"`
		Signature string `json:"signature_hex"`
		Envelope  string `json:"envelope_hex"`
		VerifyAt  string `json:"verify_at"`
		MinSource string `json:"verify_min_source"`
		Expected  jsonView
		Negative  []struct {
			Name, Error string
			Envelope    string `json:"envelope_hex"`
			VerifyAt    string `json:"verify_at"`
			MinSource   string `json:"min_source"`
			Subject     string `json:"expected_subject"`
		}
		Variants []struct {
			Name       string
			Transcript []struct {
				Round                       int
				Narrative, Question, Answer string
			}
			Payload  string `json:"payload_hex"`
			Envelope string `json:"envelope_hex"`
			VerifyAt string `json:"verify_at"`
			Expected jsonView
		}
	}
	loadVector(t, "attestation.json", &v)
	env := unhex(t, v.Envelope)
	r, err := verifyAttestation(env, verifyOpts{Now: unixOf(t, v.VerifyAt), MinSource: v.MinSource})
	if err != nil {
		t.Fatalf("vector envelope: %v", err)
	}
	if got := view(r); !reflect.DeepEqual(got, v.Expected) {
		t.Errorf("view\n got %+v\nwant %+v", got, v.Expected)
	}
	if hex.EncodeToString(encodeRecord(r)) != v.Payload {
		t.Errorf("re-encoded payload differs from payload_hex")
	}
	if hex.EncodeToString(signedBytes(unhex(t, v.Payload))) != v.Signed {
		t.Errorf("signed bytes")
	}
	var rs []tRound
	for _, x := range v.Transcript {
		rs = append(rs, tRound{x.Round, x.Narrative, x.Question, x.Answer})
	}
	if !bytes.Equal(transcriptDigest("", rs), r.Digest) {
		t.Errorf("transcript digest")
	}
	// Sealing the decoded record with the seed gives the vector envelope.
	priv := ed25519FromSeed(unhex(t, v.IssuerSeed))
	if got := sealRecord(r, priv); !bytes.Equal(got, env) {
		t.Errorf("sealed envelope differs:\n%x\n%s", got, v.Envelope)
	}
	if hex.EncodeToString(marshalPubKey(1, priv.Public().(ed25519PublicKey))) != v.IssuerPK {
		t.Errorf("issuer key encoding")
	}
	for _, n := range v.Negative {
		data := env
		if n.Envelope != "" {
			data = unhex(t, n.Envelope)
		}
		o := verifyOpts{Now: unixOf(t, n.VerifyAt), MinSource: n.MinSource}
		if n.Subject != "" {
			id, err := lpeer.Decode(n.Subject)
			if err != nil {
				t.Fatal(err)
			}
			o.Subject = []byte(id)
		}
		_, err := verifyAttestation(data, o)
		if err == nil || err.Error() != n.Error {
			t.Errorf("negative %s: got %v, want %s", n.Name, err, n.Error)
		}
		if n.MinSource != "" { // verifies without the minimum
			o.MinSource = ""
			if _, err := verifyAttestation(data, o); err != nil {
				t.Errorf("negative %s without a minimum: %v", n.Name, err)
			}
		}
	}
	for _, vr := range v.Variants {
		r, err := verifyAttestation(unhex(t, vr.Envelope), verifyOpts{Now: unixOf(t, vr.VerifyAt)})
		if err != nil {
			t.Errorf("variant %s: %v", vr.Name, err)
			continue
		}
		if got := view(r); !reflect.DeepEqual(got, vr.Expected) {
			t.Errorf("variant %s view\n got %+v\nwant %+v", vr.Name, got, vr.Expected)
		}
		if hex.EncodeToString(encodeRecord(r)) != vr.Payload {
			t.Errorf("variant %s: payload not in the deterministic encoding", vr.Name)
		}
		var rs []tRound
		for _, x := range vr.Transcript {
			rs = append(rs, tRound{x.Round, x.Narrative, x.Question, x.Answer})
		}
		if !bytes.Equal(transcriptDigest(r.Kind, rs), r.Digest) {
			t.Errorf("variant %s: transcript digest", vr.Name)
		}
		if r.Policy.DerivedTau {
			for i, x := range r.Rounds {
				l := narrativeTokens(vr.Transcript[i].Narrative)
				ms, _ := derivedBudgetMs(l, r.Policy.Alpha)
				if uint32(l) != x.NarrativeTokens || uint64(ms) != x.BudgetMs {
					t.Errorf("variant %s round %d: tokens %d budget %d, record %d %d", vr.Name, i+1, l, ms, x.NarrativeTokens, x.BudgetMs)
				}
			}
		}
	}
}

func TestVectorKind(t *testing.T) {
	var v struct {
		Kind           string
		Set            specSet
		HashedInput    string `json:"hashed_input_hex"`
		SetID          string `json:"set_id"`
		NarrativeSetID string `json:"narrative_set_id"`
		Transcript     []struct {
			Round                       int
			Narrative, Question, Answer string
		}
		Digest         string `json:"transcript_digest_hex"`
		NarrDigest     string `json:"narrative_transcript_digest_hex"`
		NoRoundInput   string `json:"no_round_transcript_input_hex"`
		NoRoundDigest  string `json:"no_round_transcript_digest_hex"`
		ChallengeFrame string `json:"challenge_frame_hex"`
		DeclineFrame   string `json:"decline_frame_hex"`
		Payload        string `json:"payload_hex"`
		Envelope       string `json:"envelope_hex"`
		VerifyAt       string `json:"verify_at"`
		Expected       jsonView
		Negative       []struct {
			Name, Error string
			Envelope    string `json:"envelope_hex"`
			VerifyAt    string `json:"verify_at"`
		}
	}
	loadVector(t, "kind.json", &v)
	if hex.EncodeToString(setIDInput(&v.Set)) != v.HashedInput || setID(&v.Set) != v.SetID {
		t.Errorf("kind set id %s", setID(&v.Set))
	}
	ns := v.Set
	ns.Kind = ""
	if setID(&ns) != v.NarrativeSetID {
		t.Errorf("narrative set id")
	}
	var rs []tRound
	for _, x := range v.Transcript {
		rs = append(rs, tRound{x.Round, x.Narrative, x.Question, x.Answer})
	}
	if hex.EncodeToString(transcriptDigest(v.Kind, rs)) != v.Digest || hex.EncodeToString(transcriptDigest("", rs)) != v.NarrDigest {
		t.Errorf("kind transcript digests")
	}
	if hex.EncodeToString(transcriptInput(v.Kind, nil)) != v.NoRoundInput || hex.EncodeToString(transcriptDigest(v.Kind, nil)) != v.NoRoundDigest {
		t.Errorf("kind no-round digest")
	}
	cf, err := decodeFrame(unhex(t, v.ChallengeFrame))
	if err != nil || cf.Body != bChallenge || cf.Challenge.Kind != v.Kind || cf.Challenge.Narrative != v.Transcript[0].Narrative {
		t.Errorf("kind challenge frame: %+v %v", cf, err)
	}
	if enc := encodeFrame(cf); !bytes.HasSuffix(enc, unhex(t, v.ChallengeFrame)) {
		t.Errorf("kind challenge frame re-encoding")
	}
	df, err := decodeFrame(unhex(t, v.DeclineFrame))
	if err != nil || df.Body != bDecline || df.Decline.Reason != 8 {
		t.Errorf("kind decline frame: %+v %v", df, err)
	}
	r, err := verifyAttestation(unhex(t, v.Envelope), verifyOpts{Now: unixOf(t, v.VerifyAt)})
	if err != nil {
		t.Fatalf("kind envelope: %v", err)
	}
	if got := view(r); !reflect.DeepEqual(got, v.Expected) {
		t.Errorf("kind view\n got %+v\nwant %+v", got, v.Expected)
	}
	if hex.EncodeToString(encodeRecord(r)) != v.Payload {
		t.Errorf("kind payload encoding")
	}
	for _, n := range v.Negative {
		if _, err := verifyAttestation(unhex(t, n.Envelope), verifyOpts{Now: unixOf(t, n.VerifyAt)}); err == nil || err.Error() != n.Error {
			t.Errorf("kind negative %s: %v", n.Name, err)
		}
	}
}

func TestVectorGossipMessageID(t *testing.T) {
	var v struct {
		Cases []struct {
			Name     string
			Data     string `json:"data_hex"`
			NamedBy  string `json:"named_by"`
			Input    string `json:"hashed_input_hex"`
			ID       string `json:"message_id_hex"`
			SameIDAs string `json:"same_id_as"`
		}
		KeyUnits []struct {
			DataLen int   `json:"data_len"`
			KeyType int32 `json:"key_type"`
			Units   int
		} `json:"key_units"`
	}
	loadVector(t, "gossip_msgid.json", &v)
	ids := map[string]string{}
	for _, c := range v.Cases {
		in, byRecord := gossipIDInput(unhex(t, c.Data))
		id := gossipMessageID(unhex(t, c.Data))
		if hex.EncodeToString(id) != c.ID {
			t.Errorf("%s: id %x want %s", c.Name, id, c.ID)
		}
		if byRecord != (c.NamedBy == "record") || (byRecord && hex.EncodeToString(in) != c.Input) {
			t.Errorf("%s: named by record %v, input %x", c.Name, byRecord, in)
		}
		if h := sha256.Sum256(unhex(t, c.Input)); byRecord && hex.EncodeToString(h[:]) != c.ID {
			t.Errorf("%s: vector id is not the hash of its input", c.Name)
		}
		ids[c.Name] = c.ID
		if c.SameIDAs != "" && ids[c.SameIDAs] != c.ID {
			t.Errorf("%s: not the id of %s", c.Name, c.SameIDAs)
		}
	}
	for _, k := range v.KeyUnits {
		if got := keyUnits(k.KeyType, k.DataLen); got != k.Units {
			t.Errorf("key units type %d len %d: %d want %d", k.KeyType, k.DataLen, got, k.Units)
		}
	}
}

// TestPayAskVector: spec/vectors/pay_ask.json, the reading of a hello
// ack's payment fields (protocol.md §5b: none, an ask, or malformed),
// against askMalformed and the no-ask rule written from the text.
func TestPayAskVector(t *testing.T) {
	var v struct {
		Cases []struct {
			Name          string
			PayDifficulty uint32 `json:"pay_difficulty"`
			PayNonceHex   string `json:"pay_nonce_hex"`
			Outcome       string
		}
	}
	loadVector(t, "pay_ask.json", &v)
	if len(v.Cases) == 0 {
		t.Fatal("pay_ask.json has no cases")
	}
	for _, c := range v.Cases {
		a := &helloAck{PayDifficulty: c.PayDifficulty, PayNonce: unhex(t, c.PayNonceHex)}
		got := "ask"
		switch {
		case askMalformed(a):
			got = "malformed"
		case a.PayDifficulty == 0:
			got = "none"
		}
		if got != c.Outcome {
			t.Errorf("%s: %s, want %s", c.Name, got, c.Outcome)
		}
	}
}
