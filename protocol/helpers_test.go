package protocol

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
	"go.uber.org/goleak"

	"github.com/acaptcha/acaptcha/skill"
)

func TestMain(m *testing.M) {
	// newReflectionGuard warms the word-key table in a goroutine that
	// ends when the table is made: made here first, so that a run of one
	// short test does not end (and find that goroutine) before it.
	runeKeys()
	goleak.VerifyTestMain(m)
}

// ---- challenge sets built in code ----

var fillerSubjects = []string{
	"The calibration routine", "A secondary telemetry channel", "The buffer controller", "Each replica group",
	"The ingestion pipeline", "An auxiliary sensor array", "The scheduling daemon", "The fallback compressor",
	"The audit subsystem", "A redundant power rail", "The thermal regulator", "The checksum verifier",
}

var fillerVerbs = []string{
	"reported", "logged", "stabilised", "reconciled", "flagged", "recalibrated", "sampled", "rebalanced",
	"archived", "throttled", "validated", "replayed",
}

var fillerObjects = []string{
	"nominal throughput across the observation window", "a transient drift that later self-corrected",
	"baseline readings within the documented tolerance", "routine maintenance counters without anomalies",
	"an expected seasonal variation in ambient load", "minor jitter attributed to scheduled backups",
	"consistent latency after the firmware rollout", "parity results matching the reference panel",
}

var fillerTails = []string{
	"according to the shift supervisor", "before the quarterly review", "during the overnight batch",
	"as noted in the appendix", "while the backup link was idle", "under standard operating conditions",
}

// filler returns about words words of bland technical prose, seeded.
func filler(r *rand.Rand, words int) string {
	var b strings.Builder
	n := 0
	for n < words {
		s := fmt.Sprintf("%s %s %s %s. ", fillerSubjects[r.IntN(len(fillerSubjects))], fillerVerbs[r.IntN(len(fillerVerbs))],
			fillerObjects[r.IntN(len(fillerObjects))], fillerTails[r.IntN(len(fillerTails))])
		n += len(strings.Fields(s))
		b.WriteString(s)
	}
	return strings.TrimSpace(b.String())
}

// testSet builds a three-part set of ~400-word narratives whose facts
// depend on seed; the part-2 question depends on part 1.
func testSet(seed string) *skill.Set {
	h := fnv.New64a()
	h.Write([]byte(seed))
	r := rand.New(rand.NewPCG(h.Sum64(), 7))
	code := func(prefix string) string { return fmt.Sprintf("%s-%04d", prefix, r.IntN(10000)) }
	loop, batch, valve, tier, lot := code("LOOP"), code("CD"), code("VX"), code("TIER"), code("LOT")
	p1 := filler(r, 180) + " Of the five coolant loops screened, only loop " + loop +
		" showed a deviation that persisted across three independent replicate runs; batch reference " + batch +
		" was used for its confirmatory run. An early automated note blamed a different loop, but that note was revised. " + filler(r, 180)
	p2 := filler(r, 180) + " The loop whose deviation persisted in the first report was isolated by valve " + valve +
		" after the morning inspection, while reagent lot " + lot + " was quarantined. " + filler(r, 180)
	p3 := filler(r, 180) + " Following the isolation, the incident was classified at alert level " + tier +
		" in the response framework. " + filler(r, 180)
	return &skill.Set{
		ID:     "test-" + seed,
		Domain: "industrial-monitoring-" + seed,
		Parts: []skill.Part{
			{Narrative: p1, Questions: []skill.Question{
				{Question: "[" + seed + "] Which loop showed a persistent deviation?", Answer: loop, ReasoningType: skill.Negation, AnswerType: skill.EntityAnswer},
				{Question: "[" + seed + "] Which batch reference was used for the confirmatory run?", Answer: batch, ReasoningType: skill.MultiHop, AnswerType: skill.EntityAnswer},
			}},
			{Narrative: p2, Questions: []skill.Question{
				{Question: "[" + seed + "] Which valve isolated the loop found in the first report?", Answer: valve, ReasoningType: skill.MultiHop, AnswerType: skill.EntityAnswer, DependsOn: []int{1}},
				{Question: "[" + seed + "] Which reagent lot was quarantined?", Answer: lot, ReasoningType: skill.Temporal, AnswerType: skill.EntityAnswer},
			}},
			{Narrative: p3, Questions: []skill.Question{
				{Question: "[" + seed + "] At which alert level was the incident classified?", Answer: tier, ReasoningType: skill.Causal, AnswerType: skill.LabelAnswer, DependsOn: []int{1, 2}},
			}},
		},
	}
}

// staticSource serves the same sets over and over (round robin).
type staticSource struct {
	mu   sync.Mutex
	sets []*skill.Set
	i    int
	err  error
}

func (s *staticSource) Next(ctx context.Context) (*skill.Set, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	set := s.sets[s.i%len(s.sets)]
	s.i++
	return set, nil
}

func (s *staticSource) Name() string { return "static" }

// returningSource is a staticSource that takes sets back
// (skill.Returner) and counts them.
type returningSource struct {
	*staticSource
	mu       sync.Mutex
	returned []string
}

func (s *returningSource) Return(set *skill.Set) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.returned = append(s.returned, set.ID)
	return nil
}

func (s *returningSource) returnedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.returned)
}

func sourceOf(seeds ...string) *staticSource {
	s := &staticSource{}
	for _, seed := range seeds {
		s.sets = append(s.sets, testSet(seed))
	}
	return s
}

// oracle knows every answer of sets.
func oracle(sets ...*skill.Set) map[string]string {
	m := map[string]string{}
	for _, set := range sets {
		for _, p := range set.Parts {
			for _, q := range p.Questions {
				m[q.Question] = q.Answer
			}
		}
	}
	return m
}

// oracleProver answers from the sets, after think (honouring ctx).
func oracleProver(think time.Duration, sets ...*skill.Set) skill.Prover {
	answers := oracle(sets...)
	return skill.ProverFunc(func() skill.Answerer {
		return skill.AnswerFunc(func(ctx context.Context, c skill.Challenge) (string, error) {
			if think > 0 {
				t := time.NewTimer(think)
				defer t.Stop()
				select {
				case <-t.C:
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}
			a, ok := answers[c.Question]
			if !ok {
				return "", errors.New("oracle: unknown question")
			}
			return a, nil
		})
	})
}

func constProver(answer string) skill.Prover {
	return skill.ProverFunc(func() skill.Answerer {
		return skill.AnswerFunc(func(context.Context, skill.Challenge) (string, error) { return answer, nil })
	})
}

// ---- hosts ----

func newHost(t testing.TB) host.Host {
	t.Helper()
	h, err := libp2p.New(
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Transport(quic.NewTransport),
		libp2p.DisableRelay(),
		libp2p.DisableMetrics(),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

var transports = []string{"tcp", "quic-v1"}

// connect connects a to b over the given transport only.
func connect(t testing.TB, a, b host.Host, transport string) {
	t.Helper()
	var addrs []ma.Multiaddr
	for _, addr := range b.Addrs() {
		if _, err := addr.ValueForProtocol(ma.P_IP4); err != nil {
			continue
		}
		isQUIC := strings.Contains(addr.String(), "/quic-v1")
		if (transport == "quic-v1") == isQUIC && (isQUIC || strings.Contains(addr.String(), "/tcp/")) {
			if !strings.Contains(addr.String(), "/webtransport") {
				addrs = append(addrs, addr)
			}
		}
	}
	if len(addrs) == 0 {
		t.Fatalf("host %s has no %s address in %v", b.ID(), transport, b.Addrs())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: addrs}); err != nil {
		t.Fatal(err)
	}
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func newService(t testing.TB, h host.Host, cfg Config) *Service {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	s, err := NewService(h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// proved collects OnProved results.
type proved struct {
	ch chan ProverResult
}

func newProved() *proved { return &proved{ch: make(chan ProverResult, 16)} }

func (p *proved) fn(r ProverResult) { p.ch <- r }

func (p *proved) next(t testing.TB) ProverResult {
	t.Helper()
	select {
	case r := <-p.ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no OnProved call")
		return ProverResult{}
	}
}

// fastPolicy is a policy with a small fixed tau for timing tests.
func fastPolicy(tau, total time.Duration) skill.Policy {
	p := skill.DefaultPolicy()
	p.Tau = tau
	p.Total = total
	return p
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// admitSession is admitSessionIn with the prefix the budgets know for p.
func (b *budgets) admitSession(p peer.ID, rounds int, now time.Time) (ok bool, why string) {
	pfx, hasPfx := b.prefix(p)
	return b.admitSessionIn(p, pfx, hasPfx, rounds, now)
}

// admitSessionIn admits a session that reads no prompt tokens: its token
// hold is released at once (tests of the session and call budgets, and of
// rounds charged to the budgets directly).
func (b *budgets) admitSessionIn(p peer.ID, pfx netip.Prefix, hasPfx bool, rounds int, now time.Time) (ok bool, why string) {
	h, _, why := b.admitSessionOwn(p, pfx, hasPfx, rounds, now)
	h.release(now)
	return why == "", why
}
