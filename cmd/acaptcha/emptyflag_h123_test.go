package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A flag given an empty value on the command line (an unset shell
// variable: --llm "$MODEL", --subject "$PEER") is refused, exit 2, naming
// the flag, for every flag alike. Before, --llm "", --http "", --metrics
// "" and --cross-check-llm "" meant off and --subject "" or --issuer ""
// no check (verify --subject "$PEER" F && admit admitted a record about
// anyone), while --store "", --challenges "" or --require-source "" were
// refused. Off is said with none or off, for --llm, --cross-check-llm,
// --http (node and mcp) and --metrics.
func TestEmptyFlagValueRefused(t *testing.T) {
	dir := t.TempDir()
	store, _, env := storeWithOne(t, dir)
	rec := filepath.Join(dir, "rec.att")
	if err := os.WriteFile(rec, env, 0o600); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "key")
	node := []string{"--store", filepath.Join(dir, "n.db"), "--key", key, "--listen", "/ip4/127.0.0.1/tcp/0"}
	for _, tc := range []struct {
		flag string
		args []string
	}{
		{"llm", append([]string{"node", "--llm", ""}, node...)},
		{"http", append([]string{"node", "--http", " "}, node...)},
		{"metrics", append([]string{"node", "--metrics", ""}, node...)},
		{"cross-check-llm", append([]string{"node", "--cross-check-llm", ""}, node...)},
		{"llm-base-url", append([]string{"node", "--llm-base-url", ""}, node...)},
		{"http-trusted-proxy", append([]string{"node", "--http", "127.0.0.1:0", "--http-trusted-proxy", ""}, node...)},
		{"http", append([]string{"mcp", "--http", ""}, node...)},
		{"llm", []string{"demo", "--llm", ""}},
		{"subject", []string{"attestations", "verify", "--subject", "", rec}},
		{"issuer", []string{"attestations", "verify", "--issuer", "", rec}},
		{"peer", []string{"attestations", "list", "--store", store, "--peer", ""}},
		{"direction", []string{"attestations", "list", "--store", store, "--direction", ""}},
		{"peer", []string{"peers", "--store", store, "--peer", ""}},
		{"glob", []string{"eval", "--source", "procedural", "--sessions", "1", "--out", filepath.Join(dir, "e"), "--glob", ""}},
		{"domain", []string{"generate", "--source", "procedural", "--n", "1", "--out", filepath.Join(dir, "g"), "--domain", ""}},
		{"attacks", []string{"bench", "abuse", "--attacks", ""}},
		{"latency", []string{"bench", "swarm", "-n", "2", "--latency", ""}},
	} {
		for _, jsonOut := range []bool{false, true} {
			args := tc.args
			if jsonOut {
				args = append(append([]string(nil), args...), "--json")
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			var out, errOut string
			var code int
			go func() {
				defer close(done)
				out, errOut, code = newUserMain(ctx, args...)
			}()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				cancel()
				<-done
				t.Errorf("%q: still running after 20 s (the empty value was taken); exit %d, stdout %.300q", args, code, out)
				continue
			}
			cancel()
			msg := strings.TrimSpace(errOut)
			if jsonOut && code == exitUsage {
				var ec int
				msg, ec = jsonError(t, lastLine(errOut))
				if ec != exitUsage {
					t.Errorf("%q: exit_code %d in the error object", args, ec)
				}
			}
			if code != exitUsage || !strings.Contains(msg, "--"+tc.flag+" is empty") || out != "" {
				t.Errorf("%q: exit %d, error %q, stdout %.300q; want exit %d, --%s is empty, nothing on stdout", args, code, msg, out, exitUsage, tc.flag)
			}
		}
	}
	// none and off say off: --answer-with llm then finds no LLM (exit 2,
	// its own message), and mcp --http off serves stdio (here: standard
	// input at its end at once, exit 0).
	for _, off := range []string{"none", "off", "NONE"} {
		_, errOut, code := newUserMain(context.Background(), append([]string{"mcp", "--llm", off, "--answer-with", "llm"}, node...)...)
		if code != exitUsage || !strings.Contains(errOut, "no LLM configured") {
			t.Errorf("mcp --llm %s --answer-with llm: exit %d, %q; want exit 2, no LLM configured", off, code, errOut)
		}
	}
	old := stdinReader
	stdinReader = strings.NewReader("")
	defer func() { stdinReader = old }()
	out, errOut, code := newUserMain(context.Background(), append([]string{"mcp", "--http", "off", "--challenges", "procedural", "--log-level", "error"}, node...)...)
	if code != exitOK || out != "" || strings.Contains(errOut, "streamable HTTP") {
		t.Errorf("mcp --http off with standard input closed: exit %d, stdout %q, stderr %q; want exit 0 over stdio", code, out, errOut)
	}
}
