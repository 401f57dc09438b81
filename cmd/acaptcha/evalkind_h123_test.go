package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// eval --source-kind names the kind a corpus stands for (its sets could
// come from any producer); for a generator source the kind is known, and
// another one swapped the white-box attackers: --source procedural
// --source-kind llm ran procedural sets without whitebox-procedural,
// which passes about 42 % of them, and reported every script at 0. It is
// now a usage error; the source's own kind stays accepted.
func TestEvalSourceKindMustMatchGenerator(t *testing.T) {
	dir := t.TempDir()
	out, errOut, code := newUserMain(context.Background(), "eval", "--source", "procedural", "--source-kind", "llm", "--sessions", "1", "--out", filepath.Join(dir, "a"), "--no-plots")
	if code != exitUsage || !strings.Contains(errOut, "--source-kind") || out != "" {
		t.Errorf("procedural as llm: exit %d, stderr %q, stdout %.200q; want exit %d naming --source-kind", code, errOut, out, exitUsage)
	}
	out, errOut, code = newUserMain(context.Background(), "eval", "--source", "procedural", "--source-kind", "procedural", "--sessions", "1", "--out", filepath.Join(dir, "b"), "--no-plots", "--human-samples", "10")
	if code != exitOK {
		t.Errorf("procedural as procedural: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = newUserMain(context.Background(), "eval", "--source", "examples", "--source-kind", "hybrid", "--sessions", "1", "--out", filepath.Join(dir, "c"), "--no-plots", "--human-samples", "10")
	if code != exitOK {
		t.Errorf("examples as hybrid: exit %d\n%s\n%s", code, out, errOut)
	}
}
