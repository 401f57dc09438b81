package testutil

import (
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// TestNewPeerIDIsAnEd25519ID: NewPeerID's IDs are what NewKey's are to
// code that only reads a peer ID (valid, Ed25519, inline public key that
// matches the ID), and distinct.
func TestNewPeerIDIsAnEd25519ID(t *testing.T) {
	_, want := NewKey(t)
	seen := map[string]bool{}
	for range 100 {
		id := NewPeerID(t)
		if err := id.Validate(); err != nil {
			t.Fatal(err)
		}
		if len(id) != len(want) {
			t.Fatalf("ID of %d bytes, NewKey's %d", len(id), len(want))
		}
		pub, err := id.ExtractPublicKey()
		if err != nil {
			t.Fatal(err)
		}
		if pub.Type() != crypto.Ed25519 || !id.MatchesPublicKey(pub) {
			t.Fatalf("%s: key type %v", id, pub.Type())
		}
		if seen[string(id)] {
			t.Fatalf("%s drawn twice", id)
		}
		seen[string(id)] = true
	}
}
