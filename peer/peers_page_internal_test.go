package peer

import (
	"log/slog"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/spec"
)

// TestPeersPageCostsItsPage: Peers built the view of every peer the node
// knows, and the issued records alone name one peer per session drawn
// (some 744,000 at the default draw budget and retention); MCP list_peers
// (reachable from beyond loopback over --http) built, encoded and sent
// all of it for each call. PeersPage builds a page: its cost is a pass
// over the index's keys and the page's views. The pages walk every peer
// once, in Peers' order.
func TestPeersPageCostsItsPage(t *testing.T) {
	self, _ := testutil.NewKey(t)
	sets, err := spec.Examples()
	if err != nil {
		t.Fatal(err)
	}
	src, err := skill.NewCorpus("test", sets, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{Key: self, StorePath: filepath.Join(t.TempDir(), "s.db"), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Source: src,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	const subjects = 20000
	now := time.Now()
	for i := range subjects {
		sub := testutil.NewPeerID(t)
		n.indexIssued(MakeTestAttestation(self, sub, i%2 == 0, now.Add(-time.Minute), time.Hour))
	}
	measure := func(f func()) (time.Duration, uint64) {
		var a, b runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&a)
		start := time.Now()
		f()
		took := time.Since(start)
		runtime.ReadMemStats(&b)
		return took, b.TotalAlloc - a.TotalAlloc
	}
	var all []PeerInfo
	allTook, allAlloc := measure(func() { all = n.Peers() })
	var page []PeerInfo
	var more bool
	pageTook, pageAlloc := measure(func() { page, more = n.PeersPage("", 100) })
	t.Logf("%d peers: Peers %v, %d KiB; PeersPage(100) %v, %d KiB", len(all), allTook, allAlloc>>10, pageTook, pageAlloc>>10)
	if len(all) != subjects || len(page) != 100 || !more {
		t.Fatalf("Peers %d, page %d (more %v)", len(all), len(page), more)
	}
	if pageAlloc > 1<<20 {
		t.Errorf("a page of 100 allocated %d KiB, want under 1 MiB", pageAlloc>>10)
	}
	// Paging walks every peer once, in order.
	var walked []PeerInfo
	var after peer.ID
	for range subjects/700 + 2 {
		p, more := n.PeersPage(after, 700)
		walked = append(walked, p...)
		if !more {
			break
		}
		after = p[len(p)-1].Peer
	}
	if len(walked) != len(all) {
		t.Fatalf("pages walked %d peers of %d", len(walked), len(all))
	}
	for i := range all {
		if walked[i].Peer != all[i].Peer || (walked[i].Direct == nil) != (all[i].Direct == nil) || walked[i].Admission.Admitted != all[i].Admission.Admitted {
			t.Fatalf("peer %d: page %+v, Peers %+v", i, walked[i], all[i])
		}
	}
	if p, more := n.PeersPage(all[len(all)-1].Peer, 10); len(p) != 0 || more {
		t.Errorf("after the last peer: %d, more %v", len(p), more)
	}
	if p, _ := n.PeersPage(all[9].Peer, 0); len(p) != len(all)-10 {
		t.Errorf("limit 0 after the tenth: %d, want %d", len(p), len(all)-10)
	}
}
