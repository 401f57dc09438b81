package peer_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil/testnode"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/peer/store"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// gatedProver answers every challenge of sets correctly, the first one
// only once release is closed; started is closed when the first
// challenge arrives.
type gatedProver struct {
	answers map[[2]string]string // narrative, question -> answer
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGatedProver(sets []*skill.Set) *gatedProver {
	g := &gatedProver{answers: map[[2]string]string{}, started: make(chan struct{}), release: make(chan struct{})}
	for _, s := range sets {
		for _, p := range s.Parts {
			for _, q := range p.Questions {
				g.answers[[2]string{p.Narrative, q.Question}] = q.Answer
			}
		}
	}
	return g
}

func (g *gatedProver) NewSession() skill.Answerer {
	return skill.AnswerFunc(func(ctx context.Context, c skill.Challenge) (string, error) {
		g.once.Do(func() { close(g.started) })
		select {
		case <-g.release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		if a, ok := g.answers[[2]string{c.Narrative, c.Question}]; ok {
			return a, nil
		}
		return "unknown", nil
	})
}

// waitClosed waits for ch for up to d.
func waitClosed(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not within %s", what, d)
	}
}

// waitDraining waits (up to 10 s) until n refuses new sessions.
func waitDraining(t *testing.T, ctx context.Context, n *peer.Node, other *peer.Node) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := n.Verify(ctx, other.ID())
		if errors.Is(err, peer.ErrShuttingDown) {
			if !errors.Is(err, protocol.ErrClosed) {
				t.Fatalf("ErrShuttingDown does not wrap protocol.ErrClosed: %v", err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node does not drain: Verify says %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type verifyResult struct {
	res *protocol.Result
	err error
}

// A prover node stopped with Shutdown in the middle of a session answers
// it to its end: the verifier signs its normal verdict (an acceptance, not
// the protocol_error a cut stream gets) and the prover stores it. While it
// drains, a new session from another verifier is refused busy, with
// nothing signed, and the node starts none of its own.
func TestShutdownDrainsRunningSession(t *testing.T) {
	for _, tc := range []struct{ name, addr string }{
		{"tcp", "/ip4/127.0.0.1/tcp/0"},
		{"quic", "/ip4/127.0.0.1/udp/0/quic-v1"},
	} {
		t.Run(tc.name, func(t *testing.T) { testShutdownDrains(t, []string{tc.addr}) })
	}
}

func testShutdownDrains(t *testing.T, listen []string) {
	sets := dependentSets(t)
	prover := newGatedProver(sets)
	storePath := filepath.Join(t.TempDir(), "prover.db")
	b := testnode.New(t, testnode.Options{Config: peer.Config{Prover: prover, StorePath: storePath, ListenAddrs: listen}})
	v := testnode.New(t, testnode.Options{Sets: sets, Config: peer.Config{ListenAddrs: listen}})
	late := testnode.New(t, testnode.Options{Sets: sets, Config: peer.Config{ListenAddrs: listen}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, n := range []*peer.Node{v, late} {
		if err := n.Host().Connect(ctx, addrInfo(b)); err != nil {
			t.Fatal(err)
		}
	}

	verified := make(chan verifyResult, 1)
	go func() {
		res, err := v.Verify(ctx, b.ID())
		verified <- verifyResult{res, err}
	}()
	waitClosed(t, prover.started, 30*time.Second, "round 1 reaching the prover")

	shut := make(chan error, 1)
	go func() {
		sctx, scancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer scancel()
		shut <- b.Shutdown(sctx)
	}()
	waitDraining(t, ctx, b, v)

	// A new session while b drains: busy, nothing signed.
	if _, err := late.Verify(ctx, b.ID()); !errors.Is(err, protocol.ErrBusy) {
		t.Fatalf("a session started during the drain: %v, want ErrBusy", err)
	}
	if es, err := late.Store().List(peer.Issued, b.ID()); err != nil || len(es) != 0 {
		t.Fatalf("the refused verifier stored %d records about the draining node (%v)", len(es), err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned with a session running: %v", err)
	case r := <-verified:
		t.Fatalf("the session ended before its answers: %+v %v", r.res, r.err)
	default:
	}

	close(prover.release)
	var r verifyResult
	select {
	case r = <-verified:
	case <-time.After(90 * time.Second):
		t.Fatal("the session did not end")
	}
	if r.err != nil {
		t.Fatalf("Verify: %v", r.err)
	}
	if v := r.res.Verdict; !v.Accepted || v.Reason != skill.ReasonOK || r.res.Attestation == nil {
		t.Fatalf("verdict on the draining node: accepted %v, reason %s (%s); want a signed acceptance", v.Accepted, v.Reason, v.Detail)
	}
	select {
	case err := <-shut:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Shutdown did not return after the session ended")
	}
	if _, err := b.Verify(ctx, v.ID()); !errors.Is(err, peer.ErrShuttingDown) {
		t.Fatalf("Verify after Shutdown: %v", err)
	}
	// The prover stored the verdict before it closed.
	st, err := store.OpenWith(storePath, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if es, err := st.List(peer.Received, v.ID()); err != nil || len(es) != 1 || !es[0].Attestation.Accepted {
		t.Fatalf("the drained prover stored %d records from the verifier (%v), want its acceptance", len(es), err)
	}
}

// Shutdown waits no longer than its context: a session still running
// then is cut, and Shutdown says so. Close during a Shutdown stops the
// node at once, and Shutdown returns too.
func TestShutdownBoundedByContext(t *testing.T) {
	sets := dependentSets(t)
	for _, viaClose := range []bool{false, true} {
		prover := newGatedProver(sets) // never released
		b := testnode.New(t, testnode.Options{Config: peer.Config{Prover: prover}})
		v := testnode.New(t, testnode.Options{Sets: sets})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := v.Host().Connect(ctx, addrInfo(b)); err != nil {
			t.Fatal(err)
		}
		verified := make(chan verifyResult, 1)
		go func() {
			res, err := v.Verify(ctx, b.ID())
			verified <- verifyResult{res, err}
		}()
		waitClosed(t, prover.started, 30*time.Second, "round 1 reaching the prover")
		wait := 300 * time.Millisecond
		if viaClose {
			wait = time.Minute
		}
		sctx, scancel := context.WithTimeout(context.Background(), wait)
		start := time.Now()
		shut := make(chan error, 1)
		go func() { shut <- b.Shutdown(sctx) }()
		if viaClose {
			waitDraining(t, ctx, b, v)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		select {
		case err = <-shut:
		case <-time.After(30 * time.Second):
			t.Fatalf("Shutdown (close %v) did not return", viaClose)
		}
		switch {
		case viaClose && err != nil:
			t.Fatalf("Shutdown ended by Close: %v", err)
		case !viaClose && !errors.Is(err, context.DeadlineExceeded):
			t.Fatalf("Shutdown past its deadline: %v, want context.DeadlineExceeded", err)
		case time.Since(start) > 20*time.Second:
			t.Fatalf("Shutdown took %s", time.Since(start))
		}
		select {
		case <-verified:
		case <-time.After(60 * time.Second):
			t.Fatal("the cut session did not end")
		}
		scancel()
		cancel()
	}
}
