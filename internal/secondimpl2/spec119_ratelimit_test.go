package secondimpl2

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/llm"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/skill"
	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// limitedOnce is an answerer whose provider refuses the first call with
// a rate limit that names no wait, then answers.
type limitedOnce struct{ calls *atomic.Int32 }

func (p limitedOnce) NewSession() skill.Answerer { return p }
func (p limitedOnce) Answer(ctx context.Context, c skill.Challenge) (string, error) {
	if p.calls.Add(1) == 1 {
		return "", llm.ErrRateLimited
	}
	return ourProver{}.Answer(ctx, c)
}

// protocol.md §6 step 3 (1.13.3, 1.13.5): a node whose provider refused a
// call with a rate limit that names no wait MUST take its answerer as not
// answering for a default wait of at least 10 s (the Go node 10 s), and
// SHOULD meanwhile decline hellos BUSY with the detail `answerer
// unavailable` (without the local cause), before any budget is charged.
// My verifier's session whose round 1 meets the limit is declined
// PROVER_ERROR (signed declined); hellos in the next 10 s get that BUSY,
// nothing signed; after the wait the node answers again.
func TestSpec119RateLimitHoldsHellos(t *testing.T) {
	t.Parallel()
	key, _, err := lcrypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	// the answerer as `acaptcha node` runs it (cmd/acaptcha: a
	// skill.GuardedProver around the LLM prover; a provider's reply,
	// a rate limit included, is no sign that the LLM is down)
	guard := skill.NewGuardedProver(limitedOnce{&calls}, nil, func(err error) bool { return errors.Is(err, llm.ErrRateLimited) })
	t.Cleanup(guard.Close)
	n, err := peer.New(peer.Config{Key: key, StorePath: t.TempDir() + "/store.db", ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		Source: ourCorpus(t), Prover: guard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	hm, km := newHost(t, "/ip4/127.0.0.1/tcp/0")
	mine := newNode(hm, km)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := hm.Connect(ctx, lpeer.AddrInfo{ID: n.ID(), Addrs: n.Addrs()}); err != nil {
		t.Fatal(err)
	}
	first := mine.verify(ctx, n.ID(), defaultVerifierOpts())
	limited := time.Now()
	if first.noSession != nil || first.reason != "declined" {
		t.Fatalf("the session that met the limit: %v %s", first.noSession, first.reason)
	}
	for _, at := range []time.Duration{500 * time.Millisecond, 9 * time.Second} {
		time.Sleep(time.Until(limited.Add(at)))
		s := rawHello(t, ctx, mine, n.ID(), nil)
		d, _ := s.expectDecline(drBusy, handshakeTimeout)
		if d.Detail != "answerer unavailable" {
			t.Errorf("%v after the limit: BUSY detail %q, want %q", at, d.Detail, "answerer unavailable")
		}
		if code, ok, _ := s.endCode(3 * time.Second); !ok || code != codeBusy {
			t.Errorf("%v after the limit: ended %#x (%v), want a reset ErrCodeBusy", at, code, ok)
		}
	}
	time.Sleep(time.Until(limited.Add(10*time.Second + 500*time.Millisecond)))
	var vr *verifierResult
	for i := 0; i < 20; i++ {
		if vr = mine.verify(ctx, n.ID(), defaultVerifierOpts()); vr.noSession == nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if vr.noSession != nil || !vr.accepted {
		t.Fatalf("after the wait: %v %s", vr.noSession, vr.reason)
	}
	if d := time.Since(limited); d > 16*time.Second {
		t.Errorf("answered %v after the limit, want about 10 s", d)
	}
}

// The same rule for a node built by a library user who hands peer.New
// the LLM prover itself, without acaptcha node's guard: the hello after a
// rate limit is declined BUSY all the same (helper-119 found such a node
// accepting it, its session ending in another signed `declined`).
func TestSpec119RateLimitHoldsHellosRawProver(t *testing.T) {
	t.Parallel()
	key, _, err := lcrypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	n, err := peer.New(peer.Config{Key: key, StorePath: t.TempDir() + "/store.db", ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		Source: ourCorpus(t), Prover: limitedOnce{&calls}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	hm, km := newHost(t, "/ip4/127.0.0.1/tcp/0")
	mine := newNode(hm, km)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := hm.Connect(ctx, lpeer.AddrInfo{ID: n.ID(), Addrs: n.Addrs()}); err != nil {
		t.Fatal(err)
	}
	if first := mine.verify(ctx, n.ID(), defaultVerifierOpts()); first.noSession != nil || first.reason != "declined" {
		t.Fatalf("the session that met the limit: %v %s", first.noSession, first.reason)
	}
	s := rawHello(t, ctx, mine, n.ID(), nil)
	d, _ := s.expectDecline(drBusy, handshakeTimeout)
	if d.Detail != "answerer unavailable" {
		t.Errorf("after the limit: BUSY detail %q, want %q", d.Detail, "answerer unavailable")
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("the answerer was called %d times, want once (the hello after the limit runs no session)", got)
	}
}
