package secondimpl2

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// The verifier's payment (protocol.md §5b) with the reference.

// countingProver is ourProver counting its answerer calls.
type countingProver struct{ calls *atomic.Int32 }

func (p countingProver) NewSession() skill.Answerer { return p }
func (p countingProver) Answer(ctx context.Context, c skill.Challenge) (string, error) {
	p.calls.Add(1)
	return ourProver{}.Answer(ctx, c)
}

// (a) Our prover asks 12 bits of my verifier, which came to it (mine
// opened the connection): my verifier pays in probe 1 and the session is
// accepted and signed, our prover verifying the record.
func TestInteropPayMyVerifierPaysOurProver(t *testing.T) {
	t.Parallel()
	for _, tr := range []string{"tcp", "quic"} {
		t.Run(tr, func(t *testing.T) {
			var calls atomic.Int32
			p := newPair(t, tr, protocol.Config{PayDifficulty: 12, Prover: countingProver{&calls}})
			vr := p.mine.verify(p.ctx, p.oursH.ID(), defaultVerifierOpts())
			p.checkMine(t, vr)
			checkPaid(t, vr, 12, p.mine)
			if c := calls.Load(); c != 3 {
				t.Fatalf("our answerer called %d times, want 3", c)
			}
		})
	}
}

// (b) My prover asks 12 bits of our verifier, which came to it (ours
// opened the connection): our verifier pays and the session is accepted.
func TestInteropPayOurVerifierPaysMyProver(t *testing.T) {
	t.Parallel()
	p := newPairDialing(t, "tcp", protocol.Config{}, true)
	p.mine.prover.payDifficulty = 12
	res, err := p.ours.Verify(p.ctx, p.mine.h.ID(), false)
	pr := p.checkOurs(t, res, err)
	if pr.payAsked != 12 || pr.unpaid {
		t.Fatalf("my prover: asked %d, unpaid %v", pr.payAsked, pr.unpaid)
	}
}

// (c) My verifier as one before document 1.13.0 (it reads no ask and
// pays nothing), and one that sends an invalid pay, against our prover
// asking 12 bits: each gets Decline{BUSY} at probe 1, no session ran
// (nothing signed), and our answerer was never called. A paying session
// afterwards is served.
func TestInteropPayUnpaidVerifierTurnedAway(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	p := newPair(t, "tcp", protocol.Config{PayDifficulty: 12, Prover: countingProver{&calls}})
	for _, c := range []struct {
		name string
		edit func(o *verifierOpts)
	}{
		{"pre-1.13 verifier, no pay", func(o *verifierOpts) { o.noPay = true }},
		{"invalid pay", func(o *verifierOpts) { o.wrongPay = true }},
	} {
		o := defaultVerifierOpts()
		c.edit(&o)
		vr := p.mine.verify(p.ctx, p.oursH.ID(), o)
		if !errors.Is(vr.noSession, errBusy) || !vr.busyDecline || vr.envelope != nil {
			t.Fatalf("%s: my verifier: no session %v, busy decline %v, envelope %d bytes", c.name, vr.noSession, vr.busyDecline, len(vr.envelope))
		}
		pr := p.ourProved(t)
		if !errors.Is(pr.Err, protocol.ErrVerifierUnpaid) || pr.Rounds != 0 || pr.Envelope != nil {
			t.Fatalf("%s: our prover: %+v", c.name, pr)
		}
		if n := calls.Load(); n != 0 {
			t.Fatalf("%s: our answerer was called %d times", c.name, n)
		}
		t.Logf("%s: %v", c.name, vr.noSession)
	}
	vr := p.mine.verify(p.ctx, p.oursH.ID(), defaultVerifierOpts())
	p.checkMine(t, vr)
	checkPaid(t, vr, 12, p.mine)
}

// Our verifier refuses to pay, with no session: my prover asking on a
// connection it opened itself (asked anyway, payAlways), and asking more
// than our maximum (22 bits by default) of a verifier that came to it;
// and it takes a malformed ask as a wrong nonce (§5b: reset
// ErrCodeProtocolViolation, no session).
func TestInteropPayOurVerifierRefuses(t *testing.T) {
	t.Parallel()
	type tc struct {
		name      string
		oursDials bool
		prover    func(o *proverOpts)
		want      error
		code      network.StreamErrorCode
	}
	malformed := func(d uint32, nonceLen int) func(o *proverOpts) {
		return func(o *proverOpts) {
			o.ackHook = func(a *helloAck) { a.PayDifficulty, a.PayNonce = d, randBytes(nonceLen) }
		}
	}
	for _, c := range []tc{
		{"prover opened the connection", false, func(o *proverOpts) { o.payDifficulty, o.payAlways = 12, true }, protocol.ErrPayRefused, codeBusy},
		{"above the maximum", true, func(o *proverOpts) { o.payDifficulty = 23 }, protocol.ErrPayRefused, codeBusy},
		{"D_v > 32", true, malformed(33, 16), protocol.ErrUnpaid, codePV},
		{"nonce of 15 bytes", true, malformed(8, 15), protocol.ErrUnpaid, codePV},
		{"nonce of 17 bytes", true, malformed(8, 17), protocol.ErrUnpaid, codePV},
		{"nonce without D_v", true, malformed(0, 16), protocol.ErrUnpaid, codePV},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := newPairDialing(t, "tcp", protocol.Config{}, c.oursDials)
			c.prover(&p.mine.prover)
			res, err := p.ours.Verify(p.ctx, p.mine.h.ID(), false)
			if !errors.Is(err, c.want) || (res != nil && res.Envelope != nil) {
				t.Fatalf("our verifier: %v, %+v; want %v and nothing signed", err, res, c.want)
			}
			pr := p.myProved(t)
			code, remote := remoteCode(pr.err)
			if pr.verdict != nil || pr.answered != 0 || !remote || code != c.code {
				t.Fatalf("my prover: err %v (remote code %#x %v, want %#x), verdict %+v", pr.err, code, remote, c.code, pr.verdict)
			}
		})
	}
}

type failSource struct{}

func (failSource) Next(ctx context.Context) (*skill.Set, error) {
	return nil, errors.New("no set")
}
func (failSource) Name() string { return "fail" }

// A Verdict is a paid first frame too (§5b: "a verifier that gives up
// costs nothing more"): our verifier with a failing source, asked 12
// bits by my prover, ends inconclusive and my prover takes the verdict
// instead of turning it away BUSY.
func TestInteropPayInconclusiveVerdictTaken(t *testing.T) {
	t.Parallel()
	p := newPairDialing(t, "tcp", protocol.Config{Source: failSource{}}, true)
	p.mine.prover.payDifficulty = 12
	res, err := p.ours.Verify(p.ctx, p.mine.h.ID(), false)
	if err == nil && res.Verdict.Accepted {
		t.Fatalf("accepted without a source: %+v", res)
	}
	pr := p.myProved(t)
	if pr.payAsked != 12 || pr.unpaid || pr.verdict == nil || pr.verdict.Reason != "inconclusive" {
		t.Fatalf("my prover: asked %d unpaid %v verdict %+v err %v", pr.payAsked, pr.unpaid, pr.verdict, pr.err)
	}
}

// The same with the reference node (peer.Node, Limits.PayDifficulty 12):
// my verifier, which came to it and which it does not admit, is asked;
// unpaid it is turned away Decline{BUSY} before any answerer call, paid
// it is accepted.
func TestInteropPayWithNode(t *testing.T) {
	t.Parallel()
	key, _, err := lcrypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	n, err := peer.New(peer.Config{Key: key, StorePath: t.TempDir() + "/store.db", ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		Source: ourCorpus(t), Prover: countingProver{&calls}, Limits: peer.Limits{PayDifficulty: 12}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	hm, km := newHost(t, "/ip4/127.0.0.1/tcp/0")
	mine := newNode(hm, km)
	mine.prover = proverOpts{answer: truth.answerMine}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := hm.Connect(ctx, lpeer.AddrInfo{ID: n.ID(), Addrs: n.Addrs()}); err != nil {
		t.Fatal(err)
	}
	o := defaultVerifierOpts()
	o.noPay = true
	vr := mine.verify(ctx, n.ID(), o)
	if !errors.Is(vr.noSession, errBusy) || !vr.busyDecline || vr.envelope != nil || calls.Load() != 0 {
		t.Fatalf("unpaid: %v busy decline %v, answerer calls %d", vr.noSession, vr.busyDecline, calls.Load())
	}
	vr = mine.verify(ctx, n.ID(), defaultVerifierOpts())
	if vr.noSession != nil || !vr.accepted || calls.Load() != 3 {
		t.Fatalf("paid: %v %s, answerer calls %d", vr.noSession, vr.reason, calls.Load())
	}
	checkPaid(t, vr, 12, mine)
}
