package spec

import (
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/peer/store"
)

// TestSupersedeVector: the superseding order of trust.md §1 is exactly as
// spec/vectors/supersede.json says, both ways round, as the node's store
// and trust index decide it (store.Supersedes).
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
	decodeVector(t, "supersede.json", &v)
	if len(v.Cases) == 0 {
		t.Fatal("no cases")
	}
	sup := func(x, y rec) bool {
		return store.Supersedes(time.Unix(x.IssuedAt, 0).UTC(), time.Unix(x.ExpiresAt, 0).UTC(), x.Accepted,
			time.Unix(y.IssuedAt, 0).UTC(), time.Unix(y.ExpiresAt, 0).UTC(), y.Accepted)
	}
	for _, c := range v.Cases {
		ab, ba := sup(c.A, c.B), sup(c.B, c.A)
		got := "tie"
		switch {
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
