package peer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
)

// presentHostAt is a TCP host listening on ip (any 127.x.y.z is loopback
// on Linux; its outbound connections leave from it, so tests can place
// presenters in distinct /24s).
func presentHostAt(t *testing.T, ip string) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/"+ip+"/tcp/0"), libp2p.Transport(tcp.NewTCPTransport),
		libp2p.DisableRelay(), libp2p.DisableMetrics())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// streamCode is the error code a stream ended with, 0 for none.
func streamCode(err error) network.StreamErrorCode {
	var se *network.StreamError
	if errors.As(err, &se) {
		return se.ErrorCode
	}
	return 0
}

// stallSpan is one silent presentation the node took (it ended it with
// the timeout code): when it opened and when the node ended it.
type stallSpan struct {
	net        int
	start, end time.Time
}

// stallPresent opens presentations from m to v in a loop (bounded in
// count), each sending nothing until the node ends it, and records the
// ones the node held until a timeout.
func stallPresent(ctx context.Context, m host.Host, v peer.ID, net int, mu *sync.Mutex, spans *[]stallSpan, busy *int) {
	for i := 0; i < 40 && ctx.Err() == nil; i++ {
		s, err := m.NewStream(ctx, v, PresentProtocol)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
		_ = s.SetReadDeadline(time.Now().Add(20 * time.Second))
		t0 := time.Now()
		// The read negotiates the lazy stream's protocol, then waits.
		_, err = io.Copy(io.Discard, s)
		end := time.Now()
		stop()
		_ = s.Reset()
		mu.Lock()
		switch streamCode(err) {
		case protocol.ErrCodeTimeout:
			*spans = append(*spans, stallSpan{net, t0, end})
		case protocol.ErrCodeBusy:
			*busy++
		}
		mu.Unlock()
		if streamCode(err) != protocol.ErrCodeTimeout {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// A silent presenter held a presentation slot for the whole
// PresentTimeout (10 s), and the node's 16 slots had no share per
// network: 16 peer IDs from two /24s (each /24's rate bucket starts at
// 8) took every slot at once, and an honest presenter of another network,
// one with a record by an issuer the node admits directly, got BUSY
// until the stalls timed out. Now the first record is due within
// presentFirstFrameTimeout, a stalled presentation costs its presenter
// and its networks presentStallCost more tokens, and one /24 holds at
// most presentPerPrefix slots.
func TestStalledPresentationsLeaveSlots(t *testing.T) {
	if testing.Short() {
		t.Skip("loopback run of several seconds")
	}
	vk, _ := testutil.NewKey(t)
	v := newBareNode(t, Config{Key: vk, RequireSource: AnySource, LimitLoopback: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ik, issuer := testutil.NewKey(t)
	if err := IssueEnvelope(v, SealTest(vk, issuer, true, time.Now(), time.Hour)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	target := peer.AddrInfo{ID: v.ID(), Addrs: v.host.Addrs()}

	// 16 attackers: four /24s of four hosts each.
	const nets, perNet = 4, 4
	var attackers []host.Host
	for net := 1; net <= nets; net++ {
		for h := 1; h <= perNet; h++ {
			m := presentHostAt(t, fmt.Sprintf("127.0.%d.%d", net, h))
			if err := m.Connect(ctx, target); err != nil {
				t.Fatal(err)
			}
			attackers = append(attackers, m)
		}
	}
	honest := presentHostAt(t, "127.0.9.1")
	if err := honest.Connect(ctx, target); err != nil {
		t.Fatal(err)
	}
	env := SealTest(ik, honest.ID(), true, time.Now(), time.Hour)

	actx, stop := context.WithCancel(ctx)
	var mu sync.Mutex
	var spans []stallSpan
	busy := 0
	var wg sync.WaitGroup
	start := time.Now()
	for i, m := range attackers {
		wg.Add(1)
		go func() { defer wg.Done(); stallPresent(actx, m, v.ID(), i/perNet+1, &mu, &spans, &busy) }()
	}
	// The first wave: every attacker's first stream is in a slot or was
	// refused.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		held := inFlight(v.trust.presentIn)
		mu.Lock()
		b := busy
		mu.Unlock()
		if held+b >= len(attackers) {
			break
		}
	}
	firstWave := inFlight(v.trust.presentIn)

	const tries = 6
	served := 0
	var last error
	for i := range tries {
		time.Sleep(time.Until(start.Add(500*time.Millisecond + time.Duration(i)*1300*time.Millisecond)))
		s, err := honest.NewStream(ctx, v.ID(), PresentProtocol)
		if err != nil {
			last = err
			continue
		}
		_ = s.SetDeadline(time.Now().Add(5 * time.Second))
		got, err := presentOn(s, env)
		if err == nil && got <= 1 {
			served++
		} else {
			last = err
		}
	}
	stop()
	wg.Wait()

	held, peakNet := time.Duration(0), 0
	for _, a := range spans {
		held = max(held, a.end.Sub(a.start))
		if a.end.Sub(start) > 9*time.Second {
			continue // ended by the test's own reset, not the node
		}
		over := 0
		for _, b := range spans {
			if b.net == a.net && !b.start.After(a.start) && b.end.After(a.start) {
				over++
			}
		}
		peakNet = max(peakNet, over)
	}
	t.Logf("16 silent presenters from four /24s: %d slots taken in the first wave, %d stalls held (longest %v, at most %d at once from one /24), %d refused BUSY; honest presenter of another /24: %d of %d served (last error: %v)",
		firstWave, len(spans), held.Round(10*time.Millisecond), peakNet, busy, served, tries, last)
	if served != tries {
		t.Errorf("an honest presenter of another network was served %d of %d times while silent presenters of four /24s stalled (last error: %v)", served, tries, last)
	}
	if held > presentFirstFrameTimeout+2*time.Second {
		t.Errorf("a silent presentation held its slot for %v, want about presentFirstFrameTimeout (%v)", held, presentFirstFrameTimeout)
	}
	if peakNet > presentPerPrefix {
		t.Errorf("one /24 held %d presentation slots at once, want at most %d", peakNet, presentPerPrefix)
	}
	// Each /24 stalled its two slots once: the stalls' cost leaves its
	// bucket in debt for longer than the run.
	if len(spans) > nets*presentPerPrefix {
		t.Errorf("%d stalls held slots in %v, want at most %d (the first wave): a stall should cost its network more than a presentation", len(spans), time.Since(start).Round(time.Second), nets*presentPerPrefix)
	}
}

// A presenter that trickles its first record (one byte of its length and
// then nothing) is ended at the first-frame deadline, not PresentTimeout,
// and the stall is charged to its buckets: its /24 cannot start another
// at once.
func TestTrickledPresentationEndsAtFirstFrameDeadline(t *testing.T) {
	v := newBareNode(t, Config{LimitLoopback: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m := presentHostAt(t, "127.0.5.1")
	if err := m.Connect(ctx, peer.AddrInfo{ID: v.ID(), Addrs: v.host.Addrs()}); err != nil {
		t.Fatal(err)
	}
	s, err := m.NewStream(ctx, v.ID(), PresentProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	_ = s.SetDeadline(time.Now().Add(PresentTimeout + 5*time.Second))
	t0 := time.Now()
	if _, err := s.Write([]byte{0x80}); err != nil { // a varint that goes on
		t.Fatal(err)
	}
	_, err = io.Copy(io.Discard, s)
	d := time.Since(t0)
	if code := streamCode(err); code != protocol.ErrCodeTimeout {
		t.Fatalf("trickled presentation ended with %v, want the timeout code", err)
	}
	if d > presentFirstFrameTimeout+2*time.Second {
		t.Fatalf("a trickled first record held the slot %v, want about %v", d, presentFirstFrameTimeout)
	}
	nets := netsOfAddr(netip.MustParseAddr("127.0.5.1"), true)
	v.presentLimit.mu.Lock()
	left := v.presentLimit.prefixes[nets.prefix].tokens
	v.presentLimit.mu.Unlock()
	// The bucket refills one token per PresentPrefixEvery (4 s) meanwhile.
	if left > PresentPrefixBurst-1-presentStallCost+1.5 {
		t.Fatalf("after a stall its /24 has %.2f tokens, want at most %d and the refill of %v (one paid, %d charged)", left, PresentPrefixBurst-1-presentStallCost, d, presentStallCost)
	}
}

// The slots: one per presenter, presentPerPrefix per /24 (or /48, or
// relay), presentPerBlock per IPv6 /32, maxPresentConcurrent in all.
func TestPresentSlotsPerNetwork(t *testing.T) {
	ps := newPresentSlots()
	id := func() peer.ID { _, p := testutil.NewKey(t); return p }
	v4 := netsFor(t, "203.0.113.9")
	a := id()
	if !ps.acquire(a, v4) || ps.acquire(a, netsFor(t, "198.51.100.1")) {
		t.Fatal("one presentation per presenter")
	}
	for range presentPerPrefix - 1 {
		if !ps.acquire(id(), v4) {
			t.Fatal("refused below the /24's share")
		}
	}
	if ps.acquire(id(), netsFor(t, "203.0.113.200")) {
		t.Fatalf("a /24 took more than %d slots", presentPerPrefix)
	}
	ps.release(a, v4)
	if !ps.acquire(id(), v4) {
		t.Fatal("a released slot was not free again")
	}
	for i := range presentPerBlock {
		if !ps.acquire(id(), netsFor(t, fmt.Sprintf("2001:db8:%x::1", i))) {
			t.Fatalf("refused /48 %d of a /32 below its share", i)
		}
	}
	if ps.acquire(id(), netsFor(t, "2001:db8:ff::1")) {
		t.Fatalf("an IPv6 /32 took more than %d slots", presentPerBlock)
	}
	for i := 0; inFlight(ps) < maxPresentConcurrent; i++ {
		if !ps.acquire(id(), netsFor(t, fmt.Sprintf("10.0.%d.1", i))) {
			t.Fatalf("refused at %d slots of %d", inFlight(ps), maxPresentConcurrent)
		}
	}
	if ps.acquire(id(), netsFor(t, "10.1.0.1")) || ps.acquire(id(), addrNets{}) {
		t.Fatalf("took more than %d slots", maxPresentConcurrent)
	}
}

// presentOn writes envs on s as a presentation and reads the count
// learned.
func presentOn(s network.Stream, envs ...[]byte) (uint64, error) {
	defer s.Close()
	var data []byte
	for _, e := range envs {
		data = append(binary.AppendUvarint(data, uint64(len(e))), e...)
	}
	if _, err := s.Write(data); err != nil {
		return 0, err
	}
	_ = s.CloseWrite()
	ack, err := io.ReadAll(s)
	if err != nil {
		return 0, err
	}
	got, k := binary.Uvarint(ack)
	if k <= 0 {
		return 0, errors.New("no acknowledgement")
	}
	return got, nil
}

// inFlight is the count of streams c holds.
func inFlight(c *streamCounts) int {
	n, _, _ := c.held()
	return n
}
