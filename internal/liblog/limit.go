package liblog

// A remote peer can make a library log at its default level (error):
// go-libp2p's identify writes an ERROR "received key for remote peer
// mismatch" for every identify message, a reply or a push, whose public
// key is not the sending peer's. A reply comes once per connection, and
// identify rate-limits pushes per network prefix but not at all from
// loopback, so a peer repeating a bad push, or reconnecting under fresh
// identities, had the node write one line per attempt, with no bound.
//
// So every library record at INFO or above passes a limiter: one line
// per (subsystem, message, peer) per sameEvery, the next one carrying
// how many were held back ("suppressed"), and in total a burst of
// limitBurst lines, then one per limitRefill, so that a swarm of
// identities cannot flood the log either (the next line written carries
// "suppressed_other"). A held-back record still goes to the handler at
// DEBUG (a node run at --log-level debug sees them all), and Suppressed
// counts them (metric acaptcha_log_lines_suppressed_total).

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

const (
	sameEvery    = time.Minute
	limitTracked = 4096
	limitBurst   = 20
	limitRefill  = time.Second
)

type limitKey struct {
	system, msg, peer string
}

type limitEntry struct {
	at         time.Time
	suppressed int
}

type limiter struct {
	mu      sync.Mutex
	last    map[limitKey]*limitEntry
	tokens  float64
	filled  time.Time
	dropped int // held back by the total bound since the last line written
}

var (
	lim        limiter
	suppressed atomic.Uint64
	// now is the limiter's clock; tests replace it.
	now = time.Now
)

// Suppressed returns how many library records at INFO or above were held
// back by the rate limit (and went to DEBUG instead) in this process.
func Suppressed() uint64 { return suppressed.Load() }

// allow decides whether a record of k is written at t, and how many
// were held back before it (for k, and for other keys in total).
func (l *limiter) allow(k limitKey, t time.Time) (ok bool, same, other int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[limitKey]*limitEntry{}
		l.tokens, l.filled = limitBurst, t
	}
	e := l.last[k]
	if e != nil && t.Sub(e.at) < sameEvery {
		e.suppressed++
		return false, 0, 0
	}
	if d := t.Sub(l.filled); d > 0 {
		l.tokens = min(limitBurst, l.tokens+float64(d)/float64(limitRefill))
		l.filled = t
	}
	if l.tokens < 1 {
		l.dropped++
		return false, 0, 0
	}
	if e == nil {
		if len(l.last) >= limitTracked {
			for q, qe := range l.last {
				if t.Sub(qe.at) >= sameEvery {
					delete(l.last, q)
				}
			}
		}
		if len(l.last) >= limitTracked {
			l.dropped++
			return false, 0, 0
		}
		e = &limitEntry{}
		l.last[k] = e
	}
	l.tokens--
	same, other = e.suppressed, l.dropped
	e.at, e.suppressed, l.dropped = t, 0, 0
	return true, same, other
}

// limit passes r through the limiter: it returns r to write, with the
// counts of held-back lines added, or r at DEBUG when it is held back
// (held true).
func limit(system string, r slog.Record) (out slog.Record, held bool) {
	if r.Level < slog.LevelInfo {
		return r, false
	}
	k := limitKey{system: system, msg: r.Message, peer: peerOf(r)}
	ok, same, other := lim.allow(k, now())
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
