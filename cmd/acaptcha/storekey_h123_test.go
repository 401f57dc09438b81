package main

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// --store naming the node's key file (or the same file as --key) is a
// usage error that says so, and the file is left as it was. Before,
// --store F --key F made the key in F and then called F a damaged store
// ("move it aside to start afresh": moving it loses the identity), and
// --store KEYFILE said the same of an existing key.
func TestStoreNamingKeyFileRefused(t *testing.T) {
	dir := t.TempDir()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := crypto.MarshalPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	same := filepath.Join(dir, "same")
	listen := []string{"--listen", "/ip4/127.0.0.1/tcp/0"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append([]string{"node", "--store", same, "--key", same}, listen...), "same file"},
		{append([]string{"mcp", "--store", same, "--key", "./" + filepath.Base(same)}, listen...), "same file"},
		{append([]string{"node", "--store", keyFile, "--key", filepath.Join(dir, "other")}, listen...), "private key"},
		{[]string{"attestations", "list", "--store", keyFile}, "private key"},
		{[]string{"peers", "--store", keyFile}, "private key"},
	} {
		wd, _ := os.Getwd()
		if err := os.Chdir(dir); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := newUserMain(context.Background(), tc.args...)
		_ = os.Chdir(wd)
		if code != exitUsage || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "start afresh") || out != "" {
			t.Errorf("%q: exit %d, stderr %q, stdout %.200q; want exit %d saying %q", tc.args, code, errOut, out, exitUsage, tc.want)
		}
		if _, err := os.Stat(same); err == nil {
			t.Errorf("%q: made %s", tc.args, same)
			os.Remove(same)
		}
		if b, err := os.ReadFile(keyFile); err != nil || string(b) != string(raw) {
			t.Errorf("%q: the key file changed (%v)", tc.args, err)
		}
	}
}
