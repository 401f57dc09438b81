package httpgw

import (
	"crypto/ed25519"
	"crypto/sha512"
	"math/big"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	cryptopb "github.com/libp2p/go-libp2p/core/crypto/pb"
	"github.com/libp2p/go-libp2p/core/peer"
)

// identityKey is the Ed25519 public key that encodes the identity point
// (y = 1): its "signature" of any message is R = [a]B, S = a for any
// scalar a, since [S]B − [k]A = [a]B whatever k. It holds no secret: a
// PrivKey anyone can make.
type identityKey struct{ sig []byte }

func newIdentityKey() identityKey {
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = 9
	priv := ed25519.NewKeyFromSeed(seed)
	h := sha512.Sum512(seed)
	h[0] &= 248
	h[31] &= 127
	h[31] |= 64
	le := make([]byte, 32)
	for i := range le {
		le[i] = h[31-i]
	}
	l, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
	ab := new(big.Int).Mod(new(big.Int).SetBytes(le), l).Bytes()
	s := make([]byte, 32)
	for i := range ab {
		s[i] = ab[len(ab)-1-i]
	}
	return identityKey{sig: append(append([]byte{}, priv.Public().(ed25519.PublicKey)...), s...)}
}

func (k identityKey) pub() crypto.PubKey {
	raw := make([]byte, 32)
	raw[0] = 1
	p, err := crypto.UnmarshalEd25519PublicKey(raw)
	if err != nil {
		panic(err)
	}
	return p
}
func (k identityKey) Equals(o crypto.Key) bool        { return false }
func (k identityKey) Raw() ([]byte, error)            { return nil, nil }
func (k identityKey) Type() cryptopb.KeyType          { return cryptopb.KeyType_Ed25519 }
func (k identityKey) Sign(msg []byte) ([]byte, error) { return k.sig, nil }
func (k identityKey) GetPublic() crypto.PubKey        { return k.pub() }

// audit84: the start's proof of key possession took an Ed25519 key of
// small order (here the identity point), under which anyone signs any
// message: anyone could start a session as that peer ID, and the door
// signed its verdict about it. It is now bad_key (attestation.md §2).
func TestStartAudit84SmallOrderKey(t *testing.T) {
	_, _, base := fakeDoor(t, nil)
	a := newAgent(t, base)
	k := newIdentityKey()
	if ok, err := k.pub().Verify([]byte("any message at all"), k.sig); !ok || err != nil {
		t.Fatalf("the forged signature does not verify (%v): the test is wrong", err)
	}
	var err error
	if a.id, err = peer.IDFromPublicKey(k.pub()); err != nil {
		t.Fatal(err)
	}
	a.priv = k
	v := a.create()
	if st, eb := a.post("/v1/sessions/"+v.SessionID+"/start", a.startReq(v), nil); st != 400 || eb.Code != CodeBadKey {
		t.Fatalf("start under a small-order key anyone can sign for: %d %+v, want 400 bad_key", st, eb)
	}
}
