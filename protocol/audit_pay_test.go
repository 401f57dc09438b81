package protocol

// Adversarial tests of spec/protocol.md §5b (the verifier's payment) from an audit
// (helper-79, 2026-11-28): each failed on the code it was written
// against and guards its fix now.

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/protocol/pb"
)

// invalidPow returns a pow that check finds invalid.
func invalidPow(check func(pow []byte) bool) []byte {
	for i := 0; ; i++ {
		pow := []byte{byte(i), byte(i >> 8)}
		if !check(pow) {
			return pow
		}
	}
}

// Audit (helper-79): a prover that asks this node's verifier a payment and
// does not pay this node's own proof of work (§5a) is not paid: the pow is
// checked first (before the fix the verifier solved 2^22 hashes, then
// found the pow invalid).
func TestVerifierChecksPowBeforePaying(t *testing.T) {
	a, m := newHost(t), newHost(t)
	va := newService(t, a, Config{Source: sourceOf("h83-pay"), PowDifficulty: 12})

	// A pay nonce that costs the verifier at least 2^21 hashes: the
	// verifier's solver counts from 0 as this one does, so the time
	// measured here is the time the verifier's payment takes.
	var hard []byte
	var solveTime time.Duration
	var hashes uint64
	for try := 0; try < 12 && hard == nil; try++ {
		nonce := make([]byte, PayNonceBytes)
		rand.Read(nonce)
		t0 := time.Now()
		pay, err := SolvePay(context.Background(), nonce, a.ID(), DefaultMaxPowDifficulty, DefaultMaxPowDifficulty)
		if err != nil {
			t.Fatal(err)
		}
		if c := binary.BigEndian.Uint64(pay); c >= 1<<21 {
			hard, solveTime, hashes = nonce, time.Since(t0), c
		}
	}
	if hard == nil {
		t.Skip("no nonce needing 2^21 hashes in 12 tries")
	}

	rawProver(t, m, func(r *rawPeer, hello *pb.Hello) {
		d := int(hello.GetPowDifficulty())
		pow := invalidPow(func(pow []byte) bool { return CheckPow(hello.GetNonce(), m.ID(), pow, d) })
		r.send(&pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: hello.GetNonce(), Pow: pow,
			PayDifficulty: DefaultMaxPowDifficulty, PayNonce: hard}}})
		drain(r)
	})
	connect(t, a, m, "tcp") // the verifier's side opened the connection: it pays
	t0 := time.Now()
	res, err := va.Verify(testCtx(t, 20*time.Second), m.ID(), false)
	took := time.Since(t0)
	if res != nil {
		t.Fatalf("Verify: a result %+v for a prover that did not pay", res)
	}
	if took > solveTime/4 || !errors.Is(err, ErrUnpaid) {
		t.Fatalf("a prover whose ack carried an invalid proof of work and asked %d bits of payment: Verify took %s (a payment of %d hashes takes %s here) and returned %v; "+
			"want ErrUnpaid at once, the pow checked before any payment is solved", DefaultMaxPowDifficulty, took.Round(time.Millisecond), hashes, solveTime.Round(time.Millisecond), err)
	}
}

// Audit (helper-79): an ask above what the verifier pays no longer hides
// an invalid proof of work: the pow is checked first, so the session ends
// unpaid (a failure of the peer) rather than ErrPayRefused.
func TestUnpayableAskDoesNotHideUnpaidPow(t *testing.T) {
	a, m := newHost(t), newHost(t)
	va := newService(t, a, Config{Source: sourceOf("h83-pay-2"), PowDifficulty: 12})
	rawProver(t, m, func(r *rawPeer, hello *pb.Hello) {
		d := int(hello.GetPowDifficulty())
		pow := invalidPow(func(pow []byte) bool { return CheckPow(hello.GetNonce(), m.ID(), pow, d) })
		nonce := make([]byte, PayNonceBytes)
		rand.Read(nonce)
		r.send(&pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: hello.GetNonce(), Pow: pow,
			PayDifficulty: DefaultMaxPowDifficulty + 1, PayNonce: nonce}}})
		drain(r)
	})
	connect(t, a, m, "tcp")
	res, err := va.Verify(testCtx(t, 10*time.Second), m.ID(), false)
	if res != nil || !errors.Is(err, ErrUnpaid) {
		t.Fatalf("a prover with an invalid proof of work asking an unpayable payment: Verify %+v, %v; want ErrUnpaid (its pow is checked first, and counts as its failure)", res, err)
	}
}
