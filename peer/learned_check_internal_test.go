package peer

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

// countLearnedChecks counts the signature checks of learned records read
// from the store unverified until the test ends.
func countLearnedChecks(t *testing.T) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	orig := verifyLearned
	verifyLearned = func(l Learned) error {
		n.Add(1)
		return orig(l)
	}
	t.Cleanup(func() { verifyLearned = orig })
	return &n
}

// holdLearnedCheck makes the node's background check of the learned
// records wait until the returned function is called (at the latest when
// the test ends).
func holdLearnedCheck(t *testing.T) (release func()) {
	t.Helper()
	ch := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	f := func(stop <-chan struct{}) {
		select {
		case <-ch:
		case <-stop:
		}
	}
	beforeLearnedCheck.Store(&f)
	t.Cleanup(func() {
		release()
		beforeLearnedCheck.Store(nil)
	})
	return release
}

// startOnStore starts a node with key on the store at path.
func startOnStore(t *testing.T, key crypto.PrivKey, path string, quorum int) *Node {
	t.Helper()
	n, err := New(Config{Key: key, StorePath: path, ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, TrustQuorum: quorum})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// learnedRecord is a learned record of subject by the holder of ik.
func learnedRecord(t *testing.T, ik crypto.PrivKey, subject peer.ID, accepted bool, issued time.Time) Learned {
	t.Helper()
	a := MakeTestAttestation(ik, subject, accepted, issued, 24*time.Hour)
	env, err := protocol.Seal(a, ik)
	if err != nil {
		t.Fatal(err)
	}
	return Learned{Attestation: a, Envelope: env, Via: ViaGossip, From: a.Issuer, LearnedAt: issued}
}

// damageLearned flips the last bit of the stored envelope of (subject,
// issuer), in its signature: the record still decodes, and no longer
// verifies.
func damageLearned(t *testing.T, path string, subject, issuer peer.ID) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := binary.AppendUvarint(nil, uint64(len(subject)))
	k = append(append(k, subject...), issuer...)
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("attestations/learned"))
		var v map[string]any
		if err := json.Unmarshal(b.Get(k), &v); err != nil {
			return err
		}
		var env []byte
		if err := json.Unmarshal(fmt.Appendf(nil, "%q", v["envelope"]), &env); err != nil {
			return err
		}
		env[len(env)-1] ^= 1
		v["envelope"] = env
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return b.Put(k, data)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// A node verified the signature of every learned record in its store
// before it served (up to 131 072: ~14 s on a loaded 2-core machine). It
// now indexes them decoded, with every check but the signature, and
// checks them in the background and on first use (trust.md §5): loading
// the index checks only the learned records about the node itself (it
// presents them). Before, loading the index checked all 201 (with the
// old ListLearned load and this counter: 201 checks, want 1).
func TestStartChecksNoLearnedSignature(t *testing.T) {
	key, self := testutil.NewKey(t)
	path := filepath.Join(t.TempDir(), "store.db")
	st, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var ls []Learned
	for range 200 {
		ik, _ := testutil.NewKey(t)
		sub := testutil.NewPeerID(t)
		ls = append(ls, learnedRecord(t, ik, sub, true, now))
	}
	ik, _ := testutil.NewKey(t)
	ls = append(ls, learnedRecord(t, ik, self, true, now))
	if err := st.PutLearned(ls...); err != nil {
		t.Fatal(err)
	}
	checks := countLearnedChecks(t)
	idx, err := loadTrustIndex(st, self, key.GetPublic())
	if err != nil {
		t.Fatal(err)
	}
	if got := checks.Load(); got != 1 {
		t.Errorf("loading the index checked %d learned signatures, want 1 (the record about the node)", got)
	}
	if idx.nLearned != 200 || len(idx.pending) != 200 || len(idx.self) != 1 {
		t.Fatalf("index: %d learned, %d pending, %d about us; want 200, 200, 1", idx.nLearned, len(idx.pending), len(idx.self))
	}
	if !checkPending(idx.pending, nil) {
		t.Fatal("checkPending cut short")
	}
	if got := checks.Load(); got != 201 {
		t.Errorf("%d checks after the pending ones, want 201", got)
	}
	// Each record is checked once.
	for _, r := range idx.pending {
		if !r.sound() {
			t.Fatal("a sound record failed its check")
		}
	}
	if got := checks.Load(); got != 201 {
		t.Errorf("%d checks after reading them again, want 201", got)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// A node on that store: its start checks none of the 200.
	checks.Store(0)
	release := holdLearnedCheck(t)
	n := startOnStore(t, key, path, 0)
	if got := checks.Load(); got != 1 {
		t.Errorf("the node's start checked %d learned signatures, want 1", got)
	}
	release()
	n.trust.awaitChecked()
	if got := checks.Load(); got != 201 {
		t.Errorf("%d checks after the background check, want 201", got)
	}
}

// damagedLearnedStore writes a store in which the node (key) admits the
// issuers directly and each of them vouches for subject; the record of
// the last issuer is damaged in place (a flipped signature bit) and names
// a later issue time than fresh, the sound record the test learns later.
func damagedLearnedStore(t *testing.T, key crypto.PrivKey, issuers []crypto.PrivKey, subject peer.ID, now time.Time) (path string, fresh []byte) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "store.db")
	st, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	var ls []Learned
	for i, ik := range issuers {
		id, _ := peer.IDFromPrivateKey(ik)
		env := SealTest(key, id, true, now.Add(-time.Hour), 24*time.Hour)
		a, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(Issued, env, a); err != nil {
			t.Fatal(err)
		}
		at := now.Add(-time.Hour)
		if i == len(issuers)-1 {
			at = now.Add(-time.Minute)
		}
		ls = append(ls, learnedRecord(t, ik, subject, true, at))
	}
	if err := st.PutLearned(ls...); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	last, _ := peer.IDFromPrivateKey(issuers[len(issuers)-1])
	damageLearned(t, path, subject, last)
	fresh = SealTest(issuers[len(issuers)-1], subject, true, now.Add(-30*time.Minute), 24*time.Hour)
	return path, fresh
}

// damagedPairKeys makes the node's key, three issuers and a subject for
// damagedLearnedStore.
func damagedPairKeys(t *testing.T) (key crypto.PrivKey, issuers []crypto.PrivKey, ids []peer.ID, subject peer.ID) {
	key, _ = testutil.NewKey(t)
	for range 3 {
		ik, id := testutil.NewKey(t)
		issuers, ids = append(issuers, ik), append(ids, id)
	}
	_, subject = testutil.NewKey(t)
	return key, issuers, ids, subject
}

// A learned record damaged in place is, as when the node verified every
// learned record at start, never counted and never held: a read before
// the background check reaches it checks it (the quorum, the voucher
// list), and a sound record of the same pair is learned although the
// damaged one names a later issue time.
func TestDamagedLearnedRecordBeforeCheck(t *testing.T) {
	key, issuers, ids, subject := damagedPairKeys(t)
	now := time.Now()
	path, fresh := damagedLearnedStore(t, key, issuers, subject, now)

	release := holdLearnedCheck(t)
	checks := countLearnedChecks(t)
	n := startOnStore(t, key, path, 3)
	if adm := n.Admission(subject); adm.Admitted {
		t.Fatalf("admitted on a damaged record: %+v", adm)
	}
	if got := checks.Load(); got != 3 {
		t.Errorf("the quorum read checked %d records, want 3", got)
	}
	adm := admissionWith(n, subject, 2)
	if !adm.Admitted || !slices.Equal(adm.Issuers, sortedIDs(ids[:2])) {
		t.Fatalf("quorum of 2: %+v, want admitted by %v", adm, sortedIDs(ids[:2]))
	}
	n.trust.mu.RLock()
	pi := n.trust.peerInfoLocked(subject, n.ID(), now, 2)
	var known []peer.ID
	n.trust.eachKnownLocked(func(p peer.ID) { known = append(known, p) })
	n.trust.mu.RUnlock()
	if len(pi.Vouchers) != 2 {
		t.Errorf("%d vouchers listed, want 2: %+v", len(pi.Vouchers), pi.Vouchers)
	}
	if res, err := LearnEnvelope(n, fresh, ViaGossip, ids[2]); err != nil || res != "learned" {
		t.Fatalf("the sound record of the damaged pair: %q, %v; want learned", res, err)
	}
	if adm := n.Admission(subject); !adm.Admitted {
		t.Errorf("not admitted on three sound records: %+v", adm)
	}
	release()
	n.trust.awaitChecked()
	n.trust.mu.RLock()
	defer n.trust.mu.RUnlock()
	if n.trust.nLearned != 3 || n.trust.perIssuer[ids[2]] != 1 || len(n.trust.learned[subject]) != 3 {
		t.Errorf("after the check: %d learned, %d by the third issuer, %d about the subject; want 3, 1, 3",
			n.trust.nLearned, n.trust.perIssuer[ids[2]], len(n.trust.learned[subject]))
	}
}

// The same store after the background check: the damaged record was
// dropped and counted, and the counts are those of the sound records.
func TestDamagedLearnedRecordAfterCheck(t *testing.T) {
	key, issuers, ids, subject := damagedPairKeys(t)
	now := time.Now()
	path, _ := damagedLearnedStore(t, key, issuers, subject, now)
	n := startOnStore(t, key, path, 2)
	n.trust.awaitChecked()
	n.trust.mu.RLock()
	nl, held := n.trust.nLearned, n.trust.learned[subject][ids[2]]
	n.trust.mu.RUnlock()
	if nl != 2 || held != nil {
		t.Fatalf("after the check: %d learned (want 2), damaged record held: %v", nl, held != nil)
	}
	if adm := n.Admission(subject); !adm.Admitted || !slices.Equal(adm.Issuers, sortedIDs(ids[:2])) {
		t.Fatalf("%+v, want admitted by %v", adm, sortedIDs(ids[:2]))
	}
	for _, pi := range n.Peers() {
		if pi.Peer == subject && len(pi.Vouchers) != 2 {
			t.Errorf("%d vouchers, want 2", len(pi.Vouchers))
		}
	}
	// The offline report drops it too.
	n.Close()
	st, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rep, err := PeerReport(st, 2, "", now)
	if err != nil {
		t.Fatal(err)
	}
	for _, pi := range rep {
		if pi.Peer == subject && (len(pi.Vouchers) != 2 || !pi.Admission.Admitted) {
			t.Errorf("offline report: %d vouchers, %+v; want 2, admitted", len(pi.Vouchers), pi.Admission)
		}
	}
}

// admissionWith is n's admission of p with a quorum of q.
func admissionWith(n *Node, p peer.ID, q int) Admission {
	n.trust.mu.RLock()
	defer n.trust.mu.RUnlock()
	return n.trust.admissionLocked(p, n.ID(), n.trustNow(), q)
}

func sortedIDs(ids []peer.ID) []peer.ID {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// The per-subject cap for issuers not admitted directly counts the
// records held about the subject: while the records indexed at start are
// being checked, that count may include a damaged one, so a cap that
// refuses then waits for the check (which drops it) and decides again; it
// learned nothing past a full subject before only because the damaged
// record was counted.
func TestLearnedCapWaitsForCheck(t *testing.T) {
	for _, via := range []string{"presentation", "gossip"} {
		t.Run(via, func(t *testing.T) { testLearnedCapWaits(t, via) })
	}
}

func testLearnedCapWaits(t *testing.T, via string) {
	key, _ := testutil.NewKey(t)
	_, subject := testutil.NewKey(t)
	now := time.Now()
	path := filepath.Join(t.TempDir(), "store.db")
	st, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	var ls []Learned
	var first peer.ID
	for i := range MaxLearnedPerSubject {
		ik, id := testutil.NewKey(t)
		if i == 0 {
			first = id
		}
		ls = append(ls, learnedRecord(t, ik, subject, true, now.Add(-time.Hour)))
	}
	if err := st.PutLearned(ls...); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	damageLearned(t, path, subject, first)
	release := holdLearnedCheck(t)
	n := startOnStore(t, key, path, 0)
	offer := func(env []byte, id peer.ID) string {
		if via == "gossip" {
			// Published by its issuer; the validator's verdict.
			reason, _ := validateOnly(t, n, env, id)
			return reason
		}
		res, err := LearnEnvelope(n, env, ViaPresentation, id)
		if err != nil {
			return err.Error()
		}
		return res
	}
	ik, id := testutil.NewKey(t)
	env := SealTest(ik, subject, true, now.Add(-time.Minute), 24*time.Hour)
	got := make(chan string, 1)
	go func() { got <- offer(env, id) }()
	select {
	case res := <-got:
		t.Fatalf("%q while the check is held, want it to wait", res)
	case <-time.After(200 * time.Millisecond):
	}
	release()
	want := "learned"
	if via == "gossip" {
		want = gossipOK
	}
	select {
	case res := <-got:
		if res != want {
			t.Fatalf("after the check: %q, want %q (the damaged record is not held)", res, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still waiting 30 s after the check was released")
	}
	if via == "gossip" {
		return
	}
	// One more is over the cap, as for any full subject.
	ik2, id2 := testutil.NewKey(t)
	if res := offer(SealTest(ik2, subject, true, now.Add(-time.Minute), 24*time.Hour), id2); res != "capacity" {
		t.Errorf("past the cap: %q, want capacity", res)
	}
}

// Reads while the background check runs (admissions with a quorum, the
// peer list, learning, presentation counts) see only sound records, under
// -race. The subjects' quorums are known: each has three vouchers by
// issuers the node admits directly, one of them damaged for odd subjects.
func TestReadsDuringLearnedCheck(t *testing.T) {
	key, _ := testutil.NewKey(t)
	now := time.Now()
	path := filepath.Join(t.TempDir(), "store.db")
	st, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	const nIssuers, nSubjects = 3, 40
	var iks []crypto.PrivKey
	for range nIssuers {
		ik, id := testutil.NewKey(t)
		iks = append(iks, ik)
		env := SealTest(key, id, true, now.Add(-time.Hour), 24*time.Hour)
		a, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(Issued, env, a); err != nil {
			t.Fatal(err)
		}
	}
	var subjects []peer.ID
	var ls []Learned
	for range nSubjects {
		sub := testutil.NewPeerID(t)
		subjects = append(subjects, sub)
		for _, ik := range iks {
			ls = append(ls, learnedRecord(t, ik, sub, true, now.Add(-time.Hour)))
		}
	}
	// Filler of fresh issuers, so that the check takes a while.
	for range 400 {
		ik, _ := testutil.NewKey(t)
		sub := testutil.NewPeerID(t)
		ls = append(ls, learnedRecord(t, ik, sub, true, now.Add(-time.Hour)))
	}
	if err := st.PutLearned(ls...); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	lastIssuer, _ := peer.IDFromPrivateKey(iks[nIssuers-1])
	for i := 1; i < nSubjects; i += 2 {
		damageLearned(t, path, subjects[i], lastIssuer)
	}
	release := holdLearnedCheck(t)
	n := startOnStore(t, key, path, 3)
	var wg sync.WaitGroup
	var fails atomic.Int64
	for w := range 3 {
		wg.Go(func() {
			for k := range 2 * nSubjects {
				i := (k + w*7) % nSubjects
				if adm := n.Admission(subjects[i]); adm.Admitted != (i%2 == 0) {
					fails.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		for range 3 {
			for _, pi := range n.Peers() {
				for j, s := range subjects {
					if pi.Peer == s && len(pi.Vouchers) != 3-j%2 {
						fails.Add(1)
					}
				}
			}
		}
	})
	wg.Go(func() {
		for range 20 {
			ik, id := testutil.NewKey(t)
			sub := testutil.NewPeerID(t)
			if res, err := LearnEnvelope(n, SealTest(ik, sub, true, now.Add(-time.Minute), 24*time.Hour), ViaPresentation, id); err != nil || res != "learned" {
				fails.Add(1)
			}
			_ = n.presentedUntrusted()
		}
	})
	time.Sleep(20 * time.Millisecond)
	release()
	wg.Wait()
	n.trust.awaitChecked()
	if f := fails.Load(); f > 0 {
		t.Errorf("%d reads saw a damaged record or missed a sound one", f)
	}
	n.trust.mu.RLock()
	defer n.trust.mu.RUnlock()
	if want := nIssuers*nSubjects - nSubjects/2 + 400 + 20; n.trust.nLearned != want {
		t.Errorf("%d learned after the check, want %d", n.trust.nLearned, want)
	}
}

// TestStartupLearnedCost measures a node's start on a store of
// ACAPTCHA_STARTUP_LEARNED learned records of distinct issuers and
// subjects (a measurement, run on demand): the time from New to a served
// node, and the background check after it.
func TestStartupLearnedCost(t *testing.T) {
	learned, _ := strconv.Atoi(os.Getenv("ACAPTCHA_STARTUP_LEARNED"))
	if learned <= 0 {
		t.Skip("a measurement: set ACAPTCHA_STARTUP_LEARNED")
	}
	key, _ := testutil.NewKey(t)
	path := filepath.Join(t.TempDir(), "store.db")
	t0 := time.Now()
	fillStartupStore(t, path, key, 0, learned)
	t.Logf("filled %d learned records in %s", learned, time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	n := startOnStore(t, key, path, 0)
	started := time.Since(t0)
	n.trust.awaitChecked()
	t.Logf("node started (serving) in %s; background check of %d learned records done %s after start",
		started.Round(time.Millisecond), learned, (time.Since(t0) - started).Round(time.Millisecond))
}
