package mcpserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/peer/mcpserver"
)

// TestMCPAttestDeclinedIsAResult: a peer that declines to be verified (a
// node without an LLM) is an answer, as `acaptcha attest` reports it
// (DECLINED, nothing signed): attest_peer returns it as a done outcome
// with ours.verdict DECLINED and theirs saying why it was not asked.
// Before, the foreground call was a tool error and a background job
// ended "failed", as for a peer that could not be reached.
func TestMCPAttestDeclinedIsAResult(t *testing.T) {
	f := newFixture(t, mcpserver.QueueConfig{})
	a, _, _ := splitSets(t)
	noLLM := startNode(t, a, nil) // verifies, cannot be verified
	addr := noLLM.Addrs()[0].String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	check := func(what string, out mcpserver.AttestOutput) {
		t.Helper()
		if out.Status != "done" || out.Ours == nil || out.Ours.Accepted || out.Ours.Verdict != "DECLINED" || out.Ours.Reason != "declined" ||
			out.Ours.Record != "" || !strings.Contains(out.Ours.Detail, "declined") ||
			out.Theirs == nil || out.Theirs.Verdict != "NONE" || !strings.Contains(out.Theirs.Error, "not asked") {
			t.Errorf("%s: %+v ours %+v theirs %+v", what, out, out.Ours, out.Theirs)
		}
	}
	out, err := call[mcpserver.AttestOutput](ctx, f.cs, "attest_peer", map[string]any{"addr": addr})
	if err != nil {
		t.Fatalf("attest_peer of a declining node: tool error %v", err)
	}
	check("attest_peer", out)
	start, err := call[mcpserver.AttestOutput](ctx, f.cs, "attest_peer", map[string]any{"addr": addr, "background": true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30 && out.Status != "done" && out.Status != "failed" || i == 0; i++ {
		out, err = call[mcpserver.AttestOutput](ctx, f.cs, "attest_status", map[string]any{"job_id": start.JobID, "wait_ms": 2000})
		if err != nil {
			t.Fatal(err)
		}
	}
	check("attest_status", out)
}
