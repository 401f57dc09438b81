package peer_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The node runtime links no LLM or cloud SDK (issue 11): the LLM stack
// enters through cmd and the generator packages only, so an embedder of
// package peer does not carry ~230 provider packages.
func TestPeerLinksNoLLMStack(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, gobin, "list", "-deps", "github.com/acaptcha/acaptcha/peer").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, bad := range []string{"github.com/tmc/langchaingo", "cloud.google.com/", "github.com/aws/", "anthropic", "github.com/acaptcha/acaptcha/llm", "github.com/acaptcha/acaptcha/skill/generate"} {
			if strings.Contains(pkg, bad) {
				t.Errorf("package peer depends on %s", pkg)
			}
		}
	}
}
