package peer

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// TestLearnedNetworkShareSurvivesRestart_audit83: one network's share of
// the learned records of issuers the node does not admit directly
// (MaxLearnedPerNetwork, 4,096) was counted in memory only: the store
// keeps no network, and the records loaded at start counted for none. A
// network that filled its share got another after every restart of the
// node, up to the whole table (MaxLearned, 65,536: 16 restarts within
// the records' 30 days), which the share was added to prevent (audit-81).
// The test fills one network's share, restarts the node on its store, and
// learns from the same network again.
func TestLearnedNetworkShareSurvivesRestart_audit83(t *testing.T) {
	// Parallel: its own node, key and store file; it writes no package
	// state. Most of its time is 4,096 bbolt commits (two fsyncs each),
	// which other tests' CPU work can overlap.
	t.Parallel()
	key, _ := testutil.NewKey(t)
	path := filepath.Join(t.TempDir(), "store.db")
	start := func() *Node {
		n, err := New(Config{Key: key, StorePath: path, ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, LimitLoopback: true})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	now := time.Now()
	// Fresh issuers; subjects from a pool of 32 (each then has about 128
	// records, under the per-subject cap of 256): a key less per record.
	subjects := make([]peer.ID, 32)
	for i := range subjects {
		_, subjects[i] = testutil.NewKey(t)
	}
	records := 0
	learnFrom := func(n *Node) func() bool {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.Host().Connect(ctx, peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()}); err != nil {
			t.Fatal(err)
		}
		return func() bool {
			ik, issuer := testutil.NewKey(t)
			subject := subjects[records%len(subjects)]
			records++
			env := SealTest(ik, subject, true, now, 24*time.Hour)
			res, why, a := n.checkGossip(env, issuer)
			if res != pubsub.ValidationAccept {
				t.Fatalf("gossip check: %v %s", res, why)
			}
			return n.learn(a, env, ViaGossip, h.ID(), issuer) == learnedNew
		}
	}
	n := start()
	learn := learnFrom(n)
	learned := 0
	// Bounded by its count, not by a minute of wall clock, which cut it
	// at 1,910 of 4,096 under -race with GOMAXPROCS=1 at load 17.
	for range MaxLearnedPerNetwork {
		if learn() {
			learned++
		}
	}
	if learned != MaxLearnedPerNetwork {
		t.Fatalf("first run: %d learned, want %d", learned, MaxLearnedPerNetwork)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = start()
	defer n.Close()
	learn = learnFrom(n)
	again := 0
	for range 64 {
		if learn() {
			again++
		}
	}
	n.trust.mu.RLock()
	held := n.trust.nLearned
	n.trust.mu.RUnlock()
	t.Logf("after a restart: %d learned records held, %d more of 64 learned from the same /24", held, again)
	if again > 0 {
		t.Fatalf("after a restart the network that held its share (%d) had %d more records of fresh issuers learned", MaxLearnedPerNetwork, again)
	}
}
