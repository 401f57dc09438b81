package protocol

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// Issue 10, findings 4-7: these tests use only the API of 1.0.0 (they
// fail on 5fa0aa1 and pass with the payment step and the budgets).

// Finding 4, slot pinning: hellos with total_ms = 1 h must not hold the
// prover's inbound slots; an honest verifier still gets its session.
func TestAbuseSlotPinning(t *testing.T) {
	p := newHost(t)
	src := sourceOf("pinning")
	newService(t, p, Config{Prover: oracleProver(0, src.sets...), MaxInbound: 4, MaxInboundPerPeer: 2, HandshakeTimeout: 2 * time.Second})
	for range 2 {
		m := newHost(t)
		connect(t, m, p, "tcp")
		for range 2 {
			r := openRaw(t, m, p.ID())
			r.send(helloFrame(m.ID(), p.ID(), func(h *pb.Hello) { h.TotalMs = 3600_000 }))
			f, err := r.recv()
			if err == nil && f.GetHelloAck() != nil {
				t.Errorf("prover accepted a hello with total_ms = 1 h")
			}
			// The attacker keeps its stream open and says nothing more.
		}
	}
	v := newHost(t)
	vs := newService(t, v, Config{Source: src})
	connect(t, v, p, "tcp")
	res, err := vs.Verify(testCtx(t, 20*time.Second), p.ID(), false)
	if err != nil {
		t.Fatalf("honest verifier: %v (slots pinned)", err)
	}
	if !res.Verdict.Accepted {
		t.Fatalf("honest verifier: %+v", res.Verdict)
	}
}

// Finding 5, set exhaustion: a peer that acks without paying, peeks at
// round 1 and resets must not use up the verifier's finite source; an
// honest prover verified afterwards still gets a set.
func TestAbuseSetExhaustion(t *testing.T) {
	a, m, b := newHost(t), newHost(t), newHost(t)
	sets := []*skill.Set{testSet("exhaust-1"), testSet("exhaust-2"), testSet("exhaust-3")}
	corpus, err := skill.NewCorpus("three", sets, skill.NewMemLedger(), 1)
	if err != nil {
		t.Fatal(err)
	}
	va := newService(t, a, Config{Source: corpus})
	var peeked atomic.Int32
	m.SetStreamHandler(ID, func(s network.Stream) {
		defer s.Reset()
		_ = s.SetDeadline(time.Now().Add(10 * time.Second))
		r := &rawPeer{t: t, s: s, r: newFrameReader(s, MaxVerifierFrame), max: MaxProverFrame}
		f, err := r.recv()
		if err != nil {
			return
		}
		// A 1.0.0-style ack: no proof of work.
		r.send(&pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: f.GetHello().GetNonce()}}})
		for {
			f, err := r.recv()
			if err != nil {
				return
			}
			if p := f.GetProbe(); p != nil {
				r.send(&pb.Frame{Body: &pb.Frame_ProbeAck{ProbeAck: &pb.ProbeAck{Seq: p.GetSeq(), Nonce: p.GetNonce()}}})
				continue
			}
			if f.GetChallenge() != nil {
				peeked.Add(1)
			}
			return // peeked: reset
		}
	})
	newService(t, b, Config{Prover: oracleProver(0, sets...)})
	connect(t, a, m, "tcp")
	connect(t, a, b, "tcp")
	for range 3 {
		_, _ = va.Verify(testCtx(t, 10*time.Second), m.ID(), false)
	}
	res, err := va.Verify(testCtx(t, 10*time.Second), b.ID(), false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verdict.Accepted {
		t.Fatalf("honest prover after %d peeks by an attacker: %s %s", peeked.Load(), res.Verdict.Reason, res.Verdict.Detail)
	}
}

// Finding 6, perturbed reflection: a relay that perturbs A's challenge
// (a leading space, case, white space, one word changed) is still caught.
func TestAbusePerturbedReflection(t *testing.T) {
	perturb := map[string]func(string) string{
		"leading space": func(s string) string { return " " + s },
		"upper case":    strings.ToUpper,
		"white space":   func(s string) string { return strings.ReplaceAll(s, " ", " \n\t ") },
		"one word": func(s string) string {
			w := strings.Fields(s)
			w[len(w)/2] = "zebra"
			return strings.Join(w, " ")
		},
	}
	for name, f := range perturb {
		t.Run(name, func(t *testing.T) {
			a, m := newHost(t), newHost(t)
			src := sourceOf("perturb-" + name)
			va := newService(t, a, Config{Source: src, Prover: oracleProver(0, src.sets...)})
			replies := make(chan *pb.Frame, 1)
			m.SetStreamHandler(ID, func(s network.Stream) {
				defer s.Reset()
				_ = s.SetDeadline(time.Now().Add(10 * time.Second))
				in := &rawPeer{t: t, s: s, r: newFrameReader(s, MaxVerifierFrame), max: MaxProverFrame}
				fr, err := in.recv()
				if err != nil {
					t.Errorf("M: hello: %v", err)
					return
				}
				ack(in, fr.GetHello())
				c := echoProbes(t, in)
				if c == nil {
					return
				}
				out := openRaw(t, m, a.ID())
				out.send(helloFrame(m.ID(), a.ID(), nil))
				if fr, err := out.recv(); err != nil || fr.GetHelloAck() == nil {
					t.Errorf("M: A's hello ack: %v %v", fr, err)
					return
				}
				c.Narrative = f(c.Narrative)
				c.Question = f(c.Question)
				out.send(&pb.Frame{Body: &pb.Frame_Challenge{Challenge: c}})
				fr, err = out.recv()
				if err != nil {
					t.Errorf("M: reply to the relayed challenge: %v", err)
					return
				}
				replies <- fr
				out.s.Reset()
			})
			connect(t, a, m, "tcp")
			res, err := va.Verify(testCtx(t, 20*time.Second), m.ID(), false)
			if err != nil {
				t.Fatal(err)
			}
			fr := <-replies
			if fr.GetDecline().GetReason() != pb.DeclineReason_DECLINE_REASON_REFLECTION {
				t.Fatalf("A answered its own perturbed challenge: %s %v", frameKind(fr), fr)
			}
			if res.Verdict.Accepted {
				t.Fatalf("relay accepted: %+v", res.Verdict)
			}
		})
	}
}

// Finding 7, prover cost: one hostile verifier cannot make the prover
// call its answerer without limit.
func TestAbuseProverCallBudget(t *testing.T) {
	p, m := newHost(t), newHost(t)
	var calls atomic.Int32
	newService(t, p, Config{Prover: skill.ProverFunc(func() skill.Answerer {
		return skill.AnswerFunc(func(context.Context, skill.Challenge) (string, error) {
			calls.Add(1)
			return "x", nil
		})
	})})
	connect(t, m, p, "tcp")
	const sessions = 50
	busy := 0
	for i := range sessions {
		if hostileSession(t, m, p, i) {
			busy++
		}
	}
	if n := calls.Load(); n > 120 || busy == 0 { // 120: DefaultMaxCallsPerVerifier
		t.Fatalf("%d answerer calls for %d sessions of one verifier (%d refused)", n, sessions, busy)
	}
}

// hostileSession runs one three-round session from m as a raw verifier;
// it reports whether the prover refused it at the hello.
func hostileSession(t *testing.T, m, p host.Host, i int) (refused bool) {
	t.Helper()
	r := openRaw(t, m, p.ID())
	defer r.s.Reset()
	r.send(helloFrame(m.ID(), p.ID(), nil))
	f, err := r.recv()
	if err != nil || f.GetHelloAck() == nil {
		return true
	}
	for round := uint32(1); round <= 3; round++ {
		r.send(challengeFrame(round, strings.Repeat(fmt.Sprintf("hostile narrative number %d ", i), 20), "Which?"))
		if f, err := r.recv(); err != nil || f.GetAnswer() == nil {
			return false
		}
	}
	return false
}

// Per-IP-prefix draw budget (spec §9a): addresses group by /24 (IPv4,
// IPv4-mapped included) and /48 (IPv6); loopback is exempt unless asked.
func TestDrawPrefix(t *testing.T) {
	for _, c := range []struct {
		ip, want      string
		limitLoopback bool
	}{
		{"203.0.113.77", "203.0.113.0/24", false},
		{"::ffff:203.0.113.77", "203.0.113.0/24", false},
		{"2001:db8:1234:5678::1", "2001:db8:1234::/48", false},
		{"fe80::1%eth0", "fe80::/48", false},
		{"127.0.0.1", "", false},
		{"::1", "", false},
		{"127.0.0.1", "127.0.0.0/24", true},
		{"::1", "::/48", true},
		// NAT64 (RFC 6052's well-known prefix): the IPv4 host it carries.
		{"64:ff9b::203.0.113.77", "203.0.113.0/24", false},
		{"64:ff9b::198.51.100.1", "198.51.100.0/24", false},
		{"64:ff9b:1::203.0.113.77", "64:ff9b:1::/48", false},
	} {
		got, ok := DrawPrefix(netip.MustParseAddr(c.ip), c.limitLoopback)
		if (c.want == "") == ok || (ok && got.String() != c.want) {
			t.Errorf("DrawPrefix(%s, %v) = %v %v, want %q", c.ip, c.limitLoopback, got, ok, c.want)
		}
	}
	if _, ok := DrawPrefix(netip.Addr{}, true); ok {
		t.Error("DrawPrefix of the zero address")
	}
}

// The IPv6 block of a budget group (spec §9a): the /32 of a /48; none
// for an IPv4 /24, a NAT64 address's group or a relay's group.
func TestBlockOf(t *testing.T) {
	group := func(ip string) netip.Prefix {
		pfx, ok := DrawPrefix(netip.MustParseAddr(ip), true)
		if !ok {
			t.Fatalf("no group for %s", ip)
		}
		return pfx
	}
	for _, c := range []struct {
		pfx  netip.Prefix
		want string
	}{
		{group("2001:db8:1234:5678::1"), "2001:db8::/32"},
		{group("2a01:4f8:c0de:1::2"), "2a01:4f8::/32"},
		{group("::1"), "::/32"},
		{group("203.0.113.77"), ""},
		{group("::ffff:203.0.113.77"), ""},
		{group("64:ff9b::203.0.113.77"), ""},
		{group("64:ff9b:1::1"), ""},
		{mustRelayGroup("/ip6/2001:db8::1/tcp/1/p2p/" + testRelayIDs[0].String() + "/p2p-circuit"), ""},
		{netip.MustParsePrefix("2001:db8::/32"), ""},
		{netip.Prefix{}, ""},
	} {
		got, ok := BlockOf(c.pfx)
		if (c.want == "") == ok || (ok && got.String() != c.want) {
			t.Errorf("BlockOf(%v) = %v %v, want %q", c.pfx, got, ok, c.want)
		}
	}
}

// The peers of one prefix share MaxDrawsPerPrefix; another prefix keeps
// its own share; a refund gives the prefix's draw back.
func TestBudgetsPrefixShare(t *testing.T) {
	cfg := Config{MaxDrawsPerPrefix: 3}
	if err := cfg.applyDefaults(); err != nil {
		t.Fatal(err)
	}
	b := newBudgets(&cfg)
	net1, net2 := netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8:1::/48")
	where := map[peer.ID]netip.Prefix{}
	b.prefixOf = func(p peer.ID) (netip.Prefix, bool) { pfx, ok := where[p]; return pfx, ok }
	now := time.Unix(1_700_000_000, 0)
	id := func(i int) peer.ID { return peer.ID(fmt.Sprintf("sybil-%d", i)) }
	for i := range 5 {
		where[id(i)] = net1
	}
	for i := range 3 {
		if !b.canDraw(id(i), now) || !b.takeDraw(id(i), now) {
			t.Fatalf("draw %d of the prefix refused", i)
		}
	}
	if b.canDraw(id(3), now) || b.takeDraw(id(3), now) {
		t.Fatal("a fourth peer of the same /24 drew past the prefix share")
	}
	if u := (&Service{budgets: b}).PeerUsage(id(3)); u.Paid != 1 || u.Drawn != 0 || u.Refused != 1 || u.Returned != 0 {
		t.Fatalf("usage of the refused peer: %+v", u)
	}
	where[id(9)] = net2
	if !b.takeDraw(id(9), now) {
		t.Fatal("a peer of another prefix was refused")
	}
	// An unconnected peer (no prefix) is bounded by its own and the
	// global share only.
	if !b.takeDraw(id(10), now) {
		t.Fatal("a peer without a prefix was refused")
	}
	b.refundDraw(id(0), now)
	if !b.takeDraw(id(4), now) {
		t.Fatal("a refunded draw did not go back to the prefix")
	}
	// The bucket refills over the window.
	if !b.takeDraw(id(3), now.Add(cfg.DrawWindow/2)) {
		t.Fatal("the prefix share did not refill")
	}
}

// Live: three provers on 127.0.0.1 with loopback limited share one /24
// budget of two draws; loopback is exempt by default.
func TestPrefixDrawBudgetLoopback(t *testing.T) {
	for _, limit := range []bool{true, false} {
		t.Run(fmt.Sprintf("limit_loopback=%v", limit), func(t *testing.T) {
			a := newHost(t)
			src := sourceOf("prefix-1", "prefix-2", "prefix-3")
			va := newService(t, a, Config{Source: src, MaxDrawsPerPrefix: 2, LimitLoopback: limit})
			refused := 0
			for i := range 3 {
				b := newHost(t)
				newService(t, b, Config{Prover: oracleProver(0, src.sets...)})
				connect(t, a, b, "tcp")
				res, err := va.Verify(testCtx(t, 10*time.Second), b.ID(), false)
				switch {
				case errors.Is(err, ErrPeerQuota):
					refused++
				case err != nil:
					t.Fatalf("prover %d: %v", i, err)
				case !res.Verdict.Accepted:
					t.Fatalf("prover %d: %+v", i, res.Verdict)
				}
			}
			if want := map[bool]int{true: 1, false: 0}[limit]; refused != want {
				t.Fatalf("%d of 3 loopback provers refused, want %d", refused, want)
			}
		})
	}
}

// The prompt-token budget per verifier: each round is charged its exact
// token count (the reservation of the count's bound is settled after the
// answer, and what the session held and did not read goes back), and a
// session the rest of the budget cannot hold is refused at the hello.
func TestProverTokenBudget(t *testing.T) {
	src := sourceOf("tokens-1", "tokens-2", "tokens-3")
	// A session's charge (spec §9a): round r is charged the prompt
	// tokens of rounds 1..r's text.
	exact := func(set *skill.Set) (n int) {
		history := 0
		for _, p := range set.Parts {
			// Every question of a part has the same length class; the
			// session picks one at random, so count the largest.
			q := 0
			for _, x := range p.Questions {
				q = max(q, skill.PromptTokens(x.Question))
			}
			history += skill.PromptTokens(p.Narrative) + q
			n += history
		}
		return n
	}
	var perSession int
	for _, s := range src.sets {
		perSession = max(perSession, exact(s))
	}
	bound := skill.TokenBound(len(src.sets[0].Parts[0].Narrative))
	if bound <= skill.PromptTokens(src.sets[0].Parts[0].Narrative) {
		t.Fatalf("bound %d does not exceed the count", bound)
	}
	for _, tc := range []struct {
		name   string
		budget int
	}{
		// Room for every bound: the reservation path, settled after
		// each answer; two sessions fit only if settling gave back
		// the difference.
		{"reserve", 2*perSession + 3*bound},
		// Room for the exact counts of two sessions: once the bounds no
		// longer fit, rounds are charged their exact count at once, and
		// a third session is refused.
		{"exact", 2*perSession + 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ha, hb := newHost(t), newHost(t)
			va := newService(t, ha, Config{Source: src, Probes: 1})
			pr := newProved()
			pb := newService(t, hb, Config{Prover: oracleProver(0, src.sets...), OnProved: pr.fn,
				MaxTokensPerVerifier: tc.budget})
			connect(t, ha, hb, "tcp")
			for i := range 2 {
				res, err := va.Verify(context.Background(), hb.ID(), false)
				if err != nil || !res.Verdict.Accepted {
					t.Fatalf("session %d: %v %+v", i+1, err, res)
				}
				pr.next(t)
			}
			// Two sessions spent at most 2*perSession: what is left
			// (tc.budget - spent, plus a negligible refill) covers less
			// than a third session's first round only in "exact".
			pb.budgets.mu.Lock()
			left := pb.budgets.peers[ha.ID()].tokens.tokens
			pb.budgets.mu.Unlock()
			if spent := float64(tc.budget) - left; spent > float64(2*perSession)+1 || spent < float64(2*perSession)/2 {
				t.Fatalf("spent %.1f tokens for two sessions, want at most %d", spent, 2*perSession)
			}
			if tc.name != "exact" {
				return
			}
			// A third session: the 10 tokens (plus refill) left cannot
			// hold its tokens (spec §9a): refused at the hello, which
			// signs nothing (a round refused mid-session would be signed
			// `declined`: TestProverRefusesRoundBeyondHold).
			res, err := va.Verify(context.Background(), hb.ID(), false)
			if !errors.Is(err, ErrBusy) || res != nil {
				t.Fatalf("third session: %v %+v, want ErrBusy and no verdict", err, res)
			}
		})
	}
}

// The prover's budgets per verifier prefix and in total (fresh peer IDs
// cost a hostile verifier nothing): sessions per prefix and globally,
// proof-of-work hashes globally with a prefix's share, prompt tokens
// globally. A session is never given back.
func TestProverPrefixAndGlobalBudgets(t *testing.T) {
	// Every verifier trusted: the global budgets in full (the quarter
	// kept for trusted verifiers: TestProverReserveForTrusted).
	cfg := Config{MaxSessionsPerVerifierPrefix: 3, MaxProverSessions: 5, MaxProverTokens: 1000, MaxProverPowWork: 8 << 10,
		TrustedPeer: func(peer.ID) bool { return true }}
	if err := cfg.applyDefaults(); err != nil {
		t.Fatal(err)
	}
	b := newBudgets(&cfg)
	net1, net2 := netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("203.0.113.0/24")
	where := map[peer.ID]netip.Prefix{}
	b.prefixOf = func(p peer.ID) (netip.Prefix, bool) { pfx, ok := where[p]; return pfx, ok }
	now := time.Unix(1_700_000_000, 0)
	id := func(i int) peer.ID { return peer.ID(fmt.Sprintf("verifier-%d", i)) }
	for i := range 4 {
		where[id(i)] = net1
	}
	where[id(4)], where[id(5)], where[id(6)] = net2, net2, net2

	t.Run("sessions", func(t *testing.T) {
		for i := range 3 {
			if ok, why := b.admitSession(id(i), 1, now); !ok {
				t.Fatalf("verifier %d of the first /24 refused: %s", i, why)
			}
		}
		if ok, why := b.admitSession(id(3), 1, now); ok || !strings.Contains(why, "network") {
			t.Fatalf("a fourth fresh ID of the same /24 got a session (%v, %q)", ok, why)
		}
		for i := 4; i < 6; i++ {
			if ok, why := b.admitSession(id(i), 1, now); !ok {
				t.Fatalf("verifier %d of another /24 refused: %s", i, why)
			}
		}
		if ok, why := b.admitSession(id(6), 1, now); ok || !strings.Contains(why, "of this node") {
			t.Fatalf("a sixth session past the node's budget of five (%v, %q)", ok, why)
		}
		b.refundCalls(id(0), 1, now) // calls go back, the session does not
		if ok, _ := b.admitSession(id(6), 1, now); ok {
			t.Fatal("a refund of calls gave a session back")
		}
		if ok, why := b.admitSession(id(6), 1, now.Add(cfg.ProverWindow/2)); !ok {
			t.Fatalf("the node's session budget did not refill: %s", why)
		}
	})
	t.Run("pow", func(t *testing.T) {
		// A prefix's share is an eighth of 8 Ki hashes: 1 Ki.
		if !b.chargePow(id(0), 10, now) {
			t.Fatal("1 Ki hashes refused to a fresh prefix")
		}
		if b.chargePow(id(1), 1, now) {
			t.Fatal("the first /24 solved past its share")
		}
		for range 7 {
			if !b.chargePow(id(4), 0, now) {
				t.Fatal("0 bits charged")
			}
		}
		// Peers without a prefix (loopback) share only the global budget.
		if !b.chargePow(id(20), 12, now) {
			t.Fatal("4 Ki hashes refused with 7 Ki left")
		}
		if b.chargePow(id(21), 12, now) {
			t.Fatal("4 Ki hashes solved with 3 Ki left")
		}
	})
	t.Run("tokens", func(t *testing.T) {
		if !b.chargeTokens(id(30), 900, now) {
			t.Fatal("900 of 1000 tokens refused")
		}
		if b.chargeTokens(id(31), 200, now) {
			t.Fatal("a second verifier read past the node's token budget")
		}
		b.refundTokens(id(30), 500, now)
		if !b.chargeTokens(id(31), 200, now) {
			t.Fatal("refunded tokens did not go back to the node's budget")
		}
	})
}

// Live: hostile verifiers asking the highest proof of work the prover
// pays, each from a fresh peer ID that then hangs up, spend the node's
// proof-of-work budget and no more (three quarters of it: the last is
// kept for verifiers the node trusts); past it the prover declines BUSY
// before solving.
func TestProverPowBudgetLive(t *testing.T) {
	const d = 12
	m, b, _ := proverUnderTest(t, "tcp", Config{Prover: constProver("x"), MaxProverPowWork: 4 << d})
	acked, busy := 0, 0
	for range 5 {
		r := openRaw(t, m, b.ID())
		r.send(helloFrame(m.ID(), b.ID(), func(h *pb.Hello) { h.PowDifficulty = d }))
		f, err := r.recv()
		switch {
		case err != nil:
			t.Fatalf("hello: %v", err)
		case f.GetHelloAck() != nil:
			acked++
		case f.GetDecline().GetReason() == pb.DeclineReason_DECLINE_REASON_BUSY:
			busy++
		default:
			t.Fatalf("got %s", frameKind(f))
		}
		r.s.Reset()
	}
	if acked != 3 || busy != 2 {
		t.Fatalf("%d acked and %d declined busy, want 3 and 2 (a budget of three proofs)", acked, busy)
	}
}

// The verifiers of one IP prefix together hold at most
// MaxInboundPerPrefix concurrent prover sessions (loopback counts when
// LimitLoopback is set); a slot freed is usable again.
func TestInboundPerPrefix(t *testing.T) {
	p := newHost(t)
	newService(t, p, Config{Prover: constProver("x"), MaxInboundPerPrefix: 2, LimitLoopback: true, HandshakeTimeout: 5 * time.Second})
	var open []*rawPeer
	for i := range 3 {
		m := newHost(t)
		connect(t, m, p, "tcp")
		r := openRaw(t, m, p.ID())
		r.send(helloFrame(m.ID(), p.ID(), nil))
		f, err := r.recv()
		if i < 2 {
			// Holds its slot: the prover waits for round 1.
			if err != nil || f.GetHelloAck() == nil {
				t.Fatalf("verifier %d: %v %v, want a hello ack", i, frameKind(f), err)
			}
			open = append(open, r)
			continue
		}
		if err != nil || f.GetDecline().GetReason() != pb.DeclineReason_DECLINE_REASON_BUSY {
			t.Fatalf("third verifier of the /24: %v %v, want Decline{BUSY}", frameKind(f), err)
		}
	}
	open[0].s.Reset()
	time.Sleep(100 * time.Millisecond) // the slot is released
	m := newHost(t)
	connect(t, m, p, "tcp")
	r := openRaw(t, m, p.ID())
	r.send(helloFrame(m.ID(), p.ID(), nil))
	if f, err := r.recv(); err != nil || f.GetHelloAck() == nil {
		t.Fatalf("after a slot was freed: %v %v, want a hello ack", frameKind(f), err)
	}
}

// A full budget table makes room for a sixteenth of itself at once, idle
// peers first, so that a flood of fresh peer IDs costs one scan of the
// table per 4,096 of them rather than one each.
func TestBudgetTableEvictsInBatches(t *testing.T) {
	cfg := Config{}
	if err := cfg.applyDefaults(); err != nil {
		t.Fatal(err)
	}
	b := newBudgets(&cfg)
	now := time.Unix(1_700_000_000, 0)
	busy := peer.ID("busy")
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range maxTrackedPeers {
		id := peer.ID(fmt.Sprintf("p%d", i))
		if i == 0 {
			id = busy
		}
		st := b.stateLocked(id, now)
		if i%2 == 0 { // half of them busy: a draw taken
			st.draws.refill(float64(cfg.MaxDrawsPerPeer), cfg.DrawWindow, now)
			st.draws.tokens--
		}
	}
	if len(b.peers) != maxTrackedPeers {
		t.Fatalf("%d peers tracked, want %d", len(b.peers), maxTrackedPeers)
	}
	b.stateLocked("fresh-1", now)
	want := maxTrackedPeers - maxTrackedPeers/16 + 1
	if len(b.peers) != want {
		t.Fatalf("after one insert into a full table: %d peers, want %d", len(b.peers), want)
	}
	if b.peers[busy] == nil {
		t.Fatal("a busy peer was evicted while idle ones were left")
	}
	for i := 2; i <= maxTrackedPeers/16; i++ {
		b.stateLocked(peer.ID(fmt.Sprintf("fresh-%d", i)), now)
	}
	if len(b.peers) != maxTrackedPeers {
		t.Fatalf("%d peers tracked, want the table full again", len(b.peers))
	}
}

// A draw budget spent between the pre-check and the paid ack (here the
// global one, taken by another session meanwhile) ends the session
// unsigned with a reset ErrCodeBusy (spec §5 step 1), so the prover can
// tell "busy" from a broken stream.
func TestDrawSpentAfterAckResetsBusy(t *testing.T) {
	v, m := newHost(t), newHost(t)
	svc := newService(t, v, Config{Source: sourceOf("spent-1", "spent-2"), MaxDraws: 1})
	held := make(chan *VerifierSession, 1)
	defer func() {
		select {
		case vs := <-held:
			vs.Abort(ErrClosed)
		default:
		}
	}()
	code := make(chan network.StreamErrorCode, 1)
	m.SetStreamHandler(ID, func(s network.Stream) {
		defer s.Reset()
		_ = s.SetDeadline(time.Now().Add(10 * time.Second))
		r := &rawPeer{t: t, s: s, r: newFrameReader(s, MaxVerifierFrame), max: MaxProverFrame}
		f, err := r.recv()
		if err != nil {
			code <- 0
			return
		}
		// Another session takes the one global draw between the
		// verifier's pre-check and this ack.
		vs, err := svc.Core().Begin(randomPeer(t), BeginOptions{})
		if err == nil {
			err = vs.Pay(context.Background(), nil)
			held <- vs
		}
		if err != nil {
			t.Errorf("the other session: %v", err)
		}
		r.send(&pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: f.GetHello().GetNonce()}}})
		f, err = r.recv()
		c, _ := resetCode(err)
		if err == nil {
			t.Errorf("after the ack: %s, want a reset", frameKind(f))
		}
		code <- c
	})
	connect(t, v, m, "tcp")
	res, err := svc.Verify(testCtx(t, 10*time.Second), m.ID(), false)
	if !errors.Is(err, ErrPeerQuota) || res != nil {
		t.Fatalf("global draws spent after the ack: %+v, %v; want ErrPeerQuota and no result", res, err)
	}
	select {
	case c := <-code:
		if c != ErrCodeBusy {
			t.Errorf("reset code %#x, want ErrCodeBusy", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the prover's handler did not finish")
	}
}

// G of spec §5a: 2 bits per halving of the global draw budget left, at
// most 8; and the difficulty a fresh peer is asked rises with it as the
// draws are spent.
func TestGlobalDrawBits(t *testing.T) {
	for _, tc := range []struct {
		left float64
		want int
	}{{1000, 0}, {500, 0}, {499, 2}, {250, 2}, {249, 4}, {124, 6}, {62, 8}, {1, 8}, {0, 8}} {
		if got := globalDrawBits(tc.left, 1000); got != tc.want {
			t.Errorf("globalDrawBits(%v, 1000) = %d, want %d", tc.left, got, tc.want)
		}
	}
	now := time.Unix(5000, 0)
	// Peers the node admits, who may spend the kept quarter too.
	cfg := Config{MaxDraws: 64, MaxDrawsPerPeer: 64, MaxDrawsPerPrefix: 64, TrustedPeer: func(peer.ID) bool { return true }}
	if err := cfg.applyDefaults(); err != nil {
		t.Fatal(err)
	}
	b := newBudgets(&cfg)
	last := 0
	for i := range 63 {
		d := b.difficulty(randomPeer(t), now)
		if d < last {
			t.Fatalf("draw %d: difficulty fell from %d to %d", i, last, d)
		}
		last = d
		if !b.takeDrawIn(randomPeer(t), netip.Prefix{}, false, now) {
			t.Fatalf("draw %d refused", i)
		}
	}
	if last < 8 {
		t.Errorf("difficulty with 1 of 64 draws left: %d bits, want 8", last)
	}
}

// A session begun with DeferLoad counts in the node's load only once its
// subject paid: unstarted ones raise nobody's proof of work.
func TestDeferLoad(t *testing.T) {
	v := newService(t, newHost(t), Config{Source: sourceOf("defer")}).Core()
	var held []*VerifierSession
	defer func() {
		for _, vs := range held {
			vs.Abort(ErrClosed)
		}
	}()
	for range 40 {
		vs, err := v.Begin(randomPeer(t), BeginOptions{DeferLoad: true})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, vs)
	}
	probe, err := v.Begin(randomPeer(t), BeginOptions{DeferLoad: true})
	if err != nil {
		t.Fatal(err)
	}
	held = append(held, probe)
	if d := probe.PowDifficulty(); d != 0 {
		t.Errorf("41 unstarted sessions: a fresh peer asked %d bits, want 0", d)
	}
	for _, vs := range held[:40] {
		if err := vs.Pay(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	after, err := v.Begin(randomPeer(t), BeginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	held = append(held, after)
	if d := after.PowDifficulty(); d == 0 {
		t.Error("40 paid sessions in flight: a fresh peer asked 0 bits, want the load's")
	}
}

// The last quarter of the node's prover session and proof-of-work budgets
// is kept for verifiers it trusts (spec §9a): fresh peer IDs asking the
// largest proof of work cannot leave the node busy for everyone.
func TestProverReserveForTrusted(t *testing.T) {
	trusted := randomPeer(t)
	cfg := Config{MaxProverSessions: 8, MaxSessionsPerVerifierPrefix: 100, MaxProverPowWork: 1 << 20,
		TrustedPeer: func(p peer.ID) bool { return p == trusted }}
	if err := cfg.applyDefaults(); err != nil {
		t.Fatal(err)
	}
	b := newBudgets(&cfg)
	now := time.Unix(7000, 0)
	admitted := 0
	for range 10 {
		if ok, _ := b.admitSessionIn(randomPeer(t), netip.Prefix{}, false, 3, now); ok {
			admitted++
		}
	}
	if admitted != 6 {
		t.Errorf("untrusted verifiers admitted %d of 8 sessions, want 6", admitted)
	}
	for i := range 2 {
		if ok, why := b.admitSessionIn(trusted, netip.Prefix{}, false, 3, now); !ok {
			t.Errorf("trusted verifier, session %d: refused (%s)", i+1, why)
		}
	}
	// Proof of work: 2^18 of 2^20 per session; untrusted ones stop at the
	// last quarter (three sessions), a trusted one gets it.
	charged := 0
	for range 5 {
		if b.chargePowIn(randomPeer(t), netip.Prefix{}, false, 18, now) {
			charged++
		}
	}
	if charged != 3 {
		t.Errorf("untrusted verifiers charged %d proofs of work of 18 bits against 2^20, want 3", charged)
	}
	if !b.chargePowIn(trusted, netip.Prefix{}, false, 18, now) {
		t.Error("trusted verifier refused the reserved proof of work")
	}
}

// The trusted quarter never shuts untrusted verifiers out of a small
// budget: a full budget always takes one session and one proof of work.
func TestProverReserveSmallBudgets(t *testing.T) {
	for _, tc := range []struct {
		sessions, pow, d int
	}{{1, 1 << 16, 16}, {2, 3 << 15, 16}, {3, 1 << 20, 20}} {
		cfg := Config{MaxProverSessions: tc.sessions, MaxProverPowWork: tc.pow, MaxSessionsPerVerifierPrefix: 100}
		if err := cfg.applyDefaults(); err != nil {
			t.Fatal(err)
		}
		b := newBudgets(&cfg)
		now := time.Unix(8000, 0)
		if ok, why := b.admitSessionIn(randomPeer(t), netip.Prefix{}, false, 1, now); !ok {
			t.Errorf("%d prover sessions: the first untrusted one refused (%s)", tc.sessions, why)
		}
		if !b.chargePowIn(randomPeer(t), netip.Prefix{}, false, tc.d, now) {
			t.Errorf("a budget of %d hashes: the first %d-bit proof of work refused", tc.pow, tc.d)
		}
	}
}
