package peer

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pubsubpb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	cryptopb "github.com/libp2p/go-libp2p/core/crypto/pb"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-msgio"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// forgedRPC is a GossipSub RPC publishing n messages on the attestation
// topic by author (its public key attached, as for an RSA key), each with
// a signature of random bytes: nothing the sender computed, and a full
// signature check for the receiver.
func forgedRPC(t *testing.T, author crypto.PubKey, n int, seq *uint64) *pubsubpb.RPC {
	t.Helper()
	id, err := peer.IDFromPublicKey(author)
	if err != nil {
		t.Fatal(err)
	}
	key, err := crypto.MarshalPublicKey(author)
	if err != nil {
		t.Fatal(err)
	}
	topic := AttestationTopic
	rpc := &pubsubpb.RPC{}
	for range n {
		*seq++
		sig := make([]byte, 512) // the key's size: checked in full
		_, _ = rand.Read(sig)
		data := make([]byte, 64)
		_, _ = rand.Read(data)
		sn := binary.BigEndian.AppendUint64(nil, *seq)
		rpc.Publish = append(rpc.Publish, &pubsubpb.Message{From: []byte(id), Data: data, Seqno: sn, Topic: &topic, Signature: sig, Key: key})
	}
	return rpc
}

// GossipSub checks a message's signature before any validator, and a
// sender is graylisted only once its invalid messages have been checked
// (one that writes its RPCs faster than they are checked had about 200
// checked), and only if it is scored: a peer that does not list
// GossipSub in its identify is never added nor scored, yet its stream is
// read, and every message it sends is checked. Forged signatures under an attached RSA key cost the
// sender nothing (random bytes) and the node a full RSA check each (2.4
// ms at 8192 bits here, 0.4 ms at the 4096 bits of this test). The node
// now prices each published message by the signature checks it will
// make (the author's key and the record's, gossipCost) against a bucket
// of the forwarding peer and one of its network before the RPC is
// queued for validation.
func TestGossipForgedSignaturesPriced(t *testing.T) {
	if testing.Short() {
		t.Skip("loopback gossip with an RSA-4096 key")
	}
	ak, _, err := crypto.GenerateKeyPairWithReader(crypto.RSA, 4096, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	victim := newBareNode(t, Config{Gossip: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// One connection of a fresh peer ID: the forwarder.
	fh, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	// The forwarder does not even speak GossipSub in its identify: the
	// node never adds it as a GossipSub peer, so never scores it (a score
	// of 0 is never graylisted), and reads and checks all it sends.
	if err := fh.Connect(ctx, peer.AddrInfo{ID: victim.ID(), Addrs: victim.Addrs()}); err != nil {
		t.Fatal(err)
	}
	s, err := fh.NewStream(ctx, victim.ID(), pubsub.GossipSubID_v11)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	w := msgio.NewVarintWriter(s)
	var seq uint64
	const rpcs, perRPC = 16, 100
	t0, c0 := time.Now(), testutil.ProcessCPU()
	sent := 0
	for range rpcs {
		b, err := forgedRPC(t, ak.GetPublic(), perRPC, &seq).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteMsg(b); err != nil {
			break
		}
		sent += perRPC
	}
	// Let the node check what it queued (bounded: 2,000 RSA-4096 checks
	// take about a second of both cores).
	time.Sleep(3 * time.Second)
	spent := testutil.ProcessCPU() - c0
	t.Logf("forwarder: %d messages with forged RSA-4096 signatures (no signing) in %v; node and test process CPU: %v; dropped unchecked: %d",
		sent, time.Since(t0).Round(time.Millisecond), spent.Round(time.Millisecond), victim.Stats().GossipPriced)
	// Checked in full: 1,600 RSA checks and pubsub's work on each (0.8 s
	// of CPU here). A forwarder's budget (GossipCostBurst, 16 units an
	// RSA-4096 author) lets about 130 through, with what refilled
	// meanwhile (0.1 s); the rest of the CPU is the connection and the
	// RPCs, read and decoded.
	priced := victim.Stats().GossipPriced
	t.Logf("forged signatures let through to the check: %d of %d", uint64(sent)-priced, sent)
	if limit := 600 * time.Millisecond; spent > limit {
		t.Fatalf("one fresh peer ID made the node spend %v of CPU on forged signatures, want under %v", spent, limit)
	}
	if through := uint64(sent) - priced; through > GossipCostBurst/16+64 {
		t.Fatalf("%d forged messages went to the signature check, want the forwarder's budget", through)
	}
}

// The budgets price what a message's checks cost: an ed25519 record
// published by its ed25519 author is 2 units, so a forwarder passes
// GossipCostBurst/2 such records at once and GossipCostPerSec/2 a
// second after; an RSA-8192 author and record are 128; the forwarders of
// one network share 4 times a forwarder's; a bucket refills.
func TestGossipBudget(t *testing.T) {
	ek, eid := mustKey(t, crypto.Ed25519, 0)
	_, subject := mustKey(t, crypto.Ed25519, 0)
	env := SealTest(ek, subject, true, time.Now().Add(-time.Minute), time.Hour)
	if c := gossipCost(&pubsubpb.Message{From: []byte(eid), Data: env}); c != 2 {
		t.Fatalf("ed25519 author and record: cost %d, want 2", c)
	}
	rk, _, err := crypto.GenerateKeyPairWithReader(crypto.RSA, 2048, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rk.GetPublic().Raw()
	if err != nil {
		t.Fatal(err)
	}
	if c := keyCost(cryptopb.KeyType_RSA, len(raw)); c != 4 {
		t.Fatalf("RSA-2048 (%d bytes): cost %d, want 4", len(raw), c)
	}
	if c := keyCost(cryptopb.KeyType_RSA, 1062); c != 64 {
		t.Fatalf("RSA-8192: cost %d, want 64", c)
	}
	var b gossipBudget
	now := time.Unix(1e6, 0)
	pfx := netip.MustParsePrefix("192.0.2.0/24")
	for i := range GossipCostBurst / 2 {
		if !b.take("honest", pfx, 2, now) {
			t.Fatalf("record %d of a burst refused", i)
		}
	}
	if b.take("honest", pfx, 2, now) {
		t.Fatal("past the burst")
	}
	if !b.take("honest", pfx, 2, now.Add(time.Second/GossipCostPerSec*2)) {
		t.Fatal("the bucket did not refill")
	}
	// Fresh peer IDs of the network share its bucket.
	taken := GossipCostBurst/2 + 1
	for i := range 16 {
		for b.take(peer.ID(fmt.Sprint("fresh", i)), pfx, 2, now.Add(time.Second/GossipCostPerSec*2)) {
			taken++
		}
	}
	// (plus what the network bucket refilled in 2/GossipCostPerSec s)
	if want := GossipNetCostBurst/2 + 4; taken > want {
		t.Fatalf("fresh peer IDs of one network passed %d records, want at most %d", taken, want)
	}
	// A message no bucket can hold is refused, one that costs nothing
	// passes.
	if b.take("other", netip.Prefix{}, GossipCostBurst+1, now) || !b.take("other", netip.Prefix{}, 0, now) {
		t.Fatal("cost bounds")
	}
}

func mustKey(t *testing.T, typ, bits int) (crypto.PrivKey, peer.ID) {
	t.Helper()
	k, _, err := crypto.GenerateKeyPairWithReader(typ, bits, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return k, id
}

// The inspector keeps the messages the budgets afford and drops the rest
// unchecked; copies of a message that reached the validator (dropped as
// seen before any check) cost nothing.
func TestInspectGossipPrices(t *testing.T) {
	n := newBareNode(t, Config{})
	ik, _ := mustKey(t, crypto.Ed25519, 0)
	_, subject := mustKey(t, crypto.Ed25519, 0)
	msg := func(i int) *pubsubpb.Message {
		env := SealTest(ik, subject, true, time.Now().Add(-time.Minute), time.Hour+time.Duration(i)*time.Second)
		return &pubsubpb.Message{From: []byte(subject), Data: env}
	}
	rpc := &pubsub.RPC{}
	for i := range GossipCostBurst {
		rpc.Publish = append(rpc.Publish, msg(i))
	}
	if err := n.inspectGossip("fwd", rpc); err != nil {
		t.Fatal(err)
	}
	if got := len(rpc.Publish); got != GossipCostBurst/2 {
		t.Fatalf("kept %d of %d records, want the burst's %d", got, GossipCostBurst, GossipCostBurst/2)
	}
	if st := n.Stats(); st.GossipPriced != GossipCostBurst/2 {
		t.Fatalf("GossipPriced %d", st.GossipPriced)
	}
	// The forwarder's bucket is empty; copies of a validated message
	// still pass, and are not charged.
	seen := msg(0)
	n.gossip.budget.noteSeen(gossipMsgID(seen), time.Now())
	rpc = &pubsub.RPC{}
	for range 100 {
		rpc.Publish = append(rpc.Publish, seen)
	}
	before := n.gossip.budget.peers["fwd"].tokens
	if err := n.inspectGossip("fwd", rpc); err != nil {
		t.Fatal(err)
	}
	if got, after := len(rpc.Publish), n.gossip.budget.peers["fwd"].tokens; got != 100 || after != before {
		t.Fatalf("kept %d of 100 copies of a seen message, tokens %v -> %v", got, before, after)
	}
}

// The key prices of spec/vectors/gossip_msgid.json (key_units) are
// keyCost's.
func TestGossipKeyUnitsVector(t *testing.T) {
	data, err := os.ReadFile("../spec/vectors/gossip_msgid.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		KeyUnits []struct {
			KeyType int `json:"key_type"`
			DataLen int `json:"data_len"`
			Units   int `json:"units"`
		} `json:"key_units"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.KeyUnits) == 0 {
		t.Fatal("no key_units")
	}
	for _, k := range v.KeyUnits {
		if got := keyCost(cryptopb.KeyType(k.KeyType), k.DataLen); got != k.Units {
			t.Errorf("key type %d of %d bytes: %d units, vector %d", k.KeyType, k.DataLen, got, k.Units)
		}
	}
}

// A copy is free when its message last reached the validator less than
// 100 s before (spec/trust.md §3.4): a message validated again after
// pubsub's seen cache forgot it is remembered from then, not from its
// first validation.
func TestGossipSeenRenewed(t *testing.T) {
	var b gossipBudget
	t0 := time.Unix(1_800_000_000, 0)
	b.noteSeen("m", t0)
	if !b.seenRecently("m", t0.Add(99*time.Second)) || b.seenRecently("m", t0.Add(100*time.Second)) {
		t.Fatal("the copy window is not [0, 100 s)")
	}
	b.noteSeen("m", t0.Add(130*time.Second))
	if !b.seenRecently("m", t0.Add(140*time.Second)) {
		t.Fatal("a message validated again 10 s ago is priced as new: its first validation's time was kept")
	}
}

// The forwarders of one IPv6 /32 share a bucket of two networks' worth:
// the /48s of a /42 (64 of them, each with its network's bucket) passed
// 64 networks' bursts of signature checks at once.
func TestGossipBudgetBlock(t *testing.T) {
	var b gossipBudget
	now := time.Unix(1e6, 0)
	units := 0
	for i := range 64 {
		pfx := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(i)}), 48)
		for j := range 8 { // fresh peer IDs of each /48
			for k := 0; k < GossipCostBurst && b.take(peer.ID(fmt.Sprint("sybil", i, j)), pfx, 2, now); k++ {
				units += 2
			}
		}
	}
	t.Logf("a /42 of fresh peer IDs: %d units of signature checks at once (an ed25519 record is 2)", units)
	if units > GossipBlockCostBurst {
		t.Fatalf("one /32 passed %d units at once, want at most %d", units, GossipBlockCostBurst)
	}
	// Another /32 is not affected.
	other := netip.MustParsePrefix("2001:db9::/48")
	if !b.take("neighbour", other, 2, now) {
		t.Fatal("a forwarder of another /32 refused")
	}
}

// The signature-check pricing had no total bucket: each network (an IPv4
// /24, an IPv6 /48 or /32, a relay) had its own, so the forwarders of 256
// /24s passed 256 networks' bursts at once (2,097,152 units, about 100 s
// of one core at ed25519's 50 µs), and as much again every 16 s. All
// forwarders now share a total bucket, whose last quarter is kept for
// forwarders the node admits.
func TestGossipBudgetTotal(t *testing.T) {
	var b gossipBudget
	now := time.Unix(1e6, 0)
	units := 0
	for i := range 256 {
		pfx := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 24)
		for j := range 8 { // fresh peer IDs of each /24
			for k := 0; k < GossipCostBurst && b.take(peer.ID(fmt.Sprint("sybil", i, j)), pfx, 2, now); k++ {
				units += 2
			}
		}
	}
	t.Logf("256 /24s of fresh peer IDs: %d units of signature checks at once (an ed25519 record is 2)", units)
	if units > GossipTotalCostBurst-GossipTotalCostBurst/4 {
		t.Fatalf("all networks together passed %d units at once, want at most %d (the total bucket less its reserve)", units, GossipTotalCostBurst-GossipTotalCostBurst/4)
	}
	// A forwarder the node admits still has the reserve.
	if !b.takeAs("admitted", netip.MustParsePrefix("192.0.2.0/24"), 2, true, now) {
		t.Fatal("an admitted forwarder refused: the reserve is gone")
	}
	if b.take("unadmitted", netip.MustParsePrefix("198.51.100.0/24"), 2, now) {
		t.Fatal("an unadmitted forwarder of a fresh network took from the reserve")
	}
}
