package secondimpl2

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"

	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
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

// TestVectorHTTPStart builds spec/vectors/http_start.json's start message
// with this implementation's encoder (http.md §4.2) and checks its key
// proof and payment.
func TestVectorHTTPStart(t *testing.T) {
	var v struct {
		Verifier  string `json:"verifier_peer_id"`
		Subject   string `json:"subject_peer_id"`
		SessionID string `json:"session_id"`
		Nonce     []byte `json:"nonce"`
		D         int    `json:"pow_difficulty"`
		MsgHex    string `json:"start_message_hex"`
		Msg       []byte `json:"start_message"`
		Request   struct {
			PublicKey []byte `json:"public_key"`
			Signature []byte `json:"signature"`
			Pow       []byte `json:"pow"`
		} `json:"request"`
		Other []byte `json:"signature_of_another_session"`
	}
	loadVector(t, "http_start.json", &v)
	vid, err1 := lpeer.Decode(v.Verifier)
	sid, err2 := lpeer.Decode(v.Subject)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	msg := startMessage(v.SessionID, v.Nonce, []byte(vid), []byte(sid))
	if hex.EncodeToString(msg) != v.MsgHex || !bytes.Equal(msg, v.Msg) {
		t.Fatalf("start message %x, vector %s", msg, v.MsgHex)
	}
	pub, err := lcrypto.UnmarshalPublicKey(v.Request.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := lpeer.IDFromPublicKey(pub); err != nil || id != sid {
		t.Fatalf("public key of %s (%v)", id, err)
	}
	if ok, err := pub.Verify(msg, v.Request.Signature); !ok || err != nil {
		t.Fatalf("signature: %v", err)
	}
	if ok, _ := pub.Verify(msg, v.Other); ok {
		t.Fatal("another session's signature verifies")
	}
	if !powValid(v.Nonce, []byte(sid), v.Request.Pow, v.D) {
		t.Fatal("pow does not pay")
	}
}
