package store

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	bolt "go.etcd.io/bbolt"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// sealedVerdict is sealed with the verdict chosen: a rejection fails
// round 1.
func sealedVerdict(t *testing.T, key crypto.PrivKey, subject peer.ID, accepted bool, issued time.Time, ttl time.Duration) ([]byte, *protocol.Attestation) {
	t.Helper()
	if accepted {
		return sealed(t, key, subject, issued, ttl)
	}
	_, a := sealed(t, key, subject, issued, ttl)
	a.Accepted, a.Reason, a.FailedRound = false, skill.ReasonWrongAnswer, 1
	a.Rounds = a.Rounds[:1]
	a.Rounds[0].Correct = false
	env, err := protocol.Seal(a, key)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{AllowExpired: true})
	if err != nil {
		t.Fatal(err)
	}
	return env, got
}

func putReceivedT(t *testing.T, s *Store, env []byte, a *protocol.Attestation) {
	t.Helper()
	if err := s.Put(Received, env, a); err != nil {
		t.Fatal(err)
	}
}

// receivedKeys counts the keys of the received bucket, as bbolt holds
// them (after a checkpoint).
func receivedKeys(t *testing.T, s *Store) int {
	t.Helper()
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := s.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketReceived).Stats().KeyN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// A verifier that sends verdict after verdict about us leaves one record:
// its newest, whatever the verdict and whatever order they arrive in. At
// equal issue times a rejection wins. Other issuers' records, and the
// same issuer's records about another subject, are left alone.
func TestReceivedCoalescePerIssuer(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	vk, verifier := testutil.NewKey(t)
	ok, other := testutil.NewKey(t)
	_, me := testutil.NewKey(t)
	_, someoneElse := testutil.NewKey(t)
	now := time.Now().Truncate(time.Second)

	envO, aO := sealed(t, ok, me, now.Add(-time.Hour), 2*time.Hour)
	putReceivedT(t, s, envO, aO)
	envX, aX := sealed(t, vk, someoneElse, now.Add(-time.Hour), 2*time.Hour)
	putReceivedT(t, s, envX, aX)
	var newest []byte
	for i := range 50 {
		env, a := sealedVerdict(t, vk, me, i%3 != 0, now.Add(time.Duration(i-60)*time.Second), time.Hour)
		putReceivedT(t, s, env, a)
		newest = env
	}
	es, err := s.List(Received, verifier)
	if err != nil {
		t.Fatal(err)
	}
	var mine []Entry
	for _, e := range es {
		if e.Attestation.Subject == me {
			mine = append(mine, e)
		}
	}
	if len(mine) != 1 || !bytes.Equal(mine[0].Envelope, newest) {
		t.Fatalf("%d records of the verifier about us kept (of 50), want 1, the newest", len(mine))
	}
	if len(es) != 2 {
		t.Fatalf("%d records of the verifier, want 2 (one about another subject)", len(es))
	}
	if es, _ := s.List(Received, other); len(es) != 1 {
		t.Fatalf("another issuer's record touched: %d records", len(es))
	}

	// An older verdict arriving late is not kept.
	late, la := sealed(t, vk, me, now.Add(-10*time.Minute), time.Hour)
	putReceivedT(t, s, late, la)
	if e, err := s.Latest(Received, verifier, now); err != nil || e == nil || !bytes.Equal(e.Envelope, newest) {
		t.Fatalf("Latest after an older verdict arrived: %v, %v; want the newest", e, err)
	}
	// At the same second a rejection supersedes an acceptance, and an
	// acceptance does not supersede the rejection.
	at := now.Add(time.Minute)
	acc, aa := sealed(t, vk, me, at, time.Hour)
	rej, ar := sealedVerdict(t, vk, me, false, at, time.Hour)
	acc2, aa2 := sealed(t, vk, me, at, time.Hour)
	for _, p := range []struct {
		env []byte
		a   *protocol.Attestation
	}{{acc, aa}, {rej, ar}, {acc2, aa2}} {
		putReceivedT(t, s, p.env, p.a)
	}
	es, _ = s.List(Received, verifier)
	if len(es) != 2 {
		t.Fatalf("%d records of the verifier after the same-second verdicts, want 2", len(es))
	}
	for _, e := range es {
		if e.Attestation.Subject == me && !bytes.Equal(e.Envelope, rej) {
			t.Fatalf("kept %v issued %v, want the rejection", e.Attestation.Accepted, e.Attestation.IssuedAt)
		}
	}
	if got, want := receivedKeys(t, s), 3; got != want || s.nReceived != want {
		t.Fatalf("%d received records (counted %d), want %d", got, s.nReceived, want)
	}
}

// Coalescing happens as records reach bbolt: records acknowledged in the
// log and replayed after a crash coalesce the same way, and a record
// replayed twice changes nothing.
func TestReceivedCoalesceAfterCrash(t *testing.T) {
	syncers(t, func(t *testing.T) {
		s, path := openTemp(t)
		vk, verifier := testutil.NewKey(t)
		_, me := testutil.NewKey(t)
		now := time.Now().Truncate(time.Second)
		var envs [][]byte
		var as []*protocol.Attestation
		for i := range 20 {
			env, a := sealedVerdict(t, vk, me, i%2 == 0, now.Add(time.Duration(i-30)*time.Second), time.Hour)
			envs, as = append(envs, env), append(as, a)
		}
		// The newest first, then the older ones: all logged, none in
		// bbolt.
		putReceivedT(t, s, envs[19], as[19])
		for i := range 19 {
			putReceivedT(t, s, envs[i], as[i])
		}
		if got := s.pendingCount(); got != 20 {
			t.Fatalf("%d records pending before the crash, want 20", got)
		}
		s = s.crashReopen(t, path)
		if got := s.Recovered(); got.Records != 20 {
			t.Fatalf("Recovered() = %+v, want 20 records", got)
		}
		es, err := s.List(Received, verifier)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != 1 || !bytes.Equal(es[0].Envelope, envs[19]) {
			t.Fatalf("%d records after recovery, want 1, the newest", len(es))
		}
		// Put again what is stored, crash, reopen: still one record.
		putReceivedT(t, s, envs[19], as[19])
		putReceivedT(t, s, envs[3], as[3])
		s = s.crashReopen(t, path)
		defer s.Close()
		if got := receivedKeys(t, s); got != 1 || s.nReceived != 1 {
			t.Fatalf("%d received records (counted %d) after replaying stored ones, want 1", got, s.nReceived)
		}
	})
}

// Fresh issuer IDs cannot grow the received records past their bound: a
// checkpoint over it trims them, expired records first, then the oldest
// of issuers this node does not vouch for; the records of an issuer this
// node accepted stay, however old.
func TestReceivedBounded(t *testing.T) {
	const max = 64
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := open(path, max)
	if err != nil {
		t.Fatal(err)
	}
	meKey, me := testutil.NewKey(t)
	now := time.Now().Truncate(time.Second)
	// A verifier we accepted (an unexpired acceptance of ours), whose
	// record about us is the oldest valid one; one we accepted once but
	// whose newest record of ours is a rejection.
	friendKey, friend := testutil.NewKey(t)
	formerKey, former := testutil.NewKey(t)
	for _, r := range []struct {
		subject  peer.ID
		accepted bool
		at       time.Time
	}{{friend, true, now.Add(-time.Hour)}, {former, true, now.Add(-2 * time.Hour)}, {former, false, now.Add(-time.Hour)}} {
		env, a := sealedVerdict(t, meKey, r.subject, r.accepted, r.at, 24*time.Hour)
		if err := s.PutIssued(env, a); err != nil {
			t.Fatal(err)
		}
	}
	friendEnv, a := sealed(t, friendKey, me, now.Add(-20*time.Hour), 24*time.Hour)
	putReceivedT(t, s, friendEnv, a)
	formerEnv, a := sealed(t, formerKey, me, now.Add(-19*time.Hour), 24*time.Hour)
	putReceivedT(t, s, formerEnv, a)
	// Expired records (kept for history until pruned).
	var expired [][]byte
	for i := range 5 {
		k, _ := testutil.NewKey(t)
		env, a := sealed(t, k, me, now.Add(-48*time.Hour+time.Duration(i)*time.Minute), time.Hour)
		putReceivedT(t, s, env, a)
		expired = append(expired, env)
	}
	// A swarm of fresh verifiers, each with a record newer than the last.
	var swarm [][]byte
	for i := range 3 * max {
		k, _ := testutil.NewKey(t)
		env, a := sealedVerdict(t, k, me, i%2 == 0, now.Add(-10*time.Hour+time.Duration(i)*time.Second), time.Hour*24)
		putReceivedT(t, s, env, a)
		swarm = append(swarm, env)
	}
	n := receivedKeys(t, s)
	if n > max || n < max-receivedSlack(max) {
		t.Fatalf("%d received records after %d issuers, want at most %d and at least %d", n, 3*max+7, max, max-receivedSlack(max))
	}
	if s.nReceived != n {
		t.Fatalf("counted %d received records, bbolt holds %d", s.nReceived, n)
	}
	got := listed(t, s, Received)
	if !got[string(friendEnv)] {
		t.Error("the record of a verifier this node accepted was evicted")
	}
	if got[string(formerEnv)] {
		t.Error("the record of a verifier this node rejected since was kept over newer ones")
	}
	for i, env := range expired {
		if got[string(env)] {
			t.Errorf("expired record %d kept over valid ones", i)
		}
	}
	// The newest records of the swarm stay; the oldest went.
	if !got[string(swarm[len(swarm)-1])] || got[string(swarm[0])] {
		t.Errorf("newest swarm record kept: %v, oldest kept: %v; want true, false", got[string(swarm[len(swarm)-1])], got[string(swarm[0])])
	}
	// The bound holds across a restart, and the count with it.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = open(path, max); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.nReceived != n {
		t.Fatalf("counted %d received records at open, want %d", s.nReceived, n)
	}
}

// A store written before received records were bounded (many records of
// one issuer, more issuers than the bound) is trimmed when it opens: one
// record per issuer and subject, within the bound.
func TestReceivedTrimmedAtOpen(t *testing.T) {
	const max = 64
	s, path := openTemp(t)
	_, me := testutil.NewKey(t)
	now := time.Now().Truncate(time.Second)
	vk, verifier := testutil.NewKey(t)
	var newest []byte
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketReceived)
		for i := range 3 * max {
			env, a := sealed(t, vk, me, now.Add(time.Duration(i-300)*time.Second), time.Hour)
			newest = env
			if err := b.Put(entryKey(verifier, a.IssuedAt, env), env); err != nil {
				return err
			}
		}
		for i := range 2 * max {
			k, p := testutil.NewKey(t)
			env, a := sealed(t, k, me, now.Add(time.Duration(i-2*max-600)*time.Second), time.Hour)
			if err := b.Put(entryKey(p, a.IssuedAt, env), env); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = open(path, max); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := max - receivedSlack(max)
	if n := receivedKeys(t, s); n != want || s.nReceived != want {
		t.Fatalf("%d received records (counted %d) after open, want %d", n, s.nReceived, want)
	}
	es, err := s.List(Received, verifier)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || !bytes.Equal(es[0].Envelope, newest) {
		t.Fatalf("%d records of the chatty verifier, want 1, its newest", len(es))
	}
}
