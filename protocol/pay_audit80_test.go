package protocol

// Audit (helper-80): the verifier's payment budget (§5b, chargePay).

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol/pb"
)

// TestAudit80UnpayableAskChargesNothing: an ask above the verifier's
// maximum (22 bits) is one it will not pay (§5b: no session, nothing
// drawn or signed). It was charged to the payment budgets before the
// maximum was checked: an ask of 23 or 24 bits spent 2^23 or 2^24 hashes
// of them (a whole prover's share, 2^24 of 2^28, in one ask) and nothing
// was solved. Fresh peer IDs over six /24s (an eighth each) then spent
// the three quarters open to provers the node does not admit with 12
// asks, each paying this node's proof of work of 16 bits (2^16 hashes),
// and every honest prover that asks a payment was refused for the hour.
func TestAudit80UnpayableAskChargesNothing(t *testing.T) {
	a, m := newHost(t), newHost(t)
	va := newService(t, a, Config{Source: sourceOf("audit80-pay")})
	var asks atomic.Int64
	rawProver(t, m, func(r *rawPeer, hello *pb.Hello) {
		pow, err := SolvePow(testCtx(t, 5*time.Second), hello.GetNonce(), m.ID(), int(hello.GetPowDifficulty()), DefaultMaxPowDifficulty)
		if err != nil {
			return
		}
		nonce := make([]byte, PayNonceBytes)
		rand.Read(nonce)
		asks.Add(1)
		r.send(&pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: hello.GetNonce(), Pow: pow,
			PayDifficulty: DefaultMaxPowDifficulty + 2, PayNonce: nonce}}})
		drain(r)
	})
	connect(t, a, m, "tcp") // the verifier's side opened the connection: it pays what it pays
	b := va.budgets
	full := float64(va.cfg.MaxVerifierPayWork)
	for i := range 2 {
		res, err := va.Verify(testCtx(t, 10*time.Second), m.ID(), false)
		if res != nil || !errors.Is(err, ErrPayRefused) {
			t.Fatalf("ask %d of %d bits: Verify %+v, %v; want ErrPayRefused", i+1, DefaultMaxPowDifficulty+2, res, err)
		}
	}
	b.mu.Lock()
	b.pay.refill(full, va.cfg.DrawWindow, va.now())
	left := b.pay.tokens
	b.mu.Unlock()
	if left < full-1 {
		t.Fatalf("%d asks of %d bits, above the %d this verifier pays, refused unsolved: they spent %.0f of its %.0f payment hashes (%.0f%%), want none",
			asks.Load(), DefaultMaxPowDifficulty+2, DefaultMaxPowDifficulty, full-left, full, 100*(full-left)/full)
	}
	// The prover's own share is whole: an ask it would pay is paid.
	if !b.chargePay(m.ID(), 16, va.now()) {
		t.Fatal("after two unpayable asks the prover's share could not cover one payment of 16 bits")
	}
}

// TestAudit80PayBudgetPerBlock: the verifier's payment budget had no IPv6
// /32 block (§9a "IPv6 /32 blocks": every other per-prefix budget has
// one). A prover network's share is an eighth of 2^28 hashes per hour,
// so six /48s of one /32 (65,536 /48s to its holder, fresh peer IDs in
// each) were paid all three quarters open to provers the node does not
// admit: 48 payments of 22 bits, each after paying this node's proof of
// work of 16 bits, and no prover the node does not admit was paid for
// the rest of the hour. The /32 now gets BlockFactor (2) prefixes' worth
// (a quarter), as for draws, sessions, calls, tokens and proof of work.
func TestAudit80PayBudgetPerBlock(t *testing.T) {
	const d = 22
	cfg := Config{}
	if err := cfg.applyDefaults(); err != nil {
		t.Fatal(err)
	}
	b := newBudgets(&cfg)
	where := map[peer.ID]netip.Prefix{}
	b.prefixOf = func(p peer.ID) (netip.Prefix, bool) { pfx, ok := where[p]; return pfx, ok }
	now := time.Unix(1_700_000_000, 0)
	paid := 0
	for net := range 16 { // 16 /48s of 2001:db8::/32
		pfx := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(net)}), 48)
		for i := range 16 { // fresh peer IDs
			id := peer.ID(fmt.Sprintf("prover-%d-%d", net, i))
			where[id] = pfx
			if b.chargePay(id, d, now) {
				paid++
			}
		}
	}
	want := BlockFactor * cfg.MaxVerifierPayWork / proverPrefixShare >> d
	if paid > want {
		t.Fatalf("fresh peer IDs in 16 /48s of one IPv6 /32 were paid %d payments of %d bits (%d of the %d hashes per hour, %.0f%%); want at most %d (BlockFactor prefixes' worth)",
			paid, d, paid<<d, cfg.MaxVerifierPayWork, 100*float64(paid<<d)/float64(cfg.MaxVerifierPayWork), want)
	}
	// A prover of another /32 is still paid.
	other := peer.ID("other-block")
	where[other] = netip.MustParsePrefix("2001:db9:1::/48")
	if !b.chargePay(other, d, now) {
		t.Fatal("a prover of another /32 was refused")
	}
}

// TestAudit80PayNoMoreThanPaid: a prover can make this node pay (§5b;
// a discovery dial of a script, or mutual wait, §5c). The verifier pays
// at most PaySlack bits above the proof of work it asked (or above a
// public node's base) unless its caller asked for the verification
// explicitly (Config.Requested; TestRequestedProverPaidToMax): before, a
// prover that paid 2^16 hashes was paid 2^22 (64x). In mutual wait the
// verifier asks at least MutualWaitPayDifficulty, so two honest
// verify-first nodes still pay each other's 20-22 bits
// (TestVerifierPaysWaitingProver).
func TestAudit80PayNoMoreThanPaid(t *testing.T) {
	a, m := newHost(t), newHost(t)
	const powD = 16
	// A prover the node contacted on its own (a discovery dial), not one
	// its caller asked for.
	va := newService(t, a, Config{Source: sourceOf("audit80-ratio"), PowDifficulty: powD,
		Contacted: func(peer.ID) bool { return true }, Requested: func(peer.ID) bool { return false }})
	rawProver(t, m, func(r *rawPeer, hello *pb.Hello) {
		pow, err := SolvePow(testCtx(t, 10*time.Second), hello.GetNonce(), m.ID(), int(hello.GetPowDifficulty()), DefaultMaxPowDifficulty)
		if err != nil {
			return
		}
		nonce := make([]byte, PayNonceBytes)
		rand.Read(nonce)
		r.send(&pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: hello.GetNonce(), Pow: pow,
			PayDifficulty: DefaultMaxPowDifficulty, PayNonce: nonce}}})
		drain(r)
	})
	connect(t, a, m, "tcp")
	full := float64(va.cfg.MaxVerifierPayWork)
	if _, err := va.Verify(testCtx(t, 20*time.Second), m.ID(), false); !errors.Is(err, ErrPayRefused) {
		t.Fatalf("Verify: %v, want ErrPayRefused", err)
	}
	va.budgets.mu.Lock()
	spent := full - va.budgets.pay.tokens
	if va.budgets.pay.last.IsZero() {
		spent = 0
	}
	va.budgets.mu.Unlock()
	if paid := float64(uint64(1) << powD); spent > 4*paid {
		t.Fatalf("a prover that paid %.0f hashes (D = %d) was paid %.0f (%.0fx)", paid, powD, spent, spent/paid)
	}
}
