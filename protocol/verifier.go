package protocol

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol/attestation"
	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// Verify runs one verifier session against p (paper Algorithm 1 over a
// libp2p stream) and returns its result. reciprocal asks p to verify this
// node back.
//
// Verify returns an error only when no session could run: this node has
// no Source (ErrNoSource), the service is closed (ErrClosed), ctx ended
// before the stream opened, the prover is busy (ErrBusy), or the stream
// could not be opened or failed at the transport level before the first
// challenge was sent (ErrNetwork). Everything else, and any misbehaviour
// of the prover once the session is under way, ends in a Result: accepted,
// rejected with a reason, or inconclusive when this node could not provide
// a challenge or ctx was cancelled mid-session. ctx's deadline ends the
// session only until a challenge is delivered; after that the session
// runs to its verdict within the protocol's deadlines (a prover must not
// be able to push a round it fails past the caller's deadline and leave
// unsigned). Opening the stream is bounded by twice the handshake
// timeout; a peer that does not let it open is ErrUnresponsive.
func (s *Service) Verify(ctx context.Context, p peer.ID, reciprocal bool) (*Result, error) {
	if s.cfg.Source == nil {
		return nil, ErrNoSource
	}
	if attestation.SmallOrderPeerID(p) {
		// No record about it can be valid (spec/attestation.md §2):
		// anyone can be this peer, so a session would attest no one.
		return nil, fmt.Errorf("%w: %s is the peer ID of an Ed25519 key of small order, which anyone can sign for: no session", ErrMalformed, p)
	}
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.wg.Done()
	// The session's context: ended by the service's close, by the
	// caller's cancellation, and by the caller's deadline only until a
	// challenge is delivered. From then on the session runs to its
	// verdict within the protocol's own deadlines (T_total and the
	// waits of spec §5), so that a prover cannot make a session it is
	// failing end unsigned by delaying it past the caller's deadline
	// (stalling the stream's opening, its acks, its probes): peek and
	// abort (§10). A cancellation still ends it: nothing the peer can
	// cause.
	caller := ctx
	ctx, cancel := context.WithCancel(context.WithoutCancel(caller))
	defer cancel()
	stopSvc := context.AfterFunc(s.ctx, cancel)
	defer stopSvc()
	run := &verifierRun{svc: s, peer: p, ctx: ctx, reciprocal: reciprocal, log: s.log.With("peer", p, "role", "verifier")}
	stopCaller := context.AfterFunc(caller, func() {
		if errors.Is(caller.Err(), context.DeadlineExceeded) && run.delivered.Load() {
			return
		}
		cancel()
	})
	defer stopCaller()

	// Cost before work (spec §5a): the core draws nothing before the peer
	// paid in its hello ack, and a peer whose share of draws is spent is
	// not even asked.
	// Who came (spec §5b): a prover this node did not contact is paid
	// only in mutual wait (§5c), and is then asked at least the proof of
	// work it may be paid.
	run.inbound = s.proverCameToUs(p)
	run.waiting = run.inbound && s.cfg.MutualWaitProver != nil && s.cfg.MutualWaitProver(p)
	var floor int
	if run.waiting {
		floor = MutualWaitPayDifficulty
	}
	vs, err := s.Core().Begin(p, BeginOptions{Reciprocal: reciprocal, PowFloor: floor})
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		vs.Abort(err)
		return nil, fmt.Errorf("verify %s: %w", p, err)
	}

	run.vs, run.res = vs, vs.res
	// Opening the stream (and dialing, when not connected) is bounded on
	// its own: over QUIC a peer that grants no stream credit held the
	// open, and the caller's slot, until the caller's deadline.
	octx, ocancel := context.WithTimeout(ctx, streamOpenTimeout(s.cfg.HandshakeTimeout))
	str, err := s.h.NewStream(network.WithAllowLimitedConn(octx, ServiceName), p, ID) // a relayed connection will do (spec/protocol.md, relayed connections)
	openErr := octx.Err()
	ocancel()
	if err != nil {
		switch {
		case ctx.Err() != nil:
			err = fmt.Errorf("verify %s: %w", p, ctx.Err())
		case openErr != nil:
			err = fmt.Errorf("%w: %s: stream not opened within %s", ErrUnresponsive, p, streamOpenTimeout(s.cfg.HandshakeTimeout))
		default:
			err = fmt.Errorf("%w: open stream to %s: %w", ErrNetwork, p, err)
		}
		vs.Abort(err)
		return nil, err
	}
	if err := str.Scope().SetService(ServiceName); err != nil {
		str.ResetWithError(network.StreamResourceLimitExceeded)
		err = fmt.Errorf("%w: attach stream to %s: %w", ErrNetwork, ServiceName, err)
		vs.Abort(err)
		return nil, err
	}
	if err := str.Scope().ReserveMemory(streamMemory, network.ReservationPriorityAlways); err != nil {
		str.ResetWithError(network.StreamResourceLimitExceeded)
		err = fmt.Errorf("%w: reserve stream memory: %w", ErrNetwork, err)
		vs.Abort(err)
		return nil, err
	}
	defer str.Scope().ReleaseMemory(streamMemory)
	stop := context.AfterFunc(ctx, func() { str.Reset() })
	defer stop()

	run.str = str
	// The run ends the core session: Finish for a verdict, Abort when no
	// session ran (a set no challenge of which reached the wire then goes
	// back to the source, and its draw to the peer's share; an unpaid
	// hello counts as a failure of the peer).
	return run.run()
}

// giveBack returns an unseen set to a source that takes sets back.
func (s *Service) giveBack(set *skill.Set, p peer.ID) {
	r, ok := s.cfg.Source.(skill.Returner)
	if !ok || set == nil {
		return
	}
	if err := r.Return(set); err != nil {
		s.log.Warn("challenge set not given back to the source; it stays used", "set", set.ID, "peer", p, "err", err)
		return
	}
	s.log.Debug("challenge set given back unseen", "set", set.ID, "peer", p)
}

// streamOpenTimeout bounds opening the session's stream, a dial included
// when the peer is not connected: twice the handshake timeout.
func streamOpenTimeout(handshake time.Duration) time.Duration { return 2 * handshake }

// maxChallengeWrite is the most of a challenge's write the prover is not
// charged for (spec §5 step 5): its own send (yamux queues the frame at
// once; QUIC returns when all but the last packet went, after the
// prover's flow-control credit, about two round trips for 32 KiB on a
// fresh connection).
const maxChallengeWrite = time.Second

// firstProbeMargin is what a verifier keeps of the prover's wait for the
// first frame after the ack (spec §5 step 1): the path allowance (2 s; the
// prover's wait runs from its writing the ack, before this node read it)
// and a second for writing it.
const firstProbeMargin = 3 * time.Second

// newSession draws a set from the source and starts a session on it. A
// failure is the verifier's own fault: the session will be inconclusive.
func (s *Service) newSession(ctx context.Context) (*skill.Session, error) {
	sctx, cancel := context.WithTimeout(ctx, s.cfg.SourceTimeout)
	defer cancel()
	set, err := s.cfg.Source.Next(sctx)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", s.cfg.Source.Name(), err)
	}
	sess, err := skill.NewSession(set, s.cfg.Policy, nil)
	if err != nil {
		return nil, fmt.Errorf("source %s: set %s: %w", s.cfg.Source.Name(), set.ID, err)
	}
	return sess, nil
}

// verifierRun is one verifier session on one stream.
//
// It is the libp2p adapter over the transport-free core (core.go): it
// writes and reads the frames, measures time on the service's clock and
// maps stream failures to verdict reasons; the core session vs draws,
// judges, signs and gives back.
type verifierRun struct {
	svc        *Service
	vs         *VerifierSession
	delivered  atomic.Bool // a challenge's write began (Verify's context)
	str        stream
	r          frameReader
	peer       peer.ID
	ctx        context.Context
	res        *Result
	reciprocal bool
	log        *slog.Logger
	// inbound: the prover came to this node (Service.proverCameToUs), so
	// this node pays no payment it asks (spec §5b), unless waiting: the
	// prover is in mutual wait with this node (Config.MutualWaitProver).
	inbound, waiting bool

	rtt   time.Duration
	start time.Time // when the first challenge's write returned
	// code is the stream error code to reset with after the verdict
	// (0: close gracefully).
	code network.StreamErrorCode

	mu        sync.Mutex
	reflected bool
	// readBy is the deadline of the current read; reflectedBy ends any
	// read once the session was found reflected (spec §7: the subject
	// gets reflectionGrace to decline the challenge as its own).
	readBy, reflectedBy time.Time
	// writeBy is the write deadline write set last (armWriteDeadline).
	writeBy time.Time
}

// reflectionGrace is how long a session found reflected (§7) still waits
// for the subject's own Decline{REFLECTION} before it ends protocol_error.
const reflectionGrace = time.Second

// errNoSession aborts a run that must report an error instead of a
// verdict.
type errNoSession struct{ err error }

func (e errNoSession) Error() string { return e.err.Error() }

func (v *verifierRun) run() (*Result, error) {
	defer sessionRunning()()
	// Every read is this goroutine's, and finish reads the stream
	// itself.
	v.r.open(v.str, MaxProverFrame)
	defer v.r.release()
	// The prover side marks the core session when its challenge comes
	// back (§7); the read in progress then ends within the grace.
	v.vs.OnReflected(v.markReflected)

	if err := v.handshake(); err != nil {
		var ns errNoSession
		switch {
		case errors.As(err, &ns):
			v.str.Reset()
			v.vs.Abort(ns.err)
			return nil, ns.err
		case !v.vs.paid:
			// Before a paid hello ack nothing is drawn or signed: the
			// peer's misbehaviour ends the stream, not in a record.
			sf := v.asFailure(err)
			_ = v.str.ResetWithError(cmp.Or(sf.code, ErrCodeDeclined))
			if sf.reason == skill.ReasonDeclined {
				err = fmt.Errorf("%w: %s: %s", ErrDeclined, v.peer, sf.detail)
			} else {
				err = fmt.Errorf("%w: %s: %w: %s", ErrUnpaid, v.peer, ErrProtocolViolation, sf.detail)
			}
			v.vs.Abort(err)
			return nil, err
		default:
			v.fail(err, false)
		}
	}
	if !v.vs.Done() {
		v.rounds()
	}
	// The core gives the verdict (inconclusive when the source failed:
	// the prover is told, nothing is attested), tells consensus feedback
	// and signs.
	return v.finish(v.vs.Finish())
}

// sessionFailure is a reason to end the session, with the code to reset
// the stream with after the verdict.
type sessionFailure struct {
	reason skill.Reason
	detail string
	code   network.StreamErrorCode
}

func (f *sessionFailure) Error() string { return string(f.reason) + ": " + f.detail }

func failure(r skill.Reason, code network.StreamErrorCode, format string, args ...any) *sessionFailure {
	return &sessionFailure{reason: r, code: code, detail: fmt.Sprintf(format, args...)}
}

// fail ends the session with err (a *sessionFailure, or any other error
// counted as a protocol error).
func (v *verifierRun) fail(err error, delivered bool) {
	sf := v.asFailure(err)
	v.vs.Fail(sf.reason, sf.detail, delivered)
}

// asFailure classifies err and remembers its reset code.
func (v *verifierRun) asFailure(err error) *sessionFailure {
	var sf *sessionFailure
	if !errors.As(err, &sf) {
		sf = failure(skill.ReasonProtocolError, ErrCodeProtocolViolation, "%v", err)
	}
	if v.code == 0 {
		v.code = sf.code
	}
	return sf
}

// failTimed is fail for a delivered round whose answer never came, keeping
// the time the verifier waited.
func (v *verifierRun) failTimed(err error, t skill.Timing) {
	sf := v.asFailure(err)
	v.vs.FailRound(sf.reason, sf.detail, t)
}

// readErr turns a failed read into the session's failure. before says
// whether any challenge has been sent yet: before that, a transport
// failure means no session ran.
func (v *verifierRun) readErr(what string, err error, before bool) error {
	if v.ctx.Err() != nil {
		return failure(skill.ReasonInconclusive, 0, "verifier cancelled: %v", v.ctx.Err())
	}
	if v.isReflected() {
		if code, ok := resetCode(err); ok && code == ErrCodeReflection {
			// The subject refused the challenge as one it issued (its
			// Decline may have been lost to the reset): the two nodes
			// drew the same challenge, §7.
			return failure(skill.ReasonDeclined, 0, "prover reset the stream while waiting for %s (code %#x): the challenge is one it issued", what, uint32(code))
		}
		return errReflected()
	}
	var fe *frameError
	if errors.As(err, &fe) && fe.code != 0 {
		return failure(skill.ReasonProtocolError, fe.code, "%s: %v", what, err)
	}
	if code, ok := resetCode(err); ok {
		switch code {
		case ErrCodeBusy:
			if before {
				return errNoSession{fmt.Errorf("%w: %s reset the stream: %w", ErrBusy, v.peer, err)}
			}
		case ErrCodeDeclined, ErrCodeReflection:
			return failure(skill.ReasonDeclined, 0, "prover reset the stream while waiting for %s (code %#x)", what, uint32(code))
		case ErrCodeProtocolViolation, ErrCodeOversized:
			if before {
				return failure(skill.ReasonDeclined, 0, "prover refused the session while waiting for %s (code %#x)", what, uint32(code))
			}
		}
	}
	if isTimeout(err) {
		if before {
			// No challenge was revealed and the runtime, not the
			// prover's brain, answers hellos and probes: silence here
			// says the peer (or this node) is overloaded or unreachable,
			// nothing about what it is. Signing a rejection for it
			// failed genuine agents of a saturated 200-node swarm and
			// locked them out for the rejection back-off.
			return errNoSession{fmt.Errorf("%w: %s: no %s within the deadline", ErrUnresponsive, v.peer, what)}
		}
		// No reset code: the verdict is sent and the prover gets a moment
		// to read it (see finish).
		return failure(skill.ReasonTimeout, 0, "no %s within the deadline", what)
	}
	if before {
		return errNoSession{fmt.Errorf("%w: %s: waiting for %s: %w", ErrNetwork, v.peer, what, err)}
	}
	return failure(skill.ReasonProtocolError, 0, "stream failed while waiting for %s: %v", what, err)
}

func (v *verifierRun) write(f *pb.Frame) error {
	armWriteDeadline(v.str, &v.writeBy, v.svc.cfg.HandshakeTimeout)
	return writeFrame(v.str, f, MaxVerifierFrame)
}

// errReflected is the failure of a session whose challenge came back to
// this node (§7).
func errReflected() *sessionFailure {
	return failure(skill.ReasonProtocolError, ErrCodeReflection, "reflected challenge: the peer relayed this node's challenge back to it")
}

// read reads the next frame with a deadline d from now, cut to the
// reflection grace once the session has been marked reflected.
func (v *verifierRun) read(f *pb.Frame, d time.Duration) error {
	v.setReadDeadline(time.Now().Add(d))
	return readFrame(&v.r, f)
}

func (v *verifierRun) setReadDeadline(t time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.readBy = t
	if v.reflected && t.After(v.reflectedBy) {
		t = v.reflectedBy
	}
	_ = v.str.SetReadDeadline(t)
}

// markReflected is called (through the core session's OnReflected) when a
// challenge this session issued came back: the pending read ends within reflectionGrace,
// so that the session ends rejected, declined if the subject refuses the
// challenge as its own in that time and protocol_error otherwise (§7).
func (v *verifierRun) markReflected() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.reflected {
		return
	}
	v.reflected = true
	v.reflectedBy = time.Now().Add(reflectionGrace)
	if !v.readBy.IsZero() && v.readBy.After(v.reflectedBy) {
		_ = v.str.SetReadDeadline(v.reflectedBy)
	}
}

func (v *verifierRun) isReflected() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.reflected
}

// decline turns a Decline frame into the session's failure.
func (v *verifierRun) decline(d *pb.Decline, before bool) error {
	if d.GetReason() == pb.DeclineReason_DECLINE_REASON_VERIFY_FIRST && !v.vs.paid {
		// At the hello only (§5c): no session ran; the caller learns
		// whether the prover verifies this node first.
		r := d.GetReciprocal()
		if pb.Reciprocal_name[int32(r)] == "" {
			r = pb.Reciprocal_RECIPROCAL_UNSPECIFIED
		}
		_ = v.str.ResetWithError(ErrCodeDeclined) // as after any decline at the hello (§5 step 3)
		return errNoSession{&VerifyFirstError{Peer: v.peer, Reciprocal: r, Detail: truncate(d.GetDetail(), MaxDeclineDetail)}}
	}
	if d.GetReason() == pb.DeclineReason_DECLINE_REASON_BUSY && before {
		return errNoSession{fmt.Errorf("%w: %s: %s", ErrBusy, v.peer, truncate(d.GetDetail(), MaxDeclineDetail))}
	}
	return failure(skill.ReasonDeclined, 0, "prover declined (%s): %s", declineName(d.GetReason()), truncate(d.GetDetail(), MaxDeclineDetail))
}

func declineName(r pb.DeclineReason) string {
	if n, ok := pb.DeclineReason_name[int32(r)]; ok {
		return n
	}
	return fmt.Sprintf("DECLINE_REASON_%d", int32(r))
}

// handshake sends the hello, reads the ack and measures the RTT.
func (v *verifierRun) handshake() error {
	s := v.svc
	p := s.cfg.Policy
	hello := &pb.Hello{
		SpecVersion:   SpecVersion,
		VerifierId:    []byte(s.h.ID()),
		ProverId:      []byte(v.peer),
		Nonce:         v.vs.Nonce(),
		Rounds:        uint32(p.Rounds),
		TotalMs:       durToMs(p.Total),
		Reciprocal:    v.reciprocal,
		RttCreditMs:   durToMs(p.RTTCredit),
		PowDifficulty: uint32(v.vs.PowDifficulty()),
	}
	if !p.DeriveTau {
		hello.TauMs = durToMs(p.Tau)
	}
	if err := v.write(&pb.Frame{Body: &pb.Frame_Hello{Hello: hello}}); err != nil {
		if code, ok := resetCode(err); ok && code == ErrCodeBusy {
			return errNoSession{fmt.Errorf("%w: %s: %w", ErrBusy, v.peer, err)}
		}
		return errNoSession{fmt.Errorf("%w: send hello to %s: %w", ErrNetwork, v.peer, err)}
	}
	var (
		f   pb.Frame
		pay []byte // this node's payment (§5b), in the first probe
	)
	if err := v.read(&f, ackWait(s.cfg.HandshakeTimeout, v.vs.PowDifficulty())); err != nil {
		return v.readErr("hello ack", err, true)
	}
	switch b := f.GetBody().(type) {
	case *pb.Frame_HelloAck:
		if !bytes.Equal(b.HelloAck.GetNonce(), v.vs.Nonce()) {
			return failure(skill.ReasonProtocolError, ErrCodeProtocolViolation, "hello ack does not echo the nonce")
		}
		// The answer to our reciprocal request, if we made one: a value
		// this node does not know reads as unspecified (spec §1a).
		if r := b.HelloAck.GetReciprocal(); v.reciprocal && pb.Reciprocal_name[int32(r)] != "" {
			v.res.Reciprocal = r
		}
		// What the prover asks of this node (§5b), solved before
		// anything is drawn for it; the draw's wait for the source then
		// ends as it would have without it (drawWait from the ack).
		ackAt := time.Now() // wall clock: a context deadline
		// Only a prover that paid this node's own proof of work (§5a) is
		// paid (else Pay below ends it unpaid, a failure of the peer).
		if CheckPow(v.vs.Nonce(), v.peer, b.HelloAck.GetPow(), v.vs.PowDifficulty()) {
			var err error
			if pay, err = v.payFor(b.HelloAck); err != nil {
				return err
			}
		}
		dctx, cancel := context.WithDeadline(v.ctx, ackAt.Add(drawWait(&s.cfg)))
		defer cancel()
		// The core checks the payment and only then draws (within the
		// shares); a source failure leaves the session Done, inconclusive.
		if err := v.vs.Pay(dctx, b.HelloAck.GetPow()); err != nil {
			switch {
			case errors.Is(err, ErrUnpaid):
				_ = v.str.ResetWithError(ErrCodeDeclined)
			case errors.Is(err, ErrPeerQuota):
				// A draw budget was spent after the pre-check (spec §5
				// step 1): no session, nothing signed; the prover learns
				// it is a matter of load.
				_ = v.str.ResetWithError(ErrCodeBusy)
			}
			return errNoSession{err}
		}
	case *pb.Frame_Decline:
		return v.decline(b.Decline, true)
	default:
		return failure(skill.ReasonProtocolError, ErrCodeProtocolViolation, "expected hello_ack, got %s", frameKind(&f))
	}
	if v.vs.Done() {
		return nil // inconclusive: no probes needed
	}
	v.rtt = -1
	// One probe frame and nonce serve all the probes: write encodes the
	// frame before it returns, and each ack is checked before the next
	// probe overwrites them.
	nonce := make([]byte, probeNonceBytes)
	probe := &pb.Probe{Nonce: nonce}
	probeFrame := &pb.Frame{Body: &pb.Frame_Probe{Probe: probe}}
	var first time.Time
	// A prover waits for round 1 at most the handshake timeout from
	// reading the first probe (spec §6 step 5); this node writes round 1
	// within that less the path allowance (a fifth of it, 2 s by default)
	// of writing the probe, as for every wait it counts from its own
	// write: the probe and round 1 travel, and round 1 may be 32 KiB.
	// The prover's wait is its own handshake timeout, which may be the
	// floor (10 s) whatever this node's is: a longer one here does not
	// widen the window.
	roundOneIn := roundOneWindow(s.cfg.HandshakeTimeout)
	for seq := 1; seq <= s.cfg.Probes; seq++ {
		// No probe starts unless two more of the fastest round trips
		// seen (its own, and round 1's way with room to spare) fit before
		// round 1 is due. The fastest, not the slowest: a prover that
		// holds one ack does not end the probing (a long-held first ack
		// does, but the credit is capped).
		if seq > 1 && s.now().Sub(first)+2*v.rtt > roundOneIn {
			break
		}
		if _, err := io.ReadFull(s.random, nonce); err != nil {
			return failure(skill.ReasonInconclusive, 0, "probe nonce: %v", err)
		}
		probe.Seq = uint32(seq)
		if seq == 1 {
			probe.Pay = pay
		} else {
			probe.Pay = nil
		}
		if err := v.write(probeFrame); err != nil {
			return v.readErr("probe write", err, true)
		}
		t0 := s.now()
		if seq == 1 {
			first = t0
		}
		// An ack that comes after round 1 is due is no ack: the session
		// did not run (its wait is the probe timeout, cut to that).
		if err := v.read(&f, min(s.cfg.ProbeTimeout, first.Add(roundOneIn).Sub(t0))); err != nil {
			return v.readErr("probe ack", err, true)
		}
		t1 := s.now()
		switch b := f.GetBody().(type) {
		case *pb.Frame_ProbeAck:
			if b.ProbeAck.GetSeq() != uint32(seq) || !bytes.Equal(b.ProbeAck.GetNonce(), nonce) {
				return failure(skill.ReasonProtocolError, ErrCodeProtocolViolation, "probe ack %d does not match probe %d", b.ProbeAck.GetSeq(), seq)
			}
		case *pb.Frame_Decline:
			return v.decline(b.Decline, true)
		default:
			return failure(skill.ReasonProtocolError, ErrCodeProtocolViolation, "expected probe_ack, got %s", frameKind(&f))
		}
		if rtt := t1.Sub(t0); v.rtt < 0 || rtt < v.rtt {
			v.rtt = max(rtt, 0)
		}
	}
	v.rtt = max(v.rtt, 0)
	v.vs.SetRTT(v.rtt)
	return nil
}

// payAsk reads the payment a hello ack asks (spec §5b): none (both
// fields absent), an ask (D_v 1..32 with a 16-byte nonce), or an error
// for a malformed one (D_v above 32, a nonce of another length with D_v
// > 0, or a nonce with D_v = 0), which the verifier treats as a wrong
// nonce echo. Vectors: spec/vectors/pay_ask.json.
func payAsk(d uint32, nonce []byte) (asked bool, err error) {
	switch {
	case d == 0 && len(nonce) == 0:
		return false, nil
	case d > MaxPowDifficulty:
		return false, fmt.Errorf("hello ack asks pay_difficulty %d above %d", d, MaxPowDifficulty)
	case d == 0 || len(nonce) != PayNonceBytes:
		return false, fmt.Errorf("hello ack pay_nonce of %d bytes with pay_difficulty %d", len(nonce), d)
	}
	return true, nil
}

// roundOneWindow is the round-1 window of spec §5 step 4 for a verifier
// whose handshake timeout is hs: the prover's wait for round 1 from
// reading the first probe (its handshake timeout, at least the default's
// 10 s floor, so hs above it does not widen the window) less the path
// allowance, a fifth of it: 8 s by default.
func roundOneWindow(hs time.Duration) time.Duration {
	w := min(hs, DefaultHandshakeTimeout)
	return w - w/5
}

// payFor returns the payment the prover's hello ack asks of this node
// (spec §5b): nil when it asks none. A malformed ask is a protocol error
// (no session ran: nothing is drawn or signed). An ask above
// MaxPowDifficulty, on a connection the prover opened (it came to this
// node: it asked for the session it would charge for), or beyond the
// payment budgets (Config.MaxVerifierPayWork), is not paid: no session,
// ErrPayRefused, the stream reset busy.
func (v *verifierRun) payFor(ack *pb.HelloAck) ([]byte, error) {
	s := v.svc
	d, nonce := int(ack.GetPayDifficulty()), ack.GetPayNonce()
	asked, err := payAsk(ack.GetPayDifficulty(), nonce)
	switch {
	case err != nil:
		return nil, failure(skill.ReasonProtocolError, ErrCodeProtocolViolation, "%v", err)
	case !asked:
		return nil, nil
	case v.inbound && !v.waiting:
		_ = v.str.ResetWithError(ErrCodeBusy)
		return nil, errNoSession{fmt.Errorf("%w: %s asks %d bits of proof of work on a connection it opened", ErrPayRefused, v.peer, d)}
	case d > max(v.vs.PowDifficulty(), PublicPowDifficulty)+PaySlack && !v.requested():
		// At most PaySlack bits more than the prover paid for this
		// node (or than a public node's base): the requester pays
		// first, and not a sixty-fourth of what it costs.
		_ = v.str.ResetWithError(ErrCodeBusy)
		return nil, errNoSession{fmt.Errorf("%w: %s asks %d bits of proof of work, more than %d bits above the %d it was asked", ErrPayRefused, v.peer, d, PaySlack, max(v.vs.PowDifficulty(), PublicPowDifficulty))}
	case d > s.cfg.MaxPowDifficulty:
		// Above what this node pays: refused before the budgets are
		// charged (SolvePay would refuse it unsolved, and the charge of
		// 2^d would spend them for nothing).
		_ = v.str.ResetWithError(ErrCodeBusy)
		return nil, errNoSession{fmt.Errorf("%w: %s asks %d bits of proof of work, above the %d this node pays", ErrPayRefused, v.peer, d, s.cfg.MaxPowDifficulty)}
	}
	// The prover waits for the first probe from writing its ack (§6 step
	// 5); half the round-1 window (4 s by default) is the most this
	// spends (§5b).
	ctx, cancel := context.WithTimeout(v.ctx, roundOneWindow(s.cfg.HandshakeTimeout)/2)
	defer cancel()
	if !s.budgets.chargePay(v.peer, d, s.now()) {
		_ = v.str.ResetWithError(ErrCodeBusy)
		return nil, errNoSession{fmt.Errorf("%w: %s asks %d bits of proof of work: this node's payment budget is spent", ErrPayRefused, v.peer, d)}
	}
	release, ok := s.paySolver(ctx, v.requested())
	if !ok {
		// Nothing solved: the charge goes back.
		s.budgets.refundPay(v.peer, d, s.now())
		_ = v.str.ResetWithError(ErrCodeBusy)
		return nil, errNoSession{fmt.Errorf("%w: %s asks %d bits of proof of work while this node solves %d payments already", ErrPayRefused, v.peer, d, cap(s.paySolvers))}
	}
	defer release()
	pay, err := SolvePay(ctx, nonce, s.h.ID(), d, s.cfg.MaxPowDifficulty)
	if err != nil {
		_ = v.str.ResetWithError(ErrCodeBusy)
		return nil, errNoSession{fmt.Errorf("%w: %s: %w", ErrPayRefused, v.peer, err)}
	}
	return pay, nil
}

// maxPaySolves is how many payments (§5b) a verifier solves at once: half
// the cores the process may use, at least one. The payment budget bounds
// the hashes paid in an hour, not how fast they go: provers in mutual
// wait, which anyone can reach, could otherwise have the budget's
// unadmitted three quarters (about a minute of a core) solved on every
// core at once, and the node's own sessions wait behind them.
func maxPaySolves() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// paySolver takes one of the service's payment solvers and returns its
// release: at once when one is free, and for a verification the node's
// caller asked for (wait) when one frees before ctx ends. Otherwise it
// reports false, and the payment is refused and its charge given back.
func (s *Service) paySolver(ctx context.Context, wait bool) (func(), bool) {
	release := func() { <-s.paySolvers }
	select {
	case s.paySolvers <- struct{}{}:
		return release, true
	default:
	}
	if !wait {
		return nil, false
	}
	select {
	case s.paySolvers <- struct{}{}:
		return release, true
	case <-ctx.Done():
		return nil, false
	}
}

// requested reports whether this session's prover is paid up to the
// maximum (Config.Requested): a verification the node's caller asked for
// explicitly. Without the hook, a library Verify of a prover the node
// reached (no Contacted hook either) counts as requested.
func (v *verifierRun) requested() bool {
	if f := v.svc.cfg.Requested; f != nil {
		return f(v.peer)
	}
	return v.svc.cfg.Contacted == nil && !v.inbound
}

// totalSetDeadline reports whether T_total, not the round's budget, set a
// round's answer deadline (min(budget + credit, T_total - since +
// credit)): only when it is strictly earlier; on a tie the round's budget
// decides, and an unanswered round is a timeout (spec protocol.md §5
// step 5).
func totalSetDeadline(deadline, budget, credit time.Duration) bool {
	return deadline < budget+credit
}

// rounds delivers the challenges and judges the answers until the session
// has a verdict.
func (v *verifierRun) rounds() {
	s := v.svc
	var f pb.Frame
	for {
		// Next registers the challenge with the reflection guard before
		// the write (a peer that reflects at once must find it) and marks
		// the set seen.
		c, ok := v.vs.Next()
		if !ok {
			return
		}
		frame := &pb.Frame{Body: &pb.Frame_Challenge{Challenge: &pb.Challenge{
			Round: uint32(c.Round), Rounds: uint32(c.Rounds), Domain: c.Domain,
			Narrative: c.Narrative, Question: c.Question, BudgetMs: durToMs(c.Budget),
			Kind: skill.WireKind(c.Kind), // absent for narratives (1.0.0 bytes)
		}}}
		v.delivered.Store(true)
		writeStart := s.now()
		if err := v.write(frame); err != nil {
			// A partly written challenge counts as delivered; a prover
			// that stops reading it (its window full until the write
			// deadline) is no slow answerer: protocol_error, as any
			// stream failure once a challenge was written (spec §5
			// step 5).
			ferr := v.readErr("challenge write", err, false)
			var sf *sessionFailure
			if errors.As(ferr, &sf) && sf.reason == skill.ReasonTimeout {
				sf.reason, sf.detail = skill.ReasonProtocolError, "challenge not read within the write deadline: "+sf.detail
			}
			v.fail(ferr, true)
			return
		}
		// The round's clock starts when the write returned, but at most
		// maxChallengeWrite after it began: a Write on a flow-controlled
		// stream (QUIC) returns only once the prover gave credit for
		// nearly all of the frame, so a prover that read the narrative
		// and held its window open would start the clock when it liked.
		written := s.now()
		t0 := written
		if limit := writeStart.Add(maxChallengeWrite); written.After(limit) {
			t0 = limit
		}
		if c.Round == 1 {
			v.start = t0
		}
		since := t0.Sub(v.start)
		deadline := v.vs.AnswerDeadline(since)
		totalBound := totalSetDeadline(deadline, c.Budget, v.vs.Credit())
		err := v.read(&f, deadline+answerGrace-written.Sub(t0))
		t1 := s.now()
		// A round that ends without an answer keeps how long the verifier
		// waited (attestation.md §3: effective_ms of an unanswered round).
		waited := skill.Timing{Elapsed: t1.Sub(t0), RTT: v.rtt, SinceStart: t1.Sub(v.start)}
		if err == nil && v.isReflected() {
			// Only the subject's own Decline{REFLECTION} turns a reflected
			// session into declined (§7); any other frame is too late.
			if d := f.GetDecline(); d != nil && d.GetReason() == pb.DeclineReason_DECLINE_REASON_REFLECTION {
				v.failTimed(v.decline(d, false), waited)
			} else {
				v.failTimed(errReflected(), waited)
			}
			return
		}
		if err != nil {
			ferr := v.readErr(fmt.Sprintf("answer to round %d", c.Round), err, false)
			var sf *sessionFailure
			if errors.As(ferr, &sf) && sf.reason == skill.ReasonTimeout && totalBound {
				sf.reason = skill.ReasonTotalTimeout
				sf.detail = fmt.Sprintf("no answer to round %d before T_total %s ran out", c.Round, v.vs.Policy().Total)
			}
			// Record how long we waited, so the transcript shows it.
			v.failTimed(ferr, waited)
			return
		}
		switch b := f.GetBody().(type) {
		case *pb.Frame_Answer:
			if b.Answer.GetRound() != uint32(c.Round) {
				v.failTimed(failure(skill.ReasonProtocolError, ErrCodeProtocolViolation, "answer for round %d in round %d", b.Answer.GetRound(), c.Round), waited)
				return
			}
			rec, err := v.vs.Submit(b.Answer.GetAnswer(), waited)
			if err != nil {
				return
			}
			// Enabled first: the arguments alone allocate a few objects a
			// round, at a level that is usually off.
			if v.log.Enabled(context.Background(), slog.LevelDebug) {
				v.log.Debug("round judged", "round", rec.Round, "correct", rec.Correct,
					"elapsed", rec.Elapsed, "effective", rec.Effective, "budget", rec.Budget)
			}
		case *pb.Frame_Decline:
			v.failTimed(v.decline(b.Decline, false), waited)
			return
		default:
			v.failTimed(failure(skill.ReasonProtocolError, ErrCodeProtocolViolation, "expected answer, got %s", frameKind(&f)), waited)
			return
		}
	}
}

// NoChallengeDetail is the detail a remote prover gets for a session that
// ended inconclusive before a challenge set was drawn: the source's error
// (a corpus path, a model, a provider's message) stays in the node's log.
const NoChallengeDetail = "the verifier could not provide a challenge"

// finish sends the verdict of the finished core session and closes the
// stream.
func (v *verifierRun) finish(res *Result) (*Result, error) {
	s := v.svc
	verdict := res.Verdict
	if verdict.Reason == skill.ReasonInconclusive && v.ctx.Err() != nil {
		v.str.Reset() // cancelled: nothing more to say
		return res, nil
	}
	detail := verdict.Detail
	if v.vs.sess == nil {
		detail = NoChallengeDetail // keep source errors local
	}
	vf := &pb.Verdict{
		Accepted: verdict.Accepted, Reason: string(verdict.Reason),
		FailedRound: uint32(max(verdict.FailedRound, 0)), Detail: truncate(detail, MaxDeclineDetail),
		Attestation: res.Envelope,
	}
	for _, r := range verdict.Rounds {
		vf.Rounds = append(vf.Rounds, &pb.RoundResult{Round: uint32(r.Round), BudgetMs: durToMs(r.Budget),
			EffectiveMs: durToMs(r.Effective), ElapsedMs: durToMs(r.Elapsed), Correct: r.Correct})
	}
	if f := s.cfg.OnVerdict; f != nil {
		f(v.peer, res)
	}
	if err := v.write(&pb.Frame{Body: &pb.Frame_Verdict{Verdict: vf}}); err != nil {
		v.log.Debug("verdict not delivered", "err", err)
		v.str.Reset()
		return res, nil
	}
	if v.code != 0 {
		_ = v.str.ResetWithError(v.code)
		return res, nil
	}
	// Half-close and give the prover a moment to read the verdict and
	// close its side; it may still flush a late answer, nothing more.
	_ = v.str.CloseWrite()
	_ = v.str.SetReadDeadline(time.Now().Add(closeWait + s.cfg.Policy.RTTCredit))
	n, err := io.Copy(io.Discard, io.LimitReader(v.str, 4*MaxProverFrame))
	switch {
	case err == nil && n < 4*MaxProverFrame:
		_ = v.str.Close()
	case err == nil:
		_ = v.str.ResetWithError(ErrCodeProtocolViolation)
	case isTimeout(err):
		_ = v.str.ResetWithError(ErrCodeTimeout)
	default:
		_ = v.str.Reset()
	}
	return res, nil
}
