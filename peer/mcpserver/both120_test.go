package mcpserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/peer/mcpserver"
)

// list_attestations takes direction "both", the default its schema
// names ("issued or received (default both)"); before, it refused it.
func TestListAttestationsDirectionBoth(t *testing.T) {
	_, sets, _ := splitSets(t)
	srv, err := mcpserver.New(mcpserver.Config{Node: startNode(t, sets, nil), Version: "test", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cs := connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := call[mcpserver.ListAttestationsOutput](ctx, cs, "list_attestations", map[string]any{"direction": "both"}); err != nil {
		t.Errorf("list_attestations direction both: %v", err)
	}
	if _, err := call[mcpserver.ListAttestationsOutput](ctx, cs, "list_attestations", map[string]any{"direction": "sideways"}); err == nil {
		t.Errorf("list_attestations direction sideways: no error")
	}
}
