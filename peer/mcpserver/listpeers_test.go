package mcpserver_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/internal/testutil/testnode"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/peer/mcpserver"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// TestListPeersPaged: list_peers answered with every peer the node knows,
// and the node names one per session it drew a set for (fresh peer IDs
// cost nothing: some 744,000 at the default draw budget and retention):
// each call (from beyond loopback too, over --http) built, encoded and
// sent them all. It answers a page (limit, default 100) with next_after.
func TestListPeersPaged(t *testing.T) {
	key, _ := testutil.NewKey(t)
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := peer.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	const subjects = 1500
	now := time.Now()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < subjects; i += 16 {
				_, sub := testutil.NewKey(t)
				a := acceptance(t, key, sub, now.Add(-time.Minute))
				env, err := protocol.Seal(a, key)
				if err == nil {
					err = st.Put(peer.Issued, env, a)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	_, sets, _ := splitSets(t)
	n := testnode.New(t, testnode.Options{Config: peer.Config{Key: key, StorePath: path, Logger: testLogger(t)}, Sets: sets})
	_, cs := serveNode(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := call[map[string]any](ctx, cs, "list_peers", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(first)
	peers, _ := first["peers"].([]any)
	t.Logf("%d peers known: list_peers without arguments answered %d of them (%d KiB)", subjects, len(peers), len(b)>>10)
	if len(peers) != mcpserver.DefaultPeersLimit {
		t.Fatalf("list_peers answered %d peers, want a page of %d", len(peers), mcpserver.DefaultPeersLimit)
	}
	// The pages walk every peer once.
	seen := map[string]bool{}
	after := ""
	for range subjects/mcpserver.MaxListLimit + 2 {
		out, err := call[mcpserver.ListPeersOutput](ctx, cs, "list_peers", map[string]any{"limit": 100000, "after": after})
		if err != nil {
			t.Fatal(err)
		}
		if out.Count > mcpserver.MaxListLimit {
			t.Fatalf("a page of %d, over %d", out.Count, mcpserver.MaxListLimit)
		}
		for _, p := range out.Peers {
			if seen[p.Peer.String()] || (after != "" && p.Peer.String() <= after) {
				t.Fatalf("peer %s twice or out of order", p.Peer)
			}
			seen[p.Peer.String()] = true
		}
		if out.NextAfter == "" {
			break
		}
		after = out.NextAfter
	}
	if len(seen) != subjects {
		t.Fatalf("pages walked %d peers of %d", len(seen), subjects)
	}
	if _, err := call[mcpserver.ListPeersOutput](ctx, cs, "list_peers", map[string]any{"after": "not a peer"}); err == nil {
		t.Error("after that is no peer ID accepted")
	}
}

// acceptance is an attestation of subject by key's holder, accepted,
// valid for an hour from at.
func acceptance(t *testing.T, key crypto.PrivKey, subject lpeer.ID, at time.Time) *protocol.Attestation {
	t.Helper()
	issuer, err := lpeer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	nonce, digest := make([]byte, protocol.NonceBytes), make([]byte, protocol.DigestBytes)
	_, _ = rand.Read(nonce)
	_, _ = rand.Read(digest)
	at = at.UTC().Truncate(time.Second)
	a := &protocol.Attestation{
		Issuer: issuer, Subject: subject, Accepted: true, Reason: skill.ReasonOK,
		Nonce: nonce, TranscriptDigest: digest,
		Policy:          protocol.PolicySummary{Rounds: 3, Tau: 15 * time.Second, Total: 2 * time.Minute, RTTCredit: 500 * time.Millisecond},
		ChallengeDomain: "test", SetID: "set", IssuedAt: at, ExpiresAt: at.Add(time.Hour),
		SpecVersion: protocol.SpecVersion, Provenance: skill.Provenance{Source: skill.SourceHybrid},
	}
	for i := 1; i <= 3; i++ {
		a.Rounds = append(a.Rounds, protocol.RoundTiming{Round: i, Budget: 15 * time.Second, Effective: time.Second, NarrativeTokens: 500, Correct: true})
	}
	return a
}

// TestListAttestationsAllTakeTurns: list_attestations of every peer is a
// pass over every stored key (the issued records name one peer per set
// drawn), and a client beyond loopback could ask it in a loop. Calls take
// turns, and one while the store has not committed since reuses the last
// pass; a new record is listed at once.
func TestListAttestationsAllTakeTurns(t *testing.T) {
	key, _ := testutil.NewKey(t)
	_, sets, _ := splitSets(t)
	n := testnode.New(t, testnode.Options{Config: peer.Config{Key: key, StorePath: filepath.Join(t.TempDir(), "s.db"), Logger: testLogger(t)}, Sets: sets})
	now := time.Now()
	put := func(at time.Time) lpeer.ID {
		_, sub := testutil.NewKey(t)
		a := acceptance(t, key, sub, at)
		env, err := protocol.Seal(a, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Store().Put(peer.Issued, env, a); err != nil {
			t.Fatal(err)
		}
		return sub
	}
	for i := range 20 {
		put(now.Add(-time.Duration(20-i) * time.Minute))
	}
	srv, cs := serveNode(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list := func() map[string]any {
		t.Helper()
		out, err := call[map[string]any](ctx, cs, "list_attestations", map[string]any{"limit": 5})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	list()
	pass := srv.NewestScan("")
	if pass == nil {
		t.Fatal("no pass cached")
	}
	out := list()
	if srv.NewestScan("") != pass {
		t.Fatal("a call with no commit since made a new pass")
	}
	if got, _ := out["total"].(float64); got != 20 {
		t.Fatalf("total %v, want 20", out["total"])
	}
	// A pass keeps what its call asked: a larger page passes again, a
	// smaller one then reuses that pass.
	if _, err := call[map[string]any](ctx, cs, "list_attestations", map[string]any{"limit": 12}); err != nil {
		t.Fatal(err)
	}
	if srv.NewestScan("") == pass {
		t.Fatal("a page larger than the pass kept reused it")
	}
	pass = srv.NewestScan("")
	if list(); srv.NewestScan("") != pass {
		t.Fatal("a smaller page made a new pass")
	}
	newest := put(now.Add(time.Second))
	out = list()
	if srv.NewestScan("") == pass {
		t.Fatal("a call after a commit reused the old pass")
	}
	atts, _ := out["attestations"].([]any)
	if len(atts) != 5 || out["total"].(float64) != 21 {
		t.Fatalf("%d attestations, total %v, want 5 of 21", len(atts), out["total"])
	}
	if first, _ := atts[0].(map[string]any); first["subject"] != newest.String() {
		t.Fatalf("newest listed %v, want the record just stored (%s)", first["subject"], newest)
	}
	// Calls take turns: one waits while another lists.
	release := srv.HoldScans()
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if _, err := call[map[string]any](short, cs, "list_attestations", map[string]any{}); err == nil {
		t.Fatal("a listing ran while another held the turn")
	}
	release()
	list()
}

// serveNode starts an MCP server for n, closed with the test, and
// connects a client to it.
func serveNode(t *testing.T, n *peer.Node) (*mcpserver.Server, *mcp.ClientSession) {
	t.Helper()
	srv, err := mcpserver.New(mcpserver.Config{Node: n, Version: "test", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv, connect(t, srv)
}
