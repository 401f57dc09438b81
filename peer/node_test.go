package peer_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"go.uber.org/goleak"

	"github.com/acaptcha/acaptcha/internal/testutil"

	"github.com/acaptcha/acaptcha/internal/testutil/testnode"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/spec"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// libp2p and quic-go keep process-wide background workers.
		goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"),
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("github.com/libp2p/go-libp2p/p2p/transport/quicreuse.(*reuse).gc"),
		goleak.IgnoreAnyFunction("github.com/jackpal/go-nat-pmp.(*Client).GetExternalAddress"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("internal/poll.runtime_pollWait"),
		// A node's protocol service makes the reflection guard's table
		// of word keys in the background; a run of one short test ends
		// before it.
		goleak.IgnoreAnyFunction("github.com/acaptcha/acaptcha/protocol.warmRuneKeys"),
	)
}

// dependentSets returns the example sets with part 2 narrowed to the
// questions that need part 1's answer, so that every session's second
// round tests memory.
func dependentSets(t *testing.T) []*skill.Set {
	t.Helper()
	sets, err := spec.Examples()
	if err != nil {
		t.Fatal(err)
	}
	var out []*skill.Set
	for _, s := range sets {
		c := *s
		c.Parts = append([]skill.Part(nil), s.Parts...)
		var qs []skill.Question
		for _, q := range c.Parts[1].Questions {
			if len(q.DependsOn) > 0 {
				qs = append(qs, q)
			}
		}
		if len(qs) == 0 {
			continue
		}
		c.Parts[1].Questions = qs
		c.ID = c.ContentID()
		out = append(out, &c)
	}
	if len(out) == 0 {
		t.Fatal("no example set has a dependent part-2 question")
	}
	return out
}

type nodeOpts struct {
	brain   testutil.Brain
	memory  bool
	policy  skill.Policy
	sets    []*skill.Set
	listen  []string
	storeAt string
	key     crypto.PrivKey
}

func startNode(t *testing.T, o nodeOpts) *peer.Node {
	t.Helper()
	if len(o.sets) == 0 {
		t.Fatal("startNode: no challenge sets")
	}
	return testnode.New(t, testnode.Options{
		Config: peer.Config{Key: o.key, StorePath: o.storeAt, ListenAddrs: o.listen, Policy: o.policy},
		Sets:   o.sets, Brain: o.brain, Memory: o.memory,
	})
}

func addrInfo(n *peer.Node) lpeer.AddrInfo { return testnode.AddrInfo(n) }

func TestMutualAttestationOracle(t *testing.T) {
	for _, tc := range []struct{ name, addr string }{
		{"tcp", "/ip4/127.0.0.1/tcp/0"},
		{"quic", "/ip4/127.0.0.1/udp/0/quic-v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sets := dependentSets(t)
			oracle := testutil.NewOracle(sets...)
			// Each verifier serves its own sets: two verifiers drawing the
			// same challenge at once would each see its own challenge come
			// back and decline it as a reflection (spec/protocol.md).
			a := startNode(t, nodeOpts{brain: oracle, memory: true, sets: sets[:len(sets)/2], listen: []string{tc.addr}})
			b := startNode(t, nodeOpts{brain: oracle, memory: true, sets: sets[len(sets)/2:], listen: []string{tc.addr}})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			m, err := a.Attest(ctx, addrInfo(b))
			if err != nil {
				t.Fatal(err)
			}
			if !m.Ours.Verdict.Accepted {
				t.Fatalf("A rejected B: %+v", m.Ours.Verdict)
			}
			if m.Theirs == nil || !m.Theirs.Accepted || m.Theirs.Attestation == nil {
				t.Fatalf("B's verdict on A: %+v %v", m.Theirs, m.TheirsErr)
			}
			// Both records verify for the right subject, and both are stored.
			if _, _, err := protocol.VerifyAttestation(m.Ours.Envelope, protocol.VerifyOptions{Subject: b.ID(), Issuer: a.ID()}); err != nil {
				t.Fatalf("A's attestation of B: %v", err)
			}
			if _, _, err := protocol.VerifyAttestation(m.Theirs.Envelope, protocol.VerifyOptions{Subject: a.ID(), Issuer: b.ID()}); err != nil {
				t.Fatalf("B's attestation of A: %v", err)
			}
			for _, c := range []struct {
				n    *peer.Node
				d    peer.Direction
				p    lpeer.ID
				what string
			}{{a, peer.Issued, b.ID(), "A issued"}, {a, peer.Received, b.ID(), "A received"}} {
				es, err := c.n.Store().List(c.d, c.p)
				if err != nil || len(es) != 1 || !es[0].Attestation.Accepted {
					t.Fatalf("%s: %d entries, %v", c.what, len(es), err)
				}
			}
			// B stores its records when its own sessions end, which may
			// trail A's view of them by a moment.
			for _, d := range []peer.Direction{peer.Issued, peer.Received} {
				deadline := time.Now().Add(5 * time.Second)
				for {
					es, err := b.Store().List(d, a.ID())
					if err == nil && len(es) == 1 && es[0].Attestation.Accepted {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("B never stored its %s attestation about A: %d entries, %v", d, len(es), err)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			if !a.Host().ConnManager().IsProtected(b.ID(), "acaptcha") {
				t.Fatal("accepted peer not protected in the connection manager")
			}
		})
	}
}

func verifyOnce(t *testing.T, verifier, prover *peer.Node) skill.Verdict {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := verifier.Host().Connect(ctx, addrInfo(prover)); err != nil {
		t.Fatal(err)
	}
	res, err := verifier.Verify(ctx, prover.ID())
	if err != nil {
		t.Fatal(err)
	}
	return res.Verdict
}

func TestRejections(t *testing.T) {
	sets := dependentSets(t)
	oracle := testutil.NewOracle(sets...)
	fast := skill.DefaultPolicy()
	fast.Tau = 700 * time.Millisecond
	fast.Total = 10 * time.Second

	t.Run("slow brain times out", func(t *testing.T) {
		v := startNode(t, nodeOpts{sets: sets, policy: fast})
		p := startNode(t, nodeOpts{brain: testutil.Slow(oracle, 1500*time.Millisecond), memory: true, sets: sets})
		got := verifyOnce(t, v, p)
		if got.Accepted || got.Reason != skill.ReasonTimeout || got.FailedRound != 1 {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("keyword script answers wrong", func(t *testing.T) {
		v := startNode(t, nodeOpts{sets: sets})
		p := startNode(t, nodeOpts{brain: testutil.NewKeywordScript(), memory: true, sets: sets})
		got := verifyOnce(t, v, p)
		if got.Accepted || got.Reason != skill.ReasonWrongAnswer {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("forgetful brain fails round 2", func(t *testing.T) {
		v := startNode(t, nodeOpts{sets: sets})
		p := startNode(t, nodeOpts{brain: oracle, memory: false, sets: sets})
		got := verifyOnce(t, v, p)
		if got.Accepted || got.Reason != skill.ReasonWrongAnswer || got.FailedRound != 2 {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("no LLM declines", func(t *testing.T) {
		// A prover that declines the hello gets no session (no set is
		// drawn, nothing is signed): Verify reports ErrDeclined.
		v := startNode(t, nodeOpts{sets: sets})
		p := startNode(t, nodeOpts{sets: sets})
		ctx := ctxT(t, time.Minute)
		if err := v.Host().Connect(ctx, addrInfo(p)); err != nil {
			t.Fatal(err)
		}
		if res, err := v.Verify(ctx, p.ID()); !errors.Is(err, protocol.ErrDeclined) {
			t.Fatalf("got %+v, %v; want ErrDeclined", res, err)
		}
	})
}

func TestRestartKeepsStoreAndLedger(t *testing.T) {
	sets := dependentSets(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	st, err := peer.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := st.TryServe("set-1", 1)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if _, err := peer.OpenStore(path); err == nil {
		t.Fatal("a second open of a locked store succeeded")
	}
	st.Close()
	st, err = peer.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if ok, _ := st.TryServe("set-1", 1); ok {
		t.Fatal("served set forgotten across restart")
	}
	// A set given back unseen is servable again, once.
	if err := st.Unserve("set-1"); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.TryServe("set-1", 1); !ok || err != nil {
		t.Fatalf("returned set not servable: %v %v", ok, err)
	}
	if ok, _ := st.TryServe("set-1", 1); ok {
		t.Fatal("one unserve undid two serves")
	}
	if err := st.Unserve("never-served"); err != nil {
		t.Fatal(err)
	}
	_ = sets
}

// Records reach embedders through the host's event bus (events.go): one
// EvtAttestationIssued per verdict this node signs, after the node stored
// it.
func TestAttestationEventsOnBus(t *testing.T) {
	sets := dependentSets(t)
	oracle := testutil.NewOracle(sets...)
	a := startNode(t, nodeOpts{brain: oracle, memory: true, sets: sets[:len(sets)/2]})
	b := startNode(t, nodeOpts{brain: oracle, memory: true, sets: sets[len(sets)/2:]})
	sub, err := a.Host().EventBus().Subscribe(new(peer.EvtAttestationIssued))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := a.Attest(ctx, addrInfo(b)); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-sub.Out():
		e := ev.(peer.EvtAttestationIssued)
		if e.Result == nil || e.Result.Peer != b.ID() || e.Door != "libp2p" {
			t.Fatalf("event %+v", e)
		}
		stored, err := a.Store().List(peer.Issued, b.ID())
		if err != nil || len(stored) == 0 {
			t.Fatalf("event before the record was stored: %v %d", err, len(stored))
		}
	case <-ctx.Done():
		t.Fatal("no EvtAttestationIssued on the bus")
	}
}

// A node that will not verify us back says so in its HelloAck (spec
// §1a), and Attest reports it at once with the reason instead of waiting
// MutualTimeout for a session that never comes. Here the peer's own
// attestation of us still stands while we lost ours (a fresh store under
// the same key).
func TestAttestReciprocalDropped(t *testing.T) {
	sets := dependentSets(t)
	oracle := testutil.NewOracle(sets...)
	key, _ := testutil.NewKey(t)
	a := startNode(t, nodeOpts{brain: oracle, memory: true, sets: sets[:len(sets)/2], key: key})
	b := startNode(t, nodeOpts{brain: oracle, memory: true, sets: sets[len(sets)/2:]})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := a.Attest(ctx, addrInfo(b))
	if err != nil || !m.Ours.Verdict.Accepted || m.Theirs == nil || !m.Theirs.Accepted {
		t.Fatalf("first attestation: %+v, %v", m, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	const wait = 45 * time.Second
	a2 := testnode.New(t, testnode.Options{
		Config: peer.Config{Key: key, MutualTimeout: wait},
		Sets:   sets[:len(sets)/2], Brain: oracle, Memory: true,
	})
	start := time.Now()
	m, err = a2.Attest(ctx, addrInfo(b))
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if !m.Ours.Verdict.Accepted || m.Ours.Reciprocal != pb.Reciprocal_RECIPROCAL_ATTESTED {
		t.Fatalf("second attestation: verdict %+v, reciprocal answer %v; want accepted, ATTESTED", m.Ours.Verdict, m.Ours.Reciprocal)
	}
	if m.Theirs != nil || !errors.Is(m.TheirsErr, peer.ErrReciprocalDropped) {
		t.Fatalf("theirs %+v, err %v; want ErrReciprocalDropped", m.Theirs, m.TheirsErr)
	}
	if took >= wait {
		t.Fatalf("Attest took %s: it waited for the reciprocal session", took)
	}
	t.Logf("dropped request reported after %s: %v", took.Round(time.Millisecond), m.TheirsErr)
}

// A session back that is still running when the requester's own wait
// (MutualTimeout) is up runs under the peer's total_ms: Attest waits for
// its verdict instead of reporting that none came (spec §1a).
func TestAttestWaitsForRunningSessionBack(t *testing.T) {
	sets := dependentSets(t)
	oracle := testutil.NewOracle(sets...)
	// A answers slowly: B's session on A outlasts A's own session on B
	// and A's wait after it.
	a := testnode.New(t, testnode.Options{
		Config: peer.Config{MutualTimeout: 300 * time.Millisecond},
		Sets:   sets[:len(sets)/2], Brain: testutil.Slow(oracle, 700*time.Millisecond), Memory: true,
	})
	b := startNode(t, nodeOpts{brain: oracle, memory: true, sets: sets[len(sets)/2:]})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := a.Attest(ctx, addrInfo(b))
	if err != nil {
		t.Fatal(err)
	}
	if !m.Ours.Verdict.Accepted {
		t.Fatalf("A's verdict on B: %+v", m.Ours.Verdict)
	}
	if m.Theirs == nil || !m.Theirs.Accepted {
		t.Fatalf("B's verdict on A: %+v, %v; want it waited for", m.Theirs, m.TheirsErr)
	}
}
