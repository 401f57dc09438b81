package protocol

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/skill"
)

// wordSet is a set of three parts whose narratives are size bytes of
// one-letter words: as many prompt tokens as a narrative of that size can
// make a prover read (its exact count is its bound).
func wordSet(seed string, size int) *skill.Set {
	n := strings.TrimSpace(strings.Repeat("a ", size/2))
	set := &skill.Set{ID: "words-" + seed, Domain: "drain"}
	for i := range 3 {
		set.Parts = append(set.Parts, skill.Part{Narrative: n, Questions: []skill.Question{{
			Question: "[" + seed + "] which letter?" + strings.Repeat("?", i), Answer: "a",
			ReasoningType: skill.MultiHop, AnswerType: skill.EntityAnswer,
		}}})
	}
	return set
}

// A verifier that drains a prover's prompt tokens (fresh peer IDs,
// rounds of every size down to a few bytes, no proof of work asked of
// itself) leaves an honest verifier that comes next either a session it
// runs to its end or a refusal at the hello, which signs nothing: never
// a round refused for tokens, which it would sign as a `declined`
// rejection of the prover (spec §9a, the session's hold). Before the
// hold, the honest verifier signed `declined` at round 1 or 2 in both
// cases.
func TestTokenDrainSignsNoRejection(t *testing.T) {
	for _, tc := range []struct {
		name          string
		limitLoopback bool // every loopback peer in one group: a /24, a CGNAT address, a relay's network
		trusted       bool
	}{
		{"shared-group-trusted-verifier", true, true},
		{"node-budget-untrusted-verifier", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := fastPolicy(20*time.Second, 2*time.Minute)
			honest := testSet("honest")
			var drain []*skill.Set
			for i, size := range []int{skill.MaxNarrativeBytes, 8192, 2048, 512, 128} {
				drain = append(drain, wordSet(string(rune('A'+i)), size))
			}
			hp, hv := newHost(t), newHost(t)
			vid := hv.ID()
			newService(t, hp, Config{
				Prover:          oracleProver(0, append(drain, honest)...),
				LimitLoopback:   tc.limitLoopback,
				MaxProverTokens: 800_000, // a group's share 100 000, untrusted verifiers 600 000
				TrustedPeer:     func(p peer.ID) bool { return tc.trusted && p == vid },
			})
			// Largest rounds first, then smaller ones, each size until
			// the prover refuses it (bounded: 60 sessions in all).
			sessions := 0
			for k := range drain {
				for sessions < 60 {
					ha := newHost(t)
					att := newService(t, ha, Config{Source: &staticSource{sets: drain[k : k+1]}, Policy: pol})
					connect(t, ha, hp, "tcp")
					res, err := att.Verify(testCtx(t, time.Minute), hp.ID(), false)
					sessions++
					if err != nil || res.Verdict.Reason == skill.ReasonDeclined {
						break
					}
				}
			}
			if sessions >= 60 {
				t.Fatalf("the drain never met a refusal in %d sessions", sessions)
			}
			v := newService(t, hv, Config{Source: &staticSource{sets: []*skill.Set{honest}}, Policy: pol})
			connect(t, hv, hp, "tcp")
			res, err := v.Verify(testCtx(t, time.Minute), hp.ID(), false)
			switch {
			case err != nil && !errors.Is(err, ErrBusy):
				t.Fatalf("honest verifier after the drain: %v, want a session or ErrBusy", err)
			case err != nil:
				t.Logf("honest verifier after %d draining sessions: refused at the hello (%v)", sessions, err)
			case !res.Verdict.Accepted:
				t.Fatalf("honest verifier after %d draining sessions signed a rejection: %+v", sessions, res.Verdict)
			}
		})
	}
}

// A round beyond the standard size (spec §9a: 8 KiB of narrative, 512 B
// of question) draws on the budgets for what exceeds the session's hold,
// and one the budgets cannot cover is still refused mid-session, which
// the verifier signs as `declined`: the verifier's own choice of round
// size. Rounds of 12 KiB of one-letter words (8,192 tokens each), charged
// 8,192, 16,384 and 24,576 (chained), against 40,000 tokens per verifier:
// the hold is a quarter of that; round 3 does not fit.
func TestProverRefusesRoundBeyondHold(t *testing.T) {
	big := wordSet("big", 12<<10)
	ha, hb := newHost(t), newHost(t)
	va := newService(t, ha, Config{Source: &staticSource{sets: []*skill.Set{big}}, Policy: fastPolicy(20*time.Second, 2*time.Minute)})
	pr := newProved()
	newService(t, hb, Config{Prover: oracleProver(0, big), OnProved: pr.fn, MaxTokensPerVerifier: 40_000})
	connect(t, ha, hb, "tcp")
	res, err := va.Verify(testCtx(t, time.Minute), hb.ID(), false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict.Accepted || res.Verdict.Reason != skill.ReasonDeclined || res.Verdict.FailedRound != 3 {
		t.Fatalf("verdict %+v, want declined at round 3", res.Verdict)
	}
	if got := pr.next(t); !errors.Is(got.Err, ErrBusy) {
		t.Fatalf("prover err %v, want ErrBusy", got.Err)
	}
}

// The hold: what a session reserved and did not read goes back to the
// budgets when it ends, and rounds draw on the hold before the budgets.
func TestTokenHold(t *testing.T) {
	b, cfg, now := budgetsWith(t, Config{})
	p := sybil(1, 1)
	pfx := net48(1)
	left := func() (peer, group, node float64) {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.peers[p].tokens.tokens, b.vprefixes[pfx].tokens.tokens, b.tokens.tokens
	}
	h, _, why := b.admitSessionOwn(p, pfx, true, 3, now)
	if why != "" {
		t.Fatal(why)
	}
	if h.left != SessionTokens(3) || SessionTokens(3) != 34_812 {
		t.Fatalf("hold %d, want SessionTokens(3) = 34 812 (%d)", h.left, SessionTokens(3))
	}
	pl, gl, nl := left()
	if want := float64(cfg.MaxTokensPerVerifier - h.left); pl != want {
		t.Fatalf("verifier's budget %.0f after the hello, want %.0f", pl, want)
	}
	// Within the hold: the budgets do not move.
	if !h.charge(30_000, now) || h.left != 4_812 {
		t.Fatalf("charge within the hold: left %d", h.left)
	}
	if p2, g2, n2 := left(); p2 != pl || g2 != gl || n2 != nl {
		t.Fatal("a charge within the hold spent the budgets")
	}
	// Beyond it: the excess from the budgets.
	if !h.charge(10_000, now) || h.left != 0 {
		t.Fatalf("charge beyond the hold: left %d", h.left)
	}
	if p2, _, _ := left(); pl-p2 != 5_188 {
		t.Fatalf("the budgets paid %.0f beyond the hold, want 5 188", pl-p2)
	}
	// Settled back, then released.
	h.give(7_000)
	h.release(now)
	if p2, _, _ := left(); float64(cfg.MaxTokensPerVerifier)-p2 != 33_000 {
		t.Fatalf("after release the session cost %.0f tokens, want 33 000", float64(cfg.MaxTokensPerVerifier)-p2)
	}
	// A budget smaller than four standard sessions holds a quarter of it.
	b2, _, now2 := budgetsWith(t, Config{MaxTokensPerVerifier: 20_000})
	h2, _, why := b2.admitSessionOwn(p, pfx, true, 3, now2)
	if why != "" || h2.left != 5_000 {
		t.Fatalf("hold of a 20 000-token budget: %d (%s), want 5 000", h2.left, why)
	}
}

// A hold goes back to the budgets its hello charged, whatever the node's
// admission of the verifier does during the session: the /32 block's
// budget applies only to verifiers the node does not admit, and a
// verifier admitted mid-session (its reciprocal session passed) or whose
// admission lapsed would otherwise leave its block a hold short, or
// credit it with one it never paid. The session's unused calls too.
func TestTokenHoldReleaseWhereCharged(t *testing.T) {
	for _, admittedAtHello := range []bool{false, true} {
		trusted := admittedAtHello
		b, _, now := budgetsWith(t, Config{TrustedPeer: func(peer.ID) bool { return trusted }})
		p, pfx := sybil(1, 1), net48(1)
		blk, _ := BlockOf(pfx)
		block := func() (tokens, calls float64) {
			b.mu.Lock()
			defer b.mu.Unlock()
			g := b.proverBlockLocked(blk, now)
			return g.tokens.tokens, g.calls.tokens
		}
		t0, c0 := block()
		h, _, why := b.admitSessionOwn(p, pfx, true, 3, now)
		if why != "" {
			t.Fatal(why)
		}
		trusted = !admittedAtHello // admitted, or lapsed, during the session
		h.refundCalls(3, now)
		h.release(now)
		if t1, c1 := block(); t1 != t0 || c1 != c0 {
			t.Errorf("admitted at the hello %v: the block's tokens %.0f -> %.0f, calls %.0f -> %.0f after the session, want them back where they were",
				admittedAtHello, t0, t1, c0, c1)
		}
	}
}
