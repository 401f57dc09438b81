package peer_test

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-msgio/pbio"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/internal/testutil/testnode"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// Two nodes that both ask the verifier's payment (spec/protocol.md §5b)
// still attest each other on first contact: the node that came pays its
// verification of the other, and is not asked to pay for being verified
// back (it came to the other: its session was asked for).
func TestMutualAttestationWithPayment(t *testing.T) {
	sets := dependentSets(t)
	oracle := testutil.NewOracle(sets...)
	start := func(sets []*skill.Set, pay int) *peer.Node {
		return testnode.New(t, testnode.Options{
			Config: peer.Config{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Limits: peer.Limits{PayDifficulty: pay}},
			Sets:   sets, Brain: oracle, Memory: true,
		})
	}
	a := start(sets[:len(sets)/2], 12)
	b := start(sets[len(sets)/2:], 12)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := a.Attest(ctx, addrInfo(b))
	if err != nil {
		t.Fatal(err)
	}
	if !m.Ours.Verdict.Accepted || m.Theirs == nil || !m.Theirs.Accepted {
		t.Fatalf("A on B: %+v; B on A: %+v %v", m.Ours.Verdict, m.Theirs, m.TheirsErr)
	}

	// B does ask: a verifier that comes to it meets the ask in the ack.
	h := newPeerHost(t)
	if err := h.Connect(ctx, addrInfo(b)); err != nil {
		t.Fatal(err)
	}
	f := helloReply(ctx, t, h, b)
	if ack := f.GetHelloAck(); ack.GetPayDifficulty() != 12 || len(ack.GetPayNonce()) != protocol.PayNonceBytes {
		t.Fatalf("B's answer to a verifier that came: %v, want an ack asking 12 bits", f)
	}
}

// Two nodes that verify first (spec/protocol.md §5c) still attest each
// other: the node that was come to answers the one that came once it has
// verified and accepted it, and Attest waits for that verdict and asks
// again. The verdicts are both acceptances and both stored.
func TestMutualAttestationVerifyFirst(t *testing.T) {
	sets := dependentSets(t)
	oracle := testutil.NewOracle(sets...)
	start := func(sets []*skill.Set) *peer.Node {
		return testnode.New(t, testnode.Options{
			Config: peer.Config{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, VerifyFirst: true},
			Sets:   sets, Brain: oracle, Memory: true,
		})
	}
	a, b := start(sets[:len(sets)/2]), start(sets[len(sets)/2:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := a.Attest(ctx, addrInfo(b))
	if err != nil {
		t.Fatal(err)
	}
	if !m.Ours.Verdict.Accepted || m.Theirs == nil || !m.Theirs.Accepted {
		t.Fatalf("A on B: %+v; B on A: %+v %v", m.Ours.Verdict, m.Theirs, m.TheirsErr)
	}
	// The examples' sets are below the default admission source: B's
	// standing acceptance of A is what let A in.
	if adm := b.Admission(a.ID()); !adm.Admitted && adm.Reason != peer.NotAdmittedSource {
		t.Fatalf("B answered A with neither admitting it nor accepting it: %+v", adm)
	}
}

// Who came is what the node did, not the direction of the connection a
// session runs on: a peer that reached a node behind NAT through a relay
// is dialled back by the node's hole punch (libp2p's service, not the
// node), so its sessions run on a connection outbound at the node. Here
// the peer's own connection is closed and the node's host dials it, as
// the hole punch would: the peer's verifier hello is still declined
// VERIFY_FIRST (spec/protocol.md §5c).
func TestVerifyFirstHolePunchDirection(t *testing.T) {
	sets := dependentSets(t)
	a := testnode.New(t, testnode.Options{
		Config: peer.Config{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, VerifyFirst: true},
		Sets:   sets, Brain: testutil.NewOracle(sets...), Memory: true,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h := newPeerHost(t)
	cameThenDropped(ctx, t, h, a)
	if err := a.Host().Connect(ctx, lpeer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()}); err != nil {
		t.Fatal(err)
	}
	for _, c := range a.Host().Network().ConnsToPeer(h.ID()) {
		if c.Stat().Direction != network.DirOutbound {
			t.Fatalf("connection %s at the node, want only outbound ones", c.Stat().Direction)
		}
	}
	f := helloReply(ctx, t, h, a)
	if f.GetDecline().GetReason() != pb.DeclineReason_DECLINE_REASON_VERIFY_FIRST {
		t.Fatalf("a peer the node did not dial itself got %v, want Decline{VERIFY_FIRST}", f)
	}
}

// newPeerHost is a bare libp2p host on loopback, closed with the test.
func newPeerHost(t *testing.T) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// cameThenDropped makes h come to node a and drop its connection, waiting
// until a has let it go: a's own dial to h that follows (as a hole punch
// would make) leaves only connections outbound at a.
func cameThenDropped(ctx context.Context, t *testing.T, h host.Host, a *peer.Node) {
	t.Helper()
	if err := h.Connect(ctx, addrInfo(a)); err != nil {
		t.Fatal(err)
	}
	_ = h.Network().ClosePeer(a.ID())
	for deadline := time.Now().Add(5 * time.Second); a.Host().Network().Connectedness(h.ID()) == network.Connected; {
		if time.Now().After(deadline) {
			t.Fatal("the node still holds the peer's connection")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// helloReply opens an acaptcha stream from h to a, sends a verifier's
// hello and returns a's first frame.
func helloReply(ctx context.Context, t *testing.T, h host.Host, a *peer.Node) *pb.Frame {
	t.Helper()
	s, err := h.NewStream(ctx, a.ID(), protocol.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Reset() })
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	w, r := pbio.NewDelimitedWriter(s), pbio.NewDelimitedReader(s, protocol.MaxProverFrame)
	if err := w.WriteMsg(&pb.Frame{Body: &pb.Frame_Hello{Hello: &pb.Hello{SpecVersion: protocol.SpecVersion, VerifierId: []byte(h.ID()),
		ProverId: []byte(a.ID()), Nonce: make([]byte, protocol.NonceBytes), Rounds: 3, TauMs: 15000, TotalMs: 120000}}}); err != nil {
		t.Fatal(err)
	}
	f := new(pb.Frame)
	if err := r.ReadMsg(f); err != nil {
		t.Fatal(err)
	}
	return f
}
