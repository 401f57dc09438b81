package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/abuse"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
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

// node --retry-rejected took any duration: 48h was cut to 24h for the
// doubling back-off but kept whole for the stored rejection a restart
// backs off from, and 0 quietly meant the 1h default. Both are usage
// errors naming the flag, refused before the store is created.
func TestRetryRejectedBounded(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"48h", "24h0m1s", "0", "-1s"} {
		_, errOut, code := runMain(t, "node", "--retry-rejected", v, "--listen", "/ip4/127.0.0.1/tcp/0",
			"--store", filepath.Join(dir, "db"), "--key", filepath.Join(dir, "key"))
		if code != exitUsage || !strings.Contains(errOut, "--retry-rejected") || !strings.Contains(errOut, "24h") {
			t.Errorf("--retry-rejected %s: exit %d, want 2 naming the flag and its maximum: %s", v, code, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "db")); err == nil {
		t.Error("node created its store before refusing --retry-rejected")
	}
}

// `attestations verify -` with standard input a terminal waited for a
// paste without a word, which looked like a hang. It now says on
// standard error what it waits for (a line of text; a slog line under
// --json) and still reads the paste; from a pipe it says nothing.
func TestVerifyStdinTerminalHint(t *testing.T) {
	oldIn, oldTerm := stdinReader, stdinIsTerminal
	t.Cleanup(func() { stdinReader, stdinIsTerminal = oldIn, oldTerm })
	for _, tc := range []struct {
		tty  bool
		json bool
	}{{true, false}, {true, true}, {false, false}} {
		stdinReader = strings.NewReader("not a record\n")
		stdinIsTerminal = func(io.Reader) bool { return tc.tty }
		args := []string{"attestations", "verify", "-"}
		if tc.json {
			args = append(args, "--json")
		}
		out, errOut, code := runMain(t, args...)
		if code != exitRejected || !strings.Contains(out, "INVALID") && !strings.Contains(out, `"valid": false`) {
			t.Errorf("tty %v json %v: exit %d, stdout %q: want the paste read and found invalid", tc.tty, tc.json, code, out)
		}
		hinted := strings.Contains(errOut, "Ctrl-D")
		if hinted != tc.tty {
			t.Errorf("tty %v json %v: stderr %q; want a hint naming Ctrl-D exactly when stdin is a terminal", tc.tty, tc.json, errOut)
		}
		if tc.json && hinted {
			var line map[string]any
			if err := json.Unmarshal([]byte(strings.TrimSpace(errOut)), &line); err != nil {
				t.Errorf("under --json the hint is not a JSON line: %q", errOut)
			}
		}
	}
}

// `attestations list --json --newest N` could not say how many records
// it left out (the table says "the N newest of M"). Standard output
// stays the array that verify - reads (a list of one verifies), and a
// JSON line on standard error gives listed, total and omitted.
func TestListNewestJSONSaysOmitted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	st, err := peer.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	selfKey, _ := testKey(t)
	for i := range 3 {
		_, subject := testKey(t)
		a, _ := sealAccepted(t, selfKey, subject)
		a.IssuedAt = a.IssuedAt.Add(-time.Duration(i) * time.Minute)
		env, err := protocol.Seal(a, selfKey)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(peer.Issued, env, a); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	out, errOut, code := runMain(t, "attestations", "list", "--json", "--newest", "1", "--store", path)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("stdout is not an array of one (%v): %s", err, out)
	}
	var note struct {
		Listed, Total, Omitted int
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(errOut)), &note); err != nil || note.Listed != 1 || note.Total != 3 || note.Omitted != 2 {
		t.Fatalf("stderr %q (%v): want a JSON line with listed 1, total 3, omitted 2", errOut, err)
	}
	// The array still verifies as verify - reads it.
	oldIn := stdinReader
	t.Cleanup(func() { stdinReader = oldIn })
	stdinReader = strings.NewReader(out)
	if vout, verr, code := runMain(t, "attestations", "verify", "-"); code != exitOK {
		t.Fatalf("list --json --newest 1 | verify -: exit %d\n%s%s", code, vout, verr)
	}
	// Nothing left out, nothing said.
	if _, errOut, code := runMain(t, "attestations", "list", "--json", "--newest", "3", "--store", path); code != exitOK || errOut != "" {
		t.Fatalf("--newest 3 of 3: exit %d, stderr %q; want none", code, errOut)
	}
}

// bench abuse printed "  1 reciprocal-flood: " for an attack with no
// detail: an attack without one gets its name alone, no dangling colon.
func TestAbuseReportNoEmptyDetail(t *testing.T) {
	var b strings.Builder
	rep := &abuse.Report{Attack: []abuse.AttackReport{{Finding: 1, Name: abuse.AttackReciprocalFlood}, {Finding: 3, Name: abuse.AttackIdleConns, Detail: "connected at the end 4"}}}
	if err := printAbuseReport(&b, rep, false); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasSuffix(l, ": ") || strings.HasSuffix(l, ":") {
			t.Errorf("line with an empty detail: %q", l)
		}
	}
	if !strings.Contains(b.String(), "  1 reciprocal-flood\n") || !strings.Contains(b.String(), "  3 idle-connections: connected at the end 4\n") {
		t.Errorf("report:\n%s", b.String())
	}
}

// bench swarm --timeout ended, with sessions in flight, in a screenful
// of WARN lines the nodes wrote as the bench closed them one by one;
// what is logged once the run is over goes to DEBUG.
func TestBenchSwarmTimeoutTeardownQuiet(t *testing.T) {
	if testing.Short() {
		t.Skip("swarm run")
	}
	out, errOut, code := runMain(t, "bench", "swarm", "-n", "8", "--latency", "realistic", "--latency-scale", "10", "--timeout", "1500ms")
	if code != exitRejected || !strings.Contains(out, "gave up after --timeout") {
		t.Fatalf("exit %d, want 1 and the time limit named:\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(errOut, "level=WARN") || strings.Contains(errOut, "level=ERROR") {
		t.Fatalf("warnings at teardown:\n%s", errOut)
	}
}

// readWatch records whether anything read it.
type readWatch struct{ read bool }

func (r *readWatch) Read([]byte) (int, error) { r.read = true; return 0, io.EOF }

// `attestations verify - --subject bad` read standard input before it
// looked at its flags: from a terminal it waited for a paste and Ctrl-D
// only to refuse the flag then. Bad flags are refused first, with
// nothing read.
func TestVerifyFlagsBeforeStdin(t *testing.T) {
	oldIn, oldTerm := stdinReader, stdinIsTerminal
	t.Cleanup(func() { stdinReader, stdinIsTerminal = oldIn, oldTerm })
	stdinIsTerminal = func(io.Reader) bool { return true }
	for _, bad := range [][]string{{"--subject", "bad"}, {"--issuer", "bad"}, {"--require-source", "gpt"}, {"--require-source", ""}} {
		w := &readWatch{}
		stdinReader = w
		_, errOut, code := runMain(t, append([]string{"attestations", "verify", "-"}, bad...)...)
		if code != exitUsage || w.read || strings.Contains(errOut, "Ctrl-D") {
			t.Errorf("%v: exit %d, stdin read %v, stderr %q; want exit 2 before reading or prompting", bad, code, w.read, errOut)
		}
	}
}

// `attestations list --newest -1` against a store that does not exist
// (a first run, a mistyped --store) said only that the store was
// missing; fixed, the user met the flag's error next. The flags are
// checked first.
func TestListFlagsBeforeStore(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.db")
	for _, bad := range [][]string{{"--newest", "-1"}, {"--direction", "sideways"}, {"--peer", "bad"}} {
		_, errOut, code := runMain(t, append([]string{"attestations", "list", "--store", missing}, bad...)...)
		if code != exitUsage || !strings.Contains(errOut, bad[0]) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %s", bad, code, errOut, bad[0])
		}
	}
}
