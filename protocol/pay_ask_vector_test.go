package protocol

import (
	"encoding/hex"
	"testing"
)

// TestPayAskVectors checks spec/vectors/pay_ask.json against payAsk, the
// verifier's reading of a hello ack's payment fields (§5b).
func TestPayAskVectors(t *testing.T) {
	var v struct {
		Description string
		Cases       []struct {
			Name          string
			PayDifficulty uint32 `json:"pay_difficulty"`
			PayNonceHex   string `json:"pay_nonce_hex"`
			Outcome       string
		}
	}
	loadVector(t, "pay_ask.json", &v)
	seen := map[string]int{}
	for _, c := range v.Cases {
		nonce, err := hex.DecodeString(c.PayNonceHex)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		asked, err := payAsk(c.PayDifficulty, nonce)
		got := "none"
		switch {
		case err != nil:
			got = "malformed"
		case asked:
			got = "ask"
		}
		if got != c.Outcome {
			t.Errorf("%s: D_v %d, nonce of %d bytes: %s (%v), want %s", c.Name, c.PayDifficulty, len(nonce), got, err, c.Outcome)
		}
		seen[c.Outcome]++
	}
	if seen["none"] == 0 || seen["ask"] == 0 || seen["malformed"] == 0 {
		t.Errorf("pay_ask.json covers %v, want every outcome", seen)
	}
}
