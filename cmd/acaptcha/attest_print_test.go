package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// A standing verdict on us from our store is printed as such, not as a
// session that just ran (text and --json).
func TestPrintMutualStoredVerdict(t *testing.T) {
	_, self := testutil.NewKey(t)
	_, other := testutil.NewKey(t)
	issued := time.Date(2026, 11, 26, 3, 19, 4, 0, time.UTC)
	m := &peer.Mutual{
		Peer: other,
		Ours: &protocol.Result{Peer: other, Verdict: skill.Verdict{Accepted: true, Reason: skill.ReasonOK}},
		Theirs: &protocol.ProverResult{Verifier: other, Accepted: true, Reason: skill.ReasonOK, Rounds: 3,
			Attestation: &protocol.Attestation{IssuedAt: issued, ExpiresAt: issued.Add(24 * time.Hour)}},
		TheirsStored: true,
	}
	var out bytes.Buffer
	printMutual(&out, self.String(), m)
	if s := out.String(); !strings.Contains(s, "verified us earlier") || !strings.Contains(s, "standing verdict from our store") ||
		!strings.Contains(s, "issued 2026-11-26T03:19:04Z") || strings.Contains(s, "verified and stored") {
		t.Fatalf("stored verdict printed as:\n%s", s)
	}
	data, err := json.Marshal(mutualJSON(self.String(), m))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Theirs struct {
			Stored   bool   `json:"stored"`
			IssuedAt string `json:"issued_at"`
		} `json:"theirs"`
	}
	if err := json.Unmarshal(data, &v); err != nil || !v.Theirs.Stored || v.Theirs.IssuedAt != "2026-11-26T03:19:04Z" {
		t.Fatalf("--json theirs: %s (%v)", data, err)
	}
	m.TheirsStored = false
	out.Reset()
	printMutual(&out, self.String(), m)
	if s := out.String(); strings.Contains(s, "earlier") || !strings.Contains(s, "verified us: ACCEPTED") {
		t.Fatalf("fresh verdict printed as:\n%s", s)
	}
}
