package protocol

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"

	"github.com/acaptcha/acaptcha/protocol/pb"
)

// hostAt is a TCP host listening on ip (any 127.x.y.z is loopback on
// Linux, so tests can place peers in distinct /24s).
func hostAt(t testing.TB, ip string) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/"+ip+"/tcp/0"), libp2p.Transport(tcp.NewTCPTransport),
		libp2p.DisableRelay(), libp2p.DisableMetrics())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// silentStream opens a stream from m to p that sends nothing and returns
// how long until the prover ended it (a reset or its BUSY decline).
func silentStream(t *testing.T, ctx context.Context, m, p host.Host) time.Duration {
	t.Helper()
	s, err := m.NewStream(ctx, p.ID(), ID)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	// A lazy stream's protocol is negotiated on its first write or read:
	// the read does it and then waits for the prover.
	_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
	t0 := time.Now()
	_, _ = io.Copy(io.Discard, s)
	return time.Since(t0)
}

// Silent streams (spec §6 step 1): a stream that sends no hello holds an
// inbound slot for HelloTimeout only, and a budget group that sends
// SilentStrikes of them is in probation: one slot at a time for its
// untrusted peers, while verifiers of other groups are served.
func TestSilentStreamsProbation(t *testing.T) {
	src := sourceOf("silent-1", "silent-2")
	p := hostAt(t, "127.0.0.1")
	const hello = time.Second
	svc := newService(t, p, Config{Prover: oracleProver(0, src.sets...), LimitLoopback: true, HelloTimeout: hello})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	m := hostAt(t, "127.0.1.1")
	if err := p.Connect(ctx, peer.AddrInfo{ID: m.ID(), Addrs: m.Addrs()}); err != nil {
		t.Fatal(err)
	}
	pfx := netip.MustParsePrefix("127.0.1.0/24")
	// Each silent stream ends after the hello timeout, not the handshake
	// timeout (10 s), and counts a strike.
	for i := range SilentStrikes {
		if d := silentStream(t, ctx, m, p); d < hello/2 || d > 4*time.Second {
			t.Fatalf("silent stream %d ended after %v, want about %v", i, d, hello)
		}
	}
	waitFor(t, "the strikes to be counted", func() bool {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		return svc.inProbationLocked(pfx, svc.now())
	})
	// In probation: one stream of the group at a time waits for its
	// hello; the next one, even from another peer ID, takes its place
	// and the older is reset at once, so the group never holds more than
	// one silent stream. (The other peer connects first: the slot is
	// held for one hello timeout only.)
	m2 := hostAt(t, "127.0.1.2")
	if err := p.Connect(ctx, peer.AddrInfo{ID: m2.ID(), Addrs: m2.Addrs()}); err != nil {
		t.Fatal(err)
	}
	first := make(chan time.Duration, 1)
	go func() { first <- silentStream(t, ctx, m, p) }()
	waitFor(t, "the probation slot to be taken", func() bool {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		return svc.perPrefix[pfx] == 1
	})
	second := make(chan time.Duration, 1)
	go func() { second <- silentStream(t, ctx, m2, p) }()
	if d := <-first; d >= hello/2 {
		t.Fatalf("the waiting stream of a group in probation held %v after a newer one came, want an immediate reset", d)
	}
	svc.mu.Lock()
	held := svc.perPrefix[pfx]
	svc.mu.Unlock()
	if held != 1 {
		t.Fatalf("the group holds %d slots, want the newer stream's one", held)
	}
	if d := <-second; d < hello/2 {
		t.Fatalf("the newer stream ended after %v, want the hello timeout", d)
	}
	// A verifier of another group is served meanwhile.
	v := hostAt(t, "127.0.2.1")
	vs := newService(t, v, Config{Source: src, LimitLoopback: true})
	if err := v.Connect(ctx, peer.AddrInfo{ID: p.ID(), Addrs: p.Addrs()}); err != nil {
		t.Fatal(err)
	}
	res, err := vs.Verify(ctx, p.ID(), false)
	if err != nil || !res.Verdict.Accepted {
		t.Fatalf("honest verifier of another group: %v %+v", err, res)
	}
	// The probation ends SilentWindow after the last strike.
	svc.mu.Lock()
	in := svc.inProbationLocked(pfx, svc.now().Add(SilentWindow+time.Second))
	svc.mu.Unlock()
	if in {
		t.Fatal("probation did not end after the window")
	}
}

// The last quarter of the global inbound slots is kept for trusted
// verifiers (spec §6 step 1), as for the prover's budgets.
func TestInboundReserveForTrusted(t *testing.T) {
	svc := &Service{cfg: Config{MaxInbound: 8, MaxInboundPerPeer: 8, MaxInboundPerPrefix: 8, Now: time.Now},
		perPeer: map[peer.ID]int{}, perPrefix: map[netip.Prefix]int{}, silent: map[netip.Prefix]*silentGroup{}}
	for i := range 6 {
		if svc.acquireInbound(peer.ID(fmt.Sprint("fresh", i)), netip.Prefix{}, false, false, nil) == nil {
			t.Fatalf("untrusted %d refused below the reserve", i)
		}
	}
	if svc.acquireInbound("fresh-x", netip.Prefix{}, false, false, nil) != nil {
		t.Fatal("an untrusted verifier took a kept slot")
	}
	for i := range 2 {
		if svc.acquireInbound(peer.ID(fmt.Sprint("trusted", i)), netip.Prefix{}, false, true, nil) == nil {
			t.Fatalf("trusted %d refused a kept slot", i)
		}
	}
	if svc.acquireInbound("trusted-x", netip.Prefix{}, false, true, nil) != nil {
		t.Fatal("more slots than MaxInbound")
	}
	// A node that admits nobody keeps at least one slot usable: a budget
	// of one keeps nothing.
	one := &Service{cfg: Config{MaxInbound: 1, MaxInboundPerPeer: 1, MaxInboundPerPrefix: 1, Now: time.Now},
		perPeer: map[peer.ID]int{}, perPrefix: map[netip.Prefix]int{}, silent: map[netip.Prefix]*silentGroup{}}
	if one.acquireInbound("fresh", netip.Prefix{}, false, false, nil) == nil {
		t.Fatal("a budget of one slot kept it from everyone")
	}
}

// The silent table is bounded: past maxSilentGroups it forgets the
// expired entries, then the older half.
func TestSilentTableBounded(t *testing.T) {
	svc := &Service{silent: map[netip.Prefix]*silentGroup{}}
	now := time.Unix(1e6, 0)
	for i := range 3 * maxSilentGroups {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0})
		svc.strikeSilent(netip.PrefixFrom(a, 24), now.Add(time.Duration(i)*time.Millisecond))
	}
	if n := len(svc.silent); n > maxSilentGroups || n < maxSilentGroups/2 {
		t.Fatalf("%d groups in the table, want at most %d", n, maxSilentGroups)
	}
	// The newest group is kept.
	i := 3*maxSilentGroups - 1
	last := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)
	if svc.silent[last] == nil {
		t.Fatal("the newest group was evicted")
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A hello declined for what it says (a bad one, a version of another
// major, one whose spec_version does not parse, a total above what the
// prover accepts) or because its sender's own budgets are spent ran no
// session and held a slot for the decline linger: it is silent (spec §6
// step 1), so a group reopening such hellos enters probation as one
// reopening silent streams does. (They were not silent: a group sent
// them without end and kept its 16 slots.)
func TestDeclinedHellosAreSilent(t *testing.T) {
	for i, c := range []struct {
		name   string
		cfg    Config
		mutate func(*pb.Hello)
		reason pb.DeclineReason
	}{
		{"major version 2", Config{}, func(h *pb.Hello) { h.SpecVersion = "2.0.0" }, pb.DeclineReason_DECLINE_REASON_UNSUPPORTED_VERSION},
		{"empty version", Config{}, func(h *pb.Hello) { h.SpecVersion = "" }, pb.DeclineReason_DECLINE_REASON_UNSUPPORTED_VERSION},
		{"bad nonce", Config{}, func(h *pb.Hello) { h.Nonce = nil }, pb.DeclineReason_DECLINE_REASON_BAD_HELLO},
		{"total above the cap", Config{MaxAcceptTotal: time.Minute}, func(h *pb.Hello) { h.TotalMs = 120_000 }, pb.DeclineReason_DECLINE_REASON_BAD_HELLO},
		{"own network's session budget spent", Config{MaxSessionsPerVerifierPrefix: 1}, nil, pb.DeclineReason_DECLINE_REASON_BUSY},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := hostAt(t, "127.0.0.1")
			cfg := c.cfg
			cfg.Prover, cfg.LimitLoopback = constProver("x"), true
			svc := newService(t, p, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// Verifiers of one /24: a refusal for their own budgets
			// strikes once per verifier and window, so each hello there
			// comes from another peer ID (fresh IDs cost nothing).
			verifiers := make([]host.Host, SilentStrikes)
			for j := range verifiers {
				verifiers[j] = hostAt(t, fmt.Sprintf("127.0.%d.%d", 10+i, 1+j))
				if err := p.Connect(ctx, peer.AddrInfo{ID: verifiers[j].ID(), Addrs: verifiers[j].Addrs()}); err != nil {
					t.Fatal(err)
				}
			}
			m := verifiers[0]
			pfx := netip.MustParsePrefix(fmt.Sprintf("127.0.%d.0/24", 10+i))
			sent := 0
			if c.reason == pb.DeclineReason_DECLINE_REASON_BUSY {
				spendSession(t, m, p) // the budget: one session
			}
			for j := range SilentStrikes {
				if c.reason == pb.DeclineReason_DECLINE_REASON_BUSY {
					m = verifiers[j]
				}
				r := openRaw(t, m, p.ID())
				r.send(helloFrame(m.ID(), p.ID(), c.mutate))
				f, err := r.recv()
				if err != nil || f.GetDecline().GetReason() != c.reason {
					t.Fatalf("hello %d: %v %v, want a %s decline", sent, f, err, c.reason)
				}
				r.s.CloseWrite()
				_, _ = r.recv()
				sent++
			}
			waitFor(t, "the group to enter probation", func() bool {
				svc.mu.Lock()
				defer svc.mu.Unlock()
				return svc.inProbationLocked(pfx, svc.now())
			})
		})
	}
}

// A refusal for the verifier's own budgets (its peer's, network's or
// /32's) is its own doing; one for the node's budget is not (the hello is
// then no strike: the node's load is no fault of the verifier's).
func TestAdmitSessionOwnRefusal(t *testing.T) {
	b, cfg, now := budgetsWith(t, Config{MaxSessionsPerVerifier: 2, MaxProverSessions: 64})
	pfx := netip.MustParsePrefix("198.51.100.0/24")
	for range 2 {
		if _, _, why := b.admitSessionOwn(sybil(0, 0), pfx, true, 1, now); why != "" {
			t.Fatal(why)
		}
	}
	if _, own, why := b.admitSessionOwn(sybil(0, 0), pfx, true, 1, now); why == "" || !own {
		t.Fatalf("a verifier past its own budget: admitted=%v own=%v", why == "", own)
	}
	// The node's sessions, spent by many networks within their shares.
	nodeRefuses(t, "session", 4*cfg.MaxProverSessions, func(i int) (bool, bool) {
		_, own, why := b.admitSessionOwn(sybil(i, 0), net48(i), true, 1, now)
		return why == "", own
	})
	if ok, own := b.chargePowOwn(sybil(0, 1), pfx, true, 62, now); ok || !own {
		t.Fatalf("proof of work beyond the network's share: ok=%v own=%v", ok, own)
	}
	// The node's proof-of-work budget, spent by many networks each within
	// its share: a refusal that is not the verifier's doing.
	pb2, _, now2 := budgetsWith(t, Config{MaxProverPowWork: 1 << 20})
	nodeRefuses(t, "work", 1000, func(i int) (bool, bool) {
		return pb2.chargePowOwn(sybil(i, 0), net48(i), true, 16, now2)
	})
}

// nodeRefuses has networks 1, 2, ... (at most max) try until one is
// refused, and fails unless that refusal came from the node's own budget
// (own false).
func nodeRefuses(t *testing.T, what string, max int, try func(i int) (ok, own bool)) {
	t.Helper()
	for i := 1; i < max; i++ {
		ok, own := try(i)
		if ok {
			continue
		}
		if own {
			t.Fatalf("network %d refused for the node's %s budget but told its own", i, what)
		}
		return
	}
	t.Fatalf("the node's %s budget never ran out", what)
}

// A verifier that retries a node whose budgets for it are spent (the
// reference verifier does: 2, 4, 8, 16, 32 s, then every minute) strikes
// its group once per window, not once per hello: an honest one would
// otherwise put its own group in probation.
func TestOwnBudgetStrikesOncePerVerifier(t *testing.T) {
	p := hostAt(t, "127.0.0.1")
	svc := newService(t, p, Config{Prover: constProver("x"), LimitLoopback: true, MaxSessionsPerVerifier: 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := hostAt(t, "127.0.30.1")
	if err := p.Connect(ctx, peer.AddrInfo{ID: m.ID(), Addrs: m.Addrs()}); err != nil {
		t.Fatal(err)
	}
	pfx := netip.MustParsePrefix("127.0.30.0/24")
	spendSession(t, m, p)
	for j := range 2 * SilentStrikes {
		r := openRaw(t, m, p.ID())
		r.send(helloFrame(m.ID(), p.ID(), nil))
		if f, err := r.recv(); err != nil || f.GetDecline().GetReason() != pb.DeclineReason_DECLINE_REASON_BUSY {
			t.Fatalf("hello %d: %v %v, want BUSY", j, f, err)
		}
		r.s.CloseWrite()
		_, _ = r.recv()
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if g := svc.silent[pfx]; g == nil || g.strikes != 1 || svc.inProbationLocked(pfx, svc.now()) {
		t.Fatalf("%d refused hellos of one verifier: group %+v, want one strike and no probation", 2*SilentStrikes, g)
	}
}

// spendSession runs one session of m against p's prover that ends at once
// (hello, ack, an inconclusive verdict): it spends one of m's sessions.
func spendSession(t *testing.T, m, p host.Host) {
	t.Helper()
	r := openRaw(t, m, p.ID())
	r.send(helloFrame(m.ID(), p.ID(), nil))
	if f, err := r.recv(); err != nil || f.GetHelloAck() == nil {
		t.Fatalf("first hello: %v %v", f, err)
	}
	r.send(&pb.Frame{Body: &pb.Frame_Verdict{Verdict: &pb.Verdict{Reason: "inconclusive"}}})
	r.s.CloseWrite()
	_, _ = r.recv()
}
