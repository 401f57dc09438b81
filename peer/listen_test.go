package peer_test

import (
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/acaptcha/acaptcha/peer"
)

// A second node on a port the first holds is refused (issue 12: with
// SO_REUSEPORT both started, shared the port and dials reached either).
func TestSecondNodeOnSamePortRefused(t *testing.T) {
	for _, tc := range []struct{ name, any, fixed string }{
		{"tcp", "/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/tcp/%s"},
		{"quic", "/ip4/127.0.0.1/udp/0/quic-v1", "/ip4/127.0.0.1/udp/%s/quic-v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := startNode(t, nodeOpts{listen: []string{tc.any}, sets: dependentSets(t)})
			var port string
			for _, a := range first.Host().Addrs() {
				if _, s, err := manet.DialArgs(a); err == nil {
					if p, err := portOf(s); err == nil {
						port = p
					}
				}
			}
			if port == "" {
				t.Fatalf("no port in %v", first.Host().Addrs())
			}
			addr := fmt.Sprintf(tc.fixed, port)
			if _, err := ma.NewMultiaddr(addr); err != nil {
				t.Fatal(err)
			}
			k, _, _ := crypto.GenerateEd25519Key(rand.Reader)
			n, err := peer.New(peer.Config{Key: k, StorePath: filepath.Join(t.TempDir(), "s.db"), ListenAddrs: []string{addr}})
			if err == nil {
				n.Close()
				t.Fatalf("second node started on %s, which the first node holds", addr)
			}
			if !errors.Is(err, peer.ErrPortInUse) {
				t.Fatalf("error %v, want ErrPortInUse", err)
			}
		})
	}
}

func TestDefaultPortIsNotIPFS(t *testing.T) {
	for _, a := range peer.DefaultListenAddrs {
		m, err := ma.NewMultiaddr(a)
		if err != nil {
			t.Fatal(err)
		}
		_, s, err := manet.DialArgs(m)
		if err != nil {
			t.Fatal(err)
		}
		if p, _ := portOf(s); p == "4001" || p != fmt.Sprint(peer.DefaultPort) {
			t.Fatalf("default listen address %s: port %s", a, p)
		}
	}
}

func portOf(hostport string) (string, error) {
	for i := len(hostport) - 1; i >= 0; i-- {
		if hostport[i] == ':' {
			return hostport[i+1:], nil
		}
	}
	return "", errors.New("no port")
}
