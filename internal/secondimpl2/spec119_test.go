package secondimpl2

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// Checks written from protocol.md 1.13.x alone (§5b, §5c, §6 steps 2, 5
// and 6) against the reference prover over loopback, frame by frame: the
// order of the checks of a paid session's first frame, what each side
// sends, the reset codes and the lingers' bounds.

// raw is one verifier stream written by hand.
type raw struct {
	t     *testing.T
	s     network.Stream
	r     *bufio.Reader
	h     *hello
	me    *node
	start time.Time
}

// rawHello opens a stream to p and writes a valid hello (3 rounds, tau
// 15 s, total 120 s, credit 500 ms), edited by edit.
func rawHello(t *testing.T, ctx context.Context, me *node, p lpeer.ID, edit func(h *hello)) *raw {
	t.Helper()
	s, err := me.h.NewStream(ctx, p, protoID)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	t.Cleanup(func() { s.Reset() })
	h := &hello{SpecVersion: "1.0.0", VerifierID: me.id, ProverID: []byte(p), Nonce: randBytes(32),
		Rounds: 3, TauMs: 15000, TotalMs: 120000, RTTCreditMs: 500}
	if edit != nil {
		edit(h)
	}
	x := &raw{t: t, s: s, r: bufio.NewReader(s), h: h, me: me, start: time.Now()}
	x.write(&frame{Body: bHello, Hello: h})
	return x
}

func (x *raw) write(f *frame) {
	x.t.Helper()
	if err := writeFrame(x.s, f); err != nil {
		x.t.Fatalf("write frame %d: %v", f.Body, err)
	}
}

func (x *raw) read(d time.Duration) (*frame, error) {
	x.s.SetReadDeadline(time.Now().Add(d))
	return readFrame(x.r, capProver)
}

// ack reads the hello ack, checks its nonce and proof of work, and
// returns it.
func (x *raw) ack() *helloAck {
	x.t.Helper()
	f, err := x.read(handshakeTimeout + pathAllowance)
	if err != nil {
		x.t.Fatalf("reading the ack: %v", err)
	}
	if f.Body != bHelloAck {
		x.t.Fatalf("first frame %d (%+v), want a hello ack", f.Body, f.Decline)
	}
	a := f.HelloAck
	if string(a.Nonce) != string(x.h.Nonce) || !powValid(x.h.Nonce, x.h.ProverID, a.Pow, int(x.h.PowDifficulty)) {
		x.t.Fatalf("ack: nonce or proof of work wrong: %+v", a)
	}
	return a
}

// pay solves the ack's ask for this verifier.
func (x *raw) pay(a *helloAck) []byte {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	p := solvePay(ctx, a.PayNonce, x.me.id, int(a.PayDifficulty))
	if p == nil {
		x.t.Fatalf("%d bits not solved", a.PayDifficulty)
	}
	return p
}

// endCode waits up to d for the prover to end the stream and returns the
// code of its reset (0, false when it closed or reset without one) and
// when it came. The prover may half-close first (a decline's linger):
// then this side's writes, which the prover reads and discards, fail
// once it has reset.
func (x *raw) endCode(d time.Duration) (network.StreamErrorCode, bool, time.Time) {
	x.t.Helper()
	deadline := time.Now().Add(d)
	x.s.SetReadDeadline(deadline)
	_, err := io.Copy(io.Discard, x.r)
	if code, ok := remoteCode(err); ok {
		return code, true, time.Now()
	}
	if err != nil && isTimeout(err) {
		return 0, false, time.Now()
	}
	// EOF: the prover half-closed; probe with single bytes it discards.
	for time.Now().Before(deadline) {
		x.s.SetWriteDeadline(deadline)
		if _, err := x.s.Write([]byte{0}); err != nil {
			code, ok := remoteCode(err)
			return code, ok, time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, false, time.Now()
}

// expectDecline reads a Decline with reason want.
func (x *raw) expectDecline(want int32, d time.Duration) (*decline, time.Time) {
	x.t.Helper()
	f, err := x.read(d)
	if err != nil {
		x.t.Fatalf("want Decline %d, read %v", want, err)
	}
	if f.Body != bDecline || f.Decline.Reason != want {
		x.t.Fatalf("want Decline %d, got frame %d %+v %+v", want, f.Body, f.Decline, f.Probe)
	}
	return f.Decline, time.Now()
}

func payPair(t *testing.T, d uint32) (*pair, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	p := newPair(t, "tcp", protocol.Config{PayDifficulty: int(d), Prover: countingProver{&calls}})
	return p, &calls
}

// §5b: when the ack asked a payment, the verifier's first frame after it
// MUST be a Probe with a valid pay or a Verdict; "any other frame that
// decodes (no pay, an invalid one, a Challenge before any probe)" is
// answered Decline{BUSY} (detail: the bits asked), a linger of at most
// 0.5 s and a reset ErrCodeBusy, the answerer never called. The check
// comes before any other check of the frame: an unpaid probe whose
// nonce is over 32 bytes (a violation by step 6) is BUSY too.
func TestSpec119UnpaidFirstFrameBusy(t *testing.T) {
	t.Parallel()
	p, calls := payPair(t, 12)
	ch := &challenge{Round: 1, Rounds: 3, Domain: "d", Narrative: "a narrative", Question: "a question?", BudgetMs: 15000}
	for _, c := range []struct {
		name  string
		first func(a *helloAck, x *raw) *frame
	}{
		{"challenge before any probe", func(*helloAck, *raw) *frame { return &frame{Body: bChallenge, Challenge: ch} }},
		{"probe without pay", func(*helloAck, *raw) *frame {
			return &frame{Body: bProbe, Probe: &probe{Seq: 1, Nonce: randBytes(8)}}
		}},
		{"unpaid probe, nonce of 33 bytes", func(*helloAck, *raw) *frame {
			return &frame{Body: bProbe, Probe: &probe{Seq: 1, Nonce: randBytes(33)}}
		}},
		{"pay of 33 bytes", func(a *helloAck, x *raw) *frame {
			// a digest with the bits asked, over a pay longer than 32 bytes
			pay := append(make([]byte, 25), x.pay33(a)...)
			return &frame{Body: bProbe, Probe: &probe{Seq: 1, Nonce: randBytes(8), Pay: pay}}
		}},
		{"an answer", func(*helloAck, *raw) *frame { return &frame{Body: bAnswer, Answer: &answer{Round: 1, Answer: "x"}} }},
		{"a second hello", func(_ *helloAck, x *raw) *frame { return &frame{Body: bHello, Hello: x.h} }},
	} {
		x := rawHello(t, p.ctx, p.mine, p.oursH.ID(), nil)
		a := x.ack()
		if a.PayDifficulty != 12 || len(a.PayNonce) != 16 {
			t.Fatalf("%s: ask %d bits, nonce %d bytes; want 12 and 16", c.name, a.PayDifficulty, len(a.PayNonce))
		}
		x.write(c.first(a, x))
		dec, at := x.expectDecline(drBusy, 5*time.Second)
		if !strings.Contains(dec.Detail, "12") {
			t.Errorf("%s: detail %q does not name the bits asked", c.name, dec.Detail)
		}
		code, ok, end := x.endCode(3 * time.Second)
		if !ok || code != codeBusy {
			t.Fatalf("%s: stream ended with code %#x (%v), want a reset ErrCodeBusy", c.name, code, ok)
		}
		if lag := end.Sub(at); lag > 500*time.Millisecond+400*time.Millisecond {
			t.Errorf("%s: reset %v after the decline, want a linger of at most 0.5 s", c.name, lag)
		}
		pr := p.ourProved(t)
		if !errors.Is(pr.Err, protocol.ErrVerifierUnpaid) || pr.Rounds != 0 {
			t.Fatalf("%s: our prover: %+v", c.name, pr)
		}
		if n := calls.Load(); n != 0 {
			t.Fatalf("%s: answerer called %d times", c.name, n)
		}
	}
}

// pay33 finds an 8-byte tail that, after 25 zero bytes, pays the ask.
func (x *raw) pay33(a *helloAck) []byte {
	x.t.Helper()
	prefix := make([]byte, 25)
	for i := uint64(0); i < 1<<24; i++ {
		tail := make([]byte, 8)
		for j := 0; j < 8; j++ {
			tail[7-j] = byte(i >> (8 * j))
		}
		if leadingZeros(payDigest(a.PayNonce, x.me.id, append(append([]byte{}, prefix...), tail...))) >= int(a.PayDifficulty) {
			return tail
		}
	}
	x.t.Fatal("no 33-byte pay found")
	return nil
}

// §6 step 2 and §5b: a prover that asks a verifier D_v bits and is asked
// more than D_v + 2 bits of proof of work declines BUSY (detail: the bits
// asked and the most it solves) before it solves anything, and resets
// ErrCodeBusy after the busy linger (0.5 s at most); D_v + 2 bits exactly
// are solved and the ack asks D_v.
func TestSpec119PowAboveAskPlusTwoDeclined(t *testing.T) {
	t.Parallel()
	p, _ := payPair(t, 12)

	x := rawHello(t, p.ctx, p.mine, p.oursH.ID(), func(h *hello) { h.PowDifficulty = 14 })
	if a := x.ack(); a.PayDifficulty != 12 {
		t.Fatalf("D_v + 2: ack asks %d bits, want 12", a.PayDifficulty)
	}
	x.s.Reset()
	p.ourProved(t)

	x = rawHello(t, p.ctx, p.mine, p.oursH.ID(), func(h *hello) { h.PowDifficulty = 15 })
	dec, at := x.expectDecline(drBusy, handshakeTimeout)
	if !strings.Contains(dec.Detail, "15") || !strings.Contains(dec.Detail, "14") {
		t.Errorf("detail %q names not the bits asked (15) and the most solved (14)", dec.Detail)
	}
	code, ok, end := x.endCode(3 * time.Second)
	if !ok || code != codeBusy {
		t.Fatalf("stream ended with code %#x (%v), want a reset ErrCodeBusy", code, ok)
	}
	if lag := end.Sub(at); lag > 900*time.Millisecond {
		t.Errorf("reset %v after the decline, want at most 0.5 s", lag)
	}
}
