package protocol

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// countingProver is an oracle prover that counts its answerer calls.
type countingProver struct {
	skill.Prover
	calls atomic.Int64
}

func (c *countingProver) NewSession() skill.Answerer {
	a := c.Prover.NewSession()
	return skill.AnswerFunc(func(ctx context.Context, ch skill.Challenge) (string, error) {
		c.calls.Add(1)
		return a.Answer(ctx, ch)
	})
}

func TestSolvePay(t *testing.T) {
	nonce := bytes.Repeat([]byte{9}, PayNonceBytes)
	v := peer.ID("verifier")
	pay, err := SolvePay(context.Background(), nonce, v, 12, DefaultMaxPowDifficulty)
	if err != nil || !CheckPay(nonce, v, pay, 12) {
		t.Fatalf("%x %v", pay, err)
	}
	// Bound to the tag, the nonce and the verifier: a §5a pow of the same
	// inputs, another verifier's or another nonce's pay does not pay
	// (each has a 2^-12 chance; these inputs are fixed and checked).
	if CheckPay(nonce, peer.ID("other"), pay, 12) || CheckPay(bytes.Repeat([]byte{8}, PayNonceBytes), v, pay, 12) {
		t.Fatal("pay not bound to its verifier and nonce")
	}
	if pow, _ := SolvePow(context.Background(), nonce, v, 12, DefaultMaxPowDifficulty); CheckPay(nonce, v, pow, 12) {
		t.Fatal("a §5a pow pays §5b: the tags do not separate them")
	}
	if _, err := SolvePay(context.Background(), nonce, v, 23, 22); !errors.Is(err, ErrPowTooHard) {
		t.Fatalf("err %v", err)
	}
}

// A verifier that came to a prover asking payment pays it in its first
// probe, and the session runs as any other; one that will not pay so
// much gets no session (nothing signed) and costs the prover no answer.
func TestVerifierPays(t *testing.T) {
	set := testSet("pay-1")
	for _, tc := range []struct {
		name    string
		maxPay  int
		wantErr error
	}{
		{"pays", 0, nil},
		{"too-hard", 10, ErrPayRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newHost(t), newHost(t)
			va := newService(t, a, Config{Source: sourceOf("pay-1"), Policy: fastPolicy(5*time.Second, 20*time.Second), MaxPowDifficulty: tc.maxPay})
			prover := &countingProver{Prover: oracleProver(0, set)}
			proved := newProved()
			newService(t, b, Config{Prover: prover, PayDifficulty: 12, OnProved: proved.fn})
			connect(t, a, b, "tcp") // a comes to b
			res, err := va.Verify(testCtx(t, 20*time.Second), b.ID(), false)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || res != nil {
					t.Fatalf("Verify: %v %+v, want %v and no result", err, res, tc.wantErr)
				}
				if pr := proved.next(t); pr.Err == nil || prover.calls.Load() != 0 {
					t.Fatalf("prover: %+v after %d answerer calls, want an error and none", pr, prover.calls.Load())
				}
				return
			}
			if err != nil || !res.Verdict.Accepted {
				t.Fatalf("Verify: %v %+v", err, res)
			}
			if n := prover.calls.Load(); n != 3 {
				t.Fatalf("%d answerer calls, want 3", n)
			}
		})
	}
}

// payHello opens a raw verifier stream from m to p, sends a hello and
// returns the stream and the hello ack.
func payHello(t *testing.T, m interface {
	ID() peer.ID
}, r *rawPeer, p peer.ID) *pb.HelloAck {
	t.Helper()
	r.send(helloFrame(m.ID(), p, nil))
	f, err := r.recv()
	if err != nil || f.GetHelloAck() == nil {
		t.Fatalf("hello ack: %v %v", f, err)
	}
	return f.GetHelloAck()
}

// A verifier that does not pay, pays wrong or skips the probe meets a
// busy decline before anything is answered (a verifier written before
// document 1.13.0 signs nothing for it); the ask is 16 fresh bytes.
func TestUnpaidVerifierAnswersNothing(t *testing.T) {
	set := testSet("pay-2")
	for _, tc := range []struct {
		name  string
		first func(m peer.ID, ack *pb.HelloAck) *pb.Frame
		paid  bool
	}{
		{"no-pay", func(peer.ID, *pb.HelloAck) *pb.Frame {
			return &pb.Frame{Body: &pb.Frame_Probe{Probe: &pb.Probe{Seq: 1, Nonce: make([]byte, 8)}}}
		}, false},
		{"other-verifier", func(_ peer.ID, ack *pb.HelloAck) *pb.Frame {
			pay, _ := SolvePay(context.Background(), ack.GetPayNonce(), peer.ID("someone else"), int(ack.GetPayDifficulty()), 22)
			return &pb.Frame{Body: &pb.Frame_Probe{Probe: &pb.Probe{Seq: 1, Nonce: make([]byte, 8), Pay: pay}}}
		}, false},
		{"challenge-first", func(peer.ID, *pb.HelloAck) *pb.Frame {
			return &pb.Frame{Body: &pb.Frame_Challenge{Challenge: &pb.Challenge{Round: 1, Rounds: 3, Domain: set.Domain,
				Narrative: set.Parts[0].Narrative, Question: set.Parts[0].Questions[0].Question, BudgetMs: 15000}}}
		}, false},
		{"paid", func(m peer.ID, ack *pb.HelloAck) *pb.Frame {
			pay, _ := SolvePay(context.Background(), ack.GetPayNonce(), m, int(ack.GetPayDifficulty()), 22)
			return &pb.Frame{Body: &pb.Frame_Probe{Probe: &pb.Probe{Seq: 1, Nonce: make([]byte, 8), Pay: pay}}}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, b := newHost(t), newHost(t)
			prover := &countingProver{Prover: oracleProver(0, set)}
			proved := newProved()
			newService(t, b, Config{Prover: prover, PayDifficulty: 10, OnProved: proved.fn})
			connect(t, m, b, "tcp")
			r := openRaw(t, m, b.ID())
			ack := payHello(t, m, r, b.ID())
			if ack.GetPayDifficulty() != 10 || len(ack.GetPayNonce()) != PayNonceBytes {
				t.Fatalf("ack asks %d bits with a %d-byte nonce, want 10 and %d", ack.GetPayDifficulty(), len(ack.GetPayNonce()), PayNonceBytes)
			}
			r.send(tc.first(m.ID(), ack))
			f, err := r.recv()
			if tc.paid {
				if err != nil || f.GetProbeAck().GetSeq() != 1 {
					t.Fatalf("paid probe: %v %v, want its ack", f, err)
				}
				return
			}
			if err != nil || f.GetDecline().GetReason() != pb.DeclineReason_DECLINE_REASON_BUSY {
				t.Fatalf("unpaid: %v %v, want Decline{BUSY}", f, err)
			}
			if pr := proved.next(t); !errors.Is(pr.Err, ErrVerifierUnpaid) || !errors.Is(pr.Err, ErrBusy) {
				t.Fatalf("prover result %v, want ErrVerifierUnpaid (busy)", pr.Err)
			}
			if n := prover.calls.Load(); n != 0 {
				t.Fatalf("%d answerer calls for an unpaid session", n)
			}
		})
	}
}

// No payment is asked of a verifier on a connection the prover opened
// (the prover came to it and asked to be verified) nor of one the prover
// admits; and a verifier does not pay a prover that came to it.
func TestPayAskedOnlyOfVerifiersThatCame(t *testing.T) {
	set := testSet("pay-3")
	t.Run("prover-came", func(t *testing.T) {
		m, b := newHost(t), newHost(t)
		newService(t, b, Config{Prover: oracleProver(0, set), PayDifficulty: 10})
		connect(t, b, m, "tcp") // b comes to m
		r := openRaw(t, m, b.ID())
		if ack := payHello(t, m, r, b.ID()); ack.GetPayDifficulty() != 0 || len(ack.GetPayNonce()) != 0 {
			t.Fatalf("ack asks %d bits (%d-byte nonce) on the prover's own connection", ack.GetPayDifficulty(), len(ack.GetPayNonce()))
		}
	})
	t.Run("admitted", func(t *testing.T) {
		m, b := newHost(t), newHost(t)
		newService(t, b, Config{Prover: oracleProver(0, set), PayDifficulty: 10, TrustedPeer: func(p peer.ID) bool { return p == m.ID() }})
		connect(t, m, b, "tcp")
		r := openRaw(t, m, b.ID())
		if ack := payHello(t, m, r, b.ID()); ack.GetPayDifficulty() != 0 {
			t.Fatalf("ack asks %d bits of an admitted verifier", ack.GetPayDifficulty())
		}
	})
	t.Run("verifier-does-not-pay-a-prover-that-came", func(t *testing.T) {
		a, m := newHost(t), newHost(t)
		va := newService(t, a, Config{Source: sourceOf("pay-3")})
		rawProver(t, m, func(r *rawPeer, hello *pb.Hello) {
			r.send(&pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: hello.GetNonce(),
				PayDifficulty: 8, PayNonce: make([]byte, PayNonceBytes)}}})
			drain(r)
		})
		connect(t, m, a, "tcp") // m comes to a
		res, err := va.Verify(testCtx(t, 10*time.Second), m.ID(), false)
		if !errors.Is(err, ErrPayRefused) || res != nil {
			t.Fatalf("Verify: %v %+v, want ErrPayRefused and nothing signed", err, res)
		}
	})
}

// A malformed ask (difficulty above 32, a nonce of another length, a
// nonce without difficulty) ends the hello unpaid: no set drawn, nothing
// signed.
func TestMalformedPayAsk(t *testing.T) {
	for _, tc := range []struct {
		name  string
		d     uint32
		nonce []byte
	}{
		{"difficulty-33", 33, make([]byte, PayNonceBytes)},
		{"short-nonce", 8, make([]byte, 8)},
		{"nonce-without-difficulty", 0, make([]byte, PayNonceBytes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, m := newHost(t), newHost(t)
			src := &returningSource{staticSource: sourceOf("pay-4")}
			va := newService(t, a, Config{Source: src})
			rawProver(t, m, func(r *rawPeer, hello *pb.Hello) {
				r.send(&pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: hello.GetNonce(), PayDifficulty: tc.d, PayNonce: tc.nonce}}})
				drain(r)
			})
			connect(t, a, m, "tcp")
			res, err := va.Verify(testCtx(t, 10*time.Second), m.ID(), false)
			if !errors.Is(err, ErrUnpaid) || res != nil {
				t.Fatalf("Verify: %v %+v, want ErrUnpaid and nothing signed", err, res)
			}
		})
	}
}

var updatePayVector = flag.Bool("update-pay-vector", false, "rewrite spec/vectors/pay.json")

const payVectorPath = "../spec/vectors/pay.json"

// payVectorFile is the file format of spec/vectors/pay.json.
type payVectorFile struct {
	Description string          `json:"description"`
	Tag         string          `json:"tag"`
	Cases       []payVectorCase `json:"cases"`
}

type payVectorCase struct {
	Name        string `json:"name"`
	Nonce       string `json:"pay_nonce_hex"`
	Verifier    string `json:"verifier"`
	VerifierHex string `json:"verifier_hex"`
	Pay         string `json:"pay_hex"`
	Digest      string `json:"digest_hex"`
	Bits        int    `json:"leading_zero_bits"`
	Difficulty  int    `json:"difficulty"`
	Valid       bool   `json:"valid"`
}

// buildPayVector computes the payment vectors: the verifier of
// frames.json, the pay nonce of its hello_ack_pay.
func buildPayVector(t *testing.T) []byte {
	t.Helper()
	vid := frameVectorPeer(t, frameVectorSeq(0x00, 32))
	other := frameVectorPeer(t, frameVectorSeq(0x20, 32))
	nonce := frameVectorSeq(0xc0, PayNonceBytes)
	nonce2 := frameVectorSeq(0xd0, PayNonceBytes)
	solve := func(n []byte, v peer.ID, d int) []byte {
		pay, err := SolvePay(t.Context(), n, v, d, MaxPowDifficulty)
		if err != nil {
			t.Fatal(err)
		}
		return pay
	}
	p8, p16, p20 := solve(nonce, vid, 8), solve(nonce, vid, 16), solve(nonce, vid, 20)
	pow16, err := SolvePow(t.Context(), nonce, vid, 16, MaxPowDifficulty)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		nonce []byte
		v     peer.ID
		pay   []byte
		d     int
	}{
		{"solved", nonce, vid, p8, 8},
		{"solved", nonce, vid, p16, 16},
		{"solved", nonce, vid, p20, 20},
		{"bound to the pay nonce: another session's pay", nonce2, vid, p16, 16},
		{"bound to the verifier: the pay of another verifier", nonce, other, p16, 16},
		{"bound to the tag: a §5a proof of work of the same inputs", nonce, vid, pow16, 16},
		{"difficulty 0 needs no pay", nonce, vid, nil, 0},
		{"empty pay pays nothing above 0", nonce, vid, nil, 1},
		{"too few bits", nonce, vid, p8, 24},
		{"a pay of 33 bytes is invalid, whatever its digest", nonce, vid, append(make([]byte, 25), p8...), 8},
	}
	out := payVectorFile{Tag: PayTag, Description: "Payment vectors of spec/protocol.md §5b (the verifier's proof of work, asked in HelloAck.pay_difficulty " +
		"and pay_nonce, paid in the first Probe's pay): digest = SHA-256(tag || pay nonce || verifier peer ID bytes || pay); valid = (difficulty == 0) or " +
		"(1 <= len(pay) <= 32 and difficulty <= 32 and leading_zero_bits(digest) >= difficulty). Leading zero bits count from the most significant bit of " +
		"the first byte. The verifier and pay nonce are those of frames.json's hello_ack_pay."}
	for _, c := range cases {
		d := PayDigest(c.nonce, c.v, c.pay)
		out.Cases = append(out.Cases, payVectorCase{Name: c.name, Nonce: hex.EncodeToString(c.nonce), Verifier: c.v.String(),
			VerifierHex: hex.EncodeToString([]byte(c.v)), Pay: hex.EncodeToString(c.pay), Digest: hex.EncodeToString(d[:]),
			Bits: LeadingZeroBits(d), Difficulty: c.d, Valid: CheckPay(c.nonce, c.v, c.pay, c.d)})
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestPayVectorRegenerate checks spec/vectors/pay.json against the code;
// -update-pay-vector rewrites it.
func TestPayVectorRegenerate(t *testing.T) {
	want := buildPayVector(t)
	if *updatePayVector {
		if err := os.WriteFile(payVectorPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(payVectorPath)
	if err != nil {
		t.Fatalf("%v (run go test ./protocol -run TestPayVectorRegenerate -update-pay-vector)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("spec/vectors/pay.json is stale (rerun with -update-pay-vector and review the diff)")
	}
}

// Every payment vector gives the digest, bit count and decision stated,
// read as a second implementation reads the file.
func TestPayVectors(t *testing.T) {
	var v payVectorFile
	loadVector(t, "pay.json", &v)
	if v.Tag != PayTag {
		t.Fatalf("tag %q", v.Tag)
	}
	cases := make([]workVectorCase, len(v.Cases))
	for i, c := range v.Cases {
		cases[i] = workVectorCase{c.Name, c.Nonce, c.Verifier, c.VerifierHex, c.Pay, c.Digest, c.Bits, c.Difficulty, c.Valid}
	}
	checkWorkVectors(t, cases, PayDigest, CheckPay)
}
