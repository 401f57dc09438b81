package mcpserver_test

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/peer/mcpserver"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// TestHTTPVerifyPricesKeys (audit 87): the HTTP door's verify route
// charges a record it has not checked its signature check's price in
// rate tokens (http.md §5, 1.4.19), but the MCP door's
// verify_attestation, reachable from beyond loopback over --http at the
// same rate, took one request for any record: fresh records under an
// RSA-4096 key (16 Ed25519 checks each; RSA-8192: 64, 2.4 ms) cost their
// sender a token each. They are priced as at the HTTP door now, from the
// caller network's rate, and a record checked before costs a hash.
func TestHTTPVerifyPricesKeys(t *testing.T) {
	h := newHTTPHandler(t, mcpserver.HTTPConfig{RequestRate: 0.001, RequestBurst: 50})
	ts := remoteServer(t, h)
	const from = "192.0.2.9:4000"
	code, sid := initializeFrom(t, ts.URL, from)
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q", code, sid)
	}
	remote := from
	post := func(body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		if remote != "" {
			req.Header.Set("X-Test-Remote", remote)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b)
	}
	if code, body := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", code, body)
	}
	key, _, err := crypto.GenerateKeyPairWithReader(crypto.RSA, 4096, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	issuer, err := lpeer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	verify := func(env []byte) (int, string) {
		return post(fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"verify_attestation","arguments":{"record":%q}}}`,
			base64.StdEncoding.EncodeToString(env)))
	}
	served, refused := 0, 0
	for i := range 10 {
		code, body := verify(rsaRecord(t, key, issuer))
		switch {
		case code == http.StatusOK && strings.Contains(body, `\"valid\":true`):
			served++
		case code == http.StatusTooManyRequests || strings.Contains(body, "costs 16 requests"):
			refused++
		default:
			t.Fatalf("verify %d: %d %.400s", i, code, body)
		}
	}
	t.Logf("10 fresh RSA-4096 records from a network whose burst is 50: %d verified, %d refused", served, refused)
	if served > 4 || refused == 0 {
		t.Fatalf("%d fresh RSA-4096 records verified of 10, want at most 4 (16 tokens each of 50)", served)
	}
	// A loopback caller (the node's own agent) is not charged.
	remote = ""
	if code, sid = initializeFrom(t, ts.URL, ""); code != http.StatusOK {
		t.Fatalf("loopback initialize: %d", code)
	}
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for i := range 5 {
		if code, body := verify(rsaRecord(t, key, issuer)); code != http.StatusOK || !strings.Contains(body, `\"valid\":true`) {
			t.Fatalf("loopback verify %d: %d %.400s", i, code, body)
		}
	}
}

// rsaRecord seals a fresh acceptance of a new subject under key.
func rsaRecord(t *testing.T, key crypto.PrivKey, issuer lpeer.ID) []byte {
	t.Helper()
	_, subject := testutil.NewKey(t)
	nonce, digest := make([]byte, protocol.NonceBytes), make([]byte, protocol.DigestBytes)
	_, _ = rand.Read(nonce)
	_, _ = rand.Read(digest)
	now := time.Now().UTC().Truncate(time.Second)
	env, err := protocol.Seal(&protocol.Attestation{
		Issuer: issuer, Subject: subject, Accepted: true, Reason: skill.ReasonOK, Nonce: nonce, TranscriptDigest: digest,
		Policy:          protocol.PolicySummary{Rounds: 1, Tau: 15 * time.Second, Total: 2 * time.Minute, RTTCredit: 500 * time.Millisecond},
		ChallengeDomain: "test", SetID: "set", IssuedAt: now, ExpiresAt: now.Add(time.Hour),
		SpecVersion: protocol.SpecVersion, Provenance: skill.Provenance{Source: skill.SourceProcedural},
		Rounds: []protocol.RoundTiming{{Round: 1, Budget: 15 * time.Second, Effective: time.Second, NarrativeTokens: 500, Correct: true}},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	return env
}
