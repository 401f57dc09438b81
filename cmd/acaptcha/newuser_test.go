package main

// Defects a new user hits (issue 12, section 2): each test here fails on
// commit 5fa0aa1.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/spec"
)

// newUserMain runs the CLI in process.
func newUserMain(ctx context.Context, args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = Main(ctx, args, &out, &errb)
	return out.String(), errb.String(), code
}

// sealRejectedFrom signs a rejection (timeout in round 2) of subject by
// key's peer on challenges from src.
func sealRejectedFrom(t *testing.T, key crypto.PrivKey, subject lpeer.ID, src skill.SourceKind) []byte {
	t.Helper()
	issuer, _ := lpeer.IDFromPrivateKey(key)
	now := time.Now().UTC().Truncate(time.Second)
	a := &protocol.Attestation{
		Issuer: issuer, Subject: subject, Accepted: false, Reason: skill.ReasonTimeout, FailedRound: 2,
		Nonce: make([]byte, protocol.NonceBytes), TranscriptDigest: make([]byte, protocol.DigestBytes),
		Policy:   protocol.PolicySummary{Rounds: 3, Tau: 15 * time.Second, Total: 2 * time.Minute},
		IssuedAt: now, ExpiresAt: now.Add(time.Hour), SpecVersion: protocol.SpecVersion,
		Provenance: skill.Provenance{Source: src},
		Rounds: []protocol.RoundTiming{
			{Round: 1, Budget: 15 * time.Second, Effective: time.Second, Correct: true},
			{Round: 2, Budget: 15 * time.Second, Effective: 20 * time.Second, Correct: true},
		},
	}
	_, _ = rand.Read(a.Nonce)
	env, err := protocol.Seal(a, key)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// TestNewUserVerifyExitStatusByVerdict: a valid signature on a rejection
// exits 1 (on 5fa0aa1 it printed VALID and exited 0, so `verify F &&
// admit` admitted a peer that failed), unless --any-verdict; an oversized
// input exits 1 like any invalid record (5fa0aa1: 2).
func TestNewUserVerifyExitStatusByVerdict(t *testing.T) {
	dir := t.TempDir()
	issuerKey, _ := testKey(t)
	_, subject := testKey(t)
	write := func(name string, env []byte) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, env, 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	_, accEnv := sealAcceptedFrom(t, issuerKey, subject, skill.SourceLLM)
	accepted := write("accepted.bin", accEnv)
	rejected := write("rejected.bin", sealRejectedFrom(t, issuerKey, subject, skill.SourceLLM))
	rejectedWeak := write("rejected-procedural.bin", sealRejectedFrom(t, issuerKey, subject, skill.SourceProcedural))
	huge := write("huge.bin", bytes.Repeat([]byte{0xa5}, 4*protocol.MaxEnvelopeBytes+1))
	// The textual forms the doors and export --json hand out.
	b64 := write("accepted.b64", []byte(base64.StdEncoding.EncodeToString(accEnv)+"\n"))
	exported, err := json.Marshal(map[string]any{"key": "k", "bytes": len(accEnv),
		"envelope_base64": base64.StdEncoding.EncodeToString(accEnv), "envelope_hex": hex.EncodeToString(accEnv)})
	if err != nil {
		t.Fatal(err)
	}
	exportJSON := write("exported.json", exported)
	// xxd -p: hex in lines of 60 characters.
	h := hex.EncodeToString(accEnv)
	var lines []string
	for len(h) > 60 {
		lines, h = append(lines, h[:60]), h[60:]
	}
	xxd := write("accepted.xxd", []byte(strings.Join(append(lines, h), "\n")+"\n"))
	ctx := context.Background()

	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		stdout  []string
		without []string
	}{
		{"accepted", []string{accepted}, exitOK, []string{"VALID signed attestation", "verdict  ACCEPTED (ok)"}, nil},
		{"rejected", []string{rejected}, exitRejected, []string{"VALID signature, verdict REJECTED (timeout)", "at round 2"}, []string{"VALID signed attestation"}},
		{"rejected, any verdict", []string{rejected, "--any-verdict"}, exitOK, []string{"VALID signature, verdict REJECTED (timeout)"}, nil},
		{"rejected, require llm", []string{rejected, "--require-source", "llm"}, exitRejected, []string{"verdict REJECTED"}, nil},
		{"rejected procedural, require llm", []string{rejectedWeak, "--require-source", "llm", "--any-verdict"}, exitRejected, []string{"REFUSED"}, []string{"VALID"}},
		{"accepted, require llm", []string{accepted, "--require-source", "llm"}, exitOK, []string{"VALID signed attestation"}, nil},
		{"accepted, base64", []string{b64}, exitOK, []string{"VALID signed attestation"}, nil},
		{"accepted, export --json", []string{exportJSON}, exitOK, []string{"VALID signed attestation"}, nil},
		{"accepted, xxd -p", []string{xxd}, exitOK, []string{"VALID signed attestation"}, nil},
		{"over the size cap", []string{huge}, exitRejected, []string{"INVALID", "more than"}, []string{"VALID "}},
		{"missing file", []string{filepath.Join(dir, "nope.bin")}, exitUsage, nil, []string{"VALID"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := newUserMain(ctx, append([]string{"attestations", "verify"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, tc.code, out, errOut)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.without {
				if strings.Contains(out, w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
		})
	}

	// JSON: "accepted" tells the verdict apart from the signature's validity.
	type verified struct {
		Valid    *bool `json:"valid"`
		Accepted *bool `json:"accepted"`
	}
	for _, tc := range []struct {
		file            string
		code            int
		valid, accepted bool
	}{
		{accepted, exitOK, true, true},
		{rejected, exitRejected, true, false},
		{huge, exitRejected, false, false},
	} {
		out, _, code := newUserMain(ctx, "attestations", "verify", tc.file, "--json")
		var v verified
		if err := json.Unmarshal([]byte(out), &v); err != nil || code != tc.code || v.Valid == nil || v.Accepted == nil || *v.Valid != tc.valid || *v.Accepted != tc.accepted {
			t.Errorf("verify --json %s: exit %d (want %d), %v, want valid %t accepted %t:\n%s", filepath.Base(tc.file), code, tc.code, err, tc.valid, tc.accepted, out)
		}
	}
}

// TestNewUserMissingStoreRefused: a mistyped --store for a read-only
// command is a usage error naming the path, and no database is created
// (5fa0aa1 created an empty one and printed "no attestations").
func TestNewUserMissingStoreRefused(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "typo", "acaptcha.db")
	ctx := context.Background()
	for _, args := range [][]string{
		{"attestations", "list"},
		{"attestations", "list", "--json"},
		{"attestations", "show", "0123456789abcdef"},
		{"attestations", "export", "0123456789abcdef", "-o", filepath.Join(dir, "out.att")},
		{"peers"},
		{"peers", "--json"},
	} {
		out, errOut, code := newUserMain(ctx, append(args, "--store", missing)...)
		if code != exitUsage || !strings.Contains(errOut, missing) || !strings.Contains(errOut, "does not exist") {
			t.Errorf("%v with a missing store: exit %d, want %d naming %s\nstdout: %s\nstderr: %s", args, code, exitUsage, missing, out, errOut)
		}
		if strings.Contains(out, "no attestations") || strings.Contains(out, "no peers") {
			t.Errorf("%v printed an empty listing for a missing store:\n%s", args, out)
		}
		if _, err := os.Stat(missing); !os.IsNotExist(err) {
			t.Fatalf("%v created the store %s (stat: %v)", args, missing, err)
		}
	}
	// A directory is not a store either.
	if _, errOut, code := newUserMain(ctx, "attestations", "list", "--store", dir); code != exitUsage || !strings.Contains(errOut, dir) {
		t.Errorf("list --store DIR: exit %d: %s", code, errOut)
	}

	// An existing store is read as before.
	path := filepath.Join(dir, "db")
	st, err := peer.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := testKey(t)
	_, subject := testKey(t)
	a, env := sealAccepted(t, key, subject)
	if err := st.Put(peer.Issued, env, a); err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, args := range [][]string{{"attestations", "list"}, {"peers"}} {
		out, errOut, code := newUserMain(ctx, append(args, "--store", path)...)
		if code != exitOK || !strings.Contains(out, subject.String()[:6]) {
			t.Errorf("%v on an existing store: exit %d\n%s\n%s", args, code, out, errOut)
		}
	}
}

// firstLine collects what a writer receives and hands over its first line.
type firstLine struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	sent bool
	line chan string
}

func (w *firstLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if i := bytes.IndexByte(w.buf.Bytes(), '\n'); i >= 0 && !w.sent {
		w.sent = true
		w.line <- w.buf.String()[:i]
	}
	return len(p), nil
}

// TestNewUserAttestWithoutLLMFailsFast: attest without --llm cannot be
// verified back (our side declines every challenge), so it does not wait
// for a reciprocal verdict: it ends as soon as its own verdict of the peer
// is in and says why the peer did not verify us. Before, it asked anyway:
// the first attest printed that the peer's session "broke off" (our side
// declined it), and the next one, the peer then holding a verdict on us and
// not verifying us again, waited for a reciprocal verdict until the time
// limit (here --timeout 40s; by default 150 s).
func TestNewUserAttestWithoutLLMFailsFast(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node")
	}
	sets, err := spec.Examples()
	if err != nil {
		t.Fatal(err)
	}
	oracle := testutil.NewOpenAIServer(testutil.NewOracle(sets...))
	defer oracle.Close()
	t.Setenv("OPENAI_API_KEY", "test")
	dir := t.TempDir()
	// Distinct corpora: neither side declines the other's set as a
	// reflection of its own.
	corpusA, corpusB := splitExamples(t, dir)

	info := runCLINode(t, []string{"node", "--json", "--llm", "openai:stub", "--llm-base-url", oracle.URL + "/v1", "--challenges", "corpus:" + corpusB,
		"--key", filepath.Join(dir, "b", "key"), "--store", filepath.Join(dir, "b", "db"), "--listen", "/ip4/127.0.0.1/tcp/0"})

	attest := func(extra ...string) (string, string, int, time.Duration) {
		t.Helper()
		args := append([]string{"attest", "--timeout", "40s", "--challenges", "corpus:" + corpusA, "--key", filepath.Join(dir, "a", "key"),
			"--store", filepath.Join(dir, "a", "db"), "--listen", "/ip4/127.0.0.1/tcp/0"}, extra...)
		start := time.Now()
		stdout, stderr, code := newUserMain(context.Background(), append(args, info.Addrs[0])...)
		return stdout, stderr, code, time.Since(start)
	}
	// The node answers with an oracle: our verdict of it is an
	// acceptance (exit 0), given as soon as our session ends.
	stdout, stderr, code, took := attest()
	if took > 20*time.Second {
		t.Fatalf("attest without --llm took %s (waited for a reciprocal verdict that cannot come)\n%s\n%s", took, stdout, stderr)
	}
	if code != exitOK || !strings.Contains(stdout, "ACCEPTED (ok)") {
		t.Errorf("attest: exit %d, want %d with our verdict of the peer:\n%s\n%s", code, exitOK, stdout, stderr)
	}
	if !strings.Contains(stdout, "no LLM (--llm)") || !strings.Contains(stdout, "cannot be verified") {
		t.Errorf("attest output does not say why the peer did not verify us:\n%s", stdout)
	}
	if !strings.Contains(stderr, "without --llm") {
		t.Errorf("no warning on stderr:\n%s", stderr)
	}

	stdout, _, code, took = attest("--json")
	var m struct {
		Ours struct {
			Accepted bool `json:"accepted"`
		} `json:"ours"`
		Theirs struct {
			Error string `json:"error"`
		} `json:"theirs"`
	}
	if err := json.Unmarshal([]byte(stdout), &m); err != nil || code != exitOK || took > 20*time.Second ||
		!m.Ours.Accepted || !strings.Contains(m.Theirs.Error, "no LLM") {
		t.Errorf("attest --json: exit %d after %s, %v:\n%s", code, took, err, stdout)
	}
}

// TestNewUserAttestNodeWithoutLLMDeclined: a node without an LLM declines
// to be verified at the hello. attest says DECLINED and exits 1 (the peer
// was not accepted), at once and with nothing signed, in text and JSON.
func TestNewUserAttestNodeWithoutLLMDeclined(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node")
	}
	dir := t.TempDir()
	info := runCLINode(t, []string{"node", "--json", "--challenges", "procedural",
		"--key", filepath.Join(dir, "b", "key"), "--store", filepath.Join(dir, "b", "db"), "--listen", "/ip4/127.0.0.1/tcp/0"})
	if info.Pow == nil || *info.Pow != 0 {
		t.Errorf("a node on loopback only reports pow_difficulty %v, want 0 (auto)", info.Pow)
	}
	args := []string{"attest", "--timeout", "40s", "--challenges", "procedural", "--key", filepath.Join(dir, "a", "key"),
		"--store", filepath.Join(dir, "a", "db"), "--listen", "/ip4/127.0.0.1/tcp/0"}
	start := time.Now()
	stdout, stderr, code := newUserMain(context.Background(), append(args, info.Addrs[0])...)
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("attest took %s", took)
	}
	if code != exitRejected || !strings.Contains(stdout, "DECLINED") || !strings.Contains(stdout, "NO_PROVER") {
		t.Errorf("attest: exit %d, want %d and DECLINED:\n%s\n%s", code, exitRejected, stdout, stderr)
	}
	stdout, _, code = newUserMain(context.Background(), append(append(args, "--json"), info.Addrs[0])...)
	var m struct {
		Ours struct {
			Verdict string `json:"verdict"`
			Signed  bool   `json:"signed"`
		} `json:"ours"`
		// As the text's "its verdict of us" line, and as a session's
		// result has it: before, the JSON had no theirs at all.
		Theirs *struct {
			Error string `json:"error"`
		} `json:"theirs"`
	}
	if err := json.Unmarshal([]byte(stdout), &m); err != nil || code != exitRejected || m.Ours.Verdict != "declined" || m.Ours.Signed {
		t.Errorf("attest --json: exit %d, %v:\n%s", code, err, stdout)
	}
	if m.Theirs == nil || !strings.Contains(m.Theirs.Error, "not asked") {
		t.Errorf("attest --json does not say why the peer did not verify us (theirs.error):\n%s", stdout)
	}
}

// TestNewUserAttestBusyNodeIsAResult: a node whose LLM does not answer
// refuses to be verified (BUSY, nothing signed). attest reports that as
// its verdict on standard output and exits 1 with no error on standard
// error, as for a declining node; before, it printed only
// "error: acaptcha: prover busy: ...: answerer unavailable" (with --json
// an error object and no result).
func TestNewUserAttestBusyNodeIsAResult(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node")
	}
	sets, err := spec.Examples()
	if err != nil {
		t.Fatal(err)
	}
	oracle := testutil.NewOpenAIServer(testutil.NewOracle(sets...))
	defer oracle.Close()
	t.Setenv("OPENAI_API_KEY", "test")
	dir := t.TempDir()
	corpusA, corpusB := splitExamples(t, dir)
	dead := "http://127.0.0.1:1/v1" // nothing listens: the node's canary fails at once
	info := runCLINode(t, []string{"node", "--json", "--llm", "openai:stub", "--llm-base-url", dead, "--challenges", "corpus:" + corpusB,
		"--key", filepath.Join(dir, "b", "key"), "--store", filepath.Join(dir, "b", "db"), "--listen", "/ip4/127.0.0.1/tcp/0"})
	time.Sleep(time.Second) // the node's start-up canary
	args := []string{"attest", "--timeout", "40s", "--llm", "openai:stub", "--llm-base-url", oracle.URL + "/v1", "--challenges", "corpus:" + corpusA,
		"--key", filepath.Join(dir, "a", "key"), "--store", filepath.Join(dir, "a", "db"), "--listen", "/ip4/127.0.0.1/tcp/0"}
	stdout, stderr, code := newUserMain(context.Background(), append(args, info.Addrs[0])...)
	if code != exitRejected || !strings.Contains(stdout, "BUSY") || strings.HasPrefix(stderr, "error:") || strings.Contains(stderr, "\nerror:") {
		t.Errorf("attest: exit %d, want %d with BUSY on stdout and no error:\nstdout: %s\nstderr: %s", code, exitRejected, stdout, stderr)
	}
	stdout, stderr, code = newUserMain(context.Background(), append(append(args, "--json"), info.Addrs[0])...)
	var m struct {
		Ours struct {
			Verdict           string `json:"verdict"`
			Signed            bool   `json:"signed"`
			AttestationSigned *bool  `json:"attestation_signed"` // as in a session's result
		} `json:"ours"`
	}
	if err := json.Unmarshal([]byte(stdout), &m); err != nil || code != exitRejected || m.Ours.Verdict != "busy" || m.Ours.Signed ||
		m.Ours.AttestationSigned == nil || *m.Ours.AttestationSigned ||
		strings.Contains(stderr, `{"error"`) {
		t.Errorf("attest --json: exit %d, %v:\nstdout: %s\nstderr: %s", code, err, stdout, stderr)
	}
}

// runCLINode runs `acaptcha node --json ...` in this process until t ends
// and returns the addresses it printed.
func runCLINode(t *testing.T, args []string) (info struct {
	Addrs []string `json:"addrs"`
	Pow   *int     `json:"pow_difficulty"`
}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &firstLine{line: make(chan string, 1)}
	done := make(chan int, 1)
	go func() { done <- Main(ctx, args, out, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("node did not stop")
		}
	})
	select {
	case l := <-out.line:
		if err := json.Unmarshal([]byte(l), &info); err != nil || len(info.Addrs) == 0 {
			t.Fatalf("node output %q: %v", l, err)
		}
	case code := <-done:
		done <- code
		t.Fatalf("node exited %d", code)
	case <-time.After(30 * time.Second):
		t.Fatal("node printed nothing")
	}
	return info
}
