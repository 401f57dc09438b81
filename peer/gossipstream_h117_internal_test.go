package peer

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
)

// GossipSub takes a buffer of the length an RPC's prefix announces (up
// to 256 KiB) before the RPC arrives and reads with no deadline, one
// stream per peer; connections are bounded per IPv4 address, not per
// /24, so the peers of one network made the node hold 256 KiB each for
// as long as they stayed connected (40 peers: 10 MiB of heap measured;
// 500 connections: 125 MiB). The peers of one network now have at most
// maxGossipLargePerGroup RPCs over gossipSmallRPC read at once; the
// stream of one beyond is reset before its buffer is taken.
func TestGossipLargeRPCsPerNetworkBounded(t *testing.T) {
	// The reset after the wait is what the second half asserts; 4 s
	// rather than 10 keeps the package's run short.
	defer func(w time.Duration) { gossipLargeRPCWait = w }(gossipLargeRPCWait)
	gossipLargeRPCWait = 4 * time.Second
	victim := newBareNode(t, Config{Gossip: true, LimitLoopback: true, ConnsPerIP: 64})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const attackers = maxGossipLargePerGroup + 4
	hosts := freshPeers(ctx, t, victim, attackers)
	refused := make(chan struct{}, attackers)
	before := heapInUse()
	for _, h := range hosts {
		s, err := h.NewStream(ctx, victim.ID(), pubsub.GossipSubID_v11)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Reset() })
		// The prefix of a 256 KiB RPC and one byte of it.
		if _, err := s.Write(append(binary.AppendUvarint(nil, gossipMaxRPC), 0)); err != nil {
			t.Fatal(err)
		}
		go func() {
			if _, err := s.Read(make([]byte, 1)); err != nil && !errors.Is(err, io.EOF) {
				refused <- struct{}{}
			}
		}()
	}
	want := attackers - maxGossipLargePerGroup
	for i := range want {
		select {
		case <-refused:
		case <-time.After(gossipLargeRPCWait / 2):
			t.Fatalf("%d of %d peers of one network refused their 256 KiB RPC, want %d: the others' buffers are held (heap %+d KiB)",
				i, attackers, want, (int64(heapInUse())-int64(before))>>10)
		}
	}
	// The RPCs read in a place that do not arrive whole in
	// gossipLargeRPCWait have their streams reset, their places back.
	for i := range maxGossipLargePerGroup {
		select {
		case <-refused:
		case <-ctx.Done():
			t.Fatalf("%d of %d large RPCs left incomplete were reset", i, maxGossipLargePerGroup)
		}
	}
}
