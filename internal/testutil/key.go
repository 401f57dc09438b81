package testutil

import (
	"crypto/rand"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// NewKey returns a fresh Ed25519 identity and its peer ID.
func NewKey(t testing.TB) (crypto.PrivKey, peer.ID) {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return k, id
}

// NewPeerID returns a fresh random Ed25519 peer ID without generating a
// key: for subjects, forwarders and other peers a test only names and
// never signs as. Its public key is 32 random bytes (not checked to be a
// curve point), so nothing can verify a signature against it; a key
// generation costs about 2 ms under -race, and tests that name thousands
// of peers spent most of their time there.
func NewPeerID(t testing.TB) peer.ID {
	t.Helper()
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	pub, err := crypto.UnmarshalEd25519PublicKey(b[:])
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
