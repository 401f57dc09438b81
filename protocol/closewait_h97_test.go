package protocol

import (
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// helper-97: §5 step 7. After the verdict the verifier reads what the
// prover still sends until it closes, discarding at most 4 KiB; a prover
// that sends more (and does not close) is reset ErrCodeProtocolViolation,
// one that sends less and does not close ErrCodeTimeout.
func TestVerifierCloseWaitDiscardsAtMost4KiB(t *testing.T) {
	for _, c := range []struct {
		name  string
		extra int // bytes the prover writes after reading the verdict
		code  uint32
	}{
		{"more than 4 KiB", 5 << 10, uint32(ErrCodeProtocolViolation)},
		{"less than 4 KiB", 100, uint32(ErrCodeTimeout)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := make(chan uint32, 1)
			res, err := verifierUnderTest(t, "tcp", Config{}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
				ack(r, h)
				echoProbes(t, r)
				r.send(declineFrame(pb.DeclineReason_DECLINE_REASON_REFUSED, "no"))
				if f, err := r.recv(); err != nil || f.GetVerdict() == nil {
					t.Errorf("fake prover: verdict %v %v", f, err)
					return
				}
				if _, err := r.s.Write(make([]byte, c.extra)); err != nil {
					t.Errorf("fake prover: write: %v", err)
				}
				// The verifier half-closed after its verdict: reads end
				// with EOF, and its reset shows on a write.
				for range 200 {
					if _, err := r.s.Write([]byte{0}); err != nil {
						code, _ := resetCode(err)
						got <- uint32(code)
						return
					}
					time.Sleep(25 * time.Millisecond)
				}
				got <- 0
			})
			if err != nil || res.Verdict.Reason != skill.ReasonDeclined {
				t.Fatalf("verify: %v %+v", err, res)
			}
			if code := <-got; code != c.code {
				t.Fatalf("reset with %#x, want %#x", code, c.code)
			}
		})
	}
}
