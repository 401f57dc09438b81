package main

import (
	"context"
	"testing"
	"time"
)

// TestRun runs the example as `go run` does and fails when it reports an
// unexpected outcome.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := run(ctx); err != nil {
		t.Fatal(err)
	}
}
