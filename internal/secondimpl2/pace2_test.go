package secondimpl2

import (
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// A prover whose handler reads the hello 1 s after it arrived and acks
// 9.8 s after reading it meets its deadline (§5a: within the handshake
// timeout of reading the hello); the verifier's wait, from writing the
// hello, includes the path allowance (document 1.12.2). Before it, our
// verifier gave up at 10 s: "no hello ack within the deadline".
func TestPaceLateHelloRead(t *testing.T) {
	t.Parallel()
	pol := skill.DefaultPolicy()
	pol.Tau = 2 * time.Second
	p := newPair(t, "tcp", protocol.Config{Policy: pol})
	p.mine.prover.helloLate = time.Second
	p.mine.prover.ackAfter = handshakeTimeout - 200*time.Millisecond
	res, err := p.ours.Verify(p.ctx, p.mine.h.ID(), false)
	p.checkOurs(t, res, err)
}
