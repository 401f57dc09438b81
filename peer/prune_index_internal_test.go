package peer

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/spec"
)

// TestPruneExpiredPrunesTheIndex: the janitor pruned expired issued
// records from the store but the trust index kept the newest issued record
// of every subject for as long as the node ran: one per session drawn
// (fresh peer IDs cost a client nothing), so a running node's memory grew
// with its uptime (1,000 an hour at the default draw budget), not with
// its store. The index now lets go what the store lets go.
func TestPruneExpiredPrunesTheIndex(t *testing.T) {
	self, _ := testutil.NewKey(t)
	sets, err := spec.Examples()
	if err != nil {
		t.Fatal(err)
	}
	src, err := skill.NewCorpus("test", sets, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{Key: self, StorePath: filepath.Join(t.TempDir(), "s.db"), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Source: src,
		KeepExpired: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	now := time.Now()
	// Old: expired 3 h ago, past KeepExpired; the rejections among them
	// issued more than MaxKeptLifetime ago (one issued since still
	// withdraws the acceptances before it: kept, as the last ten are).
	const old, fresh, withdrawing = 300, 10, 10
	for i := range old + fresh + withdrawing {
		sub := testutil.NewPeerID(t)
		accepted, issued := i%2 == 0, now.Add(-5*time.Hour)
		switch {
		case i >= old+fresh:
			accepted = false
		case i >= old:
			issued = now.Add(-time.Minute)
		case !accepted:
			issued = now.Add(-MaxKeptLifetime - 5*time.Hour)
		}
		n.indexIssued(MakeTestAttestation(self, sub, accepted, issued, 2*time.Hour))
	}
	n.pruneExpired(now)
	n.trust.mu.RLock()
	left := len(n.trust.issued)
	n.trust.mu.RUnlock()
	t.Logf("%d issued subjects indexed, %d expired past KeepExpired: %d left after the janitor's prune", old+fresh+withdrawing, old, left)
	if left != fresh+withdrawing {
		t.Fatalf("%d issued records left in the index, want %d", left, fresh+withdrawing)
	}
}
