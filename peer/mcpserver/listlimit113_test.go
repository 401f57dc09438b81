package mcpserver_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/internal/testutil/testnode"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/peer/mcpserver"
)

// list_attestations cut a limit over MaxListLimit to 500 without a word;
// it has no next page, so a client asking for 10000 could take the 500
// for every record. It is a tool error naming the maximum; the maximum
// itself is answered.
func TestListAttestationsLimitOverMaxRefused(t *testing.T) {
	key, _ := testutil.NewKey(t)
	_, sets, _ := splitSets(t)
	n := testnode.New(t, testnode.Options{Config: peer.Config{Key: key, StorePath: filepath.Join(t.TempDir(), "s.db"), Logger: testLogger(t)}, Sets: sets})
	_, cs := serveNode(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, args := range []map[string]any{{"limit": mcpserver.MaxListLimit + 1}, {"limit": 1e9, "direction": "issued"}} {
		_, err := call[map[string]any](ctx, cs, "list_attestations", args)
		if err == nil || !strings.Contains(err.Error(), "at most 500") {
			t.Errorf("%v: %v, want a tool error naming the maximum 500", args, err)
		}
	}
	if _, err := call[map[string]any](ctx, cs, "list_attestations", map[string]any{"limit": mcpserver.MaxListLimit}); err != nil {
		t.Errorf("limit %d (the maximum): %v", mcpserver.MaxListLimit, err)
	}
}
