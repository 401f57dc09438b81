package main

// Defects of helper 88's new-user walkthrough: each test fails on the
// commit before its fix.

import (
	"bytes"
	"context"
	"encoding/json"
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
func TestLibraryLogsFollowJSON(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "node", "--json", "--listen", "/ip4/127.0.0.1/udp/0",
		"--key", filepath.Join(dir, "key"), "--store", filepath.Join(dir, "db"))
	cmd.Env = append(cmd.Environ(), "ACAPTCHA_HOME="+dir, "GOLOG_LOG_LEVEL=", "GOLOG_LOG_FMT=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitFailure {
		t.Fatalf("node --listen udp/0: %v, want exit %d\nstdout: %s\nstderr: %s", err, exitFailure, out.String(), errb.String())
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
