package peer_test

// Issue 10: a peer must not make a node waste work. Each test is one
// finding, played by hostile libp2p clients on loopback with bounded
// loops.

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-msgio/pbio"

	"github.com/acaptcha/acaptcha/internal/swarm"
	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

func mustProcedural(t *testing.T) *procedural.Generator {
	t.Helper()
	g, err := procedural.New(procedural.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// sendHello opens an attestation stream from h to to, sends a hello that
// asks to be verified back, waits for the prover's first frame and resets
// the stream: the loop of the reciprocal flood.
func sendHello(ctx context.Context, h host.Host, to lpeer.ID) error {
	s, err := h.NewStream(ctx, to, protocol.ID)
	if err != nil {
		return err
	}
	defer func() { _ = s.Reset() }()
	_ = s.SetDeadline(time.Now().Add(3 * time.Second))
	nonce := make([]byte, protocol.NonceBytes)
	_, _ = rand.Read(nonce)
	hello := &pb.Frame{Body: &pb.Frame_Hello{Hello: &pb.Hello{
		SpecVersion: protocol.SpecVersion, VerifierId: []byte(h.ID()), ProverId: []byte(to),
		Nonce: nonce, Rounds: 3, TotalMs: 60_000, Reciprocal: true,
	}}}
	if err := pbio.NewDelimitedWriter(s).WriteMsg(hello); err != nil {
		return err
	}
	var f pb.Frame
	return pbio.NewDelimitedReader(s, protocol.MaxProverFrame+16).ReadMsg(&f)
}

// silentProver makes h speak the attestation protocol without ever
// answering a hello.
func silentProver(h host.Host) {
	h.SetStreamHandler(protocol.ID, func(s network.Stream) {
		_, _ = io.Copy(io.Discard, s)
		_ = s.Reset()
	})
}

// TestReciprocalFloodOneSession (finding 1): one peer looping hellos that
// ask to be verified back, then resetting, got a verifier session (a set,
// a signature, a stored record, a log line) per hello. Now the requests go
// through the per-peer state of first contact: one session, then the
// rejection back-off.
func TestReciprocalFloodOneSession(t *testing.T) {
	sets := dependentSets(t)
	v := startNode(t, nodeOpts{brain: testutil.NewOracle(sets...), memory: true, sets: sets})
	// The attacker's prover answers every question wrong.
	a := startNode(t, nodeOpts{brain: testutil.NewKeywordScript(), memory: true, sets: sets})
	ctx := ctxT(t, 20*time.Second)
	if err := a.Host().Connect(ctx, addrInfo(v)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sent := 0
	for i := 0; i < 200 && time.Since(start) < 4*time.Second; i++ {
		if sendHello(ctx, a.Host(), v.ID()) == nil {
			sent++
		}
	}
	time.Sleep(1500 * time.Millisecond)
	issued, err := v.Store().List(peer.Issued, a.ID())
	if err != nil {
		t.Fatal(err)
	}
	st := v.Stats()
	t.Logf("%d hellos answered in %s; %d sessions, %d records; reciprocal asked %d, run %d",
		sent, time.Since(start).Round(time.Millisecond), st.SessionsVerified, len(issued), st.ReciprocalAsked, st.ReciprocalRun)
	if sent == 0 {
		t.Fatal("no hello was answered")
	}
	if st.SessionsVerified > 1 || len(issued) > 1 {
		t.Fatalf("%d hellos cost %d sessions and %d stored records, want at most 1", sent, st.SessionsVerified, len(issued))
	}
	if len(issued) == 1 && issued[0].Attestation.Accepted {
		t.Fatal("the attacker was accepted")
	}
}

// TestReciprocalSilentProverNoGoroutineFlood (finding 2): the same loop
// with a prover that never answers left one goroutine per hello waiting
// for the session in flight.
func TestReciprocalSilentProverNoGoroutineFlood(t *testing.T) {
	sets := dependentSets(t)
	v := startNode(t, nodeOpts{brain: testutil.NewOracle(sets...), memory: true, sets: sets})
	h, _ := rawHost(t)
	silentProver(h)
	ctx := ctxT(t, 20*time.Second)
	if err := h.Connect(ctx, addrInfo(v)); err != nil {
		t.Fatal(err)
	}
	_ = sendHello(ctx, h, v.ID())
	time.Sleep(200 * time.Millisecond)
	before := runtime.NumGoroutine()
	start := time.Now()
	sent := 0
	for i := 0; i < 300 && time.Since(start) < 5*time.Second; i++ {
		if sendHello(ctx, h, v.ID()) == nil {
			sent++
		}
	}
	time.Sleep(300 * time.Millisecond)
	grew := runtime.NumGoroutine() - before
	t.Logf("%d hellos answered: %d more goroutines", sent, grew)
	if sent < 10 {
		t.Fatalf("only %d hellos answered", sent)
	}
	if grew > 60 {
		t.Fatalf("%d hellos left %d more goroutines, want at most 60", sent, grew)
	}
}

// TestFirstContactSilentPeersDoNotStarveHonest (finding 8): peers that
// never answer the hello held every first-contact slot for the handshake
// timeout, again and again; an honest peer waited behind them. Now a
// session holds its slot only until the peer answers (the leash), and
// silent peers retry on one probation slot.
func TestFirstContactSilentPeersDoNotStarveHonest(t *testing.T) {
	oracle := swarm.NewBenchOracle()
	v := startFC(t, oracle, fcOpts{policy: peer.AttestAll, tune: func(c peer.Config) peer.Config { return peer.WithContactLeash(c, 200*time.Millisecond) }})
	const silent = 24
	for range silent {
		h, _ := rawHost(t)
		silentProver(h)
		if err := h.Connect(ctxT(t, 5*time.Second), addrInfo(v.Node)); err != nil {
			t.Fatal(err)
		}
	}
	// Let first contact pick the silent peers up and fill its slots.
	time.Sleep(300 * time.Millisecond)
	honest := startFC(t, oracle, fcOpts{policy: peer.AttestNone})
	start := time.Now()
	dial(t, honest, v)
	waitFor(t, 8*time.Second, "the honest peer to be verified", func() bool { return admitsDirectly(v, honest) })
	took := time.Since(start)
	t.Logf("honest peer verified %s after connecting, behind %d silent peers", took.Round(time.Millisecond), silent)
	if took > 5*time.Second {
		t.Fatalf("honest peer verified only after %s", took)
	}
}

// rcInbound is the system inbound-connection limit of n's resource
// manager.
func rcInbound(t *testing.T, n *peer.Node) int {
	t.Helper()
	in := -1
	_ = n.Host().Network().ResourceManager().ViewSystem(func(s network.ResourceScope) error {
		if l, ok := s.(interface{ Limit() rcmgr.Limit }); ok {
			in = l.Limit().GetConnLimit(network.DirInbound)
		}
		return nil
	})
	if in < 0 {
		t.Fatal("cannot read the resource manager's limits")
	}
	return in
}

// TestConnLimitsAboveHighWatermark (finding 3): the resource manager's
// autoscaled inbound limit (252 on a 24 GiB machine) sat below the
// connection manager's high watermark (400): idle connections took every
// slot and the manager never trimmed them.
func TestConnLimitsAboveHighWatermark(t *testing.T) {
	n := startNode(t, nodeOpts{sets: dependentSets(t)})
	info := n.Host().ConnManager().(*connmgr.BasicConnMgr).GetInfo()
	if in := rcInbound(t, n); in <= info.HighWater {
		t.Fatalf("inbound connection limit %d is not above the high watermark %d", in, info.HighWater)
	}
}

// TestConnectionLockout (finding 3, live): more idle peers than the
// inbound limit connect; the connection manager trims the unattested idle
// ones, keeps the attested peer, and an honest newcomer gets in.
func TestConnectionLockout(t *testing.T) {
	oracle := swarm.NewBenchOracle()
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	v, err := peer.New(peer.Config{
		Key: key, StorePath: filepath.Join(t.TempDir(), "v.db"), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		Source:       oracle.Source(mustProcedural(t), nil),
		ConnLowWater: 4, ConnHighWater: 8, ConnGracePeriod: 200 * time.Millisecond,
		RequireSource: peer.AnySource, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	if in := rcInbound(t, v); in != peer.InboundConnLimit(8) {
		t.Fatalf("inbound limit %d, want %d", in, peer.InboundConnLimit(8))
	}
	// An attested peer first.
	b := startFC(t, oracle, fcOpts{policy: peer.AttestNone})
	ctx := ctxT(t, 20*time.Second)
	if err := v.Host().Connect(ctx, lpeer.AddrInfo{ID: b.ID(), Addrs: b.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, b.ID()); err != nil {
		t.Fatal(err)
	}
	if !v.Admission(b.ID()).Admitted {
		t.Fatal("b not admitted")
	}
	// More idle peers than the inbound limit.
	flood := peer.InboundConnLimit(8) + 16
	ok := 0
	for range flood {
		h, _ := rawHost(t)
		if h.Connect(ctxT(t, 2*time.Second), addrInfo(v)) == nil {
			ok++
		}
	}
	// The manager trims the idle, unattested peers down to the low
	// watermark once they are out of their grace period.
	waitFor(t, 5*time.Second, "the connection manager to trim", func() bool { return len(v.Host().Network().Peers()) <= 8 })
	honest, _ := rawHost(t)
	err = honest.Connect(ctxT(t, 2*time.Second), addrInfo(v))
	t.Logf("%d of %d idle peers connected; node holds %d peers after trimming", ok, flood, len(v.Host().Network().Peers()))
	if err != nil || len(v.Host().Network().ConnsToPeer(honest.ID())) == 0 {
		t.Fatalf("honest peer locked out: %v", err)
	}
	if len(v.Host().Network().ConnsToPeer(b.ID())) == 0 {
		t.Fatal("the attested peer was trimmed")
	}
}

// TestPerIPLimitOnLoopback: with loopback limited like any address, one
// IP holds at most ConnsPerIP connections; another address still gets in.
func TestPerIPLimitOnLoopback(t *testing.T) {
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	v, err := peer.New(peer.Config{
		Key: key, StorePath: filepath.Join(t.TempDir(), "v.db"), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		ConnsPerIP: 3, LimitLoopback: true, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	ok := 0
	for range 6 {
		h, _ := rawHost(t)
		if h.Connect(ctxT(t, 2*time.Second), addrInfo(v)) == nil {
			ok++
		}
	}
	if ok != 3 {
		t.Fatalf("%d connections from 127.0.0.1 with a per-IP limit of 3", ok)
	}
	k, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	other, err := libp2p.New(libp2p.Identity(k), libp2p.ListenAddrStrings("/ip4/127.0.0.2/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	if err := other.Connect(ctxT(t, 2*time.Second), addrInfo(v)); err != nil {
		t.Fatalf("a peer from another address was refused: %v", err)
	}
}

// TestNewConnRateNodeWide: new connections are rate-limited node-wide
// (Config.NewConnsPerSecond, a bucket of four seconds of it), here on a
// loopback the node limits: of 10 fresh peer IDs dialing at once, the
// bucket's 4 get in (and one more per second the dials took), the rest
// are refused. libp2p's resource manager had no node-wide rate.
func TestNewConnRateNodeWide(t *testing.T) {
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	v, err := peer.New(peer.Config{
		Key: key, StorePath: filepath.Join(t.TempDir(), "v.db"), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		ConnsPerIP: 100, NewConnsPerSecond: 1, LimitLoopback: true, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	start := time.Now()
	ok := 0
	const dialers = 10
	for range dialers {
		h, _ := rawHost(t)
		if h.Connect(ctxT(t, 2*time.Second), addrInfo(v)) == nil {
			ok++
		}
	}
	most := 4 + int(time.Since(start)/time.Second) + 1
	t.Logf("%d of %d fresh peer IDs connected in %s (rate 1/s, bucket 4)", ok, dialers, time.Since(start).Round(time.Millisecond))
	if ok < 4 || ok > most || ok == dialers {
		t.Fatalf("%d of %d connections at a node-wide rate of 1/s with a bucket of 4, want 4 to %d", ok, dialers, min(most, dialers-1))
	}
}

// TestPresentationFloodBounded (finding 9): valid presentations of
// acceptances by throw-away issuers grew the store to the learned cap
// (65,536 records, 135 MB). Now presentations are rate-limited per
// presenter and in total, and records by issuers this node does not admit
// are bounded by MaxPresentedUntrusted.
func TestPresentationFloodBounded(t *testing.T) {
	n := startTrustNode(t, dependentSets(t), trustOpts{})
	present := func(h host.Host) (uint64, error) {
		envs := make([][]byte, peer.MaxPresented)
		for i := range envs {
			k, _, _ := crypto.GenerateEd25519Key(rand.Reader)
			envs[i] = peer.SealTest(k, h.ID(), true, time.Now(), time.Hour)
		}
		return rawPresentQuiet(ctxT(t, 10*time.Second), h, n.Node, frames(envs...))
	}
	// One presenter, many presentations.
	h, _ := rawHost(t)
	var learned uint64
	busy := 0
	for range 40 {
		k, err := present(h)
		switch {
		case err == nil:
			learned += k
		case resetCode(err) == protocol.ErrCodeBusy:
			busy++
		default:
			t.Fatal(err)
		}
	}
	t.Logf("one presenter, 40 presentations: learned %d, %d refused busy", learned, busy)
	if learned > peer.PresentPeerBurst*peer.MaxPresented || busy == 0 {
		t.Fatalf("one presenter got %d records learned (%d refused), want at most %d", learned, busy, peer.PresentPeerBurst*peer.MaxPresented)
	}
	// Many presenters: the records of unadmitted issuers stay bounded.
	for range 6 {
		s, _ := rawHost(t)
		for range peer.PresentPeerBurst {
			if _, err := present(s); err != nil && resetCode(err) != protocol.ErrCodeBusy {
				t.Fatal(err)
			}
		}
	}
	st := n.Stats()
	t.Logf("after 7 presenters: learned %d by presentation, %d capped, %d presentations refused", st.LearnedPresentation, st.PresentedCapped, st.PresentationsLimited)
	if st.LearnedPresentation > peer.MaxPresentedUntrusted {
		t.Fatalf("learned %d presented records of unadmitted issuers, cap %d", st.LearnedPresentation, peer.MaxPresentedUntrusted)
	}
}

// rawPresentQuiet is rawPresent without failing the test on a refused
// stream.
func rawPresentQuiet(ctx context.Context, h host.Host, to *peer.Node, data []byte) (uint64, error) {
	if err := h.Connect(ctx, addrInfo(to)); err != nil {
		return 0, err
	}
	s, err := h.NewStream(ctx, to.ID(), peer.PresentProtocol)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.Write(data); err != nil {
		return 0, err
	}
	_ = s.CloseWrite()
	ack, err := io.ReadAll(s)
	if err != nil {
		return 0, err
	}
	var v uint64
	for i, b := range ack {
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("no acknowledgement")
}
