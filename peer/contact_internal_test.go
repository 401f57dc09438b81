package peer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/protocol/pb"
)

// TestRecordContactKeepsRetrying: a peer whose sessions keep failing for
// reasons that are not its verdict (busy, network, inconclusive) is retried
// with a doubling back-off that stops growing at contactTransientMax, and
// is never dropped while it stays connected.
func TestRecordContactKeepsRetrying(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := &Node{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	n.contact.ctx = ctx
	n.contact.backoff = map[peer.ID]*contactBackoff{}
	n.contact.verified = map[peer.ID]time.Time{}
	p := peer.ID("peer-under-test")
	fail := errors.New("stream reset")
	var last time.Duration
	for i := 1; i <= contactTransientTries+10; i++ {
		d := n.recordContact(p, nil, fail, false)
		want := min(contactTransientBackoff<<(i-1), contactTransientMax)
		// jitter spreads a delay over [0.75, 1.25) of it.
		if d < want*3/4 || d >= want*5/4 {
			t.Fatalf("attempt %d: retry in %s, want about %s", i, d, want)
		}
		b := n.contact.backoff[p]
		if b == nil || b.transient != i {
			t.Fatalf("attempt %d: back-off state %+v", i, b)
		}
		last = d
	}
	if last < contactTransientMax*3/4 {
		t.Fatalf("back-off stopped at %s", last)
	}
	// A stopping node schedules nothing.
	cancel()
	if d := n.recordContact(p, nil, fail, false); d != 0 {
		t.Fatalf("retry scheduled after stop: %s", d)
	}
}

// The leash hears the peer's answer when its first frame is complete: a
// length prefix and that many bytes, however they are split across
// reads. A byte of a prefix, or a prefix and part of the body, is no
// answer (a prover that sent that much and fell silent kept its slot for
// the handshake timeout); an oversized or overflowing prefix never
// completes (the verifier ends the session at once).
func TestLeashFrameWatch(t *testing.T) {
	frame := func(n int) []byte {
		b := binary.AppendUvarint(nil, uint64(n))
		return append(b, bytes.Repeat([]byte{1}, n)...)
	}
	for _, c := range []struct {
		name  string
		reads [][]byte
		done  int // index of the read that completes the frame, -1 for none
	}{
		{"one prefix byte", [][]byte{{0x80}}, -1},
		{"prefix and half the body", [][]byte{frame(200)[:102]}, -1},
		{"whole frame in one read", [][]byte{frame(200)}, 0},
		{"byte by byte", splitBytes(frame(130)), len(frame(130)) - 1},
		{"frame and more", [][]byte{append(frame(5), 0x80, 0x80)}, 0},
		{"empty frame", [][]byte{{0}}, 0},
		{"the largest prover frame", [][]byte{frame(protocol.MaxProverFrame)}, 0},
		{"oversized", [][]byte{frame(protocol.MaxProverFrame + 1)}, -1},
		{"overflowing prefix", [][]byte{bytes.Repeat([]byte{0xff}, 12), {1}}, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var w frameWatch
			got := -1
			for i, r := range c.reads {
				if w.feed(r) && got < 0 {
					got = i
				}
			}
			if got != c.done {
				t.Fatalf("frame complete at read %d, want %d", got, c.done)
			}
		})
	}
}

func splitBytes(b []byte) [][]byte {
	out := make([][]byte, len(b))
	for i := range b {
		out[i] = b[i : i+1]
	}
	return out
}

// A peer that falls silent puts its network in probation (IPv4 /24, IPv6
// /48), not only its peer ID, for contactSilentNetFor; an IPv6 /32 joins
// once contactSilentBlockNets of its /48s have; loopback is exempt unless
// limited; the table stays bounded.
func TestSilentNetsProbation(t *testing.T) {
	n := &Node{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	now := time.Unix(10000, 0)
	nets := func(a string) addrNets { return netsOfAddr(netip.MustParseAddr(a), false) }
	n.markSilentNets(nets("203.0.113.9"), now)
	if !n.inSilentNets(nets("203.0.113.200"), now) {
		t.Fatal("a fresh peer of the /24 of a silent one is not in probation")
	}
	if n.inSilentNets(nets("203.0.114.9"), now) {
		t.Fatal("another /24 is in probation")
	}
	if n.inSilentNets(nets("203.0.113.200"), now.Add(contactSilentNetFor)) {
		t.Fatal("probation does not end")
	}
	n.markSilentNets(nets("127.0.0.1"), now)
	if n.inSilentNets(nets("127.0.0.1"), now) {
		t.Fatal("loopback in probation without LimitLoopback")
	}
	for i := range contactSilentBlockNets {
		if n.inSilentNets(nets("2001:db8:ffff::1"), now) {
			t.Fatalf("the /32 in probation after %d silent /48s", i)
		}
		a := fmt.Sprintf("2001:db8:%x::1", i)
		n.markSilentNets(nets(a), now)
		n.markSilentNets(nets(a), now) // the same /48 again counts once
		if !n.inSilentNets(nets(fmt.Sprintf("2001:db8:%x::2", i)), now) {
			t.Fatal("the /48 of a silent peer not in probation")
		}
	}
	if !n.inSilentNets(nets("2001:db8:ffff::1"), now) {
		t.Fatalf("the /32 not in probation after %d silent /48s", contactSilentBlockNets)
	}
	if n.inSilentNets(nets("2001:db9::1"), now) {
		t.Fatal("another /32 in probation")
	}
	// NAT64 (64:ff9b::/96): the IPv4 host's /24, and no /32 block, or
	// four silent IPv4 /24s behind a translator would put every IPv4
	// peer behind it in probation.
	if got := nets("64:ff9b::203.0.113.9"); got.prefix != netip.MustParsePrefix("203.0.113.0/24") || got.block.IsValid() {
		t.Fatalf("groups of a NAT64 address: %+v", got)
	}
	for i := range contactSilentBlockNets {
		n.markSilentNets(nets(fmt.Sprintf("64:ff9b::198.51.%d.1", i)), now)
	}
	if n.inSilentNets(nets("64:ff9b::192.0.2.1"), now) {
		t.Fatal("silent IPv4 /24s behind a NAT64 translator put another one in probation")
	}
	for i := range 2 * contactSilentNetsTracked {
		n.markSilentNets(nets(fmt.Sprintf("10.%d.%d.1", i/256, i%256)), now)
	}
	if k := len(n.contact.silentNets); k > contactSilentNetsTracked {
		t.Fatalf("%d networks tracked, bound %d", k, contactSilentNetsTracked)
	}
}

// A peer that verifies us first (spec/protocol.md §5c) is asked again
// after about half a minute while it says it verifies us, with no failure
// counted, at most verifyFirstTries times in a row; then, and at once for
// any other answer (UNSPECIFIED included), it is backed off from as from
// a rejection. The timer to ask again is no back-off for a reciprocal
// request or a challenge.
func TestRecordContactVerifyFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := &Node{log: slog.New(slog.NewTextHandler(io.Discard, nil)), t: defaultTiming()}
	n.contact.ctx = ctx
	n.contact.backoff = map[peer.ID]*contactBackoff{}
	n.contact.verified = map[peer.ID]time.Time{}
	n.contact.retryRejected = time.Hour
	p := peer.ID("peer-under-test")
	will := &protocol.VerifyFirstError{Peer: p, Reciprocal: pb.Reciprocal_RECIPROCAL_WILL}
	for i := range verifyFirstTries {
		d := n.recordContact(p, nil, fmt.Errorf("verify: %w", will), false)
		if want := contactTransientMax / 2; d < want*3/4 || d >= want*5/4 {
			t.Fatalf("attempt %d: retry in %s, want about %s", i, d, want)
		}
		if b := n.contact.backoff[p]; b.transient != 0 || b.rejected != 0 || !b.waitingFirst {
			t.Fatalf("attempt %d: state %+v", i, b)
		}
	}
	if d := n.recordContact(p, nil, will, false); d != time.Hour || n.contact.backoff[p].rejected != 1 || n.contact.backoff[p].waitingFirst {
		t.Fatalf("after %d WILLs without a verdict: retry in %s, state %+v", verifyFirstTries, d, n.contact.backoff[p])
	}
	q := peer.ID("other-peer")
	unspecified := &protocol.VerifyFirstError{Peer: q, Reciprocal: pb.Reciprocal_RECIPROCAL_UNSPECIFIED}
	if d := n.recordContact(q, nil, unspecified, false); d != time.Hour || n.contact.backoff[q].rejected != 1 {
		t.Fatalf("UNSPECIFIED: retry in %s, state %+v", d, n.contact.backoff[q])
	}
}
