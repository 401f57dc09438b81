// Command gated-service runs an echo protocol that only admitted agents can
// call. Three nodes run in this process on loopback:
//
//   - the service attests every peer that connects (first contact) and
//     serves /example/echo/1.0.0 through Node.HandleAdmitted;
//   - an agent answers the service's challenges (here from a labelled demo
//     oracle, standing in for an LLM), is admitted and gets its echo;
//   - a script answers from the question text alone, is rejected, and its
//     echo stream is reset with the gate's reason.
//
// Run it with: go run ./examples/gated-service
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/acaptcha/acaptcha/examples/internal/demokey"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

// EchoID is the application protocol the service gates.
const EchoID protocol.ID = "/example/echo/1.0.0"

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "acaptcha-gated-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	oracle := demokey.New()
	gen, err := procedural.New(procedural.Config{})
	if err != nil {
		return fmt.Errorf("challenge generator: %w", err)
	}

	// The example serves procedural challenges, which a script written
	// against this code could pass: it says so (SourceKind: the node warns
	// at start) and admits on them explicitly. A production service serves
	// LLM-written challenges and keeps the default policy (hybrid).
	service, err := newNode(dir, "service", peer.Config{
		Source: oracle.Source(gen), SourceKind: skill.SourceProcedural, AttestPolicy: peer.AttestAll,
		RequireSource: skill.SourceProcedural,
	})
	if err != nil {
		return err
	}
	defer service.Close()
	service.HandleAdmitted(EchoID, echo)
	fmt.Printf("service %s serves %s to admitted peers only\n\n", short(service.ID()), EchoID)

	agent, err := newNode(dir, "agent", peer.Config{Prover: oracle.Prover()})
	if err != nil {
		return err
	}
	defer agent.Close()
	script, err := newNode(dir, "script", peer.Config{Prover: keywordScript()})
	if err != nil {
		return err
	}
	defer script.Close()

	var unexpected []string
	for _, c := range []struct {
		name  string
		n     *peer.Node
		admit bool // the outcome this client should get
	}{{"agent (demo oracle)", agent, true}, {"script (keywords)", script, false}} {
		fmt.Printf("%s %s connects; the service attests it on first contact...\n", c.name, short(c.n.ID()))
		if err := c.n.Host().Connect(ctx, lpeer.AddrInfo{ID: service.ID(), Addrs: service.Host().Addrs()}); err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		adm, err := awaitVerdict(ctx, service, c.n.ID())
		if err != nil {
			return err
		}
		if adm.Admitted {
			fmt.Printf("  admitted (%s)\n", adm.Via)
		} else {
			fmt.Printf("  not admitted: %s\n", adm.Reason)
		}
		if adm.Admitted != c.admit {
			unexpected = append(unexpected, fmt.Sprintf("%s: admitted=%t, want %t", c.name, adm.Admitted, c.admit))
		}
		reply, err := call(ctx, c.n, service.ID(), "hello from "+c.name)
		if reason, gated := peer.GateReason(err); gated {
			fmt.Printf("  echo refused by the gate: %s\n\n", reason)
			if c.admit {
				unexpected = append(unexpected, fmt.Sprintf("%s: echo refused (%s)", c.name, reason))
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("echo: %w", err)
		}
		fmt.Printf("  echo replied: %q\n\n", reply)
		if !c.admit {
			unexpected = append(unexpected, c.name+": echo served to a peer not admitted")
		}
	}
	st := service.Stats()
	fmt.Printf("service: %d session(s) run, %d gated stream(s) served, %d refused\n", st.SessionsVerified, st.AdmissionsGranted, st.AdmissionsDenied)
	if len(unexpected) > 0 {
		return fmt.Errorf("unexpected outcomes: %s", strings.Join(unexpected, "; "))
	}
	return nil
}

func newNode(dir, name string, cfg peer.Config) (*peer.Node, error) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("%s key: %w", name, err)
	}
	cfg.Key = key
	cfg.StorePath = filepath.Join(dir, name+".db")
	cfg.ListenAddrs = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	n, err := peer.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return n, nil
}

// awaitVerdict waits until the service admits p or holds a rejection of it.
func awaitVerdict(ctx context.Context, service *peer.Node, p lpeer.ID) (peer.Admission, error) {
	for {
		adm := service.Admission(p)
		if adm.Admitted || adm.Reason == peer.NotAdmittedRejected {
			return adm, nil
		}
		select {
		case <-ctx.Done():
			return adm, fmt.Errorf("no verdict on %s: %w", p, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// echo writes back one line.
func echo(s network.Stream) {
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(io.LimitReader(s, 1024)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		_ = s.Reset()
		return
	}
	_, _ = s.Write([]byte(line))
}

// call sends one line on the echo protocol and returns the reply.
func call(ctx context.Context, from *peer.Node, to lpeer.ID, msg string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := from.Host().NewStream(ctx, to, EchoID)
	if err != nil {
		return "", err
	}
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := s.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	if err := s.CloseWrite(); err != nil {
		return "", err
	}
	reply, err := io.ReadAll(io.LimitReader(s, 1024))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(reply)), nil
}

// keywordScript answers with the longest word of the question: what a
// script without reading comprehension can do.
func keywordScript() skill.Prover {
	return skill.ProverFunc(func() skill.Answerer {
		return skill.AnswerFunc(func(_ context.Context, c skill.Challenge) (string, error) {
			best := ""
			for _, w := range strings.Fields(c.Question) {
				w = strings.Trim(w, "?,.;:\"'()")
				if len(w) > len(best) {
					best = w
				}
			}
			return best, nil
		})
	})
}

func short(p lpeer.ID) string {
	s := p.String()
	if len(s) > 12 {
		return s[:6] + "…" + s[len(s)-6:]
	}
	return s
}
