package secondimpl2

import (
	"crypto/sha256"

	"google.golang.org/protobuf/encoding/protowire"
)

// gossipIDInput is trust.md §3.4's hashed input, or nil and false when the
// message is named by the digest of its data.
func gossipIDInput(data []byte) ([]byte, bool) {
	if len(data) > maxEnvelope {
		return nil, false
	}
	fs, err := parseFields(data)
	if err != nil {
		return nil, false
	}
	m := msg(fs)
	km, ok, err := m.sub(1)
	if err != nil || !ok {
		return nil, false
	}
	t, okT := km.varint(1)
	key, okD := km.bytes(2)
	typ := int32(t)
	if !okT || !okD || typ < 0 || typ > 3 {
		return nil, false
	}
	pt, _ := m.bytes(2)
	pl, _ := m.bytes(3)
	sig, _ := m.bytes(5)
	b := append([]byte("acaptcha gossip record"), 0)
	b = protowire.AppendVarint(b, uint64(typ))
	b = protowire.AppendBytes(b, key)
	b = protowire.AppendBytes(b, pt)
	b = protowire.AppendBytes(b, pl)
	b = protowire.AppendBytes(b, sig)
	return b, true
}

func gossipMessageID(data []byte) []byte {
	in, ok := gossipIDInput(data)
	if !ok {
		in = data
	}
	h := sha256.Sum256(in)
	return h[:]
}

// keyUnits is the signature-check price of one key (trust.md §3.4).
func keyUnits(typ int32, dataLen int) int {
	switch typ {
	case 1:
		return 1
	case 0:
		n := dataLen - 38
		if n < 0 {
			n = 0
		}
		b := 8 * n
		c := (b + 1023) / 1024
		if c*c < 1 {
			return 1
		}
		return c * c
	}
	return 2
}
