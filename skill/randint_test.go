package skill

import (
	"bytes"
	"crypto/rand"
	"math/big"
	mrand "math/rand/v2"
	"testing"
)

// randIntN draws what crypto/rand.Int draws from the same bytes, and
// leaves the reader where it leaves it: seeded sessions pick the same
// questions as before it replaced rand.Int.
func TestRandIntNMatchesCryptoRandInt(t *testing.T) {
	r := mrand.New(mrand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 5, 7, 8, 9, 200, 255, 256, 257, 1000, 65536, 65537, 1 << 40, 1<<56 - 3} {
		stream := make([]byte, 4096)
		for i := range stream {
			stream[i] = byte(r.Uint32())
		}
		a, b := bytes.NewReader(stream), bytes.NewReader(stream)
		for range 50 {
			want, err := rand.Int(a, big.NewInt(int64(n)))
			if err != nil {
				t.Fatalf("n=%d: rand.Int: %v", n, err)
			}
			got, err := randIntN(b, n)
			if err != nil {
				t.Fatalf("n=%d: randIntN: %v", n, err)
			}
			if int64(got) != want.Int64() || a.Len() != b.Len() {
				t.Fatalf("n=%d: randIntN %d (%d bytes left), rand.Int %d (%d left)", n, got, b.Len(), want, a.Len())
			}
		}
	}
	for _, n := range []int{0, -1, 1<<56 + 1} {
		if _, err := randIntN(bytes.NewReader(make([]byte, 16)), n); err == nil {
			t.Errorf("randIntN(%d): no error", n)
		}
	}
	if _, err := randIntN(bytes.NewReader(nil), 5); err == nil {
		t.Error("randIntN from an empty reader: no error")
	}
}
