package peer

// Rate-limited log lines about peers (issue 10): a hostile peer can make
// the node log a warning per session it breaks off or per challenge it
// reflects, and an INFO line per first contact or gated stream it opens.
// warnPeer and infoPeer write at most one line per (peer, message) per
// warnEvery, the next one carrying how many were suppressed, and in total
// a burst of warnBurst lines, then about one line per warnRefill (one a
// second), so that a swarm of identities cannot flood the log either.
// WARN and INFO lines have budgets of their own: a flood of cheap INFO
// lines never crowds a warning out.

import (
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/lograte"
)

// The bounds, shared with the libraries' lines (internal/liblog).
const (
	warnEvery  = lograte.Every
	warnBurst  = lograte.Burst
	warnRefill = lograte.Refill
)

// linesHeldBack counts, in this process, the per-peer lines the limiters
// held back (written at DEBUG or not at all): the metric
// acaptcha_log_lines_suppressed_total{source="node"} with the protocol's
// (protocol.SuppressedLogLines).
var linesHeldBack atomic.Uint64

type warnKey struct {
	p   peer.ID
	msg string
}

// lineLimiter is the budget of one class of lines.
type lineLimiter struct{ lograte.Limiter[warnKey] }

// warnLimiter holds the budgets of a node's per-peer log lines: WARN
// lines (the embedded one) and INFO lines.
type warnLimiter struct {
	lineLimiter
	info lineLimiter
}

// allow decides whether a line for k is written now and returns how many
// were suppressed before it (for k, and in total); what it holds back is
// counted in linesHeldBack.
func (l *lineLimiter) allow(k warnKey, now time.Time) (ok bool, suppressed, dropped int) {
	ok, suppressed, dropped = l.Allow(k, now)
	if !ok {
		linesHeldBack.Add(1)
	}
	return ok, suppressed, dropped
}

// warnPeer logs a warning about p, rate-limited per peer and message and
// in total.
func (n *Node) warnPeer(p peer.ID, msg string, args ...any) {
	ok, suppressed, dropped := n.warns.allow(warnKey{p, msg}, time.Now())
	if !ok {
		return
	}
	n.log.Warn(msg, limitedArgs(p, suppressed, dropped, args)...)
}

// infoPeer logs an INFO line about p, rate-limited per peer and message
// and in total (a budget apart from the warnings'); a line over the rate
// goes to DEBUG instead.
func (n *Node) infoPeer(p peer.ID, msg string, args ...any) {
	ok, suppressed, dropped := n.warns.info.allow(warnKey{p, msg}, time.Now())
	if !ok {
		n.log.Debug(msg, limitedArgs(p, 0, 0, args)...)
		return
	}
	n.log.Info(msg, limitedArgs(p, suppressed, dropped, args)...)
}

func limitedArgs(p peer.ID, suppressed, dropped int, args []any) []any {
	args = append([]any{"peer", p}, args...)
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	if dropped > 0 {
		args = append(args, "suppressed_other_peers", dropped)
	}
	return args
}
