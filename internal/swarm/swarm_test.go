package swarm

import (
	"context"
	"errors"
	"math/bits"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// A node's protocol service warms a process-wide table in a
		// goroutine of this name, which may outlive a short run
		// (protocol/reflect_guard.go).
		goleak.IgnoreAnyFunction("github.com/acaptcha/acaptcha/protocol.warmRuneKeys"))
}

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
		{N: 10, Quorum: 2, NoGossip: true},
	} {
		if _, err := Run(context.Background(), c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", c, err)
		}
	}
}

// TestOpenFileCheck: a run that would run out of open files is refused
// before it starts, with the way out; QUIC needs no socket per connection.
func TestOpenFileCheck(t *testing.T) {
	old := fileLimit
	fileLimit = func() int { return 20000 }
	t.Cleanup(func() { fileLimit = old })
	_, err := Run(context.Background(), Config{N: 200})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "quic") {
		t.Fatalf("pairwise 200 on TCP under 20000 files: %v", err)
	}
	pairwise := Config{N: 200, Transport: TransportTCP}
	quic := Config{N: 200, Transport: TransportQUIC}
	quorum := Config{N: 200, Quorum: 3, Anchors: 3, Mesh: 3, LateLinks: 1, Transport: TransportTCP}
	if p, q, k := pairwise.filesNeeded(), quic.filesNeeded(), quorum.filesNeeded(); p < 200*199 || q >= 20000 || k >= 20000 {
		t.Fatalf("files needed: pairwise TCP %d, pairwise QUIC %d, quorum TCP %d", p, q, k)
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

func TestFloorSessions(t *testing.T) {
	for _, c := range []struct {
		n, k int
		want int64
	}{{200, 3, 1179}, {200, 2, 790}, {200, 0, 39800}, {3, 3, 6}} {
		if got := FloorSessions(c.n, c.k); got != c.want {
			t.Errorf("FloorSessions(%d, %d) = %d, want %d", c.n, c.k, got, c.want)
		}
	}
	for n := 2; n <= 200; n++ {
		for k := 0; k <= 5; k++ {
			if f, m := FloorSessions(n, k), MinSessions(n, k); f > m {
				t.Fatalf("n %d k %d: floor %d above the anchor design's %d", n, k, f, m)
			}
		}
	}
}

// TestFloorSessionsExhaustive checks the floor against every directed
// graph on 4 and 5 nodes: no graph in which every node admits every other
// (directly, or through k issuers it verified itself) has fewer edges.
func TestFloorSessionsExhaustive(t *testing.T) {
	for _, n := range []int{4, 5} {
		var edges [][2]int
		for x := range n {
			for y := range n {
				if x != y {
					edges = append(edges, [2]int{x, y})
				}
			}
		}
		least := map[int]int{}
		for k := 1; k <= 2; k++ {
			least[k] = len(edges)
		}
		for g := uint32(0); g < 1<<len(edges); g++ {
			var out [5]uint32 // out[x]: bit y set when x verified y
			for i, e := range edges {
				if g&(1<<i) != 0 {
					out[e[0]] |= 1 << e[1]
				}
			}
			size := bits.OnesCount32(g)
			for k := 1; k <= 2; k++ {
				if size >= least[k] || !covers(out[:n], k) {
					continue
				}
				least[k] = size
			}
		}
		for k := 1; k <= 2; k++ {
			if f := FloorSessions(n, k); int64(least[k]) < f {
				t.Errorf("n %d k %d: a graph with %d sessions covers, below the floor %d", n, k, least[k], f)
			} else {
				t.Logf("n %d k %d: least covering graph %d sessions, floor %d", n, k, least[k], f)
			}
		}
	}
}

// covers reports whether every node admits every other.
func covers(out []uint32, k int) bool {
	n := len(out)
	for x := range n {
		for y := range n {
			if x == y || out[x]&(1<<y) != 0 {
				continue
			}
			issuers := 0
			for z := range n {
				if z != y && out[x]&(1<<z) != 0 && out[z]&(1<<y) != 0 {
					issuers++
				}
			}
			if issuers < k {
				return false
			}
		}
	}
	return true
}
