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
	b, _, now = budgetsWith(t, cfg0)
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

// slotService is a Service with only its inbound-slot state, at the
// default limits (64 slots, 16 per prefix, 32 per IPv6 /32, 2 per peer).
func slotService(t *testing.T, now func() time.Time, trusted peer.ID) *Service {
	t.Helper()
	cfg := Config{Now: now, TrustedPeer: func(p peer.ID) bool { return p == trusted }}
	if err := cfg.applyDefaults(); err != nil {
		t.Fatal(err)
	}
	return &Service{cfg: cfg, now: now, perPeer: map[peer.ID]int{}, perPrefix: map[netip.Prefix]int{},
		perBlock: map[netip.Prefix]int{}, silent: map[netip.Prefix]*silentGroup{},
		silentBlocks: map[netip.Prefix]*silentBlock{}, waiting: map[netip.Prefix]*inboundHold{}}
}

// Inbound slots of streams past their hello: the /42 held every slot
// open to verifiers the node does not admit (48 of 64: three /48s of 16
// suffice); now its /32's 32, and 16 are left to other networks. One
// abuser /48 in a shared /32 holds its 16 and leaves the /32's other 16
// to its neighbours.
func TestBlockInboundSlots(t *testing.T) {
	clock := func() time.Time { return time.Unix(9000, 0) }
	admitted := peer.ID("admitted-neighbour")
	s := slotService(t, clock, admitted)
	if s.cfg.MaxInboundPerBlock != BlockFactor*s.cfg.MaxInboundPerPrefix {
		t.Fatalf("MaxInboundPerBlock %d, want %d", s.cfg.MaxInboundPerBlock, BlockFactor*s.cfg.MaxInboundPerPrefix)
	}
	held := 0
	for i := range 64 {
		for j := range 16 {
			if h := s.acquireInbound(sybil(1000+i, j), slash42(i), true, false, nil); h != nil && h.helloValid() {
				held++
			}
		}
	}
	open := s.cfg.MaxInbound - int(keptFor(false, float64(s.cfg.MaxInbound), 1))
	t.Logf("a /42 holds %d of the %d inbound slots open to verifiers the node does not admit", held, open)
	if held != s.cfg.MaxInboundPerBlock {
		t.Fatalf("the /42 holds %d slots, want its /32's %d", held, s.cfg.MaxInboundPerBlock)
	}
	others := 0
	for i := range open {
		if s.acquireInbound(sybil(900+i, 0), net48(900+i), true, false, nil) != nil {
			others++
		}
	}
	if others != open-held {
		t.Fatalf("other networks got %d slots, want the %d left", others, open-held)
	}
	if s.acquireInbound(sybil(901, 0), neighbour48, true, false, nil) != nil {
		t.Fatal("an unadmitted verifier of the full /32 got a slot")
	}
	if s.acquireInbound(admitted, neighbour48, true, true, nil) == nil {
		t.Fatal("an admitted verifier of the attacker's /32 refused")
	}

	// One abuser /48 in a shared /32.
	s = slotService(t, clock, "")
	var abuser []*inboundHold
	for j := range 20 {
		if h := s.acquireInbound(sybil(0, j), slash42(0), true, false, nil); h != nil {
			abuser = append(abuser, h)
		}
	}
	got := 0
	for j := range 20 {
		if s.acquireInbound(sybil(1, j), neighbour48, true, false, nil) != nil {
			got++
		}
	}
	if len(abuser) != s.cfg.MaxInboundPerPrefix || got != s.cfg.MaxInboundPerBlock-s.cfg.MaxInboundPerPrefix {
		t.Fatalf("an abuser /48 holds %d slots and its neighbour gets %d: want %d and %d", len(abuser), got,
			s.cfg.MaxInboundPerPrefix, s.cfg.MaxInboundPerBlock-s.cfg.MaxInboundPerPrefix)
	}
	// A released slot is the /32's again.
	abuser[0].release()
	if s.acquireInbound(sybil(2, 0), in32(attackerBlock, 2), true, false, nil) == nil {
		t.Fatal("a released slot did not go back to the /32")
	}
}

// Probation: 64 /48s in probation each kept one silent stream waiting
// (48 slots, all that is open to verifiers the node does not admit); now
// once SilentBlockNets of them are, the whole /32 has one. A newer
// stream of the /32, an honest neighbour's, takes that place and keeps
// its slot past its hello; an admitted neighbour is not in probation.
func TestBlockProbation(t *testing.T) {
	at := time.Unix(9000, 0)
	clock := func() time.Time { return at }
	admitted := peer.ID("admitted-neighbour")
	s := slotService(t, clock, admitted)
	for i := range 64 {
		for range SilentStrikes {
			s.strikeSilent(slash42(i), at)
		}
	}
	s.mu.Lock()
	in := s.blockInProbationLocked(netip.MustParsePrefix("2001:db8::/32"), at)
	s.mu.Unlock()
	if !in {
		t.Fatal("a /32 with 64 /48s in probation is not")
	}
	var waiting []*inboundHold
	preempted := 0
	for i := range 64 {
		if h := s.acquireInbound(sybil(1000+i, 0), slash42(i), true, false, func() { preempted++ }); h != nil {
			waiting = append(waiting, h)
		}
	}
	live := 0
	for _, h := range waiting {
		if !h.done {
			live++
		}
	}
	t.Logf("64 /48s in probation hold %d silent streams waiting (%d displaced)", live, preempted)
	if live != 1 || preempted != 63 {
		t.Fatalf("the /42 in probation holds %d waiting streams (%d displaced), want 1 (63)", live, preempted)
	}
	// An honest neighbour of the /32 takes the waiting place, and keeps
	// its slot past its hello.
	h := s.acquireInbound(sybil(901, 0), neighbour48, true, false, nil)
	if h == nil || !waiting[63].done || !h.helloValid() {
		t.Fatal("a neighbour's stream did not take the /32's waiting place")
	}
	// Past its hello it keeps the place until its session is paid: a
	// newer stream of the /32 is refused meanwhile, and takes the place
	// once the neighbour's stream entered the stall place.
	if s.acquireInbound(sybil(1000, 1), slash42(0), true, false, nil) != nil || h.done {
		t.Fatal("a stream past its hello lost its place to a newer one")
	}
	if !h.enterStall() {
		t.Fatal("a neighbour's paid stream lost its slot entering the stall place")
	}
	if n := s.acquireInbound(sybil(1000, 1), slash42(0), true, false, nil); n == nil || !n.waiting || h.done {
		t.Fatal("a newer stream did not take the waiting place after the stall")
	}
	if a := s.acquireInbound(admitted, neighbour48, true, true, nil); a == nil || a.waiting {
		t.Fatal("an admitted verifier of the /32 is in probation")
	}
	// Another /32 is not in probation.
	if o := s.acquireInbound(sybil(900, 0), net48(900), true, false, nil); o == nil || o.waiting {
		t.Fatal("a verifier of another /32 is in probation")
	}

	// Fewer than SilentBlockNets /48s in probation: only they are.
	at = at.Add(2 * SilentWindow)
	for i := range SilentBlockNets - 1 {
		for range SilentStrikes {
			s.strikeSilent(slash42(i), at)
		}
	}
	if n := s.acquireInbound(sybil(902, 0), neighbour48, true, false, nil); n == nil || n.waiting {
		t.Fatal("a /32 with fewer than SilentBlockNets /48s in probation is in probation")
	}
	for range SilentStrikes {
		s.strikeSilent(slash42(SilentBlockNets), at)
	}
	if n := s.acquireInbound(sybil(903, 0), neighbour48, true, false, nil); n == nil || !n.waiting {
		t.Fatal("a /32 with SilentBlockNets /48s in probation is not")
	}
	// One /48 striking again and again counts once.
	at = at.Add(2 * SilentWindow)
	for range 10 * SilentStrikes {
		s.strikeSilent(slash42(0), at)
	}
	if n := s.acquireInbound(sybil(904, 0), neighbour48, true, false, nil); n == nil || n.waiting {
		t.Fatal("one /48's silent streams put its /32 in probation")
	}
}

// The /32 probation table is bounded.
func TestSilentBlocksBounded(t *testing.T) {
	s := slotService(t, time.Now, "")
	now := time.Unix(1e6, 0)
	for i := range 2 * maxSilentGroups {
		pfx := in32(0x3fff0000|uint32(i), 0)
		for range SilentStrikes {
			s.strikeSilent(pfx, now)
		}
	}
	if n := len(s.silentBlocks); n > maxSilentGroups {
		t.Fatalf("%d /32s in the table, want at most %d", n, maxSilentGroups)
	}
}
