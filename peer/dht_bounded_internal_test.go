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
	recpb "github.com/libp2p/go-libp2p-record/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-msgio/pbio"
)

// TestDHTProviderRecordsBounded: the node's DHT (--dht, server mode)
// stored every provider record a connected peer sent it, in memory for
// 48 hours: one ADD_PROVIDER message of about 100 bytes, for a key of the
// peer's choosing, was a stored record, with no cap per peer nor in
// total. Provider records are capped per provider peer, per network and
// in total; value records (PUT_VALUE, which acaptcha does not use) are
// not stored at all.
func TestDHTProviderRecordsBounded(t *testing.T) {
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	n, err := New(Config{
		Key: key, StorePath: filepath.Join(t.TempDir(), "s.db"),
		ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: true, LimitLoopback: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const keys = 300
	var sent [][]byte
	for range 2 {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		if err := h.Connect(ctx, peer.AddrInfo{ID: n.ID(), Addrs: n.host.Addrs()}); err != nil {
			t.Fatal(err)
		}
		s, err := h.NewStream(ctx, n.ID(), DHTProtocolPrefix+"/kad/1.0.0")
		if err != nil {
			t.Fatalf("open a DHT stream: %v", err)
		}
		w := pbio.NewDelimitedWriter(s)
		self := peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()}
		for range keys {
			k := make([]byte, 32)
			_, _ = rand.Read(k)
			m := dhtpb.NewMessage(dhtpb.Message_ADD_PROVIDER, k, 0)
			m.ProviderPeers = dhtpb.RawPeerInfosToPBPeers([]peer.AddrInfo{self})
			if err := w.WriteMsg(m); err != nil {
				break // the node ended the stream
			}
			sent = append(sent, k)
		}
		// A PUT_VALUE of a public key record (valid: the key hashes to
		// the peer ID in its name) on a fresh stream.
		if vs, err := h.NewStream(ctx, n.ID(), DHTProtocolPrefix+"/kad/1.0.0"); err == nil {
			pub, _ := crypto.MarshalPublicKey(h.Peerstore().PubKey(h.ID()))
			m := dhtpb.NewMessage(dhtpb.Message_PUT_VALUE, []byte("/pk/"+string(h.ID())), 0)
			m.Record = &recpb.Record{Key: []byte("/pk/" + string(h.ID())), Value: pub}
			_ = pbio.NewDelimitedWriter(vs).WriteMsg(m)
			_ = vs.CloseWrite()
			_ = vs.SetReadDeadline(time.Now().Add(2 * time.Second))
			_ = pbio.NewDelimitedReader(vs, 1<<16).ReadMsg(new(dhtpb.Message))
			_ = vs.Close()
		}
		_ = s.CloseWrite()
		time.Sleep(300 * time.Millisecond)
		_ = s.Close()
	}
	stored := 0
	ps := n.discovery.dht.ProviderStore()
	for _, k := range sent {
		provs, err := ps.GetProviders(ctx, k)
		if err == nil && len(provs) > 0 {
			stored++
		}
	}
	values := 0
	if vdb := n.discovery.dhtStore; vdb != nil {
		values = vdb.values()
	}
	t.Logf("2 peers of one network sent %d provider records: %d stored; %d value records stored", 2*keys, stored, values)
	if stored > 2*maxDHTProvidersPerPeer {
		t.Fatalf("%d provider records stored for 2 peers, want at most %d each", stored, maxDHTProvidersPerPeer)
	}
	if values > 0 {
		t.Fatalf("%d value records stored", values)
	}
}
