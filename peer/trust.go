package peer

// Admission and transitive trust: an in-memory index of the attestations
// this node issued, received and learned (loaded from the store at start,
// kept current by every write), the admission decision over it, and
// revocation. See spec/trust.md.

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/conngater"

	"github.com/acaptcha/acaptcha/peer/store"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// Admission is the decision whether a peer is admitted to this node's
// gated application protocols.
type Admission struct {
	Admitted bool `json:"admitted"`
	// Via is AdmittedDirect or AdmittedQuorum when admitted, "" otherwise.
	Via string `json:"via,omitempty"`
	// Reason is the machine reason when not admitted: one of the
	// NotAdmitted* constants.
	Reason string `json:"reason,omitempty"`
	// Issuers are the directly verified issuers behind a quorum admission.
	Issuers []peer.ID `json:"issuers,omitempty"`
}

// Ways a peer is admitted.
const (
	// AdmittedDirect: this node's newest attestation of the peer is an
	// unexpired, unrevoked acceptance.
	AdmittedDirect = "direct"
	// AdmittedQuorum: at least Config.TrustQuorum issuers that this node
	// admits directly hold unexpired acceptances of the peer.
	AdmittedQuorum = "quorum"
)

// Reasons a peer is not admitted.
const (
	// NotAdmittedUnattested: no attestation of ours, and no quorum.
	NotAdmittedUnattested = "unattested"
	// NotAdmittedRejected: our newest valid attestation of the peer is a
	// rejection (transitive trust does not override it).
	NotAdmittedRejected = "rejected"
	// NotAdmittedExpired: our newest attestation has expired, and no quorum.
	NotAdmittedExpired = "expired"
	// NotAdmittedRevoked: we revoked the peer and have no newer evidence.
	NotAdmittedRevoked = "revoked"
	// NotAdmittedBlocked: the peer is blocked at the connection gater after
	// a rejection (Config.BlockRejected).
	NotAdmittedBlocked = "blocked"
	// NotAdmittedSource: our newest attestation of the peer is an
	// unexpired acceptance on challenges from a source weaker than
	// Config.RequireSource, and no quorum.
	NotAdmittedSource = "source_below_minimum"
)

// Challenge-source policy (Config.RequireSource).
const (
	// DefaultRequireSource admits and vouches only on LLM-written or
	// LLM-reworded challenges (hybrid and llm rank equally).
	DefaultRequireSource = skill.SourceHybrid
	// AnySource accepts attestations whatever their source, records that
	// name none included.
	AnySource skill.SourceKind = "any"
)

// ParseRequireSource parses a challenge-source policy: "any" (or "none")
// for AnySource, otherwise a source kind (procedural, corpus, hybrid,
// llm); empty gives DefaultRequireSource.
func ParseRequireSource(s string) (skill.SourceKind, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return DefaultRequireSource, nil
	case string(AnySource), "none":
		return AnySource, nil
	}
	k, err := skill.ParseSourceKind(s)
	if err != nil {
		return "", fmt.Errorf("%w, or any", err)
	}
	return k, nil
}

// Sources of indexed attestations, as shown by Peers.
const (
	SourceIssued       = "issued"
	SourceReceived     = "received"
	SourceGossip       = string(ViaGossip)
	SourcePresentation = string(ViaPresentation)
)

// Bounds of the learned-attestation index: records from issuers this node
// does not admit directly carry no weight, so they are capped per issuer
// and in total; records from directly admitted issuers are capped only by
// the hard limit.
const (
	MaxLearned          = 1 << 16
	MaxLearnedPerIssuer = 4096
	// MaxLearnedPerSubject bounds the records about one subject by
	// issuers this node does not admit directly: an admission check
	// walks a subject's records, and sybil issuers could otherwise pile
	// tens of thousands on one peer.
	MaxLearnedPerSubject = 256
	// MaxLearnedPerNetwork bounds the records of issuers this node does
	// not admit directly that the peers of one network (IPv4 /24, IPv6
	// /48, a relay's group) brought, by gossip or presentation; those of
	// one IPv6 /32 get protocol.BlockFactor times as many. Issuer and
	// subject keys are free, so without it one network filled the whole
	// table (65,536 records in about 4 minutes at its gossip budget) and
	// every other network's such records were ignored for up to 30 days.
	// Records loaded at start count for the groups stored with them.
	MaxLearnedPerNetwork = MaxLearned / 16
	maxLearnedHard       = 2 * MaxLearned
	learnedQueue         = 4096
	learnedPruneEvery    = 10 * time.Minute
	// MaxKeptLifetime is the longest validity (expires_at - issued_at) of
	// a record this node keeps from someone else: received in a session,
	// learned from gossip or a presentation. The issuer picks the expiry,
	// and the store prunes a record only once it expired (plus
	// Config.KeepExpired), so without it a peer could make this node keep
	// records for a century. Issuers of this implementation sign for 24
	// hours (protocol.DefaultAttestationTTL).
	MaxKeptLifetime = 30 * 24 * time.Hour
	// MaxSelfRecords bounds the records about this node held in memory
	// (the newest per issuer): past it the least useful one goes (expired
	// first, then the oldest of an issuer this node does not admit
	// directly, then the oldest).
	MaxSelfRecords = 4096
	// expiredPruneEvery is how often the store's expired attestations
	// older than Config.KeepExpired are pruned (and once at start).
	expiredPruneEvery = time.Hour
)

// LearnedVersionEvery is the least time between two versions of one
// (issuer, subject) record that this node accepts from an issuer it does
// not admit directly (spec/trust.md §3.4, §3.6): a newer version within it
// is not learned, stored or forwarded on gossip. Keys cost nothing and a
// record's times are whole seconds valid for up to MaxKeptLifetime, so one
// key could otherwise sign millions of ever newer versions of one record,
// each a new gossip message that every node verifies, forwards and writes
// to its store. A retraction (a rejection superseding the held acceptance)
// has an allowance of its own, one per LearnedVersionEvery, so that a
// re-acceptance cannot hold it back; a pair therefore changes at most
// twice per interval. Records about this node from such issuers are
// forwarded once per issuer per interval (gossipLimiter). An honest issuer
// re-attests a subject when its record nears expiry (24 hours by default)
// or after a new session, which the budgets of protocol.md §9a space out:
// ten minutes holds back no real update for long. Issuers this node admits
// directly are not held to it: their retractions count here and travel at
// once.
const LearnedVersionEvery = 10 * time.Minute

// trustRec is one indexed attestation. Envelopes are kept only for records
// about this node (it presents them); the others are in the store.
type trustRec struct {
	issuer, subject     peer.ID
	accepted            bool
	reason              skill.Reason
	issuedAt, expiresAt time.Time
	// challenges is the record's provenance source.
	challenges   skill.SourceKind
	source       string
	from, author peer.ID
	// net and block are the groups of from's connection this learned
	// record is counted in (trustState.perNet), zero when in none.
	net, block netip.Prefix
	learnedAt  time.Time
	env        []byte
	// versionAt is when this node last accepted a version of the pair
	// (learned it, or accepted a newer one on gossip), retractAt when it
	// last accepted a retraction of it, pending the newer version the
	// gossip validator accepted and that is yet to be delivered
	// (LearnedVersionEvery). Guarded by the trust lock.
	versionAt, retractAt time.Time
	pending              versionKey
	// check is the pending signature check of a learned record indexed
	// at start from its decoded envelope (loadTrustIndex), nil for a
	// record verified before it was indexed. Set when the record is made,
	// never changed: read it through sound.
	check *learnedCheck
}

// learnedCheck is the signature check of a learned record that the trust
// index holds unverified since start (spec/trust.md §5): the record counts
// for nothing until it passed it. It runs once, on first use or in the
// node's background check (checkLearned), whichever comes first.
type learnedCheck struct {
	once sync.Once
	env  []byte // released once checked
	bad  bool
}

// verifyLearned checks the envelope of a learned record read from the
// store unverified (a variable: tests count the checks).
var verifyLearned = store.VerifyLearned

// sound reports whether r may be used: a record verified before it was
// indexed is; one indexed unverified at start is verified now if it was
// not yet (once, whoever asks first) and is sound when it verifies. Safe
// under the trust lock, read or write, and without it.
func (r *trustRec) sound() bool {
	c := r.check
	if c == nil {
		return true
	}
	c.once.Do(func() {
		l := store.Learned{Envelope: c.env, Attestation: &protocol.Attestation{Issuer: r.issuer, Subject: r.subject}}
		c.bad = verifyLearned(l) != nil
		c.env = nil
	})
	return !c.bad
}

// checkPending runs the pending checks of recs on GOMAXPROCS goroutines
// and returns whether it ran them all (false when stop closed first).
func checkPending(recs []*trustRec, stop <-chan struct{}) bool {
	var next atomic.Int64
	var stopped atomic.Bool
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(recs), 1)) {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					stopped.Store(true)
					return
				default:
				}
				i := int(next.Add(1) - 1)
				if i >= len(recs) {
					return
				}
				recs[i].sound()
			}
		})
	}
	wg.Wait()
	return !stopped.Load()
}

// dropLearnedLocked removes r, a learned record about another peer, from
// the index if it is still the one held for its pair.
func (t *trustState) dropLearnedLocked(r *trustRec) {
	m := t.learned[r.subject]
	if m[r.issuer] != r {
		return
	}
	delete(m, r.issuer)
	if len(m) == 0 {
		delete(t.learned, r.subject)
	}
	t.nLearned--
	if t.perIssuer[r.issuer]--; t.perIssuer[r.issuer] <= 0 {
		delete(t.perIssuer, r.issuer)
	}
	t.uncountNetLocked(r)
}

// netFullLocked reports whether the network groups nets hold their
// share of learned records (MaxLearnedPerNetwork).
func (t *trustState) netFullLocked(nets addrNets) bool {
	return nets.prefix.IsValid() && t.perNet[nets.prefix] >= MaxLearnedPerNetwork ||
		nets.block.IsValid() && t.perNet[nets.block] >= protocol.BlockFactor*MaxLearnedPerNetwork
}

// countNetLocked counts r, a new learned record, in the groups nets.
func (t *trustState) countNetLocked(r *trustRec, nets addrNets) {
	r.net, r.block = nets.prefix, nets.block
	for _, g := range []netip.Prefix{r.net, r.block} {
		if g.IsValid() {
			if t.perNet == nil {
				t.perNet = map[netip.Prefix]int{}
			}
			t.perNet[g]++
		}
	}
}

// uncountNetLocked undoes countNetLocked for r, leaving the index.
func (t *trustState) uncountNetLocked(r *trustRec) {
	for _, g := range []netip.Prefix{r.net, r.block} {
		if g.IsValid() {
			if t.perNet[g]--; t.perNet[g] <= 0 {
				delete(t.perNet, g)
			}
		}
	}
}

// dropDamagedLocked removes from the index the records of recs that fail
// their check (running the checks not yet run) and returns how many
// failed, those already removed included.
func (t *trustState) dropDamagedLocked(recs []*trustRec) int {
	bad := 0
	for _, r := range recs {
		if !r.sound() {
			bad++
			t.dropLearnedLocked(r)
		}
	}
	return bad
}

// settlePairLocked removes the learned record held for a's pair when it
// fails its pending check, so that what learn decides about a sees the
// index as the check leaves it. Under the write lock.
func (t *trustState) settlePairLocked(a *protocol.Attestation) {
	if r := t.learned[a.Subject][a.Issuer]; r != nil && !r.sound() {
		t.dropLearnedLocked(r)
	}
}

// peekSettledLocked is peekLearnLocked on the settled pair of a; when the
// learned-record caps refuse a while the records indexed at start are
// still being checked (their counts may include damaged records, which
// the index will not hold), it waits for the check to end, the lock
// released meanwhile, and decides again. maxWait (0: none) bounds the
// wait: the gossip validator's, past which GossipSub ignores the message
// whatever the validator says, or a presentation's; the cap then
// refuses. Under the write lock.
func (t *trustState) peekSettledLocked(a *protocol.Attestation, self peer.ID, now time.Time, maxWait time.Duration, nets addrNets) (learnResult, *trustRec) {
	t.settlePairLocked(a)
	res, old := t.peekLearnLocked(a, self, now, nets)
	if res != learnUnsettled {
		return res, old
	}
	done := t.checked
	t.mu.Unlock()
	if maxWait > 0 {
		tm := time.NewTimer(maxWait)
		select {
		case <-done:
		case <-tm.C:
		}
		tm.Stop()
	} else {
		<-done
	}
	t.mu.Lock()
	t.settlePairLocked(a)
	if res, old = t.peekLearnLocked(a, self, now, nets); res == learnUnsettled {
		// The wait ended first, or the node stops (the check was cut
		// short).
		res = learnFull
	}
	return res, old
}

// awaitChecked waits for the check of the learned records indexed at
// start to end (at once when there is none).
func (t *trustState) awaitChecked() {
	t.mu.RLock()
	checking, done := t.checking, t.checked
	t.mu.RUnlock()
	if checking {
		<-done
	}
}

// versionKey names one version of an (issuer, subject) record.
type versionKey struct {
	issuedAt, expiresAt time.Time
	accepted            bool
}

func (k versionKey) is(a *protocol.Attestation) bool {
	return !k.issuedAt.IsZero() && k.issuedAt.Equal(a.IssuedAt) && k.expiresAt.Equal(a.ExpiresAt) && k.accepted == a.Accepted
}

// within reports whether now is less than d after at (false for a zero at,
// or a now before at).
func within(at, now time.Time, d time.Duration) bool {
	if at.IsZero() {
		return false
	}
	e := now.Sub(at)
	return e >= 0 && e < d
}

// versionDue reports whether a, a newer version of the pair held as r, may
// be accepted now from an issuer this node does not admit directly: the
// version the gossip validator already accepted (pending) may; a
// retraction when no retraction of the pair was accepted within
// LearnedVersionEvery; any other version when no version was.
func (r *trustRec) versionDue(a *protocol.Attestation, now time.Time) bool {
	switch {
	case r.pending.is(a):
		return true
	case !a.Accepted && r.accepted:
		return !within(r.retractAt, now, LearnedVersionEvery)
	}
	return !within(r.versionAt, now, LearnedVersionEvery)
}

// reserve notes that the gossip validator accepted a, a newer version of
// the pair held as r, so that other versions validated before a is
// delivered find the pair's interval taken.
func (r *trustRec) reserve(a *protocol.Attestation, now time.Time) {
	if !a.Accepted && r.accepted {
		r.retractAt = now
	}
	r.versionAt = now
	r.pending = versionKey{a.IssuedAt, a.ExpiresAt, a.Accepted}
}

// keptLifetime reports whether a record's validity is short enough for
// this node to keep it (MaxKeptLifetime). It compares Unix seconds, the
// record's own unit: a time.Time made from an expires_at above about
// 2^63 − 6.2·10^10 wraps into the distant past, and ExpiresAt.Sub gave a
// negative lifetime for a record valid for ever (attestation.md §6).
func keptLifetime(a *protocol.Attestation) bool {
	return keptLifetimeSecs(a) <= int64(MaxKeptLifetime/time.Second)
}

// keptLifetimeSecs is a record's validity, expires_at − issued_at, in
// seconds (no overflow: a valid record has 0 < issued_at < expires_at).
func keptLifetimeSecs(a *protocol.Attestation) int64 {
	return a.ExpiresAt.Unix() - a.IssuedAt.Unix()
}

func newTrustRec(a *protocol.Attestation, source string) *trustRec {
	return &trustRec{
		issuer: a.Issuer, subject: a.Subject, accepted: a.Accepted, reason: a.Reason,
		issuedAt: a.IssuedAt, expiresAt: a.ExpiresAt, challenges: a.Provenance.Source, source: source,
	}
}

// valid: inside the validity window (the record itself was checked when
// it was indexed).
func (r *trustRec) valid(now time.Time) bool {
	return !r.issuedAt.After(now.Add(protocol.MaxClockSkew)) && now.Before(r.expiresAt)
}

func (r *trustRec) supersedes(old *trustRec) bool {
	return old == nil || store.Supersedes(r.issuedAt, r.expiresAt, r.accepted, old.issuedAt, old.expiresAt, old.accepted)
}

// supersedesOwn is supersedes for the node's own records of a subject,
// which the store keeps all of: on a full tie (same issued_at, verdict and
// expires_at) the record of the lower challenge-source rank wins
// (spec/trust.md §1, store.SupersedesOwn), so that the node's choice does
// not depend on the order it indexes them in, at start (key order) or as
// issued.
func (r *trustRec) supersedesOwn(old *trustRec) bool {
	return old == nil || store.SupersedesOwn(r.issuedAt, r.expiresAt, r.accepted, r.challenges, old.issuedAt, old.expiresAt, old.accepted, old.challenges)
}

type trustState struct {
	// presented caches the count of presented records by issuers not
	// admitted directly (Node.presentedUntrusted).
	presented presentedCount

	// now overrides the clock of admission decisions (tests).
	now atomic.Pointer[func() time.Time]

	mu sync.RWMutex
	// issued: subject -> our newest attestation of it.
	issued map[peer.ID]*trustRec
	// learned: subject -> issuer -> newest learned attestation.
	learned   map[peer.ID]map[peer.ID]*trustRec
	perIssuer map[peer.ID]int
	nLearned  int
	// perNet counts the learned records of issuers not admitted directly
	// by the network (and the IPv6 /32) of the peer that brought them
	// (trustRec.net, .block; MaxLearnedPerNetwork).
	perNet map[netip.Prefix]int
	// self: issuer -> newest attestation of this node (received in a
	// session or learned), with its envelope.
	self    map[peer.ID]*trustRec
	revoked map[peer.ID]time.Time
	blocked map[peer.ID]time.Time // until
	gates   map[peer.ID]*GateDecision
	// checking is true while the learned records indexed at start
	// unverified are being checked (checkLearned); checked is closed when
	// that check ends, complete or cut short by the node's stop.
	checking bool
	checked  chan struct{}

	// minSource is the resolved Config.RequireSource (never empty on a
	// running node); served is the kind of challenges this node serves
	// (unknown when it cannot tell).
	minSource skill.SourceKind
	served    skill.SourceKind

	gater   *conngater.BasicConnectionGater
	persist chan Learned
	// persistDropped counts learned records not stored because the
	// persist queue was full (learn never waits for it).
	persistDropped atomic.Uint64
	// beforePersist, when set (tests), runs before each batch is written.
	beforePersist atomic.Pointer[func()]

	// presentIn holds the inbound presentations in flight (present.go).
	presentIn *streamCounts
}

func (n *Node) trustNow() time.Time {
	if f := n.trust.now.Load(); f != nil {
		return (*f)()
	}
	return time.Now()
}

func (n *Node) startTrust() error {
	t := &n.trust
	min, err := ParseRequireSource(string(n.cfg.RequireSource))
	if err != nil {
		return fmt.Errorf("require source: %w", err)
	}
	t.minSource, t.served = min, n.servedKind()
	n.warnSource()
	t.issued = map[peer.ID]*trustRec{}
	t.learned = map[peer.ID]map[peer.ID]*trustRec{}
	t.perIssuer = map[peer.ID]int{}
	t.self = map[peer.ID]*trustRec{}
	t.blocked = map[peer.ID]time.Time{}
	t.gates = map[peer.ID]*GateDecision{}
	t.presentIn = newPresentSlots()
	t.persist = make(chan Learned, learnedQueue)
	if err := n.loadTrust(); err != nil {
		return fmt.Errorf("load trust index: %w", err)
	}
	n.host.SetStreamHandler(PresentProtocol, n.handlePresent)
	n.wg.Add(2)
	go n.persistLearned()
	go n.trustJanitor()
	return nil
}

// beforeLearnedCheck, when set (tests), runs before the node's background
// check of the learned records indexed at start, with the node's stop.
var beforeLearnedCheck atomic.Pointer[func(stop <-chan struct{})]

// checkLearned verifies, while the node serves, the learned records the
// index took from the store at start without their signatures checked,
// on GOMAXPROCS goroutines, and removes those that fail (each read of a
// record not yet checked checks it first: sound). The learned-record caps
// then count sound records only.
func (n *Node) checkLearned(pending []*trustRec) {
	defer n.wg.Done()
	t := &n.trust
	defer close(t.checked)
	if f := beforeLearnedCheck.Load(); f != nil {
		(*f)(n.ctx.Done())
	}
	t0 := time.Now()
	if !checkPending(pending, n.ctx.Done()) {
		return
	}
	t.mu.Lock()
	bad := t.dropDamagedLocked(pending)
	t.checking = false
	t.mu.Unlock()
	n.log.Debug("store: learned attestations checked", "count", len(pending), "took", time.Since(t0).Round(time.Millisecond))
	if bad > 0 {
		n.log.Warn("store: skipped attestations that no longer decode or verify (damaged in place); acaptcha attestations list names them", "count", bad)
	}
}

// loadTrust builds the index from the store.
func (n *Node) loadTrust() error {
	idx, err := loadTrustIndex(n.store, n.ID(), n.host.Peerstore().PubKey(n.ID()))
	if err != nil {
		return err
	}
	t := &n.trust
	t.issued, t.learned, t.perIssuer, t.nLearned, t.self, t.revoked = idx.issued, idx.learned, idx.perIssuer, idx.nLearned, idx.self, idx.revoked
	// Records dated ahead of the clock before a restart (the issue
	// clock's lead): the next record about their subjects comes after
	// them.
	if n.svc != nil {
		for subject, r := range idx.issued {
			n.svc.NoteIssued(subject, r.issuedAt)
		}
	}
	t.perNet = idx.perNet
	if len(idx.pending) > 0 {
		t.checking, t.checked = true, make(chan struct{})
		n.wg.Add(1)
		go n.checkLearned(idx.pending)
	}
	if idx.bad > 0 {
		n.log.Warn("store: skipped attestations that no longer decode or verify (damaged in place); acaptcha attestations list names them", "count", idx.bad)
	}
	if idx.foreign > 0 {
		// A store used with another --key: its issued and received
		// records name the other identity and play no part here.
		n.log.Warn("store: records of another identity are ignored (was this store made with another --key?)",
			"records", idx.foreign, "their_peer_id", idx.other.String(), "our_peer_id", n.ID().String())
	}
	return nil
}

type trustIndex struct {
	issued    map[peer.ID]*trustRec
	learned   map[peer.ID]map[peer.ID]*trustRec
	perIssuer map[peer.ID]int
	nLearned  int
	// perNet counts the learned records by the network groups they were
	// learned from (stored with them: MaxLearnedPerNetwork holds across
	// restarts).
	perNet  map[netip.Prefix]int
	self    map[peer.ID]*trustRec
	revoked map[peer.ID]time.Time
	bad     int
	// pending are the learned records about other peers indexed without
	// their signatures checked (trustRec.check).
	pending []*trustRec
	// foreign counts the issued and received records of the store that
	// belong to another identity than self (a store made with another
	// key): they are left out of the index; other is one such identity.
	foreign int
	other   peer.ID
}

// loadTrustIndex reads a store into an index. self may be empty (the CLI
// reading a store offline): it is then inferred from the issued and
// received records. selfKey, when known, is self's public key. Of the
// issued records the index keeps the one that supersedes the others per
// subject (Store.EachNewestSound, a chunk of the store at a time, each
// winner indexed as it comes): only those are checked, and one sealed
// with selfKey without a second signature check (remote peers make the
// node issue up to some 744,000 records at the default draw budget and
// retention, one per fresh peer ID); the others (received, learned,
// another identity's) are verified, the learned records about other peers
// (up to 131 072) not here: they are decoded with every check but the
// signature and indexed with their check pending (idx.pending,
// trustRec.sound), and every read of one checks it first. Records damaged
// in place (that no longer decode, or verify) are left out and counted:
// one of them must neither stop the node nor be trusted.
func loadTrustIndex(st *Store, self peer.ID, selfKey crypto.PubKey) (*trustIndex, error) {
	idx := &trustIndex{
		issued: map[peer.ID]*trustRec{}, learned: map[peer.ID]map[peer.ID]*trustRec{},
		perIssuer: map[peer.ID]int{}, self: map[peer.ID]*trustRec{},
	}
	// The issued records are indexed as they are read, a chunk at a time
	// (Store.EachNewestSound): a node can hold some 744,000 of them.
	badIssued, err := st.EachNewestSound(Issued, selfKey, func(e Entry) error {
		if self == "" {
			self = e.Attestation.Issuer
		}
		if e.Attestation.Issuer != self {
			idx.foreign++
			idx.other = e.Attestation.Issuer
			return nil
		}
		r := newTrustRec(e.Attestation, SourceIssued)
		r.issuer = self // one copy of the string for every record
		if r.supersedesOwn(idx.issued[r.subject]) {
			idx.issued[r.subject] = r
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	received, badReceived, err := st.ListSound(Received, "")
	if err != nil {
		return nil, err
	}
	idx.bad = badIssued + badReceived
	if self == "" && len(received) > 0 {
		self = received[0].Attestation.Subject
	}
	for _, e := range received {
		if self != "" && e.Attestation.Subject != self {
			idx.foreign++
			idx.other = e.Attestation.Subject
			continue
		}
		if !keptLifetime(e.Attestation) {
			continue
		}
		r := newTrustRec(e.Attestation, SourceReceived)
		r.env = e.Envelope
		if r.supersedes(idx.self[r.issuer]) {
			idx.self[r.issuer] = r
		}
	}
	ls, bad, err := st.ListLearnedUnverified("")
	if err != nil {
		return nil, err
	}
	idx.bad += bad
	for _, l := range ls {
		a := l.Attestation
		if a.Issuer == self || !keptLifetime(a) || a.Subject == self {
			// Left out, or presented: checked now (few).
			if err := verifyLearned(l); err != nil {
				idx.bad++
				continue
			}
		}
		if a.Issuer == self || !keptLifetime(a) {
			continue
		}
		r := newTrustRec(a, string(l.Via))
		r.from, r.author, r.learnedAt, r.versionAt = l.From, l.Author, l.LearnedAt, l.LearnedAt
		if a.Subject == self {
			r.env = l.Envelope
			if r.supersedes(idx.self[r.issuer]) {
				idx.self[r.issuer] = r
			}
			continue
		}
		m := idx.learned[a.Subject]
		if m == nil {
			m = map[peer.ID]*trustRec{}
			idx.learned[a.Subject] = m
		}
		if old := m[a.Issuer]; old == nil {
			idx.perIssuer[a.Issuer]++
			idx.nLearned++
			// The groups it was learned from: the share of one network
			// (MaxLearnedPerNetwork) holds across restarts.
			r.net, r.block = l.Net, l.Block
			for _, g := range []netip.Prefix{r.net, r.block} {
				if g.IsValid() {
					if idx.perNet == nil {
						idx.perNet = map[netip.Prefix]int{}
					}
					idx.perNet[g]++
				}
			}
		} else if !r.supersedes(old) {
			continue
		} else {
			r.net, r.block = old.net, old.block // counted there
		}
		r.check = &learnedCheck{env: l.Envelope}
		idx.pending = append(idx.pending, r)
		m[a.Issuer] = r
	}
	if idx.revoked, err = st.Revocations(); err != nil {
		return nil, err
	}
	return idx, nil
}

// servedKind is the kind of challenges the node's source serves:
// Config.SourceKind, or what the source says (skill.Provenancer).
func (n *Node) servedKind() skill.SourceKind {
	if n.cfg.Source == nil {
		return skill.SourceUnknown
	}
	if n.cfg.SourceKind != skill.SourceUnknown {
		return n.cfg.SourceKind
	}
	if k, ok := n.cfg.Source.(skill.Provenancer); ok {
		return k.Kind()
	}
	return skill.SourceUnknown
}

// warnSource says once, at start, what the node's challenges are worth
// when they come from a source a script can beat.
func (n *Node) warnSource() {
	t := &n.trust
	var what string
	switch t.served {
	case skill.SourceProcedural:
		what = "challenges come from the procedural generator: a script written against this code (it is public) parses them back and passes them"
	case skill.SourceCorpus:
		// Nodes serving the same corpus (the embedded examples are the
		// same in every binary) draw the same narratives: when one
		// verifies the other, the prover recognises a narrative it issued
		// itself and declines the session as a reflection (spec
		// protocol.md §7), so such nodes never attest each other.
		what = "challenges come from a static corpus: anyone holding its files can pre-solve them, and a script passes with the answers; nodes serving the same corpus (the embedded examples are the same in every binary) decline each other's sessions as reflections of their own challenges, so give each node its own corpus or an LLM (--llm)"
	default:
		return
	}
	self := "this node admits and vouches on them (require source " + string(t.minSource) + ")"
	if !t.served.AtLeast(t.minSource) {
		self = "this node itself neither admits nor vouches on them (require source " + string(t.minSource) + ")"
	}
	n.log.Warn("acaptcha: "+what+"; the attestations this node issues say so (source "+string(t.served)+"), and nodes requiring hybrid or llm challenges (the default) do not admit on them; "+self,
		"source", t.served, "require_source", t.minSource)
}

// RequireSource returns the node's resolved challenge-source policy.
func (n *Node) RequireSource() skill.SourceKind { return n.trust.minSource }

// servesRequiredSource reports whether a fresh session of ours yields an
// attestation that meets our own source policy.
func (t *trustState) servesRequiredSource() bool {
	return t.served.Valid() && t.served.AtLeast(t.minSource)
}

// meets reports whether r's challenges meet the source policy.
func (t *trustState) meets(r *trustRec) bool { return r.challenges.AtLeast(t.minSource) }

// Admission decides whether p is admitted. Direct: our newest attestation
// of p is an unexpired, unrevoked acceptance on challenges that meet
// Config.RequireSource. Quorum (Config.TrustQuorum K
// > 0): at least K distinct issuers other than p, each admitted directly by
// this node, hold unexpired acceptances of p that we learned on challenges
// that meet Config.RequireSource, each their issuer's newest about p. Our own valid rejection of p is never
// overridden by a quorum; a revocation discards every attestation of p
// issued up to the second of the revocation.
func (n *Node) Admission(p peer.ID) Admission {
	t := &n.trust
	now := n.trustNow()
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.admissionLocked(p, n.ID(), now, n.cfg.TrustQuorum)
}

// directLocked evaluates our own evidence about p: admitted, or the reason
// it is not.
func (t *trustState) directLocked(p peer.ID, now time.Time) (bool, string) {
	if _, ok := t.blocked[p]; ok {
		// Until the janitor lifts the block at the gater.
		return false, NotAdmittedBlocked
	}
	revokedAt, revoked := t.revoked[p]
	r := t.issued[p]
	switch {
	case r != nil && (!revoked || r.issuedAt.After(revokedAt)):
		switch {
		case !r.valid(now):
			return false, NotAdmittedExpired
		case !r.accepted:
			return false, NotAdmittedRejected
		case !t.meets(r):
			return false, NotAdmittedSource
		}
		return true, ""
	case revoked:
		return false, NotAdmittedRevoked
	}
	return false, NotAdmittedUnattested
}

func (t *trustState) admissionLocked(p, self peer.ID, now time.Time, quorum int) Admission {
	if p == "" || p == self {
		return Admission{Reason: NotAdmittedUnattested}
	}
	ok, reason := t.directLocked(p, now)
	if ok {
		return Admission{Admitted: true, Via: AdmittedDirect}
	}
	if quorum <= 0 || reason == NotAdmittedRejected || reason == NotAdmittedBlocked {
		return Admission{Reason: reason}
	}
	issuers := t.quorumIssuersLocked(p, self, now)
	if len(issuers) >= quorum {
		return Admission{Admitted: true, Via: AdmittedQuorum, Issuers: issuers}
	}
	return Admission{Reason: reason}
}

// quorumIssuersLocked returns the issuers whose learned attestations of p
// count toward a quorum, sorted.
func (t *trustState) quorumIssuersLocked(p, self peer.ID, now time.Time) []peer.ID {
	revokedAt, revoked := t.revoked[p]
	var out []peer.ID
	for issuer, r := range t.learned[p] {
		if r.sound() && t.countsLocked(r, p, self, now, revoked, revokedAt) {
			out = append(out, issuer)
		}
	}
	slices.Sort(out)
	return out
}

func (t *trustState) countsLocked(r *trustRec, p, self peer.ID, now time.Time, revoked bool, revokedAt time.Time) bool {
	if r.issuer == p || r.issuer == self || !r.accepted || !r.valid(now) || !t.meets(r) {
		return false
	}
	if revoked && !r.issuedAt.After(revokedAt) {
		return false
	}
	ok, _ := t.directLocked(r.issuer, now)
	return ok
}

// Revoke withdraws this node's admission of p: every attestation of p
// issued up to now (ours and learned; and ours dated ahead of the clock by
// the issue clock) stops counting, although the signed
// records stay valid for others. The revocation is stored and survives a
// restart; a fresh verification of p (or, with a quorum, attestations
// issued after the revocation) admits it again. Revoking an issuer also
// removes its weight from every quorum.
func (n *Node) Revoke(p peer.ID) error {
	if p == "" || p == n.ID() {
		return errors.New("revoke: not a remote peer")
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	now := n.trustNow()
	at := now.UTC().Truncate(time.Second)
	// The issue clock dates a record up to a minute after the one before
	// it about the same subject (spec/attestation.md §5), so this node's
	// newest record of p may be dated ahead of its clock: issued before
	// the revocation, it must not count as issued after it. (Within the
	// clock-skew allowance only: a record dated further ahead is not
	// valid now anyway.)
	n.trust.mu.RLock()
	if r := n.trust.issued[p]; r != nil && r.issuedAt.After(at) && !r.issuedAt.After(now.Add(protocol.MaxClockSkew)) {
		at = r.issuedAt.UTC()
	}
	n.trust.mu.RUnlock()
	if err := n.store.PutRevocation(p, at); err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	n.trust.mu.Lock()
	n.trust.revoked[p] = at
	n.trust.mu.Unlock()
	n.unprotect(p)
	n.log.Info("revoked admission", "peer", p, "at", at)
	return nil
}

// indexIssued records an attestation this node issued.
func (n *Node) indexIssued(a *protocol.Attestation) (prev *trustRec) {
	r := newTrustRec(a, SourceIssued)
	t := &n.trust
	t.mu.Lock()
	defer t.mu.Unlock()
	prev = t.issued[a.Subject]
	if r.supersedesOwn(prev) {
		t.issued[a.Subject] = r
	}
	return prev
}

// indexReceived records an attestation of this node from a session it
// proved in.
func (n *Node) indexReceived(a *protocol.Attestation, env []byte) {
	r := newTrustRec(a, SourceReceived)
	r.env = env
	t := &n.trust
	t.mu.Lock()
	defer t.mu.Unlock()
	t.putSelfLocked(r, n.trustNow())
}

// putSelfLocked keeps r as the newest record about this node from its
// issuer, when it supersedes the one held, within MaxSelfRecords.
func (t *trustState) putSelfLocked(r *trustRec, now time.Time) {
	old, ok := t.self[r.issuer]
	if !r.supersedes(old) {
		return
	}
	if !ok && len(t.self) >= MaxSelfRecords {
		t.evictSelfLocked(now)
	}
	t.self[r.issuer] = r
}

// evictSelfLocked drops one record about this node: an expired one, else
// the oldest of an issuer this node does not admit directly, else the
// oldest.
func (t *trustState) evictSelfLocked(now time.Time) {
	var victim, oldest *trustRec
	for _, r := range t.self {
		if !r.valid(now) {
			delete(t.self, r.issuer)
			return
		}
		if oldest == nil || r.issuedAt.Before(oldest.issuedAt) {
			oldest = r
		}
		if victim == nil || r.issuedAt.Before(victim.issuedAt) {
			if ok, _ := t.directLocked(r.issuer, now); !ok {
				victim = r
			}
		}
	}
	if victim == nil {
		victim = oldest
	}
	if victim != nil {
		delete(t.self, victim.issuer)
	}
}

// learnResult says what learn did with an attestation.
type learnResult int

const (
	learnedNew learnResult = iota
	learnDuplicate
	learnStale
	learnOwn
	learnFull
	learnAboutUs
	learnTooLong
	// learnTooSoon: a newer version of a held pair by an issuer not
	// admitted directly, within LearnedVersionEvery.
	learnTooSoon
	// Gossip validation only (admitGossip): the issuer's token bucket is
	// empty; a record about us by an issuer not admitted directly was
	// accepted within LearnedVersionEvery; a rejection that retracts no
	// acceptance.
	learnIssuerRate
	learnAboutUsRate
	learnNotRetraction
	// learnUnsettled (peekLearnLocked only): the caps refuse while the
	// records indexed at start are being checked; peekSettledLocked
	// decides once the check is over.
	learnUnsettled
)

func (r learnResult) String() string {
	return [...]string{"learned", "duplicate", "stale", "own", "capacity", "about_us", "lifetime",
		"version_rate", "issuer_rate", "about_us_rate", "not_accepted", "unsettled"}[r]
}

// peekLearnLocked tells what learn would do with an attestation, without
// changing anything.
func (t *trustState) peekLearnLocked(a *protocol.Attestation, self peer.ID, now time.Time, nets addrNets) (learnResult, *trustRec) {
	if a.Issuer == self {
		return learnOwn, nil
	}
	if !keptLifetime(a) {
		return learnTooLong, nil
	}
	var old *trustRec
	if a.Subject == self {
		// Records about us come with our sessions. From third parties we
		// keep only those by issuers we admit directly: anyone can mint
		// acceptances of us, and junk would crowd our presentations.
		if ok, _ := t.directLocked(a.Issuer, now); !ok {
			return learnAboutUs, nil
		}
		old = t.self[a.Issuer]
	} else {
		old = t.learned[a.Subject][a.Issuer]
	}
	r := newTrustRec(a, "")
	if old != nil && !r.supersedes(old) {
		if r.issuedAt.Equal(old.issuedAt) && r.accepted == old.accepted && r.expiresAt.Equal(old.expiresAt) {
			return learnDuplicate, old
		}
		return learnStale, old
	}
	if a.Subject == self {
		// By an issuer this node admits directly (above).
		return learnedNew, old
	}
	trusted, _ := t.directLocked(a.Issuer, now)
	if old == nil {
		limit := t.nLearned >= MaxLearned || t.perIssuer[a.Issuer] >= MaxLearnedPerIssuer ||
			len(t.learned[a.Subject]) >= MaxLearnedPerSubject || t.netFullLocked(nets)
		if t.nLearned >= maxLearnedHard || (limit && !trusted) {
			if t.checking {
				// The counts may include records that fail their
				// pending check (peekSettledLocked waits for it).
				return learnUnsettled, old
			}
			return learnFull, old
		}
		return learnedNew, old
	}
	if !trusted && !old.versionDue(a, now) {
		return learnTooSoon, old
	}
	return learnedNew, old
}

// admitGossip decides whether the gossip validator accepts a verified
// record a that is not this node's own: forwards it, and learns it once
// delivered (spec/trust.md §3.4). It peeks as learn would and then, for an
// issuer this node does not admit directly, applies the gossip rates under
// the write lock, so that concurrent validations see each other: a record
// about this node is accepted once per issuer per LearnedVersionEvery; a
// learnable record takes a token from its issuer's bucket; a newer version
// of a held pair (due, peekLearnLocked) is reserved on the held record, so
// that a second version validated before the first is delivered finds the
// pair's interval taken. A rejection is accepted only as a retraction of
// the same issuer's acceptance held here, or when its issuer is admitted
// directly. lim's lock is taken under the trust lock.
func (t *trustState) admitGossip(a *protocol.Attestation, self peer.ID, now time.Time, lim *gossipLimiter) learnResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	// The forwarder's network is counted when the record is learned
	// (learn), not here: a record over one network's share is still
	// forwarded, only not kept.
	res, old := t.peekSettledLocked(a, self, now, gossipValidateTimeout, addrNets{})
	switch {
	case res == learnAboutUs && a.Accepted:
		// Forwarded (its issuer published it), not learned.
		if !lim.allowAboutUs(a.Issuer, now) {
			return learnAboutUsRate
		}
		return learnAboutUs
	case res == learnAboutUs:
		return learnNotRetraction
	case res == learnedNew && !a.Accepted && (old == nil || !old.accepted):
		// A rejection that retracts no acceptance held here. By an issuer
		// this node admits directly it is learned all the same (step 11):
		// the node may have missed the acceptance it retracts, which the
		// subject keeps and can present later; the rejection, newer,
		// makes that acceptance stale. Anyone else's is junk to it.
		if ok, _ := t.directLocked(a.Issuer, now); !ok || a.Subject == self {
			return learnNotRetraction
		}
		return res
	case res != learnedNew:
		return res
	}
	if a.Subject == self {
		// By an issuer this node admits directly (peekLearnLocked).
		return res
	}
	if ok, _ := t.directLocked(a.Issuer, now); ok {
		return res
	}
	if old == nil && !lim.allowNewPair(a, now) {
		// Another version of this pair, new to the node, was accepted
		// and is yet to be delivered: it holds the pair's interval as a
		// reservation would (trust.md §3.4).
		return learnTooSoon
	}
	if !lim.allowIssuer(a.Issuer, now) {
		return learnIssuerRate
	}
	if old != nil {
		old.reserve(a, now)
	}
	return res
}

// learn indexes and persists a verified attestation learned from a third
// party. env must not be modified afterwards.
func (n *Node) learn(a *protocol.Attestation, env []byte, via Via, from, author peer.ID) learnResult {
	t := &n.trust
	now := n.trustNow()
	self := n.ID()
	// A cap that waits for the start-up check of learned records waits
	// no longer than the exchange that brought the record may last: a
	// presentation's whole time, or the gossip validator's (the learning
	// goroutine of gossip serves every message after it).
	maxWait := PresentTimeout
	if via == ViaGossip {
		maxWait = gossipValidateTimeout
	}
	// The groups of the peer that brought it: a record of an issuer not
	// admitted directly counts in them (MaxLearnedPerNetwork).
	var nets addrNets
	if conns := n.host.Network().ConnsToPeer(from); len(conns) > 0 {
		nets, _ = netsOf(conns[0].RemoteMultiaddr(), n.cfg.LimitLoopback)
	}
	t.mu.Lock()
	if direct, _ := t.directLocked(a.Issuer, now); direct {
		nets = addrNets{}
	}
	res, old := t.peekSettledLocked(a, self, now, maxWait, nets)
	if res != learnedNew {
		t.mu.Unlock()
		return res
	}
	r := newTrustRec(a, string(via))
	r.from, r.author, r.learnedAt, r.versionAt = from, author, now, now
	if old != nil {
		r.retractAt = old.retractAt
		if !a.Accepted && old.accepted && !old.pending.is(a) {
			r.retractAt = now
		}
	}
	if a.Subject == self {
		r.env = env
		t.putSelfLocked(r, now)
	} else {
		m := t.learned[a.Subject]
		if m == nil {
			m = map[peer.ID]*trustRec{}
			t.learned[a.Subject] = m
		}
		if old == nil {
			t.perIssuer[a.Issuer]++
			t.nLearned++
			t.countNetLocked(r, nets)
		} else {
			// The pair keeps the slot it was counted in.
			r.net, r.block = old.net, old.block
		}
		m[a.Issuer] = r
	}
	t.mu.Unlock()
	if via == ViaPresentation && a.Subject != self && !n.admitsDirectly(a.Issuer) {
		n.notePresentedUntrusted()
	}
	n.metrics.observeLearned(via)
	l := Learned{Attestation: a, Envelope: env, Via: via, From: from, Author: author, LearnedAt: now, Net: r.net, Block: r.block}
	select {
	case t.persist <- l:
	default:
		// Never hold up gossip delivery or a presentation on the store:
		// the record stays indexed until the node restarts.
		dropped := t.persistDropped.Add(1)
		n.warnPeer("", "learned attestation not stored: persist queue full", "dropped_total", dropped)
	}
	return res
}

// learnedDropped counts the learned records not stored because the
// persist queue was full.
func (n *Node) learnedDropped() uint64 { return n.trust.persistDropped.Load() }

// persistLearned writes learned attestations to the store in batches, off
// the gossip and presentation paths. It drains the queue when the node
// stops.
func (n *Node) persistLearned() {
	defer n.wg.Done()
	t := &n.trust
	write := func(first Learned) {
		if f := t.beforePersist.Load(); f != nil {
			(*f)()
		}
		batch := []Learned{first}
	more:
		for len(batch) < 256 {
			select {
			case l := <-t.persist:
				batch = append(batch, l)
			default:
				break more
			}
		}
		if err := n.store.PutLearned(batch...); err != nil {
			n.log.Error("persist learned attestations", "count", len(batch), "err", err)
		}
	}
	for {
		select {
		case l := <-t.persist:
			write(l)
		case <-n.ctx.Done():
			for {
				select {
				case l := <-t.persist:
					write(l)
				default:
					return
				}
			}
		}
	}
}

// trustJanitor unblocks peers whose cooldown ended and prunes expired
// learned attestations from the index and the store.
func (n *Node) trustJanitor() {
	defer n.wg.Done()
	tick := time.Minute
	if n.cfg.BlockRejected > 0 {
		tick = min(time.Second, n.cfg.BlockRejected/4+time.Millisecond)
	}
	tk := time.NewTicker(tick)
	defer tk.Stop()
	lastPrune := n.trustNow()
	n.pruneExpired(lastPrune)
	lastExpired := lastPrune
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-tk.C:
		}
		now := n.trustNow()
		n.unblockExpired(now)
		if now.Sub(lastPrune) >= learnedPruneEvery {
			lastPrune = now
			n.pruneLearned(now)
		}
		if now.Sub(lastExpired) >= expiredPruneEvery {
			lastExpired = now
			n.pruneExpired(now)
		}
	}
}

// DefaultKeepExpired is how long the store keeps an attestation after it
// expired by default (Config.KeepExpired): long enough to look back on a
// month of sessions, short enough that the store stays the size of the
// budgets' hourly bounds times about a month.
const DefaultKeepExpired = 30 * 24 * time.Hour

// pruneExpired deletes the issued and received attestations that expired
// more than Config.KeepExpired before now, from the store and from the
// trust index's issued records: the index kept the newest issued record of
// every subject for as long as the node ran, one per session drawn, while
// the store let them go (a node up for a year at the default draw budget
// held some 8.7 million; a restart loads only the store's). The index then
// holds no record the store let go. A rejection is kept until
// MaxKeptLifetime after its issue, however short KeepExpired is: it
// supersedes the acceptances before it (store.PruneExpired).
func (n *Node) pruneExpired(now time.Time) {
	keep := n.cfg.KeepExpired
	switch {
	case keep < 0:
		return
	case keep == 0:
		keep = DefaultKeepExpired
	}
	cutoff := now.Add(-keep)
	t := &n.trust
	t.mu.Lock()
	keepRejections := now.Add(-MaxKeptLifetime)
	for p, r := range t.issued {
		if r.expiresAt.Before(cutoff) && (r.accepted || r.issuedAt.Before(keepRejections)) {
			delete(t.issued, p)
		}
	}
	t.mu.Unlock()
	if k, err := n.store.PruneExpired(n.ctx, cutoff, keepRejections); err != nil {
		if n.ctx.Err() == nil {
			n.log.Warn("prune expired attestations", "err", err)
		}
	} else if k > 0 {
		n.log.Info("pruned expired attestations", "count", k, "expired_before", now.Add(-keep).Format(time.RFC3339))
	}
}

func (n *Node) pruneLearned(now time.Time) {
	t := &n.trust
	t.mu.Lock()
	for subject, m := range t.learned {
		for issuer, r := range m {
			if store.LearnedDead(r.accepted, r.issuedAt, r.expiresAt, now, MaxKeptLifetime) {
				delete(m, issuer)
				t.nLearned--
				if t.perIssuer[issuer]--; t.perIssuer[issuer] <= 0 {
					delete(t.perIssuer, issuer)
				}
				t.uncountNetLocked(r)
			}
		}
		if len(m) == 0 {
			delete(t.learned, subject)
		}
	}
	for issuer, r := range t.self {
		if !now.Before(r.expiresAt) {
			delete(t.self, issuer)
		}
	}
	t.mu.Unlock()
	if k, err := n.store.PruneLearned(now, MaxKeptLifetime); err != nil {
		n.log.Warn("prune learned attestations", "err", err)
	} else if k > 0 {
		n.log.Debug("pruned expired learned attestations", "count", k)
	}
}

// presentableLocked returns this node's valid acceptances, the current one
// per issuer, at most max: those by issuers this node admits directly
// first (peers that verified us and that we verified are the likeliest to
// be trusted by the receiver too, and cannot be Sybils we never met), then
// those on the strongest challenge source, then the newest.
func (t *trustState) presentableLocked(now time.Time, max int) [][]byte {
	type cand struct {
		r       *trustRec
		trusted bool
	}
	var cs []cand
	for _, r := range t.self {
		if r.accepted && r.valid(now) && len(r.env) > 0 {
			ok, _ := t.directLocked(r.issuer, now)
			cs = append(cs, cand{r, ok})
		}
	}
	slices.SortFunc(cs, func(a, b cand) int {
		if a.trusted != b.trusted {
			if a.trusted {
				return -1
			}
			return 1
		}
		// Receivers that require a minimum source count only records
		// that meet it: stronger challenges first.
		if ra, rb := a.r.challenges.Rank(), b.r.challenges.Rank(); ra != rb {
			return rb - ra
		}
		return b.r.issuedAt.Compare(a.r.issuedAt)
	})
	rs := make([]*trustRec, len(cs))
	for i, c := range cs {
		rs[i] = c.r
	}
	if len(rs) > max {
		rs = rs[:max]
	}
	out := make([][]byte, len(rs))
	for i, r := range rs {
		out[i] = r.env
	}
	return out
}

// The trust state's lock is held by trust.go and admission.go (the trust
// concern) only; first contact, gossip and presentation ask through these
// methods.

// direct reports whether this node admits p on its own verification.
func (t *trustState) direct(p peer.ID, now time.Time) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ok, _ := t.directLocked(p, now)
	return ok
}

// ownAcceptance reports whether this node's own standing verdict on p
// accepts it: p is admitted directly, or would be but for the challenge
// source its record names (the verdict accepted it all the same).
func (t *trustState) ownAcceptance(p peer.ID, now time.Time) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ok, reason := t.directLocked(p, now)
	return ok || reason == NotAdmittedSource
}

// presentable returns the envelopes this node presents about itself.
func (t *trustState) presentable(now time.Time, max int) [][]byte {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.presentableLocked(now, max)
}

// issuedStanding returns this node's newest verdict on p, and whether it
// is an acceptance on challenges below the node's own source policy while
// the node serves that policy (weak: worth re-attesting).
func (t *trustState) issuedStanding(p peer.ID) (r *trustRec, weak bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	r = t.issued[p]
	return r, r != nil && r.accepted && !t.meets(r) && t.servesRequiredSource()
}

// presentedUntrusted counts the indexed records learned by presentation
// whose issuer this node does not admit directly.
func (t *trustState) presentedUntrusted(now time.Time) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	k := 0
	direct := map[peer.ID]bool{}
	for _, m := range t.learned {
		for issuer, r := range m {
			if r.source != SourcePresentation || !r.sound() {
				continue
			}
			ok, seen := direct[issuer]
			if !seen {
				ok, _ = t.directLocked(issuer, now)
				direct[issuer] = ok
			}
			if !ok {
				k++
			}
		}
	}
	return k
}
