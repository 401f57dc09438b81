package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// A node bound to all interfaces (`--http :0`, `--metrics :0`) printed
// http://[::]:PORT, which is not an address a user can open (curl:
// "Could not resolve host" / connection refused on some systems, a browser
// refuses it). It now prints a loopback URL that reaches the node from
// this machine, and says it listens on all interfaces.
func TestUnspecifiedHostPrintsOpenableURL(t *testing.T) {
	dir := t.TempDir()
	out := startNodeText(t, []string{"node", "--http", ":0", "--metrics", ":0", "--challenges", "examples",
		"--key", filepath.Join(dir, "key"), "--store", filepath.Join(dir, "db"), "--listen", "/ip4/127.0.0.1/tcp/0",
		"--mdns=false", "--gossip=false"}, "HTTP door")
	door := regexp.MustCompile(`HTTP door for agents without libp2p: (\S+)`).FindStringSubmatch(out)
	metrics := regexp.MustCompile(`metrics at (\S+)`).FindStringSubmatch(out)
	if door == nil || metrics == nil {
		t.Fatalf("no door or metrics line:\n%s", out)
	}
	for _, u := range []string{door[1], metrics[1]} {
		if strings.Contains(u, "[::]") || strings.Contains(u, "0.0.0.0") {
			t.Errorf("printed %s: not an address a user can open", u)
			continue
		}
		c := &http.Client{Timeout: 5 * time.Second}
		target := u
		if !strings.HasSuffix(u, "/metrics") {
			target = u + "/.well-known/acaptcha.json"
		}
		resp, err := c.Get(target)
		if err != nil {
			t.Errorf("GET %s: %v", target, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %s", target, resp.Status)
		}
	}
	if !strings.Contains(out, "all interfaces") {
		t.Errorf("the output does not say the door listens on all interfaces:\n%s", out)
	}
}

// The same for mcp --http :0: its announced endpoint was
// http://[::]:PORT/mcp.
func TestMCPHTTPUnspecifiedHostPrintsOpenableURL(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"mcp", "--json", "--http", ":0", "--challenges", "procedural", "--key", filepath.Join(dir, "key"),
			"--store", filepath.Join(dir, "db"), "--listen", "/ip4/127.0.0.1/tcp/0"}, &out, &errb)
	}()
	var ann struct {
		URL string `json:"mcp_url"`
	}
	for i := 0; i < 200 && ann.URL == ""; i++ {
		if err := json.Unmarshal([]byte(out.String()), &ann); err != nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
	cancel()
	if code := <-done; code != exitOK || ann.URL == "" {
		t.Fatalf("exit %d, stdout %q\nstderr:\n%s", code, out.String(), errb.String())
	}
	if !strings.HasPrefix(ann.URL, "http://127.0.0.1:") || !strings.HasSuffix(ann.URL, "/mcp") {
		t.Errorf("mcp_url %q: want http://127.0.0.1:PORT/mcp", ann.URL)
	}
}

// challenge inspect on well-formed JSON that is not a challenge set ({}, a
// set with no parts) said malformed_json, the reason for a file that is
// not JSON at all: it is a structural failure (generation.md: "structure:
// a structural rule above failed"). Syntax errors stay malformed_json.
func TestInspectWellFormedNonSetIsStructure(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ body, reason string }{
		{`{}`, "structure"},
		{`{"domain":"x","parts":[]}`, "structure"},
		{`{"x"`, "malformed_json"},
		{`[]`, "malformed_json"},
		{`{"bogus":1}`, "malformed_json"},
	} {
		f := filepath.Join(dir, "s.json")
		if err := os.WriteFile(f, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := runMain(t, "challenge", "inspect", "--json", f)
		var got struct {
			Accepted bool   `json:"accepted"`
			Reason   string `json:"reason"`
			Detail   string `json:"detail"`
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != exitRejected || got.Accepted || got.Reason != c.reason {
			t.Errorf("inspect %s: exit %d, reason %q (%v), want %s\nstdout %s\nstderr %s", c.body, code, got.Reason, err, c.reason, stdout, stderr)
		}
	}
}

// silentListener accepts TCP connections on loopback and never writes
// nor closes them until the test ends: a peer or node that is silent.
func silentListener(t *testing.T) *net.TCPAddr {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return l.Addr().(*net.TCPAddr)
}

// A command that gives up at its time limit says which limit it was: a
// silent peer made `attest --timeout 1s` say only "failed to dial:
// context deadline exceeded", `bench swarm --timeout` "swarm: connecting:
// context deadline exceeded" and a silent `peers --node` address "Get
// ...: context deadline exceeded", none naming the flag or the bound that
// ran out (README: exit 3 for a peer "silent until --timeout").
func TestTimeoutErrorsNameTheirBound(t *testing.T) {
	dir := t.TempDir()
	silent := silentListener(t)
	target := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d/p2p/12D3KooWCHRxU7HALLkCqz5d6UgSmrCgaVpfCt2yTKQpyGkY4XtL", silent.Port)
	for _, json := range []bool{false, true} {
		args := []string{"attest", "--timeout", "1s", "--challenges", "procedural", "--log-level", "error",
			"--key", filepath.Join(dir, "key"), "--store", filepath.Join(dir, "db"), "--listen", "/ip4/127.0.0.1/tcp/0", target}
		if json {
			args = append(args, "--json")
		}
		start := time.Now()
		_, stderr, code := runMain(t, args...)
		if code != exitNetwork || !strings.Contains(stderr, "--timeout 1s") {
			t.Errorf("attest --timeout 1s (json %v) to a silent peer: exit %d (want %d), error naming --timeout 1s:\n%s", json, code, exitNetwork, stderr)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("attest --timeout 1s took %s", took)
		}
	}

	// attest --llm writes its challenge set before it dials, within the
	// same --timeout: a model that never finishes the set ended with
	// "no challenge set written (...): context deadline exceeded".
	slowWriter := testutil.NewOpenAIServer(testutil.BrainFunc(func(r testutil.BrainRequest) testutil.BrainReply {
		if strings.HasPrefix(r.System, "You write reading-comprehension puzzles") {
			return testutil.BrainReply{Text: "{}", Delay: time.Minute}
		}
		return testutil.BrainReply{Text: "02:10"} // the LLM check's answer
	}))
	defer slowWriter.Close()
	t.Setenv("OPENAI_API_KEY", "test")
	_, stderr, code := runMain(t, "attest", "--timeout", "2s", "--llm", "openai:stub", "--llm-base-url", slowWriter.URL+"/v1", "--log-level", "error",
		"--key", filepath.Join(dir, "key"), "--store", filepath.Join(dir, "db"), "--listen", "/ip4/127.0.0.1/tcp/0", target)
	if code != exitFailure || !strings.Contains(stderr, "--timeout 2s") {
		t.Errorf("attest --llm --timeout 2s with a model that never writes its set: exit %d (want %d), error naming --timeout 2s:\n%s", code, exitFailure, stderr)
	}

	_, stderr, code = runMain(t, "bench", "swarm", "-n", "3", "--timeout", "1ms")
	if code != exitFailure || !strings.Contains(stderr, "--timeout 1ms") {
		t.Errorf("bench swarm --timeout 1ms: exit %d (want %d), error naming --timeout 1ms:\n%s", code, exitFailure, stderr)
	}

	_, err := fetchPeers(context.Background(), fmt.Sprintf("http://%s/peers", silent), 300*time.Millisecond)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitNetwork || !strings.Contains(err.Error(), "no answer within 300ms") {
		t.Errorf("peers --node at a silent address: %v, want a network error saying no answer within 300ms", err)
	}
}

// A --listen address no libp2p transport listens on is a usage error
// that says what to write: `--listen /ip4/127.0.0.1/udp/0` (QUIC needs
// /quic-v1) exited 1 with "start libp2p host: failed to listen on any
// addresses: [no transport for protocol]" after three ERROR lines of
// go-libp2p's, and beside a good address it was dropped without a word
// (attest then ran on the TCP address alone).
func TestListenWithoutTransportIsUsage(t *testing.T) {
	dir := t.TempDir()
	common := []string{"--key", filepath.Join(dir, "key"), "--store", filepath.Join(dir, "db"), "--challenges", "procedural", "--log-level", "error"}
	for _, args := range [][]string{
		{"node", "--listen", "/ip4/127.0.0.1/udp/0"},
		{"node", "--listen", "/ip4/127.0.0.1/udp/0/quic"},
		{"node", "--listen", "/ip4/127.0.0.1"},
		{"attest", "--timeout", "5s", "--listen", "/ip4/127.0.0.1/tcp/0", "--listen", "/ip4/127.0.0.1/udp/0",
			"/ip4/127.0.0.1/tcp/1/p2p/12D3KooWCHRxU7HALLkCqz5d6UgSmrCgaVpfCt2yTKQpyGkY4XtL"},
	} {
		_, stderr, code := runMain(t, append(args, common...)...)
		if code != exitUsage || !strings.Contains(stderr, "--listen") || !strings.Contains(stderr, "quic-v1") {
			t.Errorf("%v: exit %d (want %d), an error naming --listen and how to write it:\n%s", args, code, exitUsage, stderr)
		}
	}
	// What libp2p listens on stays accepted.
	for _, l := range []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1", "/ip6/::1/tcp/0/ws", "/dns4/localhost/tcp/0",
		"/ip4/127.0.0.1/udp/0/quic-v1/webtransport", "/ip4/127.0.0.1/udp/0/webrtc-direct", "/p2p-circuit"} {
		if err := checkListenAddr(l); err != nil {
			t.Errorf("--listen %s refused: %v", l, err)
		}
	}
}

// README ("Exit codes and output"): an error is one line "error: ..." on
// standard error. An unreachable peer's error (libp2p's "all dials
// failed" with one indented line per address tried) took two or more
// lines, so `2>&1 | tail -1` or a line-reading program saw
// "  * [/ip4/...] dial tcp4 ...: connection refused" without the
// "error:" that says what failed.
func TestErrorIsOneLine(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().(*net.TCPAddr)
	l.Close() // nothing listens there now: connection refused
	dir := t.TempDir()
	target := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d/p2p/12D3KooWCHRxU7HALLkCqz5d6UgSmrCgaVpfCt2yTKQpyGkY4XtL", addr.Port)
	for _, json := range []bool{false, true} {
		args := []string{"attest", "--timeout", "5s", "--challenges", "procedural", "--log-level", "error",
			"--key", filepath.Join(dir, "key"), "--store", filepath.Join(dir, "db"), "--listen", "/ip4/127.0.0.1/tcp/0", target}
		if json {
			args = append(args, "--json")
		}
		_, stderr, code := runMain(t, args...)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		want := "error: "
		if json {
			want = `{"error":`
		}
		if code != exitNetwork || len(lines) != 1 || !strings.HasPrefix(lines[0], want) || !strings.Contains(lines[0], "connection refused") {
			t.Errorf("attest (json %v) to a closed port: exit %d, want %d and one line %q...:\n%s", json, code, exitNetwork, want, stderr)
		}
	}
}

// README's configuration table gives --pow-difficulty's default as auto
// and explains "auto is 16 ... when the node listens beyond loopback", so
// a user writes --pow-difficulty auto (or ACAPTCHA_POW_DIFFICULTY=auto):
// it was refused with `invalid argument "auto" for "--pow-difficulty"
// flag: strconv.ParseInt: parsing "auto": invalid syntax` (exit 2); only
// the -1 of --help meant auto.
func TestPowDifficultyAuto(t *testing.T) {
	dir := t.TempDir()
	out := startNodeText(t, []string{"node", "--pow-difficulty", "auto", "--challenges", "examples",
		"--key", filepath.Join(dir, "key"), "--store", filepath.Join(dir, "db"), "--listen", "/ip4/127.0.0.1/tcp/0",
		"--mdns=false", "--gossip=false"}, "attest with")
	if !strings.Contains(out, "no proof of work asked of libp2p peers") {
		t.Errorf("--pow-difficulty auto on loopback: want no proof of work:\n%s", out)
	}
	for _, v := range []string{"auto", "AUTO", "16", "0", "-1"} {
		var l limitOptions
		if err := (&powFlag{&l.powDifficulty}).Set(v); err != nil {
			t.Errorf("--pow-difficulty %s: %v", v, err)
		}
	}
	for _, v := range []string{"x", "1.5", ""} {
		var l limitOptions
		if err := (&powFlag{&l.powDifficulty}).Set(v); err == nil {
			t.Errorf("--pow-difficulty %q accepted", v)
		}
	}
}

// README: every flag can be set as ACAPTCHA_<FLAG>, and with --json an
// error is one JSON object. With ACAPTCHA_JSON=true an error cobra meets
// before the environment is read (an unknown command or flag, a missing
// argument) was the text line "error: ...", and so was any error under
// --json=1 (only "--json" and "--json=true" were looked for).
func TestJSONErrorsFromEnvAndBoolForms(t *testing.T) {
	for _, c := range []struct {
		env  string
		args []string
		json bool
	}{
		{"true", []string{"bogus"}, true},
		{"1", []string{"attest"}, true},
		{"true", []string{"attest", "--bogus", "x"}, true},
		{"", []string{"attest", "--json=1"}, true},
		{"", []string{"bogus", "--json=T"}, true},
		{"true", []string{"bogus", "--json=false"}, false},
		{"", []string{"bogus"}, false},
		{"", []string{"bogus", "--", "--json"}, false},
	} {
		t.Run(c.env+" "+strings.Join(c.args, " "), func(t *testing.T) {
			if c.env != "" {
				t.Setenv("ACAPTCHA_JSON", c.env)
			} else {
				t.Setenv("ACAPTCHA_JSON", "")
				os.Unsetenv("ACAPTCHA_JSON")
			}
			_, stderr, code := runMain(t, c.args...)
			var obj struct {
				Error    string `json:"error"`
				ExitCode int    `json:"exit_code"`
			}
			isJSON := json.Unmarshal([]byte(stderr), &obj) == nil && obj.Error != ""
			if code != exitUsage || isJSON != c.json || (isJSON && obj.ExitCode != exitUsage) || (!isJSON && !strings.HasPrefix(stderr, "error: ")) {
				t.Errorf("exit %d, want %d; JSON error %v, want %v:\n%s", code, exitUsage, isJSON, c.json, stderr)
			}
		})
	}
}

// attest /p2p/PEER_ID (the peer ID with no address: attest discovers no
// peers, so there is nothing to dial) started a node, dialled nothing
// and exited 3, a network error, with "failed to dial ...: no
// addresses". It is a wrong argument: exit 2 with what to give instead.
func TestAttestPeerIDOnlyIsUsage(t *testing.T) {
	dir := t.TempDir()
	for _, json := range []bool{false, true} {
		args := []string{"attest", "--log-level", "error", "--key", filepath.Join(dir, "key"), "--store", filepath.Join(dir, "db"),
			"/p2p/12D3KooWCHRxU7HALLkCqz5d6UgSmrCgaVpfCt2yTKQpyGkY4XtL"}
		if json {
			args = append(args, "--json")
		}
		_, stderr, code := runMain(t, args...)
		if code != exitUsage || !strings.Contains(stderr, "no address") {
			t.Errorf("attest /p2p/ID (json %v): exit %d, want %d naming the missing address:\n%s", json, code, exitUsage, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "db")); err == nil {
		t.Error("a store was created for an attest refused as a usage error")
	}
}

// A node (or attest, mcp) refused as a usage error made its key and store
// first when the error was in --llm or in a --challenges source found
// only when built: `node --llm gpt-4o --store /tmp/a/db` (no provider)
// or `--challenges corpus:/mistyped` left a fresh identity and an empty
// store behind an exit 2. They are checked before anything is created.
func TestUsageErrorsCreateNoKeyOrStore(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "emptydir")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	for i, extra := range [][]string{
		{"node", "--llm", "gpt-4o"},
		{"node", "--challenges", "corpus:" + filepath.Join(dir, "nonexist")},
		{"node", "--challenges", "corpus:" + empty},
		{"node", "--challenges", "llm"},
		{"node", "--challenges", "hybrid"},
		{"attest", "--llm", "openai:", "/ip4/127.0.0.1/tcp/1/p2p/12D3KooWCHRxU7HALLkCqz5d6UgSmrCgaVpfCt2yTKQpyGkY4XtL"},
		{"mcp", "--challenges", "corpus:" + filepath.Join(dir, "nonexist")},
	} {
		key, store := filepath.Join(dir, fmt.Sprint("key", i)), filepath.Join(dir, fmt.Sprint("db", i))
		args := append(append([]string{}, extra...), "--key", key, "--store", store, "--listen", "/ip4/127.0.0.1/tcp/0", "--log-level", "error")
		_, stderr, code := runMain(t, args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d:\n%s", extra, code, exitUsage, stderr)
		}
		for _, f := range []string{key, store} {
			if _, err := os.Stat(f); err == nil {
				t.Errorf("%v: %s was created:\n%s", extra, filepath.Base(f), stderr)
			}
		}
	}
}

// `acaptcha attestations list --json | acaptcha attestations verify -`:
// the list (a JSON array) was read as the envelope's raw bytes and
// refused as "envelope: proto: cannot parse invalid wire-format data". A
// list of one record verifies that record; a longer one says it is a
// list of N and how to give one.
func TestVerifyListJSON(t *testing.T) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	subject, _ := lpeer.IDFromPrivateKey(other)
	env := sealRejectedFrom(t, key, subject, skill.SourceLLM)
	dir := t.TempDir()
	item := `{"key":"k","direction":"issued","envelope_hex":"` + hex.EncodeToString(env) + `"}`
	one, two := filepath.Join(dir, "one.json"), filepath.Join(dir, "two.json")
	if err := os.WriteFile(one, []byte("["+item+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(two, []byte("["+item+","+item+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if stdout, stderr, code := runMain(t, "attestations", "verify", "--any-verdict", one); code != exitOK || !strings.Contains(stdout, "VALID") {
		t.Errorf("a list of one record: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if stdout, stderr, code := runMain(t, "attestations", "verify", two); code != exitRejected || !strings.Contains(stdout, "array of 2") {
		t.Errorf("a list of two records: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// demo --llm with an LLM that cannot be reached: its agent row said only
// "prover declined (DECLINE_REASON_PROVER_ERROR): answerer failed" (the
// verifier's view: a prover does not tell its verifier why), and the
// reason ("network error: failed to reach API server") was in a WARN log
// line among others. The demo runs the prover itself, so its row now
// carries the LLM's error.
func TestDemoAgentRowSaysWhyTheLLMFailed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String() + "/v1"
	l.Close()
	t.Setenv("OPENAI_API_KEY", "test")
	stdout, stderr, code := runMain(t, "demo", "--json", "--challenges", "examples", "--tau", "2s", "--total", "20s",
		"--llm", "openai:stub", "--llm-base-url", dead)
	var out struct {
		Rows []demoRow `json:"rows"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("demo --json: %v\n%s\n%s", err, stdout, stderr)
	}
	for _, r := range out.Rows {
		if r.Kind == "agent" && (r.Accepted || !strings.Contains(r.Detail, "the LLM: ") || !strings.Contains(r.Detail, "failed to reach")) {
			t.Errorf("agent row %+v: want the LLM's error (failed to reach API server)", r)
		}
	}
	if code != exitRejected {
		t.Errorf("exit %d, want %d", code, exitRejected)
	}
}

// A command that takes no arguments, given one (`acaptcha node
// /ip4/0.0.0.0/tcp/4717` for --listen, `acaptcha peers 12D3KooW...` for
// --peer), said `unknown command "/ip4/..." for "acaptcha node"`, as if
// node had subcommands. It says the command takes no arguments and that
// flags start with --.
func TestLeafCommandRefusesArgumentsByName(t *testing.T) {
	for _, args := range [][]string{
		{"node", "/ip4/0.0.0.0/tcp/4717"},
		{"peers", "12D3KooWCHRxU7HALLkCqz5d6UgSmrCgaVpfCt2yTKQpyGkY4XtL"},
		{"demo", "extra", "more"},
		{"version", "x"},
	} {
		_, stderr, code := runMain(t, args...)
		if code != exitUsage || strings.Contains(stderr, "unknown command") || !strings.Contains(stderr, "acaptcha "+args[0]+" takes no arguments") {
			t.Errorf("%v: exit %d, want %d saying it takes no arguments:\n%s", args, code, exitUsage, stderr)
		}
	}
}

// A flag with an optional value given its value after a space
// (`acaptcha node --limit-loopback off`) set the flag's bare meaning and
// left the value as an argument; the error names only that: it now says
// the flag takes its value after '='.
func TestOptionalValueFlagHint(t *testing.T) {
	_, stderr, code := runMain(t, "node", "--limit-loopback", "maybe")
	if code != exitUsage || !strings.Contains(stderr, "--limit-loopback takes its value after '=' (--limit-loopback=VALUE)") {
		t.Errorf("exit %d, want %d with the '=' hint:\n%s", code, exitUsage, stderr)
	}
	// No hint where no such flag was given, a bool flag included.
	if _, stderr, _ := runMain(t, "node", "/ip4/0.0.0.0/tcp/4717"); strings.Contains(stderr, "after '='") {
		t.Errorf("hint without an optional-value flag:\n%s", stderr)
	}
	if _, stderr, _ := runMain(t, "peers", "--json", "x"); strings.Contains(stderr, "after '='") {
		t.Errorf("hint for a bool flag:\n%s", stderr)
	}
}

// `acaptcha --version` was "unknown flag: --version"; it prints what
// `acaptcha version` does, and a binary without a VCS stamp says its
// commit is unknown rather than printing none.
func TestVersionFlag(t *testing.T) {
	flag, _, code := runMain(t, "--version")
	cmd, _, code2 := runMain(t, "version")
	if code != exitOK || code2 != exitOK || flag != cmd || !strings.HasPrefix(flag, "acaptcha ") {
		t.Fatalf("--version (exit %d) %q, version (exit %d) %q", code, flag, code2, cmd)
	}
	if v := buildVersion(); v.Commit == "" && v.Version == "(devel)" && !strings.Contains(flag, "commit unknown") {
		t.Fatalf("no commit and no word of it: %q", flag)
	}
	// Under --json, --version prints what `version --json` does (it
	// printed the text line, the one output of the binary that was not
	// JSON under --json).
	flag, _, code = runMain(t, "--version", "--json")
	cmd, _, code2 = runMain(t, "version", "--json")
	var v versionInfo
	if code != exitOK || code2 != exitOK || flag != cmd || json.Unmarshal([]byte(flag), &v) != nil || v.GoVersion == "" {
		t.Fatalf("--version --json (exit %d) %q, version --json (exit %d) %q", code, flag, code2, cmd)
	}
}

// challenge inspect of a procedural set listed the generic scripts and
// marked questions "kept", which read as script-proof; the validator does
// not filter procedural sets by the white-box inverter, and inspect says
// so. A set of another source gets no such note.
func TestInspectProceduralNamesWhiteBox(t *testing.T) {
	dir := t.TempDir()
	if _, errOut, code := runMain(t, "generate", "--source", "procedural", "--n", "1", "--out", dir); code != exitOK {
		t.Fatalf("generate: exit %d: %s", code, errOut)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) != 1 {
		t.Fatalf("files %v %v", files, err)
	}
	out, _, code := runMain(t, "challenge", "inspect", "--brief", files[0])
	if code != exitOK || !strings.Contains(out, "note: whitebox-procedural") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if out, _, _ := runMain(t, "challenge", "inspect", "--brief", exampleSet); strings.Contains(out, "note: whitebox-procedural") {
		t.Fatalf("note on an example set:\n%s", out)
	}
}

// --dial-public-only never dials the local network that mDNS finds:
// asking for both is a usage error.
func TestDialPublicOnlyWithMDNS(t *testing.T) {
	dir := t.TempDir()
	_, stderr, code := runMain(t, "node", "--dial-public-only", "--mdns", "--store", filepath.Join(dir, "db"), "--key", filepath.Join(dir, "key"), "--listen", "/ip4/127.0.0.1/tcp/0")
	if code != exitUsage || !strings.Contains(stderr, "--dial-public-only never dials") {
		t.Fatalf("exit %d, want %d:\n%s", code, exitUsage, stderr)
	}
}
