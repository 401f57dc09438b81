package protocol_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

var updateKindVector = flag.Bool("update-kind-vector", false, "rewrite spec/vectors/kind.json")

const kindVectorPath = "../spec/vectors/kind.json"

// The vector's kind is the one the Reasoning Gates seed's puzzles will
// take; none of set IDs, digests, frames or records needs it registered.
const kindVectorKind = "rebus"

type kindVectorFile struct {
	Description                  string                 `json:"description"`
	Kind                         string                 `json:"kind"`
	Set                          json.RawMessage        `json:"set"`
	HashedInputHex               string                 `json:"hashed_input_hex"`
	SetID                        string                 `json:"set_id"`
	NarrativeSetID               string                 `json:"narrative_set_id"`
	Transcript                   []attestVectorRound    `json:"transcript"`
	TranscriptDigestHex          string                 `json:"transcript_digest_hex"`
	NarrativeTranscriptDigestHex string                 `json:"narrative_transcript_digest_hex"`
	NoRoundTranscriptInputHex    string                 `json:"no_round_transcript_input_hex"`
	NoRoundTranscriptDigestHex   string                 `json:"no_round_transcript_digest_hex"`
	ChallengeFrameHex            string                 `json:"challenge_frame_hex"`
	DeclineFrameHex              string                 `json:"decline_frame_hex"`
	PayloadHex                   string                 `json:"payload_hex"`
	EnvelopeHex                  string                 `json:"envelope_hex"`
	VerifyAt                     string                 `json:"verify_at"`
	Expected                     json.RawMessage        `json:"expected"`
	Negative                     []attestVectorNegative `json:"negative"`
}

func kindVectorSet() *skill.Set {
	part := func(text, answer string) skill.Part {
		return skill.Part{Narrative: text, Questions: []skill.Question{{Question: "Which single word does the rebus spell?", Answer: answer}}}
	}
	return &skill.Set{Kind: kindVectorKind, Domain: "household objects", Parts: []skill.Part{
		part("[picture of a door key] + [picture of a wooden plank]", "keyboard"),
		part("[picture of a frying pan] + [picture of a birthday cake]", "pancake"),
		part("[picture of the sun] + [picture of a flower]", "sunflower"),
	}}
}

func kindVectorTranscript() []skill.RoundRecord {
	s := kindVectorSet()
	answers := []string{"keyboard", "Pancake", "sun flower"} // as received
	var out []skill.RoundRecord
	for i, p := range s.Parts {
		out = append(out, skill.RoundRecord{Round: i + 1, Narrative: p.Narrative, Question: p.Questions[0].Question, Answer: answers[i]})
	}
	return out
}

func kindBuildVector(t testing.TB) []byte {
	t.Helper()
	set := kindVectorSet()
	setJSON, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	var in []byte
	frame := func(s string) { in = append(binary.BigEndian.AppendUint64(in, uint64(len(s))), s...) }
	in = append(in, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	frame(set.Kind)
	frame(set.Domain)
	for _, p := range set.Parts {
		frame(p.Narrative)
		for _, q := range p.Questions {
			frame(q.Question)
			frame(q.Answer)
		}
	}
	narrative := *set
	narrative.Kind = ""
	tr := kindVectorTranscript()
	d := skill.TranscriptDigestKind(kindVectorKind, tr)
	nd := skill.TranscriptDigest(tr)
	// A session of the kind with no delivered round (a rejection before
	// round 1): the tag and the kind prefix alone.
	noRoundIn := binary.BigEndian.AppendUint32([]byte("acaptcha/transcript/v1"), 0xffffffff)
	noRoundIn = append(binary.BigEndian.AppendUint32(noRoundIn, uint32(len(kindVectorKind))), kindVectorKind...)
	nr := skill.TranscriptDigestKind(kindVectorKind, nil)

	c := &pb.Frame{Body: &pb.Frame_Challenge{Challenge: &pb.Challenge{Round: 1, Rounds: 3, Domain: set.Domain,
		Narrative: set.Parts[0].Narrative, Question: set.Parts[0].Questions[0].Question, BudgetMs: 15000, Kind: kindVectorKind}}}
	dec := &pb.Frame{Body: &pb.Frame_Decline{Decline: &pb.Decline{Reason: pb.DeclineReason_DECLINE_REASON_UNSUPPORTED_KIND, Detail: "kind rebus not answered here"}}}
	det := proto.MarshalOptions{Deterministic: true}
	cb, err := det.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	db, err := det.Marshal(dec)
	if err != nil {
		t.Fatal(err)
	}

	a, ik, _ := attestFixture(t)
	a.Kind, a.ChallengeDomain, a.SetID, a.TranscriptDigest = kindVectorKind, set.Domain, set.ContentID(), d[:]
	env := attestMustSeal(t, a, ik)
	var rec pb.AttestationRecord
	payload, err := a.MarshalRecord()
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(payload, &rec); err != nil {
		t.Fatal(err)
	}
	expected, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	bad := *a
	bad.Kind = "Rebus!"
	stamp := attestVerifyAt.UTC().Format(time.RFC3339)

	f := kindVectorFile{
		Description: "challenge kinds (spec/generation.md \"Kinds\", protocol.md §3, attestation.md §3.3, §3.4, §4) for a set of kind \"rebus\": " +
			"set_id frames the kind after eight 0xff bytes (narrative_set_id is the same content without a kind: the 1.0.0 framing); " +
			"the transcript digest inserts 0xffffffff and the framed kind after the tag, whether or not a round was delivered " +
			"(no_round_transcript_digest_hex: SHA-256 of no_round_transcript_input_hex, the tag and the kind prefix alone, for a session of the kind rejected before round 1); challenge_frame_hex is a Frame (no length prefix) whose Challenge carries kind in field 7; " +
			"decline_frame_hex a Decline with reason UNSUPPORTED_KIND (8); payload_hex/envelope_hex the attestation of attestation.json's keys and policy with kind in field 16, " +
			"verifying at verify_at; each negative case must fail with its error code.",
		Kind:                         kindVectorKind,
		Set:                          setJSON,
		HashedInputHex:               hex.EncodeToString(in),
		SetID:                        set.ContentID(),
		NarrativeSetID:               narrative.ContentID(),
		TranscriptDigestHex:          hex.EncodeToString(d[:]),
		NarrativeTranscriptDigestHex: hex.EncodeToString(nd[:]),
		NoRoundTranscriptInputHex:    hex.EncodeToString(noRoundIn),
		NoRoundTranscriptDigestHex:   hex.EncodeToString(nr[:]),
		ChallengeFrameHex:            hex.EncodeToString(cb),
		DeclineFrameHex:              hex.EncodeToString(db),
		PayloadHex:                   hex.EncodeToString(payload),
		EnvelopeHex:                  hex.EncodeToString(env),
		VerifyAt:                     stamp,
		Expected:                     expected,
		Negative: []attestVectorNegative{
			{Name: "malformed_kind", Description: "the record with kind \"Rebus!\" (not a kind name), correctly signed by the issuer", EnvelopeHex: hex.EncodeToString(attestSealUnchecked(t, &bad, ik)), VerifyAt: stamp, Error: "malformed"},
		},
	}
	for _, r := range tr {
		f.Transcript = append(f.Transcript, attestVectorRound{Round: r.Round, Narrative: r.Narrative, Question: r.Question, Answer: r.Answer})
	}
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

// TestKindVectorRegenerate checks that spec/vectors/kind.json is what
// the fixed inputs produce; with -update-kind-vector it rewrites it.
func TestKindVectorRegenerate(t *testing.T) {
	want := kindBuildVector(t)
	if *updateKindVector {
		if err := os.WriteFile(kindVectorPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(kindVectorPath)
	if err != nil {
		t.Fatalf("%v (run go test ./protocol -run TestKindVectorRegenerate -update-kind-vector)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("spec/vectors/kind.json is stale (rerun with -update-kind-vector and review the diff)")
	}
}

// TestKindVectorDecode reads the wire and record parts of the vector as
// an independent implementation would.
func TestKindVectorDecode(t *testing.T) {
	raw, err := os.ReadFile(kindVectorPath)
	if err != nil {
		t.Fatal(err)
	}
	var f kindVectorFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatal(err)
	}
	unhex := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var c pb.Frame
	if err := proto.Unmarshal(unhex(f.ChallengeFrameHex), &c); err != nil || c.GetChallenge().GetKind() != f.Kind || c.GetChallenge().GetRound() != 1 {
		t.Fatalf("challenge frame: %v kind %q", err, c.GetChallenge().GetKind())
	}
	// Field 7, wire type 2: tag 0x3a, then the length and the name.
	if tail := append([]byte{0x3a, byte(len(f.Kind))}, f.Kind...); !bytes.HasSuffix(unhex(f.ChallengeFrameHex), tail) {
		t.Fatal("challenge frame does not end with field 7")
	}
	// A kind session with no delivered round: the tag and the kind prefix.
	if nr := sha256.Sum256(unhex(f.NoRoundTranscriptInputHex)); hex.EncodeToString(nr[:]) != f.NoRoundTranscriptDigestHex ||
		skill.TranscriptDigestKind(f.Kind, nil) != nr || !bytes.HasPrefix(unhex(f.NoRoundTranscriptInputHex), []byte("acaptcha/transcript/v1\xff\xff\xff\xff")) {
		t.Fatal("no_round_transcript_digest_hex is not SHA-256 of the tag and the kind prefix")
	}
	var d pb.Frame
	if err := proto.Unmarshal(unhex(f.DeclineFrameHex), &d); err != nil || d.GetDecline().GetReason() != pb.DeclineReason_DECLINE_REASON_UNSUPPORTED_KIND || int32(d.GetDecline().GetReason()) != 8 {
		t.Fatalf("decline frame: %v %v", err, d.GetDecline())
	}

	payload := unhex(f.PayloadHex)
	var m pb.AttestationRecord
	if err := proto.Unmarshal(payload, &m); err != nil || m.GetKind() != f.Kind || m.GetSetId() != f.SetID || hex.EncodeToString(m.GetTranscriptDigest()) != f.TranscriptDigestHex {
		t.Fatalf("payload: %v kind %q set_id %q", err, m.GetKind(), m.GetSetId())
	}
	// Field 16, wire type 2: the two-byte tag 82 01 ends the payload.
	if tail := append([]byte{0x82, 0x01, byte(len(f.Kind))}, f.Kind...); !bytes.HasSuffix(payload, tail) {
		t.Fatal("payload does not end with field 16")
	}
	at, err := time.Parse(time.RFC3339, f.VerifyAt)
	if err != nil {
		t.Fatal(err)
	}
	a, _, err := protocol.VerifyAttestation(unhex(f.EnvelopeHex), protocol.VerifyOptions{Now: at})
	if err != nil || a.Kind != f.Kind || a.KindName() != f.Kind {
		t.Fatalf("envelope: %v", err)
	}
	got, _ := json.Marshal(a)
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(f.Expected, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) || w.(map[string]any)["kind"] != f.Kind {
		t.Fatalf("JSON view %s\nexpected %s", got, f.Expected)
	}
	for _, n := range f.Negative {
		_, _, err := protocol.VerifyAttestation(unhex(n.EnvelopeHex), protocol.VerifyOptions{Now: at})
		if want := attestSentinel(n.Error); want == nil || !errors.Is(err, want) {
			t.Errorf("%s: %v, want %s", n.Name, err, n.Error)
		}
	}
}

// TestKindRecordIssuerRules: narrative records carry no field 16 and the
// JSON view no kind; an issuer never spells the narrative kind out.
func TestKindRecordIssuerRules(t *testing.T) {
	a, ik, _ := attestFixture(t)
	payload, err := a.MarshalRecord()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(payload, []byte{0x82, 0x01}) {
		t.Fatal("a narrative record carries field 16")
	}
	if j, _ := json.Marshal(a); bytes.Contains(j, []byte(`"kind"`)) {
		t.Fatalf("narrative JSON view names a kind: %s", j)
	}
	a.Kind = skill.NarrativeKind
	if _, err := protocol.Seal(a, ik); !errors.Is(err, protocol.ErrMalformed) {
		t.Fatalf("seal with kind narrative spelled out: %v", err)
	}
	// A verifier reads it as narrative all the same.
	env := attestSealUnchecked(t, a, ik)
	got, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{Now: attestVerifyAt})
	if err != nil || got.KindName() != skill.NarrativeKind {
		t.Fatalf("verify: %v", err)
	}
}
