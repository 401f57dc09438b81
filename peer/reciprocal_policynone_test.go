package peer_test

import (
	"context"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/internal/testutil/testnode"
	"github.com/acaptcha/acaptcha/peer"
)

// A node with the library's default first-contact policy (AttestNone)
// still serves reciprocal requests (spec/protocol.md §1a). When the peer
// that asked is verify-first (§5c), the node's session is declined
// VERIFY_FIRST{WILL} while the peer's own session on it runs; the node
// said "asking again" and kept a timer, but its rescan asked only the
// peers its policy allows, so it never asked again and the peer waited
// for a verdict that never came (helper-119). A peer the node waits for
// because of a reciprocal request is now asked again whatever the policy.
func TestReciprocalToVerifyFirstAskedAgainUnderPolicyNone(t *testing.T) {
	sets := dependentSets(t)
	oracle := testutil.NewOracle(sets...)
	lib := testnode.New(t, testnode.Options{
		Config: peer.WithVerifyFirstRetry(peer.Config{AttestPolicy: peer.AttestNone, VerifyFirst: true}, 2*time.Second),
		Sets:   sets[:len(sets)/2], Brain: oracle, Memory: true,
	})
	vf := testnode.New(t, testnode.Options{
		Config: peer.Config{AttestPolicy: peer.AttestAll, VerifyFirst: true},
		Sets:   sets[len(sets)/2:], Brain: oracle, Memory: true,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// vf's first contact verifies lib, which declines VERIFY_FIRST{WILL}
	// and verifies vf first (its answer to the hello's request, §5c),
	// which vf declines VERIFY_FIRST in turn: whichever asks again first
	// is answered.
	if err := vf.Host().Connect(ctx, addrInfo(lib)); err != nil {
		t.Fatal(err)
	}
	// The oracle's sets are procedural: an accepted verdict on them
	// admits nobody under the default policy (NotAdmittedSource).
	verified := func(x, y *peer.Node) bool {
		adm := x.Admission(y.ID())
		return adm.Admitted || adm.Reason == peer.NotAdmittedSource
	}
	for ctx.Err() == nil {
		if verified(lib, vf) && verified(vf, lib) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("a policy-none node never verified the verify-first peer that asked it back: lib on vf %+v, vf on lib %+v",
		lib.Admission(vf.ID()), vf.Admission(lib.ID()))
}
