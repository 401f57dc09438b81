package main

import (
	"context"
	"testing"
	"time"
)

// TestRun runs the example as `go run` does, against a node it starts,
// and fails when a verdict is not the one the example expects.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, ""); err != nil {
		t.Fatal(err)
	}
}

// TestParseArgs: a stray argument (a URL without -url) is a usage error,
// not a silent run against a node started here.
func TestParseArgs(t *testing.T) {
	if url, err := parseArgs([]string{"-url", "http://127.0.0.1:8080/"}); err != nil || url != "http://127.0.0.1:8080" {
		t.Fatalf("-url: %q, %v", url, err)
	}
	if url, err := parseArgs(nil); err != nil || url != "" {
		t.Fatalf("no args: %q, %v", url, err)
	}
	if _, err := parseArgs([]string{"http://127.0.0.1:8080"}); err == nil {
		t.Fatal("a positional argument was accepted")
	}
}
