package peer

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/skill"
)

// TestOwnFullTieLowerSourceCounts: two records the node issued about one
// peer that tie fully (same issued_at, verdict and expires_at), one on
// hybrid and one on procedural challenges, leave the peer
// source_below_minimum (the lower rank counts, spec/trust.md §1, document
// 1.6.15) in whichever order the node indexes them: as issued, the first
// stayed, so the order of issue decided, and at start the store's key order
// (a digest of the envelope).
func TestOwnFullTieLowerSourceCounts(t *testing.T) {
	for _, order := range [][2]skill.SourceKind{{skill.SourceHybrid, skill.SourceProcedural}, {skill.SourceProcedural, skill.SourceHybrid}} {
		self, _ := testutil.NewKey(t)
		n, err := New(Config{Key: self, StorePath: filepath.Join(t.TempDir(), "s.db"), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		_, sub := testutil.NewKey(t)
		at := time.Now().Add(-time.Minute).Truncate(time.Second)
		for _, src := range order {
			n.indexIssued(MakeTestAttestationFrom(self, sub, true, at, time.Hour, src))
		}
		if a := n.Admission(sub); a.Admitted || a.Reason != NotAdmittedSource {
			t.Errorf("issued on %v: %+v, want refused %s", order, a, NotAdmittedSource)
		}
		n.Close()
	}
}
