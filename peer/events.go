package peer

import (
	"errors"
	"fmt"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol"
)

// Attestation events. A record this node issued (a verifier session over
// libp2p or a front door) or received (a prover session) is handed to
// every subsystem that subscribed to it, in subscription order and
// synchronously, so that admission reflects the record by the time Verify
// or Attest returns: the trust index and gossip, the connection manager's
// tags, the metrics. An issued record is stored before the fan-out; a
// received one is indexed (for presentation) before it is stored, so that
// whoever sees it in the store can already present it. The same events are
// emitted on the host's event bus for embedders (subscribe with
// Host().EventBus().Subscribe(new(EvtAttestationIssued))), after the
// subsystems saw them. As with every libp2p event, a subscriber must keep
// reading its channel (16 events deep unless eventbus.BufSize says
// otherwise): the bus blocks the emitting session on a full channel and
// logs a slow-consumer warning, it does not drop events.

// EvtAttestationIssued is emitted after this node stored a verdict it
// issued. A store that fails (a full disk) is logged as an error and the
// event is emitted all the same: the verdict was signed and delivered.
type EvtAttestationIssued struct {
	Result *protocol.Result
	// Door names the front door the session ran through: "libp2p" or
	// "http".
	Door string
}

// EvtAttestationReceived is emitted after a verifier's session of this
// node ended (with a stored record, or with the error in Result.Err).
type EvtAttestationReceived struct {
	Result protocol.ProverResult
}

// fanout holds the subscribers of the attestation events.
type fanout struct {
	issued     []func(EvtAttestationIssued)
	received   []func(EvtAttestationReceived)
	emIssued   event.Emitter
	emReceived event.Emitter
}

// startEvents subscribes the node's subsystems, in the order they must
// see a record, and opens the bus emitters. New calls it as soon as the
// host exists, before the protocol service can report a session.
func (n *Node) startEvents() error {
	f := &n.events
	f.issued = []func(EvtAttestationIssued){
		func(e EvtAttestationIssued) { n.afterIssued(e.Result) }, // trust index, gossip, blocking (gossip.go)
		n.tagIssued,
		func(e EvtAttestationIssued) { n.metrics.observeIssued(e.Result) },
	}
	f.received = []func(EvtAttestationReceived){
		func(e EvtAttestationReceived) {
			// A verdict without a valid record is not counted as one.
			if r := e.Result; r.Err != nil || r.Attestation != nil {
				n.metrics.observeReceived(r)
			}
		},
		n.wakeWaiters,
	}
	var err error
	if f.emIssued, err = n.host.EventBus().Emitter(new(EvtAttestationIssued)); err != nil {
		return err
	}
	f.emReceived, err = n.host.EventBus().Emitter(new(EvtAttestationReceived))
	return err
}

func (n *Node) stopEvents() {
	for _, em := range []event.Emitter{n.events.emIssued, n.events.emReceived} {
		if em != nil {
			_ = em.Close()
		}
	}
}

// recordIssued stores a verdict this node issued and fans it out.
func (n *Node) recordIssued(r *protocol.Result, door string) {
	if r == nil {
		return
	}
	v := r.Verdict
	if len(r.Envelope) == 0 {
		// Nothing signed (an inconclusive session, its draw refunded):
		// only a peer's proof of work bounds how many it causes (over
		// HTTP peer IDs are free), so the line is rate-limited as the
		// other lines a remote peer causes. Signed verdicts, bounded by
		// the draw budgets, are logged each.
		n.infoPeer(r.Peer, "verified peer", "door", door, "accepted", v.Accepted, "reason", v.Reason, "failed_round", v.FailedRound, "rtt", r.RTT)
	} else {
		n.log.Info("verified peer", "peer", r.Peer, "door", door, "accepted", v.Accepted, "reason", v.Reason, "failed_round", v.FailedRound, "rtt", r.RTT)
	}
	if r.Attestation != nil && len(r.Envelope) > 0 {
		if err := n.store.PutIssued(r.Envelope, r.Attestation); err != nil {
			n.log.Error("store issued attestation", "peer", r.Peer, "err", err)
		}
	}
	e := EvtAttestationIssued{Result: r, Door: door}
	for _, h := range n.events.issued {
		h(e)
	}
	if em := n.events.emIssued; em != nil {
		_ = em.Emit(e)
	}
}

// recordReceived stores a verdict about this node and fans it out.
func (n *Node) recordReceived(r protocol.ProverResult) {
	if a := r.Attestation; a != nil && !keptLifetime(a) {
		// The verifier picks the expiry: a record valid for longer than
		// this node keeps records is not stored, indexed or shared.
		r.Attestation, r.Envelope = nil, nil
		r.AttestationErr = fmt.Errorf("record valid for %d s, longer than the %s this node keeps: not kept", keptLifetimeSecs(a), MaxKeptLifetime)
	}
	switch {
	case r.Err != nil && refusedForLoad(r.Err):
		// This node turned the session away at its own limits: a
		// flood of fresh peer IDs would otherwise fill the warning
		// limiter (lograte.go) and hide the warnings that matter. The
		// session is counted (Stats.ProveFailed) below.
		n.log.Debug("refused a verifier's session at this node's limits", "peer", r.Verifier, "err", r.Err)
	case errors.Is(r.Err, protocol.ErrVerifyFirst):
		n.noteDeclinedByUs(r.Verifier) // waitingProver (solicit.go)
		// Every hello of an unadmitted verifier that came to us, by
		// design: debug only (a peer could fill the log with them).
		n.log.Debug("asked a verifier that came to us to be verified first", "peer", r.Verifier, "err", r.Err)
	case errors.Is(r.Err, protocol.ErrNoProver):
		// A node without an LLM declines every verifier by design (the
		// start-up lines said so): not worth a warning per peer.
		n.log.Debug("declined a verifier: this node has no prover", "peer", r.Verifier)
	case r.Err != nil && n.ctx.Err() != nil:
		// This node is closing (a one-shot attest that has its result,
		// a stopped demo or bench): its own sessions end with it, which
		// is no news about the peer.
		n.log.Debug("verification of us by peer ended as this node closed", "peer", r.Verifier, "err", r.Err)
	case r.Err != nil:
		n.warnPeer(r.Verifier, "verification of us by peer broke off", "err", r.Err)
	case r.Attestation != nil:
		n.afterReceived(r) // index for presentation, gossip: before the store (above)
		// The store keeps the issuer's newest record about us only,
		// and a bounded number of issuers (store.MaxReceived), as the
		// index keeps the newest per issuer (store/received.go).
		if err := n.store.Put(Received, r.Envelope, r.Attestation); err != nil {
			n.log.Error("store received attestation", "peer", r.Verifier, "err", err)
		}
		n.log.Info("peer verified us", "peer", r.Verifier, "accepted", r.Accepted, "reason", r.Reason)
		if r.Accepted {
			n.verifiedUs(r.Verifier)
		}
	default:
		// The verifier signed nothing this node keeps (no record, or one
		// that does not verify): a hello is all such a verdict costs it,
		// so the line passes the limits of remote-triggered lines, as
		// the verdict lines of sessions that signed nothing do (a
		// verifier sending an inconclusive verdict right after each ack
		// wrote one a session, some 2,000 an hour within the prover's
		// session budgets).
		n.infoPeer(r.Verifier, "peer verified us without a valid attestation", "accepted", r.Accepted, "reason", r.Reason, "attestation_err", r.AttestationErr)
	}
	e := EvtAttestationReceived{Result: r}
	for _, h := range n.events.received {
		h(e)
	}
	if em := n.events.emReceived; em != nil {
		_ = em.Emit(e)
	}
}

// refusedForLoad tells whether a prover session's error is a refusal
// this node decided for load reasons rather than anything the verifier
// did: its inbound slots or budgets were spent (protocol.ErrBusy: the
// BUSY decline, the session, proof-of-work and token budgets), or the
// resource manager refused the stream's memory.
func refusedForLoad(err error) bool {
	return errors.Is(err, protocol.ErrBusy) || errors.Is(err, network.ErrResourceLimitExceeded)
}

// tagIssued protects an accepted peer in the connection manager while it
// is connected over libp2p (a peer verified through another door has no
// connection to protect; the tag would only take a slot of the manager's
// table), and lifts the protection when a later verdict rejects it.
func (n *Node) tagIssued(e EvtAttestationIssued) {
	r := e.Result
	if !r.Verdict.Accepted {
		n.unprotect(r.Peer)
		return
	}
	if n.host.Network().Connectedness(r.Peer) != network.Connected {
		return
	}
	n.host.ConnManager().TagPeer(r.Peer, TagAttested, tagValue)
	n.host.ConnManager().Protect(r.Peer, protectAttested)
}

// unprotect lifts p's protection and tag in the connection manager.
func (n *Node) unprotect(p peer.ID) {
	cm := n.host.ConnManager()
	cm.Unprotect(p, protectAttested)
	if n.host.Network().Connectedness(p) == network.Connected {
		// The manager forgets the tags of a peer with no connection
		// itself (and logs an untag of one it does not track).
		cm.UntagPeer(p, TagAttested)
	}
}

// syncProtection makes p's protection in the connection manager follow
// our acceptance of it while it is connected: libp2p's manager keeps a
// protection until it is lifted, connected or not, so without this every
// peer ever accepted stayed in its table (and protected) for the life of
// the process, through the end of its attestation and a later rejection.
func (n *Node) syncProtection(p peer.ID) {
	if n.host.Network().Connectedness(p) == network.Connected && n.trust.ownAcceptance(p, n.trustNow()) {
		n.host.ConnManager().TagPeer(p, TagAttested, tagValue)
		n.host.ConnManager().Protect(p, protectAttested)
		return
	}
	n.unprotect(p)
}

// watchProtection runs syncProtection for every peer whose connectedness
// changes (one goroutine, reading the host's event bus; the swarm emits
// these events from a queue of its own, so a moment's delay here holds
// up no connection).
func (n *Node) watchProtection() error {
	sub, err := n.host.EventBus().Subscribe(new(event.EvtPeerConnectednessChanged))
	if err != nil {
		return fmt.Errorf("connection protection: subscribe to connectedness events: %w", err)
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer sub.Close()
		for {
			select {
			case <-n.ctx.Done():
				return
			case e, ok := <-sub.Out():
				if !ok {
					return
				}
				if evt, ok := e.(event.EvtPeerConnectednessChanged); ok {
					n.syncProtection(evt.Peer)
				}
			}
		}
	}()
	return nil
}

// wakeWaiters hands a prover result to the Attest calls waiting for it.
func (n *Node) wakeWaiters(e EvtAttestationReceived) {
	r := e.Result
	if errors.Is(r.Err, protocol.ErrVerifyFirst) {
		return // no verification of us: this node asked the peer to wait for its own
	}
	n.mu.Lock()
	ws := n.waiters[r.Verifier]
	n.mu.Unlock()
	for _, w := range ws {
		select {
		case w <- r:
		default:
		}
	}
}
