package peer

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/protocol/pb"
)

// Two verify-first nodes that asked each other at once each got
// VERIFY_FIRST; the lower peer ID asks again after about 5 s and is
// answered, the higher after about 30 s (verifyFirstRetry). Once the
// lower has accepted the higher in its session, it answers the higher's
// (spec §5c), yet the higher kept its timer: the pair stayed attested
// one way for 22-38 s. An acceptance received from a peer we wait for
// now brings our session back to it forward (verifiedUs); a rejection,
// and a back-off that is not such a wait, keep their times.
func TestVerifiedUsBringsTheSessionBackForward(t *testing.T) {
	n := newBareNode(t, Config{Source: exampleCorpus(t), AttestPolicy: AttestNone, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	now := time.Now()
	vk, verifier := testutil.NewKey(t)
	wait := func(p peer.ID) {
		t.Helper()
		will := &protocol.VerifyFirstError{Peer: p, Reciprocal: pb.Reciprocal_RECIPROCAL_WILL}
		n.recordContact(p, nil, fmt.Errorf("verify: %w", will), false)
		n.contact.mu.Lock()
		defer n.contact.mu.Unlock()
		// Whatever the peer IDs' order, a timer ahead of the acceptance
		// to come (verifyFirstQuickRetry is 3.75 s at the least).
		if b := n.contact.backoff[p]; b == nil || !b.waitingFirst || time.Until(b.until) < 3*time.Second {
			t.Fatalf("after VERIFY_FIRST WILL: back-off %+v, want a wait of seconds", b)
		}
	}
	until := func(p peer.ID) time.Time {
		n.contact.mu.Lock()
		defer n.contact.mu.Unlock()
		if b := n.contact.backoff[p]; b != nil {
			return b.until
		}
		return time.Time{}
	}
	received := func(accepted bool) {
		t.Helper()
		a := MakeTestAttestation(vk, n.ID(), accepted, now, time.Hour)
		env, err := protocol.Seal(a, vk)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		n.recordReceived(protocol.ProverResult{Verifier: verifier, Accepted: accepted, Reason: got.Reason, Attestation: got, Envelope: env})
	}

	// A rejection from the peer we wait for: the timer stands (it will
	// not answer us).
	wait(verifier)
	before := until(verifier)
	received(false)
	if got := until(verifier); !got.Equal(before) {
		t.Fatalf("after the peer rejected us: retry at %s, want it unchanged at %s", got, before)
	}
	// Its acceptance: asked again within verifiedUsRetry (jittered).
	received(true)
	if left := time.Until(until(verifier)); left > verifiedUsRetry*5/4 {
		t.Fatalf("after the peer accepted us: retry in %s, want at most %s", left, verifiedUsRetry*5/4)
	}

	// A back-off that is no such wait (a rejection of ours, a decline)
	// is not shortened by the peer's acceptance.
	_, other := testutil.NewKey(t)
	unspecified := &protocol.VerifyFirstError{Peer: other, Reciprocal: pb.Reciprocal_RECIPROCAL_UNSPECIFIED}
	n.recordContact(other, nil, unspecified, false)
	before = until(other)
	n.verifiedUs(other)
	if got := until(other); !got.Equal(before) || time.Until(got) < time.Minute {
		t.Fatalf("a back-off from a decline: retry at %s after the peer accepted us, want it unchanged at %s", got, before)
	}
	// A peer without a back-off gets none.
	_, stranger := testutil.NewKey(t)
	n.verifiedUs(stranger)
	if got := until(stranger); !got.IsZero() {
		t.Fatalf("a peer with no back-off: one until %s made", got)
	}
}
