package protocol

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/acaptcha/acaptcha/protocol/pb"
)

// framingVectorFile is spec/vectors/framing.json: how a receiver reads one
// frame (spec/protocol.md §2), malformed ones included.
type framingVectorFile struct {
	Description string `json:"description"`
	Cases       []struct {
		Name     string          `json:"name"`
		Sender   string          `json:"sender"`
		BytesHex string          `json:"bytes_hex"`
		Outcome  string          `json:"outcome"`
		Message  json.RawMessage `json:"message"`
		Note     string          `json:"note"`
	} `json:"cases"`
}

// framingOutcome classifies readFrame's result as the vector names it.
func framingOutcome(err error) string {
	var fe *frameError
	switch {
	case err == nil:
		return "frame"
	case errors.As(err, &fe) && fe.code == ErrCodeOversized:
		return "oversized"
	case errors.As(err, &fe) && fe.code == ErrCodeProtocolViolation:
		return "protocol_violation"
	case errors.As(err, &fe) && fe.code == 0:
		return "stream_ended"
	}
	return "unclassified: " + err.Error()
}

// TestFramingVector reads every case of spec/vectors/framing.json through
// the receiver's frame reader, with the cap of the frame's sender.
func TestFramingVector(t *testing.T) {
	var f framingVectorFile
	loadVector(t, "framing.json", &f)
	if len(f.Cases) == 0 {
		t.Fatal("no cases")
	}
	seen := map[string]bool{}
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			raw, err := hex.DecodeString(c.BytesHex)
			if err != nil {
				t.Fatal(err)
			}
			max := MaxVerifierFrame
			switch c.Sender {
			case "verifier":
			case "prover":
				max = MaxProverFrame
			default:
				t.Fatalf("sender %q", c.Sender)
			}
			var got pb.Frame
			err = readFrame(newFrameReader(bytes.NewReader(raw), max), &got)
			if o := framingOutcome(err); o != c.Outcome {
				t.Fatalf("outcome %s (%v), want %s", o, err, c.Outcome)
			}
			seen[c.Outcome] = true
			if c.Outcome != "frame" {
				if len(c.Message) > 0 {
					t.Fatal("a message for a frame that does not read")
				}
				return
			}
			var want pb.Frame
			if err := protojson.Unmarshal(c.Message, &want); err != nil {
				t.Fatal(err)
			}
			// Unknown fields are ignored (§2): compare what the JSON
			// mapping shows.
			j, err := protojson.Marshal(&got)
			if err != nil {
				t.Fatal(err)
			}
			var shown pb.Frame
			if err := protojson.Unmarshal(j, &shown); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(&shown, &want) {
				t.Fatalf("read %v, want %v", &shown, &want)
			}
		})
	}
	for _, o := range []string{"frame", "oversized", "protocol_violation", "stream_ended"} {
		if !seen[o] {
			t.Errorf("no case with outcome %s", o)
		}
	}
}
