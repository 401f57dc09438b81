package peer

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"

	ds "github.com/ipfs/go-datastore"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-base32"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// The DHT's provider records are capped per provider peer, per network
// (/24, /48), per IPv6 /32 block and in total; a record deleted frees its
// room in each.
func TestDHTStoreCaps(t *testing.T) {
	groups := map[peer.ID]netip.Prefix{}
	d := newDHTStore("self", func(p peer.ID) (netip.Prefix, bool) {
		g, ok := groups[p]
		return g, ok
	})
	d.perPeer, d.perGroup, d.perBlock, d.total = 2, 4, 6, 10
	newPeer := func(group string) peer.ID {
		_, id := testutil.NewKey(t)
		if group != "" {
			groups[id] = netip.MustParsePrefix(group)
		}
		return id
	}
	n := 0
	put := func(p peer.ID) error {
		n++
		k := ds.NewKey(dhtProvidersPrefix + base32.RawStdEncoding.EncodeToString([]byte(fmt.Sprint("key", n))) + "/" + base32.RawStdEncoding.EncodeToString([]byte(p)))
		return d.Put(context.Background(), k, []byte("x"))
	}
	ctx := context.Background()
	// A peer: 2 records.
	a := newPeer("198.51.100.0/24")
	for i := range 3 {
		if err := put(a); (err != nil) != (i == 2) {
			t.Fatalf("record %d of one peer: %v", i, err)
		}
	}
	// A /24: 4 records, fresh peer IDs or not.
	for i := range 3 {
		if err := put(newPeer("198.51.100.0/24")); (err != nil) != (i == 2) {
			t.Fatalf("record %d of the /24 (%d stored): %v", i+2, len(d.rec), err)
		}
	}
	// An IPv6 /32: 6 records over its /48s, each /48 below its own cap.
	stored := 0
	for i := range 8 {
		err := put(newPeer(fmt.Sprintf("2001:db8:%x::/48", i)))
		switch {
		case err == nil:
			stored++
		case !errors.Is(err, errDHTFull):
			t.Fatal(err)
		}
	}
	if stored != 6 {
		t.Fatalf("the /48s of one /32 stored %d records, want the block's 6", stored)
	}
	// In total: 10 (4 + 6 stored so far).
	if err := put(newPeer("203.0.113.0/24")); !errors.Is(err, errDHTFull) {
		t.Fatalf("a record past the total: %v", err)
	}
	// Deleting a /32 record frees the block's room and the total's.
	var k ds.Key
	for key, r := range d.rec {
		if r.hasBlock {
			k = key
			break
		}
	}
	if err := d.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := put(newPeer("2001:db8:ff::/48")); err != nil {
		t.Fatalf("a /32 record after one was deleted: %v", err)
	}
	if len(d.byBlock) != 1 || len(d.rec) != 10 {
		t.Fatalf("tables: %d blocks, %d records", len(d.byBlock), len(d.rec))
	}
}
