package protocol

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// powVectors is the file format of spec/vectors/pow.json.
type powVectors struct {
	Description string `json:"description"`
	Tag         string `json:"tag"`
	Cases       []struct {
		Name         string `json:"name"`
		Nonce        string `json:"nonce_hex"`
		Requester    string `json:"requester"`
		RequesterHex string `json:"requester_hex"`
		Pow          string `json:"pow_hex"`
		Digest       string `json:"digest_hex"`
		Bits         int    `json:"leading_zero_bits"`
		Difficulty   int    `json:"difficulty"`
		Valid        bool   `json:"valid"`
	} `json:"cases"`
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every proof-of-work vector gives the digest, bit count and decision the
// spec states.
func TestPowVectors(t *testing.T) {
	var v powVectors
	loadVector(t, "pow.json", &v)
	if v.Tag != PowTag {
		t.Fatalf("tag %q", v.Tag)
	}
	cases := make([]workVectorCase, len(v.Cases))
	for i, c := range v.Cases {
		cases[i] = workVectorCase{c.Name, c.Nonce, c.Requester, c.RequesterHex, c.Pow, c.Digest, c.Bits, c.Difficulty, c.Valid}
	}
	checkWorkVectors(t, cases, PowDigest, CheckPow)
}

// workVectorCase is one case of pow.json (§5a) or pay.json (§5b): the
// nonce, the peer the work is bound to, the work, its digest and the
// decision at a difficulty.
type workVectorCase struct {
	name, nonce, id, idHex, work, digest string
	bits, difficulty                     int
	valid                                bool
}

// checkWorkVectors checks each case's digest, leading zero bits and
// decision, and that the file covers both decisions.
func checkWorkVectors(t *testing.T, cases []workVectorCase, digest func([]byte, peer.ID, []byte) [32]byte, check func([]byte, peer.ID, []byte, int) bool) {
	t.Helper()
	if len(cases) < 8 {
		t.Fatalf("%d cases", len(cases))
	}
	valid := 0
	for _, c := range cases {
		p, err := peer.Decode(c.id)
		if err != nil || !bytes.Equal([]byte(p), unhex(t, c.idHex)) {
			t.Fatalf("%s: peer %v", c.name, err)
		}
		nonce, work := unhex(t, c.nonce), unhex(t, c.work)
		d := digest(nonce, p, work)
		if hex.EncodeToString(d[:]) != c.digest || LeadingZeroBits(d) != c.bits {
			t.Errorf("%s: digest %x (%d bits), want %s (%d)", c.name, d, LeadingZeroBits(d), c.digest, c.bits)
		}
		if got := check(nonce, p, work, c.difficulty); got != c.valid {
			t.Errorf("%s: check %v, want %v", c.name, got, c.valid)
		}
		if c.valid {
			valid++
		}
	}
	if valid == 0 || valid == len(cases) {
		t.Fatalf("%d of %d valid: vectors must cover both outcomes", valid, len(cases))
	}
}

func TestSolvePow(t *testing.T) {
	nonce := bytes.Repeat([]byte{7}, NonceBytes)
	p := peer.ID("requester")
	for _, d := range []int{0, 1, 12} {
		pow, err := SolvePow(context.Background(), nonce, p, d, DefaultMaxPowDifficulty)
		if err != nil || !CheckPow(nonce, p, pow, d) {
			t.Fatalf("d=%d: %x %v", d, pow, err)
		}
	}
	if _, err := SolvePow(context.Background(), nonce, p, 23, 22); !errors.Is(err, ErrPowTooHard) {
		t.Fatalf("err %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := SolvePow(ctx, nonce, p, 30, 32); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if CheckPow(nonce, p, make([]byte, MaxPowBytes+1), 1) || CheckPow(nonce, p, []byte{1}, MaxPowDifficulty+1) {
		t.Fatal("oversized pow or difficulty accepted")
	}
}

// A peer that pays is still held to its share of draws, and its failures
// make the next proof of work harder.
func TestPaymentDrawShare(t *testing.T) {
	a, m, b := newHost(t), newHost(t), newHost(t)
	sets := []*skill.Set{testSet("share-1"), testSet("share-2"), testSet("share-3")}
	corpus, err := skill.NewCorpus("three", sets, skill.NewMemLedger(), 1)
	if err != nil {
		t.Fatal(err)
	}
	va := newService(t, a, Config{Source: corpus, MaxDrawsPerPeer: 2, PowDifficulty: 8})
	asked := make(chan uint32, 8)
	m.SetStreamHandler(ID, func(s network.Stream) {
		defer s.Reset()
		_ = s.SetDeadline(time.Now().Add(10 * time.Second))
		r := &rawPeer{t: t, s: s, r: newFrameReader(s, MaxVerifierFrame), max: MaxProverFrame}
		f, err := r.recv()
		if err != nil {
			return
		}
		asked <- f.GetHello().GetPowDifficulty()
		ack(r, f.GetHello()) // pays
		echoProbes(t, r)     // peeks at round 1, then resets
	})
	newService(t, b, Config{Prover: oracleProver(0, sets...)})
	connect(t, a, m, "tcp")
	connect(t, a, b, "tcp")
	for i := range 3 {
		_, err := va.Verify(testCtx(t, 10*time.Second), m.ID(), false)
		if i == 2 && !errors.Is(err, ErrPeerQuota) {
			t.Fatalf("third session of a paying peer: %v, want ErrPeerQuota", err)
		}
	}
	if d1, d2 := <-asked, <-asked; d1 != 8 || d2 <= d1 {
		t.Fatalf("difficulty asked %d then %d: failures must raise it", d1, d2)
	}
	res, err := va.Verify(testCtx(t, 10*time.Second), b.ID(), false)
	if err != nil || !res.Verdict.Accepted {
		t.Fatalf("honest prover: %v %+v", err, res)
	}
}

// A prover asked for more work than it pays declines busy; the verifier
// draws nothing.
func TestPaymentTooHard(t *testing.T) {
	a, b := newHost(t), newHost(t)
	src := &returningSource{staticSource: sourceOf("too-hard")}
	va := newService(t, a, Config{Source: src, PowDifficulty: 20, MaxPowDifficulty: 20})
	newService(t, b, Config{Prover: oracleProver(0, src.sets...), MaxPowDifficulty: 12})
	connect(t, a, b, "tcp")
	if _, err := va.Verify(testCtx(t, 10*time.Second), b.ID(), false); !errors.Is(err, ErrBusy) {
		t.Fatalf("err %v, want ErrBusy", err)
	}
	if src.i != 0 {
		t.Fatalf("%d sets drawn", src.i)
	}
}

// A 1.0.0 prover never pays: a verifier that asks for no proof of work
// (NoPow, the default) still verifies it; one that does draws nothing for
// it.
func TestPaymentOldProver(t *testing.T) {
	for _, c := range []struct {
		pow  int
		want error
	}{{NoPow, nil}, {0, nil}, {PublicPowDifficulty, ErrUnpaid}} {
		src := sourceOf("old-prover")
		answers := oracle(src.sets...)
		res, err := verifierUnderTest(t, "tcp", Config{Source: src, PowDifficulty: c.pow}, func(t *testing.T, r *rawPeer, h *pb.Hello) {
			r.send(&pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: h.GetNonce()}}})
			if h.GetPowDifficulty() > 0 {
				drain(r) // the verifier resets: unpaid
				return
			}
			ch := echoProbes(t, r)
			for ch != nil {
				r.send(&pb.Frame{Body: &pb.Frame_Answer{Answer: &pb.Answer{Round: ch.GetRound(), Answer: answers[ch.GetQuestion()]}}})
				f, err := r.recv()
				if err != nil {
					return
				}
				ch = f.GetChallenge()
			}
			r.s.Close()
		})
		switch {
		case c.want != nil && (!errors.Is(err, c.want) || src.i != 0):
			t.Fatalf("pow %d: err %v, %d sets drawn", c.pow, err, src.i)
		case c.want == nil && (err != nil || !res.Verdict.Accepted):
			t.Fatalf("pow %d: %v %+v", c.pow, err, res)
		}
	}
}

// A verifier that falls silent after the hello frees the prover's slot
// after IdleTimeout, not after total_ms.
func TestProverIdleBound(t *testing.T) {
	m, b, pr := proverUnderTest(t, "tcp", Config{Prover: constProver("x"), IdleTimeout: 300 * time.Millisecond})
	r := openRaw(t, m, b.ID())
	start := time.Now()
	r.send(helloFrame(m.ID(), b.ID(), nil))
	if f, err := r.recv(); err != nil || f.GetHelloAck() == nil {
		t.Fatalf("%v %v", f, err)
	}
	got := pr.next(t)
	if d := time.Since(start); d > 3*time.Second || got.Err == nil {
		t.Fatalf("prover waited %s (err %v)", d, got.Err)
	}
}

// Near-duplicate matching: perturbations of an issued challenge are found;
// other sets built from the same filler vocabulary are not.
func TestReflectionNearDuplicate(t *testing.T) {
	now := time.Unix(1000, 0)
	g := newReflectionGuard(time.Minute)
	set := testSet("near-dup")
	n, q := set.Parts[0].Narrative+" The caf\u00e9 r\u00e9sum\u00e9 was filed.", set.Parts[0].Questions[0].Question
	g.issue(challengeDigest(n, q), "p", nil, now)
	words := strings.Fields(n)
	for i := 0; i < len(words); i += 25 {
		words[i] = "changed"
	}
	for name, c := range map[string][2]string{
		"nfd":          {strings.ReplaceAll(n, "\u00e9", "e\u0301"), q},
		"case":         {strings.ToUpper(n), q},
		"space":        {"\u00a0" + n + "\n", q},
		"every 25th":   {strings.Join(words, " "), q},
		"question off": {n, q + " Answer briefly."},
	} {
		if _, _, ok := g.check(challengeDigest(c[0], c[1]), now); !ok {
			t.Errorf("%s: not detected", name)
		}
	}
	for i := range 20 {
		other := testSet("near-dup-other-" + string(rune('a'+i)))
		for _, p := range other.Parts {
			cp := challengeDigest(p.Narrative, p.Questions[0].Question)
			if _, _, ok := g.check(cp, now); ok {
				t.Fatalf("false positive: %s (J=%.2f)", other.ID, sketchJaccard(cp.sketch, challengeDigest(n, q).sketch))
			}
		}
	}
	if NormalizeChallengeText(" A\u00a0 B\tc\u0065\u0301 ") != "a b c\u00e9" {
		t.Fatalf("normalised %q", NormalizeChallengeText(" A\u00a0 B\tc\u0065\u0301 "))
	}
}
