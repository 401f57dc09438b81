// Command mcp is a scripted MCP client of `acaptcha mcp`: it starts the
// acaptcha MCP server over stdio (the official Go SDK's CommandTransport),
// attests a running node with it, and answers that node's challenges
// itself through next_challenge and answer_challenge, as an assistant
// does with its own model and memory. Here a labelled demo answer key
// stands in for the assistant's reading, so that it runs offline.
//
// By default it starts the node to attest in this process, on loopback;
// -addr attests a running one instead.
//
// Run it with: go run ./examples/mcp
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acaptcha/acaptcha/examples/internal/demokey"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/peer/mcpserver"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/spec"
)

func main() {
	a, err := parseArgs(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := run(ctx, a.bin, a.addr); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

type args struct{ bin, addr string }

// parseArgs reads the flags.
func parseArgs(argv []string) (args, error) {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	bin := fs.String("acaptcha", "", "acaptcha binary to serve MCP (default: build ./cmd/acaptcha into a temporary directory)")
	addr := fs.String("addr", "", "attest this running node (multiaddr ending in /p2p/PEER_ID) instead of one started here; start it with --llm and --challenges examples, so that it can answer our challenges and the demo key can answer its own")
	if err := fs.Parse(argv); err != nil {
		return args{}, err
	}
	if fs.NArg() > 0 {
		return args{}, fmt.Errorf("unexpected argument %q (a running node is given with -addr MULTIADDR, the binary with -acaptcha PATH)", fs.Arg(0))
	}
	return args{bin: *bin, addr: *addr}, nil
}

func run(ctx context.Context, bin, addr string) error {
	dir, err := os.MkdirTemp("", "acaptcha-mcp-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	sets, err := spec.Examples()
	if err != nil {
		return fmt.Errorf("example sets: %w", err)
	}
	key := demokey.New(sets...)
	// The two sides serve disjoint halves of the examples: a node declines
	// a challenge it issued itself (a reflection), so two nodes drawing
	// from the same corpus would decline each other now and then.
	var mine, theirs []*skill.Set
	for i, s := range sets {
		if i%2 == 0 {
			theirs = append(theirs, s)
		} else {
			mine = append(mine, s)
		}
	}
	challenges := "procedural" // against a node run elsewhere
	local := addr == ""
	if local {
		corpus := filepath.Join(dir, "corpus")
		if err := writeCorpus(corpus, mine); err != nil {
			return err
		}
		challenges = "corpus:" + corpus
		target, err := startTarget(dir, theirs, key)
		if err != nil {
			return err
		}
		defer target.Close()
		addr = target.Addrs()[0].String()
		fmt.Printf("target node %s listens on %s (answers with the demo key)\n", short(target.ID().String()), addr)
	}
	if bin == "" {
		bin = filepath.Join(dir, "acaptcha")
		fmt.Println("building acaptcha (go build ./cmd/acaptcha)...")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/acaptcha/acaptcha/cmd/acaptcha")
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("build acaptcha (run from the repository, or pass -acaptcha PATH): %w\n%s", err, out)
		}
	}

	// The MCP server: `acaptcha mcp` over stdio, its node answered by us.
	cmd := exec.Command(bin, "mcp", "--answer-with", "agent", "--challenges", challenges,
		"--key", filepath.Join(dir, "key"), "--store", filepath.Join(dir, "store.db"), "--listen", "/ip4/127.0.0.1/tcp/0", "--log-level", "error")
	cmd.Stderr = os.Stderr // its logs
	client := mcp.NewClient(&mcp.Implementation{Name: "acaptcha-example", Version: "v0"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return fmt.Errorf("start acaptcha mcp: %w", err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("list tools: %w", err)
	}
	var names []string
	for _, t := range tools.Tools {
		names = append(names, t.Name)
	}
	fmt.Printf("acaptcha mcp tools: %s\n\n", strings.Join(names, ", "))

	start, err := callTool[mcpserver.AttestOutput](ctx, cs, "attest_peer", map[string]any{"addr": addr, "self_answer": true, "background": true})
	if err != nil {
		return err
	}
	fmt.Printf("attest_peer (self_answer, background): job %s; our node %s\n", start.JobID, short(start.Self))
	out, err := answerUntilDone(ctx, cs, start.JobID, key)
	if err != nil {
		return err
	}
	if out.Status != "done" {
		return fmt.Errorf("attestation %s: %s", out.Status, out.Error)
	}
	o, t := out.Ours, out.Theirs
	fmt.Printf("\nwe verified %s: %s (%s)\n", short(out.Peer), o.Verdict, o.Reason)
	for _, r := range o.Rounds {
		fmt.Printf("  round %d  %-11s answer %-14q correct %-5v effective %5d ms / budget %d ms\n", r.Round, r.ReasoningType, r.Answer, r.Correct, r.EffectiveMs, r.BudgetMs)
	}
	fmt.Printf("%s verified us: %s (%s) after %d round(s) answered through MCP\n", short(out.Peer), t.Verdict, t.Reason, t.RoundsAnswered)
	if t.Error != "" {
		fmt.Printf("  %s\n", t.Error)
	}
	if t.Record == "" {
		return errors.New("the target signed no attestation of us")
	}
	v, err := callTool[mcpserver.VerifyOutput](ctx, cs, "verify_attestation", map[string]any{"record": t.Record, "subject": out.Self, "issuer": out.Peer})
	if err != nil {
		return err
	}
	fmt.Printf("verify_attestation of their record about us: ok=%v valid=%v verdict=%s\n", v.OK, v.Valid, v.Verdict)
	la, err := callTool[mcpserver.ListAttestationsOutput](ctx, cs, "list_attestations", map[string]any{"peer": out.Peer})
	if err != nil {
		return err
	}
	fmt.Printf("list_attestations: %d stored with %s:", la.Total, short(out.Peer))
	for _, e := range la.Attestations {
		fmt.Printf(" %s %s (source %s);", e.Direction, e.Verdict, e.Source)
	}
	fmt.Println()
	switch {
	case !t.Accepted || !v.OK:
		return errors.New("the node did not accept the answers given through MCP")
	case local && !o.Accepted:
		return errors.New("the target node did not pass our verification")
	}
	return nil
}

// answerUntilDone plays the assistant: it answers each pending challenge
// (here from the demo key) and polls the background attestation until it
// is over.
func answerUntilDone(ctx context.Context, cs *mcp.ClientSession, job string, key *demokey.Key) (mcpserver.AttestOutput, error) {
	for {
		nx, err := callTool[mcpserver.NextOutput](ctx, cs, "next_challenge", map[string]any{"wait_ms": 500})
		if err != nil {
			return mcpserver.AttestOutput{}, err
		}
		if nx.Pending {
			ans := key.Answer(nx.Narrative, nx.Question)
			fmt.Printf("  challenge round %d/%d (%s, %d ms budget, %d ms left): %s\n", nx.Round, nx.Rounds, nx.Domain, nx.BudgetMs, nx.RemainingMs, nx.Question)
			a, err := callTool[mcpserver.AnswerOutput](ctx, cs, "answer_challenge", map[string]any{"challenge_id": nx.ChallengeID, "answer": ans})
			if err != nil {
				return mcpserver.AttestOutput{}, err
			}
			fmt.Printf("    answered %q after %d ms\n", ans, a.ElapsedMs)
			continue
		}
		st, err := callTool[mcpserver.AttestOutput](ctx, cs, "attest_status", map[string]any{"job_id": job, "wait_ms": 200})
		if err != nil {
			return st, err
		}
		if st.Status != "running" {
			return st, nil
		}
	}
}

func callTool[T any](ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (T, error) {
	var out T
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return out, fmt.Errorf("%s: %w", name, err)
	}
	if res.IsError {
		var msg []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				msg = append(msg, tc.Text)
			}
		}
		return out, fmt.Errorf("%s: %s", name, strings.Join(msg, "; "))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return out, fmt.Errorf("%s: %w", name, err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("%s: decode output: %w", name, err)
	}
	return out, nil
}

func writeCorpus(dir string, sets []*skill.Set) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("corpus dir: %w", err)
	}
	for _, s := range sets {
		b, err := json.Marshal(s)
		if err != nil {
			return fmt.Errorf("encode set %s: %w", s.ID, err)
		}
		if err := os.WriteFile(filepath.Join(dir, s.ID+".json"), b, 0o600); err != nil {
			return fmt.Errorf("write set %s: %w", s.ID, err)
		}
	}
	return nil
}

// startTarget starts the node to attest: it serves its half of the
// examples and answers our challenges from the demo key.
func startTarget(dir string, sets []*skill.Set, key *demokey.Key) (*peer.Node, error) {
	src, err := skill.NewCorpus("examples-half", sets, nil, 100)
	if err != nil {
		return nil, fmt.Errorf("target corpus: %w", err)
	}
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("target key: %w", err)
	}
	n, err := peer.New(peer.Config{
		Key: k, StorePath: filepath.Join(dir, "target.db"), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		Source: src, SourceKind: skill.SourceCorpus, Prover: key.Prover(),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		return nil, fmt.Errorf("start target: %w", err)
	}
	return n, nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:6] + "…" + id[len(id)-6:]
	}
	return id
}
