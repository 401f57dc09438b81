package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/spec"
)

// buildBinary compiles the CLI once per test run and returns its path;
// the tests that run the binary share it. It builds with the
// environment's settings, as internal/secondimpl2 and `go vet` do: with
// CGO_ENABLED=0 (as here before) the build shared no compiled package
// with them, and after CI's `go vet` on a cold build cache it took 3 min
// of CPU against 11 s (libp2p's dependents of net compiled again).
func buildBinary(t *testing.T) string {
	t.Helper()
	bin, err := sharedBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// binDir holds the shared binary; TestMain removes it.
var binDir string

var sharedBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "acaptcha-test-bin-")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "acaptcha")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build: %w\n%s", err, out)
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

type proc struct {
	cmd  *exec.Cmd
	out  *bufio.Reader
	errb *bytes.Buffer
}

// splitExamples writes the example sets into two corpus directories, so
// that the two sides of a mutual attestation never draw the same challenge
// (which each would decline as a reflection of its own).
func splitExamples(t *testing.T, dir string) (string, string) {
	t.Helper()
	sets, err := spec.Examples()
	if err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(dir, "corpus-a"), filepath.Join(dir, "corpus-b")
	for i, s := range sets {
		d := a
		if i%2 == 1 {
			d = b
		}
		data, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, s.ID+".json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

func startNodeProc(t *testing.T, bin, dir, llmURL, corpus string, extra ...string) (*proc, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"node", "--json", "--llm", "openai:stub", "--challenges", "corpus:" + corpus, "--key", filepath.Join(dir, "key"),
		"--store", filepath.Join(dir, "db"), "--listen", "/ip4/127.0.0.1/tcp/0", "--log-level", "info"}, extra...)...)
	cmd.Env = append(os.Environ(), "OPENAI_BASE_URL="+llmURL+"/v1", "OPENAI_API_KEY=test")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, out: bufio.NewReader(stdout), errb: &errb}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Error("node did not stop on SIGINT within 10 s")
		}
	})
	lineCh := make(chan string, 1)
	go func() {
		l, _ := p.out.ReadString('\n')
		lineCh <- l
	}()
	var line string
	select {
	case line = <-lineCh:
	case <-time.After(30 * time.Second):
		t.Fatalf("node printed nothing; stderr:\n%s", errb.String())
	}
	var info struct {
		PeerID string   `json:"peer_id"`
		Addrs  []string `json:"addrs"`
	}
	if err := json.Unmarshal([]byte(line), &info); err != nil || len(info.Addrs) == 0 {
		t.Fatalf("node output %q: %v; stderr:\n%s", line, err, errb.String())
	}
	return p, info.Addrs[0]
}

// run runs the binary and returns its standard output (logs and errors on
// standard error are appended after a marker line unless the output is
// JSON, so that machine-readable output stays parseable) and exit code.
func run(t *testing.T, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	err := cmd.Run()
	text := out.String()
	jsonOut := false
	for _, a := range args {
		jsonOut = jsonOut || a == "--json"
	}
	if !jsonOut && errb.Len() > 0 {
		text += "\n-- stderr --\n" + errb.String()
	}
	if jsonOut && err != nil {
		t.Logf("stderr of %v:\n%s", args, errb.String())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return text, 0
	case errors.As(err, &ee):
		return text, ee.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
		return "", -1
	}
}

func TestCLINodeAndAttestProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	sets, err := spec.Examples()
	if err != nil {
		t.Fatal(err)
	}
	oracle := testutil.NewOpenAIServer(testutil.NewOracle(sets...))
	defer oracle.Close()
	script := testutil.NewOpenAIServer(testutil.NewKeywordScript())
	defer script.Close()

	dir := t.TempDir()
	corpusA, corpusB := splitExamples(t, dir)
	_, addrB := startNodeProc(t, bin, filepath.Join(dir, "b"), oracle.URL, corpusB)
	_, addrS := startNodeProc(t, bin, filepath.Join(dir, "s"), script.URL, corpusB)

	env := []string{"OPENAI_BASE_URL=" + oracle.URL + "/v1", "OPENAI_API_KEY=test"}
	common := []string{"--llm", "openai:stub", "--challenges", "corpus:" + corpusA, "--key", filepath.Join(dir, "a", "key"), "--store", filepath.Join(dir, "a", "db")}

	// An agent node: both sides accept; exit 0.
	out, code := run(t, bin, env, append([]string{"attest", "--json", addrB}, common...)...)
	if code != 0 {
		t.Fatalf("attest agent: exit %d\n%s", code, out)
	}
	var m struct {
		Ours   struct{ Accepted bool }
		Theirs struct {
			Accepted            bool
			AttestationVerified bool `json:"attestation_verified"`
		}
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil || !m.Ours.Accepted || !m.Theirs.Accepted || !m.Theirs.AttestationVerified {
		t.Fatalf("attest output: %v\n%s", err, out)
	}

	// A node whose LLM is a keyword script: rejected, exit 1.
	out, code = run(t, bin, env, append([]string{"attest", addrS}, common...)...)
	if code != 1 || !strings.Contains(out, "REJECTED") {
		t.Fatalf("attest script: exit %d\n%s", code, out)
	}

	// The stored records list, export and verify.
	out, code = run(t, bin, nil, "attestations", "list", "--json", "--store", filepath.Join(dir, "a", "db"))
	if code != 0 {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	var entries []struct {
		Key         string `json:"key"`
		Direction   string `json:"direction"`
		EnvelopeHex string `json:"envelope_hex"`
	}
	if err := json.Unmarshal([]byte(out), &entries); err != nil || len(entries) < 3 {
		t.Fatalf("list: %v (%d entries)\n%s", err, len(entries), out)
	}
	// A one-shot attest runs exactly one session of its own per peer: it
	// does not also challenge the peer through first contact (which would
	// spend a second challenge set and sign a second record).
	issued := 0
	for _, e := range entries {
		if e.Direction == "issued" {
			issued++
		}
	}
	if issued != 2 {
		t.Fatalf("A issued %d attestations over two attests, want 2\n%s", issued, out)
	}
	file := filepath.Join(dir, "att.bin")
	if out, code := run(t, bin, nil, "attestations", "export", "--store", filepath.Join(dir, "a", "db"), entries[0].Key, "-o", file); code != 0 {
		t.Fatalf("export: exit %d\n%s", code, out)
	}
	if out, code := run(t, bin, nil, "attestations", "verify", "--any-verdict", file); code != 0 || !strings.Contains(out, "VALID") {
		t.Fatalf("verify: exit %d\n%s", code, out)
	}
	// A corrupted copy does not verify.
	data, _ := os.ReadFile(file)
	data[len(data)-5] ^= 0xff
	bad := filepath.Join(dir, "bad.bin")
	_ = os.WriteFile(bad, data, 0o644)
	if out, code := run(t, bin, nil, "attestations", "verify", bad); code != 1 {
		t.Fatalf("verify tampered: exit %d\n%s", code, out)
	}

	// Usage and network errors.
	if out, code := run(t, bin, env, append([]string{"attest", "not-a-multiaddr"}, common...)...); code != 2 {
		t.Fatalf("bad address: exit %d\n%s", code, out)
	}
	dead := "/ip4/127.0.0.1/tcp/1/p2p/" + strings.Split(addrB, "/p2p/")[1]
	// The two attests above used up A's corpus (--max-serves 1), which
	// attest now reports before dialing: room for one more serve.
	if out, code := run(t, bin, env, append([]string{"attest", "--timeout", "20s", "--max-serves", "3", dead}, common...)...); code != 3 {
		t.Fatalf("unreachable peer: exit %d\n%s", code, out)
	}
	if out, code := run(t, bin, nil, "attest", "--rounds", "7", addrB); code != 2 {
		t.Fatalf("bad policy: exit %d\n%s", code, out)
	}

	// A node as a public one runs by default (spec/protocol.md §5b, §5c):
	// it asks the verifier that comes to it for a payment, and answers it
	// only once it has verified and accepted it; attest pays, waits for
	// that verdict and asks again. Both sides accept. (A's corpus is
	// used up at --max-serves 1 by now: room for more serves.)
	_, addrP := startNodeProc(t, bin, filepath.Join(dir, "p"), oracle.URL, corpusB, "--verify-first=on", "--pay-difficulty", "12")
	out, code = run(t, bin, env, append([]string{"attest", "--json", "--max-serves", "5", addrP}, common...)...)
	if err := json.Unmarshal([]byte(out), &m); code != 0 || err != nil || !m.Ours.Accepted || !m.Theirs.Accepted || !m.Theirs.AttestationVerified {
		t.Fatalf("attest a node that verifies first and asks payment: exit %d %v\n%s", code, err, out)
	}
}

func TestDemoWithoutLLM(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the full demo")
	}
	var out, errb bytes.Buffer
	t.Setenv("ACAPTCHA_LLM", "")
	code := Main(context.Background(), []string{"demo", "--json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("demo exit %d: %s", code, errb.String())
	}
	var res struct {
		TauMS   *int64 `json:"tau_ms"`
		TotalMS *int64 `json:"total_ms"`
		Rows    []struct {
			Prover, Kind string
			Ran          bool
			Accepted     bool
			Reason       string
			Note         string
		}
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if res.TauMS == nil || *res.TauMS <= 0 || res.TotalMS == nil {
		t.Errorf("demo --json: tau_ms and total_ms in milliseconds:\n%s", out.String())
	}
	seen := map[string]bool{}
	for _, r := range res.Rows {
		seen[r.Kind] = true
		switch r.Kind {
		case "script":
			if !r.Ran || r.Accepted || r.Reason != "wrong_answer" {
				t.Errorf("script row: %+v", r)
			}
		case "human":
			if !r.Ran || r.Accepted || r.Reason != "timeout" {
				t.Errorf("human row: %+v", r)
			}
		case "agent":
			if r.Ran || !strings.Contains(r.Note, "--llm") {
				t.Errorf("agent row without an LLM: %+v", r)
			}
		case "whitebox":
			// Either verdict: the inverter passes some procedural sessions.
			if !r.Ran || !strings.Contains(r.Note, "read this code") {
				t.Errorf("white-box row: %+v", r)
			}
		}
	}
	if len(seen) != 4 {
		t.Fatalf("rows: %+v", res.Rows)
	}
}

func TestEnvBinding(t *testing.T) {
	t.Setenv("ACAPTCHA_ROUNDS", "9")
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"demo"}, &out, &errb); code != exitUsage {
		t.Fatalf("ACAPTCHA_ROUNDS=9 accepted: exit %d", code)
	}
	t.Setenv("ACAPTCHA_ROUNDS", "many")
	if code := Main(context.Background(), []string{"demo"}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "ACAPTCHA_ROUNDS") {
		t.Fatalf("bad env value: %s", errb.String())
	}
}
