package main

// Defects an operator hit following README.md from the top (a review of
// the front doors): each test here fails on 809b1b3.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/peer/httpgw"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/eval"
	"github.com/acaptcha/acaptcha/spec"
)

// TestVerifyReadsHTTPDoorOutput: `attestations verify` takes "a JSON
// object holding it (... the HTTP door's ...)", but the door's session
// object (GET /v1/sessions/{id}), its result and its verify request body
// hold the envelope as attestation, beside a record that is a JSON view:
// 809b1b3 said "INVALID: ... proto: cannot parse invalid wire-format
// data" for all three, and the same for JSON holding no envelope at all.
func TestVerifyReadsHTTPDoorOutput(t *testing.T) {
	dir := t.TempDir()
	issuerKey, _ := testKey(t)
	_, subject := testKey(t)
	_, env := sealAcceptedFrom(t, issuerKey, subject, skill.SourceLLM)
	at, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	view, err := json.Marshal(at)
	if err != nil {
		t.Fatal(err)
	}
	result := &httpgw.Result{Accepted: true, Verdict: "ACCEPTED", Reason: "ok", Attestation: env, Record: view}
	session := &httpgw.Session{SessionID: "s", State: "done", PeerID: subject.String(), ExpiresAt: time.Now(), Result: result}
	write := func(name string, v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		file string
	}{
		{"session", write("session.json", session)},
		{"result", write("result.json", result)},
		{"verify request", write("request.json", map[string]any{"attestation": env})},
		{"error body", write("error.json", map[string]any{"code": "bad_probe", "message": "m", "session": session})},
	} {
		out, errOut, code := newUserMain(ctx, "attestations", "verify", tc.file)
		if code != exitOK || !strings.Contains(out, "VALID signed attestation") {
			t.Errorf("verify the door's %s: exit %d, want %d\n%s\n%s", tc.name, code, exitOK, out, errOut)
		}
	}

	// JSON with no envelope: an invalid record that says why.
	viewOnly := write("view.json", map[string]any{"ok": true, "record": json.RawMessage(view)})
	out, errOut, code := newUserMain(ctx, "attestations", "verify", viewOnly)
	if code != exitRejected || !strings.Contains(out, "holds no signed envelope") || strings.Contains(out, "wire-format") {
		t.Errorf("verify a JSON view without an envelope: exit %d, want %d saying it holds no envelope\n%s\n%s", code, exitRejected, out, errOut)
	}
	// A bad flag is still a usage error, whatever the file holds.
	if _, errOut, code := newUserMain(ctx, "attestations", "verify", viewOnly, "--require-source", "bogus"); code != exitUsage {
		t.Errorf("verify a JSON view with --require-source bogus: exit %d, want %d\n%s", code, exitUsage, errOut)
	}
	out, _, code = newUserMain(ctx, "attestations", "verify", viewOnly, "--json")
	var v struct {
		OK        *bool  `json:"ok"`
		ErrorCode string `json:"error_code"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != exitRejected || v.OK == nil || *v.OK || v.ErrorCode != "malformed" {
		t.Errorf("verify --json a JSON view without an envelope: exit %d, %v, want ok false, error_code malformed:\n%s", code, err, out)
	}
}

// TestBenchSwarmHelpShowsItsRequireSource: the swarm's nodes require
// source procedural unless --require-source is given (its challenges are
// procedural), but 809b1b3's help and --help --json said default
// "hybrid", the node's.
func TestBenchSwarmHelpShowsItsRequireSource(t *testing.T) {
	ctx := context.Background()
	out, errOut, code := newUserMain(ctx, "bench", "swarm", "--help")
	if code != exitOK || !strings.Contains(out, `requires procedural unless given (default "procedural")`) {
		t.Errorf("bench swarm --help: exit %d, want the require-source default procedural:\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = newUserMain(ctx, "bench", "swarm", "--help", "--json")
	var h struct {
		Flags []struct {
			Name    string `json:"name"`
			Default string `json:"default"`
		} `json:"flags"`
	}
	if err := json.Unmarshal([]byte(out), &h); err != nil || code != exitOK {
		t.Fatalf("bench swarm --help --json: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	found := false
	for _, f := range h.Flags {
		if f.Name == "require-source" {
			found = true
			if f.Default != string(skill.SourceProcedural) {
				t.Errorf("bench swarm --help --json: require-source default %q, want procedural", f.Default)
			}
		}
	}
	if !found {
		t.Error("bench swarm --help --json lists no require-source flag")
	}
	// The node keeps its own default.
	out, _, _ = newUserMain(ctx, "node", "--help")
	if !strings.Contains(out, `or any (default "hybrid")`) {
		t.Errorf("node --help lost its require-source default hybrid:\n%s", out)
	}
}

// TestAttestRefusesRateLimitedLLMBeforeDialing: attest checks its LLM
// before it dials and "exits 1 when it does not answer"; 809b1b3 passed an
// LLM answering 429 or an empty reply (a reply: "there, only busy"),
// dialed, declined the peer's session and stored the peer's signed
// rejection (declined), which then stood: the next attest, with the LLM
// back, was "not asked again while it stands".
func TestAttestRefusesRateLimitedLLMBeforeDialing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node")
	}
	sets, err := spec.Examples()
	if err != nil {
		t.Fatal(err)
	}
	oracle := testutil.NewOpenAIServer(testutil.NewOracle(sets...))
	defer oracle.Close()
	limited := testutil.NewOpenAIServer(testutil.BrainFunc(func(testutil.BrainRequest) testutil.BrainReply {
		return testutil.BrainReply{Status: http.StatusTooManyRequests}
	}))
	defer limited.Close()
	empty := testutil.NewOpenAIServer(testutil.BrainFunc(func(testutil.BrainRequest) testutil.BrainReply { return testutil.BrainReply{} }))
	defer empty.Close()
	t.Setenv("OPENAI_API_KEY", "test")
	dir := t.TempDir()
	corpusA, corpusB := splitExamples(t, dir)
	info := runCLINode(t, []string{"node", "--json", "--llm", "openai:stub", "--llm-base-url", oracle.URL + "/v1", "--challenges", "corpus:" + corpusB,
		"--key", filepath.Join(dir, "b", "key"), "--store", filepath.Join(dir, "b", "db"), "--listen", "/ip4/127.0.0.1/tcp/0"})
	for _, tc := range []struct{ name, url string }{{"rate limit", limited.URL}, {"empty reply", empty.URL}} {
		stdout, stderr, code := newUserMain(context.Background(), "attest", "--timeout", "40s", "--llm", "openai:stub", "--llm-base-url", tc.url+"/v1",
			"--challenges", "corpus:"+corpusA, "--key", filepath.Join(dir, "a", "key"), "--store", filepath.Join(dir, "a", "db"),
			"--listen", "/ip4/127.0.0.1/tcp/0", info.Addrs[0])
		if code != exitRejected || !strings.Contains(stderr, "does not answer") || strings.Contains(stdout, "verified us") {
			t.Errorf("attest with an LLM answering a %s: exit %d, want %d refusing before it dials:\nstdout: %s\nstderr: %s", tc.name, code, exitRejected, stdout, stderr)
		}
	}
	// Nothing about us was signed: with the LLM answering, the peer
	// verifies us.
	stdout, stderr, code := newUserMain(context.Background(), "attest", "--timeout", "40s", "--llm", "openai:stub", "--llm-base-url", oracle.URL+"/v1",
		"--challenges", "corpus:"+corpusA, "--key", filepath.Join(dir, "a", "key"), "--store", filepath.Join(dir, "a", "db"),
		"--listen", "/ip4/127.0.0.1/tcp/0", info.Addrs[0])
	if code != exitOK || !strings.Contains(stdout, "verified us: ACCEPTED") {
		t.Errorf("attest with the LLM back: exit %d, want %d and the peer's acceptance of us:\nstdout: %s\nstderr: %s", code, exitOK, stdout, stderr)
	}
}

// TestEvalProgressPercentIsTheShareDone: eval's progress lines (standard
// error not a terminal) printed the tenth crossed as the percentage:
// "5/20 sessions (20%)", "1/3 sessions (30%)" on 809b1b3.
func TestEvalProgressPercentIsTheShareDone(t *testing.T) {
	var errb strings.Builder
	progress := (&app{stdout: io.Discard, stderr: &errb}).progressPrinter("sessions")
	for done := 1; done <= 20; done++ {
		progress(eval.Progress{Done: done, Total: 20, Elapsed: time.Second})
	}
	for _, line := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
		var done, total, pct int
		if _, err := fmt.Sscanf(line, "%d/%d sessions (%d%%)", &done, &total, &pct); err != nil {
			t.Fatalf("progress line %q: %v", line, err)
		}
		if pct != done*100/total {
			t.Errorf("progress line %q: %d%%, want %d%%", line, pct, done*100/total)
		}
	}
}

// TestEvalCorpusMissingDirectory: eval --source corpus:DIR with a
// mistyped DIR said "corpus directory DIR holds no challenge sets
// matching *.json" on 809b1b3, as for an empty one; node says "no such
// file or directory".
func TestEvalCorpusMissingDirectory(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "typo")
	file := filepath.Join(dir, "file.json")
	if err := os.WriteFile(file, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, want string }{{missing, "no such file or directory"}, {file, "not a directory"}} {
		_, errOut, code := newUserMain(context.Background(), "eval", "--source", "corpus:"+tc.dir, "--sessions", "1", "--out", filepath.Join(dir, "out"))
		if code != exitUsage || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "holds no challenge sets") {
			t.Errorf("eval --source corpus:%s: exit %d, want %d saying %q:\n%s", tc.dir, code, exitUsage, tc.want, errOut)
		}
	}
}

// TestAttestSaysItWaitsForASlowLLM: attest checks its LLM before it dials
// (up to a minute); with a slow model (a local one loading) 809b1b3 said
// nothing meanwhile, with or without --challenges llm.
func TestAttestSaysItWaitsForASlowLLM(t *testing.T) {
	slow := testutil.NewOpenAIServer(testutil.BrainFunc(func(testutil.BrainRequest) testutil.BrainReply {
		return testutil.BrainReply{Text: "02:10", Delay: 600 * time.Millisecond}
	}))
	defer slow.Close()
	t.Setenv("OPENAI_API_KEY", "test")
	defer func(d time.Duration) { llmCheckNotice = d }(llmCheckNotice)
	llmCheckNotice = 50 * time.Millisecond
	dir := t.TempDir()
	_, unreachable := testKey(t)
	addr := "/ip4/127.0.0.1/tcp/1/p2p/" + unreachable.String()
	args := []string{"attest", "--llm", "openai:stub", "--llm-base-url", slow.URL + "/v1", "--challenges", "procedural", "--timeout", "20s",
		"--key", filepath.Join(dir, "key"), "--store", filepath.Join(dir, "db"), "--listen", "/ip4/127.0.0.1/tcp/0", addr}
	_, errOut, code := newUserMain(context.Background(), args...)
	if code != exitNetwork || !strings.Contains(errOut, "checking --llm openai:stub before contacting the peer") {
		t.Errorf("attest with a slow LLM: exit %d, want %d and a notice of the check:\n%s", code, exitNetwork, errOut)
	}
}

// TestDemoExitsOneWhenTheAgentFails: `demo --llm ...` exited 0 whatever
// its agent row said (on 809b1b3 a keyword script behind --llm, or an LLM
// answering 500, still exited 0), so a script could not use the demo to
// check an LLM. With an LLM configured, an agent that is not accepted is
// a negative result: exit 1, the rows on standard output, no error
// object. An accepted agent exits 0.
func TestDemoExitsOneWhenTheAgentFails(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	sets, err := spec.Examples()
	if err != nil {
		t.Fatal(err)
	}
	oracle := testutil.NewOpenAIServer(testutil.NewOracle(sets...))
	defer oracle.Close()
	script := testutil.NewOpenAIServer(testutil.NewKeywordScript())
	defer script.Close()
	t.Setenv("OPENAI_API_KEY", "test")
	for _, tc := range []struct {
		name, url string
		code      int
	}{{"oracle", oracle.URL, exitOK}, {"keyword script", script.URL, exitRejected}} {
		stdout, stderr, code := newUserMain(context.Background(), "demo", "--json", "--challenges", "examples", "--tau", "3s", "--total", "30s",
			"--llm", "openai:stub", "--llm-base-url", tc.url+"/v1")
		var out struct {
			Rows []demoRow `json:"rows"`
		}
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatalf("%s: demo --json output: %v\n%s\n%s", tc.name, err, stdout, stderr)
		}
		agentAccepted := false
		for _, r := range out.Rows {
			if r.Kind == "agent" {
				agentAccepted = r.Accepted
			}
		}
		if code != tc.code || agentAccepted != (tc.code == exitOK) || strings.Contains(stderr, `"error"`) {
			t.Errorf("demo with the %s as LLM: exit %d (want %d), agent accepted %v\nstdout: %s\nstderr: %s", tc.name, code, tc.code, agentAccepted, stdout, stderr)
		}
	}
}

// TestAttestationsListOldestFirst: `attestations list` printed the store's
// key order (direction, then peer ID), so the newest record could be
// anywhere in the table; it lists oldest first, text and JSON alike.
func TestAttestationsListOldestFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	st, err := peer.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	selfKey, _ := testKey(t)
	var want []string // subjects, oldest first
	for i := range 6 {
		_, subject := testKey(t)
		a, _ := sealAccepted(t, selfKey, subject)
		// Issued an hour apart, newest first, so that the peer IDs'
		// random order is not the answer by chance.
		a.IssuedAt = a.IssuedAt.Add(-time.Duration(i) * time.Hour)
		env, err := protocol.Seal(a, selfKey)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(peer.Issued, env, a); err != nil {
			t.Fatal(err)
		}
		want = append([]string{subject.String()}, want...)
	}
	st.Close()
	stdout, stderr, code := newUserMain(context.Background(), "attestations", "list", "--json", "--store", path)
	if code != exitOK {
		t.Fatalf("list: exit %d: %s", code, stderr)
	}
	var rows []struct {
		Attestation struct {
			Subject string `json:"subject"`
		} `json:"attestation"`
	}
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Attestation.Subject)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("list order %v, want oldest first %v", got, want)
	}
	// --newest N: the N newest, still oldest first; the table says how
	// many it left out. A negative N is a usage error.
	stdout, stderr, code = newUserMain(context.Background(), "attestations", "list", "--json", "--newest", "2", "--store", path)
	if code != exitOK {
		t.Fatalf("list --newest 2: exit %d: %s", code, stderr)
	}
	rows = nil
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	got = nil
	for _, r := range rows {
		got = append(got, r.Attestation.Subject)
	}
	if !slices.Equal(got, want[len(want)-2:]) {
		t.Fatalf("list --newest 2: %v, want %v", got, want[len(want)-2:])
	}
	stdout, stderr, code = newUserMain(context.Background(), "attestations", "list", "--newest", "3", "--store", path)
	if code != exitOK || strings.Count(stdout, "\n") != 5 || !strings.Contains(stdout, "the 3 newest of 6 attestations") {
		t.Fatalf("list --newest 3: exit %d, %s%s", code, stdout, stderr)
	}
	if _, stderr, code = newUserMain(context.Background(), "attestations", "list", "--newest", "-1", "--store", path); code != exitUsage {
		t.Fatalf("list --newest -1: exit %d, want %d: %s", code, exitUsage, stderr)
	}
}

// TestAnswerMaxTokens: the prover's answer cap was fixed at 32 output
// tokens, so a reasoning model (deepseek-r1, qwen3, OpenAI's o-series,
// whose reasoning counts against the cap) could never answer: it was cut
// off while still thinking, every round. --answer-max-tokens sets it; the
// provider sees the cap in its request, and a value out of range is a
// usage error.
func TestAnswerMaxTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	sets, err := spec.Examples()
	if err != nil {
		t.Fatal(err)
	}
	oracle := testutil.NewOpenAIServer(testutil.NewOracle(sets...))
	defer oracle.Close()
	t.Setenv("OPENAI_API_KEY", "test")
	stdout, stderr, code := newUserMain(context.Background(), "demo", "--json", "--challenges", "examples", "--tau", "3s", "--total", "30s",
		"--llm", "openai:stub", "--llm-base-url", oracle.URL+"/v1", "--answer-max-tokens", "2048")
	if code != exitOK {
		t.Fatalf("demo: exit %d\n%s\n%s", code, stdout, stderr)
	}
	req, ok := oracle.LastRequest()
	if !ok || req.MaxTokens != 2048 {
		t.Errorf("the provider saw max tokens %d (%v), want 2048", req.MaxTokens, ok)
	}
	for _, bad := range []string{"0", "-5", "40000"} {
		_, stderr, code := newUserMain(context.Background(), "demo", "--challenges", "examples", "--llm", "openai:stub",
			"--llm-base-url", oracle.URL+"/v1", "--answer-max-tokens", bad)
		if code != exitUsage || !strings.Contains(stderr, "--answer-max-tokens") {
			t.Errorf("--answer-max-tokens %s: exit %d (want %d)\n%s", bad, code, exitUsage, stderr)
		}
	}
}
