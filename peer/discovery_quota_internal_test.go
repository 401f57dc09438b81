package peer

import (
	"fmt"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// A rendezvous lookup's results are shared out by network (audit-82):
// 200 fresh IDs advertising from one /24 get rendezvousPerNet of the
// rendezvousFindLimit taken, and peers of other networks the rest; a
// result without a groupable address counts in the total only.
func TestRendezvousResultsSharedByNetwork(t *testing.T) {
	q := netQuota{per: rendezvousPerNet, total: rendezvousFindLimit}
	ai := func(addr string, i int) peer.AddrInfo {
		return peer.AddrInfo{ID: peer.ID(fmt.Sprint("p", addr, i)), Addrs: []ma.Multiaddr{ma.StringCast(addr)}}
	}
	flood := 0
	for i := range 200 {
		if q.take(ai("/ip4/198.51.100.7/tcp/4001", i)) {
			flood++
		}
	}
	if flood != rendezvousPerNet {
		t.Fatalf("one /24 got %d results, want %d", flood, rendezvousPerNet)
	}
	honest := 0
	for i := range 100 {
		if q.take(ai(fmt.Sprintf("/ip4/203.0.%d.9/tcp/4001", i), i)) {
			honest++
		}
	}
	if honest != rendezvousFindLimit-rendezvousPerNet {
		t.Fatalf("other networks got %d results, want the remaining %d", honest, rendezvousFindLimit-rendezvousPerNet)
	}
	if q.take(peer.AddrInfo{ID: "late"}) {
		t.Fatal("a result past the total was taken")
	}
	q2 := netQuota{per: 1, total: 3}
	if !q2.take(peer.AddrInfo{ID: "no-addr"}) || !q2.take(ai("/dns4/example.org/tcp/1", 0)) {
		t.Fatal("results without a groupable address are refused")
	}
}
