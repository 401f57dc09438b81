package protocol

import (
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// DefaultReflectionWindow is how long a node remembers the challenges it
// issued, to refuse them when they come back to it.
const DefaultReflectionWindow = 10 * time.Minute

// maxReflectionEntries bounds the reflection registry; the oldest entries
// are forgotten first.
const maxReflectionEntries = 8192

// reflectionGuard remembers the digests of the challenges this node issued
// as a verifier. A challenge that arrives at the prover side with a digest
// in the registry is a reflection: the peer that sent it wants this node's
// own answerer to solve this node's challenge for it (or for a third peer
// it is relaying to). The issuing session, if still running, is ended with
// a protocol_error verdict.
type reflectionGuard struct {
	mu      sync.Mutex
	window  time.Duration
	entries map[[32]byte]*issued
	order   []issuedRef // insertion order = expiry order (constant window)
	head    int
	next    uint64
}

type issued struct {
	to      peer.ID
	expires time.Time
	run     *verifierRun // nil once the session has ended
	seq     uint64
}

type issuedRef struct {
	digest [32]byte
	seq    uint64
}

func newReflectionGuard(window time.Duration) *reflectionGuard {
	return &reflectionGuard{window: window, entries: map[[32]byte]*issued{}}
}

// issue records a challenge about to be sent to peer p by run.
func (g *reflectionGuard) issue(d [32]byte, p peer.ID, run *verifierRun, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expireLocked(now)
	// Both the map and the queue (which also holds refs superseded by a
	// re-issue of the same digest) stay bounded.
	for len(g.entries) >= maxReflectionEntries || len(g.order)-g.head >= 2*maxReflectionEntries {
		g.popLocked()
	}
	g.next++
	g.entries[d] = &issued{to: p, expires: now.Add(g.window), run: run, seq: g.next}
	g.order = append(g.order, issuedRef{d, g.next})
}

// release detaches a finished session from its digests; they stay
// remembered until they expire.
func (g *reflectionGuard) release(run *verifierRun) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, d := range run.digests {
		if e, ok := g.entries[d]; ok && e.run == run {
			e.run = nil
		}
	}
}

// check reports whether d is a challenge this node issued within the
// window, and if so to whom and which session (nil if finished) issued it.
func (g *reflectionGuard) check(d [32]byte, now time.Time) (to peer.ID, run *verifierRun, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expireLocked(now)
	e, ok := g.entries[d]
	if !ok {
		return "", nil, false
	}
	return e.to, e.run, true
}

func (g *reflectionGuard) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.entries)
}

func (g *reflectionGuard) expireLocked(now time.Time) {
	for g.head < len(g.order) {
		ref := g.order[g.head]
		e, ok := g.entries[ref.digest]
		if ok && e.seq == ref.seq && now.Before(e.expires) {
			return
		}
		g.popLocked()
	}
}

// popLocked forgets the oldest entry and compacts the queue now and then.
func (g *reflectionGuard) popLocked() {
	if g.head >= len(g.order) {
		return
	}
	ref := g.order[g.head]
	g.order[g.head] = issuedRef{}
	g.head++
	if e, ok := g.entries[ref.digest]; ok && e.seq == ref.seq {
		delete(g.entries, ref.digest)
	}
	if g.head > 1024 && g.head*2 > len(g.order) {
		g.order = append([]issuedRef(nil), g.order[g.head:]...)
		g.head = 0
	}
}
