package peer

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// The DHT (--dht, server mode) reads a request of up to libp2p's
// MessageSizeMax (4 MiB) and takes a buffer of the length a request's
// prefix announces before any of it arrives, for as long as its stream
// stays open (its idle timeout is a minute): one peer that opened DHT
// streams (75 at once, 1,265 for all peers) and wrote on each the prefix
// of a 4 MiB request and a byte of it made the node hold up to 4 MiB a
// stream (16 streams: 31 MiB of heap here), memory no resource manager
// counts. The requests an acaptcha
// node answers are a few hundred bytes: the node now resets a DHT stream
// whose request announces more than maxDHTRequest before reading it.
func TestDHTLargeRequestNotBuffered(t *testing.T) {
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	n, err := New(Config{
		Key: key, StorePath: filepath.Join(t.TempDir(), "s.db"),
		ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Four peers of four streams each (the DHT streams one peer may have
	// served at once, maxDHTStreamsPerPeer).
	const peers, perPeer = 4, 4
	const streams = peers * perPeer
	const announced = network.MessageSizeMax - 1
	before := heapInUse()
	var ss []network.Stream
	refused := 0
	for range peers {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		if err := h.Connect(ctx, peer.AddrInfo{ID: n.ID(), Addrs: n.host.Addrs()}); err != nil {
			t.Fatal(err)
		}
		for range perPeer {
			s, err := h.NewStream(ctx, n.ID(), DHTProtocolPrefix+"/kad/1.0.0")
			if err != nil {
				refused++
				continue
			}
			defer s.Reset()
			msg := binary.AppendUvarint(nil, announced)
			if _, err := s.Write(append(msg, 0x08)); err != nil {
				refused++ // reset already
				continue
			}
			ss = append(ss, s)
		}
	}
	// The node resets each stream once it read the announced length
	// (over the bound), or takes a buffer of it and waits: a stream not
	// reset within a few seconds is one it holds.
	reset := refused
	deadline := time.Now().Add(5 * time.Second)
	for _, s := range ss {
		_ = s.SetReadDeadline(deadline)
		if _, err := s.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
			reset++
		}
	}
	grew := int64(heapInUse()) - int64(before)
	t.Logf("%d DHT streams announcing %d-byte requests: %d reset by the node, its heap grew %d KiB", streams, announced, reset, grew>>10)
	if limit := int64(8 << 20); grew > limit {
		t.Fatalf("%d DHT streams of %d peers made the node hold %d MiB, want under %d MiB", streams, peers, grew>>20, limit>>20)
	}
	if reset != streams {
		t.Fatalf("%d of %d streams announcing a %d-byte request reset, want all", reset, streams, announced)
	}
}

// readerStream is a network.Stream reading from r, a few bytes a call.
type readerStream struct {
	network.Stream
	r     io.Reader
	chunk int
	reset bool
}

func (s *readerStream) Read(p []byte) (int, error) {
	return s.r.Read(p[:min(len(p), s.chunk)])
}

func (s *readerStream) Reset() error { s.reset = true; return nil }

// dhtRequestStream passes requests up to maxDHTRequest, in any split of
// reads, and refuses the first prefix over it before its body is read.
func TestDHTRequestStreamFraming(t *testing.T) {
	var data []byte
	for _, size := range []int{0, 1, 300, maxDHTRequest} {
		data = binary.AppendUvarint(data, uint64(size))
		data = append(data, make([]byte, size)...)
	}
	okLen := len(data)
	data = binary.AppendUvarint(data, maxDHTRequest+1)
	data = append(data, make([]byte, 64)...)
	for _, chunk := range []int{1, 2, 3, 7, 4096, 1 << 20} {
		fs := &readerStream{r: bytes.NewReader(data), chunk: chunk}
		s := &dhtRequestStream{Stream: fs}
		got := 0
		var err error
		for i := 0; i < len(data)+1 && err == nil; i++ {
			var n int
			n, err = s.Read(make([]byte, 1<<16))
			got += n
		}
		if !errors.Is(err, errDHTRequestSize) || !fs.reset {
			t.Fatalf("chunk %d: err %v (reset %v), want the request over the bound refused", chunk, err, fs.reset)
		}
		// Everything before the last prefix passed; of the last prefix,
		// nothing from the read that completed it.
		if got < okLen-chunk || got > okLen+binary.PutUvarint(make([]byte, 10), maxDHTRequest+1) {
			t.Fatalf("chunk %d: %d bytes passed, want the %d of the requests within the bound", chunk, got, okLen)
		}
	}
	// A prefix of more than ten bytes is refused too.
	fs := &readerStream{r: bytes.NewReader(append(bytes.Repeat([]byte{0x80}, 11), 0)), chunk: 1}
	s := &dhtRequestStream{Stream: fs}
	var err error
	for i := 0; i < 12 && err == nil; i++ {
		_, err = s.Read(make([]byte, 8))
	}
	if !errors.Is(err, errDHTRequestSize) {
		t.Fatalf("an overlong prefix: %v", err)
	}
}
