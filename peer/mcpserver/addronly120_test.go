package mcpserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	lpeer "github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/peer/mcpserver"
)

// attest_peer of an addr that names only a peer ID the node knows no
// address of says so, before any dial, with the form to give; before,
// it dialed and answered "failed to dial: ...: no addresses" (acaptcha
// attest refuses the same argument with that hint). A peer ID the node
// knows addresses of is still dialed at them.
func TestAttestPeerIDOnlyNamesTheForm(t *testing.T) {
	a, b, _ := splitSets(t)
	target := startNode(t, a, nil)
	self := startNode(t, b, nil)
	srv, err := mcpserver.New(mcpserver.Config{Node: self, Version: "test", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cs := connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err = call[mcpserver.AttestOutput](ctx, cs, "attest_peer", map[string]any{"addr": "/p2p/" + target.ID().String(), "timeout_seconds": 10})
	if err == nil || !strings.Contains(err.Error(), "names only a peer ID") || !strings.Contains(err.Error(), "/tcp/") {
		t.Fatalf("attest_peer of a bare /p2p/ID: %v, want an error naming the full multiaddr form", err)
	}
	// Known: the node has its addresses (from an earlier contact).
	if err := self.Host().Connect(ctx, lpeer.AddrInfo{ID: target.ID(), Addrs: target.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
	out, err := call[mcpserver.AttestOutput](ctx, cs, "attest_peer", map[string]any{"addr": "/p2p/" + target.ID().String(), "timeout_seconds": 30})
	if err != nil || out.Ours == nil {
		t.Fatalf("attest_peer of a known peer by /p2p/ID: %+v, %v", out, err)
	}
}
