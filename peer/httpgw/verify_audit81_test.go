package httpgw

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// audit-81: the verify route's cache named envelopes by the SHA-256 of
// their bytes, so one record in 20 variants (an unknown field appended,
// which the decoder skips) cost 20 signature checks, each one of the
// prefix's and the door's tokens spent on a check the sender never paid
// a signature for. The cache now names the signed record: 1 check.
func TestVerifyRouteChecksVariantsOnce(t *testing.T) {
	g, _, base := fakeDoor(t, nil)
	key, issuer := testutil.NewKey(t)
	_, subject := testutil.NewKey(t)
	env := sealedTestRecord(t, key, issuer, subject)
	const variants = 20
	for i := range variants {
		v := append([]byte(nil), env...)
		v = protowire.AppendTag(v, 15, protowire.VarintType)
		v = protowire.AppendVarint(v, uint64(i+1))
		resp, err := http.Post(base+"/v1/attestations/verify", "application/json",
			strings.NewReader(`{"attestation":"`+base64.StdEncoding.EncodeToString(v)+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("variant %d: status %d", i, resp.StatusCode)
		}
	}
	if n := g.verified.Checked(); n != 1 {
		t.Fatalf("%d signature checks for one record verified in %d variants, want 1", n, variants)
	}
}
