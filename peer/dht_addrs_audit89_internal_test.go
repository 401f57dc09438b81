package peer

// Audit (helper-89): the peerstore addresses the DHT's provider records
// leave behind. It failed on the code it was written against.

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	dhtpb "github.com/libp2p/go-libp2p-kad-dht/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-msgio/pbio"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// TestDHTProviderAddrsBounded_audit89: the DHT writes a provider's
// addresses to the peerstore, for a day, before the node's store decides
// on its record. Fresh peer IDs of one network whose records the store
// refused (their network's share full) each still left every address
// they named (up to the peerstore's 64 per peer) for 24 hours: peer-ID
// churn filled the peerstore's table of addresses of peers not connected,
// bounded only by libp2p's million in total. Now a refused provider
// leaves none, and a stored one at most maxDHTProviderAddrs.
func TestDHTProviderAddrsBounded_audit89(t *testing.T) {
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	n, err := New(Config{
		Key: key, StorePath: filepath.Join(t.TempDir(), "s.db"),
		ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: true, LimitLoopback: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	st := n.discovery.dhtStore
	st.mu.Lock()
	st.perGroup = 2 // the loopback /24's share: two providers
	st.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	named := netip.MustParsePrefix("1.2.0.0/16")
	const providers, addrsEach = 4, 64
	var ids []peer.ID
	for i := range providers {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Connect(ctx, peer.AddrInfo{ID: n.ID(), Addrs: n.host.Addrs()}); err != nil {
			t.Fatal(err)
		}
		s, err := h.NewStream(ctx, n.ID(), DHTProtocolPrefix+"/kad/1.0.0")
		if err != nil {
			t.Fatalf("open a DHT stream: %v", err)
		}
		self := peer.AddrInfo{ID: h.ID()}
		for j := range addrsEach {
			self.Addrs = append(self.Addrs, ma.StringCast(fmt.Sprintf("/ip4/1.2.%d.%d/tcp/4001", i, j+1)))
		}
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		m := dhtpb.NewMessage(dhtpb.Message_ADD_PROVIDER, k, 0)
		m.ProviderPeers = dhtpb.RawPeerInfosToPBPeers([]peer.AddrInfo{self})
		if err := pbio.NewDelimitedWriter(s).WriteMsg(m); err != nil {
			t.Fatal(err)
		}
		_ = s.CloseWrite()
		time.Sleep(200 * time.Millisecond)
		_ = s.Close()
		ids = append(ids, h.ID())
		h.Close()
	}
	stored := 0
	for i, p := range ids {
		kept := 0
		for _, a := range n.host.Peerstore().Addrs(p) {
			if ip, err := manet.ToIP(a); err == nil {
				if addr, ok := netip.AddrFromSlice(ip); ok && named.Contains(addr.Unmap()) {
					kept++
				}
			}
		}
		held := st.holdsProvider(p)
		t.Logf("provider %d: record stored %v, %d of its %d addresses in the peerstore", i, held, kept, addrsEach)
		switch {
		case held:
			stored++
			if kept > maxDHTProviderAddrs {
				t.Errorf("provider %d: %d addresses kept, want at most %d", i, kept, maxDHTProviderAddrs)
			}
		case kept > 0:
			t.Errorf("provider %d: record refused, yet %d of its addresses kept (for %s)", i, kept, dhtProviderAddrTTL)
		}
	}
	if stored != 2 {
		t.Fatalf("%d providers stored, want the network's share of 2", stored)
	}
}

// holdsProvider reports whether p holds a provider record (tests).
func (d *dhtStore) holdsProvider(p peer.ID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.byPeer[p] > 0
}
