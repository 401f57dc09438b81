package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// `version --json` of a binary without a VCS stamp (this test binary
// has none) left out "commit" and "modified": a script reading
// .commit met a missing key rather than the documented "" (unknown).
func TestVersionJSONAlwaysNamesCommit(t *testing.T) {
	out, errOut, code := runMain(t, "version", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("not JSON: %v: %q", err, out)
	}
	for _, k := range []string{"version", "commit", "modified", "go_version", "platform"} {
		if _, ok := v[k]; !ok {
			t.Errorf("version --json has no %q: %s", k, out)
		}
	}
	if c, ok := v["commit"].(string); !ok || (c == "" && buildVersion().Commit != "") {
		t.Errorf("commit %#v, want a string (\"\" only when unknown)", v["commit"])
	}
}

// `challenge inspect F --llm M` without --cross-check ran no LLM and
// said nothing: the LLM flags serve the cross-check only. Given on the
// command line without it they are a usage error naming --cross-check;
// from the environment (ACAPTCHA_LLM, set for the node) they are not.
func TestInspectLLMWithoutCrossCheckRefused(t *testing.T) {
	dir := t.TempDir()
	if _, errOut, code := runMain(t, "generate", "--source", "procedural", "--n", "1", "--out", dir); code != exitOK {
		t.Fatalf("generate: exit %d: %s", code, errOut)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) != 1 {
		t.Fatalf("generate wrote %v", files)
	}
	for _, extra := range [][]string{
		{"--llm", "openai:m"},
		{"--llm", "openai:m", "--llm-base-url", "http://127.0.0.1:1/v1"},
		{"--llm", "openai:m", "--cross-check-llm", "openai:n"},
		{"--answer-max-tokens", "64"},
	} {
		args := append([]string{"challenge", "inspect", files[0], "--brief"}, extra...)
		_, errOut, code := runMain(t, args...)
		if code != exitUsage || !strings.Contains(errOut, "--cross-check") || !strings.Contains(errOut, extra[0]) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %s and --cross-check", extra, code, errOut, extra[0])
		}
	}
	t.Setenv("ACAPTCHA_LLM", "openai:m")
	if _, errOut, code := runMain(t, "challenge", "inspect", files[0], "--brief"); code != exitOK {
		t.Errorf("with ACAPTCHA_LLM set: exit %d: %s", code, errOut)
	}
}
