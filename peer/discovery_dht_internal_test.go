package peer

import (
	"io"
	"log/slog"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// Which found addresses a node takes from the DHT, by the scope its
// bootstrap peers put it in: a public DHT takes public addresses only, a
// private one private addresses too, nodes on one machine loopback too.
func TestDHTScope(t *testing.T) {
	const relay = "/p2p/12D3KooWDmk3Lap6BGxB3XELbLnqzrzG9gXSMhWsPmFj9JtQqy1g/p2p-circuit"
	public := newDHTScope([]peer.AddrInfo{{Addrs: []ma.Multiaddr{ma.StringCast("/ip4/8.8.8.8/tcp/4001"), ma.StringCast("/dnsaddr/bootstrap.example.org")}}})
	private := newDHTScope([]peer.AddrInfo{{Addrs: []ma.Multiaddr{ma.StringCast("/ip4/192.168.1.2/tcp/4001")}}})
	local := newDHTScope([]peer.AddrInfo{{Addrs: []ma.Multiaddr{ma.StringCast("/ip4/127.0.0.1/tcp/4001")}}})
	if public != (dhtScope{}) || private != (dhtScope{private: true}) || local != (dhtScope{loopback: true}) {
		t.Fatalf("scopes: public %+v, private %+v, loopback %+v", public, private, local)
	}
	for _, c := range []struct {
		addr                 string
		pub, priv, loopbackN bool
	}{
		{"/ip4/8.8.8.8/tcp/4001", true, true, true},
		{"/ip6/2606:4700::1111/udp/4001/quic-v1", true, true, true},
		{"/dns4/node.example.com/tcp/4001", true, true, true},
		{"/ip4/8.8.8.8/tcp/4001" + relay, true, true, true},
		{"/ip4/192.168.1.20/tcp/4001", false, true, false},
		{"/ip4/10.0.0.5/tcp/22", false, true, false},
		{"/ip4/100.64.0.1/tcp/4001", false, true, false},
		{"/ip4/169.254.1.1/tcp/4001", false, true, false},
		{"/ip6/fd00::1/tcp/4001", false, true, false},
		{"/ip4/192.168.1.20/tcp/4001" + relay, false, true, false},
		{"/ip4/127.0.0.1/tcp/6379", false, false, true},
		{"/ip6/::1/tcp/6379", false, false, true},
		{"/ip6/::ffff:127.0.0.1/tcp/6379", false, false, true},
		{"/dns4/localhost/tcp/6379", false, false, true},
		{"/dns6/DB.Localhost./tcp/5432", false, false, true},
		{"/ip4/127.0.0.1/tcp/4001" + relay, false, false, true},
		{"/ip4/0.0.0.0/tcp/22", false, false, false},
		{"/ip6/::/tcp/22", false, false, false},
		{relay, false, false, false},
		{"/ip4/203.0.113.7/tcp/22", false, false, false}, // documentation range: unroutable
	} {
		a := ma.StringCast(c.addr)
		for _, s := range []struct {
			name  string
			scope dhtScope
			want  bool
		}{{"public", public, c.pub}, {"private", private, c.priv}, {"loopback", local, c.loopbackN}} {
			if got := s.scope.allows(a); got != s.want {
				t.Errorf("%s in a %s DHT: in scope %v, want %v", c.addr, s.name, got, s.want)
			}
		}
	}
	in, out := ma.StringCast("/ip4/8.8.8.8/tcp/4001"), ma.StringCast("/ip4/10.0.0.5/tcp/22")
	if got := public.filter([]ma.Multiaddr{out, in, out}); len(got) != 1 || !got[0].Equal(in) {
		t.Errorf("filter kept %v, want [%s]", got, in)
	}
	if got := public.filter([]ma.Multiaddr{in}); len(got) != 1 {
		t.Errorf("filter of an address in scope: %v", got)
	}
}

// A bootstrap peer named by DNS puts the DHT in the scope of the address
// it was reached at (keepBootstrap widens the scope on each connection).
func TestDHTScopeWidensByBootstrapConnection(t *testing.T) {
	var d discoveryState
	d.dhtScope = newDHTScope([]peer.AddrInfo{{Addrs: []ma.Multiaddr{ma.StringCast("/dns4/boot.corp.example/tcp/4001")}}})
	lan := ma.StringCast("/ip4/10.1.2.3/tcp/4001")
	if d.currentDHTScope().allows(lan) {
		t.Fatal("a private address in scope before any bootstrap connection")
	}
	d.widenDHTScope(ma.StringCast("/ip4/8.8.4.4/tcp/4001"))
	if d.currentDHTScope() != (dhtScope{}) {
		t.Fatalf("a public bootstrap connection widened the scope to %+v", d.currentDHTScope())
	}
	d.widenDHTScope(ma.StringCast("/ip4/10.0.0.1/tcp/4001"))
	if got := d.currentDHTScope(); got != (dhtScope{private: true}) || !got.allows(lan) {
		t.Fatalf("after a connection to a private bootstrap address: %+v", got)
	}
	d.widenDHTScope(ma.StringCast("/ip6/::1/udp/4001/quic-v1"))
	if got := d.currentDHTScope(); got != (dhtScope{private: true, loopback: true}) {
		t.Fatalf("after a connection to a loopback bootstrap address: %+v", got)
	}
}

// A provider record found through a public DHT that names this machine's
// own services (a loopback port of another program) does not make the
// node connect to them; in a DHT of nodes on one machine the same record
// is dialled (the check can fail).
func TestDHTFindsOutOfScopeNotDialled(t *testing.T) {
	for _, c := range []struct {
		name  string
		scope dhtScope
		dials bool
	}{{"public DHT", dhtScope{}, false}, {"loopback DHT", dhtScope{loopback: true}, true}} {
		t.Run(c.name, func(t *testing.T) {
			n := newBareNode(t, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			n.discovery.dhtScope = c.scope
			svc, hits := countingListener(t, "127.0.0.1")
			_, id := testutil.NewKey(t)
			n.discovered(peer.AddrInfo{ID: id, Addrs: []ma.Multiaddr{svc}}, "dht")
			settle(t, n)
			if got := hits.Load() > 0; got != c.dials {
				t.Fatalf("connections to the found loopback service: %d, want any: %v", hits.Load(), c.dials)
			}
		})
	}
}
