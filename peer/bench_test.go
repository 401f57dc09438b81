package peer_test

import (
	"context"
	"crypto/rand"
	"log/slog"
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
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { n.Close() })
		return n
	}
	a, c := newNode("a"), newNode("c")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m, err := a.Attest(ctx, addrInfo(c))
		if err != nil {
			b.Fatal(err)
		}
		if !m.Ours.Verdict.Accepted || m.Theirs == nil || !m.Theirs.Accepted {
			b.Fatalf("attestation %d not mutual accept: %+v %+v %v", i, m.Ours.Verdict, m.Theirs, m.TheirsErr)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "attestations/s")
}
