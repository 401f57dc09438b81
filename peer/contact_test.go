package peer_test

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	lpswarm "github.com/libp2p/go-libp2p/p2p/net/swarm"

	"github.com/acaptcha/acaptcha/internal/swarm"
	"github.com/acaptcha/acaptcha/internal/testutil/testnode"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

// countingSource records when its verifier drew a set: one per session.
type countingSource struct {
	skill.Source
	mu sync.Mutex
	at []time.Time
}

func (c *countingSource) Next(ctx context.Context) (*skill.Set, error) {
	s, err := c.Source.Next(ctx)
	if err == nil {
		c.mu.Lock()
		c.at = append(c.at, time.Now())
		c.mu.Unlock()
	}
	return s, err
}

func (c *countingSource) times() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.at...)
}

func (c *countingSource) count() int { return len(c.times()) }

type fcOpts struct {
	policy   peer.AttestPolicy
	noProver bool
	wrong    bool // the prover answers every question wrong
	quorum   int
	retry    time.Duration
	reattest time.Duration
	ttl      time.Duration
	store    string
	key      crypto.PrivKey
	// tune adjusts the node's config (e.g. peer.WithContactTiming).
	tune func(peer.Config) peer.Config
}

type fcNode struct {
	*peer.Node
	src *countingSource
}

// startFC starts a loopback node whose prover answers from the shared
// bench oracle (instantly) and whose sessions are counted.
func startFC(t *testing.T, oracle *swarm.BenchOracle, o fcOpts) *fcNode {
	t.Helper()
	gen, err := procedural.New(procedural.Config{})
	if err != nil {
		t.Fatal(err)
	}
	src := &countingSource{Source: oracle.Source(gen, nil)}
	var prover skill.Prover
	switch {
	case o.wrong:
		prover = skill.ProverFunc(func() skill.Answerer {
			return skill.AnswerFunc(func(context.Context, skill.Challenge) (string, error) { return "no idea", nil })
		})
	case !o.noProver:
		prover = oracle.Prover(swarm.LatencyInstant, 1)
	}
	cfg := peer.Config{
		Key: o.key, StorePath: o.store,
		Source: src, Prover: prover,
		AttestPolicy: o.policy, TrustQuorum: o.quorum, RequireSource: peer.AnySource,
		RetryRejected: o.retry, ReattestBefore: o.reattest, AttestationTTL: o.ttl,
	}
	if o.tune != nil {
		cfg = o.tune(cfg)
	}
	return &fcNode{Node: testnode.New(t, testnode.Options{Config: cfg}), src: src}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func dial(t *testing.T, from, to *fcNode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := from.Host().Connect(ctx, lpeer.AddrInfo{ID: to.ID(), Addrs: to.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond every 20 ms for at most d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func admitsDirectly(a, b *fcNode) bool {
	adm := a.Admission(b.ID())
	return adm.Admitted && adm.Via == peer.AdmittedDirect
}

func TestFirstContactSimultaneousDialOneSessionPerDirection(t *testing.T) {
	oracle := swarm.NewBenchOracle()
	for round := range 3 {
		a := startFC(t, oracle, fcOpts{policy: peer.AttestAll})
		b := startFC(t, oracle, fcOpts{policy: peer.AttestAll})
		// Both dial at once. With port reuse, two TCP dials between the
		// same listen ports can meet in one "simultaneous open" connection
		// that fails the security handshake on both sides; like any
		// client, the nodes then dial again, at slightly different times.
		for attempt := 0; len(a.Host().Network().ConnsToPeer(b.ID())) == 0; attempt++ {
			if attempt == 5 {
				t.Fatal("the nodes never connected")
			}
			start := make(chan struct{})
			var wg sync.WaitGroup
			for k, pr := range [][2]*fcNode{{a, b}, {b, a}} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					if attempt > 0 {
						// The failed dial put the peer on dial back-off.
						if sw, ok := pr[0].Host().Network().(*lpswarm.Swarm); ok {
							sw.Backoff().Clear(pr[1].ID())
						}
						time.Sleep(time.Duration(k*attempt) * 20 * time.Millisecond)
					}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					// Either dial may fail or lose the race to the other.
					_ = pr[0].Host().Connect(ctx, lpeer.AddrInfo{ID: pr[1].ID(), Addrs: pr[1].Host().Addrs()})
				}()
			}
			close(start)
			wg.Wait()
		}
		waitFor(t, 20*time.Second, "mutual admission", func() bool { return admitsDirectly(a, b) && admitsDirectly(b, a) })
		// Give a duplicate session the time to show up.
		time.Sleep(time.Second)
		if na, nb := a.src.count(), b.src.count(); na != 1 || nb != 1 {
			t.Fatalf("round %d: %d connection(s); sessions A->B %d, B->A %d; want one per direction",
				round, len(a.Host().Network().ConnsToPeer(b.ID())), na, nb)
		}
		for _, n := range []*fcNode{a, b} {
			es, err := n.Store().List(peer.Issued, "")
			if err != nil || len(es) != 1 || !es[0].Attestation.Accepted {
				t.Fatalf("round %d: issued attestations %d, %v", round, len(es), err)
			}
		}
	}
}

func TestFirstContactRespectsAttestPolicy(t *testing.T) {
	oracle := swarm.NewBenchOracle()
	for _, tc := range []struct {
		policy        peer.AttestPolicy
		inbound, outb bool
	}{
		{peer.AttestAll, true, true},
		{peer.AttestInbound, true, false},
		{peer.AttestOutbound, false, true},
		{peer.AttestNone, false, false},
		{"", false, false}, // the library default
	} {
		t.Run(string(tc.policy)+"_", func(t *testing.T) {
			v := startFC(t, oracle, fcOpts{policy: tc.policy})
			in := startFC(t, oracle, fcOpts{policy: peer.AttestNone})
			out := startFC(t, oracle, fcOpts{policy: peer.AttestNone})
			dial(t, in, v)
			dial(t, v, out)
			want := 0
			for _, c := range []struct {
				p    *fcNode
				want bool
			}{{in, tc.inbound}, {out, tc.outb}} {
				if c.want {
					want++
					waitFor(t, 20*time.Second, "admission", func() bool { return admitsDirectly(v, c.p) })
				}
			}
			time.Sleep(700 * time.Millisecond)
			if got := v.src.count(); got != want {
				t.Fatalf("policy %q ran %d sessions, want %d", tc.policy, got, want)
			}
			if v.Admission(in.ID()).Admitted != tc.inbound || v.Admission(out.ID()).Admitted != tc.outb {
				t.Fatalf("policy %q: admits inbound %v, outbound %v", tc.policy, v.Admission(in.ID()).Admitted, v.Admission(out.ID()).Admitted)
			}
			if in.src.count()+out.src.count() != 0 {
				t.Fatal("a node with policy none attested a peer")
			}
		})
	}
}

func TestFirstContactBacksOffRejectedPeers(t *testing.T) {
	fast := func(c peer.Config) peer.Config { return peer.WithContactTiming(c, 50*time.Millisecond, 2*time.Second) }
	oracle := swarm.NewBenchOracle()
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	store := filepath.Join(t.TempDir(), "v.db")
	const retry = 300 * time.Millisecond
	v := startFC(t, oracle, fcOpts{tune: fast, policy: peer.AttestAll, retry: retry, key: key, store: store})
	// A peer whose prover answers wrong: a rejection every session.
	q := startFC(t, oracle, fcOpts{tune: fast, policy: peer.AttestNone, wrong: true})
	dial(t, v, q)
	time.Sleep(2500 * time.Millisecond)
	at := v.src.times()
	// Back-off 300 ms, 600 ms, 1.2 s: sessions at about 0, 0.3, 0.9 and
	// 2.1 s. Without back-off the rescans (every 50 ms) would run dozens.
	if len(at) < 2 || len(at) > 4 {
		t.Fatalf("%d sessions in 2.5 s against a rejected peer, want 3 or 4 (2 on a slow machine)", len(at))
	}
	for i := 1; i < len(at); i++ {
		if gap, min := at[i].Sub(at[i-1]), retry<<(i-1); gap < min {
			t.Fatalf("retry %d after %s, want at least %s", i, gap, min)
		}
	}
	if v.Admission(q.ID()).Admitted {
		t.Fatal("rejected peer admitted")
	}

	// The back-off survives a restart: the store holds the rejection.
	v.Close()
	v2 := startFC(t, oracle, fcOpts{tune: fast, policy: peer.AttestAll, retry: time.Hour, key: key, store: store})
	dial(t, v2, q)
	time.Sleep(time.Second)
	if n := v2.src.count(); n != 0 {
		t.Fatalf("restarted node challenged a recently rejected peer %d time(s)", n)
	}
}

func TestFirstContactReattestsBeforeExpiry(t *testing.T) {
	fast := func(c peer.Config) peer.Config { return peer.WithContactTiming(c, 100*time.Millisecond, 2*time.Second) }
	oracle := swarm.NewBenchOracle()
	// TTL 4 s, re-attest 3 s before expiry, capped at half the lifetime:
	// the second session comes about 2 s after the first.
	v := startFC(t, oracle, fcOpts{tune: fast, policy: peer.AttestAll, ttl: 4 * time.Second, reattest: 3 * time.Second})
	p := startFC(t, oracle, fcOpts{tune: fast, policy: peer.AttestNone})
	dial(t, v, p)
	waitFor(t, 10*time.Second, "first attestation", func() bool { return v.src.count() >= 1 })
	waitFor(t, 10*time.Second, "re-attestation", func() bool { return v.src.count() >= 2 })
	at := v.src.times()
	if gap := at[1].Sub(at[0]); gap < time.Second {
		t.Fatalf("re-attested after %s", gap)
	}
	if !admitsDirectly(v, p) {
		t.Fatal("peer not admitted after re-attestation")
	}
}

func TestFirstContactBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  peer.Config
	}{
		{"policy", peer.Config{AttestPolicy: "sometimes"}},
		{"bootstrap garbage", peer.Config{Bootstrap: []string{"not a multiaddr"}}},
		{"bootstrap without peer id", peer.Config{Bootstrap: []string{"/ip4/127.0.0.1/tcp/4001"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Key, _, _ = crypto.GenerateEd25519Key(rand.Reader)
			cfg.StorePath = filepath.Join(t.TempDir(), "s.db")
			cfg.ListenAddrs = []string{"/ip4/127.0.0.1/tcp/0"}
			n, err := peer.New(cfg)
			if err == nil {
				n.Close()
				t.Fatal("New accepted a bad configuration")
			}
		})
	}
	for _, s := range []string{"all", "inbound", "outbound", "none", ""} {
		if _, err := peer.ParseAttestPolicy(s); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
	}
}
