package secondimpl2

import (
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
)

// TestVectorFraming reads every case of spec/vectors/framing.json with
// this implementation's frame reader (protocol.md §2).
func TestVectorFraming(t *testing.T) {
	var v struct {
		Cases []struct {
			Name, Sender, Outcome string
			BytesHex              string `json:"bytes_hex"`
			Message               map[string]json.RawMessage
		}
	}
	loadVector(t, "framing.json", &v)
	if len(v.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range v.Cases {
		capB := capProver
		if c.Sender == "verifier" {
			capB = capVerifier
		}
		got, err := readFrame(bufioReader(unhex(t, c.BytesHex)), capB)
		var outcome string
		switch {
		case err == nil:
			outcome = "frame"
		case errors.Is(err, errOversized):
			outcome = "oversized"
		case errors.Is(err, errPrefix), errors.Is(err, errDecode):
			outcome = "protocol_violation"
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			outcome = "stream_ended"
		default:
			outcome = err.Error()
		}
		if outcome != c.Outcome {
			t.Errorf("%s: %s (%v), want %s", c.Name, outcome, err, c.Outcome)
			continue
		}
		if outcome == "frame" {
			if want := frameFromJSON(t, c.Message); !reflect.DeepEqual(normFrame(got), normFrame(want)) {
				t.Errorf("%s: read %+v, want %+v", c.Name, got, want)
			}
		}
	}
}
