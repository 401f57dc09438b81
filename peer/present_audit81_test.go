package peer

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
)

// audit-81: the presented-envelope cache (spec/trust.md §3.5) was keyed
// by the SHA-256 of an envelope's bytes, and an envelope's decoder skips
// unknown fields: one record, sealed once, in 32 variants (an unknown
// field appended) made a presentation of 32 full signature checks, not 1
// (2.4 ms each under an RSA-8192 issuer key), and each further
// presentation 32 more, though the spec says a replay costs a hash and
// only a fresh envelope costs its signer a signature. The cache now
// names a record as the gossip message ID does (the decoded key, payload
// type, payload and signature).
func TestPresentedEnvelopeVariantsVerifiedOnce(t *testing.T) {
	vk, _ := testutil.NewKey(t)
	v := newBareNode(t, Config{Key: vk, RequireSource: AnySource, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	a := presentHost(t)
	ik, _ := testutil.NewKey(t)
	// A rejection: verified, skipped, so the presentation reads all 32.
	env := SealTest(ik, a.ID(), false, time.Now(), time.Hour)
	envs := make([][]byte, MaxPresented)
	for i := range envs {
		envs[i] = envelopeVariant(env, uint64(i+1))
		if _, _, err := protocol.VerifyAttestation(envs[i], protocol.VerifyOptions{Subject: a.ID()}); err != nil {
			t.Fatalf("variant %d does not verify: %v", i, err)
		}
	}
	for i := range 2 {
		if got, err := presentRaw(t, a, v, envs...); err != nil || got != 0 {
			t.Fatalf("presentation %d: learned %d, %v", i+1, got, err)
		}
	}
	if n := v.presentSeen.Checked(); n != 1 {
		t.Fatalf("%d signature checks for one record presented in %d variants twice, want 1", n, MaxPresented)
	}
	// A longer variant than an envelope may be is still refused, cached
	// record or not.
	big := envelopeVariant(env, 0)
	for len(big) <= protocol.MaxEnvelopeBytes {
		big = append(big, envelopeVariant(nil, 1<<60)...)
	}
	if _, _, err := v.presentSeen.Verify(big, protocol.VerifyOptions{}); err == nil {
		t.Fatalf("a %d-byte variant of a cached record verified", len(big))
	}
}
