package peer

import (
	"context"
	"math"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
)

// A record whose expires_at lies beyond what Go's time.Time holds (Unix
// seconds above 2^63 − 62,135,596,800, attestation.md §6, steps 11 and
// 12) is valid by the spec, far in the future, but its time.Time wraps
// into the distant past: expires_at − issued_at came out negative, so the
// 30-day keeping rule (trust.md §3.6) passed it. Gossip forwarded and
// learned it ("ok" instead of "lifetime"), a session's verdict was
// stored, and the store's prune, which compares Unix seconds, never
// deleted it while the memory index dropped it as expired within ten
// minutes, freeing the learned caps for more: the store grew without
// bound. The lifetime is now measured in Unix seconds.
func TestRecordLifetimeBeyondGoTime(t *testing.T) {
	n := newBareNode(t, Config{})
	now := time.Now()
	vk, verifier := testutil.NewKey(t)
	for _, exp := range []int64{math.MaxInt64, math.MaxInt64 - 62135596800 + 1, math.MaxInt64 - 62135596800} {
		seal := func(subject string, accepted bool) ([]byte, *protocol.Attestation) {
			t.Helper()
			_, sid := testutil.NewKey(t)
			if subject == "self" {
				sid = n.ID()
			}
			a := MakeTestAttestation(vk, sid, accepted, now, time.Hour)
			a.ExpiresAt = time.Unix(exp, 0).UTC()
			env, err := protocol.Seal(a, vk)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{Now: now})
			if err != nil {
				t.Fatalf("expires_at %d: %v (valid by attestation.md §6)", exp, err)
			}
			return env, got
		}
		g, _ := seal("other", true)
		if got := n.validateGossip(context.Background(), verifier, gossipMsg(g, verifier)); got != pubsub.ValidationIgnore {
			t.Errorf("expires_at %d: gossip %v, want ignore (lifetime)", exp, got)
		}
		if res, _ := LearnEnvelope(n, g, ViaPresentation, verifier); res != "lifetime" {
			t.Errorf("expires_at %d: learn %q, want lifetime", exp, res)
		}
		env, a := seal("self", false)
		before, err := n.store.List(Received, "")
		if err != nil {
			t.Fatal(err)
		}
		n.recordReceived(protocol.ProverResult{Verifier: verifier, Attestation: a, Envelope: env, Reason: a.Reason})
		if rs, err := n.store.List(Received, ""); err != nil || len(rs) != len(before) {
			t.Errorf("expires_at %d: %d received records stored (%v), want none", exp, len(rs)-len(before), err)
		}
	}
	// Nothing was learned; a store that learned such a record before
	// drops it at the next prune, although it has not expired.
	if ls, _, err := n.store.ListLearned(""); err != nil || len(ls) != 0 {
		t.Errorf("learned records stored: %d (%v), want 0", len(ls), err)
	}
	_, subject := testutil.NewKey(t)
	a := MakeTestAttestation(vk, subject, true, now, time.Hour)
	a.ExpiresAt = time.Unix(math.MaxInt64, 0).UTC()
	env, err := protocol.Seal(a, vk)
	if err != nil {
		t.Fatal(err)
	}
	_, other := testutil.NewKey(t)
	af2 := MakeTestAttestation(vk, other, true, now, MaxKeptLifetime)
	fine2, err := protocol.Seal(af2, vk)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.store.PutLearned(Learned{Attestation: a, Envelope: env, Via: ViaGossip, LearnedAt: now},
		Learned{Attestation: af2, Envelope: fine2, Via: ViaGossip, LearnedAt: now}); err != nil {
		t.Fatal(err)
	}
	if k, err := n.store.PruneLearned(now.Add(time.Hour), MaxKeptLifetime); err != nil || k != 1 {
		t.Errorf("prune: %d deleted (%v), want 1", k, err)
	}
	if ls, _, err := n.store.ListLearned(""); err != nil || len(ls) != 1 || ls[0].Attestation.Subject != other {
		t.Errorf("after prune: %d learned records (%v), want the 30-day one", len(ls), err)
	}
}
