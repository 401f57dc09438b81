package peer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	ds "github.com/ipfs/go-datastore"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-base32"
	ma "github.com/multiformats/go-multiaddr"
	"google.golang.org/protobuf/proto"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
)

// fuzzKey is an Ed25519 key from a fixed seed, so that corpus entries
// name the same peers across runs.
func fuzzKey(t testing.TB, seed byte) (crypto.PrivKey, peer.ID) {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(bytes.NewReader(bytes.Repeat([]byte{seed}, 64)))
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return k, id
}

// FuzzGossipMessage feeds a published GossipSub message (its data, its
// attached key and its from field, all the forwarder's to choose)
// through the pieces the node runs on it: the RPC inspector's size check
// and price, the message ID, and the topic validator. No panic; the
// price is at least 1; the ID is 32 bytes and depends on the record, not
// on the envelope's bytes; data over MaxEnvelopeBytes is rejected
// unread; a message the validator accepts carries a record that
// verifies and whose issuer or subject published it, and one that fails
// verification for anything but time or version is rejected.
func FuzzGossipMessage(f *testing.F) {
	n := newBareNode(f, Config{})
	ik, issuer := fuzzKey(f, 11)
	_, subject := fuzzKey(f, 12)
	pub, _ := ik.GetPublic().Raw()
	now := time.Now()
	valid := SealTest(ik, subject, true, now, time.Hour)
	f.Add(valid, []byte(nil), []byte(issuer), uint8(0))
	f.Add(valid, []byte(nil), []byte(subject), uint8(1))
	f.Add(SealTest(ik, subject, false, now, time.Hour), []byte(nil), []byte(issuer), uint8(0))
	f.Add(valid, append([]byte{0x08, 0x01, 0x12, 0x20}, pub...), []byte(issuer), uint8(2))
	for _, env := range testutil.VectorEnvelopes(f) {
		f.Add(env, []byte(nil), []byte(nil), uint8(1))
	}
	f.Add([]byte{}, []byte{0x08, 0x00, 0x12, 0x01, 0x00}, []byte("x"), uint8(3))
	f.Add(make([]byte, protocol.MaxEnvelopeBytes+1), []byte(nil), []byte(nil), uint8(3))
	_, fwd := fuzzKey(f, 13)
	f.Fuzz(func(t *testing.T, data, key, from []byte, who uint8) {
		m := &pb.Message{Data: data, Key: key, From: from}
		rpc := &pubsub.RPC{RPC: pb.RPC{Publish: []*pb.Message{m}}}
		if err := inspectGossipRPC(fwd, rpc); (err != nil) != (len(data) > protocol.MaxEnvelopeBytes) {
			t.Fatalf("inspector on %d bytes of data: %v", len(data), err)
		}
		if c := gossipCost(m); c < 1 {
			t.Fatalf("price %d", c)
		}
		id := gossipMsgID(m)
		if len(id) != 32 || id != gossipMsgID(&pb.Message{Data: bytes.Clone(data)}) || id != string(GossipMessageID(data)) {
			t.Fatalf("message ID %x is not 32 stable bytes", id)
		}
		if env, ok := decodeEnvelope(data); ok {
			// The same record in other bytes is the same message.
			again, err := proto.Marshal(env)
			if err != nil {
				t.Fatal(err)
			}
			if id2, ok := recordMsgID(again); !ok || id2 != id {
				t.Fatalf("the envelope re-encoded has another message ID")
			}
		}

		author := fwd
		switch who % 4 {
		case 0:
			author = issuer
		case 1:
			author = subject
		case 2:
			if id, err := peer.IDFromBytes(from); err == nil {
				author = id
			}
		}
		msg := &pubsub.Message{Message: &pb.Message{Data: data, From: []byte(author)}, ID: id}
		res := n.validateGossip(context.Background(), fwd, msg)
		a, _, verr := protocol.VerifyAttestation(data, protocol.VerifyOptions{Now: n.trustNow()})
		switch res {
		case pubsub.ValidationAccept:
			if verr != nil {
				t.Fatalf("accepted a record that does not verify: %v", verr)
			}
			if author != a.Issuer && author != a.Subject {
				t.Fatal("accepted a record published by neither its issuer nor its subject")
			}
			if msg.ValidatorData == nil {
				t.Fatal("accepted without the record")
			}
		case pubsub.ValidationIgnore:
			if verr != nil && !errors.Is(verr, protocol.ErrExpired) && !errors.Is(verr, protocol.ErrNotYetValid) && !errors.Is(verr, protocol.ErrUnsupportedVersion) {
				t.Fatalf("ignored (not rejected) a record that fails with %v", verr)
			}
		case pubsub.ValidationReject:
		default:
			t.Fatalf("validation result %v", res)
		}
		if len(data) > protocol.MaxEnvelopeBytes && res != pubsub.ValidationReject {
			t.Fatalf("data of %d bytes not rejected", len(data))
		}
	})
}

// fuzzStream is a network.Stream over one end of net.Pipe: what
// readPresentation uses of a stream (reads and read deadlines).
type fuzzStream struct {
	network.Stream
	c net.Conn
}

func (s fuzzStream) Read(b []byte) (int, error)         { return s.c.Read(b) }
func (s fuzzStream) Write(b []byte) (int, error)        { return s.c.Write(b) }
func (s fuzzStream) Close() error                       { return s.c.Close() }
func (s fuzzStream) Reset() error                       { return s.c.Close() }
func (s fuzzStream) SetDeadline(t time.Time) error      { return s.c.SetDeadline(t) }
func (s fuzzStream) SetReadDeadline(t time.Time) error  { return s.c.SetReadDeadline(t) }
func (s fuzzStream) SetWriteDeadline(t time.Time) error { return s.c.SetWriteDeadline(t) }

// framePresentation frames envs as a presenter writes them.
func framePresentation(envs ...[]byte) []byte {
	var out []byte
	for _, e := range envs {
		out = binary.AppendUvarint(out, uint64(len(e)))
		out = append(out, e...)
	}
	return out
}

// FuzzPresentStream drives the receiving side of a presentation over a
// live stream with what a presenter sends (raw bytes: varint-prefixed
// records or garbage), on trial or not. It must end by its deadline,
// learn at most one record per frame it read, and end any refusal with
// a stream error code of the spec (trust.md §3.5): no uncoded failure
// from a stream that only ends or stalls.
func FuzzPresentStream(f *testing.F) {
	n := newBareNode(f, Config{})
	ik, _ := fuzzKey(f, 21)
	_, presenter := fuzzKey(f, 22)
	now := time.Now()
	valid := SealTest(ik, presenter, true, now, time.Hour)
	f.Add(framePresentation(valid), false)
	f.Add(framePresentation(valid, SealTest(ik, presenter, false, now, time.Hour)), true)
	vecs := testutil.VectorEnvelopes(f)
	f.Add(framePresentation(vecs...), false)
	f.Add(framePresentation(vecs[0]), true)
	f.Add([]byte{}, false)
	f.Add([]byte{0x80}, false)
	f.Add([]byte{0x80, 0x00}, false)
	f.Add(binary.AppendUvarint(nil, protocol.MaxEnvelopeBytes+1), false)
	f.Add(binary.AppendUvarint(nil, 1<<63), false)
	f.Add(framePresentation(make([][]byte, MaxPresented+1)...), false)
	f.Add([]byte{0x05, 'a', 'b'}, false)
	f.Fuzz(func(t *testing.T, input []byte, trial bool) {
		local, remote := net.Pipe()
		var wg sync.WaitGroup
		wg.Go(func() {
			_, _ = remote.Write(input)
			_ = remote.Close()
		})
		deadline := time.Now().Add(2 * time.Second)
		_ = local.SetDeadline(deadline)
		learned, code, err := n.readPresentation(fuzzStream{c: local}, presenter, trial, deadline)
		_ = local.Close()
		wg.Wait()
		if time.Now().After(deadline.Add(time.Second)) {
			t.Fatal("the presentation outlived its deadline")
		}
		frames := countFrames(input)
		if learned < 0 || learned > frames || learned > MaxPresented {
			t.Fatalf("learned %d records of %d frames", learned, frames)
		}
		if err == nil {
			if code != 0 {
				t.Fatalf("success with code %#x", code)
			}
			return
		}
		switch code {
		case protocol.ErrCodeProtocolViolation, protocol.ErrCodeOversized, protocol.ErrCodeTimeout, protocol.ErrCodeBusy:
		default:
			t.Fatalf("refusal with code %#x: %v", code, err)
		}
		if errors.Is(err, protocol.ErrFrameTooLarge) != (code == protocol.ErrCodeOversized) {
			t.Fatalf("oversized frame and code disagree: %#x %v", code, err)
		}
	})
}

// countFrames counts the complete varint-prefixed frames input begins
// with.
func countFrames(input []byte) int {
	k := 0
	for len(input) > 0 {
		l, w := binary.Uvarint(input)
		if w <= 0 || l > uint64(len(input)-w) {
			break
		}
		input = input[w+int(l):]
		k++
	}
	return k
}

// FuzzDHTProviderRecords puts and deletes provider records under keys a
// remote peer chooses (the provided key's bytes and, for a record it
// sends, its peer ID; or any datastore key at all) in the DHT's store
// with small caps. After every operation the counts agree with the
// records held and no cap is passed; a refused record is errDHTFull
// and was not stored; any other key is stored as it is.
func FuzzDHTProviderRecords(f *testing.F) {
	_, a := fuzzKey(f, 31)
	_, b := fuzzKey(f, 32)
	prov := func(key string, p peer.ID) string {
		return dhtProvidersPrefix + base32.RawStdEncoding.EncodeToString([]byte(key)) + "/" + base32.RawStdEncoding.EncodeToString([]byte(p))
	}
	f.Add([]byte(prov("/acaptcha/ns", a) + "\n" + prov("/acaptcha/ns", b) + "\n" + prov("k2", a) + "\n-" + prov("k2", a)))
	f.Add([]byte(prov("x", "self") + "\n/pk/abc\n/providers/\n/providers/AAAA/\n/providers//AAAA"))
	f.Add([]byte("/providers/MFRGG/" + base32.RawStdEncoding.EncodeToString([]byte(a)) + "/extra"))
	f.Add([]byte("-/providers/x\n/providers/../" + base32.RawStdEncoding.EncodeToString([]byte(b))))
	f.Fuzz(func(t *testing.T, script []byte) {
		groupOf := func(p peer.ID) (netip.Prefix, bool) {
			if len(p) == 0 || p[len(p)-1]%3 == 0 {
				return netip.Prefix{}, false
			}
			if p[len(p)-1]%3 == 1 {
				return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, 100, 0}), 24), true
			}
			return netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(p[len(p)-1])}), 48), true
		}
		d := newDHTStore("self", groupOf)
		d.perPeer, d.perGroup, d.perBlock, d.total = 2, 3, 4, 5
		ctx := context.Background()
		for i, line := range bytes.Split(script, []byte("\n")) {
			if i >= 64 {
				break
			}
			del := bytes.HasPrefix(line, []byte("-"))
			if del {
				line = line[1:]
			}
			k := ds.NewKey(string(line))
			_, isProv := providerOf(k)
			if del {
				if err := d.Delete(ctx, k); err != nil && !errors.Is(err, ds.ErrNotFound) {
					t.Fatalf("delete %q: %v", k, err)
				}
			} else {
				err := d.Put(ctx, k, []byte("v"))
				has, herr := d.Has(ctx, k)
				switch {
				case herr != nil:
					t.Fatal(herr)
				case err == nil && !has:
					t.Fatalf("put %q succeeded, not stored", k)
				case err != nil && !errors.Is(err, errDHTFull):
					t.Fatalf("put %q: %v", k, err)
				case err != nil && !isProv:
					t.Fatalf("a key that is no provider record was refused: %q", k)
				}
			}
			if err := checkDHTCounts(d); err != nil {
				t.Fatalf("after line %d (%q): %v", i, line, err)
			}
		}
	})
}

// checkDHTCounts checks d's counts against its records and caps.
func checkDHTCounts(d *dhtStore) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	byPeer, byGroup, byBlock := map[peer.ID]int{}, map[netip.Prefix]int{}, map[netip.Prefix]int{}
	for _, r := range d.rec {
		byPeer[r.p]++
		if r.hasGroup {
			byGroup[r.group]++
		}
		if r.hasBlock {
			byBlock[r.block]++
		}
	}
	if len(d.rec) > d.total {
		return fmt.Errorf("%d records over the total cap %d", len(d.rec), d.total)
	}
	for _, c := range []struct {
		name     string
		want     any
		got      any
		cap, max int
	}{{"peer", byPeer, d.byPeer, d.perPeer, maxCount(byPeer)}, {"group", byGroup, d.byGroup, d.perGroup, maxCount(byGroup)}, {"block", byBlock, d.byBlock, d.perBlock, maxCount(byBlock)}} {
		if fmt.Sprint(c.want) != fmt.Sprint(c.got) {
			return fmt.Errorf("%s counts %v, records say %v", c.name, c.got, c.want)
		}
		if c.max > c.cap {
			return fmt.Errorf("%d records of one %s over its cap %d", c.max, c.name, c.cap)
		}
	}
	return nil
}

func maxCount[K comparable](m map[K]int) int {
	n := 0
	for _, v := range m {
		n = max(n, v)
	}
	return n
}

// FuzzDiscoveredAddrs feeds the addresses a remote peer announces (an
// mDNS answer's, a DHT provider record's, a bootstrap peer's) to the
// filters that decide which of them the node dials: the DHT's scope and
// the mDNS gate. Addresses are binary multiaddrs, one per line. The DHT
// filter keeps exactly the addresses in scope, in order, and a circuit
// is in scope only as its relay is; the mDNS gate dials at most
// mdnsMaxAddrs addresses of one answer, each a private, link-local (or,
// for a loopback node, loopback) IP, none twice within the backoff, and
// no more than its total burst.
func FuzzDiscoveredAddrs(f *testing.F) {
	enc := func(ss ...string) []byte {
		var out [][]byte
		for _, s := range ss {
			out = append(out, ma.StringCast(s).Bytes())
		}
		return bytes.Join(out, []byte("\n"))
	}
	f.Add(enc("/ip4/192.168.1.7/tcp/4001", "/ip4/8.8.8.8/udp/4001/quic-v1", "/ip6/fe80::1/tcp/1", "/ip4/127.0.0.1/tcp/4001"), uint8(0))
	f.Add(enc("/ip6zone/eth0/ip6/fe80::1/tcp/1", "/dns4/localhost/tcp/1", "/dns/x.localhost./tcp/1", "/ip4/0.0.0.0/tcp/1"), uint8(3))
	f.Add(enc("/ip4/1.2.3.4/tcp/1/p2p/12D3KooWA4Xop1JaT3MHxwYMkCepYsv4iPVopMXwCz5iHYdBfeSB/p2p-circuit", "/p2p-circuit", "/ip4/10.0.0.1/tcp/1/ip4/10.0.0.2/tcp/2"), uint8(1))
	f.Add(enc("/ip6/::ffff:10.0.0.1/tcp/1", "/ip4/10.0.0.1/tcp/1", "/ip4/10.0.0.1/tcp/1", "/ip4/10.0.0.1/tcp/2", "/ip4/10.0.0.1/tcp/3", "/ip4/10.0.0.1/tcp/4", "/ip4/10.0.0.1/tcp/5"), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, flags uint8) {
		var addrs []ma.Multiaddr
		for _, b := range bytes.Split(data, []byte("\n")) {
			if a, err := ma.NewMultiaddrBytes(b); err == nil {
				addrs = append(addrs, a)
			}
		}
		scope := dhtScope{loopback: flags&1 != 0, private: flags&2 != 0}
		kept := scope.filter(slices.Clone(addrs))
		var want []ma.Multiaddr
		for _, a := range addrs {
			if scope.allows(a) {
				want = append(want, a)
			}
		}
		if len(kept) != len(want) {
			t.Fatalf("filter kept %d of %d addresses in scope", len(kept), len(want))
		}
		for i := range kept {
			if !kept[i].Equal(want[i]) {
				t.Fatalf("filter kept %s, want %s", kept[i], want[i])
			}
		}
		for _, a := range addrs {
			if relay, rest := ma.SplitFunc(a, func(c ma.Component) bool { return c.Code() == ma.P_CIRCUIT }); len(rest) > 0 && len(relay) > 0 && scope.allows(a) != scope.allows(relay) {
				t.Fatalf("circuit %s in scope %v, its relay %v", a, scope.allows(a), scope.allows(relay))
			}
		}

		g := &mdnsGate{loopback: flags&4 != 0}
		now := time.Unix(1_800_000_000, 0)
		_, id := fuzzKey(t, flags)
		total := 0
		seen := map[string]bool{}
		for round := range 3 {
			got := g.admit(peer.AddrInfo{ID: id, Addrs: addrs}, now)
			if round > 0 && len(got) > 0 {
				t.Fatalf("the same peer dialled again within the backoff: %v", got)
			}
			if len(got) > mdnsMaxAddrs {
				t.Fatalf("%d addresses dialled for one answer", len(got))
			}
			for _, a := range got {
				ip, ok := mdnsScope(a, g.loopback)
				if !ok || !(ip.IsPrivate() || ip.IsLinkLocalUnicast() || g.loopback && ip.IsLoopback()) {
					t.Fatalf("dialled %s, outside the LAN scope", a)
				}
				if seen[string(a.Bytes())] {
					t.Fatalf("dialled %s twice within the backoff", a)
				}
				seen[string(a.Bytes())] = true
			}
			total += len(got)
			// Another peer ID announcing the same addresses.
			_, other := fuzzKey(t, flags+byte(round)+1)
			for _, a := range g.admit(peer.AddrInfo{ID: other, Addrs: addrs}, now) {
				if seen[string(a.Bytes())] {
					t.Fatalf("dialled %s again for another peer ID within the backoff", a)
				}
				seen[string(a.Bytes())] = true
				total++
			}
		}
		if total > mdnsDialBurst {
			t.Fatalf("%d dials at once, the burst is %d", total, mdnsDialBurst)
		}
	})
}
