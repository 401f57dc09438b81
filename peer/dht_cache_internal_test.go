package peer

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	dhtpb "github.com/libp2p/go-libp2p-kad-dht/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-msgio/pbio"
)

// TestDHTProviderCacheBounded: the DHT's provider manager adds a
// provider to its cached set of a key (the sets of the 256 keys last
// asked for, GET_PROVIDERS) before it writes the record to the
// datastore, and kept it there when dhtStore refused the record. A peer
// that stored one record for a key and asked for it had every later
// ADD_PROVIDER for that key, from any number of fresh peer IDs, kept in
// memory for 48 hours and served to every GET_PROVIDERS, past the caps
// per peer, per network and in total. A refused record now leaves no
// trace: the key's cached set is dropped, and read again from the
// datastore.
func TestDHTProviderCacheBounded(t *testing.T) {
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	n, err := New(Config{
		Key: key, StorePath: filepath.Join(t.TempDir(), "s.db"),
		ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	d := n.discovery.dhtStore
	d.mu.Lock()
	d.total = 1 // the first record fills the store
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	send := func(h host.Host, m *dhtpb.Message, reply bool) *dhtpb.Message {
		t.Helper()
		s, err := h.NewStream(ctx, n.ID(), DHTProtocolPrefix+"/kad/1.0.0")
		if err != nil {
			t.Fatalf("open a DHT stream: %v", err)
		}
		defer s.Close()
		if err := pbio.NewDelimitedWriter(s).WriteMsg(m); err != nil {
			t.Fatal(err)
		}
		_ = s.SetReadDeadline(time.Now().Add(2 * time.Second))
		var r dhtpb.Message
		if err := pbio.NewDelimitedReader(s, 1<<20).ReadMsg(&r); err != nil {
			if reply {
				t.Fatalf("read the reply: %v", err)
			}
			return nil
		}
		return &r
	}
	provide := func(h host.Host) {
		m := dhtpb.NewMessage(dhtpb.Message_ADD_PROVIDER, k, 0)
		m.ProviderPeers = dhtpb.RawPeerInfosToPBPeers([]peer.AddrInfo{{ID: h.ID(), Addrs: h.Addrs()}})
		_ = send(h, m, false)
	}
	const fresh = 24
	for i := range fresh + 1 {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Connect(ctx, peer.AddrInfo{ID: n.ID(), Addrs: n.host.Addrs()}); err != nil {
			t.Fatal(err)
		}
		provide(h)
		if i == 0 {
			// The key's set goes into the cache: one record, stored.
			r := send(h, dhtpb.NewMessage(dhtpb.Message_GET_PROVIDERS, k, 0), true)
			if got := len(r.GetProviderPeers()); got != 1 {
				t.Fatalf("GET_PROVIDERS after the first record: %d providers, want 1", got)
			}
		}
		_ = h.Close()
	}
	time.Sleep(200 * time.Millisecond) // the last handler runs on
	provs, err := n.discovery.dht.ProviderStore().GetProviders(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	stored := len(d.rec)
	d.mu.Unlock()
	t.Logf("%d peers provided one key asked for once, the store holding 1 record: %d stored, %d served", fresh+1, stored, len(provs))
	if len(provs) > stored {
		t.Fatalf("%d providers served for the key, %d records stored: refused records kept in the cache", len(provs), stored)
	}
}
