package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
)

// newBareNode starts a node with no source and no prover.
func newBareNode(t testing.TB, cfg Config) *Node {
	t.Helper()
	if cfg.Key == nil {
		cfg.Key, _ = testutil.NewKey(t)
	}
	cfg.StorePath = filepath.Join(t.TempDir(), "store.db")
	cfg.ListenAddrs = []string{"/ip4/127.0.0.1/tcp/0"}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func gossipMsg(data []byte, author peer.ID) *pubsub.Message {
	return &pubsub.Message{Message: &pb.Message{Data: data, From: []byte(author)}}
}

// sealRaw signs a with key without Seal's checks (to forge records).
func sealRaw(t *testing.T, a *protocol.Attestation, key crypto.PrivKey) []byte {
	t.Helper()
	env, err := record.Seal(a, key)
	if err != nil {
		t.Fatal(err)
	}
	data, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestGossipValidator(t *testing.T) {
	n := newBareNode(t, Config{})
	ik, issuer := testutil.NewKey(t)
	_, subject := testutil.NewKey(t)
	xk, other := testutil.NewKey(t)
	fwd := other
	now := time.Now()
	valid := SealTest(ik, subject, true, now, time.Hour)

	forgedSig := append([]byte(nil), valid...)
	forgedSig[len(forgedSig)-1] ^= 0xff // last byte of the signature
	forgedPayload := append([]byte(nil), valid...)
	forgedPayload[len(forgedPayload)-80] ^= 0x01 // inside the payload

	wrongIssuer := sealRaw(t, MakeTestAttestation(ik, subject, true, now, time.Hour), xk)
	expired := SealTest(ik, subject, true, now.Add(-48*time.Hour), 24*time.Hour)
	future := SealTest(ik, subject, true, now.Add(time.Hour), time.Hour)
	v2 := MakeTestAttestation(ik, subject, true, now, time.Hour)
	v2.SpecVersion = "2.0.0"
	newVersion := sealRaw(t, v2, ik)
	oversized := make([]byte, protocol.MaxEnvelopeBytes+1)
	copy(oversized, valid)
	rejection := SealTest(ik, subject, false, now, time.Hour)

	cases := []struct {
		name   string
		data   []byte
		author peer.ID
		want   pubsub.ValidationResult
	}{
		{"valid, by issuer", valid, issuer, pubsub.ValidationAccept},
		{"valid, by subject", valid, subject, pubsub.ValidationAccept},
		{"valid, by a third party", valid, other, pubsub.ValidationReject},
		{"forged signature", forgedSig, issuer, pubsub.ValidationReject},
		{"payload changed after signing", forgedPayload, issuer, pubsub.ValidationReject},
		{"signed by another key than the issuer", wrongIssuer, issuer, pubsub.ValidationReject},
		{"oversized", oversized, issuer, pubsub.ValidationReject},
		{"garbage", []byte("not an envelope"), issuer, pubsub.ValidationReject},
		{"empty", nil, issuer, pubsub.ValidationReject},
		{"expired", expired, issuer, pubsub.ValidationIgnore},
		{"not yet valid", future, issuer, pubsub.ValidationIgnore},
		{"other major version", newVersion, issuer, pubsub.ValidationIgnore},
		{"rejection with nothing to retract", rejection, issuer, pubsub.ValidationIgnore},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := gossipMsg(c.data, c.author)
			if got := n.validateGossip(context.Background(), fwd, m); got != c.want {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			if c.want == pubsub.ValidationAccept {
				if a, ok := m.ValidatorData.(*protocol.Attestation); !ok || a.Subject != subject {
					t.Fatalf("validator data %v", m.ValidatorData)
				}
			}
		})
	}
	st := n.Stats()
	if st.GossipRejected != 7 || st.GossipIgnored != 4 {
		t.Fatalf("stats: %+v", st)
	}

	// Once learned: the same record is a duplicate, an older one stale, and
	// a newer rejection by the same issuer a retraction worth forwarding.
	a, _, err := protocol.VerifyAttestation(valid, protocol.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res := n.learn(a, valid, ViaGossip, fwd, issuer); res != learnedNew {
		t.Fatalf("learn: %v", res)
	}
	older := SealTest(ik, subject, true, now.Add(-time.Minute), time.Hour)
	newerRejection := SealTest(ik, subject, false, now.Add(2*time.Second), time.Hour)
	for _, c := range []struct {
		name string
		data []byte
		want pubsub.ValidationResult
	}{
		{"duplicate", valid, pubsub.ValidationIgnore},
		{"stale", older, pubsub.ValidationIgnore},
		{"retraction", newerRejection, pubsub.ValidationAccept},
	} {
		if got := n.validateGossip(context.Background(), fwd, gossipMsg(c.data, issuer)); got != c.want {
			t.Fatalf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	// Our own records are forwarded but not learned.
	ours := SealTest(n.host.Peerstore().PrivKey(n.ID()), subject, true, now, time.Hour)
	if got := n.validateGossip(context.Background(), fwd, gossipMsg(ours, subject)); got != pubsub.ValidationAccept {
		t.Fatalf("own record echoed by its subject: %v", got)
	}
}

func TestAdmissionRules(t *testing.T) {
	n := newBareNode(t, Config{TrustQuorum: 2})
	self := n.ID()
	selfKey := n.host.Peerstore().PrivKey(self)
	now := time.Now()
	var iks []crypto.PrivKey
	var ids []peer.ID
	for range 3 {
		k, id := testutil.NewKey(t)
		iks, ids = append(iks, k), append(ids, id)
	}
	_, subject := testutil.NewKey(t)
	learn := func(env []byte) {
		t.Helper()
		if _, err := LearnEnvelope(n, env, ViaPresentation, subject); err != nil {
			t.Fatal(err)
		}
	}
	issue := func(env []byte) {
		t.Helper()
		if err := IssueEnvelope(n, env); err != nil {
			t.Fatal(err)
		}
	}
	// Vouchers from issuers we never verified count for nothing.
	learn(SealTest(iks[0], subject, true, now, time.Hour))
	learn(SealTest(iks[1], subject, true, now, time.Hour))
	if adm := n.Admission(subject); adm.Admitted || adm.Reason != NotAdmittedUnattested {
		t.Fatalf("unverified issuers: %+v", adm)
	}
	// Verify issuer 0 directly: one of two.
	issue(SealTest(selfKey, ids[0], true, now, time.Hour))
	if adm := n.Admission(subject); adm.Admitted {
		t.Fatalf("one verified issuer of two: %+v", adm)
	}
	// Issuer 1 verified but its attestation of the subject expired.
	issue(SealTest(selfKey, ids[1], true, now, time.Hour))
	if adm := n.Admission(subject); !adm.Admitted || adm.Via != AdmittedQuorum || len(adm.Issuers) != 2 {
		t.Fatalf("two verified issuers: %+v", adm)
	}
	SetTrustClock(n, func() time.Time { return now.Add(2 * time.Hour) })
	if adm := n.Admission(subject); adm.Admitted || adm.Reason != NotAdmittedUnattested {
		t.Fatalf("all expired: %+v", adm)
	}
	SetTrustClock(n, time.Now)
	// A vouch by the subject about itself is impossible (Seal refuses it);
	// a vouch by an issuer that we rejected does not count.
	issue(SealTest(selfKey, ids[1], false, now.Add(2*time.Second), time.Hour))
	if adm := n.Admission(subject); adm.Admitted {
		t.Fatalf("issuer rejected since: %+v", adm)
	}
	issue(SealTest(selfKey, ids[2], true, now, time.Hour))
	learn(SealTest(iks[2], subject, true, now, time.Hour))
	want := []peer.ID{ids[0], ids[2]}
	slices.Sort(want)
	if adm := n.Admission(subject); !adm.Admitted || !slices.Equal(adm.Issuers, want) {
		t.Fatalf("issuers 0 and 2: %+v", adm)
	}
	// Our own rejection of the subject beats the quorum.
	issue(SealTest(selfKey, subject, false, now, time.Hour))
	if adm := n.Admission(subject); adm.Admitted || adm.Reason != NotAdmittedRejected {
		t.Fatalf("direct rejection vs quorum: %+v", adm)
	}
	// A newer acceptance of ours supersedes our rejection.
	issue(SealTest(selfKey, subject, true, now.Add(3*time.Second), time.Hour))
	if adm := n.Admission(subject); !adm.Admitted || adm.Via != AdmittedDirect {
		t.Fatalf("newer direct acceptance: %+v", adm)
	}
	// Revocation covers our records and the vouchers issued before it.
	SetTrustClock(n, func() time.Time { return now.Add(5 * time.Second) })
	defer SetTrustClock(n, time.Now)
	if err := n.Revoke(subject); err != nil {
		t.Fatal(err)
	}
	if adm := n.Admission(subject); adm.Admitted || adm.Reason != NotAdmittedRevoked {
		t.Fatalf("revoked: %+v", adm)
	}
	// Vouchers issued after the revocation count again.
	later := now.Add(7 * time.Second)
	learn(SealTest(iks[0], subject, true, later, time.Hour))
	learn(SealTest(iks[2], subject, true, later, time.Hour))
	if adm := n.Admission(subject); !adm.Admitted || adm.Via != AdmittedQuorum {
		t.Fatalf("fresh vouchers after revocation: %+v", adm)
	}
	if adm := n.Admission(self); adm.Admitted {
		t.Fatalf("self: %+v", adm)
	}
}

func TestNilMetricsSafe(t *testing.T) {
	var m *metrics
	m.observeIssued(&protocol.Result{})
	m.observeReceived(protocol.ProverResult{})
	m.observeAdmission("x", Admission{})
	m.observeGossip("reject", "x")
	m.observeLearned(ViaGossip)
	m.observePublished()
	m.observeDelivered()
	m.observePresentation("sent", "ok")
	m.observeBlocked()
	n := &Node{}
	if (n.Stats() != Stats{}) {
		t.Fatal("stats of a node without metrics")
	}
	n.SetPoolDepth(func() int { return 1 })
}

func TestLearnedCaps(t *testing.T) {
	n := newBareNode(t, Config{})
	ik, issuer := testutil.NewKey(t)
	now := time.Now()
	n.trust.mu.Lock()
	n.trust.perIssuer[issuer] = MaxLearnedPerIssuer
	n.trust.mu.Unlock()
	_, subject := testutil.NewKey(t)
	if res, err := LearnEnvelope(n, SealTest(ik, subject, true, now, time.Hour), ViaGossip, issuer); err != nil || res != "capacity" {
		t.Fatalf("over the per-issuer cap from an unverified issuer: %q %v", res, err)
	}
	// A directly verified issuer is not held to the per-issuer cap.
	if err := IssueEnvelope(n, SealTest(n.host.Peerstore().PrivKey(n.ID()), issuer, true, now, time.Hour)); err != nil {
		t.Fatal(err)
	}
	if res, _ := LearnEnvelope(n, SealTest(ik, subject, true, now, time.Hour), ViaGossip, issuer); res != "learned" {
		t.Fatalf("verified issuer: %q", res)
	}
}

func TestRecordsAboutUs(t *testing.T) {
	n := newBareNode(t, Config{})
	selfKey := n.host.Peerstore().PrivKey(n.ID())
	now := time.Now()
	sybilKey, sybil := testutil.NewKey(t)
	// A stranger's acceptance of us is forwarded on gossip but not learned.
	junk := SealTest(sybilKey, n.ID(), true, now, time.Hour)
	if got := n.validateGossip(context.Background(), sybil, gossipMsg(junk, sybil)); got != pubsub.ValidationAccept {
		t.Fatalf("stranger's acceptance of us: %v", got)
	}
	if res, _ := LearnEnvelope(n, junk, ViaGossip, sybil); res != "about_us" {
		t.Fatalf("learn: %q", res)
	}
	// A stranger's rejection of us is ignored.
	if got := n.validateGossip(context.Background(), sybil, gossipMsg(SealTest(sybilKey, n.ID(), false, now, time.Hour), sybil)); got != pubsub.ValidationIgnore {
		t.Fatalf("stranger's rejection of us: %v", got)
	}
	// Presentations put issuers we verified first, however old.
	friendKey, friend := testutil.NewKey(t)
	if err := IssueEnvelope(n, SealTest(selfKey, friend, true, now, time.Hour)); err != nil {
		t.Fatal(err)
	}
	fromFriend := SealTest(friendKey, n.ID(), true, now.Add(-time.Minute), time.Hour)
	var received [][]byte
	for _, env := range [][]byte{fromFriend, junk} {
		a, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.indexReceived(a, env) // as if from sessions
		received = append(received, env)
	}
	n.trust.mu.RLock()
	got := n.trust.presentableLocked(now, 1)
	n.trust.mu.RUnlock()
	if len(got) != 1 || !bytes.Equal(got[0], received[0]) {
		t.Fatal("the verified issuer's record is not presented first")
	}
}

// A record's issuer picks its expiry: one valid for longer than
// MaxKeptLifetime is not kept from a session (not stored, indexed or
// published), not learned from gossip (ignored with reason "lifetime"),
// and not loaded from the store; one just within it is.
func TestRecordLifetimeCap(t *testing.T) {
	n := newBareNode(t, Config{})
	now := time.Now()
	vk, verifier := testutil.NewKey(t)
	for _, tc := range []struct {
		ttl  time.Duration
		keep bool
	}{{MaxKeptLifetime, true}, {MaxKeptLifetime + time.Second, false}, {100 * 365 * 24 * time.Hour, false}} {
		env := SealTest(vk, n.ID(), false, now, tc.ttl)
		a, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before, err := n.store.List(Received, "")
		if err != nil {
			t.Fatal(err)
		}
		n.recordReceived(protocol.ProverResult{Verifier: verifier, Attestation: a, Envelope: env, Reason: a.Reason})
		after, err := n.store.List(Received, "")
		if err != nil {
			t.Fatal(err)
		}
		if stored := len(after) - len(before); stored != map[bool]int{true: 1, false: 0}[tc.keep] {
			t.Errorf("ttl %s: %d records stored", tc.ttl, stored)
		}
		n.trust.mu.RLock()
		r := n.trust.self[verifier]
		n.trust.mu.RUnlock()
		if indexed := r != nil && r.expiresAt.Equal(a.ExpiresAt); indexed != tc.keep {
			t.Errorf("ttl %s: indexed %v, want %v", tc.ttl, indexed, tc.keep)
		}
		// Gossip: about a third party, published by its issuer.
		_, subject := testutil.NewKey(t)
		g := SealTest(vk, subject, true, now, tc.ttl)
		want := map[bool]pubsub.ValidationResult{true: pubsub.ValidationAccept, false: pubsub.ValidationIgnore}[tc.keep]
		if got := n.validateGossip(context.Background(), verifier, gossipMsg(g, verifier)); got != want {
			t.Errorf("ttl %s: gossip %v, want %v", tc.ttl, got, want)
		}
		if res, _ := LearnEnvelope(n, g, ViaGossip, verifier); (res == "lifetime") == tc.keep {
			t.Errorf("ttl %s: learn %q", tc.ttl, res)
		}
	}
}

// The records about this node held in memory stay within MaxSelfRecords:
// an expired one goes first, then the oldest of an issuer not admitted
// directly; expired ones are pruned.
func TestSelfRecordsBounded(t *testing.T) {
	n := newBareNode(t, Config{})
	selfKey := n.host.Peerstore().PrivKey(n.ID())
	now := time.Now()
	rec := func(issued time.Time, ttl time.Duration) (*protocol.Attestation, []byte) {
		k, _ := testutil.NewKey(t)
		env := SealTest(k, n.ID(), true, issued, ttl)
		a, _, err := protocol.VerifyAttestation(env, protocol.VerifyOptions{Now: issued})
		if err != nil {
			t.Fatal(err)
		}
		return a, env
	}
	// A friend (admitted directly) with the oldest record, then strangers.
	friendKey, friend := testutil.NewKey(t)
	if err := IssueEnvelope(n, SealTest(selfKey, friend, true, now, time.Hour)); err != nil {
		t.Fatal(err)
	}
	fenv := SealTest(friendKey, n.ID(), true, now.Add(-time.Hour), 2*time.Hour)
	fa, _, err := protocol.VerifyAttestation(fenv, protocol.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.indexReceived(fa, fenv)
	expiring, eenv := rec(now.Add(-time.Hour), time.Hour+time.Minute) // expires in a minute
	n.indexReceived(expiring, eenv)
	var oldestStranger peer.ID
	for i := 0; i < MaxSelfRecords-2; i++ {
		a, env := rec(now.Add(-time.Duration(MaxSelfRecords-i)*time.Second), 3*time.Hour)
		if i == 0 {
			oldestStranger = a.Issuer
		}
		n.indexReceived(a, env)
	}
	count := func() int {
		n.trust.mu.RLock()
		defer n.trust.mu.RUnlock()
		return len(n.trust.self)
	}
	has := func(p peer.ID) bool {
		n.trust.mu.RLock()
		defer n.trust.mu.RUnlock()
		return n.trust.self[p] != nil
	}
	if count() != MaxSelfRecords {
		t.Fatalf("%d records held, want %d", count(), MaxSelfRecords)
	}
	// Full: once the record about to expire has expired it goes first.
	later := now.Add(2 * time.Minute)
	n.trust.mu.Lock()
	n.trust.putSelfLocked(newTrustRec(must(rec(later, time.Hour)).a, SourceReceived), later)
	n.trust.mu.Unlock()
	if has(expiring.Issuer) || count() != MaxSelfRecords {
		t.Fatalf("expired record kept (%v) or count %d", has(expiring.Issuer), count())
	}
	// Then the oldest stranger, not the older friend.
	a, env := rec(now, time.Hour)
	n.indexReceived(a, env)
	if !has(friend) || has(oldestStranger) || !has(a.Issuer) || count() != MaxSelfRecords {
		t.Fatalf("friend %v, oldest stranger %v, newcomer %v, count %d", has(friend), has(oldestStranger), has(a.Issuer), count())
	}
	// Pruning drops the expired ones.
	n.pruneLearned(now.Add(3 * time.Hour))
	if count() != 0 {
		t.Fatalf("%d records about us left after all expired", count())
	}
}

type recPair struct {
	a   *protocol.Attestation
	env []byte
}

func must(a *protocol.Attestation, env []byte) recPair { return recPair{a, env} }

// An RPC that publishes data larger than any attestation is dropped whole
// before its messages are queued for validation; one within the cap
// passes to the validator.
func TestInspectGossipRPC(t *testing.T) {
	rpc := func(sizes ...int) *pubsub.RPC {
		r := &pubsub.RPC{}
		for _, n := range sizes {
			r.Publish = append(r.Publish, &pb.Message{Data: make([]byte, n)})
		}
		return r
	}
	if err := inspectGossipRPC("", rpc(100, protocol.MaxEnvelopeBytes)); err != nil {
		t.Fatalf("records within the cap: %v", err)
	}
	if err := inspectGossipRPC("", rpc(100, protocol.MaxEnvelopeBytes+1)); !errors.Is(err, errGossipOversized) {
		t.Fatalf("an oversized message: %v", err)
	}
	if err := inspectGossipRPC("", &pubsub.RPC{}); err != nil {
		t.Fatalf("control only: %v", err)
	}
}

// Records about one subject by issuers this node does not admit directly
// stop at MaxLearnedPerSubject (an admission check walks them); a
// directly admitted issuer's record still gets in.
func TestLearnedPerSubjectCap(t *testing.T) {
	n := newBareNode(t, Config{})
	now := time.Now()
	_, subject := testutil.NewKey(t)
	n.trust.mu.Lock()
	m := map[peer.ID]*trustRec{}
	for i := range MaxLearnedPerSubject {
		id := peer.ID(fmt.Sprintf("sybil-%d", i))
		m[id] = &trustRec{issuer: id, subject: subject, accepted: true, issuedAt: now, expiresAt: now.Add(time.Hour)}
		n.trust.perIssuer[id]++
		n.trust.nLearned++
	}
	n.trust.learned[subject] = m
	n.trust.mu.Unlock()
	ik, issuer := testutil.NewKey(t)
	if res, err := LearnEnvelope(n, SealTest(ik, subject, true, now, time.Hour), ViaGossip, issuer); err != nil || res != "capacity" {
		t.Fatalf("one more stranger's record about the subject: %q %v", res, err)
	}
	if err := IssueEnvelope(n, SealTest(n.host.Peerstore().PrivKey(n.ID()), issuer, true, now, time.Hour)); err != nil {
		t.Fatal(err)
	}
	if res, _ := LearnEnvelope(n, SealTest(ik, subject, true, now, time.Hour), ViaGossip, issuer); res != "learned" {
		t.Fatalf("a directly admitted issuer's record: %q", res)
	}
}

// A node refuses to issue records that other nodes would not keep.
func TestAttestationTTLBounded(t *testing.T) {
	k, _ := testutil.NewKey(t)
	for _, ttl := range []time.Duration{-time.Second, MaxKeptLifetime + time.Second} {
		n, err := New(Config{Key: k, StorePath: filepath.Join(t.TempDir(), "s.db"), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, AttestationTTL: ttl})
		if err == nil {
			n.Close()
			t.Errorf("TTL %s accepted", ttl)
		}
	}
	newBareNode(t, Config{AttestationTTL: MaxKeptLifetime})
}
