package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// acaptcha mcp --http announces the node's peer ID and libp2p addresses
// beside its endpoint, as acaptcha node does: a peer that is to attest
// this node (or be attested through it) needs them, and before only the
// URL was printed (the peer ID was logged at INFO, below the default
// level), so a user had to call list_peers to learn who the node was.
func TestMCPHTTPAnnouncesPeerID(t *testing.T) {
	for _, jsonOut := range []bool{false, true} {
		dir := t.TempDir()
		ctx, cancel := context.WithCancel(context.Background())
		var out, errb syncBuffer
		done := make(chan int, 1)
		args := []string{"mcp", "--http", "127.0.0.1:0", "--challenges", "procedural", "--key", filepath.Join(dir, "key"),
			"--store", filepath.Join(dir, "db"), "--listen", "/ip4/127.0.0.1/tcp/0"}
		if jsonOut {
			args = append(args, "--json")
		}
		go func() { done <- Main(ctx, args, &out, &errb) }()
		var id string
		var addrs []string
		for i := 0; i < 400 && id == ""; i++ {
			if jsonOut {
				var ann struct {
					URL    string   `json:"mcp_url"`
					PeerID string   `json:"peer_id"`
					Addrs  []string `json:"addrs"`
				}
				if json.Unmarshal([]byte(out.String()), &ann) == nil && ann.URL != "" {
					id, addrs = ann.PeerID, ann.Addrs
					if id == "" {
						id = "(none)"
					}
				}
			} else if text := errb.String(); strings.Contains(text, "streamable HTTP at ") && strings.Contains(text, "\n") {
				id = "(none)"
				for _, l := range strings.Split(text, "\n") {
					if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "node "); ok {
						id = rest
					}
					if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "listening on "); ok {
						addrs = append(addrs, rest)
					}
				}
			}
			if id == "" {
				time.Sleep(50 * time.Millisecond)
			}
		}
		cancel()
		code := <-done
		pid, err := lpeer.Decode(id)
		if err != nil || len(addrs) == 0 {
			t.Errorf("json %v: announced peer ID %q (%v), addrs %q; exit %d\nstdout:\n%s\nstderr:\n%s", jsonOut, id, err, addrs, code, out.String(), errb.String())
			continue
		}
		for _, a := range addrs {
			if !strings.HasPrefix(a, "/ip4/127.0.0.1/tcp/") || !strings.HasSuffix(a, "/p2p/"+pid.String()) {
				t.Errorf("json %v: address %q: want a dialable /ip4/127.0.0.1/tcp/PORT/p2p/%s", jsonOut, a, pid)
			}
		}
		if code != exitOK {
			t.Errorf("json %v: exit %d", jsonOut, code)
		}
	}
}
