package peer_test

import (
	"encoding/binary"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"

	"github.com/acaptcha/acaptcha/internal/swarm"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
)

// dripProver answers every hello with the first bytes of a frame at once
// (partial: the start of a length prefix that promises more, or a whole
// prefix and part of the body), then nothing until the verifier gives up.
// No proof of work is ever paid (no draw is spent, nothing is signed).
func dripProver(h host.Host, partial []byte) {
	h.SetStreamHandler(protocol.ID, func(s network.Stream) {
		_, _ = s.Write(partial)
		_, _ = io.Copy(io.Discard, s)
		_ = s.Reset()
	})
}

// TestFirstContactDripPeers: the leash took the first byte the peer sent
// for its answer, so peers that wrote one byte of a hello ack (or a length
// prefix and part of the body) and fell silent kept every first-contact
// slot for the handshake timeout, each fresh peer ID once; an honest
// newcomer waited behind them. The leash now waits for a complete frame.
func TestFirstContactDripPeers(t *testing.T) {
	oracle := swarm.NewBenchOracle()
	v := startFC(t, oracle, fcOpts{policy: peer.AttestAll, tune: func(c peer.Config) peer.Config { return peer.WithContactLeash(c, 200*time.Millisecond) }})
	partials := [][]byte{
		{0x80}, // a varint prefix byte that promises more
		append(binary.AppendUvarint(nil, 200), make([]byte, 100)...), // half a frame
	}
	const drip = 24
	for i := range drip {
		h, _ := rawHost(t)
		dripProver(h, partials[i%len(partials)])
		if err := h.Connect(ctxT(t, 5*time.Second), addrInfo(v.Node)); err != nil {
			t.Fatal(err)
		}
	}
	// Let first contact pick the drip peers up and fill its slots.
	time.Sleep(300 * time.Millisecond)
	honest := startFC(t, oracle, fcOpts{policy: peer.AttestNone})
	start := time.Now()
	dial(t, honest, v)
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) && !admitsDirectly(v, honest) {
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(start)
	if !admitsDirectly(v, honest) {
		t.Fatalf("honest peer not verified %s after connecting, behind %d peers that sent part of a hello ack", took.Round(time.Millisecond), drip)
	}
	t.Logf("honest peer verified after %s, behind %d drip peers", took.Round(time.Millisecond), drip)
	if took > 5*time.Second {
		t.Fatalf("honest peer verified only after %s", took)
	}
}

// TestFirstContactSilentNetworkProbation: a fresh peer ID costs nothing,
// so marking only the peer that fell silent gave every new ID of the same
// network a normal slot again. Once a peer of a network fell silent, new
// peers from it take the probation slot only when it is free and retry
// later otherwise; a peer from another network is not held up. (Loopback
// counts as a network here because the node limits it, LimitLoopback;
// 127.0.1.1 is another /24 than 127.0.0.1.)
func TestFirstContactSilentNetworkProbation(t *testing.T) {
	oracle := swarm.NewBenchOracle()
	var logs syncBuffer
	v := startFC(t, oracle, fcOpts{policy: peer.AttestAll, tune: func(c peer.Config) peer.Config {
		c.LimitLoopback, c.ConnsPerIP = true, 200
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		// A leash of 1 s keeps the probation slot taken while the
		// fresh peers connect, even on a loaded machine under -race (at
		// 200 ms they could trickle in one per free slot: CI waited 20 s
		// for the deferrals once).
		return peer.WithContactLeash(c, time.Second)
	}})
	connectDrip := func() {
		h, _ := rawHost(t)
		dripProver(h, []byte{0x80})
		if err := h.Connect(ctxT(t, 5*time.Second), addrInfo(v.Node)); err != nil {
			t.Fatal(err)
		}
	}
	connectDrip()
	waitFor(t, 5*time.Second, "the first drip peer to slip its leash", func() bool { return v.Stats().ContactLeashed >= 1 })
	const fresh = 12
	for range fresh {
		connectDrip()
	}
	const deferred = "network in probation and the probation slot taken"
	waitFor(t, 20*time.Second, "fresh peers of the silent network to be put off", func() bool { return strings.Count(logs.String(), deferred) >= fresh/2 })

	honest := startFC(t, oracle, fcOpts{policy: peer.AttestNone, tune: func(c peer.Config) peer.Config {
		c.ListenAddrs = []string{"/ip4/127.0.1.1/tcp/0"}
		return c
	}})
	start := time.Now()
	dial(t, honest, v)
	for _, c := range v.Host().Network().ConnsToPeer(honest.ID()) {
		if !strings.HasPrefix(c.RemoteMultiaddr().String(), "/ip4/127.0.1.1/") {
			t.Fatalf("the peer of another network connected from %s", c.RemoteMultiaddr())
		}
	}
	waitFor(t, 8*time.Second, "the peer of another network to be verified", func() bool { return admitsDirectly(v, honest) })
	t.Logf("%d attempts of the silent network put off; a peer of another network verified after %s",
		strings.Count(logs.String(), deferred), time.Since(start).Round(time.Millisecond))
}
