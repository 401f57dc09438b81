package peer

import (
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// A full declined set forgets its stale entries (older than
// mutualWaitFor, which count for nothing) before a recent one: a flood of
// fresh peer IDs declined VERIFY_FIRST does not push out an honest peer
// that declined us a minute ago while stale entries remain. With one
// arbitrary eviction per new peer, 3,500 new peers pushed it out in more
// than half of the runs.
func TestPeerSetEvictsStaleFirst(t *testing.T) {
	now := time.Now()
	var s peerSet
	honest := peer.ID("honest")
	s.add(honest, now.Add(-time.Minute))
	for i := range maxSolicited - 1 {
		s.add(peer.ID(fmt.Sprint("stale-", i)), now.Add(-2*mutualWaitFor))
	}
	if len(s) != maxSolicited {
		t.Fatalf("set holds %d, want %d", len(s), maxSolicited)
	}
	for i := range 3500 {
		s.add(peer.ID(fmt.Sprint("flood-", i)), now)
		if len(s) > maxSolicited {
			t.Fatalf("set grew to %d past its bound %d", len(s), maxSolicited)
		}
	}
	if !s.recent(honest, mutualWaitFor) {
		t.Fatal("the honest peer's recent entry was pushed out while stale ones remained")
	}
}
