package peer

// Admission for applications: gated protocol handlers, the connection
// gater for rejected peers, and the per-peer report behind `acaptcha peers`.

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pprotocol "github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/net/conngater"

	"github.com/acaptcha/acaptcha/internal/bounded"
	"github.com/acaptcha/acaptcha/skill"
)

// Stream error codes a gated protocol resets refused streams with. They
// are the acaptcha counterparts of libp2p's StreamGated (0x1008), one per
// reason, in the private block 0xAC100100-0xAC1001FF (the attestation
// protocol uses 0xAC1000xx). GateReason decodes them on the client side.
const (
	// ErrCodeNotAdmitted: not admitted, for a reason not listed below.
	ErrCodeNotAdmitted network.StreamErrorCode = 0xAC100100
	// ErrCodeUnattested: this node has no attestation of the peer and no
	// quorum vouches for it.
	ErrCodeUnattested network.StreamErrorCode = 0xAC100101
	// ErrCodeRejected: this node's newest attestation of the peer is a
	// rejection.
	ErrCodeRejected network.StreamErrorCode = 0xAC100102
	// ErrCodeExpired: this node's attestation of the peer expired.
	ErrCodeExpired network.StreamErrorCode = 0xAC100103
	// ErrCodeRevoked: this node revoked the peer's admission.
	ErrCodeRevoked network.StreamErrorCode = 0xAC100104
	// ErrCodeBlocked: the peer is in a block cooldown after a rejection.
	ErrCodeBlocked network.StreamErrorCode = 0xAC100105
	// ErrCodeSourceBelowMinimum: this node's acceptance of the peer rests
	// on challenges weaker than its required source, and no quorum.
	ErrCodeSourceBelowMinimum network.StreamErrorCode = 0xAC100106
)

var gateCodes = map[string]network.StreamErrorCode{
	NotAdmittedUnattested: ErrCodeUnattested,
	NotAdmittedRejected:   ErrCodeRejected,
	NotAdmittedExpired:    ErrCodeExpired,
	NotAdmittedRevoked:    ErrCodeRevoked,
	NotAdmittedBlocked:    ErrCodeBlocked,
	NotAdmittedSource:     ErrCodeSourceBelowMinimum,
}

// GateCode returns the stream error code for a not-admitted reason.
func GateCode(reason string) network.StreamErrorCode {
	if c, ok := gateCodes[reason]; ok {
		return c
	}
	return ErrCodeNotAdmitted
}

// GateReason reports whether err is a stream reset by a remote admission
// gate and, if so, the reason (one of the NotAdmitted* constants, "gated"
// for libp2p's generic StreamGated, or "not_admitted").
func GateReason(err error) (string, bool) {
	var se *network.StreamError
	if !errors.As(err, &se) || !se.Remote {
		return "", false
	}
	if se.ErrorCode == network.StreamGated {
		return "gated", true
	}
	if se.ErrorCode == ErrCodeNotAdmitted {
		return "not_admitted", true
	}
	for r, c := range gateCodes {
		if c == se.ErrorCode {
			return r, true
		}
	}
	return "", false
}

// GateDecision is the last admission decision a gated protocol took for a
// peer.
type GateDecision struct {
	Protocol string    `json:"protocol"`
	Admitted bool      `json:"admitted"`
	Via      string    `json:"via,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
	// Streams counts the gated streams this peer opened (all protocols).
	Streams uint64 `json:"streams"`
}

// maxGateDecisions bounds the remembered decisions. A full table forgets
// a sixteenth at once (bounded.MakeRoom): refusals and decisions older
// than gateIdle first, then any; so a flood of fresh peer IDs costs one
// scan per 256 new peers, not one per peer.
const maxGateDecisions = 4096

// gateIdle is the age past which a remembered decision may go first.
const gateIdle = 10 * time.Minute

// HandleAdmitted registers h for protocol id, served only to admitted peers
// (see Admission). Streams from other peers are reset with the code of the
// reason (GateCode); every decision is counted in the metrics, remembered
// for Peers and logged (at INFO when it changed for the peer, rate-limited
// per peer and in total; otherwise at DEBUG).
func (n *Node) HandleAdmitted(id libp2pprotocol.ID, h network.StreamHandler) {
	n.host.SetStreamHandler(id, func(s network.Stream) {
		p := s.Conn().RemotePeer()
		adm := n.Admission(p)
		n.noteGate(id, p, adm)
		if !adm.Admitted {
			_ = s.ResetWithError(GateCode(adm.Reason))
			return
		}
		h(s)
	})
}

func (n *Node) noteGate(id libp2pprotocol.ID, p peer.ID, adm Admission) {
	n.metrics.observeAdmission(string(id), adm)
	now := n.trustNow()
	t := &n.trust
	t.mu.Lock()
	d := t.gates[p]
	changed := d == nil || d.Admitted != adm.Admitted || d.Via != adm.Via || d.Reason != adm.Reason
	if d == nil {
		bounded.MakeRoom(t.gates, maxGateDecisions, func(g *GateDecision) bool {
			return !g.Admitted || now.Sub(g.At) > gateIdle
		})
		d = &GateDecision{}
		t.gates[p] = d
	}
	d.Protocol, d.Admitted, d.Via, d.Reason, d.At = string(id), adm.Admitted, adm.Via, adm.Reason, now
	d.Streams++
	t.mu.Unlock()
	msg, args := "refused peer on gated protocol", []any{"protocol", id, "reason", adm.Reason}
	if adm.Admitted {
		msg, args = "admitted peer to gated protocol", []any{"protocol", id, "via", adm.Via, "issuers", len(adm.Issuers)}
	}
	if changed {
		n.infoPeer(p, msg, args...)
	} else {
		n.log.Debug(msg, append([]any{"peer", p}, args...)...)
	}
}

// gaterOptions creates the node's connection gater (gate.go): it refuses
// inbound relayed connections through relays other than Config.Relays,
// and blocks rejected peers when Config.BlockRejected is set. New
// installs it in the host; natOptions has checked Config.Relays.
func (n *Node) gaterOptions() ([]libp2p.Option, error) {
	g := &nodeGater{relays: map[peer.ID]bool{}, publicOnly: n.cfg.DialPublicOnly}
	n.gate = g
	relays, err := ParseRelays(n.cfg.Relays)
	if err != nil {
		return nil, err
	}
	for _, ai := range relays {
		g.relays[ai.ID] = true
	}
	if n.cfg.BlockRejected > 0 {
		b, err := conngater.NewBasicConnectionGater(nil)
		if err != nil {
			return nil, fmt.Errorf("connection gater: %w", err)
		}
		n.trust.gater, g.blocked = b, b
	}
	return []libp2p.Option{libp2p.ConnectionGater(g)}, nil
}

// blockGrace lets the verdict frame reach a rejected peer before its
// connections are closed.
const blockGrace = time.Second

// block blocks a rejected peer at the gater for Config.BlockRejected and
// closes its connections after blockGrace.
func (n *Node) block(p peer.ID) {
	t := &n.trust
	if t.gater == nil || n.ctx.Err() != nil {
		return
	}
	until := n.trustNow().Add(n.cfg.BlockRejected)
	t.mu.Lock()
	t.blocked[p] = until
	t.mu.Unlock()
	if err := t.gater.BlockPeer(p); err != nil {
		n.log.Warn("block peer", "peer", p, "err", err)
		return
	}
	n.metrics.observeBlocked()
	n.log.Info("blocked rejected peer", "peer", p, "until", until.Format(time.RFC3339))
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		tm := time.NewTimer(blockGrace)
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-n.ctx.Done():
			return
		}
		if ok, _ := t.isBlocked(p, n.trustNow()); ok {
			_ = n.host.Network().ClosePeer(p)
		}
	}()
}

func (t *trustState) isBlocked(p peer.ID, now time.Time) (bool, time.Time) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	until, ok := t.blocked[p]
	return ok && now.Before(until), until
}

func (n *Node) unblockExpired(now time.Time) {
	t := &n.trust
	var done []peer.ID
	t.mu.Lock()
	for p, until := range t.blocked {
		if !now.Before(until) {
			done = append(done, p)
			delete(t.blocked, p)
		}
	}
	t.mu.Unlock()
	for _, p := range done {
		if t.gater != nil {
			_ = t.gater.UnblockPeer(p)
		}
		n.log.Info("block cooldown over", "peer", p)
	}
}

// AttestationRef describes one attestation behind a peer's admission state.
type AttestationRef struct {
	Issuer    peer.ID   `json:"issuer"`
	Subject   peer.ID   `json:"subject"`
	Accepted  bool      `json:"accepted"`
	Reason    string    `json:"reason"`
	IssuedAt  time.Time `json:"issued_at"`
	ExpiresAt time.Time `json:"expires_at"`
	Valid     bool      `json:"valid"`
	// ChallengeSource is the record's challenge provenance (empty when it
	// names none); MeetsSource tells whether it meets this node's
	// RequireSource.
	ChallengeSource skill.SourceKind `json:"challenge_source"`
	MeetsSource     bool             `json:"meets_source"`
	// Source is SourceIssued, SourceReceived, SourceGossip or
	// SourcePresentation; From, Author and LearnedAt are the provenance of
	// learned records.
	Source    string     `json:"source"`
	From      peer.ID    `json:"from,omitempty"`
	Author    peer.ID    `json:"author,omitempty"`
	LearnedAt *time.Time `json:"learned_at,omitempty"`
	// Counts tells whether a learned record counts toward a quorum now
	// (never when the trust quorum is 0).
	Counts bool `json:"counts,omitempty"`
}

// PeerInfo is what this node knows about one peer.
type PeerInfo struct {
	Peer      peer.ID   `json:"peer"`
	Admission Admission `json:"admission"`
	// Direct is this node's newest attestation of the peer.
	Direct *AttestationRef `json:"direct,omitempty"`
	// Vouchers are the newest learned attestations of the peer, one per
	// issuer.
	Vouchers []AttestationRef `json:"vouchers,omitempty"`
	// AboutUs is the peer's newest attestation of this node.
	AboutUs      *AttestationRef `json:"about_us,omitempty"`
	RevokedAt    *time.Time      `json:"revoked_at,omitempty"`
	BlockedUntil *time.Time      `json:"blocked_until,omitempty"`
	LastGate     *GateDecision   `json:"last_gate,omitempty"`
}

// Peers lists every peer this node knows from its attestations (issued,
// received, learned, as subject or issuer), revocations, blocks and gate
// decisions, with its admission state and the attestations behind it,
// sorted by peer ID.
func (n *Node) Peers() []PeerInfo {
	t := &n.trust
	// The learned records indexed at start are checked on GOMAXPROCS
	// goroutines meanwhile; reading them all under the lock would check
	// them on this one.
	t.awaitChecked()
	now := n.trustNow()
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.peersLocked(n.ID(), now, n.cfg.TrustQuorum)
}

// PeerReport computes the Peers view from a store, for a node that is not
// running (the store cannot be open elsewhere). quorum and requireSource
// are the trust quorum and the challenge-source policy (empty: the
// default) to evaluate admissions with.
func PeerReport(st *Store, quorum int, requireSource skill.SourceKind, now time.Time) ([]PeerInfo, error) {
	min, err := ParseRequireSource(string(requireSource))
	if err != nil {
		return nil, fmt.Errorf("require source: %w", err)
	}
	// The newest issued record (verified) names this node; its key, in
	// an Ed25519 peer ID, lets the index take the node's own records
	// with every check but the signature, as a node does at start
	// (loadTrustIndex): the CLI checked the signature of the newest
	// record of every subject, one per peer ID a remote made the node
	// verify (some 744,000 at the default draw budget).
	var owner peer.ID
	var ownerKey crypto.PubKey
	if es, _, err := st.ListNewest(Issued, "", 1); err == nil && len(es) > 0 {
		owner = es[0].Attestation.Issuer
		if k, err := owner.ExtractPublicKey(); err == nil {
			ownerKey = k
		}
	}
	idx, err := loadTrustIndex(st, owner, ownerKey)
	if err != nil {
		return nil, err
	}
	t := &trustState{
		issued: idx.issued, learned: idx.learned, self: idx.self, revoked: idx.revoked,
		perIssuer: idx.perIssuer, nLearned: idx.nLearned,
		blocked: map[peer.ID]time.Time{}, gates: map[peer.ID]*GateDecision{},
		minSource: min,
	}
	checkPending(idx.pending, nil)
	t.dropDamagedLocked(idx.pending)
	var self peer.ID
	for _, r := range idx.issued {
		self = r.issuer
		break
	}
	if self == "" {
		for _, r := range idx.self {
			self = r.subject
			break
		}
	}
	return t.peersLocked(self, now, quorum), nil
}

func (t *trustState) refLocked(r *trustRec, now time.Time) *AttestationRef {
	a := &AttestationRef{
		Issuer: r.issuer, Subject: r.subject, Accepted: r.accepted, Reason: string(r.reason),
		IssuedAt: r.issuedAt, ExpiresAt: r.expiresAt, Valid: r.valid(now),
		ChallengeSource: r.challenges, MeetsSource: t.meets(r),
		Source: r.source, From: r.from, Author: r.author,
	}
	if !r.learnedAt.IsZero() {
		at := r.learnedAt
		a.LearnedAt = &at
	}
	return a
}

// PeersPage lists at most limit of the peers Peers lists (limit 0 or
// less: all), those whose ID sorts after after ("" for the first page),
// in the same order; more says whether others follow (ask again with the
// last ID given). Peers built the whole list, and the issued records
// alone name one peer per session drawn (some 744,000 at the default
// draw budget and retention): a caller that wanted a screenful (MCP
// list_peers, from beyond loopback over --http too) had the node build,
// and encode, a view of every peer under the trust index's lock. A page
// costs a pass over the index's keys and the views of its peers.
func (n *Node) PeersPage(after peer.ID, limit int) (page []PeerInfo, more bool) {
	t := &n.trust
	t.awaitChecked() // as Peers
	now := n.trustNow()
	t.mu.RLock()
	defer t.mu.RUnlock()
	if limit <= 0 {
		all := t.peersLocked(n.ID(), now, n.cfg.TrustQuorum)
		i := 0
		for after != "" && i < len(all) && all[i].Peer <= after {
			i++
		}
		return all[i:], false
	}
	self := n.ID()
	// top holds the smallest IDs after after seen so far, sorted, at most
	// limit of them.
	top := make([]peer.ID, 0, limit)
	add := func(p peer.ID) {
		if p == "" || p == self || p <= after {
			return
		}
		i, found := slices.BinarySearch(top, p)
		switch {
		case found:
			return
		case i >= limit:
			more = true
			return
		case len(top) == limit:
			top = top[:limit-1]
			more = true
		}
		top = slices.Insert(top, i, p)
	}
	t.eachKnownLocked(add)
	page = make([]PeerInfo, 0, len(top))
	for _, p := range top {
		page = append(page, t.peerInfoLocked(p, self, now, n.cfg.TrustQuorum))
	}
	return page, more
}

// eachKnownLocked calls add with every peer ID the index knows (some more
// than once).
func (t *trustState) eachKnownLocked(add func(peer.ID)) {
	for p := range t.issued {
		add(p)
	}
	for p := range t.self {
		add(p)
	}
	for p, m := range t.learned {
		known := false
		for q, r := range m {
			if r.sound() {
				add(q)
				known = true
			}
		}
		if known {
			add(p)
		}
	}
	for _, m := range []map[peer.ID]time.Time{t.revoked, t.blocked} {
		for p := range m {
			add(p)
		}
	}
	for p := range t.gates {
		add(p)
	}
}

func (t *trustState) peersLocked(self peer.ID, now time.Time, quorum int) []PeerInfo {
	known := map[peer.ID]bool{}
	t.eachKnownLocked(func(p peer.ID) {
		if p != "" && p != self {
			known[p] = true
		}
	})
	out := make([]PeerInfo, 0, len(known))
	for _, p := range slices.Sorted(maps.Keys(known)) {
		out = append(out, t.peerInfoLocked(p, self, now, quorum))
	}
	return out
}

// peerInfoLocked is the view of p in Peers.
func (t *trustState) peerInfoLocked(p, self peer.ID, now time.Time, quorum int) PeerInfo {
	pi := PeerInfo{Peer: p, Admission: t.admissionLocked(p, self, now, quorum)}
	if r := t.issued[p]; r != nil {
		pi.Direct = t.refLocked(r, now)
	}
	if r := t.self[p]; r != nil {
		pi.AboutUs = t.refLocked(r, now)
	}
	revokedAt, revoked := t.revoked[p]
	if revoked {
		at := revokedAt
		pi.RevokedAt = &at
	}
	if until, ok := t.blocked[p]; ok && now.Before(until) {
		u := until
		pi.BlockedUntil = &u
	}
	for _, q := range slices.Sorted(maps.Keys(t.learned[p])) {
		r := t.learned[p][q]
		if !r.sound() {
			continue
		}
		ref := t.refLocked(r, now)
		ref.Counts = quorum > 0 && t.countsLocked(r, p, self, now, revoked, revokedAt)
		pi.Vouchers = append(pi.Vouchers, *ref)
	}
	if g := t.gates[p]; g != nil {
		c := *g
		pi.LastGate = &c
	}
	return pi
}
