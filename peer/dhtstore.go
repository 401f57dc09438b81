package peer

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/simplelru"
	ds "github.com/ipfs/go-datastore"
	dsq "github.com/ipfs/go-datastore/query"
	dssync "github.com/ipfs/go-datastore/sync"
	"github.com/libp2p/go-libp2p-kad-dht/amino"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/multiformats/go-base32"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/acaptcha/acaptcha/protocol"
)

// Bounds of the records the node's DHT stores for other peers (--dht;
// the DHT serves in server mode). A provider record is one ADD_PROVIDER
// message of about 100 bytes, for a key of the sender's choosing, kept in
// memory for 48 hours; the DHT kept every one it was sent. acaptcha nodes
// provide one key each (the rendezvous namespace) and store providers for
// the keys they are close to, so these leave room for tens of thousands
// of nodes while a peer, a network and all of them together are bounded.
// Value records (PUT_VALUE) are not stored at all: acaptcha reads none.
const (
	// maxDHTProvidersPerPeer caps the provider records of one provider
	// peer (the sender: the DHT takes no record it does not sign for).
	maxDHTProvidersPerPeer = 16
	// maxDHTProvidersPerGroup caps those of the peers of one IP prefix
	// (or relay network; DrawPrefix, RelayGroup) together: peer IDs cost
	// nothing. An acaptcha node provides one key (the rendezvous
	// namespace), so this is 256 nodes of one /24 or /48; 32 networks
	// filled the whole store at 1,024 each, 128 are needed now.
	maxDHTProvidersPerGroup = 256
	// maxDHTProvidersPerBlock caps those of the /48s of one IPv6 /32
	// block (protocol.BlockOf) together, BlockFactor groups' worth: a
	// holder of a /32 has 65,536 /48s.
	maxDHTProvidersPerBlock = protocol.BlockFactor * maxDHTProvidersPerGroup
	// maxDHTProviders caps the provider records stored in all (about 300
	// bytes each with the DHT's own keys: some 10 MB).
	maxDHTProviders = 1 << 15
	// dhtProviderCacheKeys is the size of the provider manager's cache
	// of keys' provider sets (the DHT's own default).
	dhtProviderCacheKeys = 256
)

// Bounds of the addresses provider records put in the peerstore. The
// DHT writes a provider's addresses to the peerstore, for
// dhtProviderAddrTTL, before its record reaches the store: a record the
// store refused still left up to 64 addresses (the peerstore's cap per
// peer) for a day, so fresh peer IDs from one network, their records all
// refused, could fill the peerstore's table of addresses of peers not
// connected (a million, shared with every other use) and crowd honest
// peers' addresses out of it (audit-89). The DHT sees the peerstore
// through dhtPeerstore, which keeps a provider's new addresses only when
// its record can be stored, and at most maxDHTProviderAddrs of them.
const (
	dhtProviderAddrTTL  = amino.DefaultProviderAddrTTL
	maxDHTProviderAddrs = 8
)

// errDHTFull refuses a provider record over a bound (the DHT logs it at
// its own debug level and the sender gets an error for its message).
var errDHTFull = errors.New("acaptcha: DHT provider records of this peer, its network, its IPv6 /32 or in total at their cap")

// dhtProvidersPrefix is the datastore namespace of the DHT's provider
// records: /providers/<base32 key>/<base32 provider peer ID>.
const dhtProvidersPrefix = "/providers/"

// dhtStore is the DHT's datastore: in memory, as the DHT's default, with
// its provider records counted per provider peer, per network and in
// total, and refused beyond the caps. The node's own records are not
// counted. A record refreshed (the same key and provider) takes no new
// room.
type dhtStore struct {
	ds.Batching
	self    peer.ID
	groupOf func(peer.ID) (netip.Prefix, bool)

	perPeer, perGroup, perBlock, total int

	// cache is the provider manager's cache of the provider sets of the
	// keys last asked for (records.Cache). The manager adds a provider
	// to a cached set before it writes the record here, and kept it
	// there when Put refused the record: Put drops the key's set then
	// (it is read again from the datastore). Put runs under the
	// manager's lock, which guards the cache.
	cache lru.LRUCache

	mu      sync.Mutex
	rec     map[ds.Key]dhtRec
	byPeer  map[peer.ID]int
	byGroup map[netip.Prefix]int
	byBlock map[netip.Prefix]int
}

type dhtRec struct {
	p                  peer.ID
	group, block       netip.Prefix
	hasGroup, hasBlock bool
}

func newDHTStore(self peer.ID, groupOf func(peer.ID) (netip.Prefix, bool)) *dhtStore {
	cache, _ := lru.NewLRU(dhtProviderCacheKeys, nil) // err only for a size below 1
	return &dhtStore{cache: cache,
		Batching: dssync.MutexWrap(ds.NewMapDatastore()), self: self, groupOf: groupOf,
		perPeer: maxDHTProvidersPerPeer, perGroup: maxDHTProvidersPerGroup, perBlock: maxDHTProvidersPerBlock, total: maxDHTProviders,
		rec: map[ds.Key]dhtRec{}, byPeer: map[peer.ID]int{}, byGroup: map[netip.Prefix]int{}, byBlock: map[netip.Prefix]int{},
	}
}

// providerOf is the provider peer a provider record's key names.
func providerOf(k ds.Key) (peer.ID, bool) {
	s := k.String()
	if !strings.HasPrefix(s, dhtProvidersPrefix) {
		return "", false
	}
	i := strings.LastIndexByte(s, '/')
	b, err := base32.RawStdEncoding.DecodeString(s[i+1:])
	if err != nil {
		return "", false
	}
	id, err := peer.IDFromBytes(b)
	return id, err == nil
}

// providedKey is the key a provider record's datastore key is for, as
// the provider manager's cache names it (the key's bytes).
func providedKey(k ds.Key) (string, bool) {
	s, ok := strings.CutPrefix(k.String(), dhtProvidersPrefix)
	if !ok {
		return "", false
	}
	enc, _, ok := strings.Cut(s, "/")
	if !ok {
		return "", false
	}
	b, err := base32.RawStdEncoding.DecodeString(enc)
	return string(b), err == nil
}

func (d *dhtStore) Put(ctx context.Context, k ds.Key, v []byte) error {
	p, isProv := providerOf(k)
	if !isProv || p == d.self {
		return d.Batching.Put(ctx, k, v)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.rec[k]; ok {
		return d.Batching.Put(ctx, k, v)
	}
	r := dhtRec{p: p}
	r.group, r.hasGroup = d.groupOf(p)
	if r.hasGroup {
		r.block, r.hasBlock = protocol.BlockOf(r.group)
	}
	if d.byPeer[p] >= d.perPeer || len(d.rec) >= d.total || (r.hasGroup && d.byGroup[r.group] >= d.perGroup) ||
		(r.hasBlock && d.byBlock[r.block] >= d.perBlock) {
		if pk, ok := providedKey(k); ok {
			d.cache.Remove(pk)
		}
		return errDHTFull
	}
	if err := d.Batching.Put(ctx, k, v); err != nil {
		return err
	}
	d.rec[k] = r
	d.byPeer[p]++
	if r.hasGroup {
		d.byGroup[r.group]++
	}
	if r.hasBlock {
		d.byBlock[r.block]++
	}
	return nil
}

// mayHold reports whether a provider record of p could be stored now: p
// holds one already, or it and its network, its IPv6 /32 and the store
// have room.
func (d *dhtStore) mayHold(p peer.ID) bool {
	if p == d.self {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byPeer[p] > 0 {
		return true
	}
	if len(d.rec) >= d.total {
		return false
	}
	if g, ok := d.groupOf(p); ok {
		if d.byGroup[g] >= d.perGroup {
			return false
		}
		if b, ok := protocol.BlockOf(g); ok && d.byBlock[b] >= d.perBlock {
			return false
		}
	}
	return true
}

// dhtHost is the host the DHT runs on: the node's, with the peerstore
// seen through dhtPeerstore.
type dhtHost struct {
	host.Host
	ps dhtPeerstore
	// streams counts the inbound DHT streams served (dhtStreamHandler);
	// limitLoopback is Config.LimitLoopback.
	streams       *streamCounts
	limitLoopback bool
	// replies counts the large replies read on the DHT's outbound
	// streams (dhtreply.go).
	replies *streamCounts
}

func (h dhtHost) Peerstore() peerstore.Peerstore { return h.ps }

// dhtPeerstore bounds the addresses the DHT's provider records put in the
// peerstore (those added for dhtProviderAddrTTL, which the node sets as
// the provider manager's): the addresses a provider has already pass
// (their TTL is renewed), and new ones only while its record can be
// stored and it has fewer than maxDHTProviderAddrs.
type dhtPeerstore struct {
	peerstore.Peerstore
	store *dhtStore
}

func (ps dhtPeerstore) AddAddrs(p peer.ID, addrs []ma.Multiaddr, ttl time.Duration) {
	if ttl == dhtProviderAddrTTL && p != ps.store.self {
		addrs = ps.providerAddrs(p, addrs)
	}
	if len(addrs) > 0 {
		ps.Peerstore.AddAddrs(p, addrs, ttl)
	}
}

func (ps dhtPeerstore) AddAddr(p peer.ID, addr ma.Multiaddr, ttl time.Duration) {
	ps.AddAddrs(p, []ma.Multiaddr{addr}, ttl)
}

// providerAddrs returns the addresses of addrs the peerstore keeps for
// provider p.
func (ps dhtPeerstore) providerAddrs(p peer.ID, addrs []ma.Multiaddr) []ma.Multiaddr {
	have := ps.Peerstore.Addrs(p)
	room := maxDHTProviderAddrs - len(have)
	if !ps.store.mayHold(p) {
		room = 0
	}
	var out []ma.Multiaddr
	for _, a := range addrs {
		switch {
		case slices.ContainsFunc(have, a.Equal):
			out = append(out, a)
		case room > 0 && !slices.ContainsFunc(out, a.Equal):
			out = append(out, a)
			room--
		}
	}
	return out
}

func (d *dhtStore) Delete(ctx context.Context, k ds.Key) error {
	err := d.Batching.Delete(ctx, k)
	d.mu.Lock()
	defer d.mu.Unlock()
	if r, ok := d.rec[k]; ok {
		delete(d.rec, k)
		uncountDHT(d.byPeer, r.p)
		if r.hasGroup {
			uncountDHT(d.byGroup, r.group)
		}
		if r.hasBlock {
			uncountDHT(d.byBlock, r.block)
		}
	}
	return err
}

// Batch goes through Put and Delete (the map datastore applies a batch
// at once anyway).
func (d *dhtStore) Batch(context.Context) (ds.Batch, error) { return ds.NewBasicBatch(d), nil }

// values counts the records stored that are not provider records (tests).
func (d *dhtStore) values() int {
	res, err := d.Batching.Query(context.Background(), dsq.Query{KeysOnly: true})
	if err != nil {
		return 0
	}
	defer res.Close()
	n := 0
	for e := range res.Next() {
		if e.Error == nil && !strings.HasPrefix(e.Key, dhtProvidersPrefix) {
			n++
		}
	}
	return n
}

func uncountDHT[K comparable](m map[K]int, k K) {
	if m[k]--; m[k] <= 0 {
		delete(m, k)
	}
}
