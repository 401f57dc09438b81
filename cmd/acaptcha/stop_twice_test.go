package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/spec"
)

// A node stopped (SIGINT) while it answers a session whose LLM never
// replies waits for it to drain; a second SIGINT stops it at once, with
// exit 0, and its store is released (a read-only command opens it).
func TestNodeSecondSignalStopsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	sets, err := spec.Examples()
	if err != nil {
		t.Fatal(err)
	}
	// B's LLM takes a session's request and never answers (until the
	// test ends).
	hit := make(chan struct{})
	var once sync.Once
	release := make(chan struct{})
	// Until armed, the oracle answers (the prover's health-check canary
	// at start is no session).
	oracle := testutil.NewOpenAIServer(testutil.NewOracle(sets...))
	defer oracle.Close()
	u, err := url.Parse(oracle.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	var armed atomic.Bool
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !armed.Load() {
			proxy.ServeHTTP(w, r)
			return
		}
		once.Do(func() { close(hit) })
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer hang.Close()
	defer close(release)

	dir := t.TempDir()
	corpusA, corpusB := splitExamples(t, dir)
	b, addrB := startNodeProc(t, bin, filepath.Join(dir, "b"), hang.URL, corpusB)

	time.Sleep(2 * time.Second) // the canary
	armed.Store(true)
	env := []string{"OPENAI_BASE_URL=" + oracle.URL + "/v1", "OPENAI_API_KEY=test"}
	attest := make(chan int, 1)
	var attestOut string
	go func() {
		out, code := run(t, bin, env, "attest", "--timeout", "90s", addrB, "--llm", "openai:stub", "--challenges", "corpus:"+corpusA,
			"--key", filepath.Join(dir, "a", "key"), "--store", filepath.Join(dir, "a", "db"))
		attestOut = out
		attest <- code
	}()
	select {
	case <-hit:
	case <-time.After(60 * time.Second):
		t.Fatalf("B's prover never called its LLM; stderr:\n%s", b.errb.String())
	}
	if err := b.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	// The first signal: B drains (up to drainWait, 30 s). A process that
	// exited and is not yet reaped is a zombie (state Z).
	time.Sleep(time.Second)
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", b.cmd.Process.Pid)); err != nil || strings.Contains(string(st), ") Z ") {
		<-attest
		rest, _ := io.ReadAll(b.out)
		t.Fatalf("the node stopped on the first signal while a session ran; stdout:\n%s\nstderr:\n%s\nattest:\n%s", rest, b.errb.String(), attestOut)
	}
	start := time.Now()
	if err := b.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case err := <-done:
		took := time.Since(start)
		t.Logf("stopped %v after the second signal", took.Round(time.Millisecond))
		if err != nil {
			t.Fatalf("node after two signals: %v; stderr:\n%s", err, b.errb.String())
		}
		if took > 10*time.Second {
			t.Fatalf("the second signal took %v to stop the node", took)
		}
	case <-time.After(25 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
		t.Fatalf("the node did not stop within 25 s of the second signal; stderr:\n%s", b.errb.String())
	}
	// The store is released and holds what the node wrote.
	out, code := run(t, bin, nil, "attestations", "list", "--store", filepath.Join(dir, "b", "db"))
	if code != 0 {
		t.Fatalf("list B's store after the stop: exit %d\n%s", code, out)
	}
	select {
	case <-attest:
	case <-time.After(2 * time.Minute):
		t.Fatal("attest did not end")
	}
}
