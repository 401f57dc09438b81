package main

// Defects of helper 88's new-user walkthrough: each test fails on the
// commit before its fix.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// README ("Exit codes and output"): under --json standard error "is a
// stream of JSON lines whose last one is the error object". go-libp2p
// logged through its own handler, in logfmt text, whatever --json said:
// `node --json --listen /ip4/127.0.0.1/udp/0` (an address no transport
// takes) wrote three `ts=... level=error ... logger=p2p-config` lines
// before the error object. They now go through the command's own handler
// (JSON lines under --json), at the level the library logs at by default.
// (A bare /udp/0 is refused before libp2p starts since the CLI checks
// each --listen for a transport, TestListenWithoutTransportIsUsage; the
// start failure here is a TCP address of no interface of this machine,
// TEST-NET-3's 203.0.113.1.)
func TestLibraryLogsFollowJSON(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "node", "--json", "--listen", "/ip4/203.0.113.1/tcp/0",
		"--key", filepath.Join(dir, "key"), "--store", filepath.Join(dir, "db"))
	cmd.Env = append(cmd.Environ(), "ACAPTCHA_HOME="+dir, "GOLOG_LOG_LEVEL=", "GOLOG_LOG_FMT=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitFailure {
		t.Fatalf("node --listen 203.0.113.1: %v, want exit %d\nstdout: %s\nstderr: %s", err, exitFailure, out.String(), errb.String())
	}
	lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
	libp2p := 0
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("a line of standard error under --json is not JSON: %v\n%s", err, l)
			continue
		}
		if m["logger"] != nil {
			libp2p++
		}
	}
	if libp2p == 0 {
		t.Errorf("no record of go-libp2p's on standard error (want its start failure as JSON with \"logger\"):\n%s", errb.String())
	}
	if msg, code := jsonError(t, lines[len(lines)-1]); code != exitFailure || !strings.Contains(msg, "listen") {
		t.Errorf("last line: %q exit %d, want the error object", msg, code)
	}
}

// An empty --store or --key (an unset shell variable: --store "$DB") is a
// flag value no command can use: it is a usage error (exit 2) that names
// the flag. Before, node, attest and mcp exited 1 with "open store :
// open : no such file or directory" or "create key file: open : no such
// file or directory", and the read-only commands with "store  does not
// exist".
func TestEmptyStoreOrKeyIsUsage(t *testing.T) {
	dir := t.TempDir()
	key, db := filepath.Join(dir, "key"), filepath.Join(dir, "db")
	target := "/ip4/127.0.0.1/tcp/1/p2p/12D3KooWCHRxU7HALLkCqz5d6UgSmrCgaVpfCt2yTKQpyGkY4XtL"
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"node", "--store", "", "--key", key, "--listen", "/ip4/127.0.0.1/tcp/0"}, "--store"},
		{[]string{"node", "--store", db, "--key", " ", "--listen", "/ip4/127.0.0.1/tcp/0"}, "--key"},
		{[]string{"attest", "--store", "", "--key", key, "--listen", "/ip4/127.0.0.1/tcp/0", target}, "--store"},
		{[]string{"attest", "--store", db, "--key", "", "--listen", "/ip4/127.0.0.1/tcp/0", target}, "--key"},
		{[]string{"mcp", "--store", "", "--key", key}, "--store"},
		{[]string{"attestations", "list", "--store", ""}, "--store"},
		{[]string{"peers", "--store", ""}, "--store"},
	} {
		for _, jsonOut := range []bool{false, true} {
			args := tc.args
			if jsonOut {
				args = append([]string{"--json"}, args...)
			}
			out, errOut, code := runMain(t, args...)
			if code != exitUsage || !strings.Contains(errOut, tc.flag+" is empty") {
				t.Errorf("%q: exit %d, want %d and %q\nstdout: %.200s\nstderr: %s", args, code, exitUsage, tc.flag+" is empty", out, errOut)
				continue
			}
			if jsonOut {
				if _, c := jsonError(t, strings.TrimSpace(errOut)); c != exitUsage {
					t.Errorf("%q: JSON exit_code %d", args, c)
				}
			}
		}
	}
	if _, err := os.Stat(key); err == nil {
		t.Errorf("a usage error created the key file %s", key)
	}
}

// mcp's --http-max-conns and --http-private-dials act only with --http
// (their help says "with --http"); without it they were taken and ignored
// without a word (exit 0 once stdin closed), where node's
// --http-trusted-proxy without --http is a usage error. They are refused
// alike now.
func TestMCPHTTPFlagsNeedHTTP(t *testing.T) {
	dir := t.TempDir()
	for _, flag := range [][]string{{"--http-max-conns", "10"}, {"--http-private-dials"}} {
		args := append([]string{"mcp", "--key", filepath.Join(dir, "key"), "--store", filepath.Join(dir, "db")}, flag...)
		out, errOut, code := runMain(t, args...)
		if code != exitUsage || !strings.Contains(errOut, flag[0]+" needs --http") {
			t.Errorf("%q: exit %d, want %d and %q\nstdout: %.200s\nstderr: %s", args, code, exitUsage, flag[0]+" needs --http", out, errOut)
		}
	}
}
