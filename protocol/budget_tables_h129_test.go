package protocol

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Every per-prefix and per-/32 table of the budgets (the verifier's draws
// and payments, the prover's sessions) stays within maxTrackedPrefixes
// while fresh networks keep coming at the legal rate for hours of the
// fake clock (IPv4 /24s and IPv6 /48s of many /32s, a fresh peer ID each,
// the global budgets raised so that every one is charged), and an honest
// network that spends its share all along keeps its table entries
// (idle entries go first): the flood cannot reset the spent budget of a
// busy network by pushing it out of the table.
func TestBudgetPrefixTablesBoundedUnderLongFlood_h129(t *testing.T) {
	const big = 1 << 30
	cfg := Config{MaxDraws: big, MaxDrawsPerPeer: 4, MaxProverSessions: big, MaxProverCalls: big,
		MaxProverTokens: big, MaxVerifierPayWork: big}
	if err := cfg.applyDefaults(); err != nil {
		t.Fatal(err)
	}
	b := newBudgets(&cfg)
	where := map[peer.ID]netip.Prefix{}
	b.prefixOf = func(p peer.ID) (netip.Prefix, bool) { pfx, ok := where[p]; return pfx, ok }
	honest := netip.MustParsePrefix("192.0.2.0/24")
	honestV6 := netip.MustParsePrefix("2001:db8:77::/48")
	now := time.Unix(1_700_000_000, 0)
	const steps = 3 * maxTrackedPrefixes
	// The flood spans three draw windows: the honest networks draw their
	// share spread over each window (one draw per this many steps).
	step := 3 * cfg.DrawWindow / steps
	honestEvery := steps / 3 / cfg.MaxDrawsPerPrefix
	for i := range steps {
		now = now.Add(step)
		var pfx netip.Prefix
		if i%2 == 0 {
			pfx = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), 0}), 24)
		} else {
			// A fresh /48 in one of 4,096 /32s.
			blk := i % 4096
			a := [16]byte{0x2a, 0x0f, byte(blk >> 8), byte(blk), byte(i >> 8), byte(i)}
			pfx = netip.PrefixFrom(netip.AddrFrom16(a), 48)
		}
		p := peer.ID(fmt.Sprintf("sybil-%d", i))
		where[p] = pfx
		b.takeDrawIn(p, pfx, true, now)
		b.admitSessionOwn(p, pfx, true, 3, now)
		b.chargePay(p, 8, now)
		if i%honestEvery == 0 {
			for k, hp := range []netip.Prefix{honest, honestV6} {
				id := peer.ID(fmt.Sprintf("honest-%d-%d", k, i))
				where[id] = hp
				if !b.takeDrawIn(id, hp, true, now) {
					t.Fatalf("step %d: the honest network %s was refused a draw within its share", i, hp)
				}
			}
		}
		if i%1024 == 0 || i == steps-1 {
			b.mu.Lock()
			for name, n := range map[string]int{"draw prefixes": len(b.prefixes), "draw blocks": len(b.blocks),
				"prover prefixes": len(b.vprefixes), "prover blocks": len(b.vblocks),
				"pay prefixes": len(b.payPrefixes), "pay blocks": len(b.payBlocks)} {
				if n > maxTrackedPrefixes {
					b.mu.Unlock()
					t.Fatalf("step %d: %d %s tracked, over %d", i, n, name, maxTrackedPrefixes)
				}
			}
			_, ok4 := b.prefixes[honest]
			_, ok6 := b.prefixes[honestV6]
			b.mu.Unlock()
			if i > 0 && (!ok4 || !ok6) {
				t.Fatalf("step %d: a busy honest network's draw budget was forgotten (IPv4 %v, IPv6 %v) while idle ones were tracked", i, ok4, ok6)
			}
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t.Logf("after %d fresh networks over %s: %d draw prefixes, %d blocks; %d prover prefixes, %d blocks; %d pay prefixes, %d blocks; %d peers",
		steps, 3*cfg.DrawWindow, len(b.prefixes), len(b.blocks), len(b.vprefixes), len(b.vblocks), len(b.payPrefixes), len(b.payBlocks), len(b.peers))
	if len(b.peers) > maxTrackedPeers {
		t.Fatalf("%d peers tracked, over %d", len(b.peers), maxTrackedPeers)
	}
}
