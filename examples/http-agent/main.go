// Command http-agent is a client of the HTTP door of an acaptcha node
// (spec/http.md): an agent with its own libp2p key opens a session, pays
// the proof of work, signs the start message, answers the RTT probes and
// then each round's challenge with one HTTP request, and gets back the
// attestation the node signed about its peer ID, which it verifies. Three
// agents run: one answers from a demo answer key and passes, one answers
// correctly but too slowly and gets timeout, one is a script and gets
// wrong_answer.
//
// By default it starts a node with its HTTP door on loopback in this
// process; -url uses a running one instead, started with
//
//	acaptcha node --http 127.0.0.1:8080 --challenges examples --max-serves 1000
//
// (the embedded corpus has 4 sets, each served once by default, and one
// run draws 3 of them).
// Run it with: go run ./examples/http-agent
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/examples/internal/demokey"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/peer/httpgw"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/spec"
)

func main() {
	url, err := parseArgs(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := run(ctx, url); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// parseArgs reads the flags; it returns the door's base URL, empty to
// start a node here.
func parseArgs(args []string) (string, error) {
	fs := flag.NewFlagSet("http-agent", flag.ContinueOnError)
	url := fs.String("url", "", "base URL of a running node's HTTP door (acaptcha node --http ADDR --challenges examples --max-serves 1000) instead of one started here; the embedded corpus has 4 sets, served once each unless --max-serves is raised")
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if fs.NArg() > 0 {
		return "", fmt.Errorf("unexpected argument %q (a running node's door is given with -url URL)", fs.Arg(0))
	}
	return strings.TrimRight(*url, "/"), nil
}

func run(ctx context.Context, base string) (err error) {
	sets, err := spec.Examples()
	if err != nil {
		return fmt.Errorf("example sets: %w", err)
	}
	key := demokey.New(sets...)
	if base == "" {
		stop, url, err := startNode(sets)
		if err != nil {
			return err
		}
		defer stop()
		base = url
	}

	// What does the node offer? The manifest says, for agents that find
	// the door without reading code.
	m, err := (&httpgw.Client{Base: base}).Manifest(ctx)
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	fmt.Printf("node %s at %s: %d rounds, tau %d ms, T_total %d ms, proof of work from %d bits\n",
		m.Node.PeerID, base, m.Policy.Rounds, m.Policy.TauMs, m.Policy.TotalMs, m.Pow.MinDifficulty)

	fromKey := func(_ context.Context, c *httpgw.Challenge) (string, error) {
		return key.Answer(c.Narrative, c.Question), nil
	}
	runs := []struct {
		name   string
		want   string // the verdict this agent should get
		answer func(context.Context, *httpgw.Challenge) (string, error)
	}{
		{"agent (answer key)", "ACCEPTED", fromKey},
		{"slow agent (right answers, past the budget)", "REJECTED", func(ctx context.Context, c *httpgw.Challenge) (string, error) {
			select {
			case <-time.After(time.Duration(c.BudgetMs)*time.Millisecond + time.Second):
			case <-ctx.Done():
				return "", ctx.Err()
			}
			return fromKey(ctx, c)
		}},
		{"script (no reading)", "REJECTED", func(context.Context, *httpgw.Challenge) (string, error) { return "unknown", nil }},
	}
	var unexpected []string
	defer func() {
		if len(unexpected) > 0 && err == nil {
			err = fmt.Errorf("unexpected verdicts: %s", strings.Join(unexpected, "; "))
		}
	}()
	for _, r := range runs {
		// Each agent has its own libp2p key: the attestation binds it.
		agentKey, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			return fmt.Errorf("agent key: %w", err)
		}
		id, err := lpeer.IDFromPrivateKey(agentKey)
		if err != nil {
			return fmt.Errorf("agent peer ID: %w", err)
		}
		c := &httpgw.Client{Base: base, Key: agentKey}
		res, err := c.Attest(ctx, r.answer)
		if err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		fmt.Printf("\n%s %s: %s %s", r.name, id, res.Verdict, res.Reason)
		if res.FailedRound > 0 {
			fmt.Printf(" (round %d)", res.FailedRound)
		}
		fmt.Printf(", rtt %d ms\n", res.RTTMs)
		if res.Detail != "" {
			fmt.Printf("  detail: %s\n", res.Detail)
		}
		if res.Verdict != r.want {
			unexpected = append(unexpected, fmt.Sprintf("%s: %s %s, want %s", r.name, res.Verdict, res.Reason, r.want))
		}
		for _, rd := range res.Rounds {
			fmt.Printf("  round %d: correct=%t, %d ms of %d ms\n", rd.Round, rd.Correct, rd.EffectiveMs, rd.BudgetMs)
		}
		if len(res.Attestation) == 0 {
			continue
		}
		// Anyone can check the record: over HTTP, and offline as
		// `acaptcha attestations verify` does.
		var v struct {
			OK      bool   `json:"ok"`
			Valid   bool   `json:"valid"`
			Verdict string `json:"verdict"`
			Error   string `json:"error"`
		}
		if err := c.Do(ctx, "/v1/attestations/verify", map[string]any{"attestation": res.Attestation, "any_verdict": true}, &v); err != nil {
			return fmt.Errorf("verify over HTTP: %w", err)
		}
		att, _, err := protocol.VerifyAttestation(res.Attestation, protocol.VerifyOptions{Subject: id})
		if err != nil {
			return fmt.Errorf("verify the record offline: %w", err)
		}
		fmt.Printf("  attestation (%d bytes): over HTTP valid=%t %s; offline: issuer %s, subject is this agent, expires %s\n",
			len(res.Attestation), v.Valid, v.Verdict, att.Issuer, att.ExpiresAt.Format(time.RFC3339))
	}
	return nil
}

// startNode starts a node serving the example sets, with its HTTP door on
// loopback; it returns how to stop it and the door's URL.
func startNode(sets []*skill.Set) (func(), string, error) {
	dir, err := os.MkdirTemp("", "acaptcha-http-agent-")
	if err != nil {
		return nil, "", fmt.Errorf("temp dir: %w", err)
	}
	src, err := skill.NewCorpus("examples", sets, nil, 1000)
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", fmt.Errorf("corpus: %w", err)
	}
	nodeKey, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", fmt.Errorf("node key: %w", err)
	}
	// A short tau keeps the slow run short; it is far below a person's
	// reading time all the same (the policy check refuses anything else).
	pol := skill.DefaultPolicy()
	pol.Tau = 3 * time.Second
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	n, err := peer.New(peer.Config{Key: nodeKey, StorePath: filepath.Join(dir, "node.db"),
		ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Policy: pol, Source: src, Logger: quiet})
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", fmt.Errorf("start node: %w", err)
	}
	gw, err := httpgw.ForNode(n.Door(), httpgw.Config{Logger: quiet})
	if err != nil {
		n.Close()
		os.RemoveAll(dir)
		return nil, "", err
	}
	addr, err := gw.Listen("127.0.0.1:0")
	if err != nil {
		n.Close()
		os.RemoveAll(dir)
		return nil, "", err
	}
	stop := func() {
		gw.Close()
		n.Close()
		os.RemoveAll(dir)
	}
	return stop, "http://" + addr.String(), nil
}
