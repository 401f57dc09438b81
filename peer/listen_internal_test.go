package peer

import (
	"context"
	"errors"
	"net/netip"
	"testing"
)

// TestListensBeyondLoopbackNames: the listen rule of the loopback limits
// and the CLI's automatic proof of work read a DNS listen address as
// libp2p listens on it, by what its name resolves to in its family, and
// read an IPv6 zone through to its address. /dns4/localhost (libp2p
// listens on 127.0.0.1) counted as beyond loopback, so a loopback-only
// node limited its loopback peers and asked them a 16-bit proof of work;
// /ip6zone/eth0/ip6/fe80::1 (a link-local address, reachable from the
// link) and /p2p-circuit counted as loopback, so a node listening there
// exempted loopback peers and asked no proof of work.
func TestListensBeyondLoopbackNames(t *testing.T) {
	fake := map[string][]netip.Addr{
		"ip4 loop.test":  {netip.MustParseAddr("127.0.0.1")},
		"ip6 loop.test":  {netip.MustParseAddr("::1")},
		"ip loop.test":   {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")},
		"ip4 mixed.test": {netip.MustParseAddr("127.0.0.1")},
		"ip mixed.test":  {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.0.2.7")},
		"ip4 lan.test":   {netip.MustParseAddr("192.168.1.4")},
		"ip4 v4in6.test": {netip.MustParseAddr("::ffff:127.0.0.1")},
	}
	old := lookupListenIP
	lookupListenIP = func(_ context.Context, network, host string) ([]netip.Addr, error) {
		if ips, ok := fake[network+" "+host]; ok {
			return ips, nil
		}
		return nil, errors.New("no such host")
	}
	defer func() { lookupListenIP = old }()
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"/dns4/loop.test/tcp/0", false},
		{"/dns6/loop.test/udp/0/quic-v1", false},
		{"/dns/loop.test/tcp/0", false},
		{"/dns4/mixed.test/tcp/0", false},
		{"/dns/mixed.test/tcp/0", true},
		{"/dns4/lan.test/tcp/0", true},
		{"/dns4/v4in6.test/tcp/0", false},
		{"/dns4/unknown.test/tcp/0", true},
		{"/ip6zone/eth0/ip6/fe80::1/tcp/0", true},
		{"/ip6zone/lo/ip6/::1/tcp/0", false},
		{"/p2p-circuit", true},
		{"/ip4/127.0.0.1/tcp/0", false},
		{"/ip4/10.0.0.1/tcp/0", true},
	} {
		if got := ListensBeyondLoopback([]string{tc.addr}); got != tc.want {
			t.Errorf("%s: beyond loopback %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// The lead's case with the system's resolver: localhost resolves to
// loopback (/etc/hosts), and libp2p listens there.
func TestListensBeyondLoopbackLocalhost(t *testing.T) {
	if ListensBeyondLoopback([]string{"/dns4/localhost/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}) {
		t.Error("/dns4/localhost counts as beyond loopback")
	}
}

// A node that listens on loopback only but reserves a slot with a relay
// is reached from anywhere through the relay: it counts as beyond
// loopback (its per-IP limits and the CLI's automatic proof of work
// apply), whatever the relay's own address.
func TestReachableBeyondLoopbackWithRelay(t *testing.T) {
	loop := []string{"/ip4/127.0.0.1/tcp/0"}
	if ReachableBeyondLoopback(loop, nil) {
		t.Error("loopback only, no relay: beyond loopback")
	}
	for _, relay := range []string{
		"/ip4/192.0.2.7/tcp/4001/p2p/12D3KooWGzxzKZYveHXtpG6AsrUJBcWxHBFS2HsEoGTxrMLvKXtf",
		"/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWGzxzKZYveHXtpG6AsrUJBcWxHBFS2HsEoGTxrMLvKXtf",
	} {
		if !ReachableBeyondLoopback(loop, []string{relay}) {
			t.Errorf("loopback only with relay %s: not beyond loopback", relay)
		}
	}
}
