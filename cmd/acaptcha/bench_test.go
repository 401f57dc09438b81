package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"
)

func TestBenchSwarmSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code := Main(ctx, []string{"bench", "swarm", "-n", "8", "--trust-quorum", "2", "--json"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	var rep struct {
		Converged   bool  `json:"converged"`
		Sessions    int64 `json:"sessions"`
		MinSessions int64 `json:"min_sessions"`
		Pairwise    int64 `json:"pairwise_sessions"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !rep.Converged || rep.Sessions < rep.MinSessions || rep.Sessions >= rep.Pairwise {
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
	} {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), args, &out, &errb); code != exitUsage {
			t.Errorf("%v: exit %d, want %d\n%s", args, code, exitUsage, errb.String())
		}
	}
}
