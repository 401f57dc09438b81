package main

import (
	"encoding/json"
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
