package secondtrust

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func loadVector(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "spec", "vectors", name))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// TestSupersedeVector: spec/vectors/supersede.json with this package's
// Supersedes and Consider, both ways round.
func TestSupersedeVector(t *testing.T) {
	type rec struct {
		IssuedAt  int64 `json:"issued_at"`
		ExpiresAt int64 `json:"expires_at"`
		Accepted  bool  `json:"accepted"`
	}
	var v struct {
		Description string `json:"description"`
		Cases       []struct {
			Name     string `json:"name"`
			A        rec    `json:"a"`
			B        rec    `json:"b"`
			Expected string `json:"expected"`
		} `json:"cases"`
	}
	loadVector(t, "supersede.json", &v)
	if len(v.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range v.Cases {
		a := Record{IssuedAt: c.A.IssuedAt, ExpiresAt: c.A.ExpiresAt, Accepted: c.A.Accepted, Source: "llm"}
		b := Record{IssuedAt: c.B.IssuedAt, ExpiresAt: c.B.ExpiresAt, Accepted: c.B.Accepted, Source: "procedural"}
		got := "tie"
		switch ab, ba := Supersedes(a, b), Supersedes(b, a); {
		case ab && ba:
			got = "both"
		case ab:
			got = "a"
		case ba:
			got = "b"
		}
		if got != c.Expected {
			t.Errorf("%s: got %s, want %s", c.Name, got, c.Expected)
		}
		// Consider: b held, a offered.
		want := map[string]Offer{"a": OfferNew, "b": OfferStale, "tie": OfferDuplicate}[c.Expected]
		if o := Consider(&b, a); o != want {
			t.Errorf("%s: offering a with b held: %s, want %s", c.Name, o, want)
		}
	}
}
