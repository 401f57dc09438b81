package peer

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// countingListener is a plain TCP service on ip (not libp2p: another
// program's port) that counts the connections it accepts.
func countingListener(t *testing.T, ip string) (ma.Multiaddr, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			_ = c.Close()
		}
	}()
	addr := ma.StringCast(fmt.Sprintf("/ip4/%s/tcp/%d", ip, l.Addr().(*net.TCPAddr).Port))
	return addr, &n
}

// announce hands the node's mDNS notifee k announcements, each by a fresh
// peer ID with the addresses of addrs(i), as a LAN host can send them.
func announce(t *testing.T, n *Node, k int, addrs func(i int) []ma.Multiaddr) {
	t.Helper()
	for i := range k {
		_, id := testutil.NewKey(t)
		mdnsNotifee{n}.HandlePeerFound(peer.AddrInfo{ID: id, Addrs: addrs(i)})
		time.Sleep(10 * time.Millisecond)
	}
}

// settle waits for the discovery dials under way to end.
func settle(t *testing.T, n *Node) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		n.discovery.mu.Lock()
		busy := len(n.discovery.dialing)
		n.discovery.mu.Unlock()
		if busy == 0 {
			return
		}
	}
	t.Fatal("discovery dials still under way after 10 s")
}

// A LAN host's mDNS announcements made the node dial whatever addresses
// they named, once per announcement: the same port of another program
// again and again under fresh peer IDs (one TCP connection each), every
// port of one host, any number of hosts. Now an address is dialled once
// per mdnsRedialBackoff whatever the peer ID, one IP at most
// mdnsHostBurst times (then one per mdnsHostEvery), and all of mDNS at
// most mdnsDialBurst times (then one per mdnsDialEvery).
func TestMDNSAnnouncementsBounded(t *testing.T) {
	n := newBareNode(t, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	// One service port, announced under 40 fresh peer IDs.
	svc, hits := countingListener(t, "127.0.0.1")
	announce(t, n, 40, func(int) []ma.Multiaddr { return []ma.Multiaddr{svc} })
	settle(t, n)
	same := hits.Load()

	// 40 ports of one host, one per announcement.
	var ports []*atomic.Int64
	var portAddrs []ma.Multiaddr
	for range 40 {
		a, c := countingListener(t, "127.0.0.2")
		portAddrs, ports = append(portAddrs, a), append(ports, c)
	}
	announce(t, n, 40, func(i int) []ma.Multiaddr { return []ma.Multiaddr{portAddrs[i]} })
	settle(t, n)
	sweep := int64(0)
	for _, c := range ports {
		sweep += c.Load()
	}

	// 40 hosts, one announcement each.
	var hosts []*atomic.Int64
	var hostAddrs []ma.Multiaddr
	for i := range 40 {
		a, c := countingListener(t, fmt.Sprintf("127.0.3.%d", i+1))
		hostAddrs, hosts = append(hostAddrs, a), append(hosts, c)
	}
	announce(t, n, 40, func(i int) []ma.Multiaddr { return []ma.Multiaddr{hostAddrs[i]} })
	settle(t, n)
	spread := int64(0)
	for _, c := range hosts {
		spread += c.Load()
	}
	t.Logf("connections made by 40 announcements each: one port %d, 40 ports of one host %d, 40 hosts %d", same, sweep, spread)
	if same > 1 {
		t.Errorf("one announced address was dialled %d times under fresh peer IDs within the backoff, want once", same)
	}
	if sweep > mdnsHostBurst {
		t.Errorf("the ports of one host were dialled %d times, want at most %d", sweep, mdnsHostBurst)
	}
	if total := same + sweep + spread; total > mdnsDialBurst+1 {
		t.Errorf("mDNS announcements made %d dials in all within seconds, want at most %d (and the refill)", total, mdnsDialBurst)
	}
}

// Only addresses in the scope of a LAN discovery are dialled: private
// and link-local ones, loopback only for a node that listens on loopback
// only; never public, unspecified, multicast, DNS, relayed or unix ones.
func TestMDNSScope(t *testing.T) {
	for _, c := range []struct {
		addr           string
		lan, loopbackN bool // dialled by a node on the LAN, by one on loopback only
	}{
		{"/ip4/192.168.1.20/tcp/4001", true, true},
		{"/ip4/10.1.2.3/udp/4001/quic-v1", true, true},
		{"/ip4/172.16.0.9/tcp/4001", true, true},
		{"/ip4/169.254.10.1/tcp/4001", true, true},
		{"/ip6/fd00::1/tcp/4001", true, true},
		{"/ip6zone/eth0/ip6/fe80::1/tcp/4001", true, true},
		{"/ip6/::ffff:192.168.1.20/tcp/4001", true, true},
		{"/ip4/127.0.0.1/tcp/4001", false, true},
		{"/ip6/::1/tcp/4001", false, true},
		{"/ip4/8.8.8.8/tcp/53", false, false},
		{"/ip4/203.0.113.7/tcp/22", false, false},
		{"/ip6/2001:db8::1/tcp/4001", false, false},
		{"/ip4/0.0.0.0/tcp/22", false, false},
		{"/ip4/224.0.0.251/udp/5353", false, false},
		{"/ip4/100.64.0.1/tcp/4001", false, false},
		{"/ip4/255.255.255.255/udp/9", false, false},
		{"/dns4/printer.local/tcp/9100", false, false},
		{"/dns4/example.com/tcp/443", false, false},
		{"/ip4/192.168.1.20/tcp/4001/p2p/12D3KooWDmk3Lap6BGxB3XELbLnqzrzG9gXSMhWsPmFj9JtQqy1g/p2p-circuit", false, false},
		{"/ip4/192.168.1.20/tcp/4001/ip4/8.8.8.8/tcp/53", false, false},
		{"/ip6zone/eth0/ip4/8.8.8.8/tcp/53", false, false},
		{"/unix/tmp/x.sock", false, false},
	} {
		a := ma.StringCast(c.addr)
		if _, got := mdnsScope(a, false); got != c.lan {
			t.Errorf("%s on the LAN: in scope %v, want %v", c.addr, got, c.lan)
		}
		if _, got := mdnsScope(a, true); got != c.loopbackN {
			t.Errorf("%s on loopback only: in scope %v, want %v", c.addr, got, c.loopbackN)
		}
	}
}

// A node that listens beyond loopback does not dial the loopback (or
// unspecified, which Linux routes to the machine itself) addresses an
// announcement names: they are this machine's own services, not the
// announcer's.
func TestMDNSNoLoopbackDialsFromLAN(t *testing.T) {
	n := newBareNode(t, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	n.discovery.mu.Lock()
	n.discovery.mdnsGate.loopback = false // as for a node listening on its LAN address
	n.discovery.mu.Unlock()
	svc, hits := countingListener(t, "127.0.0.1")
	port, err := svc.ValueForProtocol(ma.P_TCP)
	if err != nil {
		t.Fatal(err)
	}
	announce(t, n, 4, func(int) []ma.Multiaddr {
		return []ma.Multiaddr{svc, ma.StringCast("/ip4/0.0.0.0/tcp/" + port), ma.StringCast("/ip6/::ffff:127.0.0.1/tcp/" + port)}
	})
	settle(t, n)
	if got := hits.Load(); got != 0 {
		t.Fatalf("announcements of loopback addresses made a LAN node connect to its own machine's service %d times", got)
	}
}
