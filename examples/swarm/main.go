// Command swarm starts five acaptcha nodes in this process that discover
// and admit each other by themselves:
//
//   - node 1 is the bootstrap peer; nodes 2 to 5 know only its address and
//     find the others through the private acaptcha DHT (its lookups and
//     its rendezvous); nodes 1 to 3 start together, nodes 4 and 5 join
//     one after the other;
//   - first contact attests every peer a node meets, and the attestations
//     are shared on GossipSub; with a trust quorum of 2, a node admits a
//     peer that two peers it verified itself vouch for, without a session
//     of its own;
//   - the agents answer from a labelled demo oracle that stands in for an
//     LLM.
//
// It prints who admits whom, and how. Run it with: go run ./examples/swarm
package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/acaptcha/acaptcha/examples/internal/demokey"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

const (
	nodes  = 5
	quorum = 2
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "acaptcha-swarm-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	oracle := demokey.New()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	var swarm []*peer.Node
	defer func() {
		for _, n := range swarm {
			n.Close()
		}
	}()
	start := time.Now()
	// Nodes 1 to 3 start together; nodes 4 and 5 join one after the other
	// once the swarm has settled, so that the earlier nodes can vouch for
	// the newcomers.
	for i := range nodes {
		if i >= 3 {
			if err := settle(ctx, swarm); err != nil {
				return err
			}
		}
		gen, err := procedural.New(procedural.Config{})
		if err != nil {
			return fmt.Errorf("challenge generator: %w", err)
		}
		key, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			return fmt.Errorf("key: %w", err)
		}
		cfg := peer.Config{
			Key:          key,
			StorePath:    filepath.Join(dir, fmt.Sprintf("node%d.db", i+1)),
			ListenAddrs:  []string{"/ip4/127.0.0.1/tcp/0"},
			Source:       oracle.Source(gen),
			Prover:       oracle.Prover(),
			AttestPolicy: peer.AttestAll,
			TrustQuorum:  quorum,
			// Procedural challenges, for an offline example: say so (the
			// node warns at start) and admit and vouch on them
			// explicitly (the default requires hybrid).
			SourceKind:    skill.SourceProcedural,
			RequireSource: skill.SourceProcedural,
			Gossip:        true,
			DHT:           true,
			Logger:        logger.With("node", i+1),
		}
		if i > 0 {
			cfg.Bootstrap = []string{swarm[0].Addrs()[0].String()}
		}
		n, err := peer.New(cfg)
		if err != nil {
			return fmt.Errorf("start node %d: %w", i+1, err)
		}
		swarm = append(swarm, n)
		fmt.Printf("[%5.1fs] node %d %s started", time.Since(start).Seconds(), i+1, n.ID())
		if i > 0 {
			fmt.Printf(", bootstrapping from node 1")
		}
		fmt.Println()
	}
	if err := settle(ctx, swarm); err != nil {
		return err
	}
	fmt.Printf("[%5.1fs] every node admits every other node\n\n", time.Since(start).Seconds())
	report(swarm)
	return nil
}

// settle waits until every node admits every other node.
func settle(ctx context.Context, swarm []*peer.Node) error {
	for !allAdmitted(swarm) {
		select {
		case <-ctx.Done():
			report(swarm)
			return fmt.Errorf("the swarm did not admit everybody in time: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

func allAdmitted(swarm []*peer.Node) bool {
	for _, a := range swarm {
		for _, b := range swarm {
			if a != b && !a.Admission(b.ID()).Admitted {
				return false
			}
		}
	}
	return true
}

func report(swarm []*peer.Node) {
	index := map[string]int{}
	for i, n := range swarm {
		index[n.ID().String()] = i + 1
	}
	sessions := uint64(0)
	for i, a := range swarm {
		var parts []string
		for j, b := range swarm {
			if i == j {
				continue
			}
			adm := a.Admission(b.ID())
			switch {
			case adm.Admitted && adm.Via == peer.AdmittedQuorum:
				var vouch []string
				for _, is := range adm.Issuers {
					vouch = append(vouch, fmt.Sprint(index[is.String()]))
				}
				parts = append(parts, fmt.Sprintf("%d (quorum of %s)", j+1, strings.Join(vouch, "+")))
			case adm.Admitted:
				parts = append(parts, fmt.Sprintf("%d (verified)", j+1))
			default:
				parts = append(parts, fmt.Sprintf("%d (NOT: %s)", j+1, adm.Reason))
			}
		}
		st := a.Stats()
		sessions += st.SessionsVerified
		fmt.Printf("node %d admits %s; %d peer(s) connected\n", i+1, strings.Join(parts, ", "), len(a.Host().Network().Peers()))
	}
	fmt.Printf("\n%d challenge sessions in all (verifying every pair directly takes %d)\n", sessions, len(swarm)*(len(swarm)-1))
}
