package peer

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
)

// envelopeVariant is env with an unknown protobuf field appended: the
// same signed record (go-libp2p's envelope decoder skips the field, and
// the signature covers only the payload), in other bytes.
func envelopeVariant(env []byte, i uint64) []byte {
	out := append([]byte(nil), env...)
	out = protowire.AppendTag(out, 15, protowire.VarintType)
	return protowire.AppendVarint(out, i)
}

// The gossip message ID names the signed record, not its bytes (spec/
// trust.md §3.1). Named by a hash of the bytes, every variant of one
// record (an unknown field appended to its envelope) was a new message:
// pubsub's seen cache let each through to the validator, which checked
// the record's signature (2.4 ms for an RSA-8192 issuer key here) and
// ignored it as a duplicate, which costs the forwarder no score. The
// attacker signed each message with its ed25519 key (50 µs): about 50
// times less than it cost the node, from one record sealed once, and the
// validation queue it filled dropped honest records.
func TestGossipEnvelopeVariantsAreOneMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("loopback gossip")
	}
	ik, _, err := crypto.GenerateKeyPairWithReader(crypto.RSA, 2048, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ak, attackerID := testutil.NewKey(t)
	env := SealTest(ik, attackerID, true, time.Now().Add(-time.Minute), time.Hour)
	v := envelopeVariant(env, 1)
	if _, _, err := protocol.VerifyAttestation(v, protocol.VerifyOptions{}); err != nil {
		t.Fatalf("a variant does not verify, so it is no attack: %v", err)
	}
	if gossipMsgID(pubsubMsg(v).Message) != gossipMsgID(pubsubMsg(env).Message) {
		t.Error("a variant of a record's envelope has a message ID of its own")
	}

	victim := newBareNode(t, Config{Gossip: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ah, err := libp2p.New(libp2p.Identity(ak), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	// The attacker's own pubsub names messages by author and sequence
	// number (the default), so it sends every variant.
	aps, err := pubsub.NewGossipSub(ctx, ah, pubsub.WithMessageSignaturePolicy(pubsub.StrictSign), pubsub.WithFloodPublish(true))
	if err != nil {
		t.Fatal(err)
	}
	topic, err := aps.Join(AttestationTopic)
	if err != nil {
		t.Fatal(err)
	}
	if err := ah.Connect(ctx, peer.AddrInfo{ID: victim.ID(), Addrs: victim.Addrs()}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(topic.ListPeers()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the victim never joined the topic")
		}
	}
	const N = 300
	start := time.Now()
	for i := range N {
		if err := topic.Publish(ctx, envelopeVariant(env, uint64(i))); err != nil {
			t.Fatal(err)
		}
		if i%8 == 7 {
			// Paced to the attacker's outbound queue (32 messages a
			// peer), which drops what it cannot hold.
			time.Sleep(2 * time.Millisecond)
		}
	}
	// A record of another issuer, published last (again every 200 ms,
	// a new issuer each time, until one arrives), tells when the victim
	// has taken the variants off the wire.
	for deadline := time.Now().Add(30 * time.Second); ; {
		sk, _ := testutil.NewKey(t)
		sentinel := SealTest(sk, attackerID, true, time.Now().Add(-time.Minute), time.Hour)
		if err := topic.Publish(ctx, sentinel); err != nil {
			t.Fatal(err)
		}
		sa, _, err := protocol.VerifyAttestation(sentinel, protocol.VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		arrived := false
		for wait := time.Now().Add(200 * time.Millisecond); time.Now().Before(wait) && !arrived; time.Sleep(5 * time.Millisecond) {
			arrived = victim.learnedOf(sa.Subject, sa.Issuer)
		}
		if arrived {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no sentinel record arrived")
		}
	}
	time.Sleep(200 * time.Millisecond) // validations still running
	st := victim.Stats()
	validated := st.GossipIgnored + st.GossipRejected + st.GossipDelivered
	t.Logf("attacker: %d variants of one record (one ed25519 signature each) in %v; victim: %d validations (each a signature check of the record), %d ignored",
		N, time.Since(start).Round(time.Millisecond), validated, st.GossipIgnored)
	if st.GossipIgnored > 2 {
		t.Fatalf("the victim validated %d variants of one record, want them dropped as one message", st.GossipIgnored)
	}
}

func pubsubMsg(data []byte) *pubsub.Message { return gossipMsg(data, "") }

// learnedOf reports whether n holds a learned record of issuer about
// subject.
func (n *Node) learnedOf(subject, issuer peer.ID) bool {
	n.trust.mu.RLock()
	defer n.trust.mu.RUnlock()
	return n.trust.learned[subject][issuer] != nil
}
