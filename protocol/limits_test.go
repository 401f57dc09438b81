package protocol

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/acaptcha/acaptcha/skill"
)

// The prover's answerer-call and prompt-token budgets (spec §9a): per
// verifier prefix an eighth of the node's, and the node's last quarter
// kept for the verifiers it trusts, as for sessions and proof of work.
// Fresh peer IDs cost a verifier nothing; these are what bound them.

// budgetsWith returns the budgets of cfg (defaults filled in) and a clock.
func budgetsWith(t *testing.T, cfg Config) (*budgets, *Config, time.Time) {
	t.Helper()
	if err := cfg.applyDefaults(); err != nil {
		t.Fatal(err)
	}
	return newBudgets(&cfg), &cfg, time.Unix(9000, 0)
}

// net48 is an IPv6 /48 of the i-th /32 of 3fff::/20 (RFC 9637's
// documentation prefix), i < 4096: networks of distinct holders, each
// in its own /32 block.
func net48(i int) netip.Prefix {
	return in32(0x3fff0000|uint32(i&0xfff), 0)
}

// in32 is the j-th /48 of the IPv6 /32 whose first 32 bits are blk.
func in32(blk uint32, j int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom16([16]byte{byte(blk >> 24), byte(blk >> 16), byte(blk >> 8), byte(blk), byte(j >> 8), byte(j)}), 48)
}

// sybil is the j-th fresh peer ID of network i (cheap: the budgets only
// key on it).
func sybil(i, j int) peer.ID { return peer.ID(fmt.Sprintf("sybil-%d-%d", i, j)) }

// fullRound is the token bound of a round of the largest size.
var fullRound = skill.TokenBound(skill.MaxNarrativeBytes) + skill.TokenBound(skill.MaxQuestionBytes)

// spendTokens has the fresh verifiers of pfx spend what the budgets let
// them read: sessions of three rounds, each round as large as it can be
// (halved until it fits), a fresh ID once one is refused. It returns the
// tokens charged; every loop is bounded.
func spendTokens(b *budgets, net int, pfx netip.Prefix, now time.Time) (charged int) {
	for j := 0; j < 400; j++ {
		p := sybil(net, j)
		admitted := 0
		for k := 0; k < 40; k++ {
			if ok, _ := b.admitSessionIn(p, pfx, true, 3, now); !ok {
				break
			}
			admitted++
			for r := 0; r < 3; r++ {
				n := fullRound
				for n > 0 && !b.chargeTokensIn(p, pfx, true, n, now) {
					n /= 2
				}
				charged += n
			}
		}
		if admitted == 0 && j > 0 {
			return charged // a fresh ID of this network is refused: spent
		}
	}
	return charged
}

func globalTokens(b *budgets) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tokens.tokens
}

// One IPv6 /48 of fresh peer IDs sending full-size narratives reads at
// most an eighth of the node's prompt tokens; the next network is served.
func TestProverTokensPrefixShare(t *testing.T) {
	b, cfg, now := budgetsWith(t, Config{})
	charged := spendTokens(b, 1, net48(1), now)
	share := cfg.MaxProverTokens / proverPrefixShare
	// A hello needs a session's hold (SessionTokens) left.
	if charged > share || charged < share-SessionTokens(3) {
		t.Fatalf("one /48 of fresh IDs read %d prompt tokens, want its share of %d (an eighth of %d)", charged, share, cfg.MaxProverTokens)
	}
	if ok, why := b.admitSessionIn(sybil(2, 0), net48(2), true, 3, now); !ok || !b.chargeTokensIn(sybil(2, 0), net48(2), true, fullRound, now) {
		t.Fatalf("a verifier of another /48 refused after the first spent its share (%s)", why)
	}
	// The spent /48 is refused at the hello, as a network.
	if ok, why := b.admitSessionIn(sybil(1, 999), net48(1), true, 3, now); ok || !strings.Contains(why, "network") {
		t.Fatalf("a fresh ID of the spent /48: admitted=%v %q", ok, why)
	}
}

// Fresh IDs from as many /48s as it takes read the node's prompt tokens
// down to the quarter kept for trusted verifiers, and no further: a
// verifier the node admits still gets its rounds read, an unknown one is
// refused BUSY at the hello. (Before: one /48 spent all 4 000 000 tokens
// and the node refused every verifier for the hour.)
func TestProverTokenReserveForTrusted(t *testing.T) {
	trusted := randomPeer(t)
	b, cfg, now := budgetsWith(t, Config{TrustedPeer: func(p peer.ID) bool { return p == trusted }})
	total, nets := 0, 0
	for i := 1; i <= 40; i++ {
		n := spendTokens(b, i, net48(i), now)
		if n == 0 {
			break
		}
		total += n
		nets++
	}
	kept := float64(cfg.MaxProverTokens / proverReserve)
	left := globalTokens(b)
	t.Logf("%d /48s of fresh IDs read %d prompt tokens; %.0f left", nets, total, left)
	if left > kept+float64(fullRound) || left < kept-float64(fullRound) {
		t.Fatalf("untrusted verifiers left %.0f of %d tokens, want the kept quarter (%.0f)", left, cfg.MaxProverTokens, kept)
	}
	if ok, why := b.admitSessionIn(sybil(900, 0), net48(900), true, 3, now); ok || !strings.Contains(why, "trusts") {
		t.Fatalf("an unknown verifier of a fresh /48 with only the kept quarter left: admitted=%v %q", ok, why)
	}
	tpfx := netip.MustParsePrefix("198.51.100.0/24")
	ok, why := b.admitSessionIn(trusted, tpfx, true, 3, now)
	if !ok {
		t.Fatalf("a verifier this node admits refused at the hello: %s", why)
	}
	for r := 0; r < 3; r++ {
		if !b.chargeTokensIn(trusted, tpfx, true, 2000, now) {
			t.Fatalf("a verifier this node admits: round %d of 2,000 tokens refused", r+1)
		}
	}
}

// Fresh IDs of three /48s (20 IDs x 40 sessions x 3 rounds each) make at
// most an eighth of the node's answerer calls each, and a verifier of
// another network is still admitted.
func TestProverCallsPrefixShare(t *testing.T) {
	b, cfg, now := budgetsWith(t, Config{})
	for i := 1; i <= 3; i++ {
		sessions := 0
		for j := 0; j < 20; j++ {
			for k := 0; k < 40; k++ {
				if ok, _ := b.admitSessionIn(sybil(i, j), net48(i), true, 3, now); ok {
					sessions++
				}
			}
		}
		if share := cfg.MaxProverCalls / proverPrefixShare; 3*sessions > share || 3*sessions < share-3 {
			t.Fatalf("/48 number %d: %d sessions (%d calls) admitted, want its share of %d calls", i, sessions, 3*sessions, share)
		}
	}
	if ok, why := b.admitSessionIn(sybil(4, 0), net48(4), true, 3, now); !ok {
		t.Fatalf("a verifier of a fourth /48 refused: %s", why)
	}
	if ok, why := b.admitSessionIn(sybil(1, 99), net48(1), true, 3, now); ok || !strings.Contains(why, "answerer-call budget for this verifier's network") {
		t.Fatalf("a fresh ID of a spent /48: admitted=%v %q", ok, why)
	}
}

// Fresh IDs of as many networks as it takes reserve the node's answerer
// calls down to the quarter kept for trusted verifiers: then an unknown
// verifier is refused BUSY at the hello and an admitted one is not.
// (Before: three /48s took all 1 800 calls.)
func TestProverCallReserveForTrusted(t *testing.T) {
	trusted := randomPeer(t)
	b, cfg, now := budgetsWith(t, Config{TrustedPeer: func(p peer.ID) bool { return p == trusted }})
	calls := 0
	for i := 1; i <= 30; i++ {
		for j := 0; j < 20; j++ {
			for k := 0; k < 40; k++ {
				if ok, _ := b.admitSessionIn(sybil(i, j), net48(i), true, 3, now); ok {
					calls += 3
				}
			}
		}
	}
	if want := cfg.MaxProverCalls - cfg.MaxProverCalls/proverReserve; calls > want || calls < want-2 {
		t.Fatalf("untrusted verifiers reserved %d answerer calls of %d, want %d (the last quarter kept)", calls, cfg.MaxProverCalls, want)
	}
	if ok, why := b.admitSessionIn(sybil(900, 0), net48(900), true, 1, now); ok || !strings.Contains(why, "answerer-call budget of this node spent but for the share kept") {
		t.Fatalf("an unknown verifier of a fresh /48 with only the kept quarter of calls left: admitted=%v %q", ok, why)
	}
	if ok, why := b.admitSessionIn(trusted, netip.MustParsePrefix("198.51.100.0/24"), true, 3, now); !ok {
		t.Fatalf("a verifier this node admits refused at the hello: %s", why)
	}
}

// The kept quarter of calls and tokens follows reserveFor: whole units,
// and a full budget always takes one unit (one call, one round's tokens),
// whatever its size; a prefix's share is at least one session's worth.
func TestProverCallTokenReserveSmallBudgets(t *testing.T) {
	if fullRound != 23210 {
		t.Fatalf("a full-size round's token bound is %d; spec §9a says 23 210", fullRound)
	}
	for _, tc := range []struct{ calls, tokens, rounds, round int }{
		{3, 1, 3, 1}, {4, 100, 3, 100}, {5, 7, 3, 4}, {3, fullRound, 3, fullRound}, {7, 3 * fullRound, 3, fullRound},
	} {
		b, _, now := budgetsWith(t, Config{MaxProverCalls: tc.calls, MaxProverTokens: tc.tokens})
		pfx := netip.MustParsePrefix("203.0.113.0/24")
		p := sybil(tc.calls, tc.tokens)
		if ok, why := b.admitSessionIn(p, pfx, true, tc.rounds, now); !ok {
			t.Errorf("calls %d, tokens %d: the first untrusted %d-round session refused (%s)", tc.calls, tc.tokens, tc.rounds, why)
			continue
		}
		if !b.chargeTokensIn(p, pfx, true, tc.round, now) {
			t.Errorf("calls %d, tokens %d: the first untrusted round of %d tokens refused", tc.calls, tc.tokens, tc.round)
		}
	}
}

// Calls and tokens a session reserved and did not use go back to its
// network's share as well as to the verifier's and the node's.
func TestProverPrefixRefunds(t *testing.T) {
	b, cfg, now := budgetsWith(t, Config{MaxProverCalls: 48, MaxProverTokens: 8 * fullRound})
	pfx := netip.MustParsePrefix("203.0.113.0/24")
	// The /24's share: 6 calls (two three-round sessions), one full round.
	if ok, why := b.admitSessionIn(sybil(1, 1), pfx, true, 3, now); !ok {
		t.Fatal(why)
	}
	if ok, why := b.admitSessionIn(sybil(1, 2), pfx, true, 3, now); !ok {
		t.Fatal(why)
	}
	if ok, why := b.admitSessionIn(sybil(1, 3), pfx, true, 1, now); ok || !strings.Contains(why, "network") {
		t.Fatalf("a third session past the /24's 6 calls: admitted=%v %q", ok, why)
	}
	b.refundCallsIn(sybil(1, 1), pfx, true, 2, now)
	if ok, why := b.admitSessionIn(sybil(1, 3), pfx, true, 2, now); !ok {
		t.Fatalf("calls refunded did not go back to the /24: %s", why)
	}
	if !b.chargeTokensIn(sybil(1, 3), pfx, true, fullRound, now) {
		t.Fatal("the /24's one full round refused")
	}
	if b.chargeTokensIn(sybil(1, 2), pfx, true, 1, now) {
		t.Fatal("a round past the /24's token share")
	}
	b.refundTokensIn(sybil(1, 3), pfx, true, fullRound/2, now)
	if !b.chargeTokensIn(sybil(1, 2), pfx, true, fullRound/2, now) {
		t.Fatal("tokens refunded did not go back to the /24")
	}
	// Another network is untouched, and the share refills.
	if ok, why := b.admitSessionIn(sybil(2, 1), netip.MustParsePrefix("198.51.100.0/24"), true, 3, now); !ok {
		t.Fatal(why)
	}
	if ok, why := b.admitSessionIn(sybil(1, 4), pfx, true, 3, now.Add(cfg.ProverWindow/2)); !ok {
		t.Fatalf("the /24's share did not refill: %s", why)
	}
}

// spec §9a: a circuit-relayed connection is charged to the group of its
// relay's network (the /24 or /32 of the address it starts with), apart
// from that network's own group as a direct peer, loopback relays
// included; fresh peer IDs behind one relay share it, and so do fresh
// relay IDs at one address (a peer posing as a relay mints them freely).
func TestConnPrefixRelayed(t *testing.T) {
	s := &Service{}
	r1, r2 := randomPeer(t), randomPeer(t)
	via := func(ip string, relay peer.ID) ma.Multiaddr {
		return ma.StringCast(ip + "/tcp/4001/p2p/" + relay.String() + "/p2p-circuit")
	}
	direct, ok, known := s.connPrefix(ma.StringCast("/ip4/203.0.113.9/tcp/4001"))
	if !ok || !known || direct != netip.MustParsePrefix("203.0.113.0/24") {
		t.Fatalf("a direct connection: %v ok=%v known=%v", direct, ok, known)
	}
	g1, ok, known := s.connPrefix(via("/ip4/203.0.113.7", r1))
	if !ok || !known {
		t.Fatalf("a relayed connection has no group (ok=%v known=%v): fresh IDs behind relays skip every prefix budget", ok, known)
	}
	if g1 == direct || g1.Contains(netip.MustParseAddr("203.0.113.7")) {
		t.Fatalf("a connection relayed by 203.0.113.7 is charged to the relay's network (%v)", g1)
	}
	if g, _, _ := s.connPrefix(via("/ip4/203.0.113.7", r2)); g != g1 {
		t.Fatalf("two relay IDs at one address in two groups: %v, %v", g, g1)
	}
	if g, _, _ := s.connPrefix(via("/ip4/203.0.113.200", r2)); g != g1 {
		t.Fatalf("two relays of one /24 in two groups: %v, %v", g, g1)
	}
	if g, _, _ := s.connPrefix(via("/ip6/2001:db8::7", r1)); g == g1 {
		t.Fatalf("the same relay ID at another network shares its group (%v)", g)
	}
	if g, ok, _ := s.connPrefix(via("/ip4/127.0.0.1", r1)); !ok || g == g1 {
		t.Fatalf("a relay on loopback: %v ok=%v, want a group of its own (the relayed peer is not local)", g, ok)
	}
	// Never one of the IP groups DrawPrefix gives.
	for _, ip := range []string{"203.0.113.7", "2001:db8::7", "::1", "100::1"} {
		if pfx, _ := DrawPrefix(netip.MustParseAddr(ip), true); pfx == g1 {
			t.Fatalf("the relay group %v equals the prefix of %s", g1, ip)
		}
	}
	// The draw and session budgets of the relay group are apart from
	// those of the relay's own /24: fresh IDs behind the relay spend the
	// relay's, a direct peer of the relay's network keeps its own.
	b, _, now := budgetsWith(t, Config{MaxSessionsPerVerifierPrefix: 3})
	for j := 0; j < 3; j++ {
		if ok, why := b.admitSessionIn(sybil(0, j), g1, true, 1, now); !ok {
			t.Fatal(why)
		}
	}
	if ok, _ := b.admitSessionIn(sybil(0, 3), g1, true, 1, now); ok {
		t.Fatal("a fresh ID behind the spent relay was admitted")
	}
	if ok, why := b.admitSessionIn(sybil(1, 0), direct, true, 1, now); !ok {
		t.Fatalf("a direct peer of the relay's /24 refused after the relay's group spent its share: %s", why)
	}
}

// Fresh IDs of many /48s pay for draws until only the kept quarter of the
// global draws is left: they are refused from then on, a peer the node
// admits still draws (spec §9a; a prover's renewal or reciprocal run is
// not shut out by a sybil that spent the hour's draws).
func TestDrawReserveForTrusted(t *testing.T) {
	trusted := randomPeer(t)
	b, cfg, now := budgetsWith(t, Config{TrustedPeer: func(p peer.ID) bool { return p == trusted }})
	taken := 0
	for i := 1; i <= 100 && taken < cfg.MaxDraws; i++ {
		for j := 0; j < 200; j++ {
			p := sybil(i, j)
			if !b.canDrawIn(p, net48(i), true, now) {
				break
			}
			if !b.takeDrawIn(p, net48(i), true, now) {
				t.Fatalf("canDraw said yes, takeDraw no (net %d, peer %d)", i, j)
			}
			taken++
		}
	}
	kept := cfg.MaxDraws / proverReserve
	if want := cfg.MaxDraws - kept; taken != want {
		t.Fatalf("untrusted peers drew %d of %d, want all but the kept quarter (%d)", taken, cfg.MaxDraws, want)
	}
	if b.canDrawIn(sybil(900, 0), net48(900), true, now) || b.takeDrawIn(sybil(900, 0), net48(900), true, now) {
		t.Fatal("an unknown peer of a fresh /48 drew from the kept quarter")
	}
	tpfx := netip.MustParsePrefix("198.51.100.0/24")
	for k := range kept {
		if !b.canDrawIn(trusted, tpfx, true, now) || !b.takeDrawIn(trusted, tpfx, true, now) {
			t.Fatalf("a peer this node admits refused draw %d of the kept quarter", k+1)
		}
		if k+1 == cfg.MaxDrawsPerPeer {
			break
		}
	}
}

// A global draw budget of one is not kept from an unknown peer (a node
// that admits nobody yet still verifies).
func TestDrawReserveSmallBudget(t *testing.T) {
	b, _, now := budgetsWith(t, Config{MaxDraws: 1})
	if !b.takeDrawIn(sybil(1, 0), net48(1), true, now) {
		t.Fatal("the only draw of a budget of one refused to an unknown peer")
	}
}
