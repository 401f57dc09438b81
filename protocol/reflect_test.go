package protocol

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// A malicious peer M is verified by A and relays A's own challenge back to
// A, hoping A's answerer solves it: A declines, reports M, and its session
// on M ends rejected.
func TestReflectionAttack(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			a, m := newHost(t), newHost(t)
			src := sourceOf("reflect-" + tr)
			offenders := make(chan peer.ID, 1)
			pr := newProved()
			va := newService(t, a, Config{Source: src, Prover: oracleProver(0, src.sets...), OnProved: pr.fn,
				OnReflection: func(p peer.ID) { offenders <- p }})
			declined := make(chan *pb.Decline, 1)
			m.SetStreamHandler(ID, func(s network.Stream) {
				defer s.Reset()
				in, c, out, ok := relayBack(t, m, a.ID(), s, 10*time.Second)
				if !ok {
					return
				}
				defer out.s.Reset()
				// Relay it back to A as M's own challenge.
				out.send(&pb.Frame{Body: &pb.Frame_Challenge{Challenge: c}})
				f, err := out.recv()
				if err != nil {
					t.Errorf("M: reply to reflected challenge: %v", err)
					return
				}
				declined <- f.GetDecline()
				out.s.CloseWrite()
				drain(in)
			})
			connect(t, a, m, tr)

			res, err := va.Verify(testCtx(t, 20*time.Second), m.ID(), false)
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict.Accepted || res.Verdict.Reason != skill.ReasonProtocolError || !strings.Contains(res.Verdict.Detail, "reflected") {
				t.Fatalf("verdict %+v", res.Verdict)
			}
			if res.Attestation == nil || res.Attestation.Subject != m.ID() {
				t.Fatal("rejection not attested")
			}
			select {
			case d := <-declined:
				if d.GetReason() != pb.DeclineReason_DECLINE_REASON_REFLECTION {
					t.Fatalf("M got %v", d)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("M got no decline")
			}
			if p := <-offenders; p != m.ID() {
				t.Fatalf("offender %s", p)
			}
			if got := pr.next(t); got.Verifier != m.ID() || got.Rounds != 0 || got.Err == nil {
				t.Fatalf("prover result %+v", got)
			}
		})
	}
}

// relayBack is M's side of a reflection: on s, a session of A's verifying
// M, it acks the hello and echoes the probes, then opens its own verifier
// stream to A (a paid hello acked); it returns A's round 1 and both
// streams, or ok false (reported) when a step failed. Both streams get
// the deadline.
func relayBack(t *testing.T, m host.Host, a peer.ID, s network.Stream, d time.Duration) (in *rawPeer, c *pb.Challenge, out *rawPeer, ok bool) {
	t.Helper()
	_ = s.SetDeadline(time.Now().Add(d))
	in = &rawPeer{t: t, s: s, r: newFrameReader(s, MaxVerifierFrame), max: MaxProverFrame}
	f, err := in.recv()
	if err != nil {
		t.Errorf("M: hello: %v", err)
		return nil, nil, nil, false
	}
	ack(in, f.GetHello())
	c = echoProbes(t, in)
	out = openRaw(t, m, a)
	_ = out.s.SetDeadline(time.Now().Add(d))
	out.send(helloFrame(m.ID(), a, nil))
	if f, err := out.recv(); err != nil || f.GetHelloAck() == nil {
		t.Errorf("M: A's hello ack: %v %v", f, err)
		out.s.Reset()
		return nil, nil, nil, false
	}
	return in, c, out, true
}

// A challenge this node issued is refused even after its session ended,
// within the window.
func TestReflectionAfterSession(t *testing.T) {
	a, b, m := newHost(t), newHost(t), newHost(t)
	src := sourceOf("reflect-late")
	offenders := make(chan peer.ID, 1)
	va := newService(t, a, Config{Source: src, Prover: constProver("x"), OnReflection: func(p peer.ID) { offenders <- p }})
	newService(t, b, Config{Prover: oracleProver(0, src.sets...)})
	connect(t, a, b, "tcp")
	connect(t, m, a, "tcp")
	res, err := va.Verify(testCtx(t, 10*time.Second), b.ID(), false)
	if err != nil || !res.Verdict.Accepted {
		t.Fatalf("%v %+v", err, res)
	}
	// M (say, B's accomplice) replays round 2 to A.
	r2 := res.Verdict.Rounds[1]
	out := openRaw(t, m, a.ID())
	out.send(helloFrame(m.ID(), a.ID(), nil))
	out.recv()
	out.send(challengeFrame(1, r2.Narrative, r2.Question))
	f, err := out.recv()
	if err != nil || f.GetDecline().GetReason() != pb.DeclineReason_DECLINE_REASON_REFLECTION {
		t.Fatalf("%v %v", f, err)
	}
	out.s.CloseWrite()
	if p := <-offenders; p != m.ID() {
		t.Fatalf("offender %s", p)
	}
}

func TestReflectionGuard(t *testing.T) {
	now := time.Unix(1000, 0)
	g := newReflectionGuard(time.Minute)
	run := &VerifierSession{}
	d := challengeDigest("n", "q")
	g.issue(d, "p1", run, now)
	if to, r, ok := g.check(d, now.Add(30*time.Second)); !ok || to != "p1" || r != run {
		t.Fatal("not found")
	}
	if _, _, ok := g.check(challengeDigest("n", "q2"), now); ok {
		t.Fatal("false positive")
	}
	run.digests = append(run.digests, d)
	g.release(run)
	if _, r, ok := g.check(d, now.Add(30*time.Second)); !ok || r != nil {
		t.Fatal("release")
	}
	if _, _, ok := g.check(d, now.Add(61*time.Second)); ok {
		t.Fatal("not expired")
	}
	if g.len() != 0 {
		t.Fatalf("%d entries left", g.len())
	}
	// Bounded, oldest first; re-issues do not grow the queue unboundedly.
	for i := range maxReflectionEntries + 100 {
		g.issue(challengeDigest(fmt.Sprint(i), "q"), "p", nil, now)
	}
	if g.len() > maxReflectionEntries {
		t.Fatalf("%d entries", g.len())
	}
	if _, _, ok := g.check(challengeDigest("0", "q"), now); ok {
		t.Fatal("oldest entry kept")
	}
	for range 5 * maxReflectionEntries {
		g.issue(d, "p", nil, now)
	}
	if n := len(g.order) - g.head; n > 2*maxReflectionEntries {
		t.Fatalf("queue of %d", n)
	}
	if _, _, ok := g.check(d, now); !ok {
		t.Fatal("re-issued digest lost")
	}
}

// The ASCII fast path of NormalizeChallengeText agrees with the full
// NFC + case-fold path.
func TestNormalizeChallengeTextASCIIFastPath(t *testing.T) {
	for _, s := range []string{"  Loop LOOP-0042 persisted\tacross\n3 runs.  ", "", "ABC def", "x\u00a0y"} {
		full := strings.Join(strings.Fields(cases.Fold().String(norm.NFC.String(s))), " ")
		if got := NormalizeChallengeText(s); got != full {
			t.Errorf("%q: %q, want %q", s, got, full)
		}
	}
}

// shingleSketch follows spec §7 as written (a word's hash is FNV-1a 64
// over its bytes 8 at a time, as little-endian integers, the last padded
// with zeros; MurmurHash3's finaliser spelled out), on more and on fewer
// words than a shingle holds and on words of 1 to 17 bytes;
// shingleHashes (the fast path's) agrees.
func TestShingleHashSpec(t *testing.T) {
	const offset, prime = 14695981039346656037, 1099511628211
	word := func(w string) uint64 {
		b := []byte(w)
		for len(b)%8 != 0 {
			b = append(b, 0)
		}
		h := uint64(offset)
		for i := 0; i < len(b); i += 8 {
			h = (h ^ binary.LittleEndian.Uint64(b[i:])) * prime
		}
		return h
	}
	fmix := func(x uint64) uint64 {
		x = (x ^ x>>33) * 0xff51afd7ed558ccd
		x = (x ^ x>>33) * 0xc4ceb9fe1a85ec53
		return x ^ x>>33
	}
	spec := func(words []string) uint64 {
		var x uint64
		for _, w := range words {
			x = x*prime + word(w)
		}
		return fmix(x)
	}
	// A one-byte word's hash is FNV-1a 64 of that byte.
	f := fnv.New64a()
	f.Write([]byte("a"))
	if word("a") != f.Sum64() || wordHash("a") != f.Sum64() {
		t.Fatal("the hash of a one-byte word is not FNV-1a 64")
	}
	for _, text := range []string{
		"one two three four five six seven", "one", "one two", "loop 0042 held", "a b c d", "a b c d e",
		"abcdefgh abcdefghi abcdefghijklmnop abcdefghijklmnopq x", "αβγδ ñandú straße", "  lead and  trail  ",
	} {
		words := strings.Fields(text)
		k := min(ShingleWords, len(words))
		var want []uint64
		for i := 0; i+k <= len(words); i++ {
			want = append(want, spec(words[i:i+k]))
		}
		slices.Sort(want)
		if got := shingleSketch(words); !slices.Equal(got, want) {
			t.Fatalf("%q: sketch %x, want %x", text, got, want)
		}
		fast := shingleHashes(make([]uint64, len(words)), []byte(text))
		slices.Sort(fast)
		if !slices.Equal(fast, want) {
			t.Fatalf("%q: shingleHashes %x, want %x", text, fast, want)
		}
	}
}

// The ASCII word scanner agrees with the Unicode one.
func TestChallengeWordsASCIIFastPath(t *testing.T) {
	for _, s := range []string{"loop loop-0042 persisted, across 3 runs (see §2).", "", "  a  ", "x_y z.w 10.4.28.30"} {
		general := strings.FieldsFunc(s, func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.IsMark(r)
		})
		if got := challengeWords(strings.ToValidUTF8(s, "")); isASCII(s) && !slices.Equal(got, general) {
			t.Errorf("%q: %q, want %q", s, got, general)
		}
	}
}
