package generate_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/generate"
	"github.com/acaptcha/acaptcha/skill/pool"
)

// Benchmarks and the figures of the closing note. Run with
//
//	go test -run '^$' -bench . -benchtime 20x ./skill/generate/
//	ACAPTCHA_FIGURES=1 go test -run TestFigures -v ./skill/generate/

func BenchmarkOfflineValidation(b *testing.B) {
	v, err := generate.NewValidator(generate.ValidatorConfig{})
	if err != nil {
		b.Fatal(err)
	}
	s := goodSet(b)
	b.ResetTimer()
	for range b.N {
		if rep := v.Offline(context.Background(), s); !rep.Accepted() {
			b.Fatal(rep.Reason)
		}
	}
}

// stubGenerator serves distinct good sets from an OpenAI stub, with an
// oracle as the cross-checking solver.
func stubGenerator(tb testing.TB, n int) *generate.Generator {
	tb.Helper()
	good := goodSet(tb)
	sets := []*skill.Set{good}
	var replies []testutil.BrainReply
	for i := range n {
		m := marked(tb, good, i)
		sets = append(sets, m)
		replies = append(replies, testutil.BrainReply{Text: reply(tb, m)})
	}
	m, _ := testutil.NewModelFor(tb, "openai", routing(testutil.Sequence(replies...), testutil.NewOracle(sets...)))
	pol := skill.DefaultPolicy()
	g, err := generate.New(generate.Config{Model: m, Domains: []string{"aviation_maintenance"}, Policy: &pol, Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// BenchmarkStubGeneration is one full attempt (generation call, decoding,
// validation, cross-check calls) against a loopback stub: the pipeline's
// own overhead, without model latency.
func BenchmarkStubGeneration(b *testing.B) {
	g := stubGenerator(b, b.N)
	b.ResetTimer()
	for range b.N {
		if _, err := g.Produce(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	in, out := g.Stats().PerAccepted()
	b.ReportMetric(in, "in-tokens/set")
	b.ReportMetric(out, "out-tokens/set")
}

// instant produces distinct sets at once.
type instant struct{ base *skill.Set }

func (p *instant) Produce(context.Context) (*skill.Set, error) {
	s := *p.base
	s.Parts = append([]skill.Part(nil), p.base.Parts...)
	s.Parts[2].Narrative += fmt.Sprintf("\n\nCopy %d.", time.Now().UnixNano())
	s.ID = s.ContentID()
	return &s, nil
}

// BenchmarkPoolRefill measures how fast workers refill an empty pool of 64
// sets from an instant producer (the pool's own overhead: encoding,
// storing, bookkeeping).
func BenchmarkPoolRefill(b *testing.B) {
	const size = 64
	for _, workers := range []int{1, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			base := goodSet(b)
			for range b.N {
				p, err := pool.New(pool.Config{Size: size, Workers: workers, Logger: quiet}, &instant{base: base})
				if err != nil {
					b.Fatal(err)
				}
				waitFull(b, p, size)
				p.Close()
			}
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "sets/s")
		})
	}
}

func waitFull(tb testing.TB, p *pool.Pool, n int) {
	tb.Helper()
	for {
		ch := p.Added()
		if p.Ready() >= n {
			return
		}
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			tb.Fatalf("pool holds %d of %d", p.Ready(), n)
		}
	}
}

// BenchmarkNextWarm is the time Source.Next takes when a set is ready.
func BenchmarkNextWarm(b *testing.B) {
	p, err := pool.New(pool.Config{Size: 16, Workers: 2, Logger: quiet}, &instant{base: goodSet(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		waitFull(b, p, 16)
		b.StartTimer()
		if _, err := p.Next(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNextEmpty is the time Source.Next takes when the pool has just
// been emptied: the session waits for a whole stub generation and
// validation.
func BenchmarkNextEmpty(b *testing.B) {
	g := stubGenerator(b, 2*b.N+2)
	p, err := pool.New(pool.Config{Size: 1, Workers: 1, Wait: time.Minute, Logger: quiet}, g)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		waitFull(b, p, 1)
		if _, err := p.Next(context.Background()); err != nil { // empties the pool
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := p.Next(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFigures prints the figures of the closing note: tokens per accepted
// set and rejection rates on the stub scenario mix over every wire
// format, and the pool latencies.
func TestFigures(t *testing.T) {
	if os.Getenv("ACAPTCHA_FIGURES") == "" {
		t.Skip("set ACAPTCHA_FIGURES=1")
	}
	const rounds = 3
	var total generate.Stats
	total.Rejected, total.Dropped = map[generate.Reason]int{}, map[string]int{}
	for _, w := range wires {
		good := goodSet(t)
		var replies []testutil.BrainReply
		oracleSets := []*skill.Set{good}
		for r := range rounds {
			g1, g2, g3 := marked(t, good, 3*r), marked(t, good, 3*r+1), marked(t, good, 3*r+2)
			oracleSets = append(oracleSets, g1, g2, g3)
			rep := func(s *skill.Set) testutil.BrainReply { return testutil.BrainReply{Text: reply(t, s)} }
			replies = append(replies,
				rep(g1),
				testutil.BrainReply{Text: `{"domain": "aviation_maintenance", "parts": [`},
				testutil.BrainReply{Text: cut(reply(t, g2)), FinishReason: testutil.FinishLength}, rep(g2),
				rep(leaky(t)), rep(cueAnswerable(t)), rep(disagreeing(t)),
				testutil.BrainReply{Text: reply(t, g1), Delay: 10 * time.Second},
				testutil.BrainReply{Status: http.StatusTooManyRequests}, rep(g3))
		}
		g, _ := newGenerator(t, w, testutil.Sequence(replies...), testutil.NewOracle(oracleSets...), func(c *generate.Config) {
			c.CallTimeout = shortCallTimeout
		})
		for range 8 * rounds {
			if _, err := g.Generate(context.Background(), ""); err != nil {
				t.Fatal(err)
			}
		}
		st := g.Stats()
		in, out := st.PerAccepted()
		t.Logf("%-12s attempts %d accepted %d; tokens per accepted set %.0f in / %.0f out (generation %d/%d, cross-check %d/%d; %d+%d calls)",
			w.name, st.Attempts, st.Accepted, in, out, st.Generation.InputTokens, st.Generation.OutputTokens,
			st.Check.InputTokens, st.Check.OutputTokens, st.GenerationCalls, st.CheckCalls)
		total.Attempts += st.Attempts
		total.Accepted += st.Accepted
		total.Generation = total.Generation.Add(st.Generation)
		total.Check = total.Check.Add(st.Check)
		for k, v := range st.Rejected {
			total.Rejected[k] += v
		}
		for k, v := range st.Dropped {
			total.Dropped[k] += v
		}
	}
	in, out := total.PerAccepted()
	t.Logf("all wires: %d attempts, %d accepted (%.0f%%); tokens per accepted set %.0f in / %.0f out",
		total.Attempts, total.Accepted, 100*float64(total.Accepted)/float64(total.Attempts), in, out)
	var reasons []string
	for r := range total.Rejected {
		reasons = append(reasons, string(r))
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		t.Logf("  rejected %-18s %5.1f%%", r, 100*total.RejectionRate(generate.Reason(r)))
	}
	var drops []string
	for k, v := range total.Dropped {
		drops = append(drops, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(drops)
	t.Logf("  questions dropped: %s", strings.Join(drops, ", "))
}
