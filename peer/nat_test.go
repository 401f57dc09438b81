package peer_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/host/autonat"
	"github.com/libp2p/go-libp2p/p2p/protocol/autonatv2"
	relayclient "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/llm"
	"github.com/acaptcha/acaptcha/peer"
	acproto "github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/solve"
)

// hopProtocol is the circuit-v2 relay's reservation/connect protocol.
const hopProtocol = "/libp2p/circuit/relay/0.2.0/hop"

// natNode starts a node on loopback with the example sets and, when brain
// is set, a prover; edit adjusts the config (NAT settings, host options).
func natNode(t *testing.T, sets []*skill.Set, brain testutil.Brain, edit func(*peer.Config)) *peer.Node {
	t.Helper()
	var prover skill.Prover
	if brain != nil {
		srv := testutil.NewOpenAIServer(brain)
		t.Cleanup(srv.Close)
		m, err := llm.New(context.Background(), llm.Config{Spec: "openai:stub-model", BaseURL: srv.URL + "/v1", APIKey: "test"})
		if err != nil {
			t.Fatal(err)
		}
		prover = solve.New(m, solve.Config{Memory: true})
	}
	src, err := skill.NewCorpus("test", sets, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cfg := peer.Config{
		Key: key, StorePath: filepath.Join(t.TempDir(), "store.db"),
		ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		Policy:      skill.DefaultPolicy(), Source: src, Prover: prover,
	}
	if edit != nil {
		edit(&cfg)
	}
	n, err := peer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// natBehindRelay edits a config into a node behind a NAT: no direct
// listener at all (only the relay transport's implicit /p2p-circuit
// listener), AutoNAT forced to "private", and relays as static relays.
// NAT stays off: go-libp2p v0.51 leaks the AutoNAT v1 service's dialer
// when reachability is forced to private, and hole punching has nothing
// to punch on loopback.
func natBehindRelay(relays []string) func(*peer.Config) {
	return func(c *peer.Config) {
		c.Relays = relays
		c.HostOptions = []libp2p.Option{libp2p.NoListenAddrs, libp2p.EnableRelay(), libp2p.ForceReachabilityPrivate()}
	}
}

// relayHost starts a plain circuit-v2 relay on loopback that counts the
// bytes it relays.
func relayHost(t *testing.T, limit *relayv2.RelayLimit) (host.Host, *relayCounter) {
	t.Helper()
	ctr := &relayCounter{MetricsTracer: relayv2.NewMetricsTracer(relayv2.WithRegisterer(prometheus.NewRegistry()))}
	h, err := libp2p.New(
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.ForceReachabilityPublic(),
		libp2p.EnableRelayService(relayv2.WithLimit(limit), relayv2.WithMetricsTracer(ctr)),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	eventually(t, 10*time.Second, "relay service starts", func() bool { return slices.Contains(h.Mux().Protocols(), hopProtocol) })
	return h, ctr
}

// relayCounter counts the bytes a relay moved, both ways, all circuits.
type relayCounter struct {
	relayv2.MetricsTracer
	bytes atomic.Int64
}

func (c *relayCounter) BytesTransferred(n int) {
	c.bytes.Add(int64(n))
	c.MetricsTracer.BytesTransferred(n)
}

// relayedPeer starts a node behind the relay host rh and returns it with
// its relayed address, once it holds a reservation. (AutoRelay advertises
// relay addresses only for relays with public addresses, so on loopback
// the address is built here, as a peer learning it from elsewhere would.)
// edits apply after natBehindRelay's.
func relayedPeer(t *testing.T, rh host.Host, sets []*skill.Set, brain testutil.Brain, edits ...func(*peer.Config)) (*peer.Node, lpeer.AddrInfo) {
	t.Helper()
	var relay []string
	for _, a := range rh.Addrs() {
		relay = append(relay, a.String()+"/p2p/"+rh.ID().String())
	}
	b := natNode(t, sets, brain, func(c *peer.Config) {
		natBehindRelay(relay)(c)
		for _, e := range edits {
			e(c)
		}
	})
	eventually(t, 20*time.Second, "relay reservation of the node behind NAT", func() bool {
		ti := rh.ConnManager().GetTagInfo(b.ID())
		return ti != nil && ti.Tags["relay-reservation"] > 0
	})
	if direct := b.Host().Network().ListenAddresses(); slices.ContainsFunc(direct, func(a ma.Multiaddr) bool {
		_, err := a.ValueForProtocol(ma.P_CIRCUIT)
		return err != nil
	}) {
		t.Fatalf("node behind NAT listens directly: %v", direct)
	}
	circuit := ma.StringCast("/p2p/" + rh.ID().String() + "/p2p-circuit")
	var addrs []ma.Multiaddr
	for _, a := range rh.Addrs() {
		addrs = append(addrs, a.Encapsulate(circuit))
	}
	return b, lpeer.AddrInfo{ID: b.ID(), Addrs: addrs}
}

// A node reachable only through a circuit-v2 relay with the default
// limits is attested mutually over the relayed connection, and the whole
// exchange (handshakes, identify, both sessions) fits the relay's data
// limit with room to spare.
func TestNATRelayedMutualAttestation(t *testing.T) {
	sets := dependentSets(t)
	oracle := testutil.NewOracle(sets...)
	rh, relayed := relayHost(t, relayv2.DefaultLimit())
	b, bInfo := relayedPeer(t, rh, sets[len(sets)/2:], oracle)
	a := natNode(t, sets[:len(sets)/2], oracle, func(c *peer.Config) { c.NAT = true })
	before := relayed.bytes.Load() // B's reservation

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := a.Attest(ctx, bInfo)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Ours.Verdict.Accepted {
		t.Fatalf("A rejected B over the relay: %+v", m.Ours.Verdict)
	}
	if m.Theirs == nil || !m.Theirs.Accepted {
		t.Fatalf("B's verdict on A over the relay: %+v %v", m.Theirs, m.TheirsErr)
	}
	if _, _, err := acproto.VerifyAttestation(m.Ours.Envelope, acproto.VerifyOptions{Subject: b.ID(), Issuer: a.ID()}); err != nil {
		t.Fatalf("A's attestation of B: %v", err)
	}
	// Every connection between A and B is the relayed one.
	conns := a.Host().Network().ConnsToPeer(b.ID())
	if len(conns) == 0 {
		t.Fatal("A holds no connection to B")
	}
	for _, c := range conns {
		if !c.Stat().Limited {
			t.Fatalf("direct connection to the node behind NAT: %s", c.RemoteMultiaddr())
		}
	}
	eventually(t, 5*time.Second, "B stores its verdict on A", func() bool {
		es, err := b.Store().List(peer.Issued, a.ID())
		return err == nil && len(es) == 1 && es[0].Attestation.Accepted
	})
	// Wire bytes through the relay, both ways together, against the
	// limit the relay applies to each way.
	moved := relayed.bytes.Load() - before
	limit := relayv2.DefaultLimit().Data
	t.Logf("mutual attestation over the relay: %d bytes relayed (both ways); relay limit %d bytes each way", moved, limit)
	if moved == 0 {
		t.Fatal("the relay counted no traffic")
	}
	if moved > limit/2 {
		t.Fatalf("a mutual attestation moved %d bytes through the relay, over half its %d-byte limit", moved, limit)
	}
}

// A relay that cuts the connection mid-session (its data limit spent)
// ends the session as any broken stream does (spec/protocol.md, "Peek and
// abort"): before the first challenge with a network error and nothing
// signed, after it with a signed protocol_error rejection. This is why
// sessions must fit the relay's limits.
func TestNATRelayLimitExceededEndsSession(t *testing.T) {
	sets := dependentSets(t)
	oracle := testutil.NewOracle(sets...)
	const dataLimit = 6 << 10 // enough for the handshakes and identify, not for a session
	rh, relayed := relayHost(t, &relayv2.RelayLimit{Duration: 10 * time.Minute, Data: dataLimit})
	// B answers A's session: the cut is in A's verification of B. (With a
	// relay B is reachable beyond loopback, so by default it verifies A
	// first and the cut falls in its session instead.)
	b, bInfo := relayedPeer(t, rh, sets[len(sets)/2:], oracle, func(c *peer.Config) { c.AnswerFirst = true })
	// B's verdict on A cannot come once the relay cut the connection.
	a := natNode(t, sets[:len(sets)/2], oracle, func(c *peer.Config) { c.MutualTimeout = 5 * time.Second })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := a.Attest(ctx, bInfo)
	t.Logf("relay moved %d bytes before it cut the connection", relayed.bytes.Load())
	switch {
	case err != nil:
		if !errors.Is(err, peer.ErrNetwork) {
			t.Fatalf("Attest over a spent relay: %v, want a network error", err)
		}
		if es, err := a.Store().List(peer.Issued, b.ID()); err != nil || len(es) != 0 {
			t.Fatalf("A stored %d attestations of B after a session cut before its first challenge (%v)", len(es), err)
		}
	default:
		v := m.Ours.Verdict
		if v.Accepted || v.Reason != skill.ReasonProtocolError || m.Ours.Envelope == nil {
			t.Fatalf("session the relay cut: %+v (signed: %v), want a signed protocol_error", v, m.Ours.Envelope != nil)
		}
		t.Logf("session cut by the relay in round %d: %s", v.FailedRound, v.Reason)
	}
	// The relay's cut reaches A's swarm on its own schedule: the session
	// may end first (B resets its stream when its side fails), so the
	// connection gets a moment to close. B, behind its NAT, may dial A
	// directly meanwhile (its reciprocal session asks for A): a direct
	// connection is no relayed one surviving its limit (under load this
	// check once found such an inbound connection from B, opened as the
	// session ended, and failed on it).
	relayedLeft := func() []string {
		var desc []string
		for _, c := range a.Host().Network().ConnsToPeer(b.ID()) {
			if st := c.Stat(); st.Limited {
				desc = append(desc, fmt.Sprintf("%s %s opened %s ago, %d streams", c.RemoteMultiaddr(), st.Direction, time.Since(st.Opened).Round(time.Millisecond), len(c.GetStreams())))
			}
		}
		return desc
	}
	deadline := time.Now().Add(5 * time.Second)
	for left := relayedLeft(); len(left) != 0; left = relayedLeft() {
		if time.Now().After(deadline) {
			t.Fatalf("the relayed connection survived its data limit: %v", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A relayed connection that the relay resets before a session could end
// (30 s left; the default policy's session may take 45 s plus margin) is
// refused before any challenge, instead of being cut into a signed
// protocol_error.
func TestNATRelayBudgetRefusesShortRelay(t *testing.T) {
	sets := dependentSets(t)
	oracle := testutil.NewOracle(sets...)
	rh, _ := relayHost(t, &relayv2.RelayLimit{Duration: 30 * time.Second, Data: relayv2.DefaultLimit().Data})
	b, bInfo := relayedPeer(t, rh, sets[len(sets)/2:], oracle)
	a := natNode(t, sets[:len(sets)/2], oracle, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.Attest(ctx, bInfo); !errors.Is(err, peer.ErrRelayBudget) {
		t.Fatalf("Attest over a relay with 30 s left: %v, want ErrRelayBudget", err)
	}
	if es, err := a.Store().List(peer.Issued, b.ID()); err != nil || len(es) != 0 {
		t.Fatalf("A stored %d attestations of B (%v)", len(es), err)
	}
}

// The CLI's default (NAT on) registers hole punching and AutoNAT v2 (and
// the AutoNAT v1 service) on the host, RelayService the circuit-v2 relay
// once the node is public; the library's zero config registers none.
func TestNATDefaultRegistersHolePunchAndAutoNAT(t *testing.T) {
	sets := dependentSets(t)
	// Hole punching registers /libp2p/dcutr once the host knows a public
	// address of its own; on loopback it has none, so give it one.
	public := ma.StringCast("/ip4/1.2.3.4/tcp/4717")
	withPublic := libp2p.AddrsFactory(func(addrs []ma.Multiaddr) []ma.Multiaddr { return append(addrs, public) })
	on := natNode(t, sets, nil, func(c *peer.Config) {
		c.NAT = true
		c.HostOptions = []libp2p.Option{withPublic}
	})
	off := natNode(t, sets, nil, func(c *peer.Config) { c.HostOptions = []libp2p.Option{withPublic} })
	relay := natNode(t, sets, nil, func(c *peer.Config) {
		c.RelayService = true
		c.HostOptions = []libp2p.Option{libp2p.ForceReachabilityPublic()}
	})
	eventually(t, 10*time.Second, "relay service of a public node", func() bool {
		return slices.Contains(relay.Host().Mux().Protocols(), hopProtocol)
	})
	want := []protocol.ID{holepunch.Protocol, autonatv2.DialProtocol, autonatv2.DialBackProtocol, autonat.AutoNATProto}
	eventually(t, 15*time.Second, "NAT protocols registered", func() bool {
		protos := on.Host().Mux().Protocols()
		for _, p := range want {
			if !slices.Contains(protos, p) {
				return false
			}
		}
		return true
	})
	for _, p := range append(want, hopProtocol) {
		if slices.Contains(off.Host().Mux().Protocols(), p) {
			t.Errorf("zero config registers %s", p)
		}
	}
}

func TestRelayConfigErrors(t *testing.T) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	self, _ := lpeer.IDFromPrivateKey(key)
	other, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	otherID, _ := lpeer.IDFromPrivateKey(other)
	for _, tc := range []struct{ addr, want string }{
		{"not a multiaddr", "invalid relay address"},
		{"/ip4/127.0.0.1/tcp/4001", "/p2p/PEER_ID"},
		{"/ip4/127.0.0.1/tcp/4001/p2p/" + otherID.String() + "/p2p-circuit", "reachable directly"},
		{"/p2p/" + otherID.String(), "no transport address"},
		{"/ip4/127.0.0.1/tcp/4001/p2p/" + self.String(), "this node itself"},
	} {
		_, err := peer.New(peer.Config{Key: key, StorePath: filepath.Join(t.TempDir(), "s.db"), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Relays: []string{tc.addr}})
		if err == nil || !errors.Is(err, peer.ErrRelayAddr) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("relay %q: %v, want an ErrRelayAddr naming %q", tc.addr, err, tc.want)
		}
	}
	ais, err := peer.ParseRelays([]string{
		"/ip4/127.0.0.1/tcp/4001/p2p/" + otherID.String(),
		"/ip4/127.0.0.1/udp/4001/quic-v1/p2p/" + otherID.String(),
	})
	if err != nil || len(ais) != 1 || len(ais[0].Addrs) != 2 {
		t.Fatalf("two addresses of one relay: %v, %v", ais, err)
	}
}

// go-libp2p's circuit client takes a relayed connection from any relay
// that opens its stop protocol, reservation or not; the node's gater
// accepts inbound relayed connections only through its configured relays
// (spec/protocol.md §13). The node behind NAT holds reservations with
// its configured relay and, made by hand, with another: a peer dialing
// it through the other relay is refused before its handshake (counted in
// Stats.RelayedRefused), through the configured one it connects.
func TestNATRefusesUnconfiguredRelay(t *testing.T) {
	sets := dependentSets(t)
	configured, _ := relayHost(t, nil)
	other, _ := relayHost(t, nil)
	b, viaConfigured := relayedPeer(t, configured, sets, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	otherInfo := lpeer.AddrInfo{ID: other.ID(), Addrs: other.Addrs()}
	if err := b.Host().Connect(ctx, otherInfo); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a reservation with the unconfigured relay", func() bool {
		_, err := relayclient.Reserve(ctx, b.Host(), otherInfo)
		return err == nil
	})
	circuit := ma.StringCast("/p2p/" + other.ID().String() + "/p2p-circuit")
	viaOther := lpeer.AddrInfo{ID: b.ID()}
	for _, a := range other.Addrs() {
		viaOther.Addrs = append(viaOther.Addrs, a.Encapsulate(circuit))
	}
	dialer := func() host.Host {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.EnableRelay(), libp2p.DisableMetrics())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	v := dialer()
	lctx := network.WithAllowLimitedConn(ctx, "test")
	if err := v.Connect(lctx, viaOther); err == nil {
		t.Fatalf("connected through a relay the node did not configure: %v", v.Network().ConnsToPeer(b.ID())[0].RemoteMultiaddr())
	}
	if got := b.Stats().RelayedRefused; got == 0 {
		t.Fatal("the refused relayed connection is not counted")
	}
	if err := dialer().Connect(lctx, viaConfigured); err != nil {
		t.Fatalf("through the configured relay: %v", err)
	}
}
