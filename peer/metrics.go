package peer

// Node counters (Stats) and Prometheus metrics. The counters are always
// kept; the Prometheus collectors exist only when Config.Metrics is set.
// Every method is safe on a nil *metrics.

import (
	"errors"
	"strconv"
	"sync/atomic"

	"github.com/libp2p/go-libp2p"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/acaptcha/acaptcha/internal/liblog"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// Outcomes counts attestations by verdict.
type Outcomes struct {
	Accepted uint64 `json:"accepted"`
	Rejected uint64 `json:"rejected"`
}

// Stats are the node's counters since it started.
type Stats struct {
	// SessionsVerified counts verifier sessions this node ran to an end
	// (a verdict or an inconclusive outcome); SessionsProved the sessions
	// other peers ran against this node that ended with a verdict or broke
	// off (ProveFailed).
	SessionsVerified uint64 `json:"sessions_verified"`
	SessionsProved   uint64 `json:"sessions_proved"`
	// AttestationsIssued counts the records this node signed,
	// Inconclusive the verifier sessions that yielded none;
	// AttestationsReceived the valid records verifiers sent us.
	AttestationsIssued   Outcomes `json:"attestations_issued"`
	Inconclusive         uint64   `json:"inconclusive"`
	AttestationsReceived Outcomes `json:"attestations_received"`
	ProveFailed          uint64   `json:"prove_failed"`
	// Gossip: records this node published; records delivered to it by
	// others after validation; validation outcomes of everything it saw
	// (its own publications included in neither Rejected nor Ignored).
	GossipPublished uint64 `json:"gossip_published"`
	GossipDelivered uint64 `json:"gossip_delivered"`
	GossipRejected  uint64 `json:"gossip_rejected"`
	GossipIgnored   uint64 `json:"gossip_ignored"`
	// Learned counts new records learned from third parties, by gossip or
	// presentation.
	Learned             uint64 `json:"learned"`
	LearnedGossip       uint64 `json:"learned_gossip"`
	LearnedPresentation uint64 `json:"learned_presentation"`
	// LearnedNotStored counts learned records whose store write was
	// dropped because the persist queue was full: learning never waits
	// for the store (spec/trust.md §3.4); the record stays indexed until
	// the node restarts.
	LearnedNotStored uint64 `json:"learned_not_stored"`
	// PresentationsSent and PresentationsReceived count completed
	// presentation exchanges.
	PresentationsSent     uint64 `json:"presentations_sent"`
	PresentationsReceived uint64 `json:"presentations_received"`
	// AdmissionsGranted and AdmissionsDenied count gated-stream decisions.
	AdmissionsGranted uint64 `json:"admissions_granted"`
	AdmissionsDenied  uint64 `json:"admissions_denied"`
	// Blocked counts peers blocked at the connection gater.
	Blocked uint64 `json:"blocked"`
	// Abuse resistance (issue 10). ReciprocalAsked counts hellos that
	// asked this node to verify the peer back; ReciprocalRun the
	// reciprocal requests that started a session; the rest were
	// coalesced or dropped (a session in flight or pending, a back-off,
	// a valid attestation of the peer). ContactLeashed counts first-contact
	// sessions whose peer did not answer the hello within the leash and
	// lost its slot. PresentationsLimited counts inbound presentations
	// refused by the per-peer or global rate; PresentedCapped the
	// presented records not learned because the bound on records from
	// issuers this node does not admit was reached. GossipPriced counts
	// the gossip messages dropped unchecked past the signature-check
	// budgets of their forwarder or its network.
	GossipPriced         uint64 `json:"gossip_priced"`
	ReciprocalAsked      uint64 `json:"reciprocal_asked"`
	ReciprocalRun        uint64 `json:"reciprocal_run"`
	ContactLeashed       uint64 `json:"contact_leashed"`
	PresentationsLimited uint64 `json:"presentations_limited"`
	PresentedCapped      uint64 `json:"presented_capped"`
	// RelayedRefused counts inbound relayed connections refused because
	// their relay is not one of Config.Relays (gate.go), and the stop
	// streams of such relays that would deliver them (negotiating.go).
	RelayedRefused uint64 `json:"relayed_refused"`
	// DialsRefused counts dials refused by Config.DialPublicOnly.
	DialsRefused uint64 `json:"dials_refused"`
	// StoreCommits counts the store's synced read-write transactions
	// since it was opened; StoreBatchedWrites the records the commit
	// queue put in them (Store.Commits). Their ratio is the group
	// commit's batch; each commit costs two disk syncs.
	StoreCommits       uint64 `json:"store_commits"`
	StoreBatchedWrites uint64 `json:"store_batched_writes"`
	// ChallengesExhausted counts the verifier sessions that found the
	// challenge source out of sets (skill.ErrExhausted): each ended
	// inconclusive. ChallengesServed is how many sets the source served
	// since the node started (draws not given back).
	ChallengesExhausted uint64 `json:"challenges_exhausted"`
	ChallengesServed    uint64 `json:"challenges_served"`
}

type metrics struct {
	sessionsVerified, sessionsProved                 atomic.Uint64
	issuedAccepted, issuedRejected, inconclusive     atomic.Uint64
	receivedAccepted, receivedRejected, proveFailed  atomic.Uint64
	gossipPublished, gossipDelivered                 atomic.Uint64
	gossipRejected, gossipIgnored                    atomic.Uint64
	learnedGossip, learnedPresentation               atomic.Uint64
	presentSent, presentReceived                     atomic.Uint64
	admissionsGranted, admissionsDenied, blockedPeer atomic.Uint64
	reciprocalAsked, reciprocalRun, contactLeashed   atomic.Uint64
	presentLimited, presentedCapped, gossipPriced    atomic.Uint64
	sourceExhausted                                  atomic.Uint64

	poolDepth    atomic.Pointer[func() int]
	poolFailures atomic.Pointer[func() int]
	prom         *promMetrics
}

type promMetrics struct {
	issued, received *prometheus.CounterVec
	roundEffective   *prometheus.HistogramVec
	sessionSeconds   *prometheus.HistogramVec
	admissions       *prometheus.CounterVec
	gossip           *prometheus.CounterVec
	published        prometheus.Counter
	learned          *prometheus.CounterVec
	presentations    *prometheus.CounterVec
	blocked          prometheus.Counter
	exhausted        prometheus.Counter
}

const metricsNamespace = "acaptcha"

// newMetrics returns the node's counters, with Prometheus collectors
// registered on reg when it is not nil. Collectors already registered by
// another node on the same registry are shared (their series add up); the
// pool gauges and the store counters (of st) are registered by the first
// node only.
func newMetrics(reg prometheus.Registerer, st *Store) *metrics {
	m := &metrics{}
	if reg == nil {
		return m
	}
	timeBuckets := []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300}
	p := &promMetrics{
		issued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "attestations_issued_total",
			Help: "Verifier sessions this node ran, by verdict (accepted, rejected, inconclusive) and reason.",
		}, []string{"verdict", "reason"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "attestations_received_total",
			Help: "Sessions other peers ran against this node, by verdict (accepted, rejected, failed) and reason.",
		}, []string{"verdict", "reason"}),
		roundEffective: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "round_effective_seconds",
			Help:    "Effective (RTT-credited) answer time of the answered rounds of this node's verifier sessions.",
			Buckets: timeBuckets,
		}, []string{"round"}),
		sessionSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "session_seconds",
			Help:    "Duration of attestation sessions, by this node's role (verifier, prover).",
			Buckets: timeBuckets,
		}, []string{"role"}),
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "admission_decisions_total",
			Help: "Gated-protocol admission decisions, by protocol, decision (granted, denied) and how (direct, quorum) or why not.",
		}, []string{"protocol", "decision", "reason"}),
		gossip: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "gossip_validation_total",
			Help: "Attestation gossip validation results (accept, reject, ignore) by reason.",
		}, []string{"result", "reason"}),
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "gossip_published_total",
			Help: "Attestations this node published on the gossip topic.",
		}),
		learned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "attestations_learned_total",
			Help: "Attestations learned from third parties, by way (gossip, presentation).",
		}, []string{"via"}),
		presentations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "presentations_total",
			Help: "Presentation exchanges, by direction (sent, received) and result.",
		}, []string{"direction", "result"}),
		blocked: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "peers_blocked_total",
			Help: "Rejected peers blocked at the connection gater.",
		}),
		exhausted: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "challenge_source_exhausted_total",
			Help: "Verifier sessions that found the challenge source out of sets (each ended inconclusive).",
		}),
	}
	p.issued = registerShared(reg, p.issued)
	p.received = registerShared(reg, p.received)
	p.roundEffective = registerShared(reg, p.roundEffective)
	p.sessionSeconds = registerShared(reg, p.sessionSeconds)
	p.admissions = registerShared(reg, p.admissions)
	p.gossip = registerShared(reg, p.gossip)
	p.published = registerShared(reg, p.published)
	p.learned = registerShared(reg, p.learned)
	p.presentations = registerShared(reg, p.presentations)
	p.blocked = registerShared(reg, p.blocked)
	p.exhausted = registerShared(reg, p.exhausted)
	_ = reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: metricsNamespace, Name: "pool_depth",
		Help: "Challenge sets ready in the generation pool, as fed by Node.SetPoolDepth (0 without a pool).",
	}, func() float64 {
		if f := m.poolDepth.Load(); f != nil {
			return float64((*f)())
		}
		return 0
	}))
	_ = reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: metricsNamespace, Name: "pool_consecutive_failures",
		Help: "Generation attempts of the challenge pool that failed since its last stored set, as fed by Node.SetPoolFailures (0 without a pool).",
	}, func() float64 {
		if f := m.poolFailures.Load(); f != nil {
			return float64((*f)())
		}
		return 0
	}))
	// Log lines about remote peers held back by the rate limits (and
	// written at DEBUG, if at all): this process's, whichever node
	// registered first.
	for _, c := range []struct {
		source string
		get    func() uint64
	}{
		{"node", func() uint64 { return linesHeldBack.Load() + protocol.SuppressedLogLines() }},
		{"libraries", liblog.Suppressed},
	} {
		_ = reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "log_lines_suppressed_total",
			Help:        "Log lines a remote peer could trigger that the per-peer and total rate limits held back (this process): source node for acaptcha's own, libraries for go-libp2p's, the DHT's and GossipSub's.",
			ConstLabels: prometheus.Labels{"source": c.source},
		}, func() float64 { return float64(c.get()) }))
	}
	if st != nil {
		for _, c := range []struct {
			name, help string
			get        func(commits, batched uint64) uint64
		}{
			{"store_commits_total", "Synced read-write transactions of the node's store (bbolt syncs twice per commit).",
				func(c, _ uint64) uint64 { return c }},
			{"store_batched_writes_total", "Attestation records written through the store's group commit (records per commit = this over acaptcha_store_commits_total, for those commits).",
				func(_, b uint64) uint64 { return b }},
		} {
			_ = reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: metricsNamespace, Name: c.name, Help: c.help},
				func() float64 { return float64(c.get(st.Commits())) }))
		}
	}
	m.prom = p
	return m
}

// registerShared registers c, or returns the collector of the same type
// already registered under the same description.
func registerShared[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

// SetPoolDepth makes the acaptcha_pool_depth gauge report f() at every
// scrape (f must be fast and safe for concurrent use; nil clears it). A
// challenge pool feeds it, e.g. n.SetPoolDepth(func() int { return
// pool.Stats().Ready }).
func (n *Node) SetPoolDepth(f func() int) {
	if n.metrics == nil {
		return
	}
	if f == nil {
		n.metrics.poolDepth.Store(nil)
		return
	}
	n.metrics.poolDepth.Store(&f)
}

// SetPoolFailures makes the acaptcha_pool_consecutive_failures gauge
// report f() at every scrape (as SetPoolDepth; nil clears it), e.g.
// n.SetPoolFailures(pool.ConsecutiveFailures).
func (n *Node) SetPoolFailures(f func() int) {
	if n.metrics == nil {
		return
	}
	if f == nil {
		n.metrics.poolFailures.Store(nil)
		return
	}
	n.metrics.poolFailures.Store(&f)
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	m := n.metrics
	if m == nil {
		return Stats{}
	}
	s := Stats{
		SessionsVerified:      m.sessionsVerified.Load(),
		SessionsProved:        m.sessionsProved.Load(),
		AttestationsIssued:    Outcomes{Accepted: m.issuedAccepted.Load(), Rejected: m.issuedRejected.Load()},
		Inconclusive:          m.inconclusive.Load(),
		AttestationsReceived:  Outcomes{Accepted: m.receivedAccepted.Load(), Rejected: m.receivedRejected.Load()},
		ProveFailed:           m.proveFailed.Load(),
		GossipPublished:       m.gossipPublished.Load(),
		GossipDelivered:       m.gossipDelivered.Load(),
		GossipRejected:        m.gossipRejected.Load(),
		GossipIgnored:         m.gossipIgnored.Load(),
		LearnedGossip:         m.learnedGossip.Load(),
		LearnedPresentation:   m.learnedPresentation.Load(),
		PresentationsSent:     m.presentSent.Load(),
		PresentationsReceived: m.presentReceived.Load(),
		AdmissionsGranted:     m.admissionsGranted.Load(),
		AdmissionsDenied:      m.admissionsDenied.Load(),
		Blocked:               m.blockedPeer.Load(),
		ReciprocalAsked:       m.reciprocalAsked.Load(),
		ReciprocalRun:         m.reciprocalRun.Load(),
		ContactLeashed:        m.contactLeashed.Load(),
		PresentationsLimited:  m.presentLimited.Load(),
		GossipPriced:          m.gossipPriced.Load(),
		PresentedCapped:       m.presentedCapped.Load(),
		ChallengesExhausted:   m.sourceExhausted.Load(),
	}
	if n.gate != nil {
		s.RelayedRefused = n.gate.refused.Load()
		s.DialsRefused = n.gate.refusedDials.Load()
	}
	if n.src != nil {
		s.ChallengesServed = n.src.Served()
	}
	s.Learned = s.LearnedGossip + s.LearnedPresentation
	s.LearnedNotStored = n.learnedDropped()
	if n.store != nil {
		s.StoreCommits, s.StoreBatchedWrites = n.store.Commits()
	}
	return s
}

func verdictLabel(accepted bool, r skill.Reason) string {
	switch {
	case accepted:
		return "accepted"
	case r == skill.ReasonInconclusive:
		return "inconclusive"
	}
	return "rejected"
}

func (m *metrics) observeIssued(r *protocol.Result) {
	if m == nil || r == nil {
		return
	}
	v := r.Verdict
	m.sessionsVerified.Add(1)
	switch {
	case v.Accepted:
		m.issuedAccepted.Add(1)
	case v.Reason == skill.ReasonInconclusive || r.Attestation == nil:
		m.inconclusive.Add(1)
	default:
		m.issuedRejected.Add(1)
	}
	p := m.prom
	if p == nil {
		return
	}
	p.issued.WithLabelValues(verdictLabel(v.Accepted, v.Reason), string(v.Reason)).Inc()
	p.sessionSeconds.WithLabelValues("verifier").Observe(r.Duration.Seconds())
	for _, rr := range v.Rounds {
		if rr.Answered {
			p.roundEffective.WithLabelValues(strconv.Itoa(rr.Round)).Observe(rr.Effective.Seconds())
		}
	}
}

func (m *metrics) observeReceived(r protocol.ProverResult) {
	if m == nil {
		return
	}
	m.sessionsProved.Add(1)
	verdict, reason := "failed", "error"
	switch {
	case r.Err != nil:
		m.proveFailed.Add(1)
	case r.Accepted:
		m.receivedAccepted.Add(1)
		verdict, reason = "accepted", string(r.Reason)
	default:
		m.receivedRejected.Add(1)
		verdict, reason = "rejected", string(r.Reason)
	}
	if p := m.prom; p != nil {
		p.received.WithLabelValues(verdict, reason).Inc()
		p.sessionSeconds.WithLabelValues("prover").Observe(r.Duration.Seconds())
	}
}

func (m *metrics) observeAdmission(proto string, a Admission) {
	if m == nil {
		return
	}
	decision, reason := "denied", a.Reason
	if a.Admitted {
		decision, reason = "granted", a.Via
		m.admissionsGranted.Add(1)
	} else {
		m.admissionsDenied.Add(1)
	}
	if p := m.prom; p != nil {
		p.admissions.WithLabelValues(proto, decision, reason).Inc()
	}
}

// observeGossip counts a validation result of a message from another peer
// ("accept", "reject" or "ignore").
func (m *metrics) observeGossip(result, reason string) {
	if m == nil {
		return
	}
	switch result {
	case "reject":
		m.gossipRejected.Add(1)
	case "ignore":
		m.gossipIgnored.Add(1)
	}
	if p := m.prom; p != nil {
		p.gossip.WithLabelValues(result, reason).Inc()
	}
}

func (m *metrics) observePublished() {
	if m == nil {
		return
	}
	m.gossipPublished.Add(1)
	if p := m.prom; p != nil {
		p.published.Inc()
	}
}

func (m *metrics) observeDelivered() {
	if m == nil {
		return
	}
	m.gossipDelivered.Add(1)
}

func (m *metrics) observeLearned(via Via) {
	if m == nil {
		return
	}
	switch via {
	case ViaGossip:
		m.learnedGossip.Add(1)
	case ViaPresentation:
		m.learnedPresentation.Add(1)
	}
	if p := m.prom; p != nil {
		p.learned.WithLabelValues(string(via)).Inc()
	}
}

func (m *metrics) observePresentation(direction, result string) {
	if m == nil {
		return
	}
	if result == "ok" {
		if direction == "sent" {
			m.presentSent.Add(1)
		} else {
			m.presentReceived.Add(1)
		}
	}
	if p := m.prom; p != nil {
		p.presentations.WithLabelValues(direction, result).Inc()
	}
}

func (m *metrics) observeExhausted() {
	if m == nil {
		return
	}
	m.sourceExhausted.Add(1)
	if p := m.prom; p != nil {
		p.exhausted.Inc()
	}
}

func (m *metrics) observeBlocked() {
	if m == nil {
		return
	}
	m.blockedPeer.Add(1)
	if p := m.prom; p != nil {
		p.blocked.Inc()
	}
}

// count adds one to an abuse counter (nil-safe: the counters exist only
// once the node's metrics do).
func (m *metrics) count(f func(*metrics) *atomic.Uint64) {
	if m == nil {
		return
	}
	f(m).Add(1)
}

// libp2pMetrics sends go-libp2p's own metrics (swarm, identify, event
// bus, resource manager, ...) to the node's registry, or turns them off
// when the node has none: by default go-libp2p would keep them in
// Prometheus's global registry, which nothing of a node exports, at a
// cost on every connection and stream.
func libp2pMetrics(reg prometheus.Registerer) libp2p.Option {
	if reg == nil {
		return libp2p.DisableMetrics()
	}
	return libp2p.PrometheusRegisterer(reg)
}
