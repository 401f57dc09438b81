package mcpserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil/testnode"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/peer/mcpserver"
	"github.com/acaptcha/acaptcha/skill"
)

// TestMCPAttestVerifyFirstRejectionIsAResult: attest_peer of a node that
// verifies first (spec/protocol.md §5c) and rejects us is an answer, as
// `acaptcha attest` reports it: its verdict on us (REJECTED, signed), none
// of ours; asked again at once, it will not verify us (we are in its
// back-off) and that is an answer too (ours NONE, verify_first). Before,
// both were tool errors ("it verifies us before it answers us, and did
// not accept us", "prover verifies this node first: ...").
func TestMCPAttestVerifyFirstRejectionIsAResult(t *testing.T) {
	a, b, _ := splitSets(t)
	wrong := skill.ProverFunc(func() skill.Answerer {
		return skill.AnswerFunc(func(context.Context, skill.Challenge) (string, error) { return "no idea", nil })
	})
	target := testnode.New(t, testnode.Options{
		Config: peer.Config{Prover: wrong, Logger: testLogger(t), VerifyFirst: true, AttestPolicy: peer.AttestNone},
		Sets:   a,
	})
	self := startNode(t, b, wrong)
	srv, err := mcpserver.New(mcpserver.Config{Node: self, NodeAnswers: true, Version: "test", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cs := connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addr := target.Addrs()[0].String() + "/p2p/" + target.ID().String()
	out, err := call[mcpserver.AttestOutput](ctx, cs, "attest_peer", map[string]any{"addr": addr})
	if err != nil {
		t.Fatalf("attest_peer of a verify-first node that rejects us: tool error %v", err)
	}
	if out.Status != "done" || out.Ours == nil || out.Ours.Accepted || out.Ours.Verdict != "NONE" ||
		out.Theirs == nil || out.Theirs.Verdict != "REJECTED" || out.Theirs.Record == "" {
		t.Errorf("attest_peer: %+v ours %+v theirs %+v", out, out.Ours, out.Theirs)
	}
	out, err = call[mcpserver.AttestOutput](ctx, cs, "attest_peer", map[string]any{"addr": addr})
	if err != nil {
		t.Fatalf("attest_peer again (in its back-off): tool error %v", err)
	}
	if out.Status != "done" || out.Ours == nil || out.Ours.Verdict != "NONE" || out.Ours.Reason != "verify_first" || out.Theirs == nil || out.Theirs.Verdict != "NONE" {
		t.Errorf("attest_peer again: %+v ours %+v theirs %+v", out, out.Ours, out.Theirs)
	}
}
