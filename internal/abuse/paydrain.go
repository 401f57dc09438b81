package abuse

// Finding 11 (spec/protocol.md §5b, document 1.13.1): hostile provers
// that make the node's verifier pay. The node pays a prover's payment
// only in three situations: it came to the prover (Config.Contacted: a
// verification, a bootstrap or discovery dial), its caller asked for the
// verification (Config.Requested), or the prover is in mutual wait with
// it (Config.MutualWaitProver: either declined the other's session
// VERIFY_FIRST within the last 5 minutes). A remote script reaches the
// third at will: it connects, speaks the protocol, and declines the
// node's first-contact session VERIFY_FIRST (saying it verifies the node
// now, WILL); first contact asks again within seconds (about 5 s when the
// script's peer ID sorts above the node's, which a script grinds for in
// two tries), asks it a proof of work of at least 20 bits
// (MutualWaitPayDifficulty), and pays up to PaySlack bits more: 22 bits,
// 2^22 hashes charged to the node's payment budgets per session. The
// script then declines the session BUSY at the first probe, so that first
// contact retries after its transient back-off (2, 4, 8 s...), and asks
// again. Every identity of the role does so (as many fresh peer IDs as
// it likes, from one network), except every third, a control that never
// declines VERIFY_FIRST and asks the payment anyway: it came to the node
// and is in none of the three situations, so it must never be paid.
//
// The bounds (protocol/limits.go, budgets.chargePay): per window
// (DrawWindow, an hour) one prover gets at most a sixteenth of
// MaxVerifierPayWork, the provers of one IP prefix an eighth, those of an
// IPv6 /32 a quarter, and the provers the node does not admit three
// quarters (the last quarter is kept for admitted ones); over a run of d
// each share is its capacity plus its refill over d. The bench's peers
// dial from 127.0.0.1: the node exempts loopback from the per-prefix
// budgets unless Config.LimitLoopback (then they are all one /24), and an
// IPv4 address has no /32 block.

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/protocol/pb"
)

// Counter keys of the payment drain.
const (
	drainDeclinesKey = "verify-first declines"
	drainAskedKey    = "payments asked"
	drainRefusedKey  = "payments refused"
	// drainControlKey counts the controls' asks, refused (they came to
	// the node and declined nothing).
	drainControlKey = "asks of the controls refused"
	drainPaidKey    = "payments received"
	drainChargedKey = "hashes charged to the node (2^D per payment received)"
	drainTriedKey   = "hashes the node tried"
	// drainOutsideKey counts payments received by a drain identity that
	// was in none of the node's paying situations (bound: none).
	drainOutsideKey = "payments received outside the paying situations"
	drainPowKey     = "proof-of-work hashes the attackers tried"
)

// Budget shares of the node's verifier payments (spec §5b, as
// protocol/limits.go documents them; written out here so that the bench
// checks the documented figures, not the code's constants).
const (
	payShareProver    = 16 // one prover: a sixteenth of MaxVerifierPayWork
	payShareGroup     = 8  // the provers of one IP prefix: an eighth
	payShareBlock     = 4  // those of one IPv6 /32: a quarter
	payShareUntrusted = 4  // the provers the node does not admit: all but a quarter
)

// mutualWaitFor is how long a VERIFY_FIRST decline keeps a prover in
// mutual wait with the node (peer/solicit.go).
const mutualWaitFor = 5 * time.Minute

// drainIdentity is what one drain identity knows of its own situation at
// the node: when it last declined the node's session VERIFY_FIRST on the
// connection it still holds (zero: never, or the connection was lost
// since, and the node forgot it).
type drainIdentity struct {
	control    bool
	mu         sync.Mutex
	declinedAt time.Time
}

func (d *drainIdentity) waiting(now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.declinedAt.IsZero() && now.Sub(d.declinedAt) < mutualWaitFor
}

func (d *drainIdentity) declined(t time.Time) {
	d.mu.Lock()
	d.declinedAt = t
	d.mu.Unlock()
}

// attackerHostAbove is an attacker host whose peer ID sorts above id: the
// node then asks again about 5 s after a VERIFY_FIRST decline, not 30 s
// (peer/contact.go, recordContact). Half of all keys qualify.
func (b *bench) attackerHostAbove(id lpeer.ID) (host.Host, error) {
	for range 64 {
		h, err := b.attackerHost()
		if err != nil || h.ID() > id {
			return h, err
		}
		h.Close()
	}
	return b.attackerHost()
}

// payDrain is one identity of finding 11 (see the file comment).
func (b *bench) payDrain(ctx context.Context, h host.Host, c *attackCounters) {
	b.mu.Lock()
	b.drainSeq++
	st := &drainIdentity{control: b.drainSeq%3 == 0}
	if st.control {
		b.drainControls = append(b.drainControls, h.ID())
	}
	b.mu.Unlock()
	node := b.node.ID()
	// The node forgets a peer's decline once no connection to it is left
	// (peer/solicit.go, forgetSolicited): so does the identity.
	h.Network().Notify(&network.NotifyBundle{DisconnectedF: func(n network.Network, conn network.Conn) {
		if conn.RemotePeer() == node && n.Connectedness(node) != network.Connected {
			st.declined(time.Time{})
		}
	}})
	h.SetStreamHandler(protocol.ID, func(s network.Stream) { b.drainSession(ctx, h, st, wrapRaw(s), c) })
	// Stay connected, as the node's first contact needs: a ping stream
	// kept open (libp2p's ping, which every node serves) puts the
	// connection after those without streams in the connection manager's
	// trimming order; when it is trimmed all the same, the identity comes
	// back.
	go func() {
		for ctx.Err() == nil {
			if h.Network().Connectedness(node) == network.Connected {
				for range ping.Ping(ctx, h, node) {
				}
			}
			if !sleepCtx(ctx, reconnectWait) {
				return
			}
		}
	}()
	b.loop(ctx, reconnectWait, func() {
		if h.Network().Connectedness(node) == network.Connected {
			return
		}
		c.sessions.Add(1)
		if !b.connect(ctx, h) {
			c.inc("connections refused")
		}
	})
}

// drainSession answers one session of the node's verifier.
func (b *bench) drainSession(ctx context.Context, h host.Host, st *drainIdentity, r *rawStream, c *attackCounters) {
	defer r.s.Reset()
	f, err := r.recv(frameWait)
	hello := f.GetHello()
	if err != nil || hello == nil {
		return
	}
	waiting := st.waiting(time.Now())
	if !st.control && !waiting {
		// Enter mutual wait: decline VERIFY_FIRST, saying it verifies
		// the node now, so that first contact asks again soon.
		st.declined(time.Now())
		c.inc(drainDeclinesKey)
		_ = r.send(&pb.Frame{Body: &pb.Frame_Decline{Decline: &pb.Decline{Reason: pb.DeclineReason_DECLINE_REASON_VERIFY_FIRST,
			Reciprocal: pb.Reciprocal_RECIPROCAL_WILL, Detail: "verify me first"}}})
		drainClose(r)
		return
	}
	d := int(hello.GetPowDifficulty())
	pctx, cancel := context.WithTimeout(ctx, 3*frameWait)
	pow, err := protocol.SolvePow(pctx, hello.GetNonce(), h.ID(), d, protocol.MaxPowDifficulty)
	cancel()
	if err != nil {
		c.inc("proofs of work not solved")
		return
	}
	if d > 0 {
		c.add(drainPowKey, int64(binary.BigEndian.Uint64(pow))+1)
	}
	// The most the node pays: PaySlack bits above the larger of its
	// hello's proof of work and a public node's base, at most the
	// node's MaxPowDifficulty (spec §5b); and no more than one prover's
	// share of its payment budget holds (a sixteenth of
	// MaxVerifierPayWork, documented), which the node would refuse
	// whole: when the node's failures or load raise its hello above
	// MutualWaitPayDifficulty, an ask of PaySlack bits more outgrows the
	// share, and this identity would drain nothing at all.
	pc := b.node.ProtocolConfig()
	ask := min(max(d, protocol.PublicPowDifficulty)+protocol.PaySlack, pc.MaxPowDifficulty, shareBits(pc.MaxVerifierPayWork/payShareProver))
	c.inc(fmt.Sprintf("asks of %d bits (hello %d)", ask, d))
	nonce := make([]byte, protocol.PayNonceBytes)
	_, _ = rand.Read(nonce)
	if r.send(&pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: hello.GetNonce(), Pow: pow,
		PayDifficulty: uint32(ask), PayNonce: nonce}}}) != nil {
		return
	}
	c.inc(drainAskedKey)
	// The node solves within half its round-1 window (4 s).
	f, err = r.recv(frameWait + 2*time.Second)
	pay := f.GetProbe().GetPay()
	if err != nil || f.GetProbe() == nil || !protocol.CheckPay(nonce, b.node.ID(), pay, ask) {
		if st.control {
			c.inc(drainControlKey)
		} else {
			c.inc(drainRefusedKey)
		}
		return
	}
	c.inc(drainPaidKey)
	c.add(drainChargedKey, int64(1)<<ask)
	c.add(drainTriedKey, int64(binary.BigEndian.Uint64(pay))+1)
	if st.control || !waiting {
		c.inc(drainOutsideKey)
	}
	// Paid: decline BUSY at the first probe, a session that did not run,
	// which first contact retries after its transient back-off.
	_ = r.send(&pb.Frame{Body: &pb.Frame_Decline{Decline: &pb.Decline{Reason: pb.DeclineReason_DECLINE_REASON_BUSY, Detail: "busy"}}})
	drainClose(r)
}

// shareBits is the largest d with 2^d <= share (0 for a share under 2).
func shareBits(share int) int {
	if share < 2 {
		return 0
	}
	return bits.Len(uint(share)) - 1
}

// drainClose lets a last frame reach the node before the stream goes:
// it closes the write side and waits (briefly) for the node's reset.
func drainClose(r *rawStream) {
	_ = r.s.CloseWrite()
	_, _ = r.recv(2 * time.Second)
}

// payDrainReport fills the payment figures of finding 11 from the node's
// accounting (protocol.PeerUsage): the hashes charged to pay each
// identity, the budget shares that apply over a run of d, and the
// payments charged to the controls (none may be).
func (b *bench) payDrainReport(r *AttackReport, ids []lpeer.ID, pc protocol.Config, d time.Duration) {
	b.mu.Lock()
	controls := map[lpeer.ID]bool{}
	for _, id := range b.drainControls {
		controls[id] = true
	}
	b.mu.Unlock()
	for _, id := range ids {
		u := b.node.PeerUsage(id)
		r.NodePayWork += u.PayWork
		r.NodePayMaxPeer = max(r.NodePayMaxPeer, u.PayWork)
		r.NodePayRefused += u.PayRefused
		if controls[id] {
			r.NodePayControls += u.PayWork
		}
	}
	full := pc.MaxVerifierPayWork
	share := func(div int) int64 { return bucketBudget(full/div, pc.DrawWindow, d) }
	r.PayBudgetProver = share(payShareProver)
	if b.cfg.LimitLoopback {
		// All the bench's peers are in 127.0.0.0/24 (IPv4: no /32 block).
		r.PayBudgetPrefix = share(payShareGroup)
	}
	r.PayBudgetTotal = bucketBudget(full, pc.DrawWindow, d) - int64(full/payShareUntrusted)
	r.PaidOutside = b.counters[AttackPayDrain].get(drainOutsideKey)
	r.PaymentsReceived = b.counters[AttackPayDrain].get(drainPaidKey)
}

// checkPayDrain evaluates finding 11's bounds on r.
func checkPayDrain(r AttackReport) []string {
	var f []string
	if r.PayBudgetProver > 0 && r.NodePayMaxPeer > r.PayBudgetProver {
		f = append(f, fmt.Sprintf("%s: %d hashes paid to one prover, its share %d", r.Name, r.NodePayMaxPeer, r.PayBudgetProver))
	}
	if r.PayBudgetPrefix > 0 && r.NodePayWork > r.PayBudgetPrefix {
		f = append(f, fmt.Sprintf("%s: %d hashes paid to the provers of one /24, its share %d", r.Name, r.NodePayWork, r.PayBudgetPrefix))
	}
	if r.PayBudgetTotal > 0 && r.NodePayWork > r.PayBudgetTotal {
		f = append(f, fmt.Sprintf("%s: %d hashes paid to provers the node does not admit, their share %d", r.Name, r.NodePayWork, r.PayBudgetTotal))
	}
	if r.PaidOutside > 0 || r.NodePayControls > 0 {
		f = append(f, fmt.Sprintf("%s: %d payments received by provers in none of the paying situations, %d hashes charged for the controls", r.Name, r.PaidOutside, r.NodePayControls))
	}
	return f
}
