package peer

// Attestation sharing over GossipSub: accepted attestations are published
// on AttestationTopic; a topic validator checks every message before it is
// delivered or forwarded; delivered records are learned with their
// provenance. See spec/trust.md, section "Gossip".

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	cryptopb "github.com/libp2p/go-libp2p/core/crypto/pb"
	"github.com/libp2p/go-libp2p/core/peer"
	recordpb "github.com/libp2p/go-libp2p/core/record/pb"
	"google.golang.org/protobuf/proto"

	"github.com/acaptcha/acaptcha/internal/bounded"
	"github.com/acaptcha/acaptcha/internal/liblog"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/protocol/attestation"
)

// AttestationTopic is the GossipSub topic attestations are shared on.
const AttestationTopic = "/acaptcha/attestations/1.0.0"

const (
	// gossipQueue bounds the attestations waiting to be published.
	gossipQueue = 1024
	// gossipValidateTimeout bounds one validation.
	gossipValidateTimeout = 5 * time.Second
	// gossipSubBuffer is the delivery buffer of our subscription.
	gossipSubBuffer = 512
	// gossipScoreInspect is how often GossipScore's snapshot is refreshed.
	gossipScoreInspect = time.Second
)

// Gossip rates of issuers this node does not admit directly (spec/trust.md
// §3.4; the interval per (issuer, subject) is LearnedVersionEvery).
const (
	// LearnedIssuerBurst and LearnedIssuerEvery are the token bucket of
	// the learnable records (new pairs and new versions alike) accepted
	// on gossip per issuer: 256 at once, then one per 3.6 s, the 1,000
	// sessions an hour a verifier runs at most by default
	// (protocol.DefaultMaxDraws), so an honest issuer's records pass
	// while one key's flood is held to an honest issuer's rate.
	LearnedIssuerBurst = 256
	LearnedIssuerEvery = time.Hour / protocol.DefaultMaxDraws
	// gossipIssuersTracked bounds each table of gossipLimiter.
	gossipIssuersTracked = 4096
)

type gossipState struct {
	ps     *pubsub.PubSub
	topic  *pubsub.Topic
	sub    *pubsub.Subscription
	pub    chan []byte
	wg     sync.WaitGroup
	scores atomic.Pointer[map[peer.ID]float64]
	// limits holds the validator's per-issuer rates (used with gossip
	// off too: the validator's tests call it on bare nodes).
	limits gossipLimiter
	// budget prices published messages before validation.
	budget gossipBudget
}

// gossipLimiter holds the gossip validator's rates of issuers this node
// does not admit directly: a token bucket of accepted learnable records
// per issuer, and when a record about this node by the issuer was last
// accepted. Both tables hold at most gossipIssuersTracked issuers; a full
// one forgets idle issuers first (bounded.MakeRoom). Its lock is taken
// under the trust lock (trustState.admitGossip).
type gossipLimiter struct {
	mu      sync.Mutex
	issuers map[peer.ID]*tokenBucket
	aboutUs map[peer.ID]time.Time
	// newPairs are the versions accepted of (issuer, subject) pairs the
	// node did not hold yet, until their interval is over: versions of a
	// new pair validated before the first is delivered count against it.
	newPairs map[[2]peer.ID]newPair
}

// newPair is the version of a new pair the validator accepted, and when.
type newPair struct {
	at time.Time
	v  versionKey
}

// allowNewPair reports whether a, a version of a pair the node holds no
// record of, may be accepted now: no other version of the pair was within
// LearnedVersionEvery. It notes a's.
func (l *gossipLimiter) allowNewPair(a *protocol.Attestation, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.newPairs == nil {
		l.newPairs = map[[2]peer.ID]newPair{}
	}
	k := [2]peer.ID{a.Issuer, a.Subject}
	np, ok := l.newPairs[k]
	if ok && within(np.at, now, LearnedVersionEvery) {
		return np.v.is(a)
	}
	if !ok {
		bounded.MakeRoom(l.newPairs, gossipIssuersTracked, func(np newPair) bool {
			return !within(np.at, now, LearnedVersionEvery)
		})
	}
	l.newPairs[k] = newPair{at: now, v: versionKey{a.IssuedAt, a.ExpiresAt, a.Accepted}}
	return true
}

// allowIssuer takes a token from p's bucket, or reports that it is empty.
func (l *gossipLimiter) allowIssuer(p peer.ID, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.issuers == nil {
		l.issuers = map[peer.ID]*tokenBucket{}
	}
	b := l.issuers[p]
	if b == nil {
		bounded.MakeRoom(l.issuers, gossipIssuersTracked, func(b *tokenBucket) bool {
			b.refill(now, LearnedIssuerBurst, LearnedIssuerEvery)
			return b.tokens >= LearnedIssuerBurst
		})
		b = &tokenBucket{}
		l.issuers[p] = b
	}
	b.refill(now, LearnedIssuerBurst, LearnedIssuerEvery)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// allowAboutUs reports whether a record about this node by p may be accepted
// now (none accepted within LearnedVersionEvery), and notes it.
func (l *gossipLimiter) allowAboutUs(p peer.ID, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.aboutUs == nil {
		l.aboutUs = map[peer.ID]time.Time{}
	}
	at, ok := l.aboutUs[p]
	if ok && within(at, now, LearnedVersionEvery) {
		return false
	}
	if !ok {
		bounded.MakeRoom(l.aboutUs, gossipIssuersTracked, func(at time.Time) bool {
			return !within(at, now, LearnedVersionEvery)
		})
	}
	l.aboutUs[p] = now
	return true
}

// gossipMaxRPC caps one GossipSub RPC read from a peer.
const gossipMaxRPC = 256 << 10

// errGossipOversized drops an RPC that carries a message no record fits.
var errGossipOversized = errors.New("gossip message larger than any attestation")

// inspectGossipRPC drops an RPC that publishes data larger than an
// attestation envelope can be, before its messages are queued for
// validation.
func inspectGossipRPC(_ peer.ID, rpc *pubsub.RPC) error {
	for _, m := range rpc.GetPublish() {
		if len(m.GetData()) > protocol.MaxEnvelopeBytes {
			return errGossipOversized
		}
	}
	return nil
}

// Signature-check budgets of gossip (spec/trust.md §3.4). GossipSub
// checks a message's signature before any validator, and the validator
// checks the record's; a sender is scored down for forgeries only once
// they have been checked, so one that writes RPCs faster than they are
// checked had every forgery checked, at no cost of its own (random bytes
// under an attached RSA-8192 key: 2.4 ms of the node's CPU each). Before
// an RPC's messages are queued for validation they are priced in units
// of about one ed25519 check (gossipCost) against a bucket of the
// forwarding peer, one of its network (its IPv4 /24, IPv6 /48 or
// relay; loopback exempt unless Config.LimitLoopback, as the protocol's
// budget groups), for an IPv6 /48, one of its /32, and the node's total,
// whose last quarter is kept for forwarders the node admits; the messages
// past what the buckets hold are dropped unchecked (the RPC's control
// messages are kept).
const (
	GossipCostBurst     = 2048
	GossipCostPerSec    = 128
	GossipNetCostBurst  = 4 * GossipCostBurst
	GossipNetCostPerSec = 4 * GossipCostPerSec
	// The forwarders of one IPv6 /32 (protocol.BlockOf: 65,536 /48s,
	// each with its own network bucket otherwise) share a bucket of
	// protocol.BlockFactor networks' worth.
	GossipBlockCostBurst  = protocol.BlockFactor * GossipNetCostBurst
	GossipBlockCostPerSec = protocol.BlockFactor * GossipNetCostPerSec
	// All forwarders share a total bucket of 8 networks' worth (65,536
	// units, about 3 s of one core at once; 4,096 a second, a fifth of
	// one), whose last quarter (GossipTotalReserve) only forwarders the
	// node admits take: each network having its own bucket, the
	// forwarders of 256 /24s passed 2,097,152 units at once.
	GossipTotalCostBurst  = 8 * GossipNetCostBurst
	GossipTotalCostPerSec = 8 * GossipNetCostPerSec
	GossipTotalReserve    = GossipTotalCostBurst / 4
	// gossipSeenFor is how long a message that reached the validator is
	// known to be in pubsub's seen cache (pubsub.TimeCacheDuration, 2
	// min from its first sight, less a margin): its copies are dropped
	// before any check and cost nothing, so that a forwarder (or a LAN
	// of them) is not charged for the copies a mesh sends.
	gossipSeenFor = 100 * time.Second
	// gossipSeenTracked bounds the messages remembered for it.
	gossipSeenTracked = 1 << 14
)

// gossipBudget holds the signature-check buckets of forwarders and of
// their networks; each table holds at most gossipIssuersTracked keys (a
// full one forgets those whose bucket is full again first).
type gossipBudget struct {
	mu     sync.Mutex
	peers  map[peer.ID]*tokenBucket
	nets   map[netip.Prefix]*tokenBucket
	blocks map[netip.Prefix]*tokenBucket
	total  tokenBucket
	// seen holds the IDs of messages that reached the validator, and
	// when (gossipSeenFor).
	seen map[string]time.Time
}

// noteSeen records that the message id reached the validator: pubsub has
// marked it seen.
func (b *gossipBudget) noteSeen(id string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen == nil {
		b.seen = map[string]time.Time{}
	}
	// A message reaches the validator again only once pubsub's seen
	// cache forgot it (120 s): its time is then the new one.
	if at, ok := b.seen[id]; !ok || !within(at, now, gossipSeenFor) {
		bounded.MakeRoom(b.seen, gossipSeenTracked, func(at time.Time) bool { return !within(at, now, gossipSeenFor) })
		b.seen[id] = now
	}
}

// seenRecently reports whether a copy of message id will be dropped as
// seen before any check.
func (b *gossipBudget) seenRecently(id string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	at, ok := b.seen[id]
	return ok && within(at, now, gossipSeenFor)
}

// take is takeAs for a forwarder the node does not admit.
func (b *gossipBudget) take(p peer.ID, pfx netip.Prefix, cost int, now time.Time) bool {
	return b.takeAs(p, pfx, cost, false, now)
}

// takeAs spends cost of p's bucket, of its network's (none when pfx is
// invalid), of its IPv6 /32's (an IPv6 /48 only) and of the total (down
// to GossipTotalReserve unless admitted), or reports false, spending
// nothing, when any is short.
func (b *gossipBudget) takeAs(p peer.ID, pfx netip.Prefix, cost int, admitted bool, now time.Time) bool {
	if cost < 1 || cost > GossipCostBurst {
		return cost < 1
	}
	blk, hasBlk := protocol.BlockOf(pfx)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.peers == nil {
		b.peers, b.nets, b.blocks = map[peer.ID]*tokenBucket{}, map[netip.Prefix]*tokenBucket{}, map[netip.Prefix]*tokenBucket{}
	}
	b.total.refill(now, GossipTotalCostBurst, time.Second/GossipTotalCostPerSec)
	floor := float64(GossipTotalReserve)
	if admitted {
		floor = 0
	}
	if b.total.tokens-float64(cost) < floor {
		return false
	}
	var bb *tokenBucket
	if hasBlk {
		if bb = bucketIn(b.blocks, blk, GossipBlockCostBurst, time.Second/GossipBlockCostPerSec, now); bb != nil && bb.tokens < float64(cost) {
			return false
		}
	}
	pb := bucketIn(b.peers, p, GossipCostBurst, time.Second/GossipCostPerSec, now)
	if pb != nil && pb.tokens < float64(cost) {
		return false
	}
	var nb *tokenBucket
	if pfx.IsValid() {
		if nb = bucketIn(b.nets, pfx, GossipNetCostBurst, time.Second/GossipNetCostPerSec, now); nb != nil && nb.tokens < float64(cost) {
			return false
		}
	}
	takeIn(b.peers, pb, p, GossipCostBurst, time.Second/GossipCostPerSec, gossipIssuersTracked, now)
	b.peers[p].tokens -= float64(cost - 1)
	if pfx.IsValid() {
		takeIn(b.nets, nb, pfx, GossipNetCostBurst, time.Second/GossipNetCostPerSec, gossipIssuersTracked, now)
		b.nets[pfx].tokens -= float64(cost - 1)
	}
	if hasBlk {
		takeIn(b.blocks, bb, blk, GossipBlockCostBurst, time.Second/GossipBlockCostPerSec, gossipIssuersTracked, now)
		b.blocks[blk].tokens -= float64(cost - 1)
	}
	b.total.tokens -= float64(cost)
	return true
}

// keyCost is attestation.KeyCost: what checking a signature of a key of
// type typ whose encoding is size bytes costs, in ed25519 checks.
func keyCost(typ cryptopb.KeyType, size int) int { return attestation.KeyCost(typ, size) }

// gossipCost prices a published message (gossipBudget): its author's
// signature check (the attached key, or the one its peer ID holds) and
// its record's (the envelope's key). What cannot be decoded costs 1: it
// fails before any check.
func gossipCost(m *pb.Message) int {
	author := 1
	if k := m.GetKey(); k != nil {
		var pk cryptopb.PublicKey
		if err := proto.Unmarshal(k, &pk); err == nil {
			author = keyCost(pk.GetType(), len(pk.GetData()))
		}
	} else if id, err := peer.IDFromBytes(m.GetFrom()); err == nil {
		if pk, err := id.ExtractPublicKey(); err == nil && pk != nil {
			if raw, err := pk.Raw(); err == nil {
				author = keyCost(cryptopb.KeyType(pk.Type()), len(raw))
			}
		}
	}
	record := 0
	if env, ok := decodeEnvelope(m.GetData()); ok {
		record = keyCost(env.GetPublicKey().GetType(), len(env.GetPublicKey().GetData()))
	}
	return author + record
}

// inspectGossip is the pubsub RPC inspector: it drops an RPC with an
// oversized message (inspectGossipRPC), and the published messages past
// the signature-check budgets of the forwarder and its network
// (gossipBudget).
func (n *Node) inspectGossip(p peer.ID, rpc *pubsub.RPC) error {
	if err := inspectGossipRPC(p, rpc); err != nil {
		return err
	}
	msgs := rpc.GetPublish()
	if len(msgs) == 0 {
		return nil
	}
	var pfx netip.Prefix
	if conns := n.host.Network().ConnsToPeer(p); len(conns) > 0 {
		nets, _ := netsOf(conns[0].RemoteMultiaddr(), n.cfg.LimitLoopback)
		pfx = nets.prefix
	}
	now := time.Now()
	admitted := n.admitsDirectly(p)
	kept := msgs[:0]
	for _, m := range msgs {
		if n.gossip.budget.seenRecently(gossipMsgID(m), now) {
			kept = append(kept, m) // a copy: dropped unchecked
			continue
		}
		if n.gossip.budget.takeAs(p, pfx, gossipCost(m), admitted, now) {
			kept = append(kept, m)
		}
	}
	if dropped := len(msgs) - len(kept); dropped > 0 {
		if n.metrics != nil {
			n.metrics.gossipPriced.Add(uint64(dropped))
		}
		n.warnPeer(p, "gossip messages over the signature-check budget dropped", "dropped", dropped, "kept", len(kept))
	}
	rpc.Publish = kept
	return nil
}

// gossipMsgID names a message by the signed record it carries (spec/
// trust.md §3.4), so that the same record published by its issuer and by
// its subject is one message, and so is the same record in other bytes:
// an envelope's decoder skips unknown fields and keeps the last of a
// repeated one, and the signature covers only the payload, so a record
// sealed once (with an RSA-8192 key, 2.4 ms to check here) could be sent
// in any number of envelopes, each a message that pubsub's seen cache let
// through to the validator, which checked the signature and ignored the
// duplicate at no cost to the sender's score. The ID is the SHA-256 of
// what the envelope's signature check reads: the signer's key (its type
// and encoding: DER for RSA and ECDSA keys, which has one form), the
// payload type, the payload and the signature (recordMsgID); data that is
// no envelope is named by its SHA-256, and the validator rejects it.
func gossipMsgID(m *pb.Message) string {
	if id, ok := recordMsgID(m.GetData()); ok {
		return id
	}
	h := sha256.Sum256(m.GetData())
	return string(h[:])
}

// GossipMessageID is the GossipSub message ID of a message whose data is
// data (spec/trust.md §3.4): 32 raw bytes, the digest of the signed
// record it carries, or of data when data is no envelope with a public
// key. Vectors: spec/vectors/gossip_msgid.json.
func GossipMessageID(data []byte) []byte {
	return []byte(gossipMsgID(&pb.Message{Data: data}))
}

// gossipIDDomain separates record message IDs from digests of raw data.
const gossipIDDomain = "acaptcha gossip record\x00"

// recordMsgID is the message ID of the record in data (gossipMsgID):
// nothing is checked nor any key decoded, only the envelope. ok is false
// when data is no envelope with a public key.
func recordMsgID(data []byte) (string, bool) {
	env, ok := decodeEnvelope(data)
	if !ok {
		return "", false
	}
	pk := env.GetPublicKey()
	h := sha256.New()
	h.Write([]byte(gossipIDDomain))
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(pk.GetType()))])
	for _, f := range [][]byte{pk.GetData(), env.GetPayloadType(), env.GetPayload(), env.GetSignature()} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(f)))])
		h.Write(f)
	}
	return string(h.Sum(nil)), true
}

// decodeEnvelope decodes data (at most protocol.MaxEnvelopeBytes) as a
// signed envelope with a public key of a known type (0 to 3: RSA,
// Ed25519, Secp256k1, ECDSA), checking nothing else; ok is false when it
// is none. The key's Type and Data are proto2 required fields: a key
// missing either fails to decode. Type is an int32 (the varint's low 32
// bits); any other value would be hashed as the varint of its 64-bit
// sign extension, which no other decoder need reproduce, so it names no
// record (such a message is malformed).
func decodeEnvelope(data []byte) (*recordpb.Envelope, bool) {
	if len(data) > protocol.MaxEnvelopeBytes {
		return nil, false
	}
	var env recordpb.Envelope
	if err := proto.Unmarshal(data, &env); err != nil || env.GetPublicKey() == nil {
		return nil, false
	}
	if t := env.GetPublicKey().GetType(); t < cryptopb.KeyType_RSA || t > cryptopb.KeyType_ECDSA {
		return nil, false
	}
	return &env, true
}

// gossipNeutralScore is the application score of a peer this node does
// not admit directly: a little above 0, so that a peer with nothing
// against it scores above 0 and GossipSub forgets it when it disconnects.
// GossipSub retains the score of a departed peer for RetainScore unless
// it is positive (so that a penalty is not shed by reconnecting); at
// exactly 0, every fresh peer ID that connected and spoke GossipSub left
// an entry for an hour, bounded only by the rate of new connections
// (audit-89). The least penalty (an invalid delivery decayed to
// DecayToZero: 100 x 0.01^2) outweighs it, so penalised peers are still
// retained.
const gossipNeutralScore = 1e-3

// gossipAcceptPXNever is an AcceptPXThreshold above any score a peer can
// reach (the topic's positive part is capped at TopicScoreCap, 200, and
// the app-specific bonus is 10).
const gossipAcceptPXNever = 1 << 20

// gossipScore penalises peers that forward invalid records: rejected
// deliveries cost the forwarder 100 points times their count squared (the
// count decays over an hour), so two forgeries push it to the graylist
// threshold and its RPCs are ignored. Peers this node admits directly get a small bonus,
// the others gossipNeutralScore.
// IP colocation is not scored: test swarms and LAN clusters share an IP.
//
// Peer exchange (PX) is accepted from no one: GossipSub connects to the
// peers a PRUNE names when its sender scores at least AcceptPXThreshold,
// whether or not the sender was in its mesh, and a stranger scores up to
// 50 with first deliveries of records it can seal itself (acceptances of
// itself under fresh keys): at the former threshold of 10, one fresh
// peer ID's PRUNEs made the node dial any hosts they named, 16 a PRUNE
// (TestGossipPeerExchangeDialsNothing). The node sends no PX (pubsub's
// default), and finds peers by bootstrap, mDNS and the DHT, whose dials
// are bounded (discovery.go).
func (n *Node) gossipScore() (*pubsub.PeerScoreParams, *pubsub.PeerScoreThresholds) {
	const decayInterval = time.Second
	topic := &pubsub.TopicScoreParams{
		TopicWeight:                    1,
		TimeInMeshWeight:               0.01,
		TimeInMeshQuantum:              time.Second,
		TimeInMeshCap:                  100,
		FirstMessageDeliveriesWeight:   1,
		FirstMessageDeliveriesDecay:    pubsub.ScoreParameterDecayWithBase(time.Hour, decayInterval, 0.01),
		FirstMessageDeliveriesCap:      50,
		InvalidMessageDeliveriesWeight: -100,
		InvalidMessageDeliveriesDecay:  pubsub.ScoreParameterDecayWithBase(time.Hour, decayInterval, 0.01),
	}
	params := &pubsub.PeerScoreParams{
		Topics:        map[string]*pubsub.TopicScoreParams{AttestationTopic: topic},
		TopicScoreCap: 200,
		AppSpecificScore: func(p peer.ID) float64 {
			if n.trust.direct(p, n.trustNow()) {
				return 10
			}
			return gossipNeutralScore
		},
		AppSpecificWeight:         1,
		BehaviourPenaltyWeight:    -10,
		BehaviourPenaltyThreshold: 6,
		BehaviourPenaltyDecay:     pubsub.ScoreParameterDecayWithBase(10*time.Minute, decayInterval, 0.01),
		DecayInterval:             decayInterval,
		DecayToZero:               0.01,
		RetainScore:               time.Hour,
	}
	thresholds := &pubsub.PeerScoreThresholds{
		GossipThreshold:             -100,
		PublishThreshold:            -200,
		GraylistThreshold:           -400,
		AcceptPXThreshold:           gossipAcceptPXNever,
		OpportunisticGraftThreshold: 5,
	}
	return params, thresholds
}

func (n *Node) startGossip() error {
	if !n.cfg.Gossip {
		return nil
	}
	params, thresholds := n.gossipScore()
	const gossipValidateQueue = 4096
	// Its inbound RPCs are read through gossipHost (gossipstream.go),
	// which bounds the large ones being read.
	ps, err := pubsub.NewGossipSub(n.ctx, newGossipHost(n.host, n.cfg.LimitLoopback),
		pubsub.WithMessageSignaturePolicy(pubsub.StrictSign),
		pubsub.WithMessageIdFn(gossipMsgID),
		pubsub.WithPeerScore(params, thresholds),
		pubsub.WithPeerScoreInspect(func(m map[peer.ID]float64) { n.gossip.scores.Store(&m) }, gossipScoreInspect),
		// RPCs (messages and control batched) up to 256 KiB: records are
		// at most 8 KiB and an IHAVE of 5,000 IDs is 160 KB; the
		// default of 1 MiB let a peer park far more before validation.
		pubsub.WithMaxMessageSize(gossipMaxRPC),
		// Subscriptions to AttestationTopic only are kept (spec/trust.md
		// §3.4): GossipSub otherwise held every topic a peer announced,
		// some 10,000 a 256 KiB RPC, with no bound per peer or in all,
		// and never dropped a topic once its peers left.
		pubsub.WithSubscriptionFilter(pubsub.NewAllowlistSubscriptionFilter(AttestationTopic)),
		// Messages wait in the validation queue before the validator
		// sees them: an RPC carrying data larger than any record is
		// dropped whole first, so that the queue holds at most
		// gossipValidateQueue records of 8 KiB (32 MiB), not of 256 KiB.
		// The published messages are priced by their signature checks
		// (gossipBudget) before they are queued.
		pubsub.WithAppSpecificRpcInspector(n.inspectGossip),
		// Publish to every subscribed peer, not only the mesh: records
		// are rare and a fresh mesh is empty until the next heartbeat.
		pubsub.WithFloodPublish(true),
		// The default validation queue (32) overflows when a swarm's
		// attestations arrive in a burst and silently drops them; the
		// swarm bench lost admissions that way.
		pubsub.WithValidateQueueSize(gossipValidateQueue),
		// GossipSub's own logger writes text to standard error; this one
		// goes where the application routed go-libp2p's (liblog).
		pubsub.WithLogger(liblog.Logger("pubsub")),
	)
	if err != nil {
		return fmt.Errorf("start gossipsub: %w", err)
	}
	if err := ps.RegisterTopicValidator(AttestationTopic, n.validateGossip, pubsub.WithValidatorTimeout(gossipValidateTimeout)); err != nil {
		return fmt.Errorf("register attestation validator: %w", err)
	}
	topic, err := ps.Join(AttestationTopic)
	if err != nil {
		return fmt.Errorf("join %s: %w", AttestationTopic, err)
	}
	sub, err := topic.Subscribe(pubsub.WithBufferSize(gossipSubBuffer))
	if err != nil {
		_ = topic.Close()
		return fmt.Errorf("subscribe %s: %w", AttestationTopic, err)
	}
	g := &n.gossip
	g.ps, g.topic, g.sub = ps, topic, sub
	g.pub = make(chan []byte, gossipQueue)
	g.wg.Add(2)
	go n.gossipDeliver()
	go n.gossipPublish()
	return nil
}

func (n *Node) stopGossip() {
	g := &n.gossip
	if g.ps == nil {
		return
	}
	g.sub.Cancel()
	g.wg.Wait()
	_ = g.topic.Close()
}

// afterIssued runs after this node stored a verdict it issued: it indexes
// the record, shares an acceptance on gossip (and a rejection that
// supersedes an acceptance we shared), and blocks a rejected peer when
// configured to.
func (n *Node) afterIssued(r *protocol.Result) {
	if r == nil || r.Attestation == nil || len(r.Envelope) == 0 {
		return
	}
	a := r.Attestation
	prev := n.indexIssued(a)
	if a.Accepted {
		n.publish(r.Envelope)
		return
	}
	if prev != nil && prev.accepted && prev.valid(n.trustNow()) {
		// Tell the swarm our earlier acceptance no longer holds.
		n.publish(r.Envelope)
	}
	n.block(a.Subject)
}

// afterReceived runs when a verifier sent us a valid attestation: it is
// indexed for presentation, and an acceptance is shared on gossip (the
// subject may publish its own attestations; the issuer does too).
func (n *Node) afterReceived(r protocol.ProverResult) {
	if r.Attestation == nil || len(r.Envelope) == 0 {
		return
	}
	n.indexReceived(r.Attestation, r.Envelope)
	if r.Attestation.Accepted {
		n.publish(r.Envelope)
	}
}

// publish queues an envelope for the gossip topic; it never blocks.
func (n *Node) publish(env []byte) {
	g := &n.gossip
	if g.pub == nil || n.ctx.Err() != nil {
		return
	}
	select {
	case g.pub <- env:
	default:
		// Rate-limited: the records published are the node's and those
		// sent to it, which a burst of sessions can pile up.
		n.warnPeer("", "gossip publish queue full: attestation not shared")
	}
}

func (n *Node) gossipPublish() {
	g := &n.gossip
	defer g.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case env := <-g.pub:
			ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
			err := g.topic.Publish(ctx, env)
			cancel()
			if err != nil {
				if n.ctx.Err() == nil {
					n.log.Warn("publish attestation", "err", err)
				}
				continue
			}
			n.metrics.observePublished()
		}
	}
}

func (n *Node) gossipDeliver() {
	g := &n.gossip
	defer g.wg.Done()
	self := n.ID()
	for {
		msg, err := g.sub.Next(n.ctx)
		if err != nil {
			return
		}
		if msg.ReceivedFrom == self {
			continue
		}
		a, ok := msg.ValidatorData.(*protocol.Attestation)
		if !ok {
			continue
		}
		n.metrics.observeDelivered()
		author := msg.GetFrom()
		if res := n.learn(a, msg.GetData(), ViaGossip, msg.ReceivedFrom, author); res == learnedNew {
			n.log.Debug("learned attestation from gossip", "issuer", a.Issuer, "subject", a.Subject, "accepted", a.Accepted, "from", msg.ReceivedFrom)
		}
	}
}

// Gossip validation reasons (the reason label of the gossip metrics).
const (
	gossipOK           = "ok"
	gossipOwn          = "own"
	gossipSupersedes   = "supersedes"
	gossipOversized    = "oversized"
	gossipMalformed    = "malformed"
	gossipBadSignature = "bad_signature"
	gossipIssuer       = "issuer_mismatch"
	gossipAuthor       = "author_not_party"
	gossipExpired      = "expired"
	gossipNotYetValid  = "not_yet_valid"
	gossipVersion      = "unsupported_version"
	gossipNotAccepted  = "not_accepted"
	gossipDuplicate    = "duplicate"
	gossipStale        = "stale"
	gossipCapacity     = "capacity"
	gossipAboutUs      = "about_us"
	gossipLifetime     = "lifetime"
	gossipVersionRate  = "version_rate"
	gossipIssuerRate   = "issuer_rate"
	gossipAboutUsRate  = "about_us_rate"
)

// validateGossip is the topic validator. It refuses oversized data before
// decoding anything, then verifies the record: forged, malformed,
// oversized records and records whose signer is not their issuer are
// rejected (GossipSub then penalises the forwarder); expired, not yet
// valid, other-major-version, duplicate, stale and not-accepted records
// are ignored, and so are records over the rates of issuers this node
// does not admit directly (an honest forwarder relays those too, so they
// cost it nothing). A record must be published by its issuer or its
// subject.
func (n *Node) validateGossip(_ context.Context, from peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
	author := msg.GetFrom() // StrictSign: pubsub checked it signed the message
	if msg.ID != "" {
		n.gossip.budget.noteSeen(msg.ID, time.Now())
	}
	res, reason, a := n.checkGossip(msg.GetData(), author)
	local := from == n.ID()
	if !local {
		n.metrics.observeGossip(gossipResultLabel(res), reason)
	}
	switch {
	case res == pubsub.ValidationReject:
		n.log.Debug("rejected attestation gossip", "from", from, "author", author, "reason", reason)
	case res == pubsub.ValidationAccept:
		msg.ValidatorData = a
	}
	return res
}

func gossipResultLabel(r pubsub.ValidationResult) string {
	switch r {
	case pubsub.ValidationAccept:
		return "accept"
	case pubsub.ValidationReject:
		return "reject"
	}
	return "ignore"
}

// checkGossip classifies one gossiped record published by author.
func (n *Node) checkGossip(data []byte, author peer.ID) (pubsub.ValidationResult, string, *protocol.Attestation) {
	if len(data) > protocol.MaxEnvelopeBytes {
		return pubsub.ValidationReject, gossipOversized, nil
	}
	now := n.trustNow()
	a, _, err := protocol.VerifyAttestation(data, protocol.VerifyOptions{Now: now})
	if err != nil {
		res, reason := classifyVerifyErr(err)
		return res, reason, nil
	}
	if author != a.Issuer && author != a.Subject {
		return pubsub.ValidationReject, gossipAuthor, nil
	}
	self := n.ID()
	if a.Issuer == self || author == self {
		// Our own record, published by us or echoed by its subject:
		// forward it, do not learn it.
		return pubsub.ValidationAccept, gossipOwn, a
	}
	// The rates are taken here, when the message is accepted for
	// forwarding, not on delivery: what the validator accepts every node
	// forwards.
	switch res := n.trust.admitGossip(a, self, now, &n.gossip.limits); res {
	case learnedNew:
		if !a.Accepted {
			// A retraction of the same issuer's earlier acceptance (held
			// here, or by an issuer this node admits directly).
			return pubsub.ValidationAccept, gossipSupersedes, a
		}
		return pubsub.ValidationAccept, gossipOK, a
	case learnAboutUs:
		// An acceptance of us by an issuer we do not admit directly:
		// forward it (its issuer or subject published it), do not learn
		// it.
		return pubsub.ValidationAccept, gossipAboutUs, a
	default:
		return pubsub.ValidationIgnore, gossipIgnoreReason(res), nil
	}
}

// gossipIgnoreReason is the validation reason of a record that is not
// accepted.
func gossipIgnoreReason(r learnResult) string {
	switch r {
	case learnDuplicate:
		return gossipDuplicate
	case learnStale:
		return gossipStale
	case learnFull:
		return gossipCapacity
	case learnTooLong:
		return gossipLifetime
	case learnTooSoon:
		return gossipVersionRate
	case learnIssuerRate:
		return gossipIssuerRate
	case learnAboutUsRate:
		return gossipAboutUsRate
	case learnNotRetraction:
		return gossipNotAccepted
	}
	return r.String()
}

// classifyVerifyErr maps a VerifyAttestation error to a validation result:
// what an honest forwarder can never have accepted is rejected; what
// depends on time or on a newer spec is ignored.
func classifyVerifyErr(err error) (pubsub.ValidationResult, string) {
	switch {
	case errors.Is(err, protocol.ErrExpired):
		return pubsub.ValidationIgnore, gossipExpired
	case errors.Is(err, protocol.ErrNotYetValid):
		return pubsub.ValidationIgnore, gossipNotYetValid
	case errors.Is(err, protocol.ErrUnsupportedVersion):
		return pubsub.ValidationIgnore, gossipVersion
	case errors.Is(err, protocol.ErrTooLarge):
		return pubsub.ValidationReject, gossipOversized
	case errors.Is(err, protocol.ErrBadSignature):
		return pubsub.ValidationReject, gossipBadSignature
	case errors.Is(err, protocol.ErrIssuerMismatch):
		return pubsub.ValidationReject, gossipIssuer
	}
	return pubsub.ValidationReject, gossipMalformed
}

// GossipPeers returns the peers this node knows to be subscribed to the
// attestation topic (none when gossip is off).
func (n *Node) GossipPeers() []peer.ID {
	if n.gossip.topic == nil {
		return nil
	}
	return n.gossip.topic.ListPeers()
}

// GossipScore returns the GossipSub peer score this node gives p, as of the
// last snapshot (refreshed every second); ok is false when gossip is off or
// p is not scored. Negative scores come from invalid deliveries.
func (n *Node) GossipScore(p peer.ID) (score float64, ok bool) {
	m := n.gossip.scores.Load()
	if m == nil {
		return 0, false
	}
	score, ok = (*m)[p]
	return score, ok
}
