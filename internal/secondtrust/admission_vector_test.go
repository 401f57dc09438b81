package secondtrust

import (
	"sort"
	"testing"
)

// admissionVector is spec/vectors/admission.json.
type admissionVector struct {
	Description string `json:"description"`
	Now         int64  `json:"now"`
	Cases       []struct {
		Name          string           `json:"name"`
		Quorum        int              `json:"quorum"`
		RequireSource string           `json:"require_source"`
		Own           []vectorRecord   `json:"own"`
		Learned       []vectorRecord   `json:"learned"`
		Revoked       map[string]int64 `json:"revoked"`
		Expected      map[string]struct {
			Admitted bool     `json:"admitted"`
			Via      string   `json:"via"`
			Reason   string   `json:"reason"`
			Issuers  []string `json:"issuers"`
		} `json:"expected"`
	} `json:"cases"`
}

type vectorRecord struct {
	Issuer    string `json:"issuer"`
	Subject   string `json:"subject"`
	Accepted  bool   `json:"accepted"`
	IssuedAt  int64  `json:"issued_at"`
	ExpiresAt int64  `json:"expires_at"`
	Source    string `json:"source"`
}

// TestAdmissionVector: every case of spec/vectors/admission.json with this
// package's decision rules (names stand for peer IDs).
func TestAdmissionVector(t *testing.T) {
	var v admissionVector
	loadVector(t, "admission.json", &v)
	if len(v.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range v.Cases {
		st := State{Self: "self", Revoked: c.Revoked}
		for _, r := range c.Own {
			st.Own = append(st.Own, Record{Issuer: "self", Subject: r.Subject, Accepted: r.Accepted, IssuedAt: r.IssuedAt, ExpiresAt: r.ExpiresAt, Source: r.Source})
		}
		for _, r := range c.Learned {
			st.Learned = append(st.Learned, Learned{Record: Record(r)})
		}
		pol := Policy{Quorum: c.Quorum, MinSource: c.RequireSource}
		for p, want := range c.Expected {
			got := st.Admission(p, v.Now, pol)
			w := append([]string(nil), want.Issuers...)
			sort.Strings(w)
			if got.Admitted != want.Admitted || got.Via != want.Via || got.Reason != want.Reason || len(got.Issuers) != len(w) {
				t.Errorf("%s: %s: got %+v, want %+v", c.Name, p, got, want)
				continue
			}
			for i := range w {
				if got.Issuers[i] != w[i] {
					t.Errorf("%s: %s: issuers %v, want %v", c.Name, p, got.Issuers, w)
				}
			}
		}
	}
}
