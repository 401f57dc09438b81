package protocol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol/attestation"
	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// handleStream is the stream handler of ID: this node is the prover.
func (s *Service) handleStream(str network.Stream) {
	remote := str.Conn().RemotePeer()
	if !s.enter() {
		str.Reset()
		return
	}
	defer s.wg.Done()
	if attestation.SmallOrderPeerID(remote) {
		// A verifier whose key anyone can sign for: no verdict it signs
		// is valid (spec/attestation.md §2), so nothing is answered.
		_ = str.ResetWithError(ErrCodeProtocolViolation)
		return
	}
	log := s.log.With("peer", remote, "role", "prover")
	res := ProverResult{Verifier: remote}
	started := s.now()
	// The session counts for Proving until its result is reported, not
	// only while it holds its inbound slot (released first): a node
	// waiting for this verifier's verdict (Attest) must not give up
	// between the two.
	s.reportingAdd(remote, 1)
	defer s.reportingAdd(remote, -1)
	defer func() {
		if r := recover(); r != nil {
			log.Error("prover handler panicked", "panic", r, "stack", string(debug.Stack()))
			str.Reset()
			res.Err = fmt.Errorf("acaptcha: prover handler panicked: %v", r)
		}
		res.Duration = s.now().Sub(started)
		if log.Enabled(context.Background(), slog.LevelDebug) {
			log.Debug("prover session ended", "accepted", res.Accepted, "reason", res.Reason, "rounds", res.Rounds, "err", res.Err)
		}
		if s.cfg.OnProved != nil {
			s.cfg.OnProved(res)
		}
	}()

	if err := str.Scope().SetService(ServiceName); err != nil {
		str.ResetWithError(network.StreamResourceLimitExceeded)
		res.Err = fmt.Errorf("%w: attach stream to %s: %w", ErrNetwork, ServiceName, err)
		return
	}
	if err := str.Scope().ReserveMemory(streamMemory, network.ReservationPriorityAlways); err != nil {
		str.ResetWithError(network.StreamResourceLimitExceeded)
		res.Err = fmt.Errorf("%w: reserve stream memory: %w", ErrNetwork, err)
		return
	}
	defer str.Scope().ReleaseMemory(streamMemory)

	// The verifier's prefix, read once off this stream's connection, is
	// what the inbound slots and the prover's budgets charge.
	pfx, hasPfx, _ := s.connPrefix(str.Conn().RemoteMultiaddr())
	hold := s.acquireInbound(remote, pfx, hasPfx, s.budgets.trusted(remote), func() { _ = str.ResetWithError(ErrCodeBusy) })
	if hold == nil {
		declineAndReset(str, declineFrame(pb.DeclineReason_DECLINE_REASON_BUSY, "inbound session limit reached"), ErrCodeBusy,
			min(s.cfg.HandshakeTimeout, declineLinger/2))
		res.Err = ErrBusy
		return
	}
	defer hold.release()
	stop := context.AfterFunc(s.ctx, func() { str.Reset() })
	defer stop()

	p := &proverRun{svc: s, str: str, remote: remote, pfx: pfx, hasPfx: hasPfx, res: &res, log: log, hold: hold, release: hold.release,
		inbound: s.cameToUs(remote)}
	growStack()
	p.serve()
}

// sessionStack is about the stack a prover session reaches: its deepest
// point is the check of the verdict's signature (SHA-512 and the
// Edwards-curve tables of ed25519 under a dozen frames of the session).
const sessionStack = 16 << 10

// growStack grows the calling goroutine's stack at once so that about
// sessionStack of it is free (the runtime rounds up to a power of two).
// The runtime starts a stream handler's goroutine small and doubles its
// stack when a call needs more, copying every frame on it and fixing up
// their pointers: done from the verdict check, a dozen frames deep, that
// was about 3 % of a mutual attestation's CPU (BenchmarkMutualAttestConcurrent's
// profile, runtime.newstack). Done here, two frames deep, the copy is
// small. The runtime shrinks the stack again if it stays unused.
//
//go:noinline
func growStack() {
	var pad [sessionStack - 2<<10]byte
	touchStack(&pad)
}

//go:noinline
func touchStack(b *[sessionStack - 2<<10]byte) { b[0] = 1 }

func declineFrame(r pb.DeclineReason, detail string) *pb.Frame {
	return &pb.Frame{Body: &pb.Frame_Decline{Decline: &pb.Decline{Reason: r, Detail: truncate(detail, MaxDeclineDetail)}}}
}

// ErrUnsupportedKind: this node's prover declined a challenge of a kind it
// does not answer (Decline UNSUPPORTED_KIND, spec/protocol.md §6 step 7).
var ErrUnsupportedKind = errors.New("acaptcha: challenge kind not answered here")

// proverRun is one prover session on one stream.
type proverRun struct {
	svc    *Service
	str    stream
	r      frameReader
	remote peer.ID
	pfx    netip.Prefix // the verifier's budget prefix (hasPfx false: none)
	hasPfx bool
	res    *ProverResult
	log    *slog.Logger
	hello  *pb.Hello
	// hold is the inbound slot, and release frees it (idempotent): a
	// declined session does not hold it while the Decline lingers.
	hold    *inboundHold
	release func()

	helloAt  time.Time // wall clock, for deadlines
	firstBy  time.Time // round 1 must have arrived by then
	deadline time.Time // hard end of the whole session
	// readBy is the read deadline the exchange loop set last, zero when
	// something else may have set one since (setReadDeadline).
	readBy time.Time
	// writeBy is the write deadline write set last (armWriteDeadline).
	writeBy time.Time
	// calls is how many answerer calls this session reserved in the
	// budgets and made.
	reserved, calls int
	// tokens is the prompt tokens the session reserved at the hello
	// (spec §9a); its rounds draw on it first.
	tokens tokenHold
	// kind is the canonical kind of round 1's challenge; every later
	// round must carry the same.
	kind string
	// feed delivers the frames of the exchange (nil before it).
	feed *frameFeed

	// The answerer runs on the session's goroutine (no hand-off to and
	// from a goroutine of its own on every round); the feed's reader
	// goroutine interrupts it when a frame arrives meanwhile. read counts
	// the frames (and the final error) taken off the stream, taken those
	// the session loop received, and thinking holds the cancel function of
	// the answer in progress.
	read     atomic.Int64
	taken    int64
	thinking atomic.Pointer[context.CancelFunc]

	// declined: this node declined the session (a Decline of its own, not
	// the verifier's doing); started: the verifier's round 1 challenge or
	// its verdict was read. A stream with a valid hello that ends with
	// neither is a stall, silent for its group (spec §6 step 1).
	declined, started bool
	// afterAck: the verifier's first frame after the hello ack was read.
	afterAck bool
	// inbound: the verifier came to this node on its own initiative
	// (Service.cameToUs). payD and payNonce are the payment
	// the hello ack asked of it (spec §5b; 0 and nil: none).
	inbound  bool
	payD     int
	payNonce []byte
	// known: the node admits or has accepted the verifier
	// (Service.knownVerifier; asked only when it verifies first or asks
	// payment).
	known bool
	// mutualWait: a verify-first node answers this verifier, which came
	// to it, because each waits for the other (Config.MutualWait), against
	// a payment of at least MutualWaitPayDifficulty bits.
	mutualWait bool
}

// abort resets the stream with code and records err.
func (p *proverRun) abort(code network.StreamErrorCode, err error) {
	if code == 0 {
		p.str.Reset()
	} else {
		_ = p.str.ResetWithError(code)
	}
	if p.res.Err == nil {
		p.res.Err = err
	}
}

// refuse sends a Decline and resets the stream with code. Once a reader
// goroutine took the stream over (frameFeed), the frames that follow are
// drained through it: a stream never has two concurrent readers.
func (p *proverRun) refuse(reason pb.DeclineReason, code network.StreamErrorCode, err error) {
	p.declined = true
	// §6 step 2, "Decline linger": up to 1 s, 0.5 s when busy (§5b's
	// unpaid first frame, a spent budget, a proof of work refused).
	linger := min(p.svc.cfg.HandshakeTimeout, declineLinger)
	if reason == pb.DeclineReason_DECLINE_REASON_BUSY {
		linger = min(p.svc.cfg.HandshakeTimeout, declineLinger/2)
	}
	if p.release != nil {
		p.release()
	}
	// The detail is what the verifier prints after its own "prover
	// busy": the sentinel's words are not repeated (spec §6 step 3 names
	// the detail `answerer unavailable`).
	detail := strings.TrimPrefix(err.Error(), ErrBusy.Error()+": ")
	if p.feed == nil || !p.feed.viaReader {
		declineAndReset(p.str, declineFrame(reason, detail), code, linger)
	} else {
		p.writeBy = time.Time{}
		_ = p.str.SetWriteDeadline(time.Now().Add(linger))
		if werr := writeFrame(p.str, declineFrame(reason, detail), MaxProverFrame); werr == nil {
			_ = p.str.CloseWrite()
			_ = p.str.SetReadDeadline(time.Now().Add(linger))
			for fr := range p.feed.ch {
				if fr.err != nil {
					break
				}
			}
		}
		_ = p.str.ResetWithError(code)
	}
	if p.res.Err == nil {
		p.res.Err = err
	}
}

// declineLinger bounds how long a prover that declined waits for the
// verifier to read the Decline before it resets the stream.
const declineLinger = time.Second

// declineAndReset sends a Decline, half-closes, and resets the stream with
// code once the verifier has closed its side (or after linger): a reset
// sent right behind the Decline would discard it on most transports.
func declineAndReset(str stream, f *pb.Frame, code network.StreamErrorCode, linger time.Duration) {
	_ = str.SetWriteDeadline(time.Now().Add(linger))
	if err := writeFrame(str, f, MaxProverFrame); err == nil {
		_ = str.CloseWrite()
		_ = str.SetReadDeadline(time.Now().Add(linger))
		_, _ = io.Copy(io.Discard, io.LimitReader(str, MaxVerifierFrame+16))
	}
	_ = str.ResetWithError(code)
}

func (p *proverRun) write(f *pb.Frame) error {
	armWriteDeadline(p.str, &p.writeBy, p.svc.cfg.HandshakeTimeout)
	return writeFrame(p.str, f, MaxProverFrame)
}

// readFailed records a failed read and resets the stream.
func (p *proverRun) readFailed(what string, err error) {
	var fe *frameError
	switch {
	case errors.As(err, &fe) && fe.code != 0:
		p.abort(fe.code, fmt.Errorf("reading %s from %s: %w", what, p.remote, err))
	case isTimeout(err):
		p.abort(ErrCodeTimeout, fmt.Errorf("%w: no %s from %s within the deadline: %w", ErrNetwork, what, p.remote, err))
	default:
		p.abort(0, fmt.Errorf("%w: reading %s from %s: %w", ErrNetwork, what, p.remote, err))
	}
}

// strikeSilent counts a silent stream against the verifier's budget
// group (Service.strikeSilent); a stream with no group (loopback unless
// LimitLoopback) counts nowhere.
func (p *proverRun) strikeSilent() {
	if p.hasPfx {
		p.svc.strikeSilent(p.pfx, p.svc.now())
	}
}

func (p *proverRun) strikeOwnBudget() {
	if p.hasPfx {
		p.svc.strikeOwnBudget(p.remote, p.pfx, p.svc.now())
	}
}

func (p *proverRun) violation(format string, args ...any) {
	p.abort(ErrCodeProtocolViolation, fmt.Errorf("%w: %s", ErrProtocolViolation, fmt.Sprintf(format, args...)))
}

func (p *proverRun) serve() {
	defer sessionRunning()()
	s := p.svc
	// Released once the exchange (and with it the feed's reader
	// goroutine, feed.stop) is over.
	p.r.open(p.str, MaxVerifierFrame)
	defer p.r.release()
	var f pb.Frame
	// A verifier writes its hello as soon as the stream is open: a
	// stream that holds an inbound slot without one is a silent stream
	// (§6 step 1), and so is one that sends another frame or a bad hello.
	_ = p.str.SetReadDeadline(time.Now().Add(s.cfg.HelloTimeout))
	if err := readFrame(&p.r, &f); err != nil {
		p.strikeSilent()
		p.readFailed("hello", err)
		return
	}
	// The ack is due within the handshake timeout of reading the hello,
	// proof of work and reciprocal decision included (spec §5a): the
	// verifier's wait for it starts earlier, when it wrote the hello.
	ackBy := time.Now().Add(s.cfg.HandshakeTimeout)
	hello := f.GetHello()
	if hello == nil {
		p.strikeSilent()
		p.violation("expected hello, got %s", frameKind(&f))
		return
	}
	p.hello = hello
	if reason, err := p.checkHello(hello); err != nil {
		code := ErrCodeDeclined
		if reason == pb.DeclineReason_DECLINE_REASON_BAD_HELLO {
			code = ErrCodeProtocolViolation
		}
		// A hello declined for what it says, an unsupported version
		// included, is silent (spec §6 step 1): its stream ran no session
		// and held a slot for the decline linger, as often as its sender
		// reopens one.
		p.strikeSilent()
		p.refuse(reason, code, err)
		return
	}
	// A stall: a valid hello that this node does not decline, and then
	// no round 1 challenge nor verdict, whatever ends the stream (the
	// first-frame deadline, the verifier's close or reset, its
	// displacement, a bad frame). It held a slot as long as IdleTimeout
	// and cost its sender one session of its budget: it is silent for its
	// group (spec §6 step 1).
	defer func() {
		if !p.started && !p.declined {
			p.strikeSilent()
		}
	}()
	// Past a valid hello no newer stream of its group takes the stream's
	// place: it keeps its group's waiting place, if it has it, until the
	// session is paid (enterStall below); a stream of a group in
	// probation whose place a newer one took meanwhile was reset.
	if p.hold != nil && !p.hold.helloValid() {
		p.res.Err = fmt.Errorf("%w: a newer stream of this verifier's network in probation took this one's place", ErrBusy)
		return
	}
	if s.cfg.Prover == nil {
		p.declined = true
		_ = p.write(declineFrame(pb.DeclineReason_DECLINE_REASON_NO_PROVER, "this node does not answer challenges"))
		_ = p.str.Close()
		p.res.Err = ErrNoProver
		return
	}
	// An answerer known to be unreachable (skill.GuardedProver) could
	// only fail the session, which the verifier would sign as a
	// rejection: decline BUSY, nothing signed (spec §6 step 3).
	if h, ok := s.cfg.Prover.(interface{ Unavailable() error }); ok {
		if h.Unavailable() != nil {
			// The cause (an LLM endpoint's address, say) stays in this
			// node's log: GuardedProver warned of it.
			p.refuse(pb.DeclineReason_DECLINE_REASON_BUSY, ErrCodeBusy, fmt.Errorf("%w: answerer unavailable", ErrBusy))
			return
		}
	}
	// A verifier that came to this node is answered only once the node
	// admits or has accepted it, one it rejected never (spec §5c):
	// before any budget is charged or work done. Two verify-first nodes
	// that wait for each other are answered against a payment.
	// Whether the node admits or has accepted the verifier is asked
	// once, and only by a node that verifies first or asks payment.
	p.known = (s.cfg.VerifyFirst || s.cfg.PayDifficulty > 0) && p.svc.knownVerifier(p.remote)
	if s.cfg.VerifyFirst && !p.known {
		switch {
		case s.cfg.RejectedPeer != nil && s.cfg.RejectedPeer(p.remote):
			p.verifyFirst()
			return
		case !p.inbound:
		case s.cfg.MutualWait != nil && s.cfg.MutualWait(p.remote):
			p.mutualWait = true
		default:
			p.verifyFirst()
			return
		}
	}
	// Budgets before work (spec §6, §9a): sessions, answerer calls and
	// tokens per verifier and window, answerer calls of all verifiers.
	// A hello refused because the verifier's own budgets (its peer's,
	// network's or block's) are spent is silent (spec §6 step 1), once per
	// verifier and window (strikeOwnBudget): it would otherwise reopen
	// streams that hold slots for the decline linger, without end and
	// without probation.
	hold, own, why := s.budgets.admitSessionOwn(p.remote, p.pfx, p.hasPfx, int(hello.GetRounds()), s.now())
	if why != "" {
		if own {
			p.strikeOwnBudget()
		}
		p.refuse(pb.DeclineReason_DECLINE_REASON_BUSY, ErrCodeBusy, fmt.Errorf("%w: %s", ErrBusy, why))
		return
	}
	p.reserved, p.tokens = int(hello.GetRounds()), hold
	defer func() {
		p.tokens.refundCalls(p.reserved-p.calls, s.now())
		p.tokens.release(s.now())
	}()
	// What this node asks the verifier (§5b), decided before it solves
	// anything: a verifier asked to pay D_v is solved at most D_v +
	// PaySlack bits before it has paid (PaySlack).
	if err := p.askPay(); err != nil {
		p.refuse(pb.DeclineReason_DECLINE_REASON_BUSY, ErrCodeBusy, fmt.Errorf("%w: %w", ErrBusy, err))
		return
	}
	if d := int(hello.GetPowDifficulty()); p.payD > 0 && d > p.payD+PaySlack {
		p.refuse(pb.DeclineReason_DECLINE_REASON_BUSY, ErrCodeBusy,
			fmt.Errorf("%w: the verifier came to this node and asks %d bits of proof of work, more than %d before it pays the %d this node asks", ErrBusy, d, p.payD+PaySlack, p.payD))
		return
	}
	// Pay for the session: the verifier draws a set only then (§5a). The
	// work is charged to the node's budget (and the verifier prefix's
	// share) before it is done.
	if d := int(hello.GetPowDifficulty()); d <= s.cfg.MaxPowDifficulty {
		if ok, own := s.budgets.chargePowOwn(p.remote, p.pfx, p.hasPfx, d, s.now()); !ok {
			why := "proof-of-work budget of this node spent"
			if own {
				why = "proof-of-work budget for this verifier's network spent"
				p.strikeOwnBudget()
			}
			p.refuse(pb.DeclineReason_DECLINE_REASON_BUSY, ErrCodeBusy, fmt.Errorf("%w: %s", ErrBusy, why))
			return
		}
	}
	solveBy := ackBy
	if hello.GetReciprocal() && s.cfg.OnReciprocal != nil {
		solveBy = solveBy.Add(-min(ReciprocalAllowance, s.cfg.HandshakeTimeout/4))
	}
	pctx, cancel := context.WithDeadline(s.ctx, solveBy)
	pow, err := SolvePow(pctx, hello.GetNonce(), s.h.ID(), int(hello.GetPowDifficulty()), s.cfg.MaxPowDifficulty)
	cancel()
	if err != nil {
		p.refuse(pb.DeclineReason_DECLINE_REASON_BUSY, ErrCodeBusy, fmt.Errorf("%w: %w", ErrBusy, err))
		return
	}
	// The verifier asks to be verified back: a new session is started
	// only for a peer with draws left (the session makes it pay), and the
	// ack says what became of the request (spec §1a).
	if time.Now().After(ackBy) {
		p.refuse(pb.DeclineReason_DECLINE_REASON_BUSY, ErrCodeBusy, fmt.Errorf("%w: hello ack not ready within the handshake timeout", ErrBusy))
		return
	}
	var recip pb.Reciprocal
	if hello.GetReciprocal() {
		if s.cfg.OnReciprocal == nil {
			recip = pb.Reciprocal_RECIPROCAL_NOT_OFFERED
		} else {
			recip = s.cfg.OnReciprocal(p.remote, s.budgets.canDraw(p.remote, s.now()))
		}
	}
	if time.Now().After(ackBy) && recip != pb.Reciprocal_RECIPROCAL_WILL {
		// Too late for the verifier's wait: a decline, not an ack that
		// might start a session the verifier has given up on. After WILL
		// a session back runs already: the ack goes out late rather than
		// contradict it (the hook overran ReciprocalAllowance).
		p.refuse(pb.DeclineReason_DECLINE_REASON_BUSY, ErrCodeBusy, fmt.Errorf("%w: hello ack not ready within the handshake timeout", ErrBusy))
		return
	}
	// The session is paid for: in probation, the stream leaves the
	// waiting place for its group's stall place, where it waits until the
	// verifier's first frame after the ack (spec §6 step 1), and a newer
	// paid stream of the group takes it.
	if p.hold != nil && !p.hold.enterStall() {
		p.res.Err = fmt.Errorf("%w: a newer stream of this verifier's network in probation took this one's place", ErrBusy)
		return
	}
	ack := &pb.HelloAck{Nonce: hello.GetNonce(), Pow: pow, Reciprocal: recip, PayDifficulty: uint32(p.payD), PayNonce: p.payNonce}
	if err := p.write(&pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: ack}}); err != nil {
		p.abort(0, fmt.Errorf("%w: send hello ack: %w", ErrNetwork, err))
		return
	}
	total := msToDur(hello.GetTotalMs())
	p.helloAt = time.Now()
	p.firstBy = p.helloAt.Add(s.cfg.IdleTimeout)
	p.deadline = p.helloAt.Add(s.cfg.IdleTimeout + total + 2*proverSlack)
	p.exchange(s.answererFor(p), total)
}

// verifyFirst declines the hello VERIFY_FIRST (spec §5c), saying in the
// decline whether this node verifies the verifier now: OnReciprocal is
// asked as for a hello that asks to be verified back (it starts the
// session when it answers WILL). Nothing is signed; the verifier asks
// again once it has this node's verdict.
func (p *proverRun) verifyFirst() {
	s := p.svc
	recip := pb.Reciprocal_RECIPROCAL_NOT_OFFERED
	if s.cfg.OnReciprocal != nil {
		recip = s.cfg.OnReciprocal(p.remote, s.budgets.canDraw(p.remote, s.now()))
	}
	if recip == pb.Reciprocal_RECIPROCAL_UNSPECIFIED {
		recip = pb.Reciprocal_RECIPROCAL_NOT_OFFERED // never UNSPECIFIED here (§5c)
	}
	p.declined = true
	if p.release != nil {
		p.release()
	}
	d := declineFrame(pb.DeclineReason_DECLINE_REASON_VERIFY_FIRST, "this node answers a verifier that came to it once it admits it; ask again after its verdict on you")
	d.GetDecline().Reciprocal = recip
	declineAndReset(p.str, d, ErrCodeDeclined, min(s.cfg.HandshakeTimeout, declineLinger))
	p.res.Err = fmt.Errorf("%w: declined the hello of %s, which came to this node and is not admitted (%s)", ErrVerifyFirst, p.remote, ReciprocalName(recip))
}

// knownVerifier reports whether this node admits p (TrustedPeer) or its
// own standing verdict accepted it (VerifiedPeer): such a verifier is
// neither verified first nor asked a payment (spec §5b, §5c).
func (s *Service) knownVerifier(p peer.ID) bool {
	return s.budgets.trusted(p) || s.cfg.VerifiedPeer != nil && s.cfg.VerifiedPeer(p)
}

// askPay sets the payment this session's hello ack asks of the verifier
// (spec §5b): Config.PayDifficulty bits and a load term (payDifficulty),
// with a fresh nonce, of a verifier that came to this node (cameToUs) and
// that this node neither admits nor has accepted (VerifiedPeer); none of
// a verifier this node contacted (its session was asked for).
func (p *proverRun) askPay() error {
	s := p.svc
	if (s.cfg.PayDifficulty <= 0 && !p.mutualWait) || !p.inbound || p.known {
		return nil
	}
	d := s.budgets.payDifficulty(s.now())
	if p.mutualWait {
		d = max(d, min(MutualWaitPayDifficulty, s.cfg.MaxPowDifficulty))
	}
	if d <= 0 {
		return nil
	}
	nonce := make([]byte, PayNonceBytes)
	if _, err := io.ReadFull(s.random, nonce); err != nil {
		return fmt.Errorf("pay nonce: %w", err)
	}
	p.payD, p.payNonce = d, nonce
	return nil
}

// paid reports whether f, the verifier's first frame after the hello
// ack, pays what the ack asked (spec §5b): a Probe whose pay is valid,
// or a Verdict (a verifier that gives up costs this node nothing more).
func (p *proverRun) paid(f *pb.Frame) bool {
	if p.payD <= 0 {
		return true
	}
	switch b := f.GetBody().(type) {
	case *pb.Frame_Probe:
		return CheckPay(p.payNonce, p.remote, b.Probe.GetPay(), p.payD)
	case *pb.Frame_Verdict:
		return true
	}
	return false
}

// VerifierProver is a skill.Prover that shares its capacity among the
// verifiers (an answer queue that a person's agent drains, peer/mcpserver):
// the prover side starts each session with the verifier's peer ID and IP
// prefix (DrawPrefix; invalid when none applies, e.g. loopback).
type VerifierProver interface {
	NewSessionFor(verifier peer.ID, prefix netip.Prefix) skill.Answerer
}

// answererFor starts the answerer of p's session.
func (s *Service) answererFor(p *proverRun) skill.Answerer {
	if vp, ok := s.cfg.Prover.(VerifierProver); ok {
		var pfx netip.Prefix
		if p.hasPfx {
			pfx = p.pfx
		}
		return vp.NewSessionFor(p.remote, pfx)
	}
	return s.cfg.Prover.NewSession()
}

// checkHello validates a hello; it binds both peer IDs to the stream.
func (p *proverRun) checkHello(h *pb.Hello) (pb.DeclineReason, error) {
	if err := checkVersion(h.GetSpecVersion()); err != nil {
		return pb.DeclineReason_DECLINE_REASON_UNSUPPORTED_VERSION, fmt.Errorf("%w: %w", ErrBadHello, err)
	}
	bad := func(format string, args ...any) (pb.DeclineReason, error) {
		return pb.DeclineReason_DECLINE_REASON_BAD_HELLO, fmt.Errorf("%w: %s", ErrBadHello, fmt.Sprintf(format, args...))
	}
	if vid, err := peer.IDFromBytes(h.GetVerifierId()); err != nil || vid != p.remote {
		return bad("verifier_id is not the peer that opened the stream")
	}
	if pid, err := peer.IDFromBytes(h.GetProverId()); err != nil || pid != p.svc.h.ID() {
		return bad("prover_id is not this node")
	}
	if len(h.GetNonce()) != NonceBytes {
		return bad("nonce of %d bytes, want %d", len(h.GetNonce()), NonceBytes)
	}
	total := msToDur(h.GetTotalMs())
	switch {
	case h.GetRounds() < 1 || h.GetRounds() > skill.Parts:
		return bad("rounds %d, want 1..%d", h.GetRounds(), skill.Parts)
	case total <= 0 || total > MaxTotal:
		return bad("total_ms %d out of range", h.GetTotalMs())
	case total > p.svc.cfg.MaxAcceptTotal:
		return bad("total_ms %d above this prover's cap of %d", h.GetTotalMs(), durToMs(p.svc.cfg.MaxAcceptTotal))
	case h.GetPowDifficulty() > MaxPowDifficulty:
		return bad("pow_difficulty %d above %d", h.GetPowDifficulty(), MaxPowDifficulty)
	case msToDur(h.GetTauMs()) > total:
		return bad("tau_ms %d exceeds total_ms %d", h.GetTauMs(), h.GetTotalMs())
	case msToDur(h.GetRttCreditMs()) > total:
		return bad("rtt_credit_ms %d exceeds total_ms %d", h.GetRttCreditMs(), h.GetTotalMs())
	}
	return 0, nil
}

// readDeadline is when the next frame must have arrived: d from now,
// before round 1 no later than firstBy, never after the session's end.
func (p *proverRun) readDeadline(d time.Duration, beforeRound1 bool) time.Time {
	t := time.Now().Add(d)
	if beforeRound1 && t.After(p.firstBy) {
		t = p.firstBy
	}
	if t.After(p.deadline) {
		return p.deadline
	}
	return t
}

// frameResult is one frame (or the final error) read from the stream.
type frameResult struct {
	f   *pb.Frame
	err error
}

// readerAfter is how long an answer may run before a reader goroutine
// takes over the stream to watch for the verifier's frames meanwhile.
const readerAfter = 2 * time.Millisecond

// frameFeed delivers the frames of one session's exchange. The session
// loop reads the stream itself at first, so a fast answerer costs no
// goroutine hand-off per frame (BenchmarkRoundVsPing).
// An answer still running after readerAfter starts a reader goroutine
// that from then on reads every frame, so that a frame arriving while the
// answerer thinks (the verifier gave up on the round, or the stream
// failed) cancels the answer. A stream never has two readers: the loop
// reads only while no answer runs, and stops for good once the reader
// started.
type frameFeed struct {
	p    *proverRun
	ch   chan frameResult
	done chan struct{}
	wg   sync.WaitGroup
	// viaReader is the session loop's: frames come from ch.
	viaReader bool
	// armed hands the stream's reader over to the timer's goroutine: it
	// is set after the loop's last read and loaded before the reader's
	// first: an explicit happens-before edge, whatever the timer gives.
	armed atomic.Bool
	// timer starts the reader goroutine (watch). It is made by the first
	// watch and re-armed by the later ones (one timer and callback per
	// session, not per round): it fires at most once, as from then on
	// frames come from the reader. readBy is the deadline of the watch
	// armed last, for the timer's goroutine (armed orders the two).
	timer  *time.Timer
	readBy time.Time
}

func newFrameFeed(p *proverRun) *frameFeed {
	return &frameFeed{p: p, ch: make(chan frameResult), done: make(chan struct{})}
}

// next returns the next frame.
func (fd *frameFeed) next() frameResult {
	p := fd.p
	if fd.viaReader {
		fr := <-fd.ch
		p.taken++
		return fr
	}
	f := new(pb.Frame)
	err := readFrame(&p.r, f)
	p.read.Add(1)
	p.taken++
	return frameResult{f, err}
}

// watch starts the reader goroutine readerAfter from now unless unwatch,
// called once the answer returned, comes first.
//
// A read that runs while the answer does (the reader's) gets readBy as its
// deadline; the session loop sets the next one once the answer is sent.
func (fd *frameFeed) watch(readBy time.Time) {
	// The stream's read deadline is no longer the one the loop set last.
	fd.p.readBy = time.Time{}
	if fd.viaReader {
		// The reader's read is pending already.
		_ = fd.p.str.SetReadDeadline(readBy)
		return
	}
	fd.wg.Add(1)
	fd.readBy = readBy
	fd.armed.Store(true)
	if fd.timer == nil {
		fd.timer = time.AfterFunc(readerAfter, fd.startReader)
	} else {
		// Stopped by the last unwatch before it fired (else the
		// reader would run and viaReader be set).
		fd.timer.Reset(readerAfter)
	}
}

// unwatch ends the watch that watch started: the reader goroutine does not
// start if it has not yet; if it has, frames come from it from now on.
func (fd *frameFeed) unwatch() {
	if fd.viaReader {
		return // no timer was armed
	}
	if fd.timer.Stop() {
		fd.wg.Done()
		return
	}
	fd.viaReader = true
}

// startReader is the timer's callback: it becomes the reader goroutine.
func (fd *frameFeed) startReader() {
	defer fd.wg.Done()
	if fd.armed.Load() {
		_ = fd.p.str.SetReadDeadline(fd.readBy)
		fd.read()
	}
}

// read is the reader goroutine: it hands every frame to the session loop,
// interrupting the answer in progress first.
func (fd *frameFeed) read() {
	p := fd.p
	for {
		f := new(pb.Frame)
		err := readFrame(&p.r, f)
		// Counted before the interrupt, so that an answer starting now
		// sees the frame pending (answer, p.startThinking).
		p.read.Add(1)
		if stop := p.thinking.Swap(nil); stop != nil {
			(*stop)()
		}
		select {
		case fd.ch <- frameResult{f, err}:
		case <-fd.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// stop ends the reader goroutine, if one started. It must be called after
// the stream was closed or reset (which ends a pending read).
func (fd *frameFeed) stop() {
	close(fd.done)
	fd.wg.Wait()
}

// exchange answers probes and challenges until the verdict.
func (p *proverRun) exchange(ans skill.Answerer, total time.Duration) {
	idle := min(p.svc.cfg.IdleTimeout, total+proverSlack)
	// Once a round was answered or declined (or its answer abandoned),
	// the verifier's next frame, the next challenge or the verdict, is
	// due within the handshake timeout: it judges an answer at once
	// (spec §6 step 5). An answer then silence held the slot for idle
	// after every answerer call.
	judged := min(idle, p.svc.cfg.HandshakeTimeout)
	p.setReadDeadline(p.readDeadline(idle, true))
	p.feed = newFrameFeed(p)
	defer p.feed.stop()
	var (
		probes        int
		round         uint32 // rounds received
		expectVerdict bool   // nothing but a verdict may come now
		pending       *frameResult
		// history is the prompt tokens of the rounds answered so far
		// (skill.PromptTokens), charged again with every later round.
		history int
		// One probe ack frame serves all the probes (write encodes it
		// before it returns).
		probeAck *pb.ProbeAck
		ackFrame *pb.Frame
	)
	for {
		var fr frameResult
		if pending != nil {
			fr, pending = *pending, nil
		} else {
			fr = p.feed.next()
		}
		if fr.err != nil {
			p.readFailed("next frame", fr.err)
			return
		}
		if !p.afterAck {
			// The verifier's first frame after the ack: its set is drawn,
			// so round 1 follows within its probes' round trips (spec §6
			// step 5): by the handshake timeout from now at the latest.
			p.afterAck = true
			if p.hold != nil && !p.hold.leaveStall() {
				p.res.Err = fmt.Errorf("%w: a newer stream of this verifier's network in probation took this one's place", ErrBusy)
				return
			}
			if by := time.Now().Add(p.svc.cfg.HandshakeTimeout); by.Before(p.firstBy) {
				p.firstBy = by
			}
			// The payment comes before anything is answered (§5b): an
			// unpaid session ends as a busy one, which no verifier signs
			// (one written before document 1.13.0 does not pay). It is a
			// stall (§6 step 1): the decline is for what the verifier
			// did, and a verifier holding the slot until just before the
			// first-frame deadline would otherwise never strike.
			if !p.paid(fr.f) {
				p.strikeSilent()
				p.refuse(pb.DeclineReason_DECLINE_REASON_BUSY, ErrCodeBusy,
					fmt.Errorf("%w: %w: the verifier did not pay the %d-bit proof of work its hello ack asked", ErrBusy, ErrVerifierUnpaid, p.payD))
				return
			}
		}
		switch b := fr.f.GetBody().(type) {
		case *pb.Frame_Probe:
			probes++
			if round > 0 || expectVerdict || probes > MaxProbes || len(b.Probe.GetNonce()) > 32 {
				p.violation("unexpected probe %d", probes)
				return
			}
			if ackFrame == nil {
				probeAck = new(pb.ProbeAck)
				ackFrame = &pb.Frame{Body: &pb.Frame_ProbeAck{ProbeAck: probeAck}}
			}
			probeAck.Seq, probeAck.Nonce = b.Probe.GetSeq(), b.Probe.GetNonce()
			if err := p.write(ackFrame); err != nil {
				p.abort(0, fmt.Errorf("%w: send probe ack: %w", ErrNetwork, err))
				return
			}
		case *pb.Frame_Challenge:
			c := b.Challenge
			if expectVerdict {
				p.violation("challenge after the session was given up")
				return
			}
			round++
			if err := p.checkChallenge(c, round, total); err != nil {
				p.violation("%v", err)
				return
			}
			p.started = true
			if p.reflected(c) {
				return
			}
			if !skill.Answers(ans, c.GetKind()) {
				// Like an answerer's refusal: a Decline, then the verdict.
				err := fmt.Errorf("%w: round %d: kind %q", ErrUnsupportedKind, round, skill.CanonicalKind(c.GetKind()))
				p.svc.infoRemote(p.log, "challenge of an unsupported kind declined", "round", round, "kind", c.GetKind())
				if werr := p.write(declineFrame(pb.DeclineReason_DECLINE_REASON_UNSUPPORTED_KIND, err.Error())); werr != nil {
					p.abort(0, fmt.Errorf("%w: (decline not sent: %w)", err, werr))
					return
				}
				if p.res.Err == nil {
					p.res.Err = err
				}
				expectVerdict = true
				break
			}
			// The prompt's tokens are charged before the answerer runs
			// (§9a): this round's challenge and those of the rounds
			// before it, which a chained answerer reads again (history),
			// from the session's reservation first (chargeTokens).
			// Counting them is a pass over the narrative; so that the
			// answerer need not wait for it, the budget first reserves
			// their bound (free to compute) and the exact count is
			// settled once the answer is sent. A budget too short for
			// the bound gets the exact count at once.
			exact := -1
			tokens := history + skill.TokenBound(len(c.GetNarrative())) + skill.TokenBound(len(c.GetQuestion()))
			settle := true
			if !p.tokens.charge(tokens, p.svc.now()) {
				exact = skill.PromptTokens(c.GetNarrative()) + skill.PromptTokens(c.GetQuestion())
				tokens, settle = history+exact, false
				if !p.tokens.charge(tokens, p.svc.now()) {
					p.refuse(pb.DeclineReason_DECLINE_REASON_REFUSED, ErrCodeDeclined,
						fmt.Errorf("%w: round %d: token budget spent (this verifier's, its network's or the node's)", ErrBusy, round))
					return
				}
			}
			// The answerer may think up to the round's budget: the idle
			// wait starts once the answer is sent (below). The feed
			// sets this deadline when a read runs while it thinks.
			thinkBy := p.readDeadline(msToDur(c.GetBudgetMs())+msToDur(p.hello.GetRttCreditMs())+answerSlack+idle, false)
			var gaveUp, aborted bool
			gaveUp, aborted, pending = p.answer(ans, c, thinkBy)
			if exact < 0 {
				exact = skill.PromptTokens(c.GetNarrative()) + skill.PromptTokens(c.GetQuestion())
			}
			if settle {
				// Back to the session's reservation, which goes back
				// to the budgets when the session ends.
				p.tokens.give(tokens - history - exact)
			}
			history += exact
			if aborted {
				return
			}
			expectVerdict = gaveUp || round == p.hello.GetRounds()
		case *pb.Frame_Verdict:
			p.started = true
			p.verdict(b.Verdict)
			_ = p.str.Close()
			return
		default:
			p.violation("unexpected %s frame", frameKind(fr.f))
			return
		}
		wait := idle
		if round > 0 {
			wait = judged
		}
		p.setReadDeadline(p.readDeadline(wait, round == 0))
	}
}

// setReadDeadline is the exchange loop's SetReadDeadline. It leaves alone
// a deadline the stream has already, which is exact (the stream would
// time out at the same instant) and saves yamux a timer per call: before
// round 1 every frame waits until firstBy at the latest, so with the
// default timeouts all the probes get that same deadline, and near the
// end of a session every frame gets the session's. readBy is what the
// loop set last; watch forgets it, as the reader goroutine sets its own.
func (p *proverRun) setReadDeadline(t time.Time) {
	if !p.readBy.IsZero() && t.Equal(p.readBy) {
		return
	}
	p.readBy = t
	_ = p.str.SetReadDeadline(t)
}

func (p *proverRun) checkChallenge(c *pb.Challenge, round uint32, total time.Duration) error {
	switch {
	case c.GetRound() != round:
		return fmt.Errorf("challenge for round %d, expected %d", c.GetRound(), round)
	case c.GetRounds() != p.hello.GetRounds():
		return fmt.Errorf("challenge says %d rounds, hello said %d", c.GetRounds(), p.hello.GetRounds())
	case c.GetBudgetMs() == 0 || msToDur(c.GetBudgetMs()) > total:
		return fmt.Errorf("budget_ms %d out of range", c.GetBudgetMs())
	case len(c.GetNarrative()) == 0 || len(c.GetNarrative()) > skill.MaxNarrativeBytes:
		return fmt.Errorf("narrative of %d bytes", len(c.GetNarrative()))
	case len(c.GetQuestion()) == 0 || len(c.GetQuestion()) > skill.MaxQuestionBytes:
		return fmt.Errorf("question of %d bytes", len(c.GetQuestion()))
	case len(c.GetDomain()) > skill.MaxDomainBytes:
		return fmt.Errorf("domain of %d bytes", len(c.GetDomain()))
	case c.GetKind() != "" && !skill.ValidKindName(c.GetKind()):
		return fmt.Errorf("malformed kind of %d bytes", len(c.GetKind()))
	case round > 1 && skill.CanonicalKind(c.GetKind()) != p.kind:
		return fmt.Errorf("round %d kind %q differs from round 1's %q", round, c.GetKind(), p.kind)
	}
	p.kind = skill.CanonicalKind(c.GetKind())
	return nil
}

// reflected refuses a challenge this node issued itself. It reports
// whether it did.
func (p *proverRun) reflected(c *pb.Challenge) bool {
	s := p.svc
	if s.guard.len() == 0 {
		// Nothing issued in the window, so nothing can come back: skip
		// the fingerprint (it is most of a round's cost for a fast
		// answerer).
		return false
	}
	to, run, ok := s.guard.checkReceived(c.GetNarrative(), c.GetQuestion(), s.now())
	if !ok {
		return false
	}
	s.warnRemote(p.log, "reflected challenge refused", "issued_to", to, "round", c.GetRound(), "issuing_session_running", run != nil)
	// The issuing session (if still running) is marked first: it then
	// gives its subject reflectionGrace to decline the challenge as its
	// own, while this side's Decline lingers (§7). A session that already
	// ended keeps the verdict it signed.
	if run != nil {
		run.markReflected()
	}
	p.refuse(pb.DeclineReason_DECLINE_REASON_REFLECTION, ErrCodeReflection,
		fmt.Errorf("%w: round %d is a challenge this node issued", ErrReflection, c.GetRound()))
	if s.cfg.OnReflection != nil {
		s.cfg.OnReflection(p.remote)
	}
	return true
}

type answerResult struct {
	answer string
	err    error
}

// answer runs the answerer on one challenge and sends its answer. gaveUp
// reports that the round was given up (the answer would be late, or the
// answerer failed or refused and a Decline was sent): only the verdict may
// follow. aborted reports that the stream was reset (res.Err is set).
//
// A frame that arrives while the answerer is thinking (the verifier gave
// up on the round, or the stream failed) cancels the answerer and is
// returned as next, for the caller to handle.
func (p *proverRun) answer(ans skill.Answerer, c *pb.Challenge, thinkBy time.Time) (gaveUp, aborted bool, next *frameResult) {
	s := p.svc
	ch := skill.Challenge{
		Round: int(c.GetRound()), Rounds: int(c.GetRounds()), Domain: c.GetDomain(),
		Narrative: c.GetNarrative(), Question: c.GetQuestion(), Budget: msToDur(c.GetBudgetMs()),
		Kind: skill.CanonicalKind(c.GetKind()),
	}
	// Answering later than the verifier can accept is pointless.
	limit := ch.Budget + msToDur(p.hello.GetRttCreditMs()) + answerSlack
	actx, cancel := context.WithTimeout(s.ctx, limit)
	defer cancel()
	p.calls++
	p.feed.watch(thinkBy)
	p.startThinking(&cancel)
	text, aerr := callAnswerer(actx, ans, ch)
	p.feed.unwatch()
	if p.stopThinking() {
		// The verifier spoke while the answerer was thinking (it gave up
		// on the round, or the stream failed): the answerer was
		// cancelled and its answer, if any, is not sent.
		fr := p.feed.next()
		p.log.Debug("verifier spoke while the answerer was thinking", "round", ch.Round, "err", fr.err)
		return true, false, &fr
	}
	r := answerResult{text, aerr}
	if r.err == nil && actx.Err() != nil {
		r.err = actx.Err()
	}
	if r.err != nil {
		switch {
		case s.ctx.Err() != nil:
			p.abort(0, ErrClosed)
			return true, true, nil
		case actx.Err() != nil:
			// Too late to matter: say nothing, the verifier times the
			// round out and sends its verdict.
			p.log.Debug("answerer missed the budget", "round", ch.Round, "limit", limit)
			return true, false, nil
		}
		reason, detail := pb.DeclineReason_DECLINE_REASON_PROVER_ERROR, "answerer failed"
		if errors.Is(r.err, skill.ErrDeclined) {
			reason, detail = pb.DeclineReason_DECLINE_REASON_REFUSED, r.err.Error()
		}
		s.warnRemote(p.log, "answerer did not answer", "round", ch.Round, "err", r.err)
		if err := p.write(declineFrame(reason, detail)); err != nil {
			p.abort(0, fmt.Errorf("%w: round %d: %w (decline not sent: %w)", ErrAnswerer, ch.Round, r.err, err))
			return true, true, nil
		}
		return true, false, nil
	}
	a := CutAnswer(strings.ToValidUTF8(r.answer, "\uFFFD"))
	if err := p.write(&pb.Frame{Body: &pb.Frame_Answer{Answer: &pb.Answer{Round: c.GetRound(), Answer: a}}}); err != nil {
		p.abort(0, fmt.Errorf("%w: send answer: %w", ErrNetwork, err))
		return true, true, nil
	}
	p.res.Rounds++
	return false, false, nil
}

// startThinking lets the reader goroutine cancel the answer about to run
// when a frame arrives; a frame that arrived before is pending already
// and cancels it at once. (The reader counts a frame before it looks for
// a cancel function, so one of the two sees the other.)
func (p *proverRun) startThinking(cancel *context.CancelFunc) {
	p.thinking.Store(cancel)
	if p.read.Load() > p.taken {
		if stop := p.thinking.Swap(nil); stop != nil {
			(*stop)()
		}
	}
}

// stopThinking ends the answer's interruptibility and reports whether a
// frame is pending (then the answer was cancelled, or raced the frame).
func (p *proverRun) stopThinking() bool {
	p.thinking.Store(nil)
	return p.read.Load() > p.taken
}

// callAnswerer runs the answerer on the calling goroutine, turning a panic
// into an error. skill.Answerer requires Answer to return soon after ctx
// is done; the session waits for it.
func callAnswerer(ctx context.Context, ans skill.Answerer, c skill.Challenge) (a string, err error) {
	defer func() {
		if r := recover(); r != nil {
			a, err = "", fmt.Errorf("answerer panicked: %v", r)
		}
	}()
	return ans.Answer(ctx, c)
}

// verdict records the verifier's verdict and checks its attestation
// (spec/protocol.md §6 step 8): the frame is consistent in itself (a known
// reason, accepted exactly for ok, failed_round at most 3 and 0 when
// accepted), and its envelope, when present, verifies with this node as
// subject and says what the frame says.
func (p *proverRun) verdict(v *pb.Verdict) {
	s := p.svc
	res := p.res
	res.Detail = truncate(v.GetDetail(), MaxDeclineDetail)
	reason := skill.Reason(v.GetReason())
	if !reason.Valid() || v.GetAccepted() != (reason == skill.ReasonOK) || v.GetFailedRound() > uint32(skill.Parts) ||
		(v.GetAccepted() && v.GetFailedRound() != 0) {
		res.Err = fmt.Errorf("%w: inconsistent verdict (accepted=%v reason=%q failed_round=%d)", ErrProtocolViolation, v.GetAccepted(), truncate(v.GetReason(), 64), v.GetFailedRound())
		return
	}
	res.Accepted, res.Reason, res.FailedRound = v.GetAccepted(), reason, int(v.GetFailedRound())
	if len(v.GetAttestation()) == 0 {
		if reason != skill.ReasonInconclusive {
			res.AttestationErr = errors.New("verdict carries no attestation")
		}
		return
	}
	res.Envelope = bytes.Clone(v.GetAttestation())
	a, _, err := VerifyAttestation(res.Envelope, VerifyOptions{Subject: s.h.ID(), Issuer: p.remote, Now: s.now()})
	if err != nil {
		res.AttestationErr = err
		return
	}
	switch {
	case !bytes.Equal(a.Nonce, p.hello.GetNonce()):
		res.AttestationErr = fmt.Errorf("%w: attestation nonce is not this session's", ErrMalformed)
	case a.Accepted != res.Accepted || a.Reason != res.Reason || a.FailedRound != res.FailedRound:
		res.AttestationErr = fmt.Errorf("%w: attestation (accepted=%v reason=%s) contradicts the verdict (accepted=%v reason=%s)",
			ErrMalformed, a.Accepted, a.Reason, res.Accepted, res.Reason)
	default:
		res.Attestation = a
	}
}

// A verifier can make the prover write a WARN line per session: by
// reflecting a challenge of this node's back to it, or by sending
// challenges the answerer fails or refuses (an LLM error, a full MCP
// queue). warnRemote writes such lines at most once per message and
// service every remoteWarnEvery, the next one carrying how many were
// held back ("suppressed"); the held-back ones are logged at Debug with
// their details. The events stay visible otherwise too: a reflection in
// ProverResult.Err (ErrReflection) and Config.OnReflection, an
// answerer's failure or refusal in ProverResult.Reason (the verifier's
// verdict, declined). Package peer limits again, per peer, what it logs
// from those.
const remoteWarnEvery = time.Minute

// remoteWarns is the limiter state of each running Service, dropped
// when the service closes.
var remoteWarns sync.Map // *Service -> *remoteWarnState

// heldBack counts the lines warnRemote held back, in this process.
var heldBack atomic.Uint64

// SuppressedLogLines returns how many remote-triggered warnings the
// services of this process held back (wrote at DEBUG instead).
func SuppressedLogLines() uint64 { return heldBack.Load() }

type remoteWarnState struct {
	mu   sync.Mutex
	last map[string]*remoteWarnEntry // by message: a fixed set of strings
}

type remoteWarnEntry struct {
	at         time.Time
	suppressed int
}

// allow reports whether a WARN line of msg may be written at now and
// how many were held back since the last one.
func (st *remoteWarnState) allow(msg string, now time.Time) (ok bool, suppressed int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.last == nil {
		st.last = map[string]*remoteWarnEntry{}
	}
	e := st.last[msg]
	if e == nil {
		st.last[msg] = &remoteWarnEntry{at: now}
		return true, 0
	}
	if now.Sub(e.at) < remoteWarnEvery {
		e.suppressed++
		return false, 0
	}
	suppressed = e.suppressed
	e.at, e.suppressed = now, 0
	return true, suppressed
}

// warnRemote logs a remote-triggered warning through the service's
// limiter (see remoteWarnEvery).
func (s *Service) warnRemote(log *slog.Logger, msg string, args ...any) {
	s.logRemote(log, slog.LevelWarn, msg, args...)
}

// infoRemote logs a remote-triggered INFO line through the service's
// limiter (see remoteWarnEvery), apart from the warnings of the same
// message.
func (s *Service) infoRemote(log *slog.Logger, msg string, args ...any) {
	s.logRemote(log, slog.LevelInfo, msg, args...)
}

// logRemote logs msg at level, at most once per remoteWarnEvery (the
// next one saying how many were held back), the rest at DEBUG.
func (s *Service) logRemote(log *slog.Logger, level slog.Level, msg string, args ...any) {
	v, ok := remoteWarns.Load(s)
	if !ok {
		var loaded bool
		if v, loaded = remoteWarns.LoadOrStore(s, &remoteWarnState{}); !loaded {
			context.AfterFunc(s.ctx, func() { remoteWarns.Delete(s) })
		}
	}
	allowed, suppressed := v.(*remoteWarnState).allow(level.String()+" "+msg, time.Now())
	if !allowed {
		heldBack.Add(1)
		log.Debug(msg, args...)
		return
	}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	log.Log(context.Background(), level, msg, args...)
}
