package secondimpl2

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
)

// protocol.md §6 step 2: the hello's own checks come first, then "a node
// that verifies first declines VERIFY_FIRST a verifier that came to it",
// then the budgets, the D_v + 2 rule and the proof of work. So a hello
// asking 30 bits of proof of work (above the prover's maximum, which is
// Decline{BUSY} later) from a verifier that came is declined
// VERIFY_FIRST, and one of an unsupported version or with a bad field is
// declined for that, each with its reset code.
func TestSpec119HelloCheckOrderVerifyFirst(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	p := newPair(t, "tcp", protocol.Config{VerifyFirst: true, PayDifficulty: 12, Prover: countingProver{&calls}})
	for _, c := range []struct {
		name   string
		edit   func(h *hello)
		reason int32
		code   uint32
	}{
		{"proof of work above the maximum", func(h *hello) { h.PowDifficulty = 30 }, drVerifyFirst, uint32(codeDeclined)},
		{"pow_difficulty 33", func(h *hello) { h.PowDifficulty = 33 }, drBadHello, uint32(codePV)},
		{"version 2", func(h *hello) { h.SpecVersion = "2.0.0" }, drVersion, uint32(codeDeclined)},
		{"nonce of 31 bytes", func(h *hello) { h.Nonce = randBytes(31) }, drBadHello, uint32(codePV)},
	} {
		x := rawHello(t, p.ctx, p.mine, p.oursH.ID(), c.edit)
		x.expectDecline(c.reason, handshakeTimeout)
		code, ok, _ := x.endCode(3 * time.Second)
		if !ok || uint32(code) != c.code {
			t.Fatalf("%s: ended with %#x (%v), want %#x", c.name, code, ok, c.code)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("answerer called %d times", n)
	}
}

// protocol.md §6 step 5: after a paid ack the prover waits I = min(45 s,
// total_ms + 10 s) for the first frame (here total_ms 1 000: 11 s), and
// once that frame is read before round 1, round 1 or the Verdict at most
// the handshake timeout (10 s) from reading it; a missed deadline resets
// ErrCodeTimeout, and "a prover MUST NOT give up earlier".
func TestSpec119PaidSessionDeadlines(t *testing.T) {
	t.Parallel()
	p, calls := payPair(t, 12)
	t.Run("no first frame", func(t *testing.T) {
		t.Parallel()
		x := rawHello(t, p.ctx, p.mine, p.oursH.ID(), func(h *hello) { h.Rounds, h.TauMs, h.TotalMs = 1, 0, 1000 })
		x.ack()
		acked := time.Now()
		code, ok, end := x.endCode(20 * time.Second)
		waited := end.Sub(acked)
		if !ok || code != codeTimeout || waited < 11*time.Second-200*time.Millisecond || waited > 13*time.Second {
			t.Fatalf("ended %v after the ack with %#x (%v), want a reset ErrCodeTimeout after 11 s", waited, code, ok)
		}
	})
	t.Run("paid probe then silence", func(t *testing.T) {
		t.Parallel()
		x := rawHello(t, p.ctx, p.mine, p.oursH.ID(), nil)
		a := x.ack()
		x.write(&frame{Body: bProbe, Probe: &probe{Seq: 1, Nonce: randBytes(8), Pay: x.pay(a)}})
		sent := time.Now()
		if f, err := x.read(5 * time.Second); err != nil || f.Body != bProbeAck {
			t.Fatalf("probe ack: %v %+v", err, f)
		}
		code, ok, end := x.endCode(30 * time.Second)
		waited := end.Sub(sent)
		if !ok || code != codeTimeout || waited < 10*time.Second-200*time.Millisecond || waited > 12*time.Second {
			t.Fatalf("ended %v after the probe with %#x (%v), want a reset ErrCodeTimeout 10 s after it", waited, code, ok)
		}
	})
	t.Cleanup(func() {
		if n := calls.Load(); n != 0 {
			t.Errorf("answerer called %d times", n)
		}
	})
}

// protocol.md §5b: a verifier pays only provers it contacted (a
// bootstrap dial is one), and the Go verifier, for a verification its
// operator did not ask for (first contact), pays at most 2 bits above
// the larger of the proof of work its hello asked and 16. The reference
// node listening on loopback asks none in its hello, so it pays my
// prover's asks of 12 and 18 bits and refuses 19 with a reset
// ErrCodeBusy after the ack: no verdict, nothing signed.
func TestSpec119NodePaysWithinSlack(t *testing.T) {
	t.Parallel()
	for _, d := range []uint32{12, 18, 19} {
		hm, km := newHost(t, "/ip4/127.0.0.1/tcp/0")
		mine := newNode(hm, km)
		mine.prover = proverOpts{answer: truth.answerMine, payDifficulty: d}
		key, _, err := lcrypto.GenerateEd25519Key(nil)
		if err != nil {
			t.Fatal(err)
		}
		n, err := peer.New(peer.Config{Key: key, StorePath: t.TempDir() + "/store.db", ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
			Source: ourCorpus(t), Prover: ourProver{}, AttestPolicy: peer.AttestAll,
			Bootstrap: []string{hm.Addrs()[0].String() + "/p2p/" + hm.ID().String()}})
		if err != nil {
			t.Fatal(err)
		}
		var pr *proverResult
		select {
		case pr = <-mine.proved:
		case <-time.After(45 * time.Second):
			t.Fatalf("ask %d: the node did not verify mine", d)
		}
		n.Close()
		if pr.payAsked != d {
			t.Fatalf("ask %d: my prover asked %d", d, pr.payAsked)
		}
		if d <= 18 {
			if pr.err != nil || pr.verdict == nil || !pr.verdict.Accepted || pr.record == nil {
				t.Fatalf("ask %d: %v, verdict %+v", d, pr.err, pr.verdict)
			}
			continue
		}
		if code, remote := remoteCode(pr.err); !remote || code != codeBusy || pr.verdict != nil || pr.answered != 0 {
			t.Fatalf("ask %d: %v (code %#x), verdict %+v, want a reset ErrCodeBusy and no session", d, pr.err, code, pr.verdict)
		}
	}
}
