package peer_test

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
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
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Connect(ctx, addrInfo(b)); err != nil {
		t.Fatal(err)
	}
	s, err := h.NewStream(ctx, b.ID(), protocol.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	nonce := make([]byte, protocol.NonceBytes)
	w, r := pbio.NewDelimitedWriter(s), pbio.NewDelimitedReader(s, protocol.MaxProverFrame)
	if err := w.WriteMsg(&pb.Frame{Body: &pb.Frame_Hello{Hello: &pb.Hello{SpecVersion: protocol.SpecVersion, VerifierId: []byte(h.ID()),
		ProverId: []byte(b.ID()), Nonce: nonce, Rounds: 3, TauMs: 15000, TotalMs: 120000}}}); err != nil {
		t.Fatal(err)
	}
	var f pb.Frame
	if err := r.ReadMsg(&f); err != nil {
		t.Fatal(err)
	}
	if ack := f.GetHelloAck(); ack.GetPayDifficulty() != 12 || len(ack.GetPayNonce()) != protocol.PayNonceBytes {
		t.Fatalf("B's answer to a verifier that came: %v, want an ack asking 12 bits", &f)
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
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
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
	if err := a.Host().Connect(ctx, lpeer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()}); err != nil {
		t.Fatal(err)
	}
	for _, c := range a.Host().Network().ConnsToPeer(h.ID()) {
		if c.Stat().Direction != network.DirOutbound {
			t.Fatalf("connection %s at the node, want only outbound ones", c.Stat().Direction)
		}
	}
	s, err := h.NewStream(ctx, a.ID(), protocol.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	w, r := pbio.NewDelimitedWriter(s), pbio.NewDelimitedReader(s, protocol.MaxProverFrame)
	if err := w.WriteMsg(&pb.Frame{Body: &pb.Frame_Hello{Hello: &pb.Hello{SpecVersion: protocol.SpecVersion, VerifierId: []byte(h.ID()),
		ProverId: []byte(a.ID()), Nonce: make([]byte, protocol.NonceBytes), Rounds: 3, TauMs: 15000, TotalMs: 120000}}}); err != nil {
		t.Fatal(err)
	}
	var f pb.Frame
	if err := r.ReadMsg(&f); err != nil {
		t.Fatal(err)
	}
	if f.GetDecline().GetReason() != pb.DeclineReason_DECLINE_REASON_VERIFY_FIRST {
		t.Fatalf("a peer the node did not dial itself got %v, want Decline{VERIFY_FIRST}", &f)
	}
}
