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
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-msgio"

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
	// maxPresentConcurrent bounds inbound presentations in flight.
	maxPresentConcurrent = 16
	presentMemory        = protocol.MaxEnvelopeBytes + 4<<10

	// Inbound presentations are rate-limited per presenter (a bucket of
	// PresentPeerBurst, refilled one per PresentPeerEvery) and in total
	// (PresentGlobalBurst, refilled one per PresentGlobalEvery); over the
	// rate the stream is reset with protocol.ErrCodeBusy. An honest node
	// presents once per first contact.
	PresentPeerBurst   = 8
	PresentPeerEvery   = time.Minute
	PresentGlobalBurst = 32
	PresentGlobalEvery = time.Second
	// MaxPresentedUntrusted bounds the presented records kept from
	// issuers this node does not admit directly (they carry no weight
	// until it does): past it, such records are acknowledged but not
	// learned. Records by directly admitted issuers are always learned.
	MaxPresentedUntrusted = 1024
	// presentTracked bounds the per-presenter buckets kept in memory.
	presentTracked = 4096
)

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

// presentLimiter rate-limits inbound presentations per presenter and in
// total.
type presentLimiter struct {
	mu     sync.Mutex
	peers  map[peer.ID]*tokenBucket
	global tokenBucket
}

// allow takes a token for p from its bucket and the global one, or
// reports that either is empty (then it takes none).
func (l *presentLimiter) allow(p peer.ID, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.peers == nil {
		l.peers = map[peer.ID]*tokenBucket{}
	}
	b := l.peers[p]
	if b != nil {
		b.refill(now, PresentPeerBurst, PresentPeerEvery)
		if b.tokens < 1 {
			return false
		}
	}
	l.global.refill(now, PresentGlobalBurst, PresentGlobalEvery)
	if l.global.tokens < 1 {
		return false
	}
	if b == nil {
		if len(l.peers) >= presentTracked {
			// Forget presenters whose bucket is full again.
			for q, qb := range l.peers {
				if qb.refill(now, PresentPeerBurst, PresentPeerEvery); qb.tokens >= PresentPeerBurst {
					delete(l.peers, q)
				}
			}
			if len(l.peers) >= presentTracked {
				return false
			}
		}
		b = &tokenBucket{}
		b.refill(now, PresentPeerBurst, PresentPeerEvery)
		l.peers[p] = b
	}
	l.global.tokens--
	b.tokens--
	return true
}

// Present sends p the valid accepted attestations this node holds about
// itself (the newest per issuer, newest first, at most MaxPresented) and
// waits for p to acknowledge. It opens no stream when there is nothing to
// present.
func (n *Node) Present(ctx context.Context, p peer.ID) error {
	if p == n.ID() {
		return errors.New("present: cannot present to ourselves")
	}
	envs := n.trust.presentable(n.trustNow(), MaxPresented)
	if len(envs) == 0 {
		return nil
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

func (t *trustState) acquirePresent(p peer.ID) bool {
	t.presentMu.Lock()
	defer t.presentMu.Unlock()
	if t.presentIn[p] || len(t.presentIn) >= maxPresentConcurrent {
		return false
	}
	t.presentIn[p] = true
	return true
}

func (t *trustState) releasePresent(p peer.ID) {
	t.presentMu.Lock()
	delete(t.presentIn, p)
	t.presentMu.Unlock()
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
	if !n.presentLimit.allow(p, time.Now()) {
		_ = s.ResetWithError(protocol.ErrCodeBusy)
		n.metrics.count(func(m *metrics) *atomic.Uint64 { return &m.presentLimited })
		n.metrics.observePresentation("received", "limited")
		return
	}
	if !t.acquirePresent(p) {
		_ = s.ResetWithError(protocol.ErrCodeBusy)
		n.metrics.observePresentation("received", "busy")
		return
	}
	_ = s.SetDeadline(time.Now().Add(PresentTimeout))
	learned, code, err := n.readPresentation(s, p)
	// Released before answering, so the presenter may start its next
	// presentation as soon as it has our answer.
	t.releasePresent(p)
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

func (n *Node) readPresentation(s network.Stream, p peer.ID) (int, network.StreamErrorCode, error) {
	r := msgio.NewVarintReaderSize(s, protocol.MaxEnvelopeBytes)
	learned := 0
	untrusted := -1 // presented records by issuers we do not admit; counted on first need
	for i := 0; ; i++ {
		msg, err := r.ReadMsg()
		switch {
		case errors.Is(err, io.EOF):
			return learned, 0, nil
		case errors.Is(err, msgio.ErrMsgTooLarge):
			return learned, protocol.ErrCodeOversized, fmt.Errorf("%w: %w", protocol.ErrFrameTooLarge, err)
		case isTimeout(err):
			return learned, protocol.ErrCodeTimeout, err
		case err != nil:
			return learned, 0, err
		}
		if i >= MaxPresented {
			r.ReleaseMsg(msg)
			return learned, protocol.ErrCodeProtocolViolation, fmt.Errorf("%w: more than %d records", protocol.ErrProtocolViolation, MaxPresented)
		}
		env := append([]byte(nil), msg...)
		r.ReleaseMsg(msg)
		a, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{Subject: p, Now: n.trustNow()})
		switch {
		case errors.Is(err, protocol.ErrExpired), errors.Is(err, protocol.ErrNotYetValid), errors.Is(err, protocol.ErrUnsupportedVersion):
			continue
		case err != nil:
			return learned, protocol.ErrCodeProtocolViolation, fmt.Errorf("%w: record %d: %w", protocol.ErrProtocolViolation, i+1, err)
		case !a.Accepted:
			continue
		}
		if !n.admitsDirectly(a.Issuer) {
			if untrusted < 0 {
				untrusted = n.presentedUntrusted()
			}
			if untrusted >= MaxPresentedUntrusted {
				n.metrics.count(func(m *metrics) *atomic.Uint64 { return &m.presentedCapped })
				continue
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
// whose issuer this node does not admit directly.
func (n *Node) presentedUntrusted() int { return n.trust.presentedUntrusted(n.trustNow()) }
