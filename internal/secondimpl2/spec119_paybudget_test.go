package secondimpl2

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
)

// protocol.md §5b, §9a (1.13.1): the Go verifier charges a payment of D_v
// bits 2^D_v hashes before it solves it, at most a sixteenth of 2^28 an
// hour for one prover: "four payments of 22 bits", 2^24 hashes. An
// explicit verification (Node.Verify) of a prover the node contacted (a
// bootstrap dial) pays up to 22 bits; my prover asks 21 each time (each
// solved well within the verifier's 4 s, even on a loaded machine):
// eight are paid, the ninth is refused at once, before any solving (no
// session, ErrPayRefused; my prover reads a reset ErrCodeBusy after its
// ack). Not parallel: the solving takes a core for seconds.
func TestSpec119PayBudgetPerProver(t *testing.T) {
	hm, km := newHost(t, "/ip4/127.0.0.1/tcp/0")
	mine := newNode(hm, km)
	mine.prover = proverOpts{answer: truth.answerMine, payDifficulty: 21}
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
	t.Cleanup(func() { n.Close() })
	// first contact: 21 bits are above what a verification nobody asked
	// for pays (max(D, 16) + 2): refused, nothing charged
	select {
	case pr := <-mine.proved:
		if code, _ := remoteCode(pr.err); code != codeBusy || pr.verdict != nil {
			t.Fatalf("first contact asked 21 bits: %v, verdict %+v", pr.err, pr.verdict)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("the node did not verify mine")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := 1; i <= 9; i++ {
		began := time.Now()
		res, err := n.Verify(ctx, hm.ID())
		pr := <-mine.proved
		if i <= 8 {
			if err != nil || !res.Verdict.Accepted || pr.verdict == nil {
				t.Fatalf("payment %d of 21 bits: %v %+v (my prover: %v)", i, err, res, pr.err)
			}
			continue
		}
		if !errors.Is(err, protocol.ErrPayRefused) || (res != nil && res.Envelope != nil) {
			t.Fatalf("payment 9 of 21 bits (2^24 hashes paid this hour): %v %+v, want ErrPayRefused", err, res)
		}
		if d := time.Since(began); d > 2*time.Second {
			t.Fatalf("payment 9 refused after %v: want at once, before any solving (not a solve that timed out)", d)
		}
		if code, remote := remoteCode(pr.err); !remote || code != codeBusy || pr.verdict != nil {
			t.Fatalf("payment 9: my prover read %v, verdict %+v; want a reset ErrCodeBusy", pr.err, pr.verdict)
		}
	}
}
