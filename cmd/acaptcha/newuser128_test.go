package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
)

// bench abuse --scale NaN is a usage error naming the flag (exit 2), as
// --scale 0 is: NaN passed the CLI's range check (every comparison with it
// is false) and the library refused it as a runtime failure, exit 1,
// "abuse bench: scale NaN: want 0..16".
func TestNewUser128AbuseScaleNaN(t *testing.T) {
	for _, v := range []string{"NaN", "nan", "+Inf", "-Inf"} {
		args := []string{"bench", "abuse", "--scale", v, "--duration", "1s"}
		var out, errb bytes.Buffer
		if code := Main(context.Background(), args, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "--scale") {
			t.Errorf("%v: exit %d, want %d naming --scale (stderr %q)", args, code, exitUsage, errb.String())
		}
	}
}

// generate refuses a narrative length or question count its source
// cannot write with an error that names the flag and the source's range:
// before, the generators' own errors named their configuration fields
// under layers of prefixes ("procedural generator: procedural: invalid
// configuration: MaxTokens 5000 outside [max(MinTokens 350, 450), 4000]",
// "hybrid: skeletons: procedural: invalid configuration: QuestionsPerPart
// 7 outside [1, 6]"), and --min-tokens above --max-tokens was reported as
// a --max-tokens out of range.
func TestNewUser128GenerateShapeNamesFlags(t *testing.T) {
	llm := []string{"--llm", "openai:x", "--llm-base-url", "http://127.0.0.1:1/v1"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--source", "procedural", "--max-tokens", "5000"}, "--max-tokens 5000: --source procedural wants 450 to 4000"},
		{[]string{"--source", "procedural", "--max-tokens", "400"}, "--max-tokens 400: --source procedural wants 450 to 4000"},
		{[]string{"--source", "procedural", "--min-tokens", "60", "--max-tokens", "460"}, "--min-tokens 60: --source procedural writes parts of 350 to 4000"},
		{[]string{"--source", "procedural", "--min-tokens", "2000"}, "--max-tokens 1100 is below --min-tokens 2000"},
		{[]string{"--source", "procedural", "--questions", "7"}, "--questions 7: --source procedural writes 1 to 6"},
		{append([]string{"--source", "hybrid", "--questions", "7"}, llm...), "--questions 7: --source hybrid writes 1 to 6"},
		{append([]string{"--source", "hybrid", "--max-tokens", "400"}, llm...), "--max-tokens 400: --source hybrid wants 450 to 4000"},
		{append([]string{"--source", "llm", "--questions", "9"}, llm...), "--questions 9: --source llm writes 1 to 8"},
		{append([]string{"--source", "llm", "--min-tokens", "10"}, llm...), "--min-tokens 10: --source llm writes parts of 50 to 4000"},
		{append([]string{"--source", "llm", "--max-tokens", "100000"}, llm...), "--max-tokens 100000: --source llm wants 350 to 4000"},
	} {
		args := append([]string{"generate", "--n", "1", "--out", t.TempDir()}, c.args...)
		_, errOut, code := runMain(t, args...)
		if code != exitUsage || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "invalid configuration") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errOut, exitUsage, c.want)
		}
	}
}

// generate --source procedural refuses the LLM flags typed on the command
// line (exit 2, naming the flag), as challenge inspect does without
// --cross-check: the offline generator calls no LLM, and `generate
// --source procedural --llm openai:M` (or a malformed `--llm bogus`, which
// every other command refuses) wrote procedural sets, exit 0, without a
// word. An ACAPTCHA_LLM exported for the node is no such request.
func TestNewUser128GenerateProceduralRefusesLLM(t *testing.T) {
	for _, extra := range [][]string{
		{"--llm", "bogus"},
		{"--llm", "openai:gpt-4o-mini"},
		{"--llm-base-url", "http://127.0.0.1:1/v1"},
	} {
		dir := t.TempDir()
		args := append([]string{"generate", "--source", "procedural", "--n", "1", "--out", dir}, extra...)
		_, errOut, code := runMain(t, args...)
		if code != exitUsage || !strings.Contains(errOut, extra[0]) || !strings.Contains(errOut, "no LLM") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %s", extra, code, errOut, exitUsage, extra[0])
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("%v: wrote %d files", extra, len(ents))
		}
	}
	t.Setenv("ACAPTCHA_LLM", "openai:gpt-4o-mini")
	if _, errOut, code := runMain(t, "generate", "--source", "procedural", "--n", "1", "--out", t.TempDir()); code != exitOK {
		t.Errorf("ACAPTCHA_LLM set, generate --source procedural: exit %d\n%s", code, errOut)
	}
}

// A --store that names a file plainly holding something else (an exported
// attestation, a challenge set or other JSON, a text file) is a slip of
// the flag, refused as a key file is (exit 2, "not a store", the file left
// as it is): before, every command called it damaged, "move it aside to
// start afresh", exit 1. Binary data is still a damaged store.
func TestNewUser128StoreNamingOtherFile(t *testing.T) {
	dir := t.TempDir()
	store, _, env := storeWithOne(t, dir)
	set, err := os.ReadFile(exampleSet)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"peer.att":  env,
		"peer.hex":  []byte(hex.EncodeToString(env) + "\n"),
		"set.json":  set,
		"notes.txt": []byte("my notes\n"),
	}
	ctx := context.Background()
	for name, data := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"attestations", "list", "--store", path},
			{"peers", "--store", path},
			{"attest", "--store", path, "--key", filepath.Join(dir, "key"), "--listen", "/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/tcp/1/p2p/12D3KooWNsPYVuD8iRSFS8ChcSK8WKDVU6WeyeNkiR59DRPQNYAh"},
		} {
			_, errOut, code := newUserMain(ctx, args...)
			if code != exitUsage || !strings.Contains(errOut, "not a store") || strings.Contains(errOut, "damaged") {
				t.Errorf("%s: %v: exit %d, stderr %q; want exit %d, not a store", name, args[:2], code, errOut, exitUsage)
			}
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
			t.Errorf("%s was changed", name)
		}
		if _, err := os.Stat(path + "-wal"); err == nil {
			t.Errorf("%s: a write-ahead log was made beside it", name)
		}
	}
	// Binary data that is no bbolt file is a damaged store, as before.
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, bytes.Repeat([]byte{0xff, 0x00, 0x13}, 3000), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := newUserMain(ctx, "attestations", "list", "--store", garbage); code != exitFailure || !strings.Contains(errOut, "damaged") {
		t.Errorf("binary garbage: exit %d, stderr %q; want exit %d, damaged", code, errOut, exitFailure)
	}
	if out, errOut, code := newUserMain(ctx, "attestations", "list", "--store", store); code != exitOK || out == "" {
		t.Errorf("the real store: exit %d\n%s", code, errOut)
	}
}

// --pool-size above the pool's cap is a usage error naming the flag on
// every command that takes it: before, it was "challenge pool: pool: size
// 100000, want 1..10000" once an LLM pool was built, and a node, demo or
// eval on another source took it without a word.
func TestNewUser128PoolSizeCap(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"node", "--key", filepath.Join(dir, "key"), "--store", filepath.Join(dir, "db"), "--listen", "/ip4/127.0.0.1/tcp/0", "--llm", "openai:x", "--llm-base-url", "http://127.0.0.1:1/v1", "--challenges", "llm"},
		{"node", "--key", filepath.Join(dir, "key"), "--store", filepath.Join(dir, "db"), "--listen", "/ip4/127.0.0.1/tcp/0"},
		{"eval", "--sessions", "1", "--out", filepath.Join(dir, "eval")},
		{"demo"},
	} {
		args = append(args, "--pool-size", "100000")
		// Refused at once; a node that took the value would run until
		// stopped, and the demo for 15 s.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, errOut, code := newUserMain(ctx, args...)
		cancel()
		if code != exitUsage || !strings.Contains(errOut, "--pool-size 100000") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming --pool-size", args, code, errOut, exitUsage)
		}
	}
}

// attest with a node that verifies first (--verify-first=on) and rejects
// us prints the result as any verdict is printed (exit 1, not accepted):
// its signed verdict on us on standard output, none of ours (we ran no
// session with it), and no error line; with --json, the result object,
// and no error object on standard error. Before, it was an error line
// alone, "error: attest ID: it verifies us before it answers us, and did
// not accept us (wrong_answer)" (with --json an error object), and the
// peer's signed verdict, stored, went unprinted.
func TestNewUser128AttestVerifyFirstRejectsUs(t *testing.T) {
	llm := testutil.NewOpenAIServer(testutil.Text("42")) // a wrong answer to every question
	t.Cleanup(llm.Close)
	t.Setenv("OPENAI_API_KEY", "test")
	dir := t.TempDir()
	common := []string{"--llm", "openai:stub", "--llm-base-url", llm.URL + "/v1", "--challenges", "procedural"}
	out := startNodeText(t, append([]string{"node", "--verify-first=on", "--mdns=false", "--key", filepath.Join(dir, "nkey"), "--store", filepath.Join(dir, "ndb"),
		"--listen", "/ip4/127.0.0.1/tcp/0"}, common...), "/p2p/")
	var addr string
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "/ip4/127.0.0.1/tcp/") && strings.Contains(f, "/p2p/") {
			addr = f
			break
		}
	}
	if addr == "" {
		t.Fatalf("no address in\n%s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i, js := range []bool{false, true} {
		sub := filepath.Join(dir, fmt.Sprint("a", i)) // a fresh identity: no standing verdict
		args := append([]string{"attest", "--key", filepath.Join(sub, "key"), "--store", filepath.Join(sub, "db"), "--listen", "/ip4/127.0.0.1/tcp/0", addr}, common...)
		if js {
			args = append(args, "--json")
		}
		stdout, stderr, code := newUserMain(ctx, args...)
		if code != exitFailure {
			t.Fatalf("json %v: exit %d, want %d\nstdout %s\nstderr %s", js, code, exitFailure, stdout, stderr)
		}
		if js {
			var m struct {
				Ours   struct{ Accepted bool }
				Theirs struct {
					Accepted            bool
					Reason              string
					AttestationVerified bool `json:"attestation_verified"`
				}
			}
			if err := json.Unmarshal([]byte(stdout), &m); err != nil || m.Ours.Accepted || m.Theirs.Accepted || m.Theirs.Reason != "wrong_answer" || !m.Theirs.AttestationVerified {
				t.Errorf("--json: %v, %+v\n%s", err, m, stdout)
			}
			if strings.Contains(stderr, `"exit_code"`) {
				t.Errorf("--json: an error object on stderr:\n%s", stderr)
			}
		} else {
			if !strings.Contains(stdout, "our verdict of it: none") || !strings.Contains(stdout, "verified us: REJECTED (wrong_answer)") || !strings.Contains(stdout, "their signed attestation verified and stored") {
				t.Errorf("text:\n%s", stdout)
			}
			if strings.Contains(stderr, "error:") {
				t.Errorf("text: an error line on stderr:\n%s", stderr)
			}
		}
		if list, errOut, code := newUserMain(ctx, "attestations", "list", "--store", filepath.Join(sub, "db")); code != exitOK || !strings.Contains(list, "wrong_answer") {
			t.Errorf("json %v: the peer's verdict is not in the store: exit %d\n%s%s", js, code, list, errOut)
		}
		// Again at once: the peer will not verify us now (we are in its
		// back-off) and declines our hello VERIFY_FIRST. That is an
		// answer too, printed with its standing verdict on us from our
		// store; before, an error line alone ("prover verifies this node
		// first: ...").
		stdout, stderr, code = newUserMain(ctx, args...)
		if code != exitFailure || strings.Contains(stderr, "error:") || strings.Contains(stderr, `"exit_code"`) {
			t.Fatalf("again, json %v: exit %d, want %d and no error\nstdout %s\nstderr %s", js, code, exitFailure, stdout, stderr)
		}
		if js {
			var m struct {
				Ours struct {
					Accepted bool
					Reason   string
				}
				Theirs struct {
					Reason    string
					FromStore bool `json:"from_store"`
				}
			}
			if err := json.Unmarshal([]byte(stdout), &m); err != nil || m.Ours.Accepted || m.Ours.Reason != "verify_first" || m.Theirs.Reason != "wrong_answer" || !m.Theirs.FromStore {
				t.Errorf("again --json: %v, %+v\n%s", err, m, stdout)
			}
		} else if !strings.Contains(stdout, "our verdict of it: none") || !strings.Contains(stdout, "verified us earlier: REJECTED (wrong_answer)") {
			t.Errorf("again, text:\n%s", stdout)
		}
	}
}

// eval --help says what --agent-sessions 0 means and that --sessions caps
// it, as its error does ("want 0 (as many as --sessions) or more"):
// before, the help said only "sessions per configured LLM agent", so 0
// read as "no agent sessions" and 100 with --sessions 20 as 100.
func TestNewUser128AgentSessionsHelp(t *testing.T) {
	out, errOut, code := runMain(t, "eval", "--help")
	if code != exitOK || !strings.Contains(out, "0: as many as --sessions") || !strings.Contains(out, "never more than --sessions") {
		t.Errorf("eval --help: exit %d\n%s%s", code, out, errOut)
	}
}

// A --bootstrap or --relay address naming this node's own peer ID (the
// identity in --key, e.g. a node's address pasted into its own command
// line) is a usage error naming the flag (exit 2), as attest's own peer ID
// is, and no store is made: before, the node failed to start, exit 1,
// "start node: bootstrap address {12D3KooW...: [/ip4/...]} is this node
// itself" (a relay likewise).
func TestNewUser128BootstrapOrRelayIsSelf(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	k, err := peer.LoadOrCreateKey(keyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	self, err := lpeer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	addr := "/ip4/127.0.0.1/tcp/1/p2p/" + self.String()
	store := filepath.Join(dir, "db")
	for _, args := range [][]string{
		{"node", "--bootstrap", addr, "--mdns=false"},
		{"node", "--relay", addr, "--mdns=false"},
		{"mcp", "--relay", addr},
	} {
		args = append(args, "--key", keyFile, "--store", store, "--listen", "/ip4/127.0.0.1/tcp/0")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, errOut, code := newUserMain(ctx, args...)
		cancel()
		if code != exitUsage || !strings.Contains(errOut, args[1]+" "+addr) || !strings.Contains(errOut, "own peer ID") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %s", args[:2], code, errOut, exitUsage, args[1])
		}
		if _, err := os.Stat(store); err == nil {
			t.Fatalf("%v: a store was made", args[:2])
		}
	}
}

// A signal during bench provers' start-up is reported once (exit 130),
// as for every command, whether it reaches the parent alone (kill PID) or
// the whole process group (Ctrl-C), the prover fleet's child process
// included. Before, the fleet wrote an error of its own under the
// parent's: "error: context canceled" when the parent stopped it, "error:
// interrupted before acaptcha bench provers finished" when the signal
// reached it too (in text even under --json). The fleet now ends when the
// parent closes its stdin, and that alone, and a stop is no error for it.
func TestNewUser128BenchProversSignalOneError(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	for _, group := range []bool{false, true} {
		cmd := exec.Command(bin, "bench", "provers", "-n", "1500", "--baseline", "1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := cmd.Process.Pid
		t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
		// Wait for the fleet: the child process, up far enough to have
		// opened its first provers' sockets (its signal handling is in
		// place long before), and still starting (1,500 provers take
		// seconds).
		deadline := time.Now().Add(60 * time.Second)
		for {
			if child := childPID(pid); child > 0 && openFiles(child) > 32 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("group %v: no fleet with open sockets within 60 s:\n%s", group, errb.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		target := pid
		if group {
			target = -pid // Ctrl-C: the whole group
		}
		if err := syscall.Kill(target, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		code := cmd.ProcessState.ExitCode()
		errLines := strings.Count("\n"+errb.String(), "\nerror:")
		if code != exitInterrupted || errLines != 1 {
			t.Errorf("group %v: exit %d (%v), %d error lines, want %d and one:\n%s", group, code, err, errLines, exitInterrupted, errb.String())
		}
	}
}

// childPID is a child process of pid (of any of its threads), 0 when it
// has none.
func childPID(pid int) int {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		if err != nil {
			continue
		}
		var c int
		if _, err := fmt.Sscan(string(data), &c); err == nil {
			return c
		}
	}
	return 0
}

// openFiles is how many file descriptors process pid holds.
func openFiles(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents)
}

// attestations export -o naming a directory is a usage error (exit 2)
// naming the flag, as -o naming the store or the key is: before, exit 1,
// "write DIR: open DIR: is a directory".
func TestNewUser128ExportToDirectory(t *testing.T) {
	dir := t.TempDir()
	store, key, _ := storeWithOne(t, dir)
	for _, js := range []bool{false, true} {
		args := []string{"attestations", "export", key, "--store", store, "-o", dir}
		if js {
			args = append(args, "--json")
		}
		out, errOut, code := newUserMain(context.Background(), args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, "--out "+dir+" is a directory") {
			t.Errorf("json %v: exit %d, stdout %q, stderr %q; want exit %d", js, code, out, errOut, exitUsage)
		}
	}
}

// peers --peer with the node's own peer ID says so: before, it said the
// node was "unknown here: no attestation of it, by it or about it", of
// the node whose store holds every record it issued.
func TestNewUser128PeersPeerSelf(t *testing.T) {
	dir := t.TempDir()
	store, _, env := storeWithOne(t, dir)
	a, err := protocol.DecodeAttestationUnverified(env)
	if err != nil {
		t.Fatal(err)
	}
	self := a.Issuer.String()
	out, errOut, code := newUserMain(context.Background(), "peers", "--store", store, "--peer", self)
	if code != exitRejected || !strings.Contains(out, self+" is this node itself") || strings.Contains(out, "unknown here") {
		t.Errorf("exit %d\n%s%s", code, out, errOut)
	}
}

// A stdio line holding an id with neither a method nor a result nor an
// error ({"jsonrpc":"2.0","id":5}: a request whose method was left out)
// is answered as an invalid request with its id (-32600), alone or in a
// batch, as README says of every line that is no JSON-RPC message: before,
// the SDK took it for a response to a request it never sent and dropped
// it, and the client waited for an answer that never came. A real
// response ("result": null included) is still taken without an answer.
func TestNewUser128MCPStdioBareID(t *testing.T) {
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":5}`,
		`[{"jsonrpc":"2.0","id":6}]`,
		`{"jsonrpc":"2.0","id":"r","result":null}`,
		`{"jsonrpc":"2.0","id":7,"method":"ping"}`,
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	var out syncBuffer
	tr := mcpStdioTransport(strings.NewReader(strings.Join(lines, "\n")+"\n"), &out, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Run(ctx, tr); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("session ended: %v\n%s", err, out.String())
	}
	got := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r struct {
			ID    json.RawMessage `json:"id"`
			Error *struct{ Code int }
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("stdout line %q: %v", l, err)
		}
		code := 0
		if r.Error != nil {
			code = r.Error.Code
		}
		got[fmt.Sprintf("%s/%d", r.ID, code)]++
	}
	want := map[string]int{"1/0": 1, "5/-32600": 1, "null/-32600": 1, "7/0": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("responses %v, want %v\n%s", got, want, out.String())
	}
}

// An empty positional argument (an unset shell variable: `attestations
// verify "$FILE"`) is a usage error naming the argument, as an empty flag
// value is: before, it read "error: : open : no such file or directory",
// "no attestation with key  (KEY as printed by ...)" or "failed to parse
// multiaddr \"\": empty multiaddr".
func TestNewUser128EmptyArgument(t *testing.T) {
	dir := t.TempDir()
	store, _, _ := storeWithOne(t, dir)
	for _, c := range []struct {
		args []string
		name string
	}{
		{[]string{"attestations", "verify", ""}, "FILE"},
		{[]string{"attestations", "show", " ", "--store", store}, "KEY"},
		{[]string{"attestations", "export", "", "--store", store}, "KEY"},
		{[]string{"challenge", "inspect", ""}, "FILE"},
		{[]string{"attest", "", "--key", filepath.Join(dir, "key"), "--store", filepath.Join(dir, "db2")}, "MULTIADDR"},
	} {
		_, errOut, code := newUserMain(context.Background(), c.args...)
		if code != exitUsage || !strings.Contains(errOut, c.name+" is empty (an unset shell variable?)") {
			t.Errorf("%q: exit %d, stderr %q; want exit %d naming %s", c.args, code, errOut, exitUsage, c.name)
		}
	}
}

// The null device is no terminal: `attestations verify - </dev/null` (a
// cron job, a script) said on standard error that it waited for a pasted
// record ending with Ctrl-D, and `export KEY >/dev/null` wrote hex, as if
// a person were at a terminal (both took any character device for one).
func TestNewUser128DevNullIsNoTerminal(t *testing.T) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Skip(err)
	}
	defer null.Close()
	if isTerminal(null) || stdinIsTerminal(null) {
		t.Errorf("%s taken for a terminal (isTerminal %v, stdinIsTerminal %v)", os.DevNull, isTerminal(null), stdinIsTerminal(null))
	}
	f, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) || stdinIsTerminal(f) {
		t.Error("a regular file taken for a terminal")
	}
}
