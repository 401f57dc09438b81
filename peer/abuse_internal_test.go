package peer

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/spec"
)

// newExampleNode starts a bare node that serves the spec's example sets
// and logs nothing.
func newExampleNode(t *testing.T) *Node {
	t.Helper()
	return newBareNode(t, Config{Source: exampleCorpus(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// exampleCorpus is a source of the spec's example sets.
func exampleCorpus(t *testing.T) *skill.Corpus {
	t.Helper()
	sets, err := spec.Examples()
	if err != nil {
		t.Fatal(err)
	}
	src, err := skill.NewCorpus("test", sets, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// TestReciprocalRequestsDoNotPileUp (issue 10, finding 2): a peer whose
// hellos keep asking to be verified back while its prover never answers
// must not leave one goroutine per hello waiting for the session in
// flight; the requests collapse into at most one session.
func TestReciprocalRequestsDoNotPileUp(t *testing.T) {
	n := newExampleNode(t)
	// The hostile peer speaks the protocol but its prover never answers.
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	h.SetStreamHandler(protocol.ID, func(s network.Stream) {
		_, _ = io.Copy(io.Discard, s)
		_ = s.Reset()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.Connect(ctx, peer.AddrInfo{ID: n.ID(), Addrs: n.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	before := runtime.NumGoroutine()
	const asks = 2000
	for range asks {
		n.onReciprocal(h.ID(), true)
	}
	time.Sleep(300 * time.Millisecond)
	grew := runtime.NumGoroutine() - before
	n.mu.Lock()
	inflight := len(n.inflight)
	n.mu.Unlock()
	t.Logf("%d reciprocal requests: %d more goroutines, %d sessions in flight", asks, grew, inflight)
	if grew > 50 {
		t.Fatalf("%d reciprocal requests left %d more goroutines, want at most 50", asks, grew)
	}
	if inflight > 1 {
		t.Fatalf("%d sessions in flight with one peer", inflight)
	}
}

// TestIssuedRejectionsCoalesce: the store keeps one rejection per peer
// (the newest) and every acceptance, so repeated failures of one peer do
// not grow it.
func TestIssuedRejectionsCoalesce(t *testing.T) {
	st, err := OpenStore(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, _ := testutil.NewKey(t)
	_, subject := testutil.NewKey(t)
	_, other := testutil.NewKey(t)
	now := time.Now().Truncate(time.Second)
	put := func(p peer.ID, accepted bool, at time.Time) {
		t.Helper()
		env := SealTest(key, p, accepted, at, time.Hour)
		a, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{AllowExpired: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.PutIssued(env, a); err != nil {
			t.Fatal(err)
		}
	}
	put(subject, true, now.Add(-10*time.Minute))
	put(other, false, now.Add(-10*time.Minute))
	for i := range 50 {
		put(subject, false, now.Add(time.Duration(i-50)*time.Second))
	}
	es, err := st.List(Issued, subject)
	if err != nil {
		t.Fatal(err)
	}
	var acc, rej int
	for _, e := range es {
		if e.Attestation.Accepted {
			acc++
		} else {
			rej++
			if !e.Attestation.IssuedAt.Equal(now.Add(-time.Second)) {
				t.Fatalf("kept the rejection of %s, want the newest", e.Attestation.IssuedAt)
			}
		}
	}
	if acc != 1 || rej != 1 {
		t.Fatalf("%d acceptances and %d rejections stored, want 1 and 1", acc, rej)
	}
	if es, _ := st.List(Issued, other); len(es) != 1 {
		t.Fatalf("another peer's rejection touched: %d records", len(es))
	}
}

// TestWarnPeerRateLimited: a peer that keeps breaking sessions off gets
// one WARN line per message and minute, and a swarm of identities stays
// within the global bound.
func TestWarnPeerRateLimited(t *testing.T) {
	var buf bytes.Buffer
	n := &Node{log: slog.New(slog.NewTextHandler(&buf, nil))}
	_, p := testutil.NewKey(t)
	held := linesHeldBack.Load()
	for range 1000 {
		n.warnPeer(p, "verification of us by peer broke off")
	}
	if k := strings.Count(buf.String(), "\n"); k != 1 {
		t.Fatalf("%d lines for one peer", k)
	}
	// What is held back is counted (acaptcha_log_lines_suppressed_total).
	if d := linesHeldBack.Load() - held; d < 999 {
		t.Fatalf("%d lines counted as held back, want at least 999", d)
	}
	buf.Reset()
	peers := make([]peer.ID, 1000)
	for i := range peers {
		_, peers[i] = testutil.NewKey(t)
	}
	start := time.Now()
	for _, q := range peers {
		n.warnPeer(q, "verification of us by peer broke off")
	}
	// The global bucket refills one line per warnRefill.
	want := warnBurst + 1 + int(time.Since(start)/warnRefill)
	if k := strings.Count(buf.String(), "\n"); k > want {
		t.Fatalf("%d lines for 1000 peers in a burst, want at most %d", k, want)
	}
}

// A node behind a relay gets every relayed connection from the relay's
// address: the relay is exempt from the per-IP limit (up to the inbound
// limit), loopback stays exempt unless LimitLoopback, other addresses are
// not listed (the per-IP limit applies).
func TestRelayAddressExemptFromPerIPLimit(t *testing.T) {
	relay := "/ip4/192.0.2.7/tcp/4717/p2p/12D3KooWDmk3Lap6BGxB3XELbLnqzrzG9gXSMhWsPmFj9JtQqy1g"
	v4, v6, err := networkPrefixLimits(&Config{Relays: []string{relay, "/ip6/2001:db8::1/udp/4717/quic-v1/p2p/12D3KooWDmk3Lap6BGxB3XELbLnqzrzG9gXSMhWsPmFj9JtQqy1g"}}, 500)
	if err != nil {
		t.Fatal(err)
	}
	has := func(ls []rcmgr.NetworkPrefixLimit, p string, n int) bool {
		for _, l := range ls {
			if l.Network.String() == p && l.ConnCount == n {
				return true
			}
		}
		return false
	}
	if !has(v4, "192.0.2.7/32", 500) || !has(v6, "2001:db8::1/128", 500) {
		t.Fatalf("relay not exempt: v4 %v v6 %v", v4, v6)
	}
	if !has(v4, "127.0.0.0/8", math.MaxInt) {
		t.Fatalf("loopback not exempt by default: %v", v4)
	}
	v4, _, err = networkPrefixLimits(&Config{LimitLoopback: true}, 500)
	if err != nil || len(v4) != 0 {
		t.Fatalf("LimitLoopback without relays: %v %v", v4, err)
	}
	if _, _, err := networkPrefixLimits(&Config{Relays: []string{"/ip4/192.0.2.7/tcp/1"}}, 500); err == nil {
		t.Fatal("a relay without a peer ID was accepted")
	}
}

// A store opened with another key: its records name the other identity,
// so the node ignores them and says so once at start.
func TestForeignStoreWarns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	oldKey, oldID := testutil.NewKey(t)
	_, subject := testutil.NewKey(t)
	env := SealTest(oldKey, subject, true, time.Now().Truncate(time.Second), time.Hour)
	a, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutIssued(env, a); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	start := func(key crypto.PrivKey) string {
		var logs bytes.Buffer
		n, err := New(Config{Key: key, StorePath: path, ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		return logs.String()
	}
	newKey, _ := testutil.NewKey(t)
	if got := start(newKey); !strings.Contains(got, "records of another identity are ignored") || !strings.Contains(got, oldID.String()) {
		t.Errorf("another key: want a warning naming %s, got %q", oldID, got)
	}
	if got := start(oldKey); strings.Contains(got, "another identity") {
		t.Errorf("its own key: want no warning, got %q", got)
	}
}
