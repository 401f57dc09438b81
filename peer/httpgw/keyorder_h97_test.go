package httpgw

import (
	"crypto/elliptic"
	"crypto/rand"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// helper-97: http.md §4.2 checks the key (step 1, bad_key) before the
// signature (step 2, bad_signature), and §1 makes a key the rules of
// attestation.md §2 refuse (an Ed25519 key of small order, an ECDSA key
// on another curve than P-256) bad_key. The door checked the signature's
// length between the two: such a key with an empty (or over 1 024-byte)
// signature was bad_signature.
func TestStartKeyBeforeSignatureLength(t *testing.T) {
	p384, _, err := crypto.GenerateECDSAKeyPairWithCurve(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]crypto.PrivKey{"small-order Ed25519": newIdentityKey(), "ECDSA on P-384": p384}
	for name, k := range keys {
		for _, sig := range [][]byte{{}, make([]byte, 1025)} {
			t.Run(name, func(t *testing.T) {
				_, _, base := fakeDoor(t, nil)
				a := newAgent(t, base)
				if a.id, err = peer.IDFromPublicKey(k.GetPublic()); err != nil {
					t.Fatal(err)
				}
				a.priv = k
				v := a.create()
				req := a.startReq(v)
				req.Signature = sig
				if st, eb := a.post("/v1/sessions/"+v.SessionID+"/start", req, nil); st != 400 || eb.Code != CodeBadKey {
					t.Fatalf("start under a refused key with a signature of %d bytes: %d %+v, want 400 bad_key", len(sig), st, eb)
				}
			})
		}
	}
}

// helper-97: http.md §6: a create naming the node's own peer ID is
// bad_peer_id (no node verifies itself).
func TestCreateOwnPeerID(t *testing.T) {
	_, core, base := fakeDoor(t, nil)
	a := newAgent(t, base)
	if st, eb := a.post("/v1/sessions", map[string]string{"peer_id": core.Self().String()}, nil); st != 400 || eb.Code != CodeBadPeerID {
		t.Fatalf("create for the node's own peer ID: %d %+v, want 400 bad_peer_id", st, eb)
	}
}
