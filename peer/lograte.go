package peer

// Rate-limited WARN lines (issue 10): a hostile peer can make the node
// log a warning per session it breaks off or per challenge it reflects.
// warnPeer writes at most one line per (peer, message) per warnEvery, the
// next one carrying how many were suppressed, and at most warnBurst lines
// per second-ish in total, so that a swarm of identities cannot flood the
// log either.

import (
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

const (
	warnEvery   = time.Minute
	warnTracked = 4096
	warnBurst   = 20
	warnRefill  = 100 * time.Millisecond
)

type warnKey struct {
	p   peer.ID
	msg string
}

type warnEntry struct {
	at         time.Time
	suppressed int
}

type warnLimiter struct {
	mu     sync.Mutex
	last   map[warnKey]*warnEntry
	global tokenBucket
	// dropped counts lines suppressed by the global bound since the last
	// line written.
	dropped int
}

// allow decides whether a line for k is written now and returns how many
// were suppressed before it (for k, and in total).
func (l *warnLimiter) allow(k warnKey, now time.Time) (ok bool, suppressed, dropped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[warnKey]*warnEntry{}
	}
	e := l.last[k]
	if e != nil && now.Sub(e.at) < warnEvery {
		e.suppressed++
		return false, 0, 0
	}
	l.global.refill(now, warnBurst, warnRefill)
	if l.global.tokens < 1 {
		l.dropped++
		return false, 0, 0
	}
	if e == nil {
		if len(l.last) >= warnTracked {
			for q, qe := range l.last {
				if now.Sub(qe.at) >= warnEvery {
					delete(l.last, q)
				}
			}
		}
		if len(l.last) >= warnTracked {
			l.dropped++
			return false, 0, 0
		}
		e = &warnEntry{}
		l.last[k] = e
	}
	l.global.tokens--
	suppressed, dropped = e.suppressed, l.dropped
	e.at, e.suppressed, l.dropped = now, 0, 0
	return true, suppressed, dropped
}

// warnPeer logs a warning about p, rate-limited per peer and message and
// in total.
func (n *Node) warnPeer(p peer.ID, msg string, args ...any) {
	ok, suppressed, dropped := n.warns.allow(warnKey{p, msg}, time.Now())
	if !ok {
		return
	}
	args = append([]any{"peer", p}, args...)
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	if dropped > 0 {
		args = append(args, "suppressed_other_peers", dropped)
	}
	n.log.Warn(msg, args...)
}
