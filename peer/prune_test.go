package peer_test

import (
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil/testnode"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
)

// A node prunes its store's attestations that expired more than
// Config.KeepExpired ago (30 days by default) when it starts; with a
// negative KeepExpired it keeps them all.
func TestNodePrunesExpiredAttestations(t *testing.T) {
	sets := dependentSets(t)
	now := time.Now()
	day := 24 * time.Hour
	for _, tc := range []struct {
		name string
		keep time.Duration
		want int // records left of the four
	}{
		{"default", 0, 2},
		{"keep 60 days", 60 * day, 3},
		{"never", -1, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, _, err := crypto.GenerateEd25519Key(rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			other, _, err := crypto.GenerateEd25519Key(rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			// A second verifier: the store keeps one received record
			// per issuer (its newest).
			another, _, err := crypto.GenerateEd25519Key(rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			me, _ := lpeer.IDFromPrivateKey(key)
			them, _ := lpeer.IDFromPrivateKey(other)
			path := filepath.Join(t.TempDir(), "store.db")
			st, err := peer.OpenStore(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range []struct {
				d   peer.Direction
				env []byte
			}{
				{peer.Issued, peer.SealTest(key, them, true, now.Add(-100*day), day)},     // expired 99 days ago
				{peer.Issued, peer.SealTest(key, them, true, now.Add(-time.Hour), day)},   // valid
				{peer.Received, peer.SealTest(other, me, true, now.Add(-40*day), day)},    // expired 39 days ago
				{peer.Received, peer.SealTest(another, me, false, now.Add(-10*day), day)}, // expired 9 days ago
			} {
				a, _, err := protocol.VerifyAttestation(r.env, protocol.VerifyOptions{AllowExpired: true})
				if err != nil {
					t.Fatal(err)
				}
				if err := st.Put(r.d, r.env, a); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			n := testnode.New(t, testnode.Options{
				Config: peer.Config{Key: key, StorePath: path, KeepExpired: tc.keep},
				Sets:   sets,
			})
			left := func() []peer.Entry {
				es, err := n.Store().List("", "")
				if err != nil {
					t.Fatal(err)
				}
				return es
			}
			if tc.keep >= 0 {
				// The janitor prunes once at start.
				eventually(t, 5*time.Second, "the prune at start", func() bool { return len(left()) == tc.want })
			}
			peer.PruneExpired(n, now) // and again on its hour
			es := left()
			if len(es) != tc.want {
				t.Errorf("%d records left, want %d", len(es), tc.want)
			}
			for _, e := range es {
				if e.Attestation.ExpiresAt.Before(now.Add(-tc.keep)) && tc.keep > 0 {
					t.Errorf("kept a record that expired %v ago", now.Sub(e.Attestation.ExpiresAt).Round(time.Hour))
				}
			}
		})
	}
}

// A rejection is not pruned before MaxKeptLifetime after its issue, however
// short Config.KeepExpired is: it supersedes the acceptance of the pair
// before it, and pruned at its expiry plus an hour it left that withdrawn
// acceptance the newest record, which the node loaded and admitted again
// at its next start.
func TestShortKeepExpiredKeepsRejection(t *testing.T) {
	sets := dependentSets(t)
	now := time.Now()
	day := 24 * time.Hour
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	them, _ := lpeer.IDFromPrivateKey(other)
	path := filepath.Join(t.TempDir(), "store.db")
	st, err := peer.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range [][]byte{
		peer.SealTest(key, them, true, now.Add(-2*day), 20*day), // valid 18 more days
		peer.SealTest(key, them, false, now.Add(-day), day/2),   // withdrew it; expired 12 h ago
	} {
		a, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{AllowExpired: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(peer.Issued, env, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	n := testnode.New(t, testnode.Options{
		Config: peer.Config{Key: key, StorePath: path, KeepExpired: time.Hour},
		Sets:   sets,
	})
	peer.PruneExpired(n, now)
	if es, err := n.Store().List("", ""); err != nil || len(es) != 2 {
		t.Fatalf("%d records left (%v), want both: the rejection still supersedes the acceptance", len(es), err)
	}
	if ad := n.Admission(them); ad.Admitted {
		t.Fatalf("admitted %+v after the prune: the withdrawn acceptance counts again", ad)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	// And after a restart, which loads the newest record of the pair.
	n2 := testnode.New(t, testnode.Options{
		Config: peer.Config{Key: key, StorePath: path, KeepExpired: time.Hour},
		Sets:   sets,
	})
	if ad := n2.Admission(them); ad.Admitted {
		t.Fatalf("admitted %+v after a restart: the withdrawn acceptance counts again", ad)
	}
	// Once MaxKeptLifetime has passed since the rejection, both go.
	peer.PruneExpired(n2, now.Add(peer.MaxKeptLifetime))
	if es, err := n2.Store().List("", ""); err != nil || len(es) != 0 {
		t.Fatalf("%d records left (%v) a kept lifetime later, want none", len(es), err)
	}
}
