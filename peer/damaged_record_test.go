package peer_test

import (
	"bytes"
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	bolt "go.etcd.io/bbolt"

	"github.com/acaptcha/acaptcha/internal/testutil/testnode"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
)

// A record of the store damaged in place (bbolt checks no data page: a
// flipped bit in a value goes unseen until the record is read) is left
// out when the node starts, as learned records that no longer verify
// are: the node starts, admits the peers its sound records admit, and
// serves nothing of the damaged record.
func TestNodeStartsWithDamagedRecord(t *testing.T) {
	sets := dependentSets(t)
	now := time.Now()
	for _, tc := range []struct {
		name   string
		damage func(v []byte) []byte
	}{
		// A flipped bit of the signature alone is not seen at start: the
		// node reads its own records without checking its own signature
		// again (trust.md §5), and their content is intact. A record cut
		// short no longer decodes.
		{"cut short", func(v []byte) []byte { return bytes.Clone(v[:len(v)-20]) }},
		{"garbage", func(v []byte) []byte { return []byte("not an envelope") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := newKey(t)
			good, bad := newKey(t), newKey(t)
			goodID, _ := lpeer.IDFromPrivateKey(good)
			badID, _ := lpeer.IDFromPrivateKey(bad)
			path := filepath.Join(t.TempDir(), "store.db")
			st, err := peer.OpenStore(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []lpeer.ID{goodID, badID} {
				env := peer.SealTest(key, p, true, now.Add(-time.Minute), time.Hour)
				a, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{})
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
			// Damage the record about badID in place.
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error {
				b := tx.Bucket([]byte("attestations/issued"))
				prefix := append([]byte(badID), 0)
				k, v := b.Cursor().Seek(prefix)
				if k == nil || !bytes.HasPrefix(k, prefix) {
					t.Fatal("no record about the peer to damage")
				}
				return b.Put(bytes.Clone(k), tc.damage(v))
			})
			if cerr := db.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}

			// testnode.New fails the test when the node does not start.
			n := testnode.New(t, testnode.Options{Config: peer.Config{Key: key, StorePath: path}, Sets: sets})
			if adm := n.Admission(goodID); !adm.Admitted {
				t.Errorf("the peer of the sound record is not admitted: %+v", adm)
			}
			if adm := n.Admission(badID); adm.Admitted {
				t.Errorf("the peer of the damaged record is admitted: %+v", adm)
			}
		})
	}
}

func newKey(t *testing.T) crypto.PrivKey {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
