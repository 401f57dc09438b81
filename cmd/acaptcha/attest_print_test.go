package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
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
	type theirsJSON struct {
		Theirs struct {
			FromStore bool   `json:"from_store"`
			Stored    bool   `json:"stored"`
			IssuedAt  string `json:"issued_at"`
		} `json:"theirs"`
	}
	var v theirsJSON
	if err := json.Unmarshal(data, &v); err != nil || !v.Theirs.FromStore || !v.Theirs.Stored || v.Theirs.IssuedAt != "2026-11-26T03:19:04Z" {
		t.Fatalf("--json theirs: %s (%v)", data, err)
	}
	m.TheirsStored = false
	// A fresh verdict: not from the store, with its times too.
	if data, err = json.Marshal(mutualJSON(self.String(), m)); err != nil {
		t.Fatal(err)
	}
	v = theirsJSON{}
	if err := json.Unmarshal(data, &v); err != nil || v.Theirs.FromStore || v.Theirs.Stored || v.Theirs.IssuedAt != "2026-11-26T03:19:04Z" {
		t.Fatalf("--json fresh theirs: %s (%v)", data, err)
	}
	out.Reset()
	printMutual(&out, self.String(), m)
	if s := out.String(); strings.Contains(s, "earlier") || !strings.Contains(s, "verified us: ACCEPTED") {
		t.Fatalf("fresh verdict printed as:\n%s", s)
	}
}

// A one-shot attest whose LLM keeps failing to write a valid set gives
// up after a few attempts (the pool backs off up to a minute between
// them) instead of waiting out its whole --timeout.
func TestAttestGivesUpOnFailingGeneration(t *testing.T) {
	bad := testutil.BrainReply{Text: "OK"}
	srv := genStub(t, 0, bad, bad, bad, bad, bad, bad, bad, bad)
	dir := t.TempDir()
	t0 := time.Now()
	out, errOut, code := runMain(t, "attest", "--llm", "openai:stub", "--llm-base-url", srv.URL+"/v1", "--challenges", "llm",
		"--store", filepath.Join(dir, "db"), "--key", filepath.Join(dir, "key"), "--listen", "/ip4/127.0.0.1/tcp/0", "--timeout", "2m",
		"/ip4/127.0.0.1/tcp/9/p2p/12D3KooWGPwVBZLHKBYMqMotLPBtncFBe4jjAyAV5tSBg9vF4WSJ")
	if code == exitOK || !strings.Contains(errOut, "failed 3 times in a row") {
		t.Fatalf("exit %d after %v\n%s%s", code, time.Since(t0), out, errOut)
	}
	if d := time.Since(t0); d > time.Minute {
		t.Fatalf("gave up after %v", d)
	}
}

// With --json, attest's notice that it writes its challenge set before it
// dials is a JSON log record, not a text line on standard error.
func TestAttestJSONStderrIsJSON(t *testing.T) {
	srv := genStub(t, 1)
	dir := t.TempDir()
	out, errOut, code := runMain(t, "attest", "--json", "--log-level", "info", "--llm", "openai:stub", "--llm-base-url", srv.URL+"/v1", "--challenges", "llm",
		"--store", filepath.Join(dir, "db"), "--key", filepath.Join(dir, "key"), "--listen", "/ip4/127.0.0.1/tcp/0", "--timeout", "1m",
		"/ip4/127.0.0.1/tcp/9/p2p/12D3KooWGPwVBZLHKBYMqMotLPBtncFBe4jjAyAV5tSBg9vF4WSJ")
	if code != exitNetwork || !strings.Contains(errOut, "writing a challenge set") {
		t.Fatalf("exit %d, want %d after writing a set\n%s%s", code, exitNetwork, out, errOut)
	}
	for _, l := range strings.Split(strings.TrimSpace(errOut), "\n") {
		if l != "" && !json.Valid([]byte(l)) {
			t.Errorf("stderr line is not JSON: %q", l)
		}
	}
}

// A session in which no round ran (inconclusive: no set) printed
// "rtt 0s (credited 0s), domain " as if one had; the line is left out.
func TestPrintMutualNoRounds(t *testing.T) {
	_, self := testutil.NewKey(t)
	_, other := testutil.NewKey(t)
	m := &peer.Mutual{Peer: other, Ours: &protocol.Result{Peer: other, Verdict: skill.Verdict{Reason: skill.ReasonInconclusive, Detail: "no set"}}}
	var out bytes.Buffer
	printMutual(&out, self.String(), m)
	if s := out.String(); strings.Contains(s, "rtt ") || !strings.Contains(s, "INCONCLUSIVE") {
		t.Fatalf("printed:\n%s", s)
	}
	m.Ours.Verdict = skill.Verdict{Reason: skill.ReasonWrongAnswer, Domain: "aviation", Rounds: []skill.RoundRecord{{Round: 1, Answered: true}}}
	out.Reset()
	printMutual(&out, self.String(), m)
	if s := out.String(); !strings.Contains(s, "domain aviation") {
		t.Fatalf("a session with a round printed no rtt line:\n%s", s)
	}
}

// A peer that declined to be verified, seen from an attest without an
// LLM: its verdict of us is missing because this side has no LLM, not
// because the peer declined (which the text said).
func TestPrintDeclinedSaysWhyNotAsked(t *testing.T) {
	_, other := testutil.NewKey(t)
	for _, llm := range []string{"", "openai:x"} {
		var out bytes.Buffer
		a := &app{stdout: &out, llmSpec: llm}
		if err := a.printDeclined(other, protocol.ErrDeclined); err == nil {
			t.Fatal("declined peer accepted")
		}
		noLLM := strings.Contains(out.String(), "this side has no LLM")
		if noLLM != (llm == "") || strings.Contains(out.String(), "declines to be verified is not asked") == (llm == "") {
			t.Fatalf("llm %q:\n%s", llm, out.String())
		}
	}
}
