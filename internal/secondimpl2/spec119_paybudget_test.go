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
// charged 2^21): eight are charged (paid, or on a loaded machine solved
// too late), the ninth is refused at once, before any solving (no
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
	// A payment the verifier charged and could not solve within its 4 s
	// (a loaded machine) is refused for time, and charged all the same:
	// count it with the paid ones. The refusal for the budget comes at
	// once, before any solving.
	charged := 0
	for i := 1; i <= 12; i++ {
		began := time.Now()
		res, err := n.Verify(ctx, hm.ID())
		took := time.Since(began)
		pr := <-mine.proved
		switch {
		case err == nil && res.Verdict.Accepted && pr.verdict != nil:
			charged++
			continue
		case errors.Is(err, protocol.ErrPayRefused) && took >= 3*time.Second:
			t.Logf("payment %d of 21 bits not solved in time (%v): charged", i, took)
			charged++
			continue
		case !errors.Is(err, protocol.ErrPayRefused) || (res != nil && res.Envelope != nil):
			t.Fatalf("payment %d of 21 bits: %v %+v (my prover: %v)", i, err, res, pr.err)
		}
		if charged != 8 {
			t.Fatalf("payment %d refused at once after %d charged, want 8 (2^24 hashes an hour for one prover)", i, charged)
		}
		if code, remote := remoteCode(pr.err); !remote || code != codeBusy || pr.verdict != nil {
			t.Fatalf("payment %d: my prover read %v, verdict %+v; want a reset ErrCodeBusy", i, pr.err, pr.verdict)
		}
		return
	}
	t.Fatalf("%d payments of 21 bits charged, none refused for the budget", charged)
}
