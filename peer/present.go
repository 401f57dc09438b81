package peer

// Presentation: a prover hands the accepted attestations it holds about
// itself to a peer it meets, so that the peer can admit it by quorum
// without running a session. See spec/trust.md, section "Presentation".

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-msgio"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
	"github.com/multiformats/go-varint"

	"github.com/acaptcha/acaptcha/internal/bounded"
	"github.com/acaptcha/acaptcha/protocol"
)

// PresentProtocol is the protocol ID of presentations. The stream opener
// is the presenter: it writes up to MaxPresented varint-length-prefixed
// attestation envelopes about itself, closes its write side, and reads the
// receiver's acknowledgement, one uvarint: how many records it learned.
const PresentProtocol = "/acaptcha/present/1.0.0"

// PresentServiceName names the presentation protocol's resource-manager
// scope.
const PresentServiceName = "acaptcha.present"

const (
	// MaxPresented caps the records of one presentation.
	MaxPresented = 32
	// PresentTimeout bounds one presentation, both sides.
	PresentTimeout = 10 * time.Second
	// presentFirstFrameTimeout bounds the receiver's wait for the first
	// record (as the protocol's hello timeout, protocol.DefaultHelloTimeout):
	// a presenter writes its records as soon as the stream is open, and
	// the wait holds a slot.
	presentFirstFrameTimeout = protocol.DefaultHelloTimeout
	// maxPresentConcurrent bounds inbound presentations in flight,
	// presentPerPrefix those of one budget group (IPv4 /24, IPv6 /48, one
	// relay's) and presentPerBlock those of one IPv6 /32, so that a few
	// networks cannot hold every slot.
	maxPresentConcurrent = 16
	presentPerPrefix     = 2
	presentPerBlock      = 4
	// presentStallCost is what a stalled presentation (one the receiver
	// ends on a timeout) costs its presenter's bucket and its networks',
	// on top of the token it paid to start: a slot held for nothing is
	// paid for as presentStallCost+1 presentations.
	presentStallCost = 3
	presentMemory    = protocol.MaxEnvelopeBytes + 4<<10

	// Inbound presentations are rate-limited per presenter (a bucket of
	// PresentPeerBurst, refilled one per PresentPeerEvery), per network
	// (below) and in total (PresentGlobalBurst, refilled one per
	// PresentGlobalEvery); over the rate the stream is reset with
	// protocol.ErrCodeBusy. An honest node presents once per first
	// contact.
	PresentPeerBurst   = 8
	PresentPeerEvery   = time.Minute
	PresentGlobalBurst = 32
	PresentGlobalEvery = time.Second
	// Fresh peer IDs cost nothing, so the presenters of one IP prefix (an
	// IPv4 /24, an IPv6 /48, as the protocol's prefix budgets) share a
	// bucket of PresentPrefixBurst refilled one per PresentPrefixEvery (a
	// quarter of the node's rate), and those of one IPv6 /32 (65,536
	// /48s) one of PresentBlockBurst refilled one per PresentBlockEvery
	// (half of it). Loopback is exempt unless Config.LimitLoopback; the
	// presenters relayed by one relay share a prefix bucket (netsOf).
	PresentPrefixBurst = 8
	PresentPrefixEvery = 4 * time.Second
	PresentBlockBurst  = 16
	PresentBlockEvery  = 2 * time.Second
	// presentReserve tokens of the global bucket (a quarter) are kept for
	// presenters that show they are worth them: peers this node admits
	// already, and presentations with a record by an issuer this node
	// admits directly among their first presentReserveProbe records. The
	// others are refused once the bucket is down to the reserve, so a
	// swarm of networks that drains it still leaves room for newcomers
	// vouched for by peers this node verified itself.
	presentReserve      = PresentGlobalBurst / 4
	presentReserveProbe = 4
	// MaxPresentedUntrusted bounds the presented records kept from
	// issuers this node does not admit directly (they carry no weight
	// until it does): past it, such records are acknowledged but not
	// learned. Records by directly admitted issuers are always learned.
	MaxPresentedUntrusted = 1024
	// presentTracked bounds the per-presenter buckets kept in memory,
	// presentTrackedNets the per-network ones (each table).
	presentTracked     = 4096
	presentTrackedNets = 4096
)

// addrNets are the groups a remote address counts in, as the protocol's
// budget groups (spec/protocol.md §9a): for a direct connection its
// prefix (IPv4 /24, IPv6 /48: protocol.DrawPrefix) and, for an IPv6
// /48, its /32 block (protocol.BlockOf); for a circuit-relayed one a
// group of its relay. Both are
// invalid for an address exempt from prefix limits (loopback unless
// limited) or without an IP.
type addrNets struct {
	prefix, block netip.Prefix
}

// netsOf returns the groups of a connection's remote address; known is
// false for an address with neither an IP nor a relay.
func netsOf(remote ma.Multiaddr, limitLoopback bool) (nets addrNets, known bool) {
	if remote == nil {
		return addrNets{}, false
	}
	if group, relayed := protocol.RelayGroup(remote); relayed {
		return addrNets{prefix: group}, true
	}
	nip, err := manet.ToIP(remote)
	if err != nil {
		return addrNets{}, false
	}
	addr, ok := netip.AddrFromSlice(nip)
	if !ok {
		return addrNets{}, false
	}
	return netsOfAddr(addr, limitLoopback), true
}

func netsOfAddr(addr netip.Addr, limitLoopback bool) addrNets {
	pfx, ok := protocol.DrawPrefix(addr, limitLoopback)
	if !ok {
		return addrNets{}
	}
	nets := addrNets{prefix: pfx}
	// The protocol's /32 of an IPv6 /48 (protocol.BlockOf): none for
	// IPv4, IPv4-mapped and NAT64 (64:ff9b::/96) addresses, whose group
	// is an IPv4 /24, nor for 64:ff9b::/32 (translators' space).
	nets.block, _ = protocol.BlockOf(pfx)
	return nets
}

// tokenBucket is a token bucket refilled continuously.
type tokenBucket struct {
	tokens float64
	at     time.Time
}

func (b *tokenBucket) refill(now time.Time, burst int, every time.Duration) {
	if b.at.IsZero() {
		b.tokens, b.at = float64(burst), now
		return
	}
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(float64(burst), b.tokens+float64(d)/float64(every))
		b.at = now
	}
}

// presentLimiter rate-limits inbound presentations per presenter, per
// network and in total.
type presentLimiter struct {
	mu       sync.Mutex
	peers    map[peer.ID]*tokenBucket
	prefixes map[netip.Prefix]*tokenBucket // IPv4 /24, IPv6 /48
	blocks   map[netip.Prefix]*tokenBucket // IPv6 /32
	global   tokenBucket
}

// presentGrant is the limiter's answer to a presentation.
type presentGrant int

const (
	presentRefused presentGrant = iota
	presentAllowed
	// presentOnTrial: the presenter's own buckets allowed it (and paid),
	// but the global bucket is down to its reserve: the presentation goes
	// on only if it earns a reserved token (takeReserve), because its
	// presenter is admitted or it shows a record by an issuer this node
	// admits directly.
	presentOnTrial
)

// bucketIn returns the bucket of k in m refilled to now, or nil when m
// has none (a new key starts full).
func bucketIn[K comparable](m map[K]*tokenBucket, k K, burst int, every time.Duration, now time.Time) *tokenBucket {
	b := m[k]
	if b != nil {
		b.refill(now, burst, every)
	}
	return b
}

// takeIn takes a token from the bucket of k in m, making it (full) if m
// has none; a full table forgets a sixteenth of its buckets at once,
// those full again first (a forgotten key starts full; the global bucket
// still bounds it).
func takeIn[K comparable](m map[K]*tokenBucket, b *tokenBucket, k K, burst int, every time.Duration, tracked int, now time.Time) {
	if b == nil {
		bounded.MakeRoom(m, tracked, func(q *tokenBucket) bool {
			q.refill(now, burst, every)
			return q.tokens >= float64(burst)
		})
		b = &tokenBucket{}
		b.refill(now, burst, every)
		m[k] = b
	}
	b.tokens--
}

// allow takes a token for p, coming from nets, from its bucket, its
// networks' and the global one, or reports that one of them is empty
// (then it takes none). Down to the global reserve it takes p's and its
// networks' tokens and answers presentOnTrial.
func (l *presentLimiter) allow(p peer.ID, nets addrNets, now time.Time) presentGrant {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.peers == nil {
		l.peers = map[peer.ID]*tokenBucket{}
		l.prefixes = map[netip.Prefix]*tokenBucket{}
		l.blocks = map[netip.Prefix]*tokenBucket{}
	}
	pb := bucketIn(l.peers, p, PresentPeerBurst, PresentPeerEvery, now)
	if pb != nil && pb.tokens < 1 {
		return presentRefused
	}
	var nb, bb *tokenBucket
	if nets.prefix.IsValid() {
		if nb = bucketIn(l.prefixes, nets.prefix, PresentPrefixBurst, PresentPrefixEvery, now); nb != nil && nb.tokens < 1 {
			return presentRefused
		}
	}
	if nets.block.IsValid() {
		if bb = bucketIn(l.blocks, nets.block, PresentBlockBurst, PresentBlockEvery, now); bb != nil && bb.tokens < 1 {
			return presentRefused
		}
	}
	l.global.refill(now, PresentGlobalBurst, PresentGlobalEvery)
	if l.global.tokens < 1 {
		return presentRefused
	}
	takeIn(l.peers, pb, p, PresentPeerBurst, PresentPeerEvery, presentTracked, now)
	if nets.prefix.IsValid() {
		takeIn(l.prefixes, nb, nets.prefix, PresentPrefixBurst, PresentPrefixEvery, presentTrackedNets, now)
	}
	if nets.block.IsValid() {
		takeIn(l.blocks, bb, nets.block, PresentBlockBurst, PresentBlockEvery, presentTrackedNets, now)
	}
	if l.global.tokens < 1+presentReserve {
		return presentOnTrial
	}
	l.global.tokens--
	return presentAllowed
}

// takeReserve takes a token of the global bucket, the reserve included,
// for a presentation on trial that earned it.
func (l *presentLimiter) takeReserve(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.global.refill(now, PresentGlobalBurst, PresentGlobalEvery)
	if l.global.tokens < 1 {
		return false
	}
	l.global.tokens--
	return true
}

// chargeStall takes presentStallCost more tokens from the buckets of p
// and of its networks for a presentation that stalled. A bucket may go
// into debt down to minus its burst; a key the tables forgot starts full
// again (the slots and the global bucket still bound it).
func (l *presentLimiter) chargeStall(p peer.ID, nets addrNets, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.peers == nil {
		return // nothing was allowed yet
	}
	charge := func(b *tokenBucket, burst int) {
		if b != nil {
			b.tokens = max(b.tokens-presentStallCost, -float64(burst))
		}
	}
	charge(bucketIn(l.peers, p, PresentPeerBurst, PresentPeerEvery, now), PresentPeerBurst)
	if nets.prefix.IsValid() {
		charge(bucketIn(l.prefixes, nets.prefix, PresentPrefixBurst, PresentPrefixEvery, now), PresentPrefixBurst)
	}
	if nets.block.IsValid() {
		charge(bucketIn(l.blocks, nets.block, PresentBlockBurst, PresentBlockEvery, now), PresentBlockBurst)
	}
}

// errPresentOutLimited: first contact did not present to a peer, over
// the rates of presentations it sends (allowPresentTo).
var errPresentOutLimited = errors.New("not presented: over this node's rate of presentations to the peer, its network or in all")

// allowPresentTo decides whether first contact presents to p now: within
// the rates a receiver applies to presentations (per presenter, per
// network, per IPv6 /32 and in total: presentLimiter), kept here per
// receiver, per receiver's network and in total. A receiver takes 8
// presentations then one a minute from one presenter, so more to one
// peer are refused unread; without this bound a peer that connected,
// disconnected and connected again (or fresh peer IDs from one network)
// had the node open a presentation stream and write up to 32 records on
// every connection, for a handshake of the peer's. The last quarter of
// the total is kept for peers this node admits.
func (n *Node) allowPresentTo(p peer.ID, now time.Time) bool {
	switch n.presentOut.allow(p, n.peerNets(p), now) {
	case presentAllowed:
		return true
	case presentOnTrial:
		return n.Admission(p).Admitted && n.presentOut.takeReserve(now)
	}
	return false
}

// errPresentLimited ends a presentation on trial that did not earn a
// reserved token.
var errPresentLimited = errors.New("presentation over the rate: no record by an issuer this node admits directly among the first ones")

// Present sends p the valid accepted attestations this node holds about
// itself (the newest per issuer, newest first, at most MaxPresented) and
// waits for p to acknowledge. It opens no stream when there is nothing to
// present.
func (n *Node) Present(ctx context.Context, p peer.ID) error {
	if p == n.ID() {
		return errors.New("present: cannot present to ourselves")
	}
	return n.presentIf(ctx, p, nil)
}

// presentIf is Present, the presentation sent only when allow (nil:
// always) says so once there is something to present.
func (n *Node) presentIf(ctx context.Context, p peer.ID, allow func() bool) error {
	envs := n.trust.presentable(n.trustNow(), MaxPresented)
	if len(envs) == 0 {
		return nil
	}
	if allow != nil && !allow() {
		return errPresentOutLimited
	}
	err := n.present(ctx, p, envs)
	result := "ok"
	if err != nil {
		result = "error"
	}
	n.metrics.observePresentation("sent", result)
	return err
}

func (n *Node) present(ctx context.Context, p peer.ID, envs [][]byte) error {
	ctx, cancel := context.WithTimeout(ctx, PresentTimeout)
	defer cancel()
	s, err := n.host.NewStream(network.WithAllowLimitedConn(ctx, PresentServiceName), p, PresentProtocol) // over a relay too (nat.go)
	if err != nil {
		return fmt.Errorf("present to %s: %w: %w", p, ErrNetwork, err)
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	if err := s.Scope().SetService(PresentServiceName); err != nil {
		_ = s.Reset()
		return fmt.Errorf("present to %s: resource scope: %w", p, err)
	}
	deadline, _ := ctx.Deadline()
	_ = s.SetDeadline(deadline)
	w := msgio.NewVarintWriter(s)
	for _, env := range envs {
		if err := w.WriteMsg(env); err != nil {
			_ = s.Reset()
			return fmt.Errorf("present to %s: %w: %w", p, ErrNetwork, err)
		}
	}
	if err := s.CloseWrite(); err != nil {
		_ = s.Reset()
		return fmt.Errorf("present to %s: %w: %w", p, ErrNetwork, err)
	}
	learned, err := binary.ReadUvarint(bufio.NewReader(io.LimitReader(s, binary.MaxVarintLen64)))
	if err != nil {
		_ = s.Reset()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("present to %s: no acknowledgement: %w: %w", p, ErrNetwork, err)
	}
	n.log.Debug("presented attestations", "peer", p, "sent", len(envs), "learned", learned)
	return nil
}

// newPresentSlots counts the inbound presentations in flight: one per
// presenter, presentPerPrefix per budget group (IPv4 /24, IPv6 /48,
// relay), presentPerBlock per IPv6 /32 and maxPresentConcurrent in all.
func newPresentSlots() *streamCounts {
	return newStreamCounts(1, presentPerPrefix, presentPerBlock, maxPresentConcurrent)
}

// handlePresent receives a presentation: every record must be a valid
// signed attestation whose subject is the presenter; accepted, unexpired
// ones are learned. A forged, malformed or foreign record, an oversized
// frame or too many records end the stream with a protocol error code.
func (n *Node) handlePresent(s network.Stream) {
	p := s.Conn().RemotePeer()
	if n.ctx.Err() != nil {
		_ = s.Reset()
		return
	}
	if err := s.Scope().SetService(PresentServiceName); err != nil {
		_ = s.Reset()
		return
	}
	if err := s.Scope().ReserveMemory(presentMemory, network.ReservationPriorityAlways); err != nil {
		_ = s.ResetWithError(protocol.ErrCodeBusy)
		return
	}
	defer s.Scope().ReleaseMemory(presentMemory)
	t := &n.trust
	nets, _ := netsOf(s.Conn().RemoteMultiaddr(), n.cfg.LimitLoopback)
	grant := n.presentLimit.allow(p, nets, time.Now())
	if grant == presentOnTrial && n.Admission(p).Admitted {
		// A peer this node admits already may use the reserve at once.
		grant = presentRefused
		if n.presentLimit.takeReserve(time.Now()) {
			grant = presentAllowed
		}
	}
	if grant == presentRefused {
		n.presentLimited(s)
		return
	}
	if !t.presentIn.acquire(p, nets) {
		_ = s.ResetWithError(protocol.ErrCodeBusy)
		n.metrics.observePresentation("received", "busy")
		return
	}
	deadline := time.Now().Add(PresentTimeout)
	_ = s.SetDeadline(deadline)
	learned, code, err := n.readPresentation(s, p, grant == presentOnTrial, deadline)
	// Released before answering, so the presenter may start its next
	// presentation as soon as it has our answer.
	t.presentIn.release(p, nets)
	if code == protocol.ErrCodeTimeout {
		// A stall held a slot for nothing: it costs the presenter and its
		// networks more than a presentation.
		n.presentLimit.chargeStall(p, nets, time.Now())
	}
	if errors.Is(err, errPresentLimited) {
		n.presentLimited(s)
		n.log.Debug("presentation refused", "peer", p, "err", err)
		return
	}
	if err != nil {
		if code != 0 {
			_ = s.ResetWithError(code)
		} else {
			_ = s.Reset()
		}
		n.metrics.observePresentation("received", "invalid")
		n.log.Debug("presentation refused", "peer", p, "err", err)
		return
	}
	if _, err := s.Write(binary.AppendUvarint(nil, uint64(learned))); err != nil {
		_ = s.Reset()
		return
	}
	_ = s.Close()
	n.metrics.observePresentation("received", "ok")
}

// presentLimited counts a presentation over the rate and resets it.
func (n *Node) presentLimited(s network.Stream) {
	n.metrics.count(func(m *metrics) *atomic.Uint64 { return &m.presentLimited })
	n.metrics.observePresentation("received", "limited")
	_ = s.ResetWithError(protocol.ErrCodeBusy)
}

// readPresentation reads and learns the records of a presentation. The
// first record is due within presentFirstFrameTimeout, the rest by
// deadline. On trial (presentOnTrial), the records are held back until
// one of the first presentReserveProbe is by an issuer this node admits
// directly and a reserved token is taken; otherwise it returns
// errPresentLimited.
func (n *Node) readPresentation(s network.Stream, p peer.ID, trial bool, deadline time.Time) (int, network.StreamErrorCode, error) {
	r := msgio.NewVarintReaderSize(s, protocol.MaxEnvelopeBytes)
	learned := 0
	untrusted := -1 // presented records by issuers we do not admit; counted on first need
	learn := func(a *protocol.Attestation, env []byte) {
		if !n.admitsDirectly(a.Issuer) {
			if untrusted < 0 {
				untrusted = n.presentedUntrusted()
			}
			if untrusted >= MaxPresentedUntrusted {
				n.metrics.count(func(m *metrics) *atomic.Uint64 { return &m.presentedCapped })
				return
			}
		}
		res := n.learn(a, env, ViaPresentation, p, "")
		if res == learnedNew && !n.admitsDirectly(a.Issuer) {
			untrusted++
		}
		if res == learnedNew {
			learned++
		}
	}
	type held struct {
		a   *protocol.Attestation
		env []byte
	}
	var pending []held // on trial: verified records waiting for the token
	for i := 0; ; i++ {
		if trial && i >= presentReserveProbe {
			return learned, protocol.ErrCodeBusy, errPresentLimited
		}
		if i == 0 {
			_ = s.SetReadDeadline(minTime(deadline, time.Now().Add(presentFirstFrameTimeout)))
		}
		msg, err := r.ReadMsg()
		if i == 0 {
			_ = s.SetReadDeadline(deadline)
		}
		switch {
		case errors.Is(err, io.EOF):
			if trial {
				return learned, protocol.ErrCodeBusy, errPresentLimited
			}
			return learned, 0, nil
		case errors.Is(err, msgio.ErrMsgTooLarge):
			return learned, protocol.ErrCodeOversized, fmt.Errorf("%w: %w", protocol.ErrFrameTooLarge, err)
		case isTimeout(err):
			return learned, protocol.ErrCodeTimeout, err
		case errors.Is(err, varint.ErrNotMinimal), errors.Is(err, varint.ErrOverflow),
			errors.Is(err, varint.ErrUnderflow), errors.Is(err, io.ErrUnexpectedEOF):
			// A bad length prefix, or a frame the presenter's close cut
			// short (trust.md §3.5).
			return learned, protocol.ErrCodeProtocolViolation, fmt.Errorf("%w: %w", protocol.ErrProtocolViolation, err)
		case err != nil:
			return learned, 0, err
		}
		if i >= MaxPresented {
			r.ReleaseMsg(msg)
			return learned, protocol.ErrCodeProtocolViolation, fmt.Errorf("%w: more than %d records", protocol.ErrProtocolViolation, MaxPresented)
		}
		env := append([]byte(nil), msg...)
		r.ReleaseMsg(msg)
		a, _, err := n.presentSeen.Verify(env, protocol.VerifyOptions{Subject: p, Now: n.trustNow()})
		switch {
		case errors.Is(err, protocol.ErrExpired), errors.Is(err, protocol.ErrNotYetValid), errors.Is(err, protocol.ErrUnsupportedVersion):
			continue
		case err != nil:
			return learned, protocol.ErrCodeProtocolViolation, fmt.Errorf("%w: record %d: %w", protocol.ErrProtocolViolation, i+1, err)
		case !a.Accepted, !keptLifetime(a):
			// Skipped (trust.md §3.5), and so neither learned nor a
			// record that earns the reserve below.
			continue
		}
		if trial {
			if !n.admitsDirectly(a.Issuer) {
				pending = append(pending, held{a, env})
				continue
			}
			if !n.presentLimit.takeReserve(time.Now()) {
				return learned, protocol.ErrCodeBusy, errPresentLimited
			}
			trial = false
			for _, h := range pending {
				learn(h.a, h.env)
			}
			pending = nil
		}
		learn(a, env)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// isTimeout tells whether err is a deadline or network timeout.
func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// admitsDirectly reports whether this node admits p on its own
// attestation.
func (n *Node) admitsDirectly(p peer.ID) bool { return n.trust.direct(p, n.trustNow()) }

// presentedUntrusted counts the indexed records learned by presentation
// whose issuer this node does not admit directly. The count is taken by
// a scan of the whole learned table under the trust lock (23 ms at 65,536
// records, twice that at the hard cap), which every presentation of an
// untrusted record asked for; it is now taken at most once a second
// (presentedCount), records learned by presentation since then added to
// it, so the cap is never overshot (removals and new admissions lower the
// true count: the next scan sees them).
func (n *Node) presentedUntrusted() int {
	c := &n.trust.presented
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now(); c.at.IsZero() || now.Sub(c.at) >= presentedCountFor || now.Before(c.at) {
		c.n, c.at = n.trust.presentedUntrusted(n.trustNow()), now
		c.scans++
	}
	return c.n
}

// presentedCountFor is how long presentedUntrusted's scan stands.
const presentedCountFor = time.Second

// presentedCount is presentedUntrusted's count and when it was taken.
type presentedCount struct {
	mu    sync.Mutex
	at    time.Time
	n     int
	scans int // tests
}

// notePresentedUntrusted adds one record learned by presentation by an
// issuer not admitted directly to the standing count.
func (n *Node) notePresentedUntrusted() {
	c := &n.trust.presented
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}
