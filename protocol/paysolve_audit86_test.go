package protocol

import (
	"crypto/rand"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol/pb"
)

// The Go verifier gives solving a payment (§5b) at most half its round-1
// window: 4 s at the default handshake timeout (10 s less the path
// allowance, 8 s, halved), as §5b says and payFor's comment meant. It
// gave it half the handshake timeout, 5 s.
func TestPaySolvingWithinHalfRoundOneWindow_audit86(t *testing.T) {
	a, m := newHost(t), newHost(t)
	va := newService(t, a, Config{Source: sourceOf("audit86-solve"), MaxPowDifficulty: MaxPowDifficulty,
		MaxVerifierPayWork: 1 << 40, Contacted: func(peer.ID) bool { return true }, Requested: func(peer.ID) bool { return true }})
	var ackAt atomic.Int64
	rawProver(t, m, func(r *rawPeer, hello *pb.Hello) {
		pow, err := SolvePow(testCtx(t, 5*time.Second), hello.GetNonce(), m.ID(), int(hello.GetPowDifficulty()), DefaultMaxPowDifficulty)
		if err != nil {
			return
		}
		nonce := make([]byte, PayNonceBytes)
		rand.Read(nonce)
		// 32 bits: far beyond what anything solves in seconds.
		r.send(&pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: hello.GetNonce(), Pow: pow,
			PayDifficulty: MaxPowDifficulty, PayNonce: nonce}}})
		ackAt.Store(time.Now().UnixNano())
		drain(r)
	})
	connect(t, a, m, "tcp")
	if _, err := va.Verify(testCtx(t, 20*time.Second), m.ID(), false); !errors.Is(err, ErrPayRefused) {
		t.Fatalf("Verify: %v, want ErrPayRefused (payment not solved in time)", err)
	}
	took := time.Since(time.Unix(0, ackAt.Load()))
	window := DefaultHandshakeTimeout - DefaultHandshakeTimeout/5
	if took > window/2+500*time.Millisecond || took < window/2-500*time.Millisecond {
		t.Fatalf("the verifier gave up solving %s after the ack, want about %s (half its round-1 window of %s)", took.Round(time.Millisecond), window/2, window)
	}
}
