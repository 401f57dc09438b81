package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/peer"
)

// The CLI node turns NAT traversal on by default; relays and the relay
// service are opt-in, and the flags reach the node's config.
func TestNATFlagDefaults(t *testing.T) {
	a := &app{}
	root := a.rootCmd()
	node, _, err := root.Find([]string{"node"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"nat": "true", "relay-service": "false", "relay": "[]"} {
		f := node.Flags().Lookup(name)
		if f == nil || f.DefValue != want {
			t.Fatalf("--%s: %+v, want default %s", name, f, want)
		}
	}
	if err := node.Flags().Parse([]string{"--relay", "/ip4/192.0.2.1/tcp/4717/p2p/12D3KooWDmk3Lap6BGxB3XELbLnqzrzG9gXSMhWsPmFj9JtQqy1g", "--relay-service"}); err != nil {
		t.Fatal(err)
	}
	var cfg peer.Config
	a.nat.apply(&cfg)
	if !cfg.NAT || !cfg.RelayService || len(cfg.Relays) != 1 {
		t.Fatalf("config from the NAT flags: NAT %v, relay service %v, relays %v", cfg.NAT, cfg.RelayService, cfg.Relays)
	}
	if err := a.nat.check(); err != nil {
		t.Fatalf("valid relay refused: %v", err)
	}
}

// A relay address without a peer ID is a usage error naming the flag.
func TestNATRelayFlagRefused(t *testing.T) {
	for _, relay := range []string{"/ip4/192.0.2.1/tcp/4717", "not-an-addr"} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), []string{"node", "--relay", relay}, &out, &errb)
		if code != exitUsage || !strings.Contains(errb.String(), "--relay") {
			t.Errorf("--relay %s: exit %d, stderr %q", relay, code, errb.String())
		}
	}
}

// A node started with --relay-service says at start that it relays for
// others (in text and in the --json start-up object), and with --relay
// through how many relays it is reached; before, neither was said.
func TestNodeSaysItRelays(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node")
	}
	for _, jsonOut := range []bool{false, true} {
		dir := t.TempDir()
		args := []string{"node", "--challenges", "procedural", "--relay-service", "--nat=false",
			"--relay", "/ip4/192.0.2.1/tcp/4717/p2p/12D3KooWDmk3Lap6BGxB3XELbLnqzrzG9gXSMhWsPmFj9JtQqy1g",
			"--listen", "/ip4/127.0.0.1/tcp/0", "--store", filepath.Join(dir, "db"), "--key", filepath.Join(dir, "key")}
		until := "attest with:"
		if jsonOut {
			args, until = append(args, "--json"), "\n"
		}
		out := startNodeText(t, args, until)
		if jsonOut {
			if !strings.Contains(out, `"relay_service":true`) || !strings.Contains(out, `"relays":["/ip4/192.0.2.1/tcp/4717/p2p/`) {
				t.Errorf("start-up object: %s", out)
			}
			continue
		}
		if !strings.Contains(out, "relays for others") || !strings.Contains(out, "--relay-service") || !strings.Contains(out, "1 static relay(s)") {
			t.Errorf("start-up lines:\n%s", out)
		}
	}
}
