package peer

import (
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// audit84: the issue clock dates a record up to a minute after the
// previous one about the same subject (attestation.md §5): a peer that
// had a burst of sessions holds an acceptance of this node dated ahead
// of the clock. Revoke dated the revocation by the clock, and a record
// counts when issued after the revocation (issued_at later than it), so
// that acceptance, issued before the revocation, kept admitting the peer
// directly: the operator's revocation did not take. The revocation is now
// dated no earlier than the node's own newest record of the peer.
func TestRevokeAudit84OwnRecordDatedAhead(t *testing.T) {
	n := newBareNode(t, Config{RequireSource: AnySource})
	now := time.Now()
	newTestClock(n, now)
	_, p := testutil.NewKey(t)
	// The issue clock's lead after a burst of sessions (protocol/issued.go).
	directlyAdmit(t, n, p, now.Add(20*time.Second))
	if adm := n.Admission(p); !adm.Admitted || adm.Via != AdmittedDirect {
		t.Fatalf("before the revocation: %+v", adm)
	}
	if err := n.Revoke(p); err != nil {
		t.Fatal(err)
	}
	if adm := n.Admission(p); adm.Admitted || adm.Reason != NotAdmittedRevoked {
		t.Fatalf("after the revocation, the acceptance issued before it still admits the peer: %+v", adm)
	}
	// A new session after the revocation is dated after the record
	// before it (the issue clock), and admits the peer again.
	directlyAdmit(t, n, p, now.Add(21*time.Second))
	if adm := n.Admission(p); !adm.Admitted || adm.Via != AdmittedDirect {
		t.Fatalf("a record issued after the revocation: %+v", adm)
	}
}
