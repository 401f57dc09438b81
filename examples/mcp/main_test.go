package main

import (
	"context"
	"testing"
	"time"
)

// TestRun runs the example as `go run` does: it builds acaptcha, starts
// `acaptcha mcp` over stdio and a target node, and fails unless both
// sides accept.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := run(ctx, "", ""); err != nil {
		t.Fatal(err)
	}
}

// TestParseArgs: a stray argument (an address without -addr) is a usage
// error, not a silent run against a node started here.
func TestParseArgs(t *testing.T) {
	a, err := parseArgs([]string{"-acaptcha", "/tmp/acaptcha", "-addr", "/ip4/127.0.0.1/tcp/4717/p2p/X"})
	if err != nil || a.bin != "/tmp/acaptcha" || a.addr != "/ip4/127.0.0.1/tcp/4717/p2p/X" {
		t.Fatalf("flags: %+v, %v", a, err)
	}
	if _, err := parseArgs([]string{"/ip4/127.0.0.1/tcp/4717/p2p/X"}); err == nil {
		t.Fatal("a positional argument was accepted")
	}
}
