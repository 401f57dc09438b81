package secondimpl2

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"google.golang.org/protobuf/proto"
)

// The verifier's payment (protocol.md §5b).

const (
	payTag = "acaptcha/attest/pay/v1\x00"
	// payNonceLen is the length of HelloAck.pay_nonce when D_v > 0.
	payNonceLen = 16
	// maxOwnPay is the most this verifier pays (§5b: 22 bits by default,
	// the maximum it pays as a prover in §5a).
	maxOwnPay = 22
)

// payDigest is SHA-256(tag || pay_nonce || verifier || pay).
func payDigest(nonce, verifier, pay []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte(payTag))
	h.Write(nonce)
	h.Write(verifier)
	h.Write(pay)
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// payValid: D_v = 0 is paid by anything, an empty pay included; otherwise
// the pay is 1..32 bytes and its digest has at least D_v leading zero
// bits (D_v at most 32).
func payValid(nonce, verifier, pay []byte, d int) bool {
	if d == 0 {
		return true
	}
	if d > 32 || len(pay) < 1 || len(pay) > 32 {
		return false
	}
	return leadingZeros(payDigest(nonce, verifier, pay)) >= d
}

// askMalformed: an ack with D_v > 32, with D_v > 0 and a pay_nonce not of
// 16 bytes, or with a pay_nonce and D_v = 0 (§5b).
func askMalformed(a *helloAck) bool {
	switch {
	case a.PayDifficulty > 32:
		return true
	case a.PayDifficulty > 0:
		return len(a.PayNonce) != payNonceLen
	default:
		return len(a.PayNonce) != 0
	}
}

// solvePay counts an 8-byte big-endian counter up from 0 until it pays d
// bits (what §5b says the reference does; any 1..32 bytes would do). It
// gives up, returning nil, when ctx ends.
func solvePay(ctx context.Context, nonce, verifier []byte, d int) []byte {
	for i := uint64(0); ; i++ {
		if i&0xfff == 0 && ctx.Err() != nil {
			return nil
		}
		p := binary.BigEndian.AppendUint64(nil, i)
		if payValid(nonce, verifier, p, d) {
			return p
		}
	}
}

// My encoding of the §5b fields is what the .proto says: the generated
// messages read them back (fields 4 and 5 of HelloAck, 3 of Probe), and a
// ProbeAck never carries a pay.
func TestPayFieldsMatchProto(t *testing.T) {
	a := &helloAck{Nonce: randBytes(32), Pow: []byte{1}, Reciprocal: 1, PayDifficulty: 17, PayNonce: randBytes(payNonceLen)}
	raw := encodeFrame(&frame{Body: bHelloAck, HelloAck: a})
	var f pb.Frame
	if err := proto.Unmarshal(raw[1:], &f); err != nil || raw[0] != byte(len(raw)-1) {
		t.Fatalf("hello ack: %v", err)
	}
	if g := f.GetHelloAck(); g.GetPayDifficulty() != 17 || !bytes.Equal(g.GetPayNonce(), a.PayNonce) {
		t.Fatalf("hello ack read back: %v", g)
	}
	pr := &probe{Seq: 1, Nonce: randBytes(8), Pay: []byte{0, 0, 0, 9}}
	raw = encodeFrame(&frame{Body: bProbe, Probe: pr})
	f.Reset()
	if err := proto.Unmarshal(raw[1:], &f); err != nil || !bytes.Equal(f.GetProbe().GetPay(), pr.Pay) {
		t.Fatalf("probe read back: %v %v", err, f.GetProbe())
	}
	raw = encodeFrame(&frame{Body: bProbeAck, Probe: pr})
	f.Reset()
	if err := proto.Unmarshal(raw[1:], &f); err != nil || f.GetProbeAck() == nil || len(f.GetProbeAck().ProtoReflect().GetUnknown()) != 0 {
		t.Fatalf("probe ack carries more than seq and nonce: %v %v", err, f.GetProbeAck())
	}
}
