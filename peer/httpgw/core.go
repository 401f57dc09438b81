package httpgw

import (
	"context"
	"errors"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	apeer "github.com/acaptcha/acaptcha/peer"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// Core is the transport-free verifier the gateway drives: the node's
// protocol.Verifier, the same one the libp2p door runs over, so that the
// budgets, the proof of work, the reflection guard, the issue clock and
// the signing key are shared by both doors. The gateway only measures
// time on its own clock and moves bytes; it never judges or signs.
type Core interface {
	// Begin opens a session for subject without drawing anything: it
	// checks the draw budgets (protocol.ErrPeerQuota), makes the nonce
	// and sets the proof-of-work difficulty.
	Begin(subject peer.ID, opt BeginOptions) (CoreSession, error)
	// Self is the verifier's peer ID (the issuer of its attestations).
	Self() peer.ID
	// Policy is the timing and round policy sessions run under.
	Policy() skill.Policy
}

// BeginOptions are the options of Core.Begin: the client's IP address
// (Addr; the draw budget of its prefix applies, since peer IDs cost
// nothing over HTTP) and the door's least proof of work.
type BeginOptions = protocol.BeginOptions

// CoreSession is one verifier session of the core (protocol.VerifierSession).
// It is not safe for concurrent use: the gateway holds the session's lock
// around every call.
type CoreSession interface {
	Nonce() []byte
	PowDifficulty() int
	// Pay checks the proof of work (protocol.ErrUnpaid), takes a draw
	// (protocol.ErrPeerQuota) and draws the set; a source failure makes
	// the session inconclusive (Done), not an error.
	Pay(ctx context.Context, pow []byte) error
	// Done reports that the session has its verdict (no set could be
	// drawn, a round failed, or the last round passed).
	Done() bool
	SetRTT(d time.Duration)
	// Credit is the RTT credit applied to each round.
	Credit() time.Duration
	// Next returns the current round's challenge and registers it with
	// the reflection guard; call it right before delivering it.
	Next() (skill.Challenge, bool)
	// AnswerDeadline is how long to wait for the current answer, since
	// being the time from round 1's delivery to this round's.
	AnswerDeadline(since time.Duration) time.Duration
	Submit(answer string, t skill.Timing) (skill.RoundRecord, error)
	Fail(reason skill.Reason, detail string, delivered bool)
	FailRound(reason skill.Reason, detail string, t skill.Timing)
	// OnReflected registers f, called (once, on another goroutine) when
	// the session's challenge came back to this node as a reflection.
	OnReflected(f func())
	// Finish ends the session: verdict, signed attestation (not for
	// inconclusive), unseen set given back. Idempotent.
	Finish() *protocol.Result
	// Abort ends a session that never ran: nothing is signed, the set
	// (if drawn) goes back and its draw is refunded.
	Abort(err error)
}

// nodeCore is the node's protocol.Verifier as a Core.
type nodeCore struct{ v *protocol.Verifier }

func (c nodeCore) Begin(subject peer.ID, opt BeginOptions) (CoreSession, error) {
	vs, err := c.v.Begin(subject, opt)
	if err != nil {
		return nil, err
	}
	return vs, nil
}

func (c nodeCore) Self() peer.ID        { return c.v.Self() }
func (c nodeCore) Policy() skill.Policy { return c.v.Policy() }

// PowBase is the node's base proof of work (Gateway.MinPowDifficulty).
func (c nodeCore) PowBase() int { return c.v.PowBase() }

// PowMax is the most proof of work the node asks (Gateway.MaxPowDifficulty).
func (c nodeCore) PowMax() int { return c.v.PowMax() }

var _ CoreSession = (*protocol.VerifierSession)(nil)

// ForNode builds the HTTP door of a running node: sessions run on the
// node's verifier (the one its libp2p protocol runs over), records are
// issued as the node issues its own, and the manifest names the node's
// addresses and admission minimum. cfg's other fields are as for New.
func ForNode(d apeer.Door, cfg Config) (*Gateway, error) {
	v := d.Verifier()
	if v == nil {
		return nil, errors.New("httpgw: the node has no verifier")
	}
	cfg.Core = nodeCore{v: v}
	cfg.OnIssued = d.Issued
	cfg.Addrs = d.Addrs
	cfg.RequireSource = d.RequireSource()
	return New(cfg)
}
