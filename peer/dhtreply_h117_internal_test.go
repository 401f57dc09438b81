package peer

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	dhtpb "github.com/libp2p/go-libp2p-kad-dht/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-msgio"
	"github.com/libp2p/go-msgio/pbio"
)

// The DHT's client reads a reply to its own query of up to 4 MiB and
// takes a buffer of the announced length before any of it arrives: DHT
// servers that answered the node's queries with the prefix of a 4 MiB
// reply and one byte made it hold 4 MiB per query in flight (the DHT
// checks up to 256 new peers at once, besides its lookups), 48 MiB for
// 12 here. The node now reads at most maxDHTLargeReplies replies over
// maxDHTSmallReply at once (one a server, one a network) and resets the
// stream of one beyond before its buffer is taken.
func TestDHTLargeRepliesBounded(t *testing.T) {
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	n, err := New(Config{
		Key: key, StorePath: filepath.Join(t.TempDir(), "s.db"),
		ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pid := DHTProtocolPrefix + "/kad/1.0.0"
	// Hostile servers answer GET_PROVIDERS with the prefix of a 4 MiB
	// reply and one byte of it, then wait (the node's own checks, a
	// FIND_NODE, are closed: they do not enter the node's routing
	// table and run no lookup of their own here).
	const servers = 12
	refused := make(chan struct{}, servers)
	var ids []peer.ID
	for range servers {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		h.SetStreamHandler(pid, func(s network.Stream) {
			defer s.Reset()
			var req dhtpb.Message
			if err := pbio.NewDelimitedReader(s, 1<<16).ReadMsg(&req); err != nil || req.GetType() != dhtpb.Message_GET_PROVIDERS {
				return
			}
			prefix := binary.AppendUvarint(nil, network.MessageSizeMax-1)
			if _, err := s.Write(append(prefix, 0)); err != nil {
				return
			}
			if _, err := s.Read(make([]byte, 1)); err != nil && !errors.Is(err, io.EOF) {
				refused <- struct{}{}
			}
		})
		n.host.Peerstore().AddAddrs(h.ID(), h.Addrs(), time.Hour)
		ids = append(ids, h.ID())
	}
	dh := n.discovery.dht.Host()
	before := heapInUse()
	for _, p := range ids {
		s, err := dh.NewStream(ctx, p, pid)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Reset()
		if err := pbio.NewDelimitedWriter(s).WriteMsg(dhtpb.NewMessage(dhtpb.Message_GET_PROVIDERS, []byte("k"), 0)); err != nil {
			t.Fatal(err)
		}
		// As the DHT's message sender reads a reply.
		go func() { _, _ = msgio.NewVarintReaderSize(s, network.MessageSizeMax).ReadMsg() }()
	}
	want := servers - maxDHTLargeReplies
	for i := range want {
		select {
		case <-refused:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d large DHT replies refused after 10 s, want %d: the others each hold 4 MiB (heap %+d MiB)",
				i, servers, want, (int64(heapInUse())-int64(before))>>20)
		}
	}
	t.Logf("%d of %d large replies refused; heap %+d MiB", want, servers, (int64(heapInUse())-int64(before))>>20)
}

// A large reply read to its end gives its place back: one server's
// replies of 100 KiB, one after another on a stream, are all read, more
// of them than there are places.
func TestDHTLargeReplyPlaceReturned(t *testing.T) {
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	n, err := New(Config{
		Key: key, StorePath: filepath.Join(t.TempDir(), "s.db"),
		ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pid := DHTProtocolPrefix + "/kad/1.0.0"
	const size, replies = 100 << 10, 2 * maxDHTLargeReplies
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	h.SetStreamHandler(pid, func(s network.Stream) {
		defer s.Reset()
		r := pbio.NewDelimitedReader(s, 1<<16)
		for {
			var req dhtpb.Message
			if err := r.ReadMsg(&req); err != nil || req.GetType() != dhtpb.Message_GET_PROVIDERS {
				return
			}
			if _, err := s.Write(append(binary.AppendUvarint(nil, size), make([]byte, size)...)); err != nil {
				return
			}
		}
	})
	n.host.Peerstore().AddAddrs(h.ID(), h.Addrs(), time.Hour)
	dh := n.discovery.dht.Host()
	s, err := dh.NewStream(ctx, h.ID(), pid)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	_ = s.SetDeadline(time.Now().Add(20 * time.Second))
	w, r := pbio.NewDelimitedWriter(s), msgio.NewVarintReaderSize(s, network.MessageSizeMax)
	for i := range replies {
		if err := w.WriteMsg(dhtpb.NewMessage(dhtpb.Message_GET_PROVIDERS, []byte("k"), 0)); err != nil {
			t.Fatal(err)
		}
		msg, err := r.ReadMsg()
		if err != nil || len(msg) != size {
			t.Fatalf("reply %d: %d bytes, %v", i, len(msg), err)
		}
		r.ReleaseMsg(msg)
		if held, _, _ := dh.(dhtHost).replies.held(); held != 0 {
			t.Fatalf("after reply %d read whole, %d places still held", i, held)
		}
	}
}
