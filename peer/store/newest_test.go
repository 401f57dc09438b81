package store

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	bolt "go.etcd.io/bbolt"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
)

// TestListNewestVerifiesWhatItReturns: listing the newest attestations
// (MCP list_attestations, at most 500) verified the signature of every
// record of the direction again, newest or not: the store keeps an issued
// record per subject for its lifetime plus 30 days, and the subjects are
// peer IDs any client of the HTTP door makes up (the draw budget lets
// 1,000 an hour), so one listing of 20 cost up to hundreds of thousands of
// signature checks. ListNewest decodes every record but verifies only
// those it returns.
func TestListNewestVerifiesWhatItReturns(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	key, _ := testutil.NewKey(t)
	const n = 600
	base := time.Now().Add(-time.Hour)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				_, subject := testutil.NewKey(t)
				env, a := sealed(t, key, subject, base.Add(time.Duration(i)*time.Second), 24*time.Hour)
				if err := s.Put(Issued, env, a); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	var checks atomic.Int64
	old := verifyEnvelope
	verifyEnvelope = func(env []byte, o protocol.VerifyOptions) (*protocol.Attestation, error) {
		checks.Add(1)
		return old(env, o)
	}
	t.Cleanup(func() { verifyEnvelope = old })

	all, err := s.List(Issued, "")
	if err != nil || len(all) != n {
		t.Fatalf("List: %d entries, %v", len(all), err)
	}
	listChecks := checks.Swap(0)
	start := time.Now()
	es, total, err := s.ListNewest(Issued, "", 20)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d records: List verified %d signatures; ListNewest(20) verified %d in %v", n, listChecks, checks.Load(), took)
	if total != n || len(es) != 20 {
		t.Fatalf("ListNewest: %d entries of %d, want 20 of %d", len(es), total, n)
	}
	for i, e := range es {
		if want := base.Add(time.Duration(n-1-i) * time.Second).UTC().Truncate(time.Second); !e.Attestation.IssuedAt.Equal(want) {
			t.Fatalf("entry %d issued at %v, want %v (newest first)", i, e.Attestation.IssuedAt, want)
		}
	}
	if c := checks.Load(); c > 20 {
		t.Fatalf("ListNewest(20) verified %d signatures, want 20", c)
	}
}

// TestLatestVerifiesOne: Latest (a node reads its newest issued record of
// a peer at every contact with it) verified every record of the peer
// again, and the issued acceptances of a peer accumulate (one per
// session, up to its draw budget of 20 an hour, kept their lifetime plus
// 30 days): it verifies the one it returns.
func TestLatestVerifiesOne(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	key, _ := testutil.NewKey(t)
	_, subject := testutil.NewKey(t)
	const n = 300
	base := time.Now().Add(-time.Hour)
	for i := range n {
		env, a := sealed(t, key, subject, base.Add(time.Duration(i)*time.Second), 24*time.Hour)
		if err := s.Put(Issued, env, a); err != nil {
			t.Fatal(err)
		}
	}
	var checks atomic.Int64
	old := verifyEnvelope
	verifyEnvelope = func(env []byte, o protocol.VerifyOptions) (*protocol.Attestation, error) {
		checks.Add(1)
		return old(env, o)
	}
	t.Cleanup(func() { verifyEnvelope = old })
	e, err := s.Latest(Issued, subject, time.Now())
	if err != nil || e == nil {
		t.Fatalf("Latest: %v %v", e, err)
	}
	t.Logf("%d records of one subject: Latest verified %d signatures", n, checks.Load())
	if want := base.Add((n - 1) * time.Second).UTC().Truncate(time.Second); !e.Attestation.IssuedAt.Equal(want) {
		t.Fatalf("Latest issued at %v, want %v", e.Attestation.IssuedAt, want)
	}
	if c := checks.Load(); c != 1 {
		t.Fatalf("Latest verified %d signatures, want 1", c)
	}
	if e, err := s.Latest(Issued, subject, base.Add(48*time.Hour)); err != nil || e != nil {
		t.Fatalf("Latest after every record expired: %v %v", e, err)
	}
}

// A record damaged in place (its signature or its whole value) is passed
// over: Latest returns the newest sound record of the peer, ListSound
// leaves the damaged ones out and counts them, and List reports them.
// Latest failed on a damaged newest record and on any record of the peer
// that did not decode.
func TestDamagedRecordPassedOver(t *testing.T) {
	s, path := openTemp(t)
	key, _ := testutil.NewKey(t)
	_, subject := testutil.NewKey(t)
	base := time.Now().Add(-time.Hour)
	var keys [][]byte
	for i := range 3 {
		env, a := sealed(t, key, subject, base.Add(time.Duration(i)*time.Minute), 24*time.Hour)
		if err := s.Put(Issued, env, a); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, entryKey(subject, a.IssuedAt, env))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The newest record's signature flipped, the oldest made garbage.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketIssued)
		v := bytes.Clone(b.Get(keys[2]))
		v[len(v)-1] ^= 1
		if err := b.Put(keys[2], v); err != nil {
			return err
		}
		return b.Put(keys[0], []byte("garbage"))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := base.Add(time.Minute).UTC().Truncate(time.Second)
	e, err := s.Latest(Issued, subject, time.Now())
	if err != nil || e == nil || !e.Attestation.IssuedAt.Equal(want) {
		t.Fatalf("Latest = %v, %v; want the sound record issued at %v", e, err, want)
	}
	es, bad, err := s.ListSound(Issued, "")
	if err != nil || len(es) != 1 || bad != 2 || !es[0].Attestation.IssuedAt.Equal(want) {
		t.Fatalf("ListSound = %d entries, %d left out, %v; want the sound one, 2 left out", len(es), bad, err)
	}
	es, bad, err = s.NewestSound(Issued, nil)
	if err != nil || len(es) != 1 || bad != 2 || !es[0].Attestation.IssuedAt.Equal(want) {
		t.Fatalf("NewestSound = %d entries, %d damaged, %v; want the sound one, 2 damaged", len(es), bad, err)
	}
	if _, err := s.List(Issued, ""); err == nil {
		t.Fatal("List reported no damaged record")
	}
}

// TestNewestSoundVerifiesOnePerPair: the node's index of its issued
// verdicts (built at every start) keeps one record per subject, and
// verified every stored record to find it: a peer re-attested every few
// hours leaves one record per session for their lifetime and the
// keep-expired time. NewestSound verifies the one it returns per issuer
// and subject (and the damaged ones passed over for it).
func TestNewestSoundVerifiesOnePerPair(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	key, _ := testutil.NewKey(t)
	other, _ := testutil.NewKey(t)
	const subjects, each = 5, 60
	base := time.Now().Add(-time.Hour)
	want := map[peer.ID]time.Time{}
	for j := range subjects {
		_, subject := testutil.NewKey(t)
		for i := range each {
			at := base.Add(time.Duration(i) * time.Second)
			env, a := sealedVerdict(t, key, subject, i%3 != 0, at, 24*time.Hour)
			if err := s.Put(Issued, env, a); err != nil {
				t.Fatal(err)
			}
			want[subject] = a.IssuedAt
		}
		if j == 0 {
			// Another issuer's record about the same subject, newer:
			// a pair of its own.
			env, a := sealed(t, other, subject, base.Add(time.Hour), 24*time.Hour)
			if err := s.Put(Issued, env, a); err != nil {
				t.Fatal(err)
			}
		}
	}
	var checks atomic.Int64
	old := verifyEnvelope
	verifyEnvelope = func(env []byte, o protocol.VerifyOptions) (*protocol.Attestation, error) {
		checks.Add(1)
		return old(env, o)
	}
	t.Cleanup(func() { verifyEnvelope = old })
	// The same with one chunk and with chunks that end inside a
	// subject's records (EachNewestSound never splits them).
	defer func(n int) { newestChunk = n }(newestChunk)
	for _, chunk := range []int{1 << 20, 1, 7, 59} {
		newestChunk = chunk
		checks.Store(0)
		checkNewestSound(t, s, key, subjects+1, want, &checks)
	}
}

// checkNewestSound checks s.NewestSound(Issued, nil) returns the n
// superseding records of their pairs, with n signature checks, in key
// order, the newest of issuer key's being the time want holds.
func checkNewestSound(t *testing.T, s *Store, key crypto.PrivKey, n int, want map[peer.ID]time.Time, checks *atomic.Int64) {
	t.Helper()
	es, bad, err := s.NewestSound(Issued, nil)
	if err != nil || bad != 0 {
		t.Fatalf("chunk %d: NewestSound: %v, %d damaged", newestChunk, err, bad)
	}
	if len(es) != n || checks.Load() != int64(n) {
		t.Fatalf("chunk %d: NewestSound returned %d entries with %d checks, want %d and %d", newestChunk, len(es), checks.Load(), n, n)
	}
	// The same winners as List and the supersedes order.
	all, err := s.List(Issued, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("chunk %d, %d records: NewestSound verified %d signatures", newestChunk, len(all), n)
	best := map[string]*protocol.Attestation{}
	for _, e := range all {
		a := e.Attestation
		g := string(a.Issuer) + "/" + string(a.Subject)
		if b := best[g]; b == nil || Supersedes(a.IssuedAt, a.ExpiresAt, a.Accepted, b.IssuedAt, b.ExpiresAt, b.Accepted) {
			best[g] = a
		}
	}
	for i, e := range es {
		a := e.Attestation
		if b := best[string(a.Issuer)+"/"+string(a.Subject)]; b == nil || !b.IssuedAt.Equal(a.IssuedAt) || b.Accepted != a.Accepted {
			t.Errorf("entry %d: not the superseding record of its pair", i)
		}
		if a.Issuer == s.mustIssuer(t, key) && !a.IssuedAt.Equal(want[a.Subject]) {
			t.Errorf("entry %d issued at %v, want %v", i, a.IssuedAt, want[a.Subject])
		}
		if i > 0 && es[i-1].Key >= e.Key {
			t.Errorf("entries out of key order at %d", i)
		}
	}
}

func (s *Store) mustIssuer(t *testing.T, key crypto.PrivKey) peer.ID {
	t.Helper()
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestLatestTieRejectionWins: of two valid records of a peer issued in
// the same second, Latest returned the first in key order (the key's
// digest decides), where admission takes the rejection (Supersedes);
// the node's re-attest and back-off scheduling read Latest (audit-84).
func TestLatestTieRejectionWins(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	key, _ := testutil.NewKey(t)
	at := time.Now().Add(-time.Minute)
	// Several pairs: the key order of the two records is random.
	for i := range 8 {
		_, subject := testutil.NewKey(t)
		at := at.Add(time.Duration(i) * time.Second)
		for _, acc := range []bool{true, false} {
			env, a := sealedVerdict(t, key, subject, acc, at, time.Hour)
			if err := s.Put(Issued, env, a); err != nil {
				t.Fatal(err)
			}
		}
		e, err := s.Latest(Issued, subject, time.Now())
		if err != nil || e == nil {
			t.Fatalf("Latest: %v, %v", e, err)
		}
		if e.Attestation.Accepted {
			t.Fatalf("pair %d: Latest returned the acceptance of a tie; admission takes the rejection", i)
		}
	}
}
