package abuse

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	"github.com/libp2p/go-msgio/pbio"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// Bounds of the attackers' own loops and waits.
const (
	maxIterations = 1 << 20
	frameWait     = 5 * time.Second
	reconnectWait = 500 * time.Millisecond
	// attackerMaxPow is the most proof of work an attacker pays (the
	// default a node pays as a prover).
	attackerMaxPow = protocol.DefaultMaxPowDifficulty
)

// attackCounters are an attack's own counts.
type attackCounters struct {
	sessions atomic.Int64
	mu       sync.Mutex
	n        map[string]int64
	err      error
}

func (c *attackCounters) inc(k string) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int64{}
	}
	c.n[k]++
	c.mu.Unlock()
}

func (c *attackCounters) add(k string, v int64) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int64{}
	}
	c.n[k] += v
	c.mu.Unlock()
}

// probeHoldKey counts the longest hold after a probe, answerHoldKey
// after an answer (AttackStall).
const (
	probeHoldKey  = "longest hold after a probe, ms"
	answerHoldKey = "longest hold after an answer, ms"
)

// stallNarrative opens the narratives of stalled-hellos' challenges (the
// node's answerer counts their calls apart).
const stallNarrative = "stalled narrative "

func (c *attackCounters) get(k string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

// atLeast raises the count k to v.
func (c *attackCounters) atLeast(k string, v int64) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int64{}
	}
	c.n[k] = max(c.n[k], v)
	c.mu.Unlock()
}

func (c *attackCounters) setErr(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
}

// detail renders the counts as "k=v, ..." in key order.
func (c *attackCounters) detail() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c.n)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, c.n[k]))
	}
	if c.err != nil {
		parts = append(parts, "error: "+c.err.Error())
	}
	return strings.Join(parts, ", ")
}

// attack runs one attack with up to n identities until ctx ends. Each
// identity starts attacking as soon as its host is up; none is added once
// deployCtx ends (the report counts those that were).
func (b *bench) attack(ctx, deployCtx context.Context, name string, n int, c *attackCounters, deployed func()) error {
	defer deployed()
	var run func(context.Context, host.Host, *attackCounters)
	switch name {
	case AttackReciprocalFlood:
		run = b.reciprocalFlood
	case AttackGoroutineFlood:
		run = b.goroutineFlood
	case AttackIdleConns:
		run = b.idleConnection
	case AttackSlotPinning:
		run = b.slotPinning
	case AttackSetDrain:
		run = b.setDrain
	case AttackRelay:
		run = b.relay
	case AttackProverCost:
		run = b.hostileVerifier
	case AttackSilentContact:
		run = b.silentContact
	case AttackPresentation:
		run = b.presentationFlood
	case AttackStall:
		run = b.stall
	case AttackPayDrain:
		run = b.payDrain
	default:
		return fmt.Errorf("unknown attack %q", name)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for range n {
		if deployCtx.Err() != nil {
			break
		}
		if b.cfg.deployPause > 0 {
			time.Sleep(b.cfg.deployPause)
		}
		newHost := b.attackerHost
		if name == AttackPayDrain {
			newHost = func() (host.Host, error) { return b.attackerHostAbove(b.node.ID()) }
		}
		h, err := newHost()
		if err != nil {
			return err
		}
		b.addIDs(name, h.ID())
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(ctx, h, c)
		}()
	}
	deployed()
	return nil
}

// attackerHost is a minimal libp2p host with a fresh identity: TCP only,
// no listener (it dials the node), no resource limits of its own.
func (b *bench) attackerHost() (host.Host, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	h, err := libp2p.New(libp2p.Identity(key), libp2p.NoListenAddrs, libp2p.Transport(tcp.NewTCPTransport),
		libp2p.DisableRelay(), libp2p.DisableMetrics(), libp2p.ResourceManager(&network.NullResourceManager{}))
	if err != nil {
		return nil, fmt.Errorf("abuse bench: attacker host: %w", err)
	}
	b.onClose(func() { h.Close() })
	return h, nil
}

// connect (re)connects h to the node; it reports whether h is connected.
func (b *bench) connect(ctx context.Context, h host.Host) bool {
	if h.Network().Connectedness(b.node.ID()) == network.Connected {
		return true
	}
	cctx, cancel := context.WithTimeout(ctx, frameWait)
	defer cancel()
	// An attacker ignores the swarm's dial backoff.
	return h.Connect(network.WithForceDirectDial(cctx, "attack"), b.nodeInfo()) == nil
}

// rawStream speaks the attestation protocol frame by frame.
type rawStream struct {
	s network.Stream
	r pbio.Reader
	w pbio.Writer
	// me and ack: the attacker's ID and the node's hello ack, once read
	// (helloAcked), for the payment of probe 1 (spec §5b).
	me  lpeer.ID
	ack *pb.HelloAck
}

// probe1 sends probe 1, paying what the node's hello ack asked (spec
// §5b: a white-box attacker pays, or it is declined busy before anything
// is answered), and reads its ack. The hashes tried are counted.
func (r *rawStream) probe1(ctx context.Context, c *attackCounters) bool {
	var pay []byte
	if d := int(r.ack.GetPayDifficulty()); d > 0 {
		var err error
		if pay, err = protocol.SolvePay(ctx, r.ack.GetPayNonce(), r.me, d, attackerMaxPow); err != nil {
			return false
		}
		c.add(payHashesKey, int64(binary.BigEndian.Uint64(pay))+1)
		c.inc("sessions paid")
	}
	if r.send(&pb.Frame{Body: &pb.Frame_Probe{Probe: &pb.Probe{Seq: 1, Nonce: make([]byte, 8), Pay: pay}}}) != nil {
		return false
	}
	f, err := r.recv(frameWait)
	return err == nil && f.GetProbeAck() != nil
}

// payHashesKey counts the hashes attackers tried to pay the node's
// verifier payments (spec §5b; SolvePay's counter + 1 per payment).
const payHashesKey = "payment hashes"

func openRaw(ctx context.Context, h host.Host, to lpeer.ID) (*rawStream, error) {
	sctx, cancel := context.WithTimeout(ctx, frameWait)
	defer cancel()
	s, err := h.NewStream(sctx, to, protocol.ID)
	if err != nil {
		return nil, err
	}
	return wrapRaw(s), nil
}

func wrapRaw(s network.Stream) *rawStream {
	return &rawStream{s: s, r: pbio.NewDelimitedReader(s, protocol.MaxVerifierFrame+16), w: pbio.NewDelimitedWriter(s)}
}

func (r *rawStream) send(f *pb.Frame) error {
	_ = r.s.SetWriteDeadline(time.Now().Add(frameWait))
	return r.w.WriteMsg(f)
}

func (r *rawStream) recv(d time.Duration) (*pb.Frame, error) {
	_ = r.s.SetReadDeadline(time.Now().Add(d))
	var f pb.Frame
	if err := r.r.ReadMsg(&f); err != nil {
		return nil, err
	}
	return &f, nil
}

// helloFrame is a hello from verifier h to prover to.
// helloAcked connects h to the node, opens a raw stream and sends a hello
// (edit, if not nil, changes it), counting a session; it returns the
// stream once the node acked the hello, else nil with the failure
// counted (a refused hello under refused). The caller resets the stream.
func (b *bench) helloAcked(ctx context.Context, h host.Host, c *attackCounters, edit func(*pb.Hello), refused string) *rawStream {
	if !b.connect(ctx, h) {
		c.inc("connect failures")
		return nil
	}
	r, err := openRaw(ctx, h, b.node.ID())
	if err != nil {
		c.inc("streams refused")
		return nil
	}
	c.sessions.Add(1)
	if r.send(helloFrame(h.ID(), b.node.ID(), edit)) != nil {
		r.s.Reset()
		return nil
	}
	f, err := r.recv(frameWait)
	if err != nil || f.GetHelloAck() == nil {
		c.inc(refused)
		r.s.Reset()
		return nil
	}
	r.me, r.ack = h.ID(), f.GetHelloAck()
	return r
}

func helloFrame(h, to lpeer.ID, edit func(*pb.Hello)) *pb.Frame {
	nonce := make([]byte, protocol.NonceBytes)
	_, _ = rand.Read(nonce)
	hello := &pb.Hello{SpecVersion: protocol.SpecVersion, VerifierId: []byte(h), ProverId: []byte(to),
		Nonce: nonce, Rounds: 3, TotalMs: 120_000, RttCreditMs: 500}
	if edit != nil {
		edit(hello)
	}
	return &pb.Frame{Body: &pb.Frame_Hello{Hello: hello}}
}

// askReciprocal sends a hello that asks the node to verify h back, waits
// for the node's first frame and resets: the loop of findings 1 and 2.
func (b *bench) askReciprocal(ctx context.Context, h host.Host) (*pb.Frame, error) {
	r, err := openRaw(ctx, h, b.node.ID())
	if err != nil {
		return nil, err
	}
	defer r.s.Reset()
	if err := r.send(helloFrame(h.ID(), b.node.ID(), func(x *pb.Hello) { x.Reciprocal = true })); err != nil {
		return nil, err
	}
	return r.recv(frameWait)
}

// replyKind names the node's reply to a reciprocal hello for an
// attack's detail: an ack with what it says of the session back, or a
// decline with its reason.
func replyKind(f *pb.Frame) string {
	switch body := f.GetBody().(type) {
	case *pb.Frame_HelloAck:
		rec := strings.ToLower(strings.TrimPrefix(body.HelloAck.GetReciprocal().String(), "RECIPROCAL_"))
		return "acked: reciprocal " + strings.ReplaceAll(rec, "_", " ")
	case *pb.Frame_Decline:
		reason := strings.ToLower(strings.TrimPrefix(body.Decline.GetReason().String(), "DECLINE_REASON_"))
		return "declined: " + strings.ReplaceAll(reason, "_", " ")
	default:
		return fmt.Sprintf("answered: %T", body)
	}
}

// loop runs f every Pace until ctx ends (bounded).
func (b *bench) loop(ctx context.Context, every time.Duration, f func()) {
	for i := 0; i < maxIterations && ctx.Err() == nil; i++ {
		f()
		if !sleepCtx(ctx, every) {
			return
		}
	}
}

// Finding 1: one identity loops reciprocal hellos; as a prover it pays
// and answers every challenge wrong.
func (b *bench) reciprocalFlood(ctx context.Context, h host.Host, c *attackCounters) {
	wrong := skill.ProverFunc(func() skill.Answerer {
		return skill.AnswerFunc(func(context.Context, skill.Challenge) (string, error) { return "no idea", nil })
	})
	svc, err := protocol.NewService(h, protocol.Config{Prover: wrong, Logger: quiet})
	if err != nil {
		c.setErr(err)
		return
	}
	defer svc.Close()
	b.loop(ctx, b.cfg.Pace, func() {
		if !b.connect(ctx, h) {
			c.inc("connect failures")
			return
		}
		c.sessions.Add(1)
		f, err := b.askReciprocal(ctx, h)
		if err != nil {
			c.inc("hellos unanswered")
			return
		}
		// What the node made of each hello: the detail said nothing
		// when every hello was answered.
		c.inc(replyKind(f))
	})
}

// silentHandler makes h speak the protocol without ever answering.
func silentHandler(h host.Host, c *attackCounters, key string) {
	h.SetStreamHandler(protocol.ID, func(s network.Stream) {
		c.inc(key)
		_ = s.SetDeadline(time.Now().Add(time.Minute))
		_, _ = io.Copy(io.Discard, io.LimitReader(s, 1<<20))
		_ = s.Reset()
	})
}

// Finding 2: the same loop with a prover that never answers.
func (b *bench) goroutineFlood(ctx context.Context, h host.Host, c *attackCounters) {
	silentHandler(h, c, "node sessions left unanswered")
	b.loop(ctx, b.cfg.Pace, func() {
		if !b.connect(ctx, h) {
			c.inc("connect failures")
			return
		}
		c.sessions.Add(1)
		if _, err := b.askReciprocal(ctx, h); err != nil {
			c.inc("hellos unanswered")
		}
	})
}

// Finding 3: an identity that connects and idles; it reconnects when
// trimmed.
func (b *bench) idleConnection(ctx context.Context, h host.Host, c *attackCounters) {
	b.loop(ctx, reconnectWait, func() {
		if h.Network().Connectedness(b.node.ID()) == network.Connected {
			return
		}
		c.sessions.Add(1)
		if !b.connect(ctx, h) {
			c.inc("connections refused")
		}
	})
	if h.Network().Connectedness(b.node.ID()) == network.Connected {
		c.inc("connected at the end")
	}
}

// Finding 4: two streams per identity send hellos with total_ms = 1 h and
// hold the stream.
func (b *bench) slotPinning(ctx context.Context, h host.Host, c *attackCounters) {
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.loop(ctx, b.cfg.Pace, func() {
				r := b.helloAcked(ctx, h, c, func(x *pb.Hello) { x.TotalMs = 3_600_000 }, "hellos refused")
				if r == nil {
					return
				}
				defer r.s.Reset()
				c.inc("hellos with 1 h accepted")
				// Hold the slot: say nothing until the node gives up.
				_, _ = r.recv(time.Hour)
			})
		}()
	}
	wg.Wait()
}

// Finding 10 (protocol.md 1.11.0): three streams per identity send valid
// hellos that ask no proof of work and then say nothing (a stall), one of
// them after sending one probe, one after sending round 1 and reading its
// answer. A stall held an inbound
// slot for the idle timeout (45 s) and was never silent; one probe then
// silence did too, and so did an answer then silence, after every
// answerer call. Now a stall is silent for its group (on loopback,
// which has none, only the per-peer and global slots bound it), round 1
// is due within the handshake timeout of the first probe, and the next
// frame within the handshake timeout of an answer (protocol.md 1.12.0).
func (b *bench) stall(ctx context.Context, h host.Host, c *attackCounters) {
	var wg sync.WaitGroup
	for i := range 3 {
		probe, answer := i == 1, i == 2
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.loop(ctx, b.cfg.Pace, func() {
				r := b.helloAcked(ctx, h, c, nil, "hellos refused")
				if r == nil {
					return
				}
				defer r.s.Reset()
				key := "stalls after the ack"
				if probe || answer {
					if !r.probe1(ctx, c) {
						return
					}
				}
				if probe {
					key = "stalls after a probe"
				}
				if answer {
					key = "silences after an answer"
					ch := &pb.Challenge{Round: 1, Rounds: 3, Domain: "stalled", Narrative: stallNarrative + hostileNarrative(0), Question: "Which one?", BudgetMs: 20_000}
					if r.send(&pb.Frame{Body: &pb.Frame_Challenge{Challenge: ch}}) != nil {
						return
					}
					if f, err := r.recv(30 * time.Second); err != nil || f.GetAnswer() == nil {
						c.inc("rounds refused")
						return
					}
				}
				c.inc(key)
				// Hold the slot: say nothing until the node gives up.
				t0 := time.Now()
				// (the run's end cuts a longer hold short: recv's deadline
				// is the stream's, the reset below ends it)
				stop := context.AfterFunc(ctx, func() { _ = r.s.Reset() })
				defer stop()
				if _, err := r.recv(time.Hour); err != nil {
					switch {
					case probe:
						c.atLeast(probeHoldKey, time.Since(t0).Milliseconds())
					case answer:
						c.atLeast(answerHoldKey, time.Since(t0).Milliseconds())
					}
				}
			})
		}()
	}
	wg.Wait()
}

// payingHandler answers the node's hello with a valid proof of work and
// its probes; onChallenge gets the stream at the first challenge.
func payingHandler(ctx context.Context, h host.Host, c *attackCounters, onChallenge func(*rawStream, *pb.Challenge)) {
	h.SetStreamHandler(protocol.ID, func(s network.Stream) {
		r := wrapRaw(s)
		defer r.s.Reset()
		c.inc("node sessions")
		f, err := r.recv(frameWait)
		hello := f.GetHello()
		if err != nil || hello == nil {
			return
		}
		pctx, cancel := context.WithTimeout(ctx, frameWait)
		pow, err := protocol.SolvePow(pctx, hello.GetNonce(), h.ID(), int(hello.GetPowDifficulty()), attackerMaxPow)
		cancel()
		if err != nil {
			c.inc("proofs of work not paid")
			return
		}
		if r.send(&pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: hello.GetNonce(), Pow: pow}}}) != nil {
			return
		}
		for range protocol.MaxProbes + 1 {
			f, err := r.recv(frameWait)
			if err != nil {
				return
			}
			switch {
			case f.GetProbe() != nil:
				p := f.GetProbe()
				if r.send(&pb.Frame{Body: &pb.Frame_ProbeAck{ProbeAck: &pb.ProbeAck{Seq: p.GetSeq(), Nonce: p.GetNonce()}}}) != nil {
					return
				}
			case f.GetChallenge() != nil:
				onChallenge(r, f.GetChallenge())
				return
			default:
				return
			}
		}
	})
}

// Finding 5: identities that pay, peek at round 1 and reset, asking again
// and again to be verified (first contact, then reciprocal hellos).
func (b *bench) setDrain(ctx context.Context, h host.Host, c *attackCounters) {
	payingHandler(ctx, h, c, func(*rawStream, *pb.Challenge) { c.inc("challenges peeked") })
	b.loop(ctx, max(b.cfg.Pace, 100*time.Millisecond), func() {
		if !b.connect(ctx, h) {
			c.inc("connect failures")
			return
		}
		c.sessions.Add(1)
		_, _ = b.askReciprocal(ctx, h)
	})
}

// Finding 6: a relay hands the node's own challenge back to it with one
// leading space, and answers with whatever comes back.
func (b *bench) relay(ctx context.Context, h host.Host, c *attackCounters) {
	payingHandler(ctx, h, c, func(in *rawStream, ch *pb.Challenge) {
		c.inc("challenges relayed")
		answer := "unknown"
		out, err := openRaw(ctx, h, b.node.ID())
		if err == nil {
			defer out.s.Reset()
			if out.send(helloFrame(h.ID(), b.node.ID(), nil)) == nil {
				if f, err := out.recv(frameWait); err == nil && f.GetHelloAck() != nil {
					// The relay pays the node's payment (spec §5b), if
					// asked, so that its challenge is read at all.
					out.me, out.ack = h.ID(), f.GetHelloAck()
					if !out.probe1(ctx, c) {
						c.inc("relay probes refused")
						return
					}
					relayed := &pb.Challenge{Round: 1, Rounds: ch.GetRounds(), Domain: ch.GetDomain(),
						Narrative: " " + ch.GetNarrative(), Question: ch.GetQuestion(), BudgetMs: ch.GetBudgetMs()}
					if out.send(&pb.Frame{Body: &pb.Frame_Challenge{Challenge: relayed}}) == nil {
						f, err := out.recv(frameWait)
						switch {
						case err != nil:
							c.inc("relay stream reset")
						case f.GetDecline().GetReason() == pb.DeclineReason_DECLINE_REASON_REFLECTION:
							c.inc("caught as reflection")
						case f.GetAnswer() != nil:
							c.inc("node answered its own challenge")
							answer = f.GetAnswer().GetAnswer()
						default:
							c.inc("other replies")
						}
					}
				} else {
					c.inc("relay hellos refused")
				}
			}
		}
		if in.send(&pb.Frame{Body: &pb.Frame_Answer{Answer: &pb.Answer{Round: ch.GetRound(), Answer: answer}}}) != nil {
			return
		}
		for range 4 {
			f, err := in.recv(frameWait)
			if err != nil {
				return
			}
			if v := f.GetVerdict(); v != nil {
				if v.GetAccepted() {
					c.inc("relay accepted")
				}
				return
			}
			if f.GetChallenge() != nil {
				// Later rounds: the relay has nothing to answer with.
				if in.send(&pb.Frame{Body: &pb.Frame_Answer{Answer: &pb.Answer{Round: f.GetChallenge().GetRound(), Answer: "unknown"}}}) != nil {
					return
				}
			}
		}
	})
	b.loop(ctx, max(b.cfg.Pace, 500*time.Millisecond), func() {
		if !b.connect(ctx, h) {
			c.inc("connect failures")
			return
		}
		c.sessions.Add(1)
		_, _ = b.askReciprocal(ctx, h)
	})
}

// hostileNarrative is a made-up narrative of about 300 words.
func hostileNarrative(i int) string {
	return strings.Repeat(fmt.Sprintf("hostile narrative %d asks the prover to read this again. ", i), 30)
}

// Finding 7: hostile verifiers run three-round sessions with made-up
// challenges to make the node call its answerer.
func (b *bench) hostileVerifier(ctx context.Context, h host.Host, c *attackCounters) {
	i, sessions := 0, 0
	b.loop(ctx, b.cfg.Pace, func() {
		r := b.helloAcked(ctx, h, c, nil, "sessions refused")
		if r == nil {
			return
		}
		defer r.s.Reset()
		// Every other session pays the node's payment (spec §5b) and
		// probes first; the others send round 1 at once, unpaid, and
		// must get no answer.
		paying := sessions%2 == 0
		sessions++
		if paying && !r.probe1(ctx, c) {
			c.inc("sessions refused at the probe")
			return
		}
		for round := uint32(1); round <= 3; round++ {
			i++
			ch := &pb.Challenge{Round: round, Rounds: 3, Domain: "hostile", Narrative: hostileNarrative(i), Question: "Which one?", BudgetMs: 20_000}
			if r.send(&pb.Frame{Body: &pb.Frame_Challenge{Challenge: ch}}) != nil {
				return
			}
			f, err := r.recv(30 * time.Second)
			if err != nil || f.GetAnswer() == nil {
				c.inc("rounds refused")
				return
			}
			c.inc("rounds answered")
			if !paying && r.ack.GetPayDifficulty() > 0 {
				c.inc(unpaidAnsweredKey)
			}
		}
	})
}

// unpaidAnsweredKey counts rounds the node answered in sessions whose
// payment (spec §5b) it asked and did not get: the bound is none.
const unpaidAnsweredKey = "rounds answered unpaid"

// Finding 8: identities that connect, speak the protocol and never answer
// the node's hello.
func (b *bench) silentContact(ctx context.Context, h host.Host, c *attackCounters) {
	silentHandler(h, c, "node hellos left unanswered")
	b.loop(ctx, reconnectWait, func() {
		if h.Network().Connectedness(b.node.ID()) == network.Connected {
			return
		}
		c.sessions.Add(1)
		if !b.connect(ctx, h) {
			c.inc("connections refused")
		}
	})
}

// Finding 9: sybil presentations, each of MaxPresented valid acceptances
// of the presenter by throw-away issuers. A batch the node refused is sent
// again (it was not consumed); fresh records are sealed only after the
// node took a batch, so the attacker's own signing does not eat the CPU
// the node runs on.
func (b *bench) presentationFlood(ctx context.Context, h host.Host, c *attackCounters) {
	var data []byte
	b.loop(ctx, b.cfg.Pace, func() {
		if !b.connect(ctx, h) {
			c.inc("connect failures")
			return
		}
		if data == nil {
			for range peer.MaxPresented {
				env, err := sybilRecord(h.ID())
				if err != nil {
					c.setErr(err)
					return
				}
				data = binary.AppendUvarint(data, uint64(len(env)))
				data = append(data, env...)
			}
		}
		c.sessions.Add(1)
		learned, err := b.present(ctx, h, data)
		if err != nil {
			c.inc("presentations refused")
			return
		}
		data = nil
		c.add("records learned", int64(learned))
	})
}

// present sends one presentation and reads the acknowledgement.
func (b *bench) present(ctx context.Context, h host.Host, data []byte) (uint64, error) {
	sctx, cancel := context.WithTimeout(ctx, frameWait)
	defer cancel()
	s, err := h.NewStream(sctx, b.node.ID(), peer.PresentProtocol)
	if err != nil {
		return 0, err
	}
	defer s.Reset()
	_ = s.SetDeadline(time.Now().Add(peer.PresentTimeout))
	if _, err := s.Write(data); err != nil {
		return 0, err
	}
	_ = s.CloseWrite()
	ack, err := io.ReadAll(io.LimitReader(s, binary.MaxVarintLen64))
	if err != nil {
		return 0, err
	}
	v, err := binary.ReadUvarint(bytes.NewReader(ack))
	if err != nil {
		return 0, errors.New("no acknowledgement")
	}
	return v, nil
}

// sybilRecord seals an acceptance of subject by a fresh throw-away
// issuer.
func sybilRecord(subject lpeer.ID) ([]byte, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	issuer, err := lpeer.IDFromPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("sybil issuer: %w", err)
	}
	nonce, digest := make([]byte, protocol.NonceBytes), make([]byte, protocol.DigestBytes)
	_, _ = rand.Read(nonce)
	_, _ = rand.Read(digest)
	now := time.Now().UTC().Truncate(time.Second)
	a := &protocol.Attestation{
		Issuer: issuer, Subject: subject, Accepted: true, Reason: skill.ReasonOK,
		Nonce: nonce, TranscriptDigest: digest,
		Policy:          protocol.PolicySummary{Rounds: 3, Tau: 15 * time.Second, Total: 2 * time.Minute, RTTCredit: 500 * time.Millisecond},
		ChallengeDomain: "sybil", SetID: "sybil", IssuedAt: now, ExpiresAt: now.Add(time.Hour),
		SpecVersion: protocol.SpecVersion, Provenance: skill.Provenance{Source: skill.SourceHybrid},
	}
	for i := 1; i <= 3; i++ {
		a.Rounds = append(a.Rounds, protocol.RoundTiming{Round: i, Budget: 15 * time.Second, Effective: time.Second, NarrativeTokens: 500, Correct: true})
	}
	env, err := protocol.Seal(a, key)
	if err != nil {
		return nil, fmt.Errorf("seal sybil record: %w", err)
	}
	return env, nil
}
