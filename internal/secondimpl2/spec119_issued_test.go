package secondimpl2

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/protocol"
)

// attestation.md §5 (1.7.3): the records one issuer signs about one
// subject have strictly increasing issued_at: one that would tie with the
// previous one is dated a second after it, within a minute of the
// issuer's clock. The reference verifier signs six verdicts about my
// node within a second or two, the fourth a rejection (my prover answers
// wrong): their issue times are strictly increasing and none is more than
// a minute ahead of the clock.
func TestSpec119IssuedAtStrictlyIncreasing(t *testing.T) {
	t.Parallel()
	p := newPairDialing(t, "tcp", protocol.Config{}, true)
	right := p.mine.prover.answer
	var wrong atomic.Bool
	p.mine.prover.answer = func(c *challenge) (string, error) {
		if wrong.Load() {
			return "no idea at all", nil
		}
		return right(c)
	}
	var prev int64
	for i := 1; i <= 6; i++ {
		wrong.Store(i == 4)
		res, err := p.ours.Verify(p.ctx, p.mine.h.ID(), false)
		if err != nil || res.Envelope == nil || res.Verdict.Accepted == (i == 4) {
			t.Fatalf("verdict %d: %v %+v", i, err, res)
		}
		p.myProved(t)
		rec, err := verifyAttestation(res.Envelope, verifyOpts{Subject: []byte(p.mine.h.ID()), Now: time.Now().Unix()})
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if rec.IssuedAt <= prev {
			t.Fatalf("record %d issued at %d, not after the previous one (%d)", i, rec.IssuedAt, prev)
		}
		if ahead := rec.IssuedAt - time.Now().Unix(); ahead > 60 {
			t.Fatalf("record %d dated %d s ahead of the clock", i, ahead)
		}
		prev = rec.IssuedAt
	}
}
