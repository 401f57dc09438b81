package protocol

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol/pb"
)

// A stream whose hello is valid and whose first frame after the ack does
// not pay the ask (§5b) ends before round 1 is read: a stall (§6 step 1),
// since the decline is for what the verifier did (as a refusal for its
// own budgets), not for the node's state (steps 2, 3 and 7). It was not
// counted: a verifier that held each slot until just before the
// first-frame deadline (I, 45 s) and then sent an unpaid probe was
// declined BUSY and never put its group in probation, the hole stalls
// closed in document 1.11.0, open again at every node asking payment.
func TestUnpaidFirstFrameIsAStall_audit86(t *testing.T) {
	p := hostAt(t, "127.0.0.1")
	svc := newService(t, p, Config{Prover: constProver("x"), LimitLoopback: true, PayDifficulty: 8})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pfx := netip.MustParsePrefix("127.0.86.0/24")
	verifiers := make([]host.Host, SilentStrikes)
	for j := range verifiers {
		// The verifier dials the prover: it came, and is asked to pay.
		verifiers[j] = hostAt(t, fmt.Sprintf("127.0.86.%d", 1+j))
		if err := verifiers[j].Connect(ctx, peer.AddrInfo{ID: p.ID(), Addrs: p.Addrs()}); err != nil {
			t.Fatal(err)
		}
	}
	for j, m := range verifiers {
		r := openRaw(t, m, p.ID())
		ack := payHello(t, m, r, p.ID())
		if ack.GetPayDifficulty() == 0 {
			t.Fatalf("hello %d: no payment asked", j)
		}
		r.send(&pb.Frame{Body: &pb.Frame_Probe{Probe: &pb.Probe{Seq: 1, Nonce: make([]byte, 8)}}})
		f, err := r.recv()
		if err != nil || f.GetDecline().GetReason() != pb.DeclineReason_DECLINE_REASON_BUSY {
			t.Fatalf("unpaid probe %d: %v %v, want Decline{BUSY}", j, f, err)
		}
		r.s.CloseWrite()
		_, _ = r.recv()
	}
	waitFor(t, "the group to enter probation", func() bool {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		return svc.inProbationLocked(pfx, svc.now())
	})
}
