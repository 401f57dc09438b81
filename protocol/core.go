package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/skill"
)

// Verifier is the transport-free verifier of a Service: it draws a set
// for a peer that paid, runs the session (paper Algorithm 1: Begin, then
// per round Next and Submit, then Finish), gives back a set no challenge
// of which was delivered, and builds and signs the attestation. A front
// door (the libp2p stream handler in verifier.go, the HTTP gateway in
// peer/httpgw) only moves bytes and measures time on its own clock; the
// budgets, the proof of work, the reflection guard, the issue clock and
// the key are the Service's, shared by every door and by the prover side.
type Verifier struct{ s *Service }

// Core returns the service's transport-free verifier.
func (s *Service) Core() *Verifier { return &Verifier{s: s} }

// Self is the verifier's peer ID, the issuer of its attestations.
func (v *Verifier) Self() peer.ID { return v.s.h.ID() }

// Policy is the timing and round policy sessions run under.
func (v *Verifier) Policy() skill.Policy { return v.s.cfg.Policy }

// PowBase is the base proof of work in bits (Config.PowDifficulty, 0 for
// none): the least a session asks, unless BeginOptions.MinPowDifficulty
// is above it.
func (v *Verifier) PowBase() int { return max(v.s.cfg.PowDifficulty, 0) }

// PowMax is the most proof of work in bits a session asks
// (Config.MaxPowDifficulty): failures and load add to the base up to it,
// and a door's minimum is clamped to it.
func (v *Verifier) PowMax() int { return v.s.cfg.MaxPowDifficulty }

// BeginOptions are the options of Verifier.Begin.
type BeginOptions struct {
	// Reciprocal records that the session asks its subject to verify this
	// node back (the libp2p hello carries it).
	Reciprocal bool
	// Addr, when valid, is the subject's IP address as the door saw it:
	// the draw budget of its prefix applies (DrawPrefix). When invalid
	// the prefix of the subject's libp2p connection applies, if any.
	Addr netip.Addr
	// CountLoopback counts a loopback Addr in the prefix budget (as one
	// network, 127.0.0.0/24 or ::1's /48) even when Config.LimitLoopback
	// is off. A door whose loopback clients are a reverse proxy's (every
	// client behind an untrusted proxy is the proxy) sets it: loopback
	// is exempt by default for local libp2p peers, and the exemption
	// gave fresh peer IDs behind the proxy the node's whole draw budget
	// instead of one network's (spec/http.md §5).
	CountLoopback bool
	// MinPowDifficulty, when above Config.PowDifficulty, replaces it as
	// the base of the session's proof of work (failures and load still
	// add; capped by Config.MaxPowDifficulty): a door open to anonymous
	// clients asks more than the libp2p base.
	MinPowDifficulty int
	// PowFloor, when above the session's proof of work, replaces it
	// (capped by Config.MaxPowDifficulty): the libp2p verifier asks a
	// prover in mutual wait at least MutualWaitPayDifficulty, what it
	// may pay that prover (spec §5b, §5c).
	PowFloor int
	// DeferLoad counts the session in the node's outbound load (which
	// raises every peer's proof of work, §9a) only once its subject has
	// paid, not from Begin: a door that begins sessions for clients that
	// may never start them (the HTTP door's create) sets it, so that
	// unstarted sessions cannot raise the difficulty asked of everyone.
	DeferLoad bool
}

// VerifierSession is one session of a Verifier. It is not safe for
// concurrent use, except that the prover side may mark it reflected at any
// time (OnReflected).
type VerifierSession struct {
	svc    *Service
	peer   peer.ID
	opt    BeginOptions
	pfx    netip.Prefix
	hasPfx bool
	res    *Result
	pow    int
	paid   bool
	sess   *skill.Session // nil until paid, or when the source failed
	srcErr error
	rtt    time.Duration
	// shown is set when the first challenge is handed out: from then on
	// the set counts as seen.
	shown bool
	// issuedRound is the last round registered with the reflection guard.
	issuedRound int
	// answers are the answers as received, by round, for the transcript.
	answers     []string
	endOutbound func()
	ended       bool

	mu          sync.Mutex
	reflected   bool
	onReflected []func()
	digests     []*challengePrint // of the rounds issued so far
}

// Begin opens a session for subject. It draws nothing: it checks that
// this node can verify (ErrNoSource, ErrClosed) and that the draw budgets
// of the subject, of its prefix and of the node allow a draw
// (ErrPeerQuota), makes the session nonce and sets the proof-of-work
// difficulty (spec/protocol.md §5a). The session must end with Finish or
// Abort.
func (v *Verifier) Begin(subject peer.ID, opt BeginOptions) (*VerifierSession, error) {
	s := v.s
	if s.cfg.Source == nil {
		return nil, ErrNoSource
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	vs := &VerifierSession{svc: s, peer: subject, opt: opt, rtt: -1,
		res: &Result{Peer: subject, Started: s.now(), Nonce: make([]byte, NonceBytes)}}
	if _, err := io.ReadFull(s.random, vs.res.Nonce); err != nil {
		return nil, fmt.Errorf("acaptcha: session nonce: %w", err)
	}
	if opt.Addr.IsValid() {
		vs.pfx, vs.hasPfx = DrawPrefix(opt.Addr, s.cfg.LimitLoopback || opt.CountLoopback)
	} else {
		vs.pfx, vs.hasPfx = s.budgets.prefix(subject)
	}
	// Cost before work (spec §5a): a peer whose share is spent is not
	// even asked to pay.
	if !s.budgets.canDrawIn(subject, vs.pfx, vs.hasPfx, s.now()) {
		return nil, fmt.Errorf("%w: %s", ErrPeerQuota, subject)
	}
	if !opt.DeferLoad {
		vs.endOutbound = s.budgets.startOutbound()
	}
	vs.pow = s.budgets.difficulty(subject, s.now())
	// A door's minimum replaces the base: the subject's failures and the
	// node's load still add to it.
	if base := max(s.cfg.PowDifficulty, 0); opt.MinPowDifficulty > base {
		vs.pow = min(vs.pow-base+opt.MinPowDifficulty, s.cfg.MaxPowDifficulty)
	}
	vs.pow = max(vs.pow, min(opt.PowFloor, s.cfg.MaxPowDifficulty))
	return vs, nil
}

// Peer is the session's subject.
func (vs *VerifierSession) Peer() peer.ID { return vs.peer }

// Nonce is the session nonce (32 bytes).
func (vs *VerifierSession) Nonce() []byte { return vs.res.Nonce }

// PowDifficulty is the proof of work asked of the subject, in bits.
func (vs *VerifierSession) PowDifficulty() int { return vs.pow }

// Pay checks the subject's proof of work and, only if it pays, takes a
// draw of the budgets and draws the set (spec §5a). It returns ErrUnpaid
// (end the session with Abort: it counts as a failure of the subject) or
// ErrPeerQuota (Abort); a source failure is no error: the session is then
// Done and Finish reports it inconclusive.
func (vs *VerifierSession) Pay(ctx context.Context, pow []byte) error {
	s := vs.svc
	switch {
	case vs.ended:
		return fmt.Errorf("acaptcha: pay: session with %s has ended", vs.peer)
	case vs.paid:
		return fmt.Errorf("acaptcha: pay: session with %s is already paid", vs.peer)
	case s.ctx.Err() != nil:
		return ErrClosed
	}
	if !CheckPow(vs.res.Nonce, vs.peer, pow, vs.pow) {
		return fmt.Errorf("%w: %s: proof of work does not pay %d bits", ErrUnpaid, vs.peer, vs.pow)
	}
	// Paid: now, and only now, a set is drawn (within the shares).
	vs.paid = true
	if vs.opt.DeferLoad && vs.endOutbound == nil {
		vs.endOutbound = s.budgets.startOutbound()
	}
	if !s.budgets.takeDrawIn(vs.peer, vs.pfx, vs.hasPfx, s.now()) {
		return fmt.Errorf("%w: %s", ErrPeerQuota, vs.peer)
	}
	// The draw may wait for the source, but the prover waits for the
	// first probe only I = min(45 s, total_ms + 10 s) from the ack (spec
	// §5 step 1): the wait ends early enough for the probe to make it.
	dctx, cancel := context.WithTimeout(ctx, drawWait(&s.cfg))
	vs.sess, vs.srcErr = s.newSession(dctx)
	cancel()
	if vs.sess == nil {
		s.budgets.refundDrawIn(vs.peer, vs.pfx, vs.hasPfx, s.now())
		return nil
	}
	return nil
}

// drawWait is the longest a paid session waits for its set from reading
// the hello ack: the prover waits for the first probe only I = min(45 s,
// total_ms + 10 s) from writing it (spec §5 step 1). A verifier that
// solved the prover's payment first (§5b) spent part of it already
// (Verify passes Pay a context with that deadline).
func drawWait(c *Config) time.Duration {
	return max(min(DefaultIdleTimeout, c.Policy.Total+proverSlack)-firstProbeMargin, firstProbeMargin)
}

// Done reports whether the session has its verdict (or can have none but
// inconclusive: no set was drawn).
func (vs *VerifierSession) Done() bool { return vs.sess == nil || vs.sess.Done() }

// SetRTT records the measured round trip (the minimum over the probes).
func (vs *VerifierSession) SetRTT(d time.Duration) {
	vs.rtt = max(d, 0)
	vs.res.RTT = vs.rtt
	if vs.sess != nil {
		vs.res.Credit = vs.sess.Credit(vs.rtt)
	}
}

// Credit is the RTT credit subtracted from each round.
func (vs *VerifierSession) Credit() time.Duration {
	if vs.sess == nil {
		return 0
	}
	return vs.sess.Credit(vs.rtt)
}

// Policy is the session's policy.
func (vs *VerifierSession) Policy() skill.Policy { return vs.svc.cfg.Policy }

// Next returns the current round's challenge, or false once the session
// has its verdict. Call it right before delivering the challenge: it
// registers the challenge with the reflection guard (so that a peer that
// reflects it at once is caught) and marks the set seen.
func (vs *VerifierSession) Next() (skill.Challenge, bool) {
	if vs.sess == nil || vs.ended {
		return skill.Challenge{}, false
	}
	c, ok := vs.sess.Current()
	if !ok {
		return c, false
	}
	if c.Round != vs.issuedRound {
		s := vs.svc
		// Fingerprinted (§7) round by round, right before the round's
		// write: a peer that fails round 1 (a script, mostly) costs one
		// fingerprint, not one per round. The prover is not timed
		// between rounds, so the work there changes no verdict. A set its
		// source prepared has its narratives fingerprinted already.
		d := issuedPrint(vs.sess.Set(), c)
		vs.mu.Lock()
		vs.digests = append(vs.digests, d)
		vs.mu.Unlock()
		s.guard.issue(d, vs.peer, vs, s.now())
		vs.issuedRound = c.Round
	}
	vs.shown = true
	return c, true
}

// AnswerDeadline is how long to wait for the current round's answer from
// its delivery: budget plus credit, cut to what remains of T_total; since
// is the time from round 1's delivery to this round's.
func (vs *VerifierSession) AnswerDeadline(since time.Duration) time.Duration {
	if vs.sess == nil {
		return 0
	}
	return vs.sess.AnswerDeadline(vs.rtt, since)
}

// Submit judges the answer to the current round with the timing the door
// measured; the session is Done after a failed or the last round.
func (vs *VerifierSession) Submit(answer string, t skill.Timing) (skill.RoundRecord, error) {
	if vs.sess == nil || vs.ended {
		return skill.RoundRecord{}, fmt.Errorf("acaptcha: submit: no session running with %s", vs.peer)
	}
	vs.answers = append(vs.answers, answer)
	return vs.sess.Submit(answer, t)
}

// Fail ends the session without an answer to the current round (declined,
// protocol error, the verifier's own failure); delivered says the round's
// challenge was out.
func (vs *VerifierSession) Fail(reason skill.Reason, detail string, delivered bool) {
	if vs.sess != nil {
		vs.sess.Fail(reason, truncate(detail, MaxDeclineDetail), delivered)
	}
}

// FailRound ends the session while the current round's challenge was out,
// recording how long the verifier waited.
func (vs *VerifierSession) FailRound(reason skill.Reason, detail string, t skill.Timing) {
	if vs.sess != nil {
		vs.sess.FailRound(reason, truncate(detail, MaxDeclineDetail), t)
	}
}

// OnReflected registers f, called once (on the prover side's goroutine,
// which must not block) when a challenge of this session comes back to
// this node as a reflection (spec §7). A door ends the round
// protocol_error unless the subject declines the challenge as its own.
func (vs *VerifierSession) OnReflected(f func()) {
	vs.mu.Lock()
	if !vs.reflected {
		vs.onReflected = append(vs.onReflected, f)
		vs.mu.Unlock()
		return
	}
	vs.mu.Unlock()
	f()
}

// Reflected reports whether the session was found reflected.
func (vs *VerifierSession) Reflected() bool {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	return vs.reflected
}

// markReflected is called by the prover side (reflect.go).
func (vs *VerifierSession) markReflected() {
	vs.mu.Lock()
	if vs.reflected {
		vs.mu.Unlock()
		return
	}
	vs.reflected = true
	fs := vs.onReflected
	vs.onReflected = nil
	vs.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// issuedVerdict is the verdict as this node sends and signs it (spec
// protocol.md §3, attestation.md §3): failed_round is the number of the
// last delivered round of a rejection and 1 when no challenge was
// delivered (attestation.IssuedFailedRound); each answer is cut by CutAnswer for the transcript digest;
// the set is named by its content ID (skill.Set.ContentID), and not at
// all (no domain, no set_id) when no challenge of it was delivered, as it
// then goes back to the source unseen.
func (vs *VerifierSession) issuedVerdict(verdict skill.Verdict) skill.Verdict {
	verdict.FailedRound = IssuedFailedRound(verdict.Accepted, len(verdict.Rounds))
	verdict.Rounds = slices.Clone(verdict.Rounds)
	for i := range verdict.Rounds {
		r := &verdict.Rounds[i]
		if r.Answered && r.Round >= 1 && r.Round <= len(vs.answers) {
			r.Answer = CutAnswer(vs.answers[r.Round-1])
		} else {
			r.Answer = CutAnswer(r.Answer)
		}
	}
	verdict.SetID, verdict.Domain = "", ""
	if vs.sess != nil && vs.shown {
		set := vs.sess.Set()
		verdict.SetID, verdict.Domain = set.ContentID(), set.Domain
	}
	return verdict
}

// Finish ends the session and returns its result: the verdict as issued,
// consensus feedback told, the attestation built and signed (every
// verdict but inconclusive) with the issue clock, a set no challenge of
// which was delivered given back and its draw refunded, a rejection
// counted as a failure of the subject. A session still running ends
// inconclusive. Idempotent: later calls return the same result.
func (vs *VerifierSession) Finish() *Result {
	if vs.ended {
		return vs.res
	}
	s := vs.svc
	res := vs.res
	var verdict skill.Verdict
	if vs.sess == nil {
		detail := "no challenge set drawn"
		if vs.srcErr != nil {
			detail = vs.srcErr.Error()
		}
		verdict = skill.Verdict{Reason: skill.ReasonInconclusive, Detail: truncate(detail, MaxDeclineDetail)}
	} else {
		if !vs.sess.Done() {
			vs.sess.Fail(skill.ReasonInconclusive, "the session ended before its verdict", vs.shown)
		}
		verdict, _ = vs.sess.Verdict()
		if fb := s.cfg.Feedback; fb != nil && fb.Observe(vs.sess.Set(), verdict, vs.peer.String()) {
			s.log.Info("question retired by consensus feedback", "peer", vs.peer, "set", verdict.SetID, "round", verdict.FailedRound)
		}
	}
	verdict = vs.issuedVerdict(verdict)
	res.Verdict = verdict
	if vs.sess != nil {
		if a := NewAttestation(s.h.ID(), vs.peer, res.Nonce, vs.sess, verdict, s.issued.at(vs.peer, s.now()), s.cfg.AttestationTTL); a != nil {
			env, err := Seal(a, s.priv)
			if err != nil {
				s.log.Error("cannot seal attestation", "peer", vs.peer, "err", err)
			} else {
				res.Attestation, res.Envelope = a, env
			}
		}
	}
	res.Duration = s.now().Sub(res.Started)
	if s.log.Enabled(context.Background(), slog.LevelInfo) {
		args := []any{"peer", vs.peer, "accepted", verdict.Accepted, "reason", verdict.Reason,
			"failed_round", verdict.FailedRound, "detail", verdict.Detail, "rtt", res.RTT, "duration", res.Duration}
		if res.Envelope == nil {
			// Nothing signed (no set drawn, its draw refunded; the
			// verifier closing): nothing bounds how many a peer causes
			// but its proof of work, so the line passes the limiter of
			// remote-triggered lines. Signed verdicts, bounded by the
			// draw budgets, are logged each.
			s.infoRemote(s.log, "verification finished", args...)
		} else {
			s.log.Info("verification finished", args...)
		}
	}
	if !verdict.Accepted && verdict.Reason != skill.ReasonInconclusive {
		s.budgets.failed(vs.peer, s.now(), false)
	}
	vs.end()
	return res
}

// Abort ends a session that never ran (the subject did not pay, was busy,
// declined, fell silent before the first challenge; the door closed):
// nothing is signed, a drawn set goes back to the source and its draw is
// refunded; ErrUnpaid counts as a failure of the subject.
func (vs *VerifierSession) Abort(err error) {
	if vs.ended {
		return
	}
	if errors.Is(err, ErrUnpaid) {
		vs.svc.budgets.failed(vs.peer, vs.svc.now(), true)
	}
	vs.end()
}

// end releases what the session holds: an unseen set goes back, the guard
// forgets the session, the load counter drops. The draw is refunded only
// when nothing was signed: a verdict signed before any challenge was shown
// (a failed probe, a decline after the paid ack) still cost a signature
// and a stored record, and refunding its draw would let a peer have any
// number of them signed within its share.
func (vs *VerifierSession) end() {
	s := vs.svc
	vs.ended = true
	if vs.sess != nil && !vs.shown {
		s.giveBack(vs.sess.Set(), vs.peer)
		if vs.res == nil || vs.res.Attestation == nil {
			s.budgets.refundDrawIn(vs.peer, vs.pfx, vs.hasPfx, s.now())
		}
	}
	s.guard.release(vs)
	if vs.endOutbound != nil {
		vs.endOutbound()
		vs.endOutbound = nil
	}
}
