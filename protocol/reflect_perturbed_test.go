package protocol

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol/pb"
)

// A script M, verified by A, relays A's own challenges to A's prover over
// a second stream, each rewritten at no cost (a Cyrillic look-alike for a
// Latin letter in every second word: A's LLM reads it unchanged), hoping
// A's answerer solves them for it. The word key (§7) maps the look-alikes
// back: A's prover declines the first with REFLECTION, A reports M, and
// A's session on M ends rejected (before 1.12.14 A accepted M).
func TestReflectionPerturbedByRelay(t *testing.T) {
	a, m := newHost(t), newHost(t)
	src := sourceOf("self-reflect")
	pol := fastPolicy(5*time.Second, 60*time.Second)
	refl := make(chan peer.ID, 4)
	va := newService(t, a, Config{Source: src, Policy: pol, Prover: oracleProver(300*time.Millisecond, src.sets...),
		OnReflection: func(p peer.ID) { refl <- p }})
	declined := make(chan *pb.Decline, 1)
	m.SetStreamHandler(ID, func(s network.Stream) {
		defer s.Reset()
		in, c, out, ok := relayBack(t, m, a.ID(), s, 30*time.Second)
		if !ok {
			return
		}
		defer out.s.Reset()
		for c != nil {
			fwd := &pb.Challenge{Round: c.GetRound(), Rounds: 3, Domain: "d", Narrative: perturbWords(c.GetNarrative(), 2, homoglyphOne),
				Question: perturbWords(c.GetQuestion(), 2, homoglyphOne), BudgetMs: 15000, Kind: c.GetKind()}
			out.send(&pb.Frame{Body: &pb.Frame_Challenge{Challenge: fwd}})
			r, err := out.recv()
			if err != nil || r.GetAnswer() == nil {
				if d := r.GetDecline(); d != nil {
					declined <- d
				}
				return
			}
			in.send(&pb.Frame{Body: &pb.Frame_Answer{Answer: &pb.Answer{Round: c.GetRound(), Answer: r.GetAnswer().GetAnswer()}}})
			nf, err := in.recv()
			if err != nil {
				return
			}
			c = nf.GetChallenge()
		}
	})
	connect(t, a, m, "tcp")
	res, err := va.Verify(testCtx(t, 40*time.Second), m.ID(), false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict.Accepted {
		t.Fatal("A accepted M, which only relayed A's own challenges (rewritten) back to A's answerer")
	}
	select {
	case d := <-declined:
		if d.GetReason() != pb.DeclineReason_DECLINE_REASON_REFLECTION {
			t.Fatalf("A's prover declined with %v", d.GetReason())
		}
	default:
		t.Fatal("A's prover did not decline the rewritten challenge")
	}
	select {
	case p := <-refl:
		if p != m.ID() {
			t.Fatalf("A reported %s, not M", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("A did not report M")
	}
}

// The sketch of a challenge rewritten with look-alikes in every second
// word is the original's (the audit's rewriting gave an estimate of 0).
func TestReflectionSketchUndoesHomoglyphs(t *testing.T) {
	set := testSet("j")
	for _, p := range set.Parts {
		n, q := p.Narrative, p.Questions[0].Question
		a := challengeDigest(n, q)
		b := challengeDigest(perturbWords(n, 2, homoglyphOne), perturbWords(q, 2, homoglyphOne))
		if a.digest == b.digest {
			t.Fatal("the rewriting left the text unchanged")
		}
		if j := sketchJaccard(a.sketch, b.sketch); j < 1 {
			t.Fatalf("estimate %.3f between a challenge and its rewriting", j)
		}
	}
}
