package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// Numeric flags outside their range are refused with a usage error
// instead of being accepted silently.
func TestNumericFlagsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"node", "--max-serves", "-1"},
		{"node", "--max-serves", "0"},
		{"node", "--pool-workers", "0"},
		{"node", "--pool-size", "0"},
		{"node", "--pool-wait", "0s"},
		{"node", "--pool-token-budget", "-5"},
		{"node", "--trust-quorum", "-1"},
	} {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), args, &out, &errb); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (stderr %q)", args, code, exitUsage, errb.String())
		}
		if !strings.Contains(errb.String(), args[1]) {
			t.Errorf("%v: error does not name the flag: %q", args, errb.String())
		}
	}
}

// Under --json, errors are a JSON object with the exit code.
func TestJSONErrors(t *testing.T) {
	for _, args := range [][]string{
		{"attest", "--json"},                     // cobra's own argument error
		{"--json", "node", "--max-serves", "-1"}, // our usage error
		{"--json", "no-such-command"},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), args, &out, &errb)
		var e struct {
			Error    string `json:"error"`
			ExitCode int    `json:"exit_code"`
		}
		if err := json.Unmarshal(errb.Bytes(), &e); err != nil {
			t.Fatalf("%v: stderr is not JSON: %q", args, errb.String())
		}
		if e.Error == "" || e.ExitCode != code || code != exitUsage {
			t.Errorf("%v: %+v, exit %d", args, e, code)
		}
	}
}

func TestVersionCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"version", "--json"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var v versionInfo
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.Version == "" || !strings.HasPrefix(v.GoVersion, "go") {
		t.Fatalf("version %+v (%v)", v, err)
	}
}
