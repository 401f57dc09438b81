package peer_test

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
)

// A node behind a relay whose data limit is below what a session may
// send wrote the WARN line "relay data limit may not hold a session with
// long challenges" once per peer it went to verify over the relay: every
// fresh peer ID that connected through the relay and named the
// attestation protocol wrote one, at will. The limit is the relay's, the
// same for every peer: the line is now written once per relay a minute
// (and within the total budget of remote-triggered lines).
func TestRelayDataLimitWarnedOncePerRelay_h129(t *testing.T) {
	sets := dependentSets(t)
	oracle := testutil.NewOracle(sets...)
	// Room for the handshakes, identify and a hello; under the 96 KiB
	// of three rounds of the longest narratives.
	rh, _ := relayHost(t, &relayv2.RelayLimit{Duration: 10 * time.Minute, Data: 64 << 10})
	logs := newLineCounter(slog.LevelWarn)
	_, bInfo := relayedPeer(t, rh, sets, oracle, func(c *peer.Config) { c.Logger, c.AttestPolicy = slog.New(logs), peer.AttestAll })
	const sybils = 6
	var reached atomic.Int64
	ctx := ctxT(t, time.Minute)
	for i := range sybils {
		h, _ := rawHost(t)
		// It names the attestation protocol (so B's first contact goes
		// to verify it) and never answers.
		var once atomic.Bool
		h.SetStreamHandler(protocol.ID, func(s network.Stream) {
			if once.CompareAndSwap(false, true) {
				reached.Add(1)
			}
			_ = s.Reset()
		})
		if err := h.Connect(network.WithAllowLimitedConn(ctx, "test"), bInfo); err != nil {
			t.Fatalf("sybil %d: connect through the relay: %v", i, err)
		}
	}
	eventually(t, 30*time.Second, "B's first contact reaches every peer over the relay", func() bool { return reached.Load() >= sybils })
	const msg = "relay data limit may not hold a session with long challenges"
	k := logs.count(slog.LevelWarn, msg)
	t.Logf("%d peers verified over one relay with a 64 KiB data limit: %d WARN lines", sybils, k)
	if k != 1 {
		t.Fatalf("%d WARN lines about one relay's data limit for %d peers behind it, want 1", k, sybils)
	}
}
