package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/peer/mcpserver"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/spec"
)

func TestMCPFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp", "--answer-with", "bogus"}, "--answer-with"},
		{[]string{"mcp", "--answer-with", "llm"}, "no LLM configured"},
		{[]string{"mcp", "--max-pending", "0"}, "--max-pending"},
		{[]string{"mcp", "--max-attests", "0"}, "--max-attests"},
		{[]string{"mcp", "--http-max-conns", "0"}, "--http-max-conns"},
		{[]string{"mcp", "extra"}, "takes no arguments"},
	} {
		var out, errb bytes.Buffer
		args := append(tc.args, "--store", filepath.Join(dir, "db"), "--key", filepath.Join(dir, "key"))
		code := Main(context.Background(), args, &out, &errb)
		if code != exitUsage || !strings.Contains(errb.String(), tc.want) || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d mentioning %q and nothing on stdout", tc.args, code, out.String(), errb.String(), exitUsage, tc.want)
		}
	}
}

// mcpOracleProver answers from the answer key with the session's memory.
func mcpOracleProver(o *testutil.Oracle) skill.Prover {
	return skill.ProverFunc(func() skill.Answerer {
		var hist []string
		return skill.AnswerFunc(func(_ context.Context, c skill.Challenge) (string, error) {
			a := o.Answer(c.Narrative, c.Question, hist)
			hist = append(hist, c.Narrative)
			return a, nil
		})
	})
}

func mcpCall[T any](ctx context.Context, cs *mcp.ClientSession, name string, args any) (T, error) {
	var out T
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return out, err
	}
	if res.IsError {
		var msg []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				msg = append(msg, tc.Text)
			}
		}
		return out, errors.New(strings.Join(msg, "; "))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return out, err
	}
	return out, json.Unmarshal(b, &out)
}

// TestMCPStdioBinary builds the CLI and drives `acaptcha mcp` over stdio
// with the SDK's CommandTransport: the MCP client attests a running node
// and answers that node's challenges itself (self_answer), and the record
// the node signed about the MCP node verifies.
func TestMCPStdioBinary(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go tool in PATH to build the binary: %v", err)
	}
	dir := t.TempDir()
	bin := buildBinary(t)
	sets, err := spec.Examples()
	if err != nil {
		t.Fatal(err)
	}
	oracle := testutil.NewOracle(sets...)
	// The two sides serve disjoint halves of the examples (each declines a
	// challenge it issued itself).
	corpusA, corpusB := splitExamples(t, dir)
	setsA, err := skill.LoadDir(corpusA)
	if err != nil {
		t.Fatal(err)
	}
	src, err := skill.NewCorpus("a", setsA, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	target, err := peer.New(peer.Config{Key: key, StorePath: filepath.Join(dir, "target.db"), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		Policy: skill.DefaultPolicy(), Source: src, Prover: mcpOracleProver(oracle)})
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.Command(bin, "mcp", "--challenges", "corpus:"+corpusB, "--key", filepath.Join(dir, "key"), "--store", filepath.Join(dir, "db"),
		"--listen", "/ip4/127.0.0.1/tcp/0", "--log-level", "info")
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "ACAPTCHA_") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	var errb syncBuffer
	cmd.Stderr = &errb
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "acaptcha-test", Version: "v0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, errb.String())
	}
	defer func() {
		if err := cs.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
			t.Errorf("acaptcha mcp did not exit cleanly: %v\nstderr:\n%s", cmd.ProcessState, errb.String())
		}
	}()

	// The client is the MCP node's brain: it answers the target's
	// challenges while attest_peer waits for both verdicts.
	loopCtx, stop := context.WithCancel(ctx)
	answered := make(chan int, 1)
	go func() {
		n := 0
		defer func() { answered <- n }()
		hist := map[string][]string{}
		for loopCtx.Err() == nil {
			nx, err := mcpCall[mcpserver.NextOutput](loopCtx, cs, "next_challenge", map[string]any{"wait_ms": 200})
			if err != nil || !nx.Pending {
				continue
			}
			ans := oracle.Answer(nx.Narrative, nx.Question, hist[nx.Session])
			hist[nx.Session] = append(hist[nx.Session], nx.Narrative)
			if _, err := mcpCall[mcpserver.AnswerOutput](loopCtx, cs, "answer_challenge", map[string]any{"challenge_id": nx.ChallengeID, "answer": ans}); err != nil {
				t.Errorf("answer_challenge: %v", err)
				return
			}
			n++
		}
	}()
	out, err := mcpCall[mcpserver.AttestOutput](ctx, cs, "attest_peer", map[string]any{"addr": target.Addrs()[0].String(), "self_answer": true})
	stop()
	rounds := <-answered
	if err != nil {
		t.Fatalf("attest_peer: %v\nstderr:\n%s", err, errb.String())
	}
	if out.Ours == nil || !out.Ours.Accepted || out.Theirs == nil || !out.Theirs.Accepted || out.Theirs.Record == "" || rounds != skill.DefaultRounds {
		t.Fatalf("attest_peer: ours %+v theirs %+v, %d rounds answered\nstderr:\n%s", out.Ours, out.Theirs, rounds, errb.String())
	}
	v, err := mcpCall[mcpserver.VerifyOutput](ctx, cs, "verify_attestation", map[string]any{"record": out.Theirs.Record, "subject": out.Self, "issuer": target.ID().String()})
	if err != nil || !v.OK {
		t.Fatalf("verify_attestation: %+v, %v", v, err)
	}
}

// TestMCPHTTPInProcess serves `acaptcha mcp --http` in process and calls
// it with the SDK's streamable HTTP client; cancelling the command's
// context stops it cleanly.
func TestMCPHTTPInProcess(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"mcp", "--http", "127.0.0.1:0", "--challenges", "procedural", "--key", filepath.Join(dir, "key"),
			"--store", filepath.Join(dir, "db"), "--listen", "/ip4/127.0.0.1/tcp/0", "--log-level", "error"}, &out, &errb)
	}()
	var url string
	for i := 0; i < 200 && url == ""; i++ {
		if _, rest, ok := strings.Cut(errb.String(), "streamable HTTP at "); ok {
			url, _, _ = strings.Cut(rest, "\n")
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if url == "" {
		cancel()
		t.Fatalf("no endpoint announced; exit %d?\nstderr:\n%s", <-done, errb.String())
	}
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-test", Version: "v0"}, nil).Connect(cctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	lp, err := mcpCall[mcpserver.ListPeersOutput](cctx, cs, "list_peers", map[string]any{})
	if err != nil || lp.Self == "" || len(lp.Addrs) == 0 || lp.Count != 0 {
		t.Fatalf("list_peers: %+v, %v", lp, err)
	}
	nx, err := mcpCall[mcpserver.NextOutput](cctx, cs, "next_challenge", map[string]any{"wait_ms": 10})
	if err != nil || nx.Pending {
		t.Fatalf("next_challenge: %+v, %v", nx, err)
	}
	cs.Close()
	cancel()
	select {
	case code := <-done:
		if code != exitOK || out.String() != "" {
			t.Fatalf("exit %d, stdout %q\nstderr:\n%s", code, out.String(), errb.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("acaptcha mcp --http did not stop within 15 s of cancellation")
	}
}

// With --json, mcp --http announces its endpoint as one JSON object on
// standard output and writes JSON only on standard error: before, the
// text notice "acaptcha mcp: streamable HTTP at ..." went there too.
func TestMCPHTTPJSONStderrIsJSON(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"mcp", "--json", "--http", "127.0.0.1:0", "--challenges", "procedural", "--key", filepath.Join(dir, "key"),
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
	for _, l := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
		if l != "" && !json.Valid([]byte(l)) {
			t.Errorf("stderr line is not JSON: %q", l)
		}
	}
}

// mcp --http on a port another process holds is a server that cannot
// start (exit 1), as for node --http and --metrics; a malformed address
// stays a usage error (exit 2). Before, both exited 2.
func TestMCPHTTPPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	base := []string{"mcp", "--challenges", "procedural", "--key", filepath.Join(dir, "key"), "--store", filepath.Join(dir, "db"), "--listen", "/ip4/127.0.0.1/tcp/0"}
	_, errOut, code := runMain(t, append(base, "--http", l.Addr().String())...)
	if code != exitFailure || !strings.Contains(errOut, "address already in use") {
		t.Errorf("port in use: exit %d, want %d\n%s", code, exitFailure, errOut)
	}
	_, errOut, code = runMain(t, append(base, "--http", "bogus")...)
	if code != exitUsage || !strings.Contains(errOut, "HOST:PORT") {
		t.Errorf("malformed address: exit %d, want %d\n%s", code, exitUsage, errOut)
	}
}

// A client that writes its requests and closes standard input at once
// (printf ... | acaptcha mcp) gets every answer: the SDK cancels what is
// in flight at EOF, so it used to get none, not even initialize's.
func TestMCPStdioAnswersBeforeEOF(t *testing.T) {
	const in = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{}}}
{"jsonrpc":"2.0","id":"three","method":"tools/list"}
`
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return nil, struct{}{}, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, struct{}{}, nil
	})
	var out bytes.Buffer
	tr := answerBeforeEOF(&mcp.IOTransport{Reader: io.NopCloser(strings.NewReader(in)), Writer: nopWriteCloser{&out}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Run(ctx, tr); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("run: %v", err)
	}
	ids := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil || m.Result == nil {
			t.Fatalf("line %q: %v", line, err)
		}
		ids[string(m.ID)] = true
		if string(m.ID) == "2" && !strings.Contains(string(m.Result), `"done"`) {
			t.Errorf("slow tool: %s", m.Result)
		}
	}
	if !ids["1"] || !ids["2"] || !ids[`"three"`] {
		t.Fatalf("answered %v; want 1, 2 and \"three\"; stdout %q", ids, out.String())
	}
}
