package peer

import (
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// The tables remote peers grow at the legal rate for a long time stay
// within their caps (item 3 of helper-129's brief; passes on the code as
// it is: regression tests of caps that had none).

// GossipSub messages reach the validator at up to the total signature
// budget's rate (GossipTotalCostPerSec units, a message costing at least
// 2): over ten minutes of the fake clock the table of message IDs seen stays
// within gossipSeenTracked, and while it is not full of recent IDs an
// ID seen within gossipSeenFor is still known (older ones go first).
func TestGossipSeenTableBoundedOverTime_h129(t *testing.T) {
	var b gossipBudget
	now := time.Unix(1_700_000_000, 0)
	perSec := GossipTotalCostPerSec / 2
	const secs = 600
	for s := range secs {
		now = now.Add(time.Second)
		// Past the table's room for gossipSeenFor at the full rate
		// in the first five minutes; a twentieth of it after.
		k := perSec
		if s >= secs/2 {
			k = perSec / 20
		}
		for i := range k {
			b.noteSeen(fmt.Sprintf("m-%d-%d", s, i), now)
		}
		if n := len(b.seen); n > gossipSeenTracked {
			t.Fatalf("second %d: %d message IDs tracked, over %d", s, n, gossipSeenTracked)
		}
	}
	// At a twentieth of the rate every ID of the last gossipSeenFor fits.
	for s := secs - int(gossipSeenFor/time.Second) + 1; s < secs; s++ {
		id := fmt.Sprintf("m-%d-0", s)
		if !b.seenRecently(id, now) {
			t.Fatalf("message %s, %s old, forgotten while the table holds %d", id, now.Sub(time.Unix(1_700_000_000, 0).Add(time.Duration(s+1)*time.Second)), len(b.seen))
		}
	}
}

// mDNS announcements of fresh peer IDs and addresses (private IPv4 and
// link-local IPv6) every 100 ms for two hours of the fake clock: the
// gate's tables of peer IDs, addresses and hosts stay within mdnsTracked,
// and it dials no more than its total rate.
func TestMDNSGateTablesBoundedOverHours_h129(t *testing.T) {
	var g mdnsGate
	now := time.Unix(1_700_000_000, 0)
	const every = 100 * time.Millisecond
	const steps = int(2 * time.Hour / every)
	dialled := 0
	for i := range steps {
		now = now.Add(every)
		addrs := []ma.Multiaddr{
			ma.StringCast(fmt.Sprintf("/ip4/10.%d.%d.%d/tcp/4001", byte(i>>16), byte(i>>8), byte(i))),
			ma.StringCast(fmt.Sprintf("/ip6/fe80::%x:%x/udp/4001/quic-v1", i>>16, i&0xffff)),
		}
		dialled += len(g.admit(peer.AddrInfo{ID: peer.ID(fmt.Sprintf("mdns-%d", i)), Addrs: addrs}, now))
		if len(g.ids) > mdnsTracked || len(g.addrs) > mdnsTracked || len(g.hosts) > mdnsTracked {
			t.Fatalf("step %d: %d peer IDs, %d addresses, %d hosts tracked, over %d", i, len(g.ids), len(g.addrs), len(g.hosts), mdnsTracked)
		}
	}
	most := mdnsDialBurst + int(time.Duration(steps)*every/mdnsDialEvery) + 1
	t.Logf("%d announcements over %s: %d addresses dialled (at most %d); %d peer IDs, %d addresses, %d hosts tracked",
		steps, time.Duration(steps)*every, dialled, most, len(g.ids), len(g.addrs), len(g.hosts))
	if dialled > most {
		t.Fatalf("%d addresses dialled, over the total rate's %d", dialled, most)
	}
}
