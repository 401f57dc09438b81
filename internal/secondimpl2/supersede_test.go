package secondimpl2

import "testing"

// supRec is what trust.md §1's superseding order reads of a record.
type supRec struct {
	IssuedAt  int64 `json:"issued_at"`
	ExpiresAt int64 `json:"expires_at"`
	Accepted  bool  `json:"accepted"`
}

// supersedes is trust.md §1, Superseding: the later issued_at; at equal
// issued_at a rejection over an acceptance; then the later expires_at. A
// full tie supersedes nothing.
func supersedes(a, b supRec) bool {
	if a.IssuedAt != b.IssuedAt {
		return a.IssuedAt > b.IssuedAt
	}
	if a.Accepted != b.Accepted {
		return !a.Accepted
	}
	return a.ExpiresAt > b.ExpiresAt
}

func TestSupersedeVector(t *testing.T) {
	var v struct {
		Cases []struct {
			Name     string `json:"name"`
			A        supRec `json:"a"`
			B        supRec `json:"b"`
			Expected string `json:"expected"`
		} `json:"cases"`
	}
	loadVector(t, "supersede.json", &v)
	if len(v.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range v.Cases {
		got := "tie"
		switch ab, ba := supersedes(c.A, c.B), supersedes(c.B, c.A); {
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
	}
}
