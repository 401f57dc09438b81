package peer

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	circuit "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/proto"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// TestRelayReservationsPerNetworkBounded (h125): the relay service
// (Config.RelayService) holds 64 reservations, each an hour (refreshed
// by its holder), bounded per IP address (4) and in all only: 16
// addresses of one IPv4 /24, fresh peer IDs behind each, held every
// reservation, and a peer of any other network was refused
// RESERVATION_REFUSED for as long as they refreshed. The peers of one
// network (budget group, as the hop streams) now hold at most
// maxRelayRsvpPerGroup, those of one IPv6 /32 twice that, and a peer of
// another network still gets one.
func TestRelayReservationsPerNetworkBounded(t *testing.T) {
	victim := newBareNode(t, Config{LimitLoopback: true, RelayService: true,
		HostOptions: []libp2p.Option{libp2p.ForceReachabilityPublic()}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sub, err := victim.host.EventBus().Subscribe(new(event.EvtLocalProtocolsUpdated))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for !slices.Contains(victim.host.Mux().Protocols(), circuit.ProtoIDv2Hop) {
		select {
		case <-sub.Out():
		case <-ctx.Done():
			t.Fatal("the relay service never started")
		}
	}
	relay := peer.AddrInfo{ID: victim.ID(), Addrs: victim.Addrs()}
	reserve := func(ip string) error {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/"+ip+"/tcp/0"), libp2p.DisableRelay())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		if err := h.Connect(ctx, relay); err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		_, err = client.Reserve(ctx, h, relay)
		return err
	}
	// 16 addresses of 127.0.0.0/24, 4 fresh peer IDs each: the relay's
	// 64 reservations.
	const addrs, perAddr = 16, 4
	held := 0
	for i := range addrs {
		for range perAddr {
			if reserve(fmt.Sprintf("127.0.0.%d", i+2)) == nil {
				held++
			}
		}
	}
	t.Logf("fresh peers of 16 addresses of 127.0.0.0/24 hold %d relay reservations", held)
	if held > maxRelayRsvpPerGroup {
		t.Errorf("the peers of one network hold %d relay reservations, want at most %d", held, maxRelayRsvpPerGroup)
	}
	if err := reserve("127.0.114.1"); err != nil {
		t.Errorf("a peer of another network: reservation refused: %v", err)
	}
}

// relayACL's accounting: a holder's refresh keeps its place, the /48s of
// one IPv6 /32 share BlockFactor groups' reservations, and a reservation
// past its TTL gives its place back.
func TestRelayACLRefreshBlockAndExpiry(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	acl := newRelayACL(true)
	acl.now = func() time.Time { return at }
	id := func() peer.ID {
		_, p := testutil.NewKey(t)
		return p
	}
	addr := func(s string) ma.Multiaddr { return ma.StringCast(s + "/tcp/4001") }
	var first peer.ID
	for i := range maxRelayRsvpPerGroup {
		p := id()
		if i == 0 {
			first = p
		}
		if !acl.AllowReserve(p, addr("/ip4/198.51.100."+fmt.Sprint(i+1))) {
			t.Fatalf("reservation %d of one /24 refused", i+1)
		}
	}
	if acl.AllowReserve(id(), addr("/ip4/198.51.100.200")) {
		t.Error("a reservation past the /24's share was allowed")
	}
	if !acl.AllowReserve(first, addr("/ip4/198.51.100.1")) {
		t.Error("a holder's refresh was refused")
	}
	allowed := 0
	for i := range 64 {
		if acl.AllowReserve(id(), addr(fmt.Sprintf("/ip6/2001:db8:%x::1", i+1))) {
			allowed++
		}
	}
	if want := 2 * maxRelayRsvpPerGroup; allowed != want {
		t.Errorf("the /48s of one IPv6 /32 got %d reservations, want %d", allowed, want)
	}
	at = at.Add(acl.ttl)
	if !acl.AllowReserve(id(), addr("/ip4/198.51.100.201")) {
		t.Error("a reservation after the others' TTL was refused")
	}
}
