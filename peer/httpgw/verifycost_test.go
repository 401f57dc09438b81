package httpgw

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// A record the verify route has not checked costs its signature check
// in rate tokens, priced as gossip prices it (http.md §5): records of an
// RSA-4096 issuer cost 16 each, so a client's burst of 50 verifies three
// of them, not 50 (each fresh: a forged or new record is never cached).
func TestVerifyRoutePricesKeys(t *testing.T) {
	g, _, base := fakeDoor(t, nil)
	key, _, err := crypto.GenerateKeyPairWithReader(crypto.RSA, 4096, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	issuer, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	post := func(env []byte) int {
		resp, err := http.Post(base+"/v1/attestations/verify", "application/json",
			strings.NewReader(`{"attestation":"`+base64.StdEncoding.EncodeToString(env)+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	seal := func() []byte {
		_, subject := testutil.NewKey(t)
		return sealedTestRecord(t, key, issuer, subject)
	}
	first := seal()
	if code := post(first); code != http.StatusOK {
		t.Fatalf("first record: status %d", code)
	}
	served, limited := 1, 0
	for range 9 {
		switch code := post(seal()); code {
		case http.StatusOK:
			served++
		case http.StatusTooManyRequests:
			limited++
		default:
			t.Fatalf("status %d", code)
		}
	}
	// 50 tokens, 16 a fresh record (and the refill of a second or two).
	if served > 4 || limited == 0 {
		t.Fatalf("%d fresh RSA-4096 records verified of 10 (%d rate-limited), want at most 4", served, limited)
	}
	if n := g.verified.Checked(); n != uint64(served) {
		t.Fatalf("%d signature checks for %d records served", n, served)
	}
}
