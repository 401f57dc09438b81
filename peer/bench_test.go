package peer_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/acaptcha/acaptcha/internal/swarm"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

// BenchmarkMutualAttest measures complete mutual attestations between two
// nodes on loopback TCP: both directions of three chained rounds, RTT
// probes, signing, verifying and storing both records. Provers answer
// instantly from the bench-only answer key, so the figure is the
// runtime's own cost per attestation.
func BenchmarkMutualAttest(b *testing.B) {
	oracle := swarm.NewBenchOracle()
	newNode := func(name string) *peer.Node {
		k, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		g, err := procedural.New(procedural.Config{})
		if err != nil {
			b.Fatal(err)
		}
		n, err := peer.New(peer.Config{
			Key: k, StorePath: filepath.Join(b.TempDir(), name+".db"),
			ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
			Policy:      skill.DefaultPolicy(),
			Source:      oracle.Source(g, nil),
			Prover:      oracle.Prover(swarm.LatencyInstant, 1),
			Logger:      slog.New(slog.DiscardHandler),
			// Attest drives every session; first contact would verify
			// each new pair a second time in the background.
			AttestPolicy: peer.AttestNone,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { n.Close() })
		return n
	}
	// Every iteration attests a pair of nodes that never met: a node
	// neither re-verifies a peer whose verdict it holds nor lets one peer
	// draw more than its share of sets per hour, so repeating one pair
	// would measure cached verdicts and quotas, not attestations. Nodes
	// are made with the timer stopped; pair k is (x, y) with x < y in
	// triangular order, so n nodes serve n(n-1)/2 iterations.
	var nodes []*peer.Node
	ensure := func(n int) {
		if len(nodes) >= n {
			return
		}
		b.StopTimer()
		for len(nodes) < n {
			nodes = append(nodes, newNode(fmt.Sprintf("n%d", len(nodes))))
		}
		b.StartTimer()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ensure(2)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		y := int((1 + math.Sqrt(1+8*float64(i))) / 2)
		for y*(y-1)/2 > i {
			y--
		}
		for (y+1)*y/2 <= i {
			y++
		}
		x := i - y*(y-1)/2
		ensure(y + 1)
		m, err := nodes[x].Attest(ctx, addrInfo(nodes[y]))
		if err != nil {
			b.Fatal(err)
		}
		if !m.Ours.Verdict.Accepted || m.Theirs == nil || !m.Theirs.Accepted {
			b.Fatalf("attestation %d not mutual accept: %+v %+v %v", i, m.Ours.Verdict, m.Theirs, m.TheirsErr)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "attestations/s")
}
