package peer

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol"
)

// When a verify-first peer's session verifying us fails, Attest's error
// wraps that failure: a broken connection is still ErrNetwork (the CLI
// exits with its network code), where the text alone was kept before.
func TestVerifiedFirstFailureWrapsItsError(t *testing.T) {
	_, key, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p, err := peer.IDFromPublicKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cause := fmt.Errorf("%w: stream reset", protocol.ErrNetwork)
	_, err = (&Node{}).afterVerifiedFirst(context.Background(), p, protocol.ProverResult{Verifier: p, Err: cause})
	if !errors.Is(err, protocol.ErrNetwork) {
		t.Errorf("error %v does not wrap ErrNetwork", err)
	}
	_, err = (&Node{}).afterVerifiedFirst(context.Background(), p, protocol.ProverResult{Verifier: p, Reason: "wrong_answer"})
	if err == nil || errors.Is(err, protocol.ErrNetwork) {
		t.Errorf("a rejection of us: error %v", err)
	}
}
