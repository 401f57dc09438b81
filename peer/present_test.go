package peer_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
)

// rawHost is a plain libp2p host on loopback, for speaking the protocols
// by hand.
func rawHost(t *testing.T) (host.Host, crypto.PrivKey) {
	t.Helper()
	k, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	h, err := libp2p.New(libp2p.Identity(k), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h, k
}

func frames(envs ...[]byte) []byte {
	var b []byte
	for _, e := range envs {
		b = binary.AppendUvarint(b, uint64(len(e)))
		b = append(b, e...)
	}
	return b
}

// rawPresent sends data on a presentation stream and returns the number
// the receiver acknowledged, or the stream error.
func rawPresent(t *testing.T, h host.Host, to *peer.Node, data []byte) (uint64, error) {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	if err := h.Connect(ctx, addrInfo(to)); err != nil {
		t.Fatal(err)
	}
	s, err := h.NewStream(ctx, to.ID(), peer.PresentProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.Write(data); err != nil {
		return 0, err
	}
	_ = s.CloseWrite()
	ack, err := io.ReadAll(s)
	if err != nil {
		return 0, err
	}
	v, k := binary.Uvarint(ack)
	if k <= 0 {
		return 0, errors.New("no acknowledgement")
	}
	return v, nil
}

func resetCode(err error) network.StreamErrorCode {
	var se *network.StreamError
	if errors.As(err, &se) {
		return se.ErrorCode
	}
	return 0
}

func TestPresentationValidation(t *testing.T) {
	n := startTrustNode(t, dependentSets(t), trustOpts{})
	h, hk := rawHost(t)
	otherKey, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	issuerKey, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	otherID, _ := lpeer.IDFromPrivateKey(otherKey)
	now := time.Now()
	good := peer.SealTest(issuerKey, h.ID(), true, now, time.Hour)
	_ = hk

	// Records about the presenter: accepted ones learned, expired and
	// rejected ones skipped.
	got, err := rawPresent(t, h, n.Node, frames(good,
		peer.SealTest(issuerKey, h.ID(), true, now.Add(-48*time.Hour), time.Hour),
		peer.SealTest(otherKey, h.ID(), false, now, time.Hour)))
	if err != nil || got != 1 {
		t.Fatalf("valid presentation: learned %d, %v", got, err)
	}
	// The same again: nothing new.
	if got, err := rawPresent(t, h, n.Node, frames(good)); err != nil || got != 0 {
		t.Fatalf("repeated presentation: %d %v", got, err)
	}
	forged := bytes.Clone(good)
	forged[len(forged)-1] ^= 1
	for i, c := range []struct {
		name string
		data []byte
		code network.StreamErrorCode
	}{
		{"about another peer", frames(peer.SealTest(issuerKey, otherID, true, now, time.Hour)), protocol.ErrCodeProtocolViolation},
		{"forged", frames(forged), protocol.ErrCodeProtocolViolation},
		{"garbage", frames([]byte("garbage")), protocol.ErrCodeProtocolViolation},
		{"oversized frame", binary.AppendUvarint(nil, protocol.MaxEnvelopeBytes+1), protocol.ErrCodeOversized},
		{"too many records", frames(repeat(good, peer.MaxPresented+1)...), protocol.ErrCodeProtocolViolation},
		// A prefix that is not minimal (5 as 0x85 0x00), and a frame cut
		// short by the presenter's close, are violations too (trust.md
		// §3.5), not a plain reset.
		// (From presenters of their own: one presenter gets 8
		// presentations, then one a minute.)
		{"non-minimal varint", []byte{0x85, 0x00, 1, 2, 3, 4, 5}, protocol.ErrCodeProtocolViolation},
		{"truncated frame", append(binary.AppendUvarint(nil, 100), good[:50]...), protocol.ErrCodeProtocolViolation},
	} {
		t.Run(c.name, func(t *testing.T) {
			from := h
			if i >= 5 {
				from, _ = rawHost(t)
			}
			_, err := rawPresent(t, from, n.Node, c.data)
			if err == nil || resetCode(err) != c.code {
				t.Fatalf("got %v (code %#x), want code %#x", err, resetCode(err), c.code)
			}
		})
	}
	if st := n.Stats(); st.LearnedPresentation != 1 || st.PresentationsReceived != 2 {
		t.Fatalf("stats: %+v", st)
	}
}

func repeat(b []byte, k int) [][]byte {
	out := make([][]byte, k)
	for i := range out {
		out[i] = b
	}
	return out
}

// TestGossipRejectsForgedRecordFromNetwork: a peer running a GossipSub
// router without our validator publishes a forged and a third-party
// record; the node rejects both and learns nothing.
func TestGossipRejectsForgedRecordFromNetwork(t *testing.T) {
	n := startTrustNode(t, dependentSets(t), trustOpts{gossip: true})
	h, hk := rawHost(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ps, err := pubsub.NewGossipSub(ctx, h, pubsub.WithFloodPublish(true))
	if err != nil {
		t.Fatal(err)
	}
	topic, err := ps.Join(peer.AttestationTopic)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := topic.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Cancel(); topic.Close() })
	if err := h.Connect(ctxT(t, 10*time.Second), addrInfo(n.Node)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the node to see the publisher's subscription", func() bool { return len(n.GossipPeers()) == 1 })
	eventually(t, 10*time.Second, "the publisher to see the node's subscription", func() bool { return len(topic.ListPeers()) == 1 })

	subjectKey, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	subject, _ := lpeer.IDFromPrivateKey(subjectKey)
	forged := peer.SealTest(hk, subject, true, time.Now(), time.Hour)
	forged[len(forged)-1] ^= 1
	otherKey, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	thirdParty := peer.SealTest(otherKey, subject, true, time.Now(), time.Hour)
	for _, env := range [][]byte{forged, thirdParty} {
		if err := topic.Publish(ctxT(t, 5*time.Second), env); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "two rejections", func() bool { return n.Stats().GossipRejected == 2 })
	if st := n.Stats(); st.GossipDelivered != 0 || st.Learned != 0 {
		t.Fatalf("stats: %+v", st)
	}
	// GossipSub penalised the forwarder: two invalid deliveries cost 400.
	eventually(t, 5*time.Second, "the forwarder's score to drop", func() bool {
		s, ok := n.GossipScore(h.ID())
		return ok && s <= -300
	})
}
