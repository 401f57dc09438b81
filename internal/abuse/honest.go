package abuse

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/acaptcha/acaptcha/internal/swarm"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

// honestTimeout bounds one honest session.
const honestTimeout = 15 * time.Second

// latencies collects honest session durations.
type latencies struct {
	mu       sync.Mutex
	d        []time.Duration
	failures int
	last     string
}

func (l *latencies) add(d time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failures++
		l.last = err.Error()
		return
	}
	l.d = append(l.d, d)
}

func (l *latencies) summary() Latency {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Latency{Count: len(l.d), Failures: l.failures, LastError: l.last}
	if len(l.d) == 0 {
		return s
	}
	d := slices.Clone(l.d)
	slices.Sort(d)
	s.P50 = quantile(d, 0.50)
	s.P99 = quantile(d, 0.99)
	s.Max = d[len(d)-1]
	return s
}

// quantile is the nearest-rank q-quantile of sorted d.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(float64(len(d))*q+0.999999) - 1
	return d[min(max(i, 0), len(d)-1)]
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// honestNode starts an honest peer: it answers from the answer key and,
// when verifier is set, verifies with procedural challenges registered in
// the key.
func (b *bench) honestNode(i int, verifier bool) (*peer.Node, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	cfg := peer.Config{
		Key: key, StorePath: filepath.Join(b.dir, fmt.Sprintf("honest-%v-%d.db", verifier, i)),
		ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Prover: b.oracle.Prover(swarm.LatencyInstant, 1),
		Logger: quiet, AttestPolicy: peer.AttestNone, RequireSource: skill.SourceProcedural,
	}
	if verifier {
		gen, err := procedural.New(procedural.Config{})
		if err != nil {
			return nil, fmt.Errorf("abuse bench: challenge generator: %w", err)
		}
		cfg.Source = b.oracle.Source(gen, nil)
	}
	n, err := peer.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("abuse bench: start honest peer: %w", err)
	}
	b.mu.Lock()
	b.honestIDs = append(b.honestIDs, n.ID())
	b.mu.Unlock()
	// An honest agent that finds the node's inbound slots full (the idle
	// connections of attack 3) retries a few times, as a dialler would.
	var cerr error
	for try := range connectTries {
		if try > 0 {
			b.connectRetries.Add(1)
			time.Sleep(connectRetryWait)
		}
		ctx, cancel := context.WithTimeout(context.Background(), frameWait)
		// A refused dial puts the node in the swarm's dial backoff; a
		// retry after a refusal must dial again.
		cerr = n.Host().Connect(network.WithForceDirectDial(ctx, "retry after refusal"), b.nodeInfo())
		cancel()
		if cerr == nil {
			return n, nil
		}
	}
	n.Close()
	return nil, fmt.Errorf("abuse bench: honest peer cannot connect to the node after %d tries: %w", connectTries, cerr)
}

// An honest peer tries connectTries times, connectRetryWait apart.
const (
	connectTries     = 10
	connectRetryWait = 300 * time.Millisecond
)

// honestLoop runs session every HonestEvery with a fresh honest identity
// every honestPerIdentity sessions, until ctx ends.
func (b *bench) honestLoop(ctx context.Context, l *latencies, verifier bool, session func(context.Context, *peer.Node) error) {
	var cur *peer.Node
	defer func() {
		if cur != nil {
			cur.Close()
		}
	}()
	for i := 0; ctx.Err() == nil && i < 1<<20; i++ {
		if cur == nil || i%honestPerIdentity == 0 {
			if cur != nil {
				cur.Close()
			}
			n, err := b.honestNode(i/honestPerIdentity, verifier)
			if err != nil {
				cur = nil
				l.add(0, err)
				sleepCtx(ctx, b.cfg.HonestEvery)
				continue
			}
			cur = n
		}
		sctx, cancel := context.WithTimeout(context.Background(), honestTimeout)
		t0 := time.Now()
		err := session(sctx, cur)
		cancel()
		l.add(time.Since(t0), err)
		sleepCtx(ctx, b.cfg.HonestEvery)
	}
}

// honestProver: the node verifies honest provers.
func (b *bench) honestProver(ctx context.Context, l *latencies) {
	b.honestLoop(ctx, l, false, func(sctx context.Context, hp *peer.Node) error {
		res, err := b.node.Verify(sctx, hp.ID())
		if err != nil {
			return fmt.Errorf("node verifies honest prover: %w", err)
		}
		if !res.Verdict.Accepted {
			return fmt.Errorf("node verifies honest prover: %s %s", res.Verdict.Reason, res.Verdict.Detail)
		}
		return nil
	})
}

// honestVerifier: honest verifiers verify the node.
func (b *bench) honestVerifier(ctx context.Context, l *latencies) {
	b.honestLoop(ctx, l, true, func(sctx context.Context, hv *peer.Node) error {
		res, err := hv.Verify(sctx, b.node.ID())
		if err != nil {
			return fmt.Errorf("honest verifier verifies the node: %w", err)
		}
		if !res.Verdict.Accepted {
			return fmt.Errorf("honest verifier verifies the node: %s %s", res.Verdict.Reason, res.Verdict.Detail)
		}
		return nil
	})
}

// sleepCtx sleeps d or until ctx ends; it reports whether ctx is live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
