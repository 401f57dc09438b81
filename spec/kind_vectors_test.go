package spec

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

// TestKindVector: the set ID and the transcript digest of a set of a kind
// other than narrative follow attestation.md §3.3 and §4 byte for byte,
// and the same content without a kind keeps the 1.0.0 values. The wire
// and record parts of kind.json are checked in package protocol.
func TestKindVector(t *testing.T) {
	var v struct {
		Description                  string          `json:"description"`
		Kind                         string          `json:"kind"`
		Set                          json.RawMessage `json:"set"`
		HashedInputHex               string          `json:"hashed_input_hex"`
		SetID                        string          `json:"set_id"`
		NarrativeSetID               string          `json:"narrative_set_id"`
		TranscriptDigestHex          string          `json:"transcript_digest_hex"`
		NarrativeTranscriptDigestHex string          `json:"narrative_transcript_digest_hex"`
		NoRoundTranscriptInputHex    string          `json:"no_round_transcript_input_hex"`
		NoRoundTranscriptDigestHex   string          `json:"no_round_transcript_digest_hex"`
		Transcript                   []struct {
			Round     int    `json:"round"`
			Narrative string `json:"narrative"`
			Question  string `json:"question"`
			Answer    string `json:"answer"`
		} `json:"transcript"`
		// Checked by protocol's TestKindVectorDecode.
		ChallengeFrameHex string          `json:"challenge_frame_hex"`
		DeclineFrameHex   string          `json:"decline_frame_hex"`
		PayloadHex        string          `json:"payload_hex"`
		EnvelopeHex       string          `json:"envelope_hex"`
		VerifyAt          string          `json:"verify_at"`
		Expected          json.RawMessage `json:"expected"`
		Negative          json.RawMessage `json:"negative"`
	}
	decodeVector(t, "kind.json", &v)
	var set skill.Set
	if err := json.Unmarshal(v.Set, &set); err != nil {
		t.Fatal(err)
	}
	if set.Kind != v.Kind || v.Kind == skill.NarrativeKind || !skill.ValidKindName(v.Kind) {
		t.Fatalf("set kind %q, vector kind %q", set.Kind, v.Kind)
	}
	// The framing rebuilt from the rule: eight 0xff bytes, then every field
	// as an 8-byte big-endian length and its bytes, the kind first.
	var framed []byte
	put := func(s string) { framed = append(binary.BigEndian.AppendUint64(framed, uint64(len(s))), s...) }
	framed = append(framed, bytes.Repeat([]byte{0xff}, 8)...)
	put(set.Kind)
	narrativeStart := len(framed)
	put(set.Domain)
	for _, p := range set.Parts {
		put(p.Narrative)
		for _, q := range p.Questions {
			put(q.Question)
			put(q.Answer)
		}
	}
	in, err := hex.DecodeString(v.HashedInputHex)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(in, framed) {
		t.Fatal("hashed input does not follow the framing rule")
	}
	sum := sha256.Sum256(in)
	if hex.EncodeToString(sum[:16]) != v.SetID || set.ContentID() != v.SetID {
		t.Fatalf("set_id %s, ContentID %s, hash %x", v.SetID, set.ContentID(), sum[:16])
	}
	nsum := sha256.Sum256(in[narrativeStart:])
	set.Kind = ""
	if hex.EncodeToString(nsum[:16]) != v.NarrativeSetID || set.ContentID() != v.NarrativeSetID || v.NarrativeSetID == v.SetID {
		t.Fatal("narrative_set_id is not the 1.0.0 framing of the same content")
	}

	var rounds []skill.RoundRecord
	digestIn := []byte("acaptcha/transcript/v1")
	digestIn = binary.BigEndian.AppendUint32(digestIn, 0xffffffff)
	digestIn = binary.BigEndian.AppendUint32(digestIn, uint32(len(v.Kind)))
	digestIn = append(digestIn, v.Kind...)
	// With no delivered round (a session of the kind rejected before round
	// 1) the digest is SHA-256 of the tag and the kind prefix alone: the
	// prefix does not wait for a first round (attestation.md §4).
	noRound, err := hex.DecodeString(v.NoRoundTranscriptInputHex)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(noRound, digestIn) {
		t.Fatalf("no_round_transcript_input_hex %x, want the tag and the kind prefix %x", noRound, digestIn)
	}
	nr := sha256.Sum256(noRound)
	if hex.EncodeToString(nr[:]) != v.NoRoundTranscriptDigestHex || skill.TranscriptDigestKind(v.Kind, nil) != nr {
		t.Fatal("no_round_transcript_digest_hex is not SHA-256 of the tag and the kind prefix")
	}
	if skill.TranscriptDigest(nil) == nr {
		t.Fatal("a kind session with no round has the narrative digest of the tag alone")
	}
	narrativeIn := []byte("acaptcha/transcript/v1")
	for _, r := range v.Transcript {
		rounds = append(rounds, skill.RoundRecord{Round: r.Round, Narrative: r.Narrative, Question: r.Question, Answer: r.Answer})
		var b []byte
		b = binary.BigEndian.AppendUint32(b, uint32(r.Round))
		for _, f := range []string{r.Narrative, r.Question, r.Answer} {
			b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
			b = append(b, f...)
		}
		digestIn = append(digestIn, b...)
		narrativeIn = append(narrativeIn, b...)
	}
	if len(rounds) != skill.Parts {
		t.Fatalf("%d transcript rounds", len(rounds))
	}
	d, nd := sha256.Sum256(digestIn), sha256.Sum256(narrativeIn)
	if hex.EncodeToString(d[:]) != v.TranscriptDigestHex || skill.TranscriptDigestKind(v.Kind, rounds) != d {
		t.Fatal("transcript_digest_hex does not follow the kind framing")
	}
	if hex.EncodeToString(nd[:]) != v.NarrativeTranscriptDigestHex || skill.TranscriptDigest(rounds) != nd || skill.TranscriptDigestKind(skill.NarrativeKind, rounds) != nd {
		t.Fatal("narrative_transcript_digest_hex is not the 1.0.0 digest")
	}
}
