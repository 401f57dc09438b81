package liblog

// A remote peer can make a library log at its default level (error):
// go-libp2p's identify writes an ERROR "received key for remote peer
// mismatch" for every identify message, a reply or a push, whose public
// key is not the sending peer's. A reply comes once per connection, and
// identify rate-limits pushes per network prefix but not at all from
// loopback, so a peer repeating a bad push, or reconnecting under fresh
// identities, had the node write one line per attempt, with no bound.
//
// So every library record at INFO or above passes a limiter, the one the
// node's own lines about peers pass (internal/lograte): one line per
// (subsystem, message, peer) per sameEvery, the next one carrying how many
// were held back ("suppressed"), and in total a burst of limitBurst lines,
// then one a second, so that a swarm of identities cannot flood the log
// either (the next line written carries "suppressed_other"). A held-back record still goes to the handler at
// DEBUG (a node run at --log-level debug sees them all), and Suppressed
// counts them (metric acaptcha_log_lines_suppressed_total).

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/acaptcha/acaptcha/internal/lograte"
)

// The bounds of the node's own lines about peers.
const (
	sameEvery  = lograte.Every
	limitBurst = lograte.Burst
)

type limitKey struct {
	system, msg, peer string
}

type limiter = lograte.Limiter[limitKey]

var (
	lim        limiter
	suppressed atomic.Uint64
	// now is the limiter's clock; tests replace it.
	now = time.Now
)

// Suppressed returns how many library records at INFO or above were held
// back by the rate limit (and went to DEBUG instead) in this process.
func Suppressed() uint64 { return suppressed.Load() }

// limit passes r through the libraries' limiter (limitWith).
func limit(system string, r slog.Record) (out slog.Record, held bool) {
	return limitWith(&lim, system, r)
}

// limitWith passes r through l: it returns r to write, with the counts
// of held-back lines added, or r at DEBUG when it is held back (held
// true).
func limitWith(l *limiter, system string, r slog.Record) (out slog.Record, held bool) {
	if r.Level < slog.LevelInfo {
		return r, false
	}
	k := limitKey{system: system, msg: r.Message, peer: peerOf(r)}
	ok, same, other := l.Allow(k, now())
	if !ok {
		suppressed.Add(1)
		d := slog.NewRecord(r.Time, slog.LevelDebug, r.Message, r.PC)
		r.Attrs(func(a slog.Attr) bool { d.AddAttrs(a); return true })
		d.AddAttrs(slog.String("level_held_back", r.Level.String()))
		return d, true
	}
	if same > 0 || other > 0 {
		r = r.Clone()
		if same > 0 {
			r.AddAttrs(slog.Int("suppressed", same))
		}
		if other > 0 {
			r.AddAttrs(slog.Int("suppressed_other", other))
		}
	}
	return r, false
}

// peerOf returns the remote peer a library record is about: its "peer"
// or "remote_peer" attribute (go-libp2p's names), else "".
func peerOf(r slog.Record) string {
	var p string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "remote_peer", "peer":
			p = a.Value.String()
			return a.Key != "remote_peer" // remote_peer wins over peer
		}
		return true
	})
	return p
}
