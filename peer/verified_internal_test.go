package peer

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/spec"
)

// The peers first contact treats as verified at start-up are those the
// trust index admits from our issued records. loadVerified listed the
// store again (every signature checked a second time), took the newest
// record by issue time alone (a same-second acceptance and rejection:
// whichever the store listed last, where store.Supersedes lets the
// rejection win) and counted the records of another identity.
func TestLoadVerifiedFollowsTheTrustIndex(t *testing.T) {
	self, _ := testutil.NewKey(t)
	other, _ := testutil.NewKey(t)
	_, tie := testutil.NewKey(t)
	_, ok := testutil.NewKey(t)
	_, foreign := testutil.NewKey(t)
	path := filepath.Join(t.TempDir(), "store.db")
	st, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	put := func(key crypto.PrivKey, subject peer.ID, accepted bool) {
		t.Helper()
		a := MakeTestAttestation(key, subject, accepted, now, time.Hour)
		env, err := protocol.Seal(a, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(Issued, env, a); err != nil {
			t.Fatal(err)
		}
	}
	put(self, tie, true)
	put(self, tie, false) // the same second: the rejection wins
	put(self, ok, true)
	put(other, foreign, true) // a store used with another --key
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	sets, err := spec.Examples()
	if err != nil {
		t.Fatal(err)
	}
	src, err := skill.NewCorpus("test", sets, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{Key: self, StorePath: path, ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Source: src,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	n.contact.mu.Lock()
	verified := n.contact.verified
	n.contact.mu.Unlock()
	if _, has := verified[ok]; !has || len(verified) != 1 {
		t.Fatalf("verified at start-up: %v, want only %s (not the tie %s, not the other identity's %s)", verified, ok, tie, foreign)
	}
}
