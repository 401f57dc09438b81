package peer

import (
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// A peer that answers the hello after the leash (its proof of work or a
// long RTT took more than contactLeash) and whose session then succeeds
// leaves its network out of probation: the leash holds the network off
// only while the peer is silent; firstContact marks it for 10 minutes only
// when the session fails.
func TestLeashLateAnswerNoProbation(t *testing.T) {
	n := &Node{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	n.t.contactLeash = 20 * time.Millisecond
	n.contact.leashes = map[peer.ID]*leash{}
	nets := netsOfAddr(netip.MustParseAddr("203.0.113.9"), false)
	l := n.leashSession(peer.ID("slow-honest"), nets, func() {})
	l.opened()
	time.Sleep(100 * time.Millisecond) // PoW / RTT past the 1 s leash
	// While it is silent, its network waits for probation.
	if !n.inSilentNets(netsOfAddr(netip.MustParseAddr("203.0.113.200"), false), time.Now()) {
		t.Fatal("the /24 of a peer silent past the leash is not held off while it is")
	}
	l.answered() // the HelloAck arrives, the session runs
	_ = l.end()  // ...and succeeds (err == nil): firstContact does not mark
	if n.inSilentNets(netsOfAddr(netip.MustParseAddr("203.0.113.200"), false), time.Now()) {
		t.Fatal("the /24 of a peer that answered (late) and passed is in probation for 10 minutes")
	}
}
