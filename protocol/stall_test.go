package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-msgio/pbio"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// stallStreams opens streams from m to p in a loop (bounded), each a
// valid hello that asks no proof of work and then silence until the
// prover ends the stream: a stall (spec §6 step 1). It counts the
// hellos the prover acked.
func stallStreams(ctx context.Context, m host.Host, p peer.ID, acked *atomic.Int64) {
	stallStreamsWith(ctx, m, p, acked, nil)
}

// stallStreamsWith is stallStreams with the hellos changed by mutate.
func stallStreamsWith(ctx context.Context, m host.Host, p peer.ID, acked *atomic.Int64, mutate func(*pb.Hello)) {
	for i := 0; i < 400 && ctx.Err() == nil; i++ {
		s, err := m.NewStream(ctx, p, ID)
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		_ = s.SetDeadline(time.Now().Add(30 * time.Second))
		var f pb.Frame
		if pbio.NewDelimitedWriter(s).WriteMsg(helloFrame(m.ID(), p, mutate)) == nil &&
			pbio.NewDelimitedReader(s, MaxVerifierFrame).ReadMsg(&f) == nil && f.GetHelloAck() != nil {
			acked.Add(1)
			_, _ = io.Copy(io.Discard, s) // until the prover gives up
		} else {
			time.Sleep(20 * time.Millisecond)
		}
		_ = s.Reset()
	}
}

// A stall, a valid hello followed by silence, held an inbound slot until
// the first-frame deadline (IdleTimeout, 45 s by default) and never
// counted as silent: a few /24s of fresh peer IDs held every slot open to
// verifiers the node does not admit (16 per /24, all 48 from three /24s
// at the defaults), for one session of their budget each, and an honest
// verifier of another network got BUSY. A stall now counts as silent,
// and a stream of a group in probation waits in the group's one stall
// place from its hello ack to the verifier's next frame, where a newer
// paid stream of the group takes its place: after the first wave
// each /24 holds at most two streams (one waiting for its hello, one
// stalled).
func TestStallsCountAsSilent(t *testing.T) {
	if testing.Short() {
		t.Skip("loopback run of several idle timeouts")
	}
	src := sourceOf("stall-a", "stall-b", "stall-c", "stall-d")
	p := hostAt(t, "127.0.0.1")
	const idle = 2 * time.Second
	// 16 slots, 4 per /24, 2 per peer: the 12 not kept for admitted
	// verifiers are those of three /24s.
	svc := newService(t, p, Config{Prover: oracleProver(0, src.sets...), LimitLoopback: true,
		HelloTimeout: time.Second, IdleTimeout: idle, MaxInbound: 16, MaxInboundPerPrefix: 4})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	connect := func(h host.Host) {
		t.Helper()
		if err := h.Connect(ctx, peer.AddrInfo{ID: p.ID(), Addrs: p.Addrs()}); err != nil {
			t.Fatal(err)
		}
	}
	actx, stop := context.WithCancel(ctx)
	defer stop()
	var acked atomic.Int64
	var wg sync.WaitGroup
	for net := 1; net <= 3; net++ {
		for host := 1; host <= 2; host++ {
			m := hostAt(t, fmt.Sprintf("127.0.%d.%d", net, host))
			connect(m)
			for range 2 {
				wg.Add(1)
				go func() { defer wg.Done(); stallStreams(actx, m, p.ID(), &acked) }()
			}
		}
	}
	defer func() { stop(); wg.Wait() }()
	// The first wave (opened before any group was in probation) lasts
	// until its first-frame deadline, and the streams reopened before the
	// strikes were counted one more; a third deadline leaves room for
	// timers that fire late under -race on a loaded machine (CI once saw
	// a third stream of one /24 at 2.5 deadlines).
	time.Sleep(3 * idle)
	// Every sample: at most two per /24. CI saw 3 and 4 now and then for
	// a single 5 ms sample: a stream past its valid hello left the
	// waiting place before it entered the stall place (its session being
	// paid meanwhile), and a newer stream took the waiting place; it now
	// keeps the waiting place until it enters the stall place
	// (TestProbationPlacesBoundAtEveryStep). A displaced stream's slot is
	// free at once, whenever its handler returns (spec §6 step 1).
	peak, peakGroup, samples, over := 0, 0, 0, 0
	for end := time.Now().Add(idle); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		svc.mu.Lock()
		peak = max(peak, svc.inbound)
		group := 0
		for _, n := range svc.perPrefix {
			group = max(group, n)
		}
		svc.mu.Unlock()
		peakGroup = max(peakGroup, group)
		samples++
		if group > 2 {
			over++
		}
	}
	// An honest verifier of another /24, which the node does not admit.
	v := hostAt(t, "127.0.9.1")
	vs := newService(t, v, Config{Source: src, LimitLoopback: true})
	connect(v)
	const tries = 3
	served := 0
	var last error
	for range tries {
		res, err := vs.Verify(ctx, p.ID(), false)
		if err == nil && res.Verdict.Accepted {
			served++
		} else if err == nil {
			last = errors.New(string(res.Verdict.Reason))
		} else {
			last = err
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("three /24s of stalls: %d hellos acked, at most %d inbound slots held after the first wave (%d by one /24; more than two in %d of %d samples); honest verifier of another /24: %d of %d served (last error: %v)",
		acked.Load(), peak, peakGroup, over, samples, served, tries, last)
	// One stream per /24 waits for its hello (or for its session to be
	// paid), one past it.
	if over > 0 {
		t.Errorf("stalls of three /24s held %d inbound slots after the first wave (%d by one /24, more than two in %d of %d samples), want at most two per /24", peak, peakGroup, over, samples)
	}
	if served != tries {
		t.Errorf("an honest verifier of another network was served %d of %d times (%v)", served, tries, last)
	}
}

// A verifier that probes once and then falls silent held its slot until
// the first-frame deadline (IdleTimeout) like a plain stall, and out of
// the stall place: once the verifier's first frame after the ack is read
// its set is drawn, so round 1 is due within the handshake timeout (spec
// §6 step 5).
func TestProbeThenSilenceEndsAtHandshakeTimeout(t *testing.T) {
	const hs, idle = time.Second, 8 * time.Second
	m, b, pr := proverUnderTest(t, "tcp", Config{Prover: constProver("x"), HandshakeTimeout: hs, IdleTimeout: idle})
	r := openRaw(t, m, b.ID())
	_ = r.s.SetDeadline(time.Now().Add(2 * idle))
	r.send(helloFrame(m.ID(), b.ID(), nil))
	if f, err := r.recv(); err != nil || f.GetHelloAck() == nil {
		t.Fatalf("hello: %v %v", f, err)
	}
	r.send(&pb.Frame{Body: &pb.Frame_Probe{Probe: &pb.Probe{Seq: 1, Nonce: []byte("12345678")}}})
	if f, err := r.recv(); err != nil || f.GetProbeAck() == nil {
		t.Fatalf("probe: %v %v", f, err)
	}
	t0 := time.Now()
	expectReset(t, r, ErrCodeTimeout)
	if d := time.Since(t0); d > hs+time.Second {
		t.Fatalf("after a probe and silence the prover waited %v, want the handshake timeout (%v), not IdleTimeout (%v)", d, hs, idle)
	}
	pr.next(t)
}

// A verifier that sends a challenge, reads the answer and then falls
// silent held its slot for the idle wait (min(IdleTimeout, total_ms +
// 10 s), 45 s by default) after every answerer call. It judges an answer
// at once (its rounds are drawn, the matching rules are local and fast),
// so its next frame, the next challenge or the verdict, is due within the
// handshake timeout of the answer (spec §6 step 5).
func TestAnswerThenSilenceEndsAtHandshakeTimeout(t *testing.T) {
	const hs, idle = time.Second, 8 * time.Second
	for _, tc := range []struct {
		name string
		ans  skill.Prover
		want func(*pb.Frame) bool
	}{
		{"answer", constProver("x"), func(f *pb.Frame) bool { return f.GetAnswer() != nil }},
		// An answer slower than readerAfter: the feed's reader goroutine
		// holds the stream's read when the wait is set.
		{"slow answer", skill.ProverFunc(func() skill.Answerer {
			return skill.AnswerFunc(func(context.Context, skill.Challenge) (string, error) {
				time.Sleep(50 * time.Millisecond)
				return "x", nil
			})
		}), func(f *pb.Frame) bool { return f.GetAnswer() != nil }},
		{"decline", skill.ProverFunc(func() skill.Answerer {
			return skill.AnswerFunc(func(context.Context, skill.Challenge) (string, error) { return "", skill.ErrDeclined })
		}), func(f *pb.Frame) bool { return f.GetDecline() != nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, b, pr := proverUnderTest(t, "tcp", Config{Prover: tc.ans, HandshakeTimeout: hs, IdleTimeout: idle})
			r := openRaw(t, m, b.ID())
			_ = r.s.SetDeadline(time.Now().Add(2 * idle))
			r.send(helloFrame(m.ID(), b.ID(), nil))
			if f, err := r.recv(); err != nil || f.GetHelloAck() == nil {
				t.Fatalf("hello: %v %v", f, err)
			}
			r.send(challengeFrame(1, "Mara keeps three lamps in the shed.", "How many lamps?"))
			if f, err := r.recv(); err != nil || !tc.want(f) {
				t.Fatalf("round 1: %v %v", f, err)
			}
			t0 := time.Now()
			expectReset(t, r, ErrCodeTimeout)
			if d := time.Since(t0); d > hs+time.Second {
				t.Fatalf("after round 1's %s and silence the prover waited %v, want the handshake timeout (%v), not the idle wait (%v)", tc.name, d, hs, idle)
			}
			pr.next(t)
		})
	}
}

// The group's places of probation (spec §6 step 1) held one stream
// waiting for its hello and one stalled, but a stream left the waiting
// place once its hello was valid and entered the stall place only when
// its session was paid (budgets, proof of work, the reciprocal hook):
// meanwhile it was in neither, a newer stream of the group took the
// waiting place, and a /24 reopening stalls held three streams, or four
// when a second hello was read before the first entered the stall place
// (what TestStallsCountAsSilent sampled now and then, up to the group's
// cap with proof of work to pay). A stream past its valid hello now
// keeps the waiting place until it enters the stall place, and a newer
// stream of the group is refused meanwhile: the group holds at most two
// streams at every step.
func TestProbationPlacesBoundAtEveryStep(t *testing.T) {
	at := time.Unix(9000, 0)
	s := slotService(t, func() time.Time { return at }, "")
	pfx := net48(7)
	for range SilentStrikes {
		s.strikeSilent(pfx, at)
	}
	held := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.perPrefix[pfx]
	}
	check := func(step string) {
		t.Helper()
		if n := held(); n > 2 {
			t.Fatalf("%s: the group in probation holds %d streams, want at most 2 (one waiting, one stalled)", step, n)
		}
	}
	// Stalls reopened as fast as they end: each stream's hello is read
	// before the one ahead of it entered the stall place.
	var paying []*inboundHold
	refused := 0
	for i := range 32 {
		h := s.acquireInbound(sybil(7, i), pfx, true, false, func() {})
		check(fmt.Sprintf("stream %d opened", i))
		if h == nil {
			refused++
		} else if h.helloValid() {
			paying = append(paying, h)
		}
		check(fmt.Sprintf("stream %d past its hello", i))
		if i%3 == 2 {
			for _, p := range paying {
				p.enterStall()
				check(fmt.Sprintf("stream %d paid", i))
			}
			paying = paying[:0]
		}
	}
	if refused == 0 {
		t.Fatal("no newer stream was refused while the group's place held a stream past its hello")
	}
	// An honest verifier of the group past its hello keeps its place
	// against a newer stream, and once in the stall place leaves the
	// waiting place to the next.
	for _, p := range paying {
		p.release()
	}
	honest := s.acquireInbound("honest", pfx, true, false, func() {})
	if honest == nil || !honest.helloValid() {
		t.Fatal("an honest verifier of the group did not take the waiting place")
	}
	if s.acquireInbound(sybil(7, 99), pfx, true, false, func() {}) != nil || honest.done {
		t.Fatal("a newer stream displaced a stream past its valid hello")
	}
	if !honest.enterStall() || honest.done {
		t.Fatal("the honest stream lost its stall place")
	}
	if next := s.acquireInbound(sybil(7, 100), pfx, true, false, func() {}); next == nil || !next.waiting {
		t.Fatal("the waiting place stayed taken after its stream entered the stall place")
	}
	check("after the honest stream's stall")
	if !honest.leaveStall() {
		t.Fatal("the honest stream lost its slot when its first frame was read")
	}
}

// The same over loopback, where it shows in every run: stalls of a /24
// in probation that ask a proof of work keep the prover solving between
// their valid hello and their ack, out of both places before the fix,
// and four such streams of one /24 held four slots (its cap here) for
// most of each proof. Now one of them keeps the waiting place while the
// prover pays, and the others are refused.
func TestPaidStallsHoldTwoPlaces(t *testing.T) {
	if testing.Short() {
		t.Skip("loopback run of proofs of work")
	}
	p := hostAt(t, "127.0.0.1")
	svc := newService(t, p, Config{Prover: constProver("x"), LimitLoopback: true,
		HelloTimeout: time.Second, IdleTimeout: time.Second, MaxInbound: 16, MaxInboundPerPrefix: 4})
	pfx, ok, _ := svc.connPrefix(ma.StringCast("/ip4/127.0.1.1/tcp/1"))
	if !ok {
		t.Fatal("no budget group for 127.0.1.1")
	}
	now := svc.now()
	for range SilentStrikes {
		svc.strikeSilent(pfx, now)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	actx, stop := context.WithCancel(ctx)
	defer stop()
	var acked atomic.Int64
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for host := 1; host <= 2; host++ {
		m := hostAt(t, fmt.Sprintf("127.0.1.%d", host))
		if err := m.Connect(ctx, peer.AddrInfo{ID: p.ID(), Addrs: p.Addrs()}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stallStreamsWith(actx, m, p.ID(), &acked, func(h *pb.Hello) { h.PowDifficulty = 18 })
			}()
		}
	}
	peak, samples, over := 0, 0, 0
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		svc.mu.Lock()
		n := svc.perPrefix[pfx]
		svc.mu.Unlock()
		peak = max(peak, n)
		samples++
		if n > 2 {
			over++
		}
	}
	t.Logf("a /24 in probation reopening stalls that ask 18 bits of proof of work: %d hellos acked, at most %d streams held, more than two in %d of %d samples",
		acked.Load(), peak, over, samples)
	if acked.Load() == 0 {
		t.Fatal("no stall was acked: the run measured nothing")
	}
	if over > 0 {
		t.Errorf("the /24 in probation held up to %d streams (more than two in %d of %d samples), want at most two (one waiting or being paid for, one stalled)", peak, over, samples)
	}
}
