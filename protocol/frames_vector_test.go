package protocol

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/acaptcha/acaptcha/protocol/attestation"
	"github.com/acaptcha/acaptcha/protocol/pb"
)

var updateFrameVector = flag.Bool("update-frame-vector", false, "rewrite spec/vectors/frames.json")

const frameVectorPath = "../spec/vectors/frames.json"

type frameVectorFile struct {
	Description string        `json:"description"`
	Frames      []frameVector `json:"frames"`
}

type frameVector struct {
	Name        string          `json:"name"`
	Sender      string          `json:"sender"`
	Description string          `json:"description"`
	Message     json.RawMessage `json:"message"`
	FrameHex    string          `json:"frame_hex"`
}

// frameVectorSeq is n bytes start, start+1, ... (as attestSeq, which
// lives in the external test package).
func frameVectorSeq(start byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = start + byte(i)
	}
	return b
}

// frameVectors are one frame of every body: a session between the
// verifier and the prover of attestation.json (keys from its seeds), its
// nonce, and its record as the verdict's envelope.
func frameVectors(t testing.TB) []struct {
	name, sender, desc string
	f                  *pb.Frame
} {
	t.Helper()
	vid := frameVectorPeer(t, frameVectorSeq(0x00, 32))
	pid := frameVectorPeer(t, frameVectorSeq(0x20, 32))
	nonce := frameVectorSeq(0xa0, 32)
	pow, err := SolvePow(t.Context(), nonce, pid, 8, MaxPowDifficulty)
	if err != nil {
		t.Fatal(err)
	}
	env, err := hex.DecodeString(frameVectorEnvelope(t))
	if err != nil {
		t.Fatal(err)
	}
	probeNonce := frameVectorSeq(0x10, 8)
	payNonce := frameVectorSeq(0xc0, PayNonceBytes)
	pay, err := SolvePay(t.Context(), payNonce, vid, 8, MaxPowDifficulty)
	if err != nil {
		t.Fatal(err)
	}
	return []struct {
		name, sender, desc string
		f                  *pb.Frame
	}{
		{"hello", "verifier", "the verifier of attestation.json to its prover: 3 rounds, tau 15 s, T_total 120 s, credit 500 ms, reciprocal, a proof of work of 8 bits asked",
			&pb.Frame{Body: &pb.Frame_Hello{Hello: &pb.Hello{SpecVersion: SpecVersion, VerifierId: []byte(vid), ProverId: []byte(pid), Nonce: nonce,
				Rounds: 3, TauMs: 15000, TotalMs: 120000, Reciprocal: true, RttCreditMs: 500, PowDifficulty: 8}}}},
		{"hello_ack", "prover", "the nonce echoed, the smallest proof of work of 8 bits (§5a: SolvePow counts up from 0) and the answer to the hello's reciprocal request: WILL (§1a)",
			&pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: nonce, Pow: pow, Reciprocal: pb.Reciprocal_RECIPROCAL_WILL}}}},
		{"hello_ack_pay", "prover", "as hello_ack, and the prover asks the verifier (which came to it) for a payment of 8 bits bound to 16 fresh nonce bytes (§5b)",
			&pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: nonce, Pow: pow, Reciprocal: pb.Reciprocal_RECIPROCAL_WILL, PayDifficulty: 8, PayNonce: payNonce}}}},
		{"probe_pay", "verifier", "probe 1 of 1 with 8 nonce bytes and the smallest pay of hello_ack_pay's 8 bits (§5b: SolvePay counts up from 0)",
			&pb.Frame{Body: &pb.Frame_Probe{Probe: &pb.Probe{Seq: 1, Nonce: probeNonce, Pay: pay}}}},
		{"probe", "verifier", "probe 1 of 1 with 8 nonce bytes",
			&pb.Frame{Body: &pb.Frame_Probe{Probe: &pb.Probe{Seq: 1, Nonce: probeNonce}}}},
		{"probe_ack", "prover", "the probe's seq and nonce echoed",
			&pb.Frame{Body: &pb.Frame_ProbeAck{ProbeAck: &pb.ProbeAck{Seq: 1, Nonce: probeNonce}}}},
		{"challenge", "verifier", "round 1 of 3 of the narrative kind (no kind field)",
			&pb.Frame{Body: &pb.Frame_Challenge{Challenge: &pb.Challenge{Round: 1, Rounds: 3, Domain: "biochemistry",
				Narrative: "LAB NOTE 1. Three kinases were screened; only KX-7 kept its shift across replicates.",
				Question:  "Which kinase kept its shift?", BudgetMs: 15000}}}},
		{"answer", "prover", "the answer to round 1",
			&pb.Frame{Body: &pb.Frame_Answer{Answer: &pb.Answer{Round: 1, Answer: "KX-7"}}}},
		{"decline", "prover", "a challenge refused as one this node issued",
			&pb.Frame{Body: &pb.Frame_Decline{Decline: &pb.Decline{Reason: pb.DeclineReason_DECLINE_REASON_REFLECTION, Detail: "round 1 is a challenge this node issued"}}}},
		{"decline_verify_first", "prover", "a hello declined by a prover that answers a verifier that came to it once it admits it, and verifies it now (§5c)",
			&pb.Frame{Body: &pb.Frame_Decline{Decline: &pb.Decline{Reason: pb.DeclineReason_DECLINE_REASON_VERIFY_FIRST,
				Detail: "verifying you first; ask again after the verdict", Reciprocal: pb.Reciprocal_RECIPROCAL_WILL}}}},
		{"verdict", "verifier", "the acceptance of attestation.json, with its rounds and its envelope",
			&pb.Frame{Body: &pb.Frame_Verdict{Verdict: &pb.Verdict{Accepted: true, Reason: "ok", Rounds: []*pb.RoundResult{
				{Round: 1, BudgetMs: 15000, EffectiveMs: 4210, Correct: true, ElapsedMs: 4250},
				{Round: 2, BudgetMs: 15000, EffectiveMs: 6875, Correct: true, ElapsedMs: 6915},
				{Round: 3, BudgetMs: 15000, EffectiveMs: 5302, Correct: true, ElapsedMs: 5342},
			}, Attestation: env}}}},
	}
}

// frameVectorPeer is the peer ID of the Ed25519 key of an RFC 8032 seed
// (attestation.json's keys).
func frameVectorPeer(t testing.TB, seed []byte) peer.ID {
	t.Helper()
	k, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func frameVectorEnvelope(t testing.TB) string {
	var f struct {
		EnvelopeHex string `json:"envelope_hex"`
	}
	frameVectorAttestation(t, &f)
	return f.EnvelopeHex
}

func frameVectorAttestation(t testing.TB, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "spec", "vectors", "attestation.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

func buildFrameVector(t testing.TB) []byte {
	t.Helper()
	out := frameVectorFile{Description: "One frame of every body (spec/protocol.md §2, §3; spec/proto/wire.proto), a hello ack asking the payment of §5b with a probe paying it, and a decline asking to verify first (§5c), between the verifier and the prover of attestation.json " +
		"(keys from its seeds, its nonce, its envelope in the verdict). frame_hex is the frame as sent: the minimal uvarint of the message's length, then the " +
		"message's proto3 encoding (fields in number order, defaults omitted). message is the Frame in the canonical proto3 JSON mapping (bytes in base64, " +
		"enums by name). A receiver decoding frame_hex gets message; a sender encoding message the Go way writes frame_hex."}
	for _, v := range frameVectors(t) {
		max := MaxVerifierFrame
		if v.sender == "prover" {
			max = MaxProverFrame
		}
		buf, err := appendFrame(nil, v.f, max)
		if err != nil {
			t.Fatal(err)
		}
		js, err := protojson.Marshal(v.f)
		if err != nil {
			t.Fatal(err)
		}
		var c bytes.Buffer
		if err := json.Compact(&c, js); err != nil {
			t.Fatal(err)
		}
		out.Frames = append(out.Frames, frameVector{Name: v.name, Sender: v.sender, Description: v.desc, Message: c.Bytes(), FrameHex: hex.EncodeToString(buf)})
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestFrameVectorRegenerate checks spec/vectors/frames.json against what
// the code encodes; -update-frame-vector rewrites it.
func TestFrameVectorRegenerate(t *testing.T) {
	want := buildFrameVector(t)
	if *updateFrameVector {
		if err := os.WriteFile(frameVectorPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(frameVectorPath)
	if err != nil {
		t.Fatalf("%v (run go test ./protocol -run TestFrameVectorRegenerate -update-frame-vector)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("spec/vectors/frames.json is stale (rerun with -update-frame-vector and review the diff)")
	}
}

// TestFrameVectorDecode reads every frame of the vector through the
// receiver's frame reader and checks it is the message, within the cap of
// its sender, and that the hello ack's proof of work pays the hello.
func TestFrameVectorDecode(t *testing.T) {
	var f frameVectorFile
	loadVector(t, "frames.json", &f)
	seen := map[string]bool{}
	var (
		hello  *pb.Hello
		payAck *pb.HelloAck
		paid   bool
	)
	for _, v := range f.Frames {
		t.Run(v.Name, func(t *testing.T) {
			raw, err := hex.DecodeString(v.FrameHex)
			if err != nil {
				t.Fatal(err)
			}
			max := MaxVerifierFrame
			if v.Sender == "prover" {
				max = MaxProverFrame
			}
			var got pb.Frame
			if err := readFrame(newFrameReader(bytes.NewReader(raw), max), &got); err != nil {
				t.Fatalf("frame does not read: %v", err)
			}
			var want pb.Frame
			if err := protojson.Unmarshal(v.Message, &want); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(&got, &want) {
				t.Fatalf("decoded %v, want %v", &got, &want)
			}
			seen[frameKind(&got)] = true
			if h := got.GetHello(); h != nil {
				hello = h
			}
			if a := got.GetHelloAck(); a != nil && hello != nil {
				pid, err := peer.IDFromBytes(hello.GetProverId())
				if err != nil {
					t.Fatal(err)
				}
				if !CheckPow(hello.GetNonce(), pid, a.GetPow(), int(hello.GetPowDifficulty())) {
					t.Fatal("the hello ack's pow does not pay the hello")
				}
				if a.GetPayDifficulty() > 0 {
					payAck = a
				}
			}
			if pr := got.GetProbe(); len(pr.GetPay()) > 0 {
				vid, err := peer.IDFromBytes(hello.GetVerifierId())
				if err != nil || payAck == nil {
					t.Fatalf("a paying probe before a hello and an ack asking payment: %v", err)
				}
				if !CheckPay(payAck.GetPayNonce(), vid, pr.GetPay(), int(payAck.GetPayDifficulty())) {
					t.Fatal("the probe's pay does not pay the ack's ask")
				}
				paid = true
			}
			if env := got.GetVerdict().GetAttestation(); len(env) > 0 {
				if _, _, err := attestation.Verify(env, attestation.VerifyOptions{AllowExpired: true}); err != nil {
					t.Fatalf("the verdict's envelope: %v", err)
				}
			}
		})
	}
	if !paid {
		t.Fatal("no frame pays a payment (§5b)")
	}
	if len(seen) != 8 {
		t.Fatalf("%d kinds of frame, want all 8: %v", len(seen), seen)
	}
}
