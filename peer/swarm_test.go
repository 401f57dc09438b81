package peer_test

import (
	"context"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/swarm"
)

func runSwarm(t *testing.T, cfg swarm.Config) *swarm.Report {
	t.Helper()
	cfg.Timeout = 3 * time.Minute
	cfg.Dir = t.TempDir()
	rep, err := swarm.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("n=%d quorum=%d: converged %v in %s; %d sessions (pairwise %d); gossip %d published, %d delivered; %d unknown answers",
		rep.N, rep.Quorum, rep.Converged, rep.TimeToCoverage, rep.Sessions, rep.PairwiseSessions, rep.GossipPublished, rep.GossipDelivered, rep.UnknownAnswers)
	if !rep.Converged {
		t.Fatalf("no full admission coverage: %d/%d pairs; %v; %s", rep.AdmittedPairs, rep.Pairs, rep.Missing, rep.Error)
	}
	if rep.UnknownAnswers != 0 {
		t.Fatalf("%d challenges missing from the bench oracle", rep.UnknownAnswers)
	}
	return rep
}

func TestSwarmQuorumConvergesWithFewSessions(t *testing.T) {
	const n, k = 20, 3
	rep := runSwarm(t, swarm.Config{N: n, Quorum: k})
	if rep.ViaQuorum == 0 {
		t.Fatal("no admission through the quorum")
	}
	// The anchor design: 2k x n - k(k+1) sessions (108 for 20 nodes),
	// against n x (n-1) = 380 pairwise. A session that had to be retried
	// (busy prover) may add a few.
	if minimum := swarm.MinSessions(n, k); rep.Sessions < minimum || rep.Sessions > minimum+minimum/10 {
		t.Fatalf("%d sessions, want about %d", rep.Sessions, minimum)
	}
	if rep.Sessions*3 > rep.PairwiseSessions {
		t.Fatalf("%d sessions is not far fewer than pairwise %d", rep.Sessions, rep.PairwiseSessions)
	}
	if rep.LateSessions != 0 {
		t.Fatalf("first contact challenged %d peers already admitted through the quorum", rep.LateSessions)
	}
	if rep.GossipDelivered == 0 {
		t.Fatal("no gossip delivered")
	}
}

func TestSwarmPairwiseConverges(t *testing.T) {
	const n = 8
	rep := runSwarm(t, swarm.Config{N: n})
	if rep.Sessions != int64(n*(n-1)) || rep.ViaQuorum != 0 {
		t.Fatalf("%d sessions (want %d), %d admitted via quorum", rep.Sessions, n*(n-1), rep.ViaQuorum)
	}
}
