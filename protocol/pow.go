package protocol

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"github.com/libp2p/go-libp2p/core/peer"
)

// The payment step (spec/protocol.md §5a): before a verifier draws a
// challenge set, and so before it can sign anything, the peer it verifies
// (the requester of the attestation) pays a hashcash-style proof of work
// bound to the session: a pow such that
//
//	SHA-256(PowTag || hello nonce || requester peer ID || pow)
//
// has at least D leading zero bits, D announced in the hello.
const (
	// PowTag is the domain-separation tag of the proof-of-work digest.
	PowTag = "acaptcha/attest/pow/v1\x00"
	// MaxPowDifficulty is the largest D a hello may carry.
	MaxPowDifficulty = 32
	// MaxPowBytes caps the pow nonce in a HelloAck.
	MaxPowBytes = 32
	// DefaultPowDifficulty is a verifier's base D by default: NoPow, so a
	// peer without recent failures on an idle node is asked for nothing
	// and provers written to the 1.0.0 spec, which never pay, keep
	// interoperating; failures and load still raise D (spec §5a). Public
	// nodes under attack raise the base (PublicPowDifficulty).
	DefaultPowDifficulty = NoPow
	// PublicPowDifficulty is the recommended base D for a node exposed to
	// anonymous peers (about 65,000 hashes, a few milliseconds of one
	// core); 1.0.0 provers cannot pay it.
	PublicPowDifficulty = 16
	// DefaultMaxPowDifficulty caps the D a verifier asks for (load and
	// failures included) and the D a prover agrees to pay (2^22 hashes,
	// well under a second).
	DefaultMaxPowDifficulty = 22
	// NoPow as Config.PowDifficulty asks peers without recent failures on
	// an idle node for no proof of work: 1.0.0 provers, which never pay,
	// can then be verified (D still rises with load and failures).
	NoPow = -1
)

// ErrPowTooHard is returned by SolvePow for a difficulty above what the
// caller agreed to pay.
var ErrPowTooHard = errors.New("acaptcha: proof-of-work difficulty too high")

// PowDigest is SHA-256(PowTag || nonce || requester || pow).
func PowDigest(nonce []byte, requester peer.ID, pow []byte) [32]byte {
	return tagDigest(PowTag, nonce, requester, pow)
}

// tagDigest is SHA-256(tag || nonce || id || pow): the digest of §5a's
// proof of work (PowTag) and of §5b's payment (PayTag).
func tagDigest(tag string, nonce []byte, id peer.ID, pow []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte(tag))
	h.Write(nonce)
	h.Write([]byte(id))
	h.Write(pow)
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// LeadingZeroBits counts the leading zero bits of d, most significant bit
// of d[0] first.
func LeadingZeroBits(d [32]byte) int {
	n := 0
	for _, b := range d {
		if b != 0 {
			return n + bits.LeadingZeros8(b)
		}
		n += 8
	}
	return n
}

// CheckPow reports whether pow pays difficulty d for the session with this
// hello nonce and requester. Difficulty 0 is paid by anything (an empty
// pow included); otherwise pow must be 1..MaxPowBytes bytes.
func CheckPow(nonce []byte, requester peer.ID, pow []byte, d int) bool {
	return checkTagged(PowTag, nonce, requester, pow, d)
}

func checkTagged(tag string, nonce []byte, id peer.ID, pow []byte, d int) bool {
	if d <= 0 {
		return true
	}
	if d > MaxPowDifficulty || len(pow) == 0 || len(pow) > MaxPowBytes {
		return false
	}
	return LeadingZeroBits(tagDigest(tag, nonce, id, pow)) >= d
}

// SolvePow finds a pow of difficulty d (at most maxD): an 8-byte
// big-endian counter from 0 up. It stops when ctx ends. Difficulty 0
// needs no pow (nil).
func SolvePow(ctx context.Context, nonce []byte, requester peer.ID, d, maxD int) ([]byte, error) {
	return solveTagged(ctx, PowTag, nonce, requester, d, maxD)
}

func solveTagged(ctx context.Context, tag string, nonce []byte, id peer.ID, d, maxD int) ([]byte, error) {
	if d <= 0 {
		return nil, nil
	}
	if d > maxD || d > MaxPowDifficulty {
		return nil, fmt.Errorf("%w: %d bits, this node pays at most %d", ErrPowTooHard, d, min(maxD, MaxPowDifficulty))
	}
	// One buffer: prefix, then the 8-byte counter, hashed whole per try.
	buf := make([]byte, 0, len(tag)+len(nonce)+len(id)+8)
	buf = append(append(append(buf, tag...), nonce...), id...)
	n := len(buf)
	buf = buf[:n+8]
	for i := uint64(0); ; i++ {
		if i&0xfff == 0 && ctx.Err() != nil {
			return nil, fmt.Errorf("acaptcha: proof of work: %w", ctx.Err())
		}
		binary.BigEndian.PutUint64(buf[n:], i)
		if LeadingZeroBits(sha256.Sum256(buf)) >= d {
			return append([]byte(nil), buf[n:]...), nil
		}
	}
}

// The verifier's payment (spec/protocol.md §5b): a prover may ask the
// verifier, before it answers anything, for a proof of work of D_v bits
// (HelloAck.pay_difficulty) bound to a fresh nonce of its own
// (HelloAck.pay_nonce, PayNonceBytes) and to the verifier's peer ID:
//
//	SHA-256(PayTag || pay nonce || verifier peer ID || pay)
//
// with at least D_v leading zero bits, pay (1..MaxPowBytes bytes) sent in
// the first Probe. A verifier that opens sessions on its own initiative
// then spends its own work before the prover's answerer runs.
const (
	// PayTag is the domain-separation tag of the payment digest.
	PayTag = "acaptcha/attest/pay/v1\x00"
	// PayNonceBytes is the length of HelloAck.pay_nonce when D_v > 0.
	PayNonceBytes = 16
	// MutualWaitPayDifficulty is the least payment a verify-first prover
	// asks of a verifier it answers because each waits for the other
	// (spec §5c; Config.MutualWait): about a million hashes.
	MutualWaitPayDifficulty = 20
	// PaySlack is how many bits more than it asks a verifier to pay
	// (D_v) this node's prover solves of that verifier's own proof of
	// work (§5a) before the verifier has paid anything: a verifier that
	// came to it and asks more is declined BUSY (spec §5b). The prover
	// solves first (its pow is in the ack that asks the payment), so a
	// verifier that walks away after the ack costs the prover at most
	// 2^(D_v+PaySlack) hashes, not 2^MaxPowDifficulty; the slack leaves
	// room for a verifier's load and failure bits (§5a's G).
	PaySlack = 2
)

// PayDigest is SHA-256(PayTag || nonce || verifier || pay).
func PayDigest(nonce []byte, verifier peer.ID, pay []byte) [32]byte {
	return tagDigest(PayTag, nonce, verifier, pay)
}

// CheckPay reports whether pay pays difficulty d for the session with this
// pay nonce and verifier, by the rules of CheckPow.
func CheckPay(nonce []byte, verifier peer.ID, pay []byte, d int) bool {
	return checkTagged(PayTag, nonce, verifier, pay, d)
}

// SolvePay finds a pay of difficulty d (at most maxD) as SolvePow does.
func SolvePay(ctx context.Context, nonce []byte, verifier peer.ID, d, maxD int) ([]byte, error) {
	return solveTagged(ctx, PayTag, nonce, verifier, d, maxD)
}
