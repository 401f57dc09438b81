package swarm

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMinSessions(t *testing.T) {
	for _, c := range []struct {
		n, k int
		want int64
	}{{200, 3, 1188}, {200, 2, 794}, {20, 3, 108}, {8, 0, 56}, {3, 3, 6}} {
		if got := MinSessions(c.n, c.k); got != c.want {
			t.Errorf("MinSessions(%d, %d) = %d, want %d", c.n, c.k, got, c.want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{
		{N: 1},
		{N: MaxNodes + 1},
		{N: 10, Quorum: -1},
		{N: 10, Quorum: 3, Anchors: 2},
		{N: 4, Quorum: 3},
		{N: 10, Anchors: -1},
		{N: 10, Latency: "slow"},
	} {
		if _, err := Run(context.Background(), c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", c, err)
		}
	}
}

func TestMeshLinks(t *testing.T) {
	in, out := indices(0, 7), indices(7, 20)
	links := meshLinks(in, out, 3)
	deg := map[int]int{}
	seen := map[[2]int]bool{}
	for _, l := range links {
		if l[0] >= 7 || l[1] < 7 {
			t.Fatalf("link %v does not go from an inbound to an outbound member", l)
		}
		if seen[l] {
			t.Fatalf("duplicate link %v", l)
		}
		seen[l] = true
		deg[l[0]]++
		deg[l[1]]++
	}
	for i := range 20 {
		if deg[i] < 3 {
			t.Fatalf("member %d has %d mesh links", i, deg[i])
		}
	}
	if meshLinks(in, nil, 3) != nil || meshLinks(in, out, 0) != nil {
		t.Fatal("links without a mesh")
	}
}

func TestGate(t *testing.T) {
	g := NewGate()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := g.Wait(ctx); err != nil {
		t.Fatal("a new gate is not open")
	}
	g.Shut()
	g.Shut()
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := g.Wait(short); err == nil {
		t.Fatal("a shut gate let a challenge through")
	}
	done := make(chan error, 1)
	go func() { done <- g.Wait(ctx) }()
	g.Open()
	g.Open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestOracleAnswersServedSets(t *testing.T) {
	o := NewBenchOracle()
	gen, err := procedural.New(procedural.Config{})
	if err != nil {
		t.Fatal(err)
	}
	src := o.Source(gen, nil)
	ctx := context.Background()
	set, err := src.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o.Served() != 1 {
		t.Fatalf("served %d", o.Served())
	}
	a := o.Prover(LatencyInstant, 1).NewSession()
	for _, p := range set.Parts {
		for _, q := range p.Questions {
			got, err := a.Answer(ctx, skill.Challenge{Narrative: p.Narrative, Question: q.Question})
			if err != nil || !skill.MatchAny(got, q.Variants()) {
				t.Fatalf("answered %q (%v), want %q", got, err, q.Answer)
			}
		}
	}
	if got, _ := a.Answer(ctx, skill.Challenge{Narrative: "n", Question: "q"}); got != "unknown" || o.Unknown() != 1 {
		t.Fatalf("unknown challenge answered %q", got)
	}
	// Realistic delays honour cancellation.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := o.Prover(LatencyRealistic, 100).NewSession().Answer(cctx, skill.Challenge{}); err == nil {
		t.Fatal("a cancelled realistic answer returned")
	}
}
