package secondimpl2

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The door under test is the real node, run as the built binary on
// loopback with the embedded example corpus (--challenges examples), so that
// the oracle answerer knows every answer from spec/examples alone. Nothing
// here reads the door's Go source: only its command line (--help) and
// spec/http.md.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func nodeBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "secondhttp-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "acaptcha")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", binPath, "./cmd/acaptcha")
		cmd.Dir = filepath.Join("..", "..")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building the node: %v", buildErr)
	}
	return binPath
}

var doorLine = regexp.MustCompile(`HTTP door[^\n]*?http://(127\.0\.0\.1:[0-9]+)`)

// startNode runs `acaptcha node` with the HTTP door on a free loopback port
// and returns the door's base URL. extra flags are appended.
func startNode(t *testing.T, extra ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the node binary")
	}
	bin := nodeBinary(t)
	dir := t.TempDir()
	args := []string{"node",
		"--http", "127.0.0.1:0",
		"--listen", "/ip4/127.0.0.1/tcp/0",
		"--mdns=false", "--nat=false", "--gossip=false",
		"--key", filepath.Join(dir, "key"),
		"--store", filepath.Join(dir, "db"),
		"--challenges", "examples",
	}
	args = append(args, extra...)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY=", "ANTHROPIC_API_KEY=", "GOOGLE_API_KEY=", "OLLAMA_HOST=")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
	})
	found := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			if m := doorLine.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- "http://" + m[1]
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
	}()
	select {
	case base := <-found:
		// wait for the manifest (bounded)
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			resp, err := http.Get(base + "/.well-known/acaptcha.json")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return base
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("door at %s never served its manifest", base)
	case <-done:
		t.Fatalf("node exited: %s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("node did not print its HTTP door within 30 s: %s", stderr.String())
	}
	return ""
}
