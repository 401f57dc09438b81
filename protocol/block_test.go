package protocol

import (
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// The IPv6 /32 tier of the budget groups (spec §9a): a holder of many
// /48s of one /32 gets BlockFactor /48s' worth, not one share per /48.

// attackerBlock is the /32 of the attacker's /42 (2001:db8:40::/42, 64
// /48s), and slash42 its i-th /48.
const attackerBlock = 0x20010db8

func slash42(i int) netip.Prefix { return in32(attackerBlock, 0x40+i) }

// neighbour48 is a /48 of the attacker's /32 outside its /42 (another
// customer of the same hoster).
var neighbour48 = in32(attackerBlock, 1)

// drawAll has fresh peer IDs of each /48 of the /42 draw until refused;
// it returns the sets drawn.
func drawAll(b *budgets, cfg *Config, now time.Time) (drawn int) {
	for i := range 64 {
		for j := range 2 * cfg.MaxDrawsPerPrefix / cfg.MaxDrawsPerPeer {
			for range cfg.MaxDrawsPerPeer {
				if b.takeDrawIn(sybil(1000+i, j), slash42(i), true, now) {
					drawn++
				}
			}
		}
	}
	return drawn
}

// Draws: the /42's fresh IDs took every draw not kept for admitted peers
// (750 of 1,000: 64 /48s of 100 each); now the /32's 200. A peer of
// another network and an admitted neighbour in the /32 still draw; a
// neighbour the node does not admit shares the spent /32 (the trade-off
// of spec §9a), while one abuser /48 in the /32 leaves it a /48's worth.
func TestBlockDrawBudget(t *testing.T) {
	admitted := peer.ID("admitted-neighbour")
	b, cfg, now := budgetsWith(t, Config{TrustedPeer: func(p peer.ID) bool { return p == admitted }})
	if cfg.MaxDrawsPerBlock != BlockFactor*cfg.MaxDrawsPerPrefix {
		t.Fatalf("MaxDrawsPerBlock %d, want %d times %d", cfg.MaxDrawsPerBlock, BlockFactor, cfg.MaxDrawsPerPrefix)
	}
	drawn := drawAll(b, cfg, now)
	untrusted := cfg.MaxDraws - int(keptFor(false, float64(cfg.MaxDraws), 1))
	t.Logf("a /42 (64 /48s) of fresh IDs drew %d sets of the %d open to peers the node does not admit", drawn, untrusted)
	if drawn != cfg.MaxDrawsPerBlock {
		t.Fatalf("the /42 drew %d sets, want its /32's %d", drawn, cfg.MaxDrawsPerBlock)
	}
	if !b.canDrawIn(sybil(900, 0), net48(900), true, now) || !b.takeDrawIn(sybil(900, 0), net48(900), true, now) {
		t.Fatal("a fresh peer of another /32 refused")
	}
	if !b.canDrawIn(admitted, neighbour48, true, now) || !b.takeDrawIn(admitted, neighbour48, true, now) {
		t.Fatal("an admitted peer of the attacker's /32 refused")
	}
	if b.canDrawIn(sybil(901, 0), neighbour48, true, now) || b.takeDrawIn(sybil(901, 0), neighbour48, true, now) {
		t.Fatal("an unadmitted peer of the spent /32 drew past the block's budget")
	}
	// The block refills over the window.
	if !b.takeDrawIn(sybil(902, 0), neighbour48, true, now.Add(cfg.DrawWindow/2)) {
		t.Fatal("the /32's budget did not refill")
	}

	// One abuser /48 in a shared /32: it spends its /48's 100, and a
	// neighbour /48 of the same /32 draws its own 100.
	b, cfg, now = budgetsWith(t, Config{})
	got := map[netip.Prefix]int{}
	for _, pfx := range []netip.Prefix{slash42(0), neighbour48} {
		for j := range 10 {
			for range cfg.MaxDrawsPerPeer {
				if b.takeDrawIn(sybil(int(pfx.Addr().As16()[5]), j), pfx, true, now) {
					got[pfx]++
				}
			}
		}
	}
	if got[slash42(0)] != cfg.MaxDrawsPerPrefix || got[neighbour48] != cfg.MaxDrawsPerPrefix {
		t.Fatalf("an abuser /48 and its neighbour in one /32 drew %d and %d, want %d each", got[slash42(0)], got[neighbour48], cfg.MaxDrawsPerPrefix)
	}
	// A refund goes back to the block too.
	b.refundDrawIn(sybil(0x40, 0), slash42(0), true, now)
	if !b.takeDrawIn(sybil(0x40, 0), slash42(3), true, now) {
		t.Fatal("a refunded draw did not go back to the /32")
	}
}

// The prover side: the /42's fresh verifiers took every session, call
// and proof of work not kept for admitted verifiers; now the /32's
// BlockFactor prefix shares. A verifier of another /32 and an admitted
// neighbour are still served.
func TestBlockProverBudgets(t *testing.T) {
	admitted := peer.ID("admitted-neighbour")
	cfg0 := Config{TrustedPeer: func(p peer.ID) bool { return p == admitted }}

	// Sessions of three rounds: the /32's calls (a quarter of the node's,
	// 450 of 1,800) bound them to 150; the node's open calls (1,350)
	// bounded them to 450.
	b, cfg, now := budgetsWith(t, cfg0)
	sessions := 0
	for i := range 64 {
		for j := 0; ; j++ {
			ok, why := b.admitSessionIn(sybil(1000+i, j), slash42(i), true, 3, now)
			if !ok {
				if !strings.Contains(why, "network") && !strings.Contains(why, "/32") {
					t.Fatalf("a /48 of the /42 refused for %q, not its own budgets", why)
				}
				break
			}
			sessions++
		}
	}
	caps := b.blockCaps()
	t.Logf("a /42 of fresh verifiers: %d sessions of 3 rounds (the /32's %v calls; the node's open calls %v)",
		sessions, caps.calls, float64(cfg.MaxProverCalls)-keptFor(false, float64(cfg.MaxProverCalls), 1))
	if want := int(caps.calls) / 3; sessions != want {
		t.Fatalf("the /42 opened %d sessions, want %d", sessions, want)
	}
	if ok, why := b.admitSessionIn(sybil(901, 0), neighbour48, true, 3, now); ok || !strings.Contains(why, "IPv6 /32") {
		t.Fatalf("an unadmitted verifier of the spent /32: admitted=%v %q", ok, why)
	}
	if ok, why := b.admitSessionIn(sybil(900, 0), net48(900), true, 3, now); !ok {
		t.Fatalf("a verifier of another /32 refused: %s", why)
	}
	if ok, why := b.admitSessionIn(admitted, neighbour48, true, 3, now); !ok {
		t.Fatalf("an admitted verifier of the attacker's /32 refused: %s", why)
	}
	// Refunded calls go back to the block.
	b.refundCallsIn(sybil(1000, 0), slash42(0), true, 3, now)
	if ok, why := b.admitSessionIn(sybil(1063, 999), slash42(63), true, 3, now); !ok {
		t.Fatalf("refunded calls did not go back to the /32: %s", why)
	}

	// Proof of work at 22 bits: the /32 solves a quarter of the node's
	// 2^28 hashes (16 proofs), where the node's open three quarters (48)
	// went to the /42.
	b, cfg, now = budgetsWith(t, cfg0)
	proofs := 0
	for i := range 64 {
		for b.chargePowIn(sybil(1000+i, 0), slash42(i), true, 22, now) {
			proofs++
		}
	}
	if want := int(b.blockCaps().pow / math.Ldexp(1, 22)); proofs != want {
		t.Fatalf("the /42 had %d proofs of 22 bits solved, want %d", proofs, want)
	}
	if !b.chargePowIn(sybil(900, 0), net48(900), true, 22, now) || !b.chargePowIn(admitted, neighbour48, true, 22, now) {
		t.Fatal("a verifier of another /32, or an admitted one of the spent /32, refused its proof of work")
	}
	if b.chargePowIn(sybil(901, 0), neighbour48, true, 22, now) {
		t.Fatal("an unadmitted verifier of the spent /32 had its proof of work solved")
	}

	// Prompt tokens: the /32 reads at most a quarter of the node's.
	b, cfg, now = budgetsWith(t, cfg0)
	read := 0
	for i := range 64 {
		read += spendTokens(b, 1000+i, slash42(i), now)
	}
	if limit := int(b.blockCaps().tokens); read > limit || read < limit-3*fullRound {
		t.Fatalf("the /42 read %d prompt tokens, want its /32's %d", read, limit)
	}
	if ok, why := b.admitSessionIn(admitted, neighbour48, true, 3, now); !ok || !b.chargeTokensIn(admitted, neighbour48, true, fullRound, now) {
		t.Fatalf("an admitted verifier of the attacker's /32 refused its tokens (%s)", why)
	}
	_ = cfg
}

// Config: the block budgets default to BlockFactor times the per-prefix
// ones in force, and a negative one is refused.
func TestBlockBudgetDefaults(t *testing.T) {
	cfg := Config{MaxDrawsPerPrefix: 7, MaxSessionsPerVerifierPrefix: 9}
	if err := cfg.applyDefaults(); err != nil {
		t.Fatal(err)
	}
	if cfg.MaxDrawsPerBlock != 14 || cfg.MaxSessionsPerVerifierBlock != 18 {
		t.Fatalf("block defaults %d, %d: want 14, 18", cfg.MaxDrawsPerBlock, cfg.MaxSessionsPerVerifierBlock)
	}
	for _, c := range []Config{{MaxDrawsPerBlock: -1}, {MaxSessionsPerVerifierBlock: -1}} {
		if err := c.applyDefaults(); err == nil {
			t.Fatalf("%+v accepted", c)
		}
	}
}
