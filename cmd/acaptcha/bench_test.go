package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"
)

// benchReport holds the fields of `bench swarm --json` the tests check.
type benchReport struct {
	Converged   bool   `json:"converged"`
	Gossip      bool   `json:"gossip"`
	Transport   string `json:"transport"`
	Sessions    int64  `json:"sessions"`
	MinSessions int64  `json:"min_sessions"`
	Pairwise    int64  `json:"pairwise_sessions"`
	Published   int64  `json:"gossip_published"`
	Pairs       int64  `json:"pairs_verified"`
}

// runBenchSwarm runs `acaptcha bench swarm ARGS --json` in process and
// decodes its report; a non-zero exit fails the test.
func runBenchSwarm(t *testing.T, args ...string) benchReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	argv := append([]string{"bench", "swarm"}, args...)
	if code := Main(ctx, append(argv, "--json"), &out, &errb); code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	var rep benchReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	return rep
}

func TestBenchSwarmSmall(t *testing.T) {
	rep := runBenchSwarm(t, "-n", "8", "--trust-quorum", "2")
	if !rep.Converged || rep.Sessions < rep.MinSessions || rep.Sessions >= rep.Pairwise {
		t.Fatalf("%+v", rep)
	}
	// Every session verified one pair, and a pair holds at most one
	// session per direction.
	if rep.Pairs > rep.Sessions || 2*rep.Pairs < rep.Sessions {
		t.Fatalf("%d pairs verified for %d sessions", rep.Pairs, rep.Sessions)
	}
}

// TestBenchSwarmPairwiseNoGossip: pairwise admission needs no gossip; with
// it off every pair still verifies each other, once per direction, and
// nothing is published. It runs on QUIC.
func TestBenchSwarmPairwiseNoGossip(t *testing.T) {
	rep := runBenchSwarm(t, "-n", "6", "--trust-quorum", "0", "--gossip=false", "--transport", "quic")
	if !rep.Converged || rep.Gossip || rep.Transport != "quic" || rep.Sessions != 30 || rep.Published != 0 || rep.Pairs != 15 {
		t.Fatalf("%+v", rep)
	}
}

func TestBenchSwarmBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "swarm", "-n", "1"},
		{"bench", "swarm", "-n", "5000"},
		{"bench", "swarm", "--latency", "slow"},
		{"bench", "swarm", "-n", "3", "--trust-quorum", "3"},
		{"bench", "swarm", "--trust-quorum", "-1"},
		{"bench", "swarm", "-n", "10", "--trust-quorum", "2", "--gossip=false"},
		{"bench", "swarm", "--transport", "udp"},
		// Quietly defaulted or read as 0 before.
		{"bench", "swarm", "--latency", "realistic", "--latency-scale", "0"},
		{"bench", "swarm", "--latency-scale", "-2"},
		{"bench", "swarm", "--mesh", "-1"},
		{"bench", "swarm", "--late-links", "-3"},
		{"bench", "swarm", "--anchor-concurrency", "0"},
	} {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), args, &out, &errb); code != exitUsage {
			t.Errorf("%v: exit %d, want %d\n%s", args, code, exitUsage, errb.String())
		}
	}
}
