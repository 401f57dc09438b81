package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/peer/mcpserver"
)

// attestations export -o over a file that holds something else than an
// attestation (the store itself, its write-ahead log, the node's key, any
// other file) is refused, exit 2, and the file is left as it was: before,
// `export KEY -o acaptcha.db` wrote the 395-byte envelope over the store
// (every record lost, "store is damaged" afterwards) and `-o key` over
// the node's identity. An earlier export, an empty file and a new name
// are written as before.
func TestNewUser120ExportKeepsOtherFiles(t *testing.T) {
	dir := t.TempDir()
	store, key, env := storeWithOne(t, dir)
	keyFile := filepath.Join(dir, "key")
	if _, err := peer.LoadOrCreateKey(keyFile, nil); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(other, []byte("my notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, target := range []string{store, store + "-wal", keyFile, other} {
		before, err := os.ReadFile(target)
		if err != nil {
			if target == store+"-wal" && os.IsNotExist(err) {
				continue
			}
			t.Fatal(err)
		}
		for _, js := range []bool{false, true} {
			args := []string{"attestations", "export", key, "--store", store, "-o", target}
			if js {
				args = append(args, "--json")
			}
			out, errOut, code := newUserMain(ctx, args...)
			if code != exitUsage || out != "" || !strings.Contains(errOut, "holds no attestation") {
				t.Errorf("export -o %s (json %v): exit %d, stdout %q, stderr %q; want exit %d and the file kept", filepath.Base(target), js, code, out, errOut, exitUsage)
			}
			if js {
				if msg, ec := jsonError(t, lastLine(errOut)); ec != exitUsage || msg == "" {
					t.Errorf("export -o %s --json: error object %q/%d", filepath.Base(target), msg, ec)
				}
			}
			after, err := os.ReadFile(target)
			if err != nil || !bytes.Equal(before, after) {
				t.Fatalf("export -o %s changed the file (%d bytes before, %d after, %v)", filepath.Base(target), len(before), len(after), err)
			}
		}
	}
	// The store still reads.
	if out, errOut, code := newUserMain(ctx, "attestations", "list", "--store", store); code != exitOK || !strings.Contains(out, shortKey(key)) {
		t.Fatalf("list after the refused exports: exit %d\n%s\n%s", code, out, errOut)
	}
	// A new file, an empty one and an earlier export are written.
	empty := filepath.Join(dir, "empty.att")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(dir, "peer.att")
	for _, target := range []string{fresh, fresh, empty} {
		if out, errOut, code := newUserMain(ctx, "attestations", "export", key, "--store", store, "-o", target); code != exitOK {
			t.Fatalf("export -o %s: exit %d\n%s\n%s", filepath.Base(target), code, out, errOut)
		}
		if got, err := os.ReadFile(target); err != nil || !bytes.Equal(got, env) {
			t.Fatalf("export -o %s: file holds %d bytes, %v", filepath.Base(target), len(got), err)
		}
	}
}

// acceptingListener accepts TCP connections on loopback and never
// answers; accepted receives a value per connection.
func acceptingListener(t *testing.T) (addr string, accepted <-chan struct{}) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{}, 64)
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
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return l.Addr().String(), ch
}

// Stopping `acaptcha mcp` (stdio or --http) while tool calls are in
// flight ends them at once: before, the SDK waited for the session's
// calls to return, so a next_challenge long-poll held a Ctrl-C or a
// SIGTERM up to a minute (measured 57 s over stdio, 60 s over --http),
// an attest_peer up to its timeout or its dial's end (5 s for this
// silent loopback peer).
func TestNewUser120MCPStopEndsCallsInFlight(t *testing.T) {
	for _, mode := range []string{"stdio", "http"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			silent, accepted := acceptingListener(t)
			_, port, _ := net.SplitHostPort(silent)
			target := "/ip4/127.0.0.1/tcp/" + port + "/p2p/12D3KooWGzxzKZYveHXtpG6AsrUJBcWxHBFS2HsEoGTxrMLvKXtf"
			args := []string{"mcp", "--challenges", "procedural", "--key", filepath.Join(dir, "key"),
				"--store", filepath.Join(dir, "db"), "--listen", "/ip4/127.0.0.1/tcp/0", "--log-level", "error"}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out, errb syncBuffer
			done := make(chan int, 1)
			cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer ccancel()
			var transport mcp.Transport
			if mode == "http" {
				go func() { done <- Main(ctx, append(args, "--http", "127.0.0.1:0"), &out, &errb) }()
				var url string
				for i := 0; i < 400 && url == ""; i++ {
					if _, rest, ok := strings.Cut(errb.String(), "streamable HTTP at "); ok {
						url, _, _ = strings.Cut(rest, "\n")
					} else {
						time.Sleep(50 * time.Millisecond)
					}
				}
				if url == "" {
					cancel()
					t.Fatalf("no endpoint announced; exit %d\n%s", <-done, errb.String())
				}
				transport = &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}
			} else {
				inR, inW := io.Pipe()
				outR, outW := io.Pipe()
				old := stdinReader
				stdinReader = inR
				t.Cleanup(func() { stdinReader = old })
				go func() {
					code := Main(ctx, args, outW, &errb)
					outW.Close()
					done <- code
				}()
				transport = &mcp.IOTransport{Reader: outR, Writer: inW}
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).Connect(cctx, transport, nil)
			if err != nil {
				cancel()
				t.Fatalf("connect: %v\n%s", err, errb.String())
			}
			defer cs.Close()
			// An attest_peer dialing a silent peer (which holds the dial
			// 5 s, libp2p's bound for a local address) and long-polls of
			// a minute in flight.
			ended := make(chan error, 3)
			for range 2 {
				go func() {
					_, err := mcpCall[mcpserver.NextOutput](cctx, cs, "next_challenge", map[string]any{"wait_ms": 60000})
					ended <- err
				}()
			}
			go func() {
				_, err := mcpCall[mcpserver.AttestOutput](cctx, cs, "attest_peer", map[string]any{"addr": target, "timeout_seconds": 1800})
				ended <- err
			}()
			select {
			case <-accepted:
			case <-cctx.Done():
				t.Fatal("attest_peer never dialed the silent peer")
			}
			start := time.Now()
			cancel()
			// The calls end within 4 s: the silent peer alone held them
			// 5 s before, the long-polls a minute (over --http until the
			// server's 5 s shutdown bound cut their connections).
			const callBound = 4 * time.Second
			deadline := time.After(callBound)
			for i := range 3 {
				select {
				case err := <-ended:
					if err == nil {
						t.Errorf("a call in flight succeeded across the stop")
					}
				case <-deadline:
					t.Fatalf("acaptcha mcp (%s): %d of 3 calls in flight still running %v after the stop;\n%s", mode, 3-i, callBound, goroutines())
				}
			}
			t.Logf("calls ended in %v", time.Since(start).Round(time.Millisecond))
			// The process then closes its node and store: a stop takes
			// 40-120 ms on an idle machine, but a store's last sync
			// waits on a disk other tests keep busy (this bound is not
			// what the test is about; the calls' is).
			const exitBound = 30 * time.Second
			select {
			case code := <-done:
				if code != exitOK {
					t.Errorf("exit %d, want %d\n%s", code, exitOK, errb.String())
				}
				t.Logf("stopped in %v", time.Since(start).Round(time.Millisecond))
			case <-time.After(exitBound):
				t.Fatalf("acaptcha mcp (%s) did not stop within %v;\n%s", mode, exitBound, goroutines())
			}
		})
	}
}

// goroutines is every goroutine's stack, grouped: what held a stop.
func goroutines() string {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	return "goroutines:\n" + b.String()
}

// A new user types the words README uses without their group:
// `acaptcha verify FILE` for `acaptcha attestations verify FILE`, or
// `acaptcha http` for the HTTP door. The error names the command meant;
// before, it said only that the command is unknown (cobra's suggestions
// go by spelling, and "verify" is far from "attestations").
func TestNewUser120UnknownCommandNamesTheGroup(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"verify", "peer.att"}, `"attestations verify"`},
		{[]string{"list"}, `"attestations list"`},
		{[]string{"export", "KEY"}, `"attestations export"`},
		{[]string{"inspect", "x.json"}, `"challenge inspect"`},
		{[]string{"swarm"}, `"bench swarm"`},
		{[]string{"http"}, `"node --http HOST:PORT"`},
	} {
		for _, js := range []bool{false, true} {
			args := tc.args
			if js {
				args = append(append([]string{}, args...), "--json")
			}
			out, errOut, code := newUserMain(context.Background(), args...)
			msg := errOut
			if js {
				var ec int
				if msg, ec = jsonError(t, lastLine(errOut)); ec != exitUsage {
					t.Errorf("%v: error object %q/%d", args, msg, ec)
				}
			}
			if code != exitUsage || out != "" || !strings.Contains(msg, "did you mean "+tc.want) {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d suggesting %s", args, code, out, errOut, exitUsage, tc.want)
			}
		}
	}
}

// "both", the default direction the help and the MCP tool's schema name
// ("issued or received (default both)"), is taken as a value by
// attestations list --direction and list_attestations' direction; before,
// both refused it ("want issued or received").
func TestNewUser120DirectionBoth(t *testing.T) {
	dir := t.TempDir()
	store, key, _ := storeWithOne(t, dir)
	out, errOut, code := newUserMain(context.Background(), "attestations", "list", "--store", store, "--direction", "both")
	if code != exitOK || !strings.Contains(out, shortKey(key)) {
		t.Errorf("list --direction both: exit %d\n%s\n%s", code, out, errOut)
	}
}

// A --store or --key that names a directory is a wrong argument (exit
// 2, as the read-only commands say of a directory --store), refused
// before anything is made: node, attest and mcp exited 1, and a --store
// directory left a new key file behind.
func TestNewUser120DirectoryStoreOrKeyIsUsage(t *testing.T) {
	for _, cmdArgs := range [][]string{
		{"node", "--challenges", "procedural", "--listen", "/ip4/127.0.0.1/tcp/0"},
		{"mcp", "--challenges", "procedural", "--listen", "/ip4/127.0.0.1/tcp/0"},
		{"attest", "/ip4/127.0.0.1/tcp/1/p2p/12D3KooWGzxzKZYveHXtpG6AsrUJBcWxHBFS2HsEoGTxrMLvKXtf"},
	} {
		dir := t.TempDir()
		sub := filepath.Join(dir, "sub")
		if err := os.Mkdir(sub, 0o700); err != nil {
			t.Fatal(err)
		}
		key, store := filepath.Join(dir, "key"), filepath.Join(dir, "db")
		for _, tc := range []struct {
			flags   []string
			want    string
			nothing string // the file that must not be made
		}{
			{[]string{"--store", sub, "--key", key}, "--store", key},
			{[]string{"--store", store, "--key", sub}, "--key", store},
		} {
			args := append(append(append([]string{}, cmdArgs...), tc.flags...), "--json")
			out, errOut, code := newUserMain(context.Background(), args...)
			msg, ec := jsonError(t, lastLine(errOut))
			if code != exitUsage || ec != exitUsage || !strings.Contains(msg, tc.want) || !strings.Contains(msg, "directory") {
				t.Errorf("%v: exit %d, error %q/%d, stdout %q; want exit %d naming %s", args, code, msg, ec, out, exitUsage, tc.want)
			}
			if _, err := os.Stat(tc.nothing); err == nil {
				t.Errorf("%v: made %s", args, filepath.Base(tc.nothing))
			}
		}
	}
}

// An empty --require-source or --attest-policy (an unset shell
// variable: --require-source "$MIN") is refused, exit 2, as an empty
// --store, --key or --challenges is and as attestations verify refuses an
// empty --require-source; before, node, attest, mcp, peers and bench
// swarm took it silently for the default.
func TestNewUser120EmptyChoiceFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	store, _, _ := storeWithOne(t, dir)
	base := map[string][]string{
		"node":   {"node", "--challenges", "procedural", "--listen", "/ip4/127.0.0.1/tcp/0", "--store", filepath.Join(dir, "n.db"), "--key", filepath.Join(dir, "n.key")},
		"mcp":    {"mcp", "--challenges", "procedural", "--listen", "/ip4/127.0.0.1/tcp/0", "--store", filepath.Join(dir, "m.db"), "--key", filepath.Join(dir, "m.key")},
		"attest": {"attest", "/ip4/127.0.0.1/tcp/1/p2p/12D3KooWGzxzKZYveHXtpG6AsrUJBcWxHBFS2HsEoGTxrMLvKXtf", "--store", filepath.Join(dir, "a.db"), "--key", filepath.Join(dir, "a.key")},
		"peers":  {"peers", "--store", store},
		"swarm":  {"bench", "swarm", "-n", "2"},
	}
	for _, tc := range []struct {
		cmd, flag string
	}{
		{"node", "require-source"}, {"mcp", "require-source"}, {"attest", "require-source"}, {"peers", "require-source"}, {"swarm", "require-source"},
		{"node", "attest-policy"},
	} {
		args := append(append([]string{}, base[tc.cmd]...), "--"+tc.flag, " ", "--json")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, errOut, code := newUserMain(ctx, args...)
		cancel()
		msg, ec := jsonError(t, lastLine(errOut))
		if code != exitUsage || ec != exitUsage || !strings.Contains(msg, "--"+tc.flag+" is empty") {
			t.Errorf("%s --%s ' ': exit %d, error %q/%d, stdout %.200q; want exit %d", tc.cmd, tc.flag, code, msg, ec, out, exitUsage)
		}
	}
}

// peers --node "" (an unset shell variable: --node "$METRICS") is
// refused, exit 2; before, it read the store instead of the running node
// without a word (the store of a stopped node, or a "store is locked"
// error that does not name --node).
func TestNewUser120PeersEmptyNodeRefused(t *testing.T) {
	dir := t.TempDir()
	store, _, _ := storeWithOne(t, dir)
	out, errOut, code := newUserMain(context.Background(), "peers", "--store", store, "--node", "", "--json")
	msg, ec := jsonError(t, lastLine(errOut))
	if code != exitUsage || ec != exitUsage || !strings.Contains(msg, "--node is empty") || out != "" {
		t.Errorf("peers --node '': exit %d, error %q/%d, stdout %.200q; want exit %d", code, msg, ec, out, exitUsage)
	}
}

// An empty --out of generate or eval (an unset shell variable) is a
// usage error naming the flag (exit 2); before, it failed as a runtime
// error, exit 1: "output directory: mkdir : no such file or directory".
func TestNewUser120EmptyOutRefused(t *testing.T) {
	for _, args := range [][]string{
		{"generate", "--source", "procedural", "--n", "1", "--out", ""},
		{"eval", "--source", "procedural", "--sessions", "1", "--out", " "},
	} {
		out, errOut, code := newUserMain(context.Background(), append(args, "--json")...)
		msg, ec := jsonError(t, lastLine(errOut))
		if code != exitUsage || ec != exitUsage || !strings.Contains(msg, "--out is empty") {
			t.Errorf("%v: exit %d, error %q/%d, stdout %.200q; want exit %d", args, code, msg, ec, out, exitUsage)
		}
	}
}
