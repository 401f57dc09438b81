package peer_test

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/skill"
)

// TestLibraryLimitsLoopbackByDefault: the library's zero Config exempted
// loopback peers from every per-IP and per-prefix limit whatever the node
// listened on, while `acaptcha node` limits them when it listens beyond
// loopback (--limit-loopback auto): a library node on 0.0.0.0 behind a
// local proxy, tunnel or sidecar (every peer it forwards arrives from
// 127.0.0.1) let any number of fresh peer IDs connect. The library now
// decides as the CLI: limited when listening beyond loopback, exempt on
// loopback only, ExemptLoopback to keep the exemption.
func TestLibraryLimitsLoopbackByDefault(t *testing.T) {
	const perIP, dialers = 2, 6
	for _, tc := range []struct {
		name   string
		listen string
		exempt bool
		want   bool // limited
	}{
		{"all interfaces", "/ip4/0.0.0.0/tcp/0", false, true},
		{"all interfaces, ExemptLoopback", "/ip4/0.0.0.0/tcp/0", true, false},
		{"loopback only", "/ip4/127.0.0.1/tcp/0", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, _, err := crypto.GenerateEd25519Key(rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			n, err := peer.New(peer.Config{Key: key, StorePath: filepath.Join(t.TempDir(), "n.db"), ListenAddrs: []string{tc.listen},
				ConnsPerIP: perIP, ExemptLoopback: tc.exempt, Policy: skill.DefaultPolicy()})
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			if got := n.ProtocolConfig().LimitLoopback; got != tc.want {
				t.Errorf("protocol's LimitLoopback %v, want %v", got, tc.want)
			}
			var port string
			for _, a := range n.Host().Addrs() {
				if p, err := a.ValueForProtocol(ma.P_TCP); err == nil {
					port = p
					break
				}
			}
			target, err := ma.NewMultiaddr("/ip4/127.0.0.1/tcp/" + port)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			connected := 0
			for range dialers {
				h, err := libp2p.New(libp2p.NoListenAddrs)
				if err != nil {
					t.Fatal(err)
				}
				defer h.Close()
				if h.Connect(ctx, lpeer.AddrInfo{ID: n.ID(), Addrs: []ma.Multiaddr{target}}) == nil {
					time.Sleep(50 * time.Millisecond)
					if len(n.Host().Network().ConnsToPeer(h.ID())) > 0 {
						connected++
					}
				}
			}
			t.Logf("listen %s, ExemptLoopback %v: %d of %d fresh peer IDs connected from loopback (ConnsPerIP %d)", tc.listen, tc.exempt, connected, dialers, perIP)
			if tc.want && connected > perIP {
				t.Errorf("%d loopback peers connected, want at most ConnsPerIP %d", connected, perIP)
			}
			if !tc.want && connected < dialers {
				t.Errorf("%d of %d loopback peers connected to an exempt node", connected, dialers)
			}
		})
	}
}

// The listen rule of the loopback limits and of the CLI's automatic
// proof of work.
func TestListensBeyondLoopback(t *testing.T) {
	for _, tc := range []struct {
		addrs []string
		want  bool
	}{
		{nil, true},
		{[]string{"/ip4/127.0.0.1/tcp/0"}, false},
		{[]string{"/ip6/::1/udp/0/quic-v1", "/ip4/127.0.0.1/tcp/0"}, false},
		{[]string{"/ip4/127.0.0.1/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"}, true},
		{[]string{"/ip6/::/tcp/0"}, true},
		{[]string{"/dns4/example.com/tcp/0"}, true},
		{[]string{"not a multiaddr"}, true},
	} {
		if got := peer.ListensBeyondLoopback(tc.addrs); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.addrs, got, tc.want)
		}
	}
}
