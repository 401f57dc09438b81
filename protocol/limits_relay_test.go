package protocol

import (
	"crypto/ed25519"
	"net/netip"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
)

// relayTestHost is a TCP host on loopback; relay makes it a circuit-v2
// relay, else it is a relay client.
func relayTestHost(t *testing.T, relay bool) host.Host {
	t.Helper()
	opts := []libp2p.Option{
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.DisableMetrics(),
	}
	if relay {
		opts = append(opts, libp2p.ForceReachabilityPublic(), libp2p.EnableRelayService())
	} else {
		opts = append(opts, libp2p.EnableRelay(), libp2p.ForceReachabilityPrivate())
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// Live, on loopback: a verifier that reaches the prover through a
// circuit-v2 relay is charged to the relay's group (the connection's
// remote address starts with the relay's loopback address, which is
// exempt), and the group is the same whichever peer comes through it.
func TestRelayedConnGroupLive(t *testing.T) {
	relay, prover := relayTestHost(t, true), relayTestHost(t, false)
	relayInfo := peer.AddrInfo{ID: relay.ID(), Addrs: relay.Addrs()}
	ctx := testCtx(t, 20*time.Second)
	if err := prover.Connect(ctx, relayInfo); err != nil {
		t.Fatal(err)
	}
	var reserved bool
	for i := 0; i < 50 && !reserved; i++ { // the relay service may start after the host
		if _, err := client.Reserve(ctx, prover, relayInfo); err == nil {
			reserved = true
		} else {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !reserved {
		t.Fatal("no reservation on the relay")
	}
	circuit := ma.StringCast("/p2p/" + relay.ID().String() + "/p2p-circuit")
	var addrs []ma.Multiaddr
	for _, a := range relay.Addrs() {
		addrs = append(addrs, a.Encapsulate(circuit))
	}
	s := &Service{h: prover}
	var groups []netip.Prefix
	for i := range 2 {
		v := relayTestHost(t, false)
		if err := v.Connect(network.WithAllowLimitedConn(ctx, "test"), peer.AddrInfo{ID: prover.ID(), Addrs: addrs}); err != nil {
			t.Fatalf("verifier %d through the relay: %v", i, err)
		}
		var conn network.Conn
		for j := 0; j < 100 && conn == nil; j++ {
			if cs := prover.Network().ConnsToPeer(v.ID()); len(cs) > 0 {
				conn = cs[0]
			} else {
				time.Sleep(20 * time.Millisecond)
			}
		}
		if conn == nil {
			t.Fatalf("verifier %d: the prover has no connection", i)
		}
		remote := conn.RemoteMultiaddr()
		pfx, ok, known := s.connPrefix(remote)
		if !ok || !known || !isRelayed(remote) {
			t.Fatalf("verifier %d relayed (%s): group %v ok=%v known=%v", i, remote, pfx, ok, known)
		}
		if want := mustRelayGroup("/ip4/127.0.0.1/tcp/1/p2p/" + relay.ID().String() + "/p2p-circuit"); pfx != want {
			t.Fatalf("verifier %d relayed (%s): group %v, want the relay network's %v", i, remote, pfx, want)
		}
		if got, ok := s.drawPrefix(v.ID()); !ok || got != pfx {
			t.Fatalf("verifier %d: drawPrefix %v %v, want %v", i, got, ok, pfx)
		}
		groups = append(groups, pfx)
	}
	if groups[0] != groups[1] {
		t.Fatalf("two verifiers behind one relay in two groups: %v", groups)
	}
	// The relay itself, a direct peer on loopback, is exempt.
	if pfx, ok := s.drawPrefix(relay.ID()); ok {
		t.Fatalf("the loopback relay's own connection has a group: %v", pfx)
	}
}

// Live, on loopback: a stall (a valid hello, then silence) that reaches
// the prover through a circuit-v2 relay counts as silent for the relay's
// group (spec §6 step 1, §13), as a direct one does for its IP prefix: a
// relayed connection is no address without a group, and probation
// bounds its stalls like any group's.
func TestRelayedStallCountsForRelayGroup(t *testing.T) {
	relay, prover := relayTestHost(t, true), relayTestHost(t, false)
	const idle = time.Second
	svc := newService(t, prover, Config{Prover: constProver("x"), HandshakeTimeout: idle, IdleTimeout: idle})
	relayInfo := peer.AddrInfo{ID: relay.ID(), Addrs: relay.Addrs()}
	ctx := testCtx(t, 20*time.Second)
	if err := prover.Connect(ctx, relayInfo); err != nil {
		t.Fatal(err)
	}
	var reserved bool
	for i := 0; i < 50 && !reserved; i++ {
		if _, err := client.Reserve(ctx, prover, relayInfo); err == nil {
			reserved = true
		} else {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !reserved {
		t.Fatal("no reservation on the relay")
	}
	circuit := ma.StringCast("/p2p/" + relay.ID().String() + "/p2p-circuit")
	var addrs []ma.Multiaddr
	for _, a := range relay.Addrs() {
		addrs = append(addrs, a.Encapsulate(circuit))
	}
	v := relayTestHost(t, false)
	lctx := network.WithAllowLimitedConn(ctx, "test")
	if err := v.Connect(lctx, peer.AddrInfo{ID: prover.ID(), Addrs: addrs}); err != nil {
		t.Fatal(err)
	}
	s, err := v.NewStream(lctx, prover.ID(), ID)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	r := &rawPeer{t: t, s: s, r: newFrameReader(s, MaxVerifierFrame), max: MaxVerifierFrame}
	r.send(helloFrame(v.ID(), prover.ID(), nil))
	if f, err := r.recv(); err != nil || f.GetHelloAck() == nil {
		t.Fatalf("hello through the relay: %v %v", f, err)
	}
	t0 := time.Now()
	expectReset(t, r, ErrCodeTimeout)
	held := time.Since(t0)
	group := mustRelayGroup("/ip4/127.0.0.1/tcp/1/p2p/" + relay.ID().String() + "/p2p-circuit")
	strikes := 0
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end) && strikes == 0; time.Sleep(10 * time.Millisecond) {
		svc.mu.Lock()
		if g := svc.silent[group]; g != nil {
			strikes = g.strikes
		}
		svc.mu.Unlock()
	}
	t.Logf("a relayed stall held its slot %v and struck the relay's group %d time(s)", held.Round(time.Millisecond), strikes)
	if strikes != 1 {
		t.Fatalf("a relayed stall struck the relay's group %d times, want 1", strikes)
	}
}

// testRelayIDs are peer IDs for relays in address tests.
var testRelayIDs = func() []peer.ID {
	ids := make([]peer.ID, 3)
	for i := range ids {
		var seed [ed25519.SeedSize]byte
		seed[0] = byte(i + 1)
		k, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(seed[:]))
		if err != nil {
			panic(err)
		}
		if ids[i], err = peer.IDFromPrivateKey(k); err != nil {
			panic(err)
		}
	}
	return ids
}()

// mustRelayGroup is RelayGroup of a circuit-relayed address; it panics
// when addr is not one.
func mustRelayGroup(addr string) netip.Prefix {
	g, relayed := RelayGroup(ma.StringCast(addr))
	if !relayed {
		panic(addr + " is not relayed")
	}
	return g
}

// Relayed connections are grouped by the network of the relay's address
// (IPv4 /24, IPv6 /32), not by the relay's peer ID, which a peer that
// poses as a relay mints for free: relays of one network share a group,
// relays of another network do not; an address that does not start with
// an IP is grouped by its relay's peer ID. No relay group is an IP group
// or a block.
func TestRelayGroupByRelayNetwork(t *testing.T) {
	via := func(addr string, relay int) string {
		return addr + "/p2p/" + testRelayIDs[relay].String() + "/p2p-circuit"
	}
	same := [][2]string{
		{via("/ip4/198.51.100.7/tcp/4001", 0), via("/ip4/198.51.100.200/udp/9/quic-v1", 1)},
		{via("/ip4/198.51.100.7/tcp/4001", 0), via("/ip6/::ffff:198.51.100.9/tcp/1", 2)},
		{via("/ip6/2001:db8:1:2::1/tcp/4001", 0), via("/ip6/2001:db8:ffff::9/tcp/4001", 1)},
		{via("/ip4/127.0.0.1/tcp/1", 0), via("/ip4/127.0.0.2/tcp/2", 1)},
		// A relayed connection over a relayed one: the first relay's network.
		{via(via("/ip4/198.51.100.7/tcp/4001", 0), 1), via("/ip4/198.51.100.8/tcp/1", 2)},
		{via("/dns4/relay.example/tcp/1", 0), via("/dns4/other.example/tcp/2", 0)},
	}
	for _, c := range same {
		if a, b := mustRelayGroup(c[0]), mustRelayGroup(c[1]); a != b {
			t.Errorf("%s and %s in two groups: %v, %v", c[0], c[1], a, b)
		}
	}
	apart := [][2]string{
		{via("/ip4/198.51.100.7/tcp/4001", 0), via("/ip4/198.51.101.7/tcp/4001", 0)},
		{via("/ip6/2001:db8::1/tcp/1", 0), via("/ip6/2001:db9::1/tcp/1", 0)},
		{via("/ip4/0.0.0.0/tcp/1", 0), via("/ip6/::/tcp/1", 0)},
		{via("/dns4/relay.example/tcp/1", 0), via("/dns4/relay.example/tcp/1", 1)},
		{via("/dns4/relay.example/tcp/1", 0), via("/ip4/198.51.100.7/tcp/1", 0)},
	}
	for _, c := range apart {
		if a, b := mustRelayGroup(c[0]), mustRelayGroup(c[1]); a == b {
			t.Errorf("%s and %s in one group %v", c[0], c[1], a)
		}
	}
	for _, addr := range []string{"/ip4/198.51.100.7/tcp/4001", "/ip6/2001:db8::1/tcp/1/p2p/" + testRelayIDs[0].String()} {
		if g, relayed := RelayGroup(ma.StringCast(addr)); relayed || g.IsValid() {
			t.Errorf("RelayGroup(%s) = %v %v for a direct address", addr, g, relayed)
		}
	}
	s := &Service{cfg: Config{LimitLoopback: true}}
	for _, c := range append(same, apart...) {
		for _, addr := range c {
			g := mustRelayGroup(addr)
			if pfx, ok, known := s.connPrefix(ma.StringCast(addr)); !ok || !known || pfx != g {
				t.Errorf("connPrefix(%s) = %v %v %v, want the relay group %v", addr, pfx, ok, known, g)
			}
			if g.Bits() != 128 || !netip.MustParsePrefix("100::/64").Contains(g.Addr()) {
				t.Errorf("relay group %v of %s outside 100::/64", g, addr)
			}
			if _, ok := BlockOf(g); ok {
				t.Errorf("relay group %v of %s has a block", g, addr)
			}
		}
	}
}
