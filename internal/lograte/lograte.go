// Package lograte bounds the log lines that remote peers can cause: the
// node's own lines about a peer (peer.warnPeer, peer.infoPeer) and the
// libraries' lines (internal/liblog) alike. A Limiter writes at most one
// line per key (a peer and a message) per Every, the next one carrying how
// many were held back, and in total a burst of Burst lines, then one per
// Refill, so that a swarm of identities cannot flood the log either. It
// remembers at most Tracked keys; while all of them are recent, a new key
// is held back as over the total bound.
package lograte

import (
	"sync"
	"time"
)

const (
	// Every is how often one key may write a line.
	Every = time.Minute
	// Tracked bounds the keys a Limiter remembers.
	Tracked = 4096
	// Burst is how many lines all keys together may write at once.
	Burst = 20
	// Refill is the sustained rate after the burst: one line a second.
	Refill = time.Second
)

// Limiter is the budget of one class of lines; its zero value is ready.
type Limiter[K comparable] struct {
	mu     sync.Mutex
	last   map[K]*entry
	tokens float64
	filled time.Time
	// dropped counts lines held back by the total bound since the last
	// line written.
	dropped int
}

type entry struct {
	at         time.Time
	suppressed int
}

// Allow decides whether a line for k is written at now, and returns how
// many were held back before it: for k (same), and for other keys by the
// total bound (other). A line not allowed is counted into the next one.
func (l *Limiter[K]) Allow(k K, now time.Time) (ok bool, same, other int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[K]*entry{}
		l.tokens, l.filled = Burst, now
	}
	e := l.last[k]
	if e != nil && now.Sub(e.at) < Every {
		e.suppressed++
		return false, 0, 0
	}
	if d := now.Sub(l.filled); d > 0 {
		l.tokens = min(Burst, l.tokens+float64(d)/float64(Refill))
		l.filled = now
	}
	if l.tokens < 1 {
		l.dropped++
		return false, 0, 0
	}
	if e == nil {
		if len(l.last) >= Tracked {
			for q, qe := range l.last {
				if now.Sub(qe.at) >= Every {
					delete(l.last, q)
				}
			}
		}
		if len(l.last) >= Tracked {
			l.dropped++
			return false, 0, 0
		}
		e = &entry{}
		l.last[k] = e
	}
	l.tokens--
	same, other = e.suppressed, l.dropped
	e.at, e.suppressed, l.dropped = now, 0, 0
	return true, same, other
}

// Len is the number of keys l remembers.
func (l *Limiter[K]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.last)
}
