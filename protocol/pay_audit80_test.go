package protocol

// Audit (helper-80): the verifier's payment budget (§5b, chargePay).

import (
	"crypto/rand"
	"errors"
	"sync/atomic"
	"testing"
	"time"

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
