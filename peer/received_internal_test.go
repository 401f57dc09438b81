package peer

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
)

// lockedBuffer is a log sink safe for the node's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(level, msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := 0
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, "level="+level) && strings.Contains(line, msg) {
			k++
		}
	}
	return k
}

// Sessions this node refused at its own limits (the BUSY decline, spent
// budgets, the resource manager) are logged at DEBUG and counted, not
// warned about: a flood of fresh peer IDs neither writes WARN lines nor
// fills the warning limiter, and a genuine warning right after it is
// written.
func TestReceivedBusyRefusalsNotWarned(t *testing.T) {
	var logs lockedBuffer
	n := newBareNode(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	busy := []error{
		protocol.ErrBusy,
		fmt.Errorf("%w: proof-of-work budget of this node spent", protocol.ErrBusy),
		fmt.Errorf("%w: round 2: token budget for this verifier spent", protocol.ErrBusy),
		fmt.Errorf("%w: reserve stream memory: %w", protocol.ErrNetwork, fmt.Errorf("cannot reserve memory: %w", network.ErrResourceLimitExceeded)),
	}
	before := n.Stats().ProveFailed
	const flood = 200 // ten times the warning burst
	for i := range flood {
		_, p := testutil.NewKey(t)
		n.recordReceived(protocol.ProverResult{Verifier: p, Err: busy[i%len(busy)]})
	}
	if k := logs.lines("WARN", "broke off"); k != 0 {
		t.Fatalf("%d WARN lines for %d sessions this node refused at its limits, want none", k, flood)
	}
	if k := logs.lines("DEBUG", "at this node's limits"); k != flood {
		t.Errorf("%d DEBUG lines for %d refused sessions", k, flood)
	}
	if got := n.Stats().ProveFailed - before; got != flood {
		t.Errorf("ProveFailed grew by %d, want %d", got, flood)
	}
	tracked := n.warns.Len()
	if tracked != 0 {
		t.Errorf("the warning limiter tracks %d keys after refusals only", tracked)
	}
	// A session the verifier broke off is still warned about.
	_, p := testutil.NewKey(t)
	n.recordReceived(protocol.ProverResult{Verifier: p, Err: fmt.Errorf("%w: stream reset", protocol.ErrNetwork)})
	if k := logs.lines("WARN", "broke off"); k != 1 {
		t.Fatalf("%d WARN lines for a session broken off after the flood, want 1", k)
	}
}

// A verifier that sends verdict after verdict about this node leaves one
// stored record, its newest, and the store and the index agree: what the
// node presents after a restart (the index rebuilt from the store) is
// what it presented before. A newer rejection withdraws the issuer's
// acceptance from both.
func TestReceivedVerdictsNewestPerIssuer(t *testing.T) {
	n := newBareNode(t, Config{})
	vk, verifier := testutil.NewKey(t)
	fk, friend := testutil.NewKey(t)
	now := time.Now().Truncate(time.Second)
	receive := func(key crypto.PrivKey, from peer.ID, accepted bool, at time.Time) []byte {
		t.Helper()
		env := SealTest(key, n.ID(), accepted, at, time.Hour)
		a, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{Subject: n.ID()})
		if err != nil {
			t.Fatal(err)
		}
		n.recordReceived(protocol.ProverResult{Verifier: from, Accepted: accepted, Reason: a.Reason, Attestation: a, Envelope: env})
		return env
	}
	friendEnv := receive(fk, friend, true, now.Add(-time.Hour+time.Minute))
	var last []byte
	for i := range 50 {
		last = receive(vk, verifier, i%5 == 4, now.Add(time.Duration(i-50)*time.Second))
	}
	es, err := n.store.List(Received, verifier)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || !bytes.Equal(es[0].Envelope, last) || !es[0].Attestation.Accepted {
		t.Fatalf("%d records of one verifier stored (of 50), want 1, its newest", len(es))
	}
	presented := func() (now, reloaded [][]byte) {
		t.Helper()
		at := time.Now()
		idx, err := loadTrustIndex(n.store, n.ID(), n.host.Peerstore().PubKey(n.ID()))
		if err != nil {
			t.Fatal(err)
		}
		re := &trustState{self: idx.self, issued: idx.issued, revoked: idx.revoked, blocked: map[peer.ID]time.Time{}, minSource: n.trust.minSource}
		return n.trust.presentable(at, MaxPresented), re.presentableLocked(at, MaxPresented)
	}
	same := func(a, b [][]byte) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if !bytes.Equal(a[i], b[i]) {
				return false
			}
		}
		return true
	}
	live, reloaded := presented()
	if len(live) != 2 || !same(live, reloaded) {
		t.Fatalf("presented %d records live, %d after a reload; want the same 2", len(live), len(reloaded))
	}
	// The verifier's newer rejection withdraws its acceptance, live and
	// after a restart; the friend's acceptance stays.
	receive(vk, verifier, false, now)
	live, reloaded = presented()
	if len(live) != 1 || !bytes.Equal(live[0], friendEnv) || !same(live, reloaded) {
		t.Fatalf("after a newer rejection: presented %d live, %d after a reload; want the friend's record only", len(live), len(reloaded))
	}
	if es, _ := n.store.List(Received, ""); len(es) != 2 {
		t.Fatalf("%d received records stored, want 2 (one per issuer)", len(es))
	}
}

// A session of a verifier's that ends because this node is closing (an
// attest that has its result, a stopped demo or bench) is logged at
// DEBUG, not warned about as a peer that broke off: before, `attest`
// against a busy node and every stopped bench printed such WARN lines.
func TestReceivedBrokenByOwnCloseNotWarned(t *testing.T) {
	var logs lockedBuffer
	n := newBareNode(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	n.cancel() // what Close does first
	_, p := testutil.NewKey(t)
	n.recordReceived(protocol.ProverResult{Verifier: p, Err: fmt.Errorf("%w: stream reset (local)", protocol.ErrNetwork)})
	if k := logs.lines("WARN", "broke off"); k != 0 {
		t.Fatalf("%d WARN lines for a session this node's own close ended, want none", k)
	}
	if k := logs.lines("DEBUG", "as this node closed"); k != 1 {
		t.Errorf("%d DEBUG lines, want 1", k)
	}
}
