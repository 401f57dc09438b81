package peer

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// TestPeerReportSkipsOwnSignatures_audit83: acaptcha peers over a store
// (PeerReport) loaded the trust index without the node's key, so it
// checked the signature of the newest issued record of every subject: one
// per peer ID a remote made the node verify (some 744,000 at the default
// draw budget and retention; ~150 µs each on a loaded machine, about two
// minutes), where the node itself, at start, takes its own records with
// every check but the signature (spec/trust.md §5). The report now takes
// the node's identity and key from its newest issued record (verified)
// and loads the index as the node does.
func TestPeerReportSkipsOwnSignatures_audit83(t *testing.T) {
	const issued = 3000
	self, _ := testutil.NewKey(t)
	path := filepath.Join(t.TempDir(), "store.db")
	fillStartupStore(t, path, self, issued, 0)
	st, err := OpenStoreReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// What checking every subject's newest record costs.
	t0 := time.Now()
	if _, err := loadTrustIndex(st, "", nil); err != nil {
		t.Fatal(err)
	}
	verifyAll := time.Since(t0)
	t0 = time.Now()
	ps, err := PeerReport(st, 0, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	t.Logf("%d issued records: index with every signature checked %v; PeerReport %v (%d peers)", issued, verifyAll, took, len(ps))
	if len(ps) != issued {
		t.Fatalf("PeerReport: %d peers, want %d", len(ps), issued)
	}
	if took > verifyAll/2 {
		t.Fatalf("PeerReport took %v over %d issued records, checking every signature takes %v: want under half", took, issued, verifyAll)
	}
}
