package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
)

// pollPresent drives l for 60 s in 100 ms steps: every step, fresh peer
// IDs from attacker() present until refused; every 2 s an honest
// newcomer presents from a network of its own, honest(k). It returns how
// many of the honest presentations were allowed at once, of how many.
func pollPresent(t *testing.T, l *presentLimiter, attacker, honest func(i int) addrNets) (ok, tries, ids int) {
	t.Helper()
	now := time.Unix(10000, 0)
	for step := range 600 {
		now = now.Add(100 * time.Millisecond)
		for k := 0; k < 1000; k++ { // the attacker polls until refused
			_, p := testutil.NewKey(t)
			ids++
			if l.allow(p, attacker(ids), now) == presentRefused {
				break
			}
		}
		if step%20 == 10 {
			tries++
			_, p := testutil.NewKey(t)
			if l.allow(p, honest(tries), now) == presentAllowed {
				ok++
			}
		}
	}
	return ok, tries, ids
}

func netsFor(t *testing.T, addr string) addrNets {
	t.Helper()
	return netsOfAddr(netip.MustParseAddr(addr), false)
}

// The presentation limiter had one global bucket (32, one a second) and
// no share per network, and a refused attempt costs nothing: fresh peer
// IDs polling it took every token as it refilled, and an honest
// newcomer's presentation (the way it is admitted through the trust
// quorum without a session) was reset BUSY every time. Now the presenters
// of one IPv4 /24 or IPv6 /48 share a quarter of the node's rate, those
// of one IPv6 /32 half of it.
func TestPresentLimiterNetworkShares(t *testing.T) {
	for _, c := range []struct {
		name     string
		attacker func(i int) addrNets
	}{
		{"one IPv4 /24", func(i int) addrNets { return netsFor(t, fmt.Sprintf("203.0.113.%d", i%250+1)) }},
		{"IPv6 /48s of one /32", func(i int) addrNets {
			return netsFor(t, fmt.Sprintf("2001:db8:%x::%x", i%65536, i%200+1))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var l presentLimiter
			honest := func(k int) addrNets { return netsFor(t, fmt.Sprintf("198.51.%d.7", k)) }
			ok, tries, ids := pollPresent(t, &l, c.attacker, honest)
			t.Logf("attacker used %d peer IDs (%d tracked, %d prefixes, %d blocks); honest presentations allowed %d of %d",
				ids, len(l.peers), len(l.prefixes), len(l.blocks), ok, tries)
			if ok < tries {
				t.Fatalf("an honest presenter was allowed %d times of %d in 60 s while fresh IDs of one network polled", ok, tries)
			}
			if len(l.peers) > presentTracked || len(l.prefixes) > presentTrackedNets || len(l.blocks) > presentTrackedNets {
				t.Fatalf("tables past their bounds: %d peers, %d prefixes, %d blocks", len(l.peers), len(l.prefixes), len(l.blocks))
			}
		})
	}
}

// Fresh IDs from ever new networks can still drain the global bucket, but
// only down to its reserve: below it a presentation is on trial, and the
// reserve stays for those that earn it.
func TestPresentLimiterReserve(t *testing.T) {
	var l presentLimiter
	now := time.Unix(10000, 0)
	allowed, trial := 0, 0
	for i := range 200 {
		_, p := testutil.NewKey(t)
		switch l.allow(p, netsFor(t, fmt.Sprintf("10.%d.%d.1", i/256, i%256)), now) {
		case presentAllowed:
			allowed++
		case presentOnTrial:
			trial++
		}
	}
	if allowed != PresentGlobalBurst-presentReserve || trial == 0 {
		t.Fatalf("a burst from 200 networks: %d allowed, %d on trial; want %d allowed, then trials", allowed, trial, PresentGlobalBurst-presentReserve)
	}
	for range presentReserve {
		if !l.takeReserve(now) {
			t.Fatal("the reserve was spent by presentations on trial that did not earn it")
		}
	}
	if l.takeReserve(now) {
		t.Fatal("took more than the reserve")
	}
}

// presentHost is a bare libp2p host on loopback.
func presentHost(t *testing.T) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// presentRaw presents envs to n from h: the count learned, or the error.
func presentRaw(t *testing.T, h host.Host, n *Node, envs ...[]byte) (uint64, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Connect(ctx, peer.AddrInfo{ID: n.ID(), Addrs: n.host.Addrs()}); err != nil {
		t.Fatal(err)
	}
	s, err := h.NewStream(ctx, n.ID(), PresentProtocol)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.SetDeadline(time.Now().Add(5 * time.Second))
	return presentOn(s, envs...)
}

// Down to the reserve, a presentation goes on only if one of its first
// records is by an issuer the node admits directly (then all its records
// are learned), or its presenter is admitted already.
func TestPresentationOnTrial(t *testing.T) {
	vk, _ := testutil.NewKey(t)
	v := newBareNode(t, Config{Key: vk, RequireSource: AnySource, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ik, issuer := testutil.NewKey(t)
	if err := IssueEnvelope(v, SealTest(vk, issuer, true, time.Now(), time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !v.admitsDirectly(issuer) {
		t.Fatal("the node does not admit its issuer directly")
	}
	otherKey, _ := testutil.NewKey(t)
	low := func(tokens float64) {
		v.presentLimit.mu.Lock()
		v.presentLimit.global = tokenBucket{tokens: tokens, at: time.Now()}
		v.presentLimit.mu.Unlock()
	}
	busy := func(err error) bool {
		var se *network.StreamError
		return errors.As(err, &se) && se.ErrorCode == protocol.ErrCodeBusy
	}

	low(3)
	a := presentHost(t)
	if got, err := presentRaw(t, a, v, SealTest(otherKey, a.ID(), true, time.Now(), time.Hour)); !busy(err) {
		t.Fatalf("on trial, records by an unknown issuer only: learned %d, %v; want BUSY", got, err)
	}
	for deadline := time.Now().Add(2 * time.Second); v.Stats().PresentationsLimited == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if st := v.Stats(); st.LearnedPresentation != 0 || st.PresentationsLimited != 1 {
		t.Fatalf("after a refused trial: %d learned, %d limited", st.LearnedPresentation, st.PresentationsLimited)
	}
	b := presentHost(t)
	// The bucket refills a token a second: under load the steps above
	// took over a second, and a token refilled since low(3) hid the one
	// taken (3.22 left, GOMAXPROCS=1 at load 17). Lowered again here;
	// what was taken is counted net of the refill up to its last take.
	low(3)
	v.presentLimit.mu.Lock()
	lowAt := v.presentLimit.global.at
	v.presentLimit.mu.Unlock()
	got, err := presentRaw(t, b, v,
		SealTest(otherKey, b.ID(), true, time.Now(), time.Hour),
		SealTest(ik, b.ID(), true, time.Now(), time.Hour))
	if err != nil || got != 2 {
		t.Fatalf("on trial, with a record by an issuer the node admits directly second: learned %d, %v; want 2", got, err)
	}
	v.presentLimit.mu.Lock()
	left, refilled := v.presentLimit.global.tokens, float64(v.presentLimit.global.at.Sub(lowAt))/float64(PresentGlobalEvery)
	v.presentLimit.mu.Unlock()
	if taken := 3 + refilled - left; taken < 0.999 {
		t.Fatalf("the presentation that earned the reserve took no token: %.2f left, %.2f refilled since 3", left, refilled)
	}
	// A record by a trusted issuer after the first presentReserveProbe
	// ones comes too late.
	c := presentHost(t)
	envs := make([][]byte, 0, presentReserveProbe+1)
	for range presentReserveProbe {
		k, _ := testutil.NewKey(t)
		envs = append(envs, SealTest(k, c.ID(), true, time.Now(), time.Hour))
	}
	envs = append(envs, SealTest(ik, c.ID(), true, time.Now(), time.Hour))
	low(3)
	if got, err := presentRaw(t, c, v, envs...); !busy(err) {
		t.Fatalf("on trial, the trusted record past the first %d: learned %d, %v; want BUSY", presentReserveProbe, got, err)
	}
	// A record the receiver skips earns no reserved token, even by a
	// trusted issuer: one valid for more than 30 days (trust.md §3.5).
	e := presentHost(t)
	low(3)
	if got, err := presentRaw(t, e, v, SealTest(ik, e.ID(), true, time.Now(), MaxKeptLifetime+time.Second)); !busy(err) {
		t.Fatalf("on trial, the trusted record valid for more than 30 days: learned %d, %v; want BUSY", got, err)
	}
	// Above the reserve, any valid presentation is read.
	low(PresentGlobalBurst)
	d := presentHost(t)
	if got, err := presentRaw(t, d, v, SealTest(otherKey, d.ID(), true, time.Now(), time.Hour)); err != nil || got != 1 {
		t.Fatalf("above the reserve: learned %d, %v; want 1", got, err)
	}
}

// netsOf groups a direct connection by its IP's prefix (and IPv6 /32),
// and a relayed one by its relay's network, whatever the relay's peer ID,
// as the protocol's budget groups (spec/protocol.md §9a).
func TestNetsOf(t *testing.T) {
	relayA, relayB := "12D3KooWDmk3Lap6BGxB3XELbLnqzrzG9gXSMhWsPmFj9JtQqy1g", "12D3KooWLxyAuZJD2DnFW4ewuGXbu5ooehbvR7Wf7CdXm7jD1jGk"
	dest := "/p2p/12D3KooWRBy97UB99e3J6hiPesre1MZeuNQvfan4gBziswrRJsNK"
	for _, c := range []struct {
		addr          string
		limitLoopback bool
		prefix, block string // "" for none
	}{
		{"/ip4/203.0.113.9/tcp/4001", false, "203.0.113.0/24", ""},
		{"/ip6/2001:db8:1:2::9/udp/4001/quic-v1", false, "2001:db8:1::/48", "2001:db8::/32"},
		{"/ip4/127.0.0.1/tcp/4001", false, "", ""},
		{"/ip4/127.0.0.1/tcp/4001", true, "127.0.0.0/24", ""},
		{"/ip4/203.0.113.9/tcp/4001/p2p/" + relayA + "/p2p-circuit" + dest, false, "relay", ""},
		{"/ip4/127.0.0.1/tcp/4001/p2p/" + relayA + "/p2p-circuit" + dest, false, "relay", ""},
	} {
		nets, known := netsOf(ma.StringCast(c.addr), c.limitLoopback)
		want := func(s string, got netip.Prefix) {
			t.Helper()
			switch {
			case s == "relay" && (!got.IsValid() || got.Bits() != 128):
				t.Errorf("%s: group %s, want a relay's", c.addr, got)
			case s == "" && got.IsValid(), s != "" && s != "relay" && got.String() != s:
				t.Errorf("%s: group %s, want %q", c.addr, got, s)
			}
		}
		if !known {
			t.Errorf("%s: no group", c.addr)
		}
		want(c.prefix, nets.prefix)
		want(c.block, nets.block)
	}
	a, _ := netsOf(ma.StringCast("/ip4/203.0.113.9/tcp/4001/p2p/"+relayA+"/p2p-circuit"+dest), false)
	a2, _ := netsOf(ma.StringCast("/ip4/198.51.100.1/udp/4001/quic-v1/p2p/"+relayA+"/p2p-circuit"+dest), false)
	b, _ := netsOf(ma.StringCast("/ip4/203.0.113.9/tcp/4001/p2p/"+relayB+"/p2p-circuit"+dest), false)
	if a == a2 || a != b {
		t.Errorf("relay groups: one relay at two networks %v %v (want two), another relay at the first address %v (want the first's)", a.prefix, a2.prefix, b.prefix)
	}
}

// A presenter that sends the same envelope again, in one presentation
// or the next, cost a signature check each time; the node now remembers
// the envelopes it verified (by SHA-256) and checks again only what
// depends on the presenter and the time.
func TestPresentedEnvelopeVerifiedOnce(t *testing.T) {
	vk, _ := testutil.NewKey(t)
	v := newBareNode(t, Config{Key: vk, RequireSource: AnySource, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	a := presentHost(t)
	ik, _ := testutil.NewKey(t)
	env := SealTest(ik, a.ID(), true, time.Now(), time.Hour)
	envs := make([][]byte, MaxPresented)
	for i := range envs {
		envs[i] = env
	}
	for i := range 2 {
		if got, err := presentRaw(t, a, v, envs...); err != nil || got != uint64(1-i) {
			t.Fatalf("presentation %d: learned %d, %v", i+1, got, err)
		}
	}
	if n := v.presentSeen.Checked(); n != 1 {
		t.Fatalf("%d signature checks for one envelope presented %d times, want 1", n, 2*MaxPresented)
	}
	// The cached record is still checked against its presenter: another
	// peer that replays it commits a protocol violation.
	b := presentHost(t)
	var se *network.StreamError
	if _, err := presentRaw(t, b, v, env); !errors.As(err, &se) || se.ErrorCode != protocol.ErrCodeProtocolViolation {
		t.Fatalf("a replay by another presenter: %v, want a protocol violation", err)
	}
	// And against the time: an expired record is skipped, cached or not.
	old := SealTest(ik, a.ID(), true, time.Now().Add(-2*time.Hour), time.Hour)
	for i := range 2 {
		if got, err := presentRaw(t, a, v, old); err != nil || got != 0 {
			t.Fatalf("an expired record, presentation %d: learned %d, %v", i+1, got, err)
		}
	}
}
