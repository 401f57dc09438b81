package attestation

import (
	"math/big"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"
)

// ed25519P is the field prime of edwards25519, 2^255 − 19.
var ed25519P = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))

// ed25519SmallOrderY returns the y-coordinates (mod p) of the eight
// points of edwards25519 whose order divides 8: 1 (the identity), p − 1
// (order 2), 0 (order 4, x = ±√−1) and the two of order 8. On −x² + y² =
// 1 + d·x²·y², doubling gives y' = (y² + x²) / (2 + x² − y²), so a point of
// order 8 (doubling to y' = 0) has y² = −x², and the curve equation reads
// d·x⁴ − 2·x² − 1 = 0: x² = (1 ± √(1 + d)) / d, y = ±√(−x²).
var ed25519SmallOrderY = sync.OnceValue(func() []*big.Int {
	p := ed25519P
	// d = −121665 / 121666 mod p
	d := new(big.Int).ModInverse(big.NewInt(121666), p)
	d.Mul(d, big.NewInt(-121665))
	d.Mod(d, p)
	dInv := new(big.Int).ModInverse(d, p)
	out := []*big.Int{big.NewInt(0), big.NewInt(1), new(big.Int).Sub(p, big.NewInt(1))}
	onePlusD := new(big.Int).Add(d, big.NewInt(1))
	r := new(big.Int).ModSqrt(onePlusD.Mod(onePlusD, p), p)
	if r == nil {
		panic("attestation: 1 + d has no square root")
	}
	for _, sr := range []*big.Int{r, new(big.Int).Sub(p, r)} {
		x2 := new(big.Int).Add(big.NewInt(1), sr)
		x2.Mul(x2, dInv).Mod(x2, p)
		y2 := new(big.Int).Sub(p, x2) // −x²
		if y := new(big.Int).ModSqrt(y2.Mod(y2, p), p); y != nil {
			out = append(out, y, new(big.Int).Sub(p, y))
		}
	}
	if len(out) != 5 {
		panic("attestation: edwards25519 has not two y-coordinates of order 8")
	}
	return out
})

// ed25519SmallOrderKeys are the 32-byte encodings that Go's
// crypto/ed25519 decodes to a point of small order: each y of
// ed25519SmallOrderY with either sign bit, and y + p where that is below
// 2^255 (y = 0 and y = 1), with either sign bit (Go takes y modulo p, and
// x = 0 with the sign bit set as x = 0): fourteen in all.
var ed25519SmallOrderKeys = sync.OnceValue(func() map[string]struct{} {
	m := map[string]struct{}{}
	limit := new(big.Int).Lsh(big.NewInt(1), 255)
	add := func(y *big.Int) {
		if y.Cmp(limit) >= 0 {
			return
		}
		b := make([]byte, 32)
		yb := y.Bytes()
		for i := range yb {
			b[i] = yb[len(yb)-1-i]
		}
		m[string(b)] = struct{}{}
		b[31] |= 0x80
		m[string(b)] = struct{}{}
	}
	for _, y := range ed25519SmallOrderY() {
		add(y)
		add(new(big.Int).Add(y, ed25519P))
	}
	return m
})

// SmallOrderEd25519 reports whether key, the 32-byte encoding of an
// Ed25519 public key, decodes (as Go's crypto/ed25519 decodes it: y taken
// modulo p, the sign bit of x = 0 ignored) to a point of small order.
// Anyone can sign under such a key: [k]A is the identity for one message
// in eight (for the identity point, for every one), and then [S]B = R +
// [k]A holds for R = [S]B, whatever S. So a peer ID of such a key belongs
// to everyone (spec/attestation.md §2).
func SmallOrderEd25519(key []byte) bool {
	_, ok := ed25519SmallOrderKeys()[string(key)]
	return ok
}

// ed25519IDPrefix is how the peer ID of an Ed25519 key begins: the
// identity multihash (00, length 36) of the key's protobuf encoding
// (Type 1, Data of 32 bytes).
const ed25519IDPrefix = "\x00\x24\x08\x01\x12\x20"

// SmallOrderPeerID reports whether id is the peer ID libp2p derives from
// an Ed25519 key of small order (SmallOrderEd25519). Other encodings of
// such a key are no peer's ID (libp2p derives the one above). Anyone can
// complete libp2p's handshakes as such a peer, and no record by or about
// it is valid.
func SmallOrderPeerID(id peer.ID) bool {
	s := string(id)
	if len(s) != len(ed25519IDPrefix)+32 || s[:len(ed25519IDPrefix)] != ed25519IDPrefix {
		return false
	}
	_, ok := ed25519SmallOrderKeys()[s[len(ed25519IDPrefix):]]
	return ok
}
