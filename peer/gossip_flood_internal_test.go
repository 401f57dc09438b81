package peer

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
)

// Gossip rates of issuers a node does not admit directly (spec/trust.md
// §3.4, §3.6): one version per (issuer, subject) per LearnedVersionEvery
// (a retraction on an allowance of its own), a token bucket per issuer,
// one record about the node per issuer per interval, and a persist queue
// that never holds up delivery.

// testClock is a settable trust clock, safe for the node's goroutines.
type testClock struct{ ns atomic.Int64 }

func newTestClock(n *Node, at time.Time) *testClock {
	c := &testClock{}
	c.ns.Store(at.UnixNano())
	SetTrustClock(n, c.now)
	return c
}

func (c *testClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// validateOnly runs env through the validator only (accepted for
// forwarding, not yet delivered) and returns the reason and the
// attestation when accepted.
func validateOnly(t *testing.T, n *Node, env []byte, author peer.ID) (string, *protocol.Attestation) {
	t.Helper()
	res, reason, a := n.checkGossip(env, author)
	if res != pubsub.ValidationAccept {
		return reason, nil
	}
	return reason, a
}

// commits is the node's store commits so far.
func commits(n *Node) uint64 { c, _ := n.store.Commits(); return c }

func directlyAdmit(t *testing.T, n *Node, p peer.ID, now time.Time) {
	t.Helper()
	if err := IssueEnvelope(n, SealTest(n.host.Peerstore().PrivKey(n.ID()), p, true, now, 24*time.Hour)); err != nil {
		t.Fatal(err)
	}
}

// One free issuer key re-signs its record about one subject with the
// expiry one second later each time: every copy is a new gossip message
// (content-addressed ID) and a newer version of the pair. Only the first
// is accepted (forwarded), learned and stored; a newer version passes once
// LearnedVersionEvery has gone by, a retraction at once, and versions
// validated before the first is delivered find the pair taken. A directly
// admitted issuer keeps immediate supersede.
func TestGossipSupersedeFlood(t *testing.T) {
	n := newBareNode(t, Config{})
	start := time.Now()
	clock := newTestClock(n, start)
	ik, issuer := testutil.NewKey(t)
	_, subject := testutil.NewKey(t)
	base := start.Add(-time.Minute)
	before := commits(n)
	const N = 500
	accepted, learned := 0, 0
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; i < N && time.Now().Before(deadline); i++ {
		env := SealTest(ik, subject, true, base, time.Hour+time.Duration(i)*time.Second)
		reason, res := gossipOfferReason(t, n, env, issuer)
		switch {
		case res == "learned":
			accepted++
			learned++
		case res != "":
			accepted++
		case i > 0 && reason != gossipVersionRate:
			t.Fatalf("version %d ignored as %q, want %q", i, reason, gossipVersionRate)
		}
	}
	t.Logf("%d re-signed copies of one (issuer, subject) record: %d accepted for forwarding, %d learned", N, accepted, learned)
	if accepted != 1 || learned != 1 {
		t.Fatalf("%d copies accepted, %d learned; want 1 and 1", accepted, learned)
	}

	// Two versions validated before either is delivered: the second finds
	// the pair taken, the first is learned on delivery.
	clock.advance(LearnedVersionEvery)
	va := SealTest(ik, subject, true, base, 2*time.Hour)
	vb := SealTest(ik, subject, true, base, 2*time.Hour+time.Second)
	reason, a := validateOnly(t, n, va, issuer)
	if a == nil {
		t.Fatalf("a version after the interval: %q", reason)
	}
	if reason, _ := validateOnly(t, n, vb, issuer); reason != gossipVersionRate {
		t.Fatalf("a second version in flight: %q", reason)
	}
	if res := n.learn(a, va, ViaGossip, issuer, issuer); res != learnedNew {
		t.Fatalf("delivering the accepted version: %v", res)
	}
	// A retraction passes at once, on its own allowance, and only one.
	r1 := SealTest(ik, subject, false, base.Add(time.Second), time.Hour)
	r2 := SealTest(ik, subject, false, base.Add(2*time.Second), time.Hour)
	reason, ra := validateOnly(t, n, r1, issuer)
	if ra == nil || reason != gossipSupersedes {
		t.Fatalf("a retraction right after a version: %q", reason)
	}
	if reason, _ := validateOnly(t, n, r2, issuer); reason != gossipVersionRate {
		t.Fatalf("a second retraction in flight: %q", reason)
	}
	if res := n.learn(ra, r1, ViaGossip, issuer, issuer); res != learnedNew {
		t.Fatalf("delivering the retraction: %v", res)
	}
	// The issuer's re-acceptance waits for the interval.
	again := SealTest(ik, subject, true, base.Add(3*time.Second), time.Hour)
	if reason, _ := gossipOfferReason(t, n, again, issuer); reason != gossipVersionRate {
		t.Fatalf("a re-acceptance right after the retraction: %q", reason)
	}
	clock.advance(LearnedVersionEvery)
	if _, res := gossipOfferReason(t, n, again, issuer); res != "learned" {
		t.Fatalf("a re-acceptance after the interval: %q", res)
	}
	// The store holds the newest version, written once per accepted one.
	var stored []Learned
	for i := 0; i < 250; i++ {
		ls, _, err := n.store.ListLearned(subject)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) == 1 && ls[0].Attestation.IssuedAt.Equal(base.Add(3*time.Second).UTC().Truncate(time.Second)) {
			stored = ls
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if stored == nil {
		t.Fatal("the newest version was not stored")
	}
	if c := commits(n) - before; c > 4 {
		t.Fatalf("%d store commits for 4 learned versions", c)
	}

	// An issuer this node admits directly supersedes at once.
	dk, direct := testutil.NewKey(t)
	directlyAdmit(t, n, direct, base)
	for i := 0; i < 20; i++ {
		env := SealTest(dk, subject, true, base, time.Hour+time.Duration(i)*time.Second)
		if reason, res := gossipOfferReason(t, n, env, direct); res != "learned" {
			t.Fatalf("directly admitted issuer, version %d: %q %q", i, reason, res)
		}
	}
}

// gossipOfferReason validates env as published by author (the reason of
// checkGossip) and, when accepted, delivers it; res is the learn result,
// "" when not accepted.
func gossipOfferReason(t *testing.T, n *Node, env []byte, author peer.ID) (reason, res string) {
	t.Helper()
	reason, a := validateOnly(t, n, env, author)
	if a == nil {
		return reason, ""
	}
	return reason, n.learn(a, env, ViaGossip, author, author).String()
}

// Presented records are held to the same interval per pair.
func TestPresentedVersionInterval(t *testing.T) {
	n := newBareNode(t, Config{})
	start := time.Now()
	clock := newTestClock(n, start)
	ik, _ := testutil.NewKey(t)
	_, subject := testutil.NewKey(t)
	base := start.Add(-time.Minute)
	for i, want := range []string{"learned", "version_rate", "version_rate"} {
		if res, err := LearnEnvelope(n, SealTest(ik, subject, true, base, time.Hour+time.Duration(i)*time.Second), ViaPresentation, subject); err != nil || res != want {
			t.Fatalf("version %d: %q %v, want %q", i, res, err, want)
		}
	}
	clock.advance(LearnedVersionEvery)
	if res, _ := LearnEnvelope(n, SealTest(ik, subject, true, base, 2*time.Hour), ViaPresentation, subject); res != "learned" {
		t.Fatalf("after the interval: %q", res)
	}
}

// One issuer not admitted directly gets LearnedIssuerBurst learnable
// records accepted, then one per LearnedIssuerEvery, whatever their
// subjects; an issuer admitted directly is not held to it.
func TestGossipIssuerBucket(t *testing.T) {
	n := newBareNode(t, Config{})
	start := time.Now()
	clock := newTestClock(n, start)
	base := start.Add(-time.Minute)
	ik, issuer := testutil.NewKey(t)
	record := func(k crypto.PrivKey) []byte {
		_, subject := testutil.NewKey(t)
		return SealTest(k, subject, true, base, time.Hour)
	}
	for i := 0; i < LearnedIssuerBurst; i++ {
		if reason, a := validateOnly(t, n, record(ik), issuer); a == nil {
			t.Fatalf("record %d of the burst: %q", i, reason)
		}
	}
	if reason, a := validateOnly(t, n, record(ik), issuer); a != nil || reason != gossipIssuerRate {
		t.Fatalf("one over the burst: %q", reason)
	}
	clock.advance(LearnedIssuerEvery)
	if reason, a := validateOnly(t, n, record(ik), issuer); a == nil {
		t.Fatalf("after one refill: %q", reason)
	}
	if reason, _ := validateOnly(t, n, record(ik), issuer); reason != gossipIssuerRate {
		t.Fatalf("a second one after one refill: %q", reason)
	}
	dk, direct := testutil.NewKey(t)
	directlyAdmit(t, n, direct, base)
	for i := 0; i < LearnedIssuerBurst+8; i++ {
		if reason, a := validateOnly(t, n, record(dk), direct); a == nil {
			t.Fatalf("directly admitted issuer, record %d: %q", i, reason)
		}
	}
}

// Acceptances of this node by an issuer it does not admit directly are
// forwarded once per issuer per LearnedVersionEvery; a directly admitted
// issuer's newer record about us is learned at once.
func TestGossipAboutUsOncePerInterval(t *testing.T) {
	n := newBareNode(t, Config{})
	start := time.Now()
	clock := newTestClock(n, start)
	base := start.Add(-time.Minute)
	sk, sybil := testutil.NewKey(t)
	for i, want := range []string{gossipAboutUs, gossipAboutUsRate, gossipAboutUsRate} {
		env := SealTest(sk, n.ID(), true, base, time.Hour+time.Duration(i)*time.Second)
		if reason, _ := validateOnly(t, n, env, sybil); reason != want {
			t.Fatalf("stranger's record about us %d: %q, want %q", i, reason, want)
		}
	}
	ok, other := testutil.NewKey(t)
	if reason, _ := validateOnly(t, n, SealTest(ok, n.ID(), true, base, time.Hour), other); reason != gossipAboutUs {
		t.Fatalf("another stranger's first record about us: %q", reason)
	}
	if reason, _ := validateOnly(t, n, SealTest(sk, n.ID(), false, base, time.Hour), sybil); reason != gossipNotAccepted {
		t.Fatalf("stranger's rejection of us: %q", reason)
	}
	clock.advance(LearnedVersionEvery)
	if reason, _ := validateOnly(t, n, SealTest(sk, n.ID(), true, base, 2*time.Hour), sybil); reason != gossipAboutUs {
		t.Fatalf("after the interval: %q", reason)
	}
	fk, friend := testutil.NewKey(t)
	directlyAdmit(t, n, friend, base)
	for i := 0; i < 5; i++ {
		env := SealTest(fk, n.ID(), true, base, time.Hour+time.Duration(i)*time.Second)
		if reason, res := gossipOfferReason(t, n, env, friend); res != "learned" {
			t.Fatalf("directly admitted issuer's record about us %d: %q %q", i, reason, res)
		}
	}
}

// The limiter's tables stay within gossipIssuersTracked, whatever the
// number of issuers.
func TestGossipLimiterBounded(t *testing.T) {
	var l gossipLimiter
	now := time.Now()
	for i := 0; i < 3*gossipIssuersTracked; i++ {
		p := peer.ID(fmt.Sprintf("issuer-%d", i))
		if !l.allowIssuer(p, now) || !l.allowAboutUs(p, now) {
			t.Fatalf("fresh issuer %d refused", i)
		}
		if len(l.issuers) > gossipIssuersTracked || len(l.aboutUs) > gossipIssuersTracked {
			t.Fatalf("tables at %d and %d issuers", len(l.issuers), len(l.aboutUs))
		}
	}
}

// A full persist queue does not hold up learning (gossip delivery): the
// record is indexed, its write dropped and counted.
func TestLearnPersistQueueFullDoesNotBlock(t *testing.T) {
	n := newBareNode(t, Config{})
	hold, held := make(chan struct{}), make(chan struct{}, 1)
	stall := func() {
		select {
		case held <- struct{}{}:
		default:
		}
		<-hold
	}
	n.trust.beforePersist.Store(&stall)
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
		}
	}
	t.Cleanup(release)
	now := time.Now()
	ik, issuer := testutil.NewKey(t)
	directlyAdmit(t, n, issuer, now) // not held to the caps
	learnOne := func(i int) learnResult {
		a := MakeTestAttestation(ik, peer.ID(fmt.Sprintf("subject-%d", i)), true, now, time.Hour)
		return n.learn(a, []byte("envelope"), ViaGossip, issuer, issuer)
	}
	if res := learnOne(0); res != learnedNew {
		t.Fatalf("first: %v", res)
	}
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer did not pick the first record")
	}
	const more = learnedQueue + 10
	done := make(chan int, 1)
	go func() {
		k := 0
		for i := 1; i <= more; i++ {
			if learnOne(i) == learnedNew {
				k++
			}
		}
		done <- k
	}()
	select {
	case k := <-done:
		if k != more {
			t.Fatalf("%d of %d learned", k, more)
		}
	case <-time.After(20 * time.Second):
		release()
		t.Fatal("learn blocked on a full persist queue")
	}
	if d := n.learnedDropped(); d != 10 {
		t.Fatalf("%d writes dropped, want 10", d)
	}
	release()
}

// A rejection of this node by an issuer it does not admit directly is
// ignored (not_accepted, trust.md §3.4 step 8b), even when it retracts an
// acceptance the node received from that issuer in a session: the node
// takes records about itself from third parties only when it admits their
// issuer directly.
func TestGossipAboutUsRejectionIgnored(t *testing.T) {
	n := newBareNode(t, Config{})
	start := time.Now()
	newTestClock(n, start)
	base := start.Add(-time.Hour)
	xk, x := testutil.NewKey(t)
	acc := SealTest(xk, n.ID(), true, base, 2*time.Hour)
	a, _, err := protocol.VerifyAttestation(acc, protocol.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.indexReceived(a, acc)
	rej := SealTest(xk, n.ID(), false, base.Add(time.Minute), 2*time.Hour)
	if reason, _ := validateOnly(t, n, rej, x); reason != gossipNotAccepted {
		t.Fatalf("rejection of us retracting a held acceptance: %q, want %q", reason, gossipNotAccepted)
	}
}
