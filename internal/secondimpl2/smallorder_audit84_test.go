package secondimpl2

import (
	"crypto/ed25519"
	"crypto/rand"
	"math/big"
	"testing"

	"github.com/acaptcha/acaptcha/protocol/attestation"
)

// audit84: attestation.md §2's small-order rule, as this implementation
// reads it ([8]P = identity), and the reference's (a list of encodings)
// agree: on every y below 2^255 that is a small-order y or that plus p,
// with either sign bit, and on random keys.
func TestSmallOrderAudit84MatchesReference(t *testing.T) {
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	enc := func(y *big.Int, sign bool) []byte {
		b := make([]byte, 32)
		yb := y.Bytes()
		for i := range yb {
			b[i] = yb[len(yb)-1-i]
		}
		if sign {
			b[31] |= 0x80
		}
		return b
	}
	var keys [][]byte
	for v := int64(0); v < 19; v++ {
		y := big.NewInt(v)
		keys = append(keys, enc(y, false), enc(y, true), enc(new(big.Int).Add(y, p), false), enc(new(big.Int).Add(y, p), true))
		ym := new(big.Int).Sub(p, big.NewInt(v+1))
		keys = append(keys, enc(ym, false), enc(ym, true))
	}
	// The y of order 8 (attestation.md §2: y² = −x², d·x⁴ − 2x² − 1 = 0).
	d := new(big.Int).Mul(big.NewInt(-121665), new(big.Int).ModInverse(big.NewInt(121666), p))
	d.Mod(d, p)
	r := new(big.Int).ModSqrt(new(big.Int).Add(d, big.NewInt(1)), p)
	order8 := 0
	for _, sr := range []*big.Int{r, new(big.Int).Sub(p, r)} {
		x2 := new(big.Int).Mul(new(big.Int).Add(big.NewInt(1), sr), new(big.Int).ModInverse(d, p))
		x2.Mod(x2, p)
		if y := new(big.Int).ModSqrt(new(big.Int).Sub(p, x2), p); y != nil {
			for _, yy := range []*big.Int{y, new(big.Int).Sub(p, y)} {
				keys = append(keys, enc(yy, false), enc(yy, true))
				order8 += 2
			}
		}
	}
	if order8 != 4 {
		t.Fatalf("%d encodings of order 8, want 4", order8)
	}
	for range 64 {
		pub, _, _ := ed25519.GenerateKey(rand.Reader)
		keys = append(keys, pub)
	}
	small := 0
	for _, k := range keys {
		ours, ref := smallOrderEd(k), attestation.SmallOrderEd25519(k)
		if ours != ref {
			t.Errorf("%x: small order %t here, %t in the reference", k, ours, ref)
		}
		if ours {
			small++
		}
	}
	if small != 14 {
		// y = 0, 1, p − 1 and the two of order 8 with either sign
		// bit, and 0 + p, 1 + p with either.
		t.Errorf("%d small-order encodings, want 14", small)
	}
}
