package peer_test

// Audit (helper-89): the connection manager's protection of attested
// peers. Each failed on the code it was written against.

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/peer"
)

// TestAttestedProtectionFollowsAdmission_audit89: the node protects a peer
// it accepted in the connection manager while the peer is connected
// (tagIssued). libp2p's connection manager keeps a protection until it is
// lifted, connected or not, and the node lifted it only on Revoke: every
// peer ID ever accepted stayed in the manager's table for the life of the
// process (one entry per acceptance, never bounded), and kept its
// protection when its attestation ended or a later session rejected it,
// so peer IDs accepted once could fill the connections with protected
// ones for good, trimmed only after every honest unprotected peer. The
// protection now follows the acceptance while connected: lifted when the
// last connection closes and when a later verdict rejects the peer,
// given again (with the tag) when an accepted peer comes back.
func TestAttestedProtectionFollowsAdmission_audit89(t *testing.T) {
	sets := dependentSets(t)
	oracle := testutil.NewOracle(sets...)
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	v := startNode(t, nodeOpts{sets: sets})
	good := startNode(t, nodeOpts{brain: oracle, memory: true, sets: sets, key: key})
	cm := v.Host().ConnManager()
	protected := func() bool { return cm.IsProtected(good.ID(), "acaptcha") }
	tagged := func() bool {
		ti := cm.GetTagInfo(good.ID())
		return ti != nil && ti.Tags[peer.TagAttested] > 0
	}

	if got := verifyOnce(t, v, good); !got.Accepted {
		t.Fatalf("not accepted: %+v", got)
	}
	if !protected() || !tagged() {
		t.Fatalf("accepted peer: protected %v, tagged %v", protected(), tagged())
	}

	// Gone: nothing of it stays in the manager.
	_ = v.Host().Network().ClosePeer(good.ID())
	eventually(t, 5*time.Second, "the protection of a disconnected peer lifted", func() bool { return !protected() })

	// Back, still accepted: protected and tagged again without a session.
	ctx := ctxT(t, 10*time.Second)
	if err := v.Host().Connect(ctx, addrInfo(good)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "an accepted peer that came back protected and tagged", func() bool { return protected() && tagged() })

	// The same identity, now behind a script: rejected, no longer protected.
	if err := good.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the protection lifted as the peer left", func() bool { return !protected() })
	bad := startNode(t, nodeOpts{brain: testutil.NewKeywordScript(), memory: true, sets: sets, key: key})
	if err := v.Host().Connect(ctx, addrInfo(bad)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the accepted identity protected again", protected)
	if got := verifyOnce(t, v, bad); got.Accepted {
		t.Fatalf("script accepted: %+v", got)
	}
	if protected() || tagged() {
		t.Fatalf("rejected peer: protected %v, tagged %v", protected(), tagged())
	}
}
