package peer

// First contact: the node attests peers by itself when they connect.
//
// It follows the "reacting to peers" convention of go-libp2p-pubsub: it
// subscribes to EvtPeerIdentificationCompleted on the host's event bus,
// acts only on peers that list the attestation protocol, seeds itself with
// the peers already connected at start-up and deduplicates its work per
// peer ID. Nothing here runs inside a Notifiee callback.
//
// For a peer that the node does not admit yet and whose connection
// direction matches Config.AttestPolicy, a worker:
//  1. presents the attestations this node holds to the peer, so that the
//     peer's own first contact can admit us without a challenge;
//  2. with Config.TrustQuorum > 0 and enough directly verified issuers,
//     gives gossip and the peer's presentation a short bounded moment and
//     stops if the peer is now admitted through the quorum;
//  3. otherwise runs one verifier session (reciprocal=false: the peer's own
//     first contact verifies us, so two nodes that meet run exactly one
//     session per direction; n.verify deduplicates overlaps) under a
//     semaphore of Config.MaxConcurrentAttest.
//
// A rejected peer is not challenged again before Config.RetryRejected has
// passed, doubling per consecutive rejection up to 24 h; the back-off
// survives a restart through the rejected attestation in the store. A
// session that could not run (peer busy, network failure, inconclusive)
// is retried with a back-off from 2 s doubling to a minute, as long as the
// peer stays connected. An admitted peer that stays
// connected is attested again Config.ReattestBefore before our attestation
// of it expires (but not before half its lifetime), found by a rescan of
// the connected peers at least every 30 s.
//
// Abuse resistance (issue 10):
//   - A hello asking us to verify the peer back (reciprocal) goes through
//     the same per-peer state: onReciprocal returns at once; it is dropped
//     while a session with the peer is in flight (its verdict reaches the
//     peer after it asked), while the peer is backing off (failures,
//     Config.RetryRejected) and while our valid attestation of it holds;
//     otherwise it sets a per-peer pending flag served by the peer's one
//     worker, under the same semaphore. Reciprocal requests work with any
//     AttestPolicy, AttestNone included. Our HelloAck tells the peer what
//     became of its request (spec/protocol.md §1a), so a dropped one costs
//     it no wait.
//   - Silent peers get a short leash: a session holds one of the
//     MaxConcurrentAttest slots only until the peer answers our hello
//     with a complete frame (leash.go); one that has not answered within
//     contactLeash of the stream's open starting (the open included)
//     gives its slot up (the session
//     runs on to its handshake timeout without one), and the peer is
//     marked silent: its later attempts wait for the single probation
//     slot, so silent peers never queue honest ones behind them.
//   - Fresh peer IDs cost nothing, so the network of a peer that fell
//     silent (its IPv4 /24 or IPv6 /48, and an IPv6 /32 once
//     contactSilentBlockNets of its /48s have) is marked too, for
//     contactSilentNetFor: new peers from it get the probation slot only
//     if it is free at once, and otherwise retry later, so that they
//     neither take the shared slots nor pile up workers. Loopback is
//     exempt unless Config.LimitLoopback, as for the protocol's prefix
//     budgets.
//   - The workers (one per peer, queued or running) are bounded in total
//     (maxContactWorkers) and per network (maxContactWorkersPerNet, an
//     IPv6 /32 twice that): fresh peer IDs of one network cannot hold
//     every worker while the session slots are taken.
//   - The INFO lines of a session that starts or does not run are
//     rate-limited per peer and in total (infoPeer, lograte.go).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	lpproto "github.com/libp2p/go-libp2p/core/protocol"

	"github.com/acaptcha/acaptcha/internal/bounded"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// Defaults of the first-contact knobs of Config.
const (
	DefaultRetryRejected       = time.Hour
	MaxRetryRejected           = 24 * time.Hour
	DefaultReattestBefore      = time.Hour
	DefaultMaxConcurrentAttest = 4
)

// Timing of first contact (variables so tests can shorten them).
var (
	contactQuorumPoll = 50 * time.Millisecond
	// contactPresentTimeout bounds presenting our attestations to a peer.
	contactPresentTimeout = 10 * time.Second
	// Transient failures (busy prover, network, inconclusive) are retried
	// after contactTransientBackoff, doubling up to contactTransientMax, for
	// as long as the peer stays connected; past contactTransientTries in a
	// row the node warns.
	contactTransientBackoff = 2 * time.Second
	contactTransientMax     = time.Minute
	contactTransientTries   = 6
)

// Probation of silent networks.
const (
	// contactSilentNetFor is how long the network of a peer that fell
	// silent in first contact stays in probation after its last silence.
	contactSilentNetFor = 10 * time.Minute
	// contactSilentBlockNets is how many /48s of one IPv6 /32 must have
	// fallen silent for the whole /32 to be in probation (one holder of a
	// /32 has 65,536 /48s).
	contactSilentBlockNets = 4
	// contactSilentNetsTracked bounds the networks remembered; a full
	// table forgets a sixteenth at once, those out of probation first.
	contactSilentNetsTracked = 4096
)

// ParseAttestPolicy parses a policy name; the empty string is AttestNone.
func ParseAttestPolicy(s string) (AttestPolicy, error) {
	switch p := AttestPolicy(s); p {
	case "":
		return AttestNone, nil
	case AttestNone, AttestAll, AttestInbound, AttestOutbound:
		return p, nil
	}
	return "", fmt.Errorf("attest policy %q: want all, inbound, outbound or none", s)
}

// matches reports whether the policy attests a peer connected to us in
// direction dir.
func (p AttestPolicy) matches(dir network.Direction) bool {
	switch p {
	case AttestAll:
		return true
	case AttestInbound:
		return dir == network.DirInbound
	case AttestOutbound:
		return dir == network.DirOutbound
	}
	return false
}

type contactState struct {
	policy         AttestPolicy
	retryRejected  time.Duration
	reattestBefore time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sub    event.Subscription
	sem    chan struct{}
	// probation is the one slot for peers that fell silent before.
	probation chan struct{}
	// kick asks the maintenance loop for an early rescan.
	kick chan struct{}
	// rescans counts the maintenance loop's rescans (tests).
	rescans atomic.Int64
	// started counts the workers started (tests: a worker that finds
	// nothing to do ends at once, so active alone cannot show it ran).
	started atomic.Int64

	mu sync.Mutex
	// active holds the peers a worker is handling (queued or running).
	active map[peer.ID]bool
	// backoff holds peers that must not be challenged before a time.
	backoff map[peer.ID]*contactBackoff
	// verified are the peers we accepted directly, with the expiry of our
	// attestation: the most issuers a quorum can have. It is loaded from
	// the store at start and kept current by our sessions and by what
	// first contact reads about each peer.
	verified map[peer.ID]time.Time
	nextWake time.Time
	// recip marks peers with a pending reciprocal request (served by the
	// peer's active worker when it is done).
	recip map[peer.ID]bool
	// workersIn counts the workers of active by the network (and IPv6
	// /32) of their peer's connection when they started: at most
	// maxContactWorkersPerNet each (twice that for a /32).
	workersIn map[netip.Prefix]int
	// leashes are the sessions waiting for the peer's first answer.
	leashes map[peer.ID]*leash
	// silentNets are the networks in probation (nil until the first
	// silence).
	silentNets map[netip.Prefix]*silentNet
	// slipping counts, per network, the first-contact sessions whose
	// peer is silent past the leash right now (leash.go).
	slipping map[netip.Prefix]int
	// ready is set once the state above exists (reciprocal requests can
	// arrive while the node starts).
	ready atomic.Bool
}

type contactBackoff struct {
	until     time.Time
	rejected  int // consecutive rejections
	transient int // consecutive sessions that could not run
	reason    string
	// silent: the peer's last session did not hear it answer the hello
	// within the leash (or it was unresponsive); it waits for probation.
	silent bool
	// deferred counts the attempts put off because the peer's network is
	// in probation and the probation slot was taken.
	deferred int
	// verifyFirst counts the peer's VERIFY_FIRST declines in a row that
	// said it verifies us (spec §5c); waitingFirst marks until as a timer
	// to ask again after one, not a back-off from the peer.
	verifyFirst  int
	waitingFirst bool
}

// rejectBackoffLocked backs off from p as from a rejection without a
// record (a decline at the hello): retryRejected doubling per one in a
// row, at most MaxRetryRejected. c.mu is held.
func (c *contactState) rejectBackoffLocked(p peer.ID, b *contactBackoff, now time.Time, reason string) time.Duration {
	b.transient, b.silent = 0, false
	b.rejected++
	d := c.retryRejected << min(b.rejected-1, 30)
	if d <= 0 || d > MaxRetryRejected {
		d = MaxRetryRejected
	}
	b.until, b.reason = now.Add(d), reason
	c.putBackoffLocked(p, b, now)
	return d
}

// maxContactBackoffs bounds the back-off table. A peer's entry lives as
// long as it stays connected, and a rejection's (or a decline's at the
// hello, which signs nothing and charges no budget) a day past its end
// once the peer has gone, so fresh peer IDs that decline our hello and
// leave would otherwise grow it by one entry each for 25 hours. A full
// table forgets a sixteenth at once, back-offs that have ended first,
// then any: a forgotten peer is challenged again at the next rescan,
// where a stored rejection backs it off again (needsChallenge).
const maxContactBackoffs = 1 << 16

// putBackoffLocked stores p's back-off, making room in a full table;
// c.mu is held.
func (c *contactState) putBackoffLocked(p peer.ID, b *contactBackoff, now time.Time) {
	if _, ok := c.backoff[p]; !ok {
		bounded.MakeRoom(c.backoff, maxContactBackoffs, func(b *contactBackoff) bool { return !now.Before(b.until) })
	}
	c.backoff[p] = b
}

// verifyFirstTries bounds the VERIFY_FIRST declines saying WILL (or BUSY)
// that a peer gets in a row before first contact backs off from it as
// from a rejection: a peer that says so and never verifies us would
// otherwise be asked every half minute for as long as it stays.
const verifyFirstTries = 8

// verifyFirstQuickRetry is how soon the node with the lower peer ID of
// two that verify first asks again after a VERIFY_FIRST.
const verifyFirstQuickRetry = 5 * time.Second

// verifiedUsRetry is how soon, jittered, a node asks again a peer that
// declined its session VERIFY_FIRST and has since accepted it in a
// session of its own (verifiedUs): long enough for the peer to have
// stored its record, which its answer looks up.
const verifiedUsRetry = time.Second

// verifiedUs brings forward the session back to p when p, which had
// declined ours VERIFY_FIRST saying it would verify us (waitingFirst),
// has now accepted us: from now on it answers us (spec §5c). Without it
// the node with the higher peer ID of two verify-first nodes that asked
// each other at once waited out its verifyFirstRetry (22-38 s) after
// the other had verified it, the pair attested one way only meanwhile.
// A peer gets here by running a whole session with us, and a back-off
// from a rejection or a failure is never shortened.
func (n *Node) verifiedUs(p peer.ID) {
	c := &n.contact
	now := time.Now()
	at := now.Add(jitter(verifiedUsRetry))
	c.mu.Lock()
	b := c.backoff[p]
	soon := b != nil && b.waitingFirst && b.until.After(at)
	if soon {
		b.until = at
	}
	c.mu.Unlock()
	if soon {
		n.wakeAt(at)
		n.log.Debug("first contact: peer that verifies first accepted us; asking it again soon", "peer", p, "retry_in", at.Sub(now))
	}
}

// silentNet is a network in probation: until when, and for an IPv6 /32
// how many of its /48s fell silent meanwhile.
type silentNet struct {
	until time.Time
	nets  int
}

// markSilentNets puts the networks of a peer that fell silent in
// probation from now.
func (n *Node) markSilentNets(nets addrNets, now time.Time) {
	if !nets.prefix.IsValid() {
		return
	}
	c := &n.contact
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.silentNets == nil {
		c.silentNets = map[netip.Prefix]*silentNet{}
	}
	until := now.Add(contactSilentNetFor)
	entry := func(k netip.Prefix) (e *silentNet, fresh bool) {
		e = c.silentNets[k]
		if e == nil {
			bounded.MakeRoom(c.silentNets, contactSilentNetsTracked, func(e *silentNet) bool { return !now.Before(e.until) })
			e = &silentNet{}
			c.silentNets[k] = e
		}
		if fresh = !now.Before(e.until); fresh {
			e.nets = 0
		}
		e.until = until
		return e, fresh
	}
	if _, fresh := entry(nets.prefix); fresh && nets.block.IsValid() {
		b, _ := entry(nets.block)
		b.nets++
	} else if nets.block.IsValid() {
		entry(nets.block)
	}
}

// inSilentNets reports whether nets are in probation at now.
func (n *Node) inSilentNets(nets addrNets, now time.Time) bool {
	if !nets.prefix.IsValid() {
		return false
	}
	c := &n.contact
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.silentNets[nets.prefix]; e != nil && now.Before(e.until) || c.slipping[nets.prefix] > 0 {
		return true
	}
	if !nets.block.IsValid() {
		return false
	}
	e := c.silentNets[nets.block]
	return e != nil && now.Before(e.until) && e.nets >= contactSilentBlockNets
}

// peerNets are the network groups of p's connection: a direct one first
// (sessions run on those), else a relayed one (its relay's group); none
// when p is not connected, or on loopback unless Config.LimitLoopback.
func (n *Node) peerNets(p peer.ID) addrNets {
	if n.host == nil {
		return addrNets{}
	}
	return hostPeerNets(n.host, p, n.cfg.LimitLoopback)
}

// hostPeerNets is peerNets on host h.
func hostPeerNets(h host.Host, p peer.ID, limitLoopback bool) addrNets {
	var relayed addrNets
	for _, conn := range h.Network().ConnsToPeer(p) {
		remote := conn.RemoteMultiaddr()
		nets, known := netsOf(remote, limitLoopback)
		switch _, viaRelay := protocol.CircuitRelay(remote); {
		case !known:
		case !viaRelay:
			return nets
		case !relayed.prefix.IsValid():
			relayed = nets
		}
	}
	return relayed
}

// deferContact puts off a first contact with p whose network is in
// probation while the probation slot is taken; it returns the delay.
func (n *Node) deferContact(p peer.ID, now time.Time) time.Duration {
	c := &n.contact
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.backoff[p]
	if b == nil {
		b = &contactBackoff{}
	}
	b.deferred++
	d := jitter(min(contactTransientBackoff<<min(b.deferred-1, 30), contactTransientMax))
	b.until, b.reason = now.Add(d), "network in probation, probation slot taken"
	c.putBackoffLocked(p, b, now)
	return d
}

func (n *Node) startContact() error {
	c := &n.contact
	pol, err := ParseAttestPolicy(string(n.cfg.AttestPolicy))
	if err != nil {
		return err
	}
	c.policy = pol
	c.retryRejected = n.cfg.RetryRejected
	if c.retryRejected <= 0 {
		c.retryRejected = DefaultRetryRejected
	}
	c.reattestBefore = n.cfg.ReattestBefore
	if c.reattestBefore <= 0 {
		c.reattestBefore = DefaultReattestBefore
	}
	conc := n.cfg.MaxConcurrentAttest
	if conc <= 0 {
		conc = DefaultMaxConcurrentAttest
	}
	if n.cfg.Source == nil {
		if pol != AttestNone {
			n.log.Warn("first contact is on but this node has no challenge source; it will not attest peers", "policy", pol)
		}
		return nil
	}
	// The per-peer state and the worker run with every policy: they also
	// serve reciprocal requests.
	c.sem = make(chan struct{}, conc)
	c.probation = make(chan struct{}, 1)
	c.kick = make(chan struct{}, 1)
	c.active = map[peer.ID]bool{}
	c.backoff = map[peer.ID]*contactBackoff{}
	c.verified = map[peer.ID]time.Time{}
	c.recip = map[peer.ID]bool{}
	c.workersIn = map[netip.Prefix]int{}
	c.leashes = map[peer.ID]*leash{}
	c.ctx, c.cancel = context.WithCancel(n.ctx)
	n.loadVerified(time.Now())
	c.ready.Store(true)
	c.wg.Add(1)
	go n.contactMaintain()
	if pol == AttestNone {
		return nil
	}
	// Subscribe before seeding, so a peer identified in between is seen
	// at least once (the per-peer dedupe absorbs the second sighting).
	sub, err := n.host.EventBus().Subscribe(new(event.EvtPeerIdentificationCompleted))
	if err != nil {
		c.cancel()
		c.wg.Wait()
		return fmt.Errorf("first contact: subscribe to identification events: %w", err)
	}
	c.sub = sub
	c.wg.Add(1)
	go n.contactEvents()
	for _, p := range n.host.Network().Peers() {
		n.considerContact(p, network.DirUnknown, nil, "connected at start")
	}
	n.log.Info("first contact on", "policy", pol, "retry_rejected", c.retryRejected, "reattest_before", c.reattestBefore, "max_concurrent", conc, "trust_quorum", n.cfg.TrustQuorum)
	return nil
}

func (n *Node) stopContact() {
	c := &n.contact
	if c.cancel == nil {
		return
	}
	c.cancel()
	if c.sub != nil {
		c.sub.Close()
	}
	c.wg.Wait()
}

// contactEvents turns identification events into first contacts.
func (n *Node) contactEvents() {
	c := &n.contact
	defer c.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case e, ok := <-c.sub.Out():
			if !ok {
				return
			}
			evt, ok := e.(event.EvtPeerIdentificationCompleted)
			if !ok {
				continue
			}
			dir := network.DirUnknown
			if evt.Conn != nil {
				dir = evt.Conn.Stat().Direction
			}
			n.considerContact(evt.Peer, dir, evt.Protocols, "identified")
		}
	}
}

// contactWakeGap is the least time between two rescans that the end of a
// back-off causes. A rescan walks the back-off table (up to
// maxContactBackoffs) and every connected peer, and remote peers choose
// when their back-offs end (a decline's retry, jittered): a crowd of them
// with staggered retries would otherwise wake it every 10 ms. Retries are
// seconds apart, so a quarter of a second later changes nothing for them.
const contactWakeGap = 250 * time.Millisecond

// contactMaintain rescans the connected peers when a back-off runs out and
// at least every contactRescan: peers whose back-off ended, admitted peers
// due for re-attestation, peers an earlier event missed. Two rescans are
// at least contactWakeGap apart (at most contactRescan).
func (n *Node) contactMaintain() {
	c := &n.contact
	defer c.wg.Done()
	t := time.NewTimer(n.t.contactRescan)
	defer t.Stop()
	gap := min(contactWakeGap, n.t.contactRescan)
	last := time.Now()
	next := last.Add(n.t.contactRescan)
	for {
		at := next
		c.mu.Lock()
		if !c.nextWake.IsZero() && c.nextWake.Before(at) {
			at = c.nextWake
		}
		c.mu.Unlock()
		// From the last rescan, not from a kick: kicks cannot postpone it.
		t.Reset(max(time.Until(at), time.Until(last.Add(gap)), 10*time.Millisecond))
		select {
		case <-c.ctx.Done():
			return
		case <-c.kick:
			// An earlier deadline was set: recompute the timer (since
			// Go 1.23, Stop and Reset discard a pending tick).
			t.Stop()
			continue
		case <-t.C:
		}
		now := time.Now()
		last = now
		c.rescans.Add(1)
		n.pruneBackoff(now)
		c.mu.Lock()
		c.nextWake = time.Time{}
		for _, b := range c.backoff {
			if b.until.After(now) && (c.nextWake.IsZero() || b.until.Before(c.nextWake)) {
				c.nextWake = b.until
			}
		}
		c.mu.Unlock()
		next = now.Add(n.t.contactRescan)
		for _, p := range n.host.Network().Peers() {
			n.considerContact(p, network.DirUnknown, nil, "rescan")
		}
	}
}

// wakeAt makes the maintenance loop rescan no later than at.
func (n *Node) wakeAt(at time.Time) {
	c := &n.contact
	c.mu.Lock()
	early := c.nextWake.IsZero() || at.Before(c.nextWake)
	if early {
		c.nextWake = at
	}
	c.mu.Unlock()
	if early {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

// considerContact starts a worker for p unless it is us, does not speak
// the protocol, is outside the attest policy, or already has a worker. It
// never blocks on the network.
func (n *Node) considerContact(p peer.ID, dir network.Direction, protos []lpproto.ID, why string) {
	c := &n.contact
	if p == n.host.ID() || c.ctx.Err() != nil {
		return
	}
	if protos != nil {
		if !slices.Contains(protos, protocol.ID) {
			return
		}
	} else if ok, err := n.host.Peerstore().SupportsProtocols(p, protocol.ID); err != nil || len(ok) == 0 {
		return
	}
	allowed := n.policyAllows(p, dir)
	nets := n.peerNets(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.active[p] {
		return
	}
	b := c.backoff[p]
	// A peer the policy does not name is asked only to finish a
	// reciprocal request: its session was declined VERIFY_FIRST while
	// the peer verified us (§5c), and the rescan asks again when the
	// wait ends, as for a peer the policy names (the peer waits for
	// that verdict; §1a told it one is coming).
	if !allowed && (b == nil || !b.waitingFirst || why != "rescan") {
		return
	}
	if b != nil && why == "rescan" && time.Now().Before(b.until) {
		return
	}
	n.startWorkerLocked(p, nets, why)
}

// maxContactWorkers bounds the first-contact workers that exist at once
// (running or queued for one of the few session slots): one goroutine
// and some state each. Peers that come and go, each with a fresh ID,
// could otherwise leave a queue of workers behind them; past the bound a
// new first contact waits for the periodic rescan, and a reciprocal
// request is answered BUSY.
const maxContactWorkers = 1024

// maxContactWorkersPerNet bounds the workers of the peers of one network
// (an IPv4 /24, an IPv6 /48, a relay's group: peerNets), a sixteenth of
// maxContactWorkers; the /48s of one IPv6 /32 hold twice that together.
// Fresh peer IDs are free and a reciprocal request (any hello to a
// verify-first node, §5c) starts a worker: while the session slots are
// taken the workers wait, and the peers of one /24 held all 1,024 of
// them (audit-82). Loopback peers count against the total only, unless
// Config.LimitLoopback.
const maxContactWorkersPerNet = maxContactWorkers / 16

// startWorkerLocked starts p's one worker and reports whether it did
// (not when maxContactWorkers exist, or the share of nets, p's network
// groups, is held); c.mu is held and p has none. The worker serves a
// reciprocal request that arrives while it runs before it ends.
func (n *Node) startWorkerLocked(p peer.ID, nets addrNets, why string) bool {
	c := &n.contact
	switch {
	case len(c.active) >= maxContactWorkers,
		nets.prefix.IsValid() && c.workersIn[nets.prefix] >= maxContactWorkersPerNet,
		nets.block.IsValid() && c.workersIn[nets.block] >= 2*maxContactWorkersPerNet:
		return false
	}
	c.active[p] = true
	c.started.Add(1)
	count := func(d int) {
		for _, k := range []netip.Prefix{nets.prefix, nets.block} {
			if !k.IsValid() {
				continue
			}
			if c.workersIn[k] += d; c.workersIn[k] <= 0 {
				delete(c.workersIn, k)
			}
		}
	}
	count(+1)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			n.firstContact(p, why)
			c.mu.Lock()
			if !c.recip[p] || c.ctx.Err() != nil {
				delete(c.recip, p)
				delete(c.active, p)
				count(-1)
				c.mu.Unlock()
				return
			}
			delete(c.recip, p)
			c.mu.Unlock()
			why = whyReciprocal
		}
	}()
	return true
}

// whyReciprocal is the reason of a worker run that serves a peer's
// request to be verified back.
const whyReciprocal = "reciprocal"

// onReciprocal is protocol.Config.OnReciprocal: the peer's hello asked us
// to verify it back. It never blocks and starts at most one worker per
// peer; see the file comment for when the request is dropped. Its answer
// goes into our HelloAck (spec §1a): WILL when a session of ours to p is
// running or will run, otherwise why the request was dropped. drawsLeft
// is false when the protocol would draw no set for p now.
func (n *Node) onReciprocal(p peer.ID, drawsLeft bool) pb.Reciprocal {
	c := &n.contact
	if !c.ready.Load() || c.ctx.Err() != nil || p == n.host.ID() {
		return pb.Reciprocal_RECIPROCAL_NOT_OFFERED
	}
	n.metrics.count(func(m *metrics) *atomic.Uint64 { return &m.reciprocalAsked })
	n.mu.Lock()
	inf, running := n.inflight[p]
	n.mu.Unlock()
	if running {
		if !inf.ended.Load() {
			// Its verdict is sent after the peer asked.
			return pb.Reciprocal_RECIPROCAL_WILL
		}
		// Its verdict went out before the peer asked: answer as for an
		// ended session, once the node has closed and recorded it (the
		// stream's close and the store's commit). WILL here would leave
		// the requester waiting for a session that is not coming.
		t := time.NewTimer(reciprocalRecordWait)
		defer t.Stop()
		select {
		case <-inf.done:
		case <-t.C:
			// Not recorded yet: the verdict written is the answer if it
			// carries a record (it stands, as holdsAttestation would
			// find once it is in); otherwise decide as below, where a
			// session back waits for this one to end.
			if r := inf.verdict.Load(); r != nil && r.Attestation != nil {
				return pb.Reciprocal_RECIPROCAL_ATTESTED
			}
		case <-c.ctx.Done():
			return pb.Reciprocal_RECIPROCAL_NOT_OFFERED
		}
	}
	if !drawsLeft {
		return pb.Reciprocal_RECIPROCAL_BUSY
	}
	now := time.Now()
	c.mu.Lock()
	if b := c.backoff[p]; b != nil && now.Before(b.until) {
		c.mu.Unlock()
		if b.waitingFirst {
			// p verifies us first and our session asks again when the
			// timer ends (recordContact): that is the session back. A
			// worker started now would be declined again, and its
			// decline would start one of p's, and so on (two
			// verify-first nodes ping-ponging).
			return pb.Reciprocal_RECIPROCAL_WILL
		}
		return pb.Reciprocal_RECIPROCAL_BACKING_OFF
	}
	c.mu.Unlock()
	// Decided before a worker of p counts (spec §1a: WILL only when a
	// session back will run): a worker that exists may be one that ends
	// without a session (the peer admitted meanwhile, our record of it
	// standing, the session that just ended above).
	if n.holdsAttestation(p, now) {
		return pb.Reciprocal_RECIPROCAL_ATTESTED
	}
	// The worker would run no session: say why rather than WILL.
	if need, _ := n.needsChallenge(p, now); !need {
		return reciprocalDropReason(n.Admission(p))
	}
	nets := n.peerNets(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil {
		return pb.Reciprocal_RECIPROCAL_NOT_OFFERED
	}
	if c.active[p] {
		// Its run for this request (whyReciprocal) runs the session
		// even if the trust quorum admits p meanwhile: WILL was said.
		c.recip[p] = true
		return pb.Reciprocal_RECIPROCAL_WILL
	}
	if !n.startWorkerLocked(p, nets, whyReciprocal) {
		return pb.Reciprocal_RECIPROCAL_BUSY
	}
	return pb.Reciprocal_RECIPROCAL_WILL
}

// reciprocalRecordWait bounds how long a reciprocal request waits for a
// session of ours to the requester that has its verdict to be closed and
// recorded before the answer is decided without the record. The hello handler's
// goroutine waits; the peer's inbound sessions are few (§9a). It stays
// within the part of the handshake the prover keeps for this decision
// (protocol.ReciprocalAllowance), with room for the store read after it.
const reciprocalRecordWait = protocol.ReciprocalAllowance * 4 / 5

// reciprocalDropReason is the answer to a reciprocal request that
// needsChallenge turns down: adm is p's admission.
func reciprocalDropReason(adm Admission) pb.Reciprocal {
	switch {
	case adm.Admitted && adm.Via != AdmittedDirect:
		return pb.Reciprocal_RECIPROCAL_ADMITTED
	case adm.Admitted, adm.Reason == NotAdmittedSource:
		// Our own attestation stands (one on challenges weaker than we
		// require, which a session of ours now would not improve).
		return pb.Reciprocal_RECIPROCAL_ATTESTED
	case adm.Reason == NotAdmittedRevoked || adm.Reason == NotAdmittedBlocked:
		return pb.Reciprocal_RECIPROCAL_NOT_OFFERED
	}
	return pb.Reciprocal_RECIPROCAL_BACKING_OFF
}

// holdsAttestation reports whether our newest attestation of p, from the
// in-memory index, still stands: an acceptance not yet due for
// re-attestation, or a rejection inside the RetryRejected back-off.
func (n *Node) holdsAttestation(p peer.ID, now time.Time) bool {
	r, weak := n.trust.issuedStanding(p)
	if r == nil || !r.valid(now) || weak {
		// weak: an acceptance on challenges below our source policy that
		// a session of ours now would replace.
		return false
	}
	if r.accepted {
		before := min(n.contact.reattestBefore, r.expiresAt.Sub(r.issuedAt)/2)
		return now.Before(r.expiresAt.Add(-before))
	}
	return now.Before(r.issuedAt.Add(n.contact.retryRejected))
}

// policyAllows applies the attest policy to the directions of our
// connections to p (any matching connection suffices: two nodes that dial
// each other at once hold one connection in each direction).
func (n *Node) policyAllows(p peer.ID, dir network.Direction) bool {
	pol := n.contact.policy
	if pol == AttestAll {
		return true
	}
	if dir != network.DirUnknown && pol.matches(dir) {
		return true
	}
	for _, conn := range n.host.Network().ConnsToPeer(p) {
		if pol.matches(conn.Stat().Direction) {
			return true
		}
	}
	return false
}

// firstContact is the worker of one contact with p.
func (n *Node) firstContact(p peer.ID, why string) {
	c := &n.contact
	if why != "rescan" && why != whyReciprocal {
		n.presentTo(p)
	}
	if c.ctx.Err() != nil || !n.reachable(p) {
		return
	}
	if err := n.awaitDirect(c.ctx, p); err != nil { // nat.go: hole punching, relay limits
		n.log.Debug("first contact: no session over this relayed connection", "peer", p, "err", err)
		return
	}
	// A run for a reciprocal request answered WILL runs the session even
	// when the peer is admitted otherwise meanwhile (the trust quorum):
	// the requester waits for its verdict.
	promised := func(need bool, reason string) bool {
		return need || why == whyReciprocal && strings.HasPrefix(reason, "admitted via ")
	}
	need, reason := n.needsChallenge(p, time.Now())
	if !promised(need, reason) {
		n.log.Debug("first contact: no challenge", "peer", p, "why", reason)
		return
	}
	if why != whyReciprocal && n.cfg.TrustQuorum > 0 && reason != "reattest" && n.verifiedCount(p, time.Now()) >= n.cfg.TrustQuorum {
		if n.awaitQuorum(p) {
			n.log.Info("first contact: admitted through the trust quorum; no challenge", "peer", p)
			return
		}
	}
	// A peer that fell silent before waits for the probation slot; a new
	// one from a network in probation takes it only if it is free.
	sem := c.sem
	c.mu.Lock()
	if b := c.backoff[p]; b != nil && b.silent {
		sem = c.probation
	}
	c.mu.Unlock()
	nets := n.peerNets(p)
	if sem == c.sem && reason != "reattest" && n.inSilentNets(nets, time.Now()) {
		select {
		case c.probation <- struct{}{}:
			sem = c.probation
		default:
			if why == whyReciprocal {
				// Answered WILL: wait for the probation slot rather
				// than defer (a later run would not honour the promise).
				select {
				case c.probation <- struct{}{}:
					sem = c.probation
				case <-c.ctx.Done():
					return
				}
				break
			}
			d := n.deferContact(p, time.Now())
			n.wakeAt(time.Now().Add(d))
			n.log.Debug("first contact: network in probation and the probation slot taken; retrying", "peer", p, "retry_in", d)
			return
		}
	} else {
		select {
		case sem <- struct{}{}:
		case <-c.ctx.Done():
			return
		}
	}
	release := sync.OnceFunc(func() { <-sem })
	// Things may have changed while we queued: the peer may have been
	// verified by Attest, or admitted through the quorum, meanwhile.
	if need, reason = n.needsChallenge(p, time.Now()); !promised(need, reason) || !n.reachable(p) {
		release()
		n.log.Debug("first contact: no challenge", "peer", p, "why", reason)
		return
	}
	if why == whyReciprocal {
		n.metrics.count(func(m *metrics) *atomic.Uint64 { return &m.reciprocalRun })
	}
	l := n.leashSession(p, nets, release)
	res, err := n.contactVerify(p)
	silent := l.end()
	release()
	if err != nil && c.ctx.Err() == nil && (silent || errors.Is(err, protocol.ErrUnresponsive)) {
		n.markSilentNets(nets, time.Now())
	}
	if retry := n.recordContact(p, res, err, silent); retry > 0 {
		n.wakeAt(time.Now().Add(retry))
	}
}

// needsChallenge decides whether p must be challenged now, from our
// back-off state, the admission decision and, for peers we admit
// directly, the expiry of our attestation.
func (n *Node) needsChallenge(p peer.ID, now time.Time) (bool, string) {
	c := &n.contact
	c.mu.Lock()
	b := c.backoff[p]
	if b != nil && now.Before(b.until) {
		c.mu.Unlock()
		return false, "backing off until " + b.until.Format(time.RFC3339) + " after " + b.reason
	}
	c.mu.Unlock()
	adm := n.Admission(p)
	switch {
	case adm.Admitted && adm.Via == AdmittedDirect:
		latest, err := n.store.Latest(Issued, p, now)
		if err != nil {
			n.log.Warn("first contact: read store", "peer", p, "err", err)
			return false, "admitted directly"
		}
		if latest == nil || !latest.Attestation.Accepted {
			return false, "admitted directly"
		}
		c.mu.Lock()
		c.verified[p] = latest.Attestation.ExpiresAt
		c.mu.Unlock()
		if !now.Before(n.reattestAt(latest.Attestation)) {
			return true, "reattest"
		}
		return false, "admitted directly"
	case adm.Admitted:
		return false, "admitted via " + adm.Via
	case adm.Reason != NotAdmittedUnattested:
		c.mu.Lock()
		delete(c.verified, p)
		c.mu.Unlock()
	}
	switch {
	case adm.Reason == NotAdmittedRevoked || adm.Reason == NotAdmittedBlocked:
		// The operator withdrew trust, or the gater holds the peer off:
		// only an explicit attestation admits it again.
		return false, adm.Reason
	case adm.Reason == NotAdmittedSource && !n.trust.servesRequiredSource():
		// We accepted the peer on challenges weaker than we require, and
		// a new session of ours would be no stronger: do not loop.
		return false, adm.Reason
	case adm.Reason == NotAdmittedRejected && b == nil:
		// A rejection we issued before a restart: back off from it.
		latest, err := n.store.Latest(Issued, p, now)
		if err == nil && latest != nil && !latest.Attestation.Accepted {
			a := latest.Attestation
			if until := a.IssuedAt.Add(c.retryRejected); now.Before(until) {
				c.mu.Lock()
				if c.backoff[p] == nil {
					c.putBackoffLocked(p, &contactBackoff{until: until, rejected: 1, reason: string(a.Reason) + " (stored)"}, now)
				}
				c.mu.Unlock()
				n.wakeAt(until)
				return false, "backing off after a stored rejection"
			}
		}
	}
	return true, adm.Reason
}

// awaitQuorum polls the admission of p for about contactQuorumWait and
// reports whether p became admitted through the trust quorum. The wait is
// spread over [0.5, 1.5) x contactQuorumWait: when several nodes meet a
// newcomer at once, the first ones to give up challenge it and gossip
// their verdicts, and the later ones can admit it through them.
func (n *Node) awaitQuorum(p peer.ID) bool {
	c := &n.contact
	wait := n.t.contactQuorumWait/2 + time.Duration(rand.Int64N(int64(n.t.contactQuorumWait)+1))
	deadline := time.Now().Add(wait)
	for {
		if n.Admission(p).Admitted {
			return true
		}
		if !time.Now().Before(deadline) || !sleepCtx(c.ctx, contactQuorumPoll) {
			return false
		}
	}
}

// contactNoDial marks ctx so that the streams first contact opens ride
// the peer's connection and never dial it. First contact acts on peers
// that connected (or ask over a stream): a peer that hung up is not
// dialed back at the addresses it advertised in identify, which may be
// any other host's (up to a hundred a peer ID, and peer IDs are free):
// the node would otherwise be a connection amplifier aimed wherever a
// peer chose (TestFirstContactDialsNoAdvertisedAddress).
func contactNoDial(ctx context.Context) context.Context {
	return network.WithNoDial(ctx, "first contact rides the peer's connection")
}

func (n *Node) contactVerify(p peer.ID) (*protocol.Result, error) {
	c := &n.contact
	timeout := n.cfg.Policy.Total + 30*time.Second
	ctx, cancel := context.WithTimeout(contactNoDial(c.ctx), timeout)
	defer cancel()
	n.infoPeer(p, "first contact: challenging peer")
	return n.verify(ctx, p, false)
}

// recordContact updates the back-off state from a session's outcome and
// returns when to try again (0: no retry is scheduled).
func (n *Node) recordContact(p peer.ID, res *protocol.Result, err error, silent bool) time.Duration {
	c := &n.contact
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.backoff[p]
	if b == nil {
		b = &contactBackoff{}
	}
	// A timer to ask again after a VERIFY_FIRST lasts until the next
	// outcome, which sets its own; so does the count of them in a row.
	b.waitingFirst = false
	if !errors.Is(err, protocol.ErrVerifyFirst) {
		b.verifyFirst = 0
	}
	switch {
	case err != nil && (c.ctx.Err() != nil || errors.Is(err, protocol.ErrClosed) || errors.Is(err, protocol.ErrNoSource)):
		return 0
	case errors.Is(err, protocol.ErrDeclined):
		// The peer refuses to be verified at all (no prover, another
		// major version): back off as from a rejection, with no record.
		d := c.rejectBackoffLocked(p, b, now, "declined")
		n.infoPeer(p, "first contact: peer declines to be verified; backing off", "err", err, "retry_in", d)
		return d
	case errors.Is(err, protocol.ErrVerifyFirst):
		// The peer answers us once it has verified us (spec §5c): no
		// failure of anyone. While it verifies us (WILL), or cannot now
		// (BUSY), ask again soon (its session takes its rounds' time), at
		// most verifyFirstTries times in a row; when it will not (any
		// other answer), or never comes to a verdict, back off as from a
		// rejection.
		var vf *protocol.VerifyFirstError
		// BACKING_OFF may be a short back-off of the peer's own (a
		// session of its that did not run): asked again as for WILL,
		// within the same bound.
		waiting := errors.As(err, &vf) && (vf.Reciprocal == pb.Reciprocal_RECIPROCAL_WILL || vf.Reciprocal == pb.Reciprocal_RECIPROCAL_BUSY ||
			vf.Reciprocal == pb.Reciprocal_RECIPROCAL_BACKING_OFF)
		if waiting {
			b.verifyFirst++
		}
		if !waiting || b.verifyFirst > verifyFirstTries {
			b.verifyFirst = 0
			d := c.rejectBackoffLocked(p, b, now, "verifies us first and will not now")
			n.infoPeer(p, "first contact: peer answers us only once it admits us, and will not verify us now; backing off", "err", err, "retry_in", d)
			return d
		}
		// Two verify-first nodes that met without either asking the
		// other each wait for the other: the one with the lower peer ID
		// asks again first, so that the other, not running a session of
		// its own then, answers it (mutualWait) rather than both asking
		// at once again.
		d := jitter(n.t.verifyFirstRetry)
		if n.host != nil && n.host.ID() < p {
			d = jitter(verifyFirstQuickRetry)
		}
		b.until, b.reason, b.waitingFirst = now.Add(d), "verifies us first", true
		c.putBackoffLocked(p, b, now)
		n.infoPeer(p, "first contact: peer verifies us before it answers us; asking again", "retry_in", d)
		return d
	case err != nil || res.Verdict.Reason == skill.ReasonInconclusive:
		why := "inconclusive"
		if err != nil {
			why = err.Error()
		}
		b.transient++
		b.silent = silent || errors.Is(err, protocol.ErrUnresponsive)
		if b.transient == contactTransientTries+1 {
			// Keep trying while the peer stays connected, at the
			// longest back-off; pruneBackoff forgets it once it leaves.
			// Rate-limited: fresh peer IDs that keep their connections
			// and break every hello would each write one.
			n.warnPeer(p, "first contact: sessions with peer keep failing; retrying at the longest back-off", "attempts", b.transient, "back_off", contactTransientMax, "last_err", why)
		}
		d := jitter(min(contactTransientBackoff<<min(b.transient-1, 30), contactTransientMax))
		b.until, b.reason = now.Add(d), why
		c.putBackoffLocked(p, b, now)
		n.infoPeer(p, "first contact: session did not run; retrying", "retry_in", d, "err", why)
		return d
	case res.Verdict.Accepted:
		delete(c.backoff, p)
		if res.Attestation == nil {
			return 0
		}
		c.verified[p] = res.Attestation.ExpiresAt
		// Re-attestation comes with a periodic rescan.
		return 0
	default:
		b.transient = 0
		b.silent = false
		b.rejected++
		d := c.retryRejected << min(b.rejected-1, 30)
		if d <= 0 || d > MaxRetryRejected {
			d = MaxRetryRejected
		}
		b.until, b.reason = now.Add(d), string(res.Verdict.Reason)
		c.putBackoffLocked(p, b, now)
		delete(c.verified, p)
		n.log.Info("first contact: peer rejected; backing off", "peer", p, "reason", res.Verdict.Reason, "rejections", b.rejected, "retry_in", d)
		return d
	}
}

// reattestAt is when first contact attests a connected peer again: our
// attestation's expiry minus ReattestBefore, but never before half its
// lifetime (a TTL shorter than ReattestBefore must not loop).
func (n *Node) reattestAt(a *protocol.Attestation) time.Time {
	before := min(n.contact.reattestBefore, a.ExpiresAt.Sub(a.IssuedAt)/2)
	return a.ExpiresAt.Add(-before)
}

// pruneBackoff forgets back-offs that ran out for peers no longer
// connected, and expired verifications, so the maps stay bounded by the
// peers we actually meet.
func (n *Node) pruneBackoff(now time.Time) {
	c := &n.contact
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, exp := range c.verified {
		if !now.Before(exp) {
			delete(c.verified, p)
		}
	}
	for p, b := range c.backoff {
		if now.After(b.until) && !n.reachable(p) {
			if b.rejected == 0 || now.Sub(b.until) > MaxRetryRejected {
				delete(c.backoff, p)
			}
		}
	}
}

// loadVerified loads the peers we accepted directly: our newest issued
// record of each subject, as the trust index (started before first
// contact) read it from the store. It listed the store's issued records
// again, verifying every signature a second time at start-up (a store
// of 740,000 issued records: 1.5 million checks), picked the newest by
// issue time alone where the index follows store.Supersedes (a rejection
// wins a tie), and counted records of another identity (a store made
// with another --key) that the index leaves out.
func (n *Node) loadVerified(now time.Time) {
	c := &n.contact
	v := map[peer.ID]time.Time{}
	n.trust.mu.RLock()
	for p, r := range n.trust.issued {
		if r.accepted && r.valid(now) {
			v[p] = r.expiresAt
		}
	}
	n.trust.mu.RUnlock()
	c.mu.Lock()
	c.verified = v
	c.mu.Unlock()
}

// verifiedCount counts the peers other than p we accepted directly and
// whose attestation is still valid: the most issuers a quorum for p can
// have.
func (n *Node) verifiedCount(p peer.ID, now time.Time) int {
	c := &n.contact
	c.mu.Lock()
	defer c.mu.Unlock()
	k := 0
	for q, exp := range c.verified {
		if q != p && now.Before(exp) {
			k++
		}
	}
	return k
}

// presentTo sends our attestations to p, bounded in time and within the
// rates of presentations sent (allowPresentTo); failures only cost the
// peer a challenge it could have skipped. It dials nothing
// (contactNoDial).
func (n *Node) presentTo(p peer.ID) {
	ctx, cancel := context.WithTimeout(contactNoDial(n.contact.ctx), contactPresentTimeout)
	defer cancel()
	if err := n.presentIf(ctx, p, func() bool { return n.allowPresentTo(p, time.Now()) }); err != nil && ctx.Err() == nil {
		n.log.Debug("first contact: present attestations", "peer", p, "err", err)
	}
}
