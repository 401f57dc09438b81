package peer_test

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/internal/testutil/testnode"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/skill"
)

// trustOpts configures a node for the trust, gossip and admission tests.
type trustOpts struct {
	brain   testutil.Brain // answers challenges (nil: declines)
	quorum  int
	gossip  bool
	block   time.Duration
	storeAt string
	key     crypto.PrivKey
	reg     prometheus.Registerer
	// require is the node's RequireSource (default AnySource: these
	// tests serve the example corpus); kind its SourceKind.
	require skill.SourceKind
	kind    skill.SourceKind
	logger  *slog.Logger
}

type tnode struct {
	*peer.Node
	key crypto.PrivKey
}

func startTrustNode(t *testing.T, sets []*skill.Set, o trustOpts) *tnode {
	t.Helper()
	if o.key == nil {
		o.key, _, _ = crypto.GenerateEd25519Key(rand.Reader)
	}
	if o.require == "" {
		o.require = peer.AnySource
	}
	n := testnode.New(t, testnode.Options{
		Config: peer.Config{
			Key: o.key, StorePath: o.storeAt,
			TrustQuorum: o.quorum, Gossip: o.gossip, BlockRejected: o.block, Metrics: o.reg,
			RequireSource: o.require, SourceKind: o.kind, Logger: o.logger,
		},
		Sets: sets, Brain: o.brain, Memory: true,
	})
	return &tnode{Node: n, key: o.key}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// mustAccept runs one verifier session of v against p and requires an
// acceptance.
func mustAccept(t *testing.T, v, p *tnode) {
	t.Helper()
	if got := verifyOnce(t, v.Node, p.Node); !got.Accepted {
		t.Fatalf("%s did not accept %s: %+v", v.ID(), p.ID(), got)
	}
}

func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// present connects from to to and presents from's attestations.
func present(t *testing.T, from, to *tnode) {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	if err := from.Host().Connect(ctx, addrInfo(to.Node)); err != nil {
		t.Fatal(err)
	}
	if err := from.Present(ctx, to.ID()); err != nil {
		t.Fatal(err)
	}
}

const echoProto = "/acaptcha-test/echo/1.0.0"

func serveEcho(n *peer.Node) {
	n.HandleAdmitted(echoProto, func(s network.Stream) {
		defer s.Close()
		_ = s.SetDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 64)
		k, err := s.Read(buf)
		if err != nil && !errors.Is(err, io.EOF) {
			_ = s.Reset()
			return
		}
		_, _ = s.Write(buf[:k])
	})
}

// callEcho calls the echo protocol of server from client and returns the
// gate reason when the stream was refused ("" when served).
func callEcho(t *testing.T, client, server *tnode) string {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	if err := client.Host().Connect(ctx, addrInfo(server.Node)); err != nil {
		t.Fatal(err)
	}
	s, err := client.Host().NewStream(ctx, server.ID(), echoProto)
	if err != nil {
		if r, ok := peer.GateReason(err); ok {
			return r
		}
		t.Fatalf("open echo stream: %v", err)
	}
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.Write([]byte("ping")); err != nil {
		if r, ok := peer.GateReason(err); ok {
			return r
		}
		t.Fatalf("write: %v", err)
	}
	_ = s.CloseWrite()
	got, err := io.ReadAll(s)
	if err != nil {
		if r, ok := peer.GateReason(err); ok {
			return r
		}
		t.Fatalf("read: %v", err)
	}
	if string(got) != "ping" {
		t.Fatalf("echo returned %q", got)
	}
	return ""
}

func TestGatedProtocolRefusesUnattestedServesAttested(t *testing.T) {
	sets := dependentSets(t)
	oracle := testutil.NewOracle(sets...)
	reg := prometheus.NewRegistry()
	srv := startTrustNode(t, sets, trustOpts{reg: reg})
	attested := startTrustNode(t, sets, trustOpts{brain: oracle})
	stranger := startTrustNode(t, sets, trustOpts{brain: oracle})
	serveEcho(srv.Node)

	if r := callEcho(t, stranger, srv); r != peer.NotAdmittedUnattested {
		t.Fatalf("stranger: gate reason %q, want %q", r, peer.NotAdmittedUnattested)
	}
	mustAccept(t, srv, attested)
	if adm := srv.Admission(attested.ID()); !adm.Admitted || adm.Via != peer.AdmittedDirect {
		t.Fatalf("admission of the attested peer: %+v", adm)
	}
	if r := callEcho(t, attested, srv); r != "" {
		t.Fatalf("attested peer refused: %q", r)
	}
	if r := callEcho(t, stranger, srv); r != peer.NotAdmittedUnattested {
		t.Fatalf("stranger again: %q", r)
	}
	st := srv.Stats()
	if st.AdmissionsGranted != 1 || st.AdmissionsDenied != 2 || st.SessionsVerified != 1 || st.AttestationsIssued.Accepted != 1 {
		t.Fatalf("stats: %+v", st)
	}
	// The decisions are kept for `acaptcha peers`.
	var sawStranger bool
	for _, pi := range srv.Peers() {
		if pi.Peer == stranger.ID() {
			sawStranger = true
			if pi.LastGate == nil || pi.LastGate.Admitted || pi.LastGate.Reason != peer.NotAdmittedUnattested || pi.LastGate.Streams != 2 {
				t.Fatalf("stranger's gate decision: %+v", pi.LastGate)
			}
		}
		if pi.Peer == attested.ID() && (pi.Direct == nil || !pi.Direct.Accepted || !pi.Admission.Admitted) {
			t.Fatalf("attested peer's entry: %+v", pi)
		}
	}
	if !sawStranger {
		t.Fatal("stranger missing from Peers")
	}
	// And counted in the metrics.
	if v := counterValue(t, reg, "acaptcha_admission_decisions_total", map[string]string{"decision": "denied", "reason": "unattested"}); v != 2 {
		t.Fatalf("denied decisions metric = %v", v)
	}
	if v := counterValue(t, reg, "acaptcha_attestations_issued_total", map[string]string{"verdict": "accepted", "reason": "ok"}); v != 1 {
		t.Fatalf("issued metric = %v", v)
	}
}

func TestExpiredOrRevokedAttestationStopsAdmission(t *testing.T) {
	sets := dependentSets(t)
	oracle := testutil.NewOracle(sets...)
	srv := startTrustNode(t, sets, trustOpts{})
	a := startTrustNode(t, sets, trustOpts{brain: oracle})
	b := startTrustNode(t, sets, trustOpts{brain: oracle})
	serveEcho(srv.Node)
	mustAccept(t, srv, a)
	mustAccept(t, srv, b)
	if r := callEcho(t, a, srv); r != "" {
		t.Fatalf("a refused before expiry: %q", r)
	}

	// Expiry: move the server's admission clock past the default TTL.
	later := time.Now().Add(25 * time.Hour)
	peer.SetTrustClock(srv.Node, func() time.Time { return later })
	if adm := srv.Admission(a.ID()); adm.Admitted || adm.Reason != peer.NotAdmittedExpired {
		t.Fatalf("after expiry: %+v", adm)
	}
	if r := callEcho(t, a, srv); r != peer.NotAdmittedExpired {
		t.Fatalf("after expiry the gate said %q", r)
	}
	peer.SetTrustClock(srv.Node, time.Now)

	// Revocation: the record is still valid, admission stops anyway.
	if r := callEcho(t, b, srv); r != "" {
		t.Fatalf("b refused before revocation: %q", r)
	}
	if err := srv.Revoke(b.ID()); err != nil {
		t.Fatal(err)
	}
	if adm := srv.Admission(b.ID()); adm.Admitted || adm.Reason != peer.NotAdmittedRevoked {
		t.Fatalf("after revocation: %+v", adm)
	}
	if r := callEcho(t, b, srv); r != peer.NotAdmittedRevoked {
		t.Fatalf("after revocation the gate said %q", r)
	}
	if srv.Host().ConnManager().IsProtected(b.ID(), "acaptcha") {
		t.Fatal("revoked peer still protected")
	}
	// a is unaffected by b's revocation.
	if adm := srv.Admission(a.ID()); !adm.Admitted {
		t.Fatalf("a: %+v", adm)
	}
}

// TestQuorumAdmission: m2 (K=2) and m3 (K=3) verify issuers directly; the
// issuers (and one issuer m2 never verified) verify the subject, which
// presents its attestations. Real sessions throughout; provers prove
// before they verify, so no challenge can come back to its issuer.
func TestQuorumAdmission(t *testing.T) {
	sets := dependentSets(t)
	oracle := testutil.NewOracle(sets...)
	m2 := startTrustNode(t, sets, trustOpts{quorum: 2})
	m3 := startTrustNode(t, sets, trustOpts{quorum: 3})
	var issuers []*tnode
	for range 3 {
		issuers = append(issuers, startTrustNode(t, sets, trustOpts{brain: oracle}))
	}
	outsider := startTrustNode(t, sets, trustOpts{brain: oracle})
	subject := startTrustNode(t, sets, trustOpts{brain: oracle})
	for _, i := range issuers[:2] {
		mustAccept(t, m2, i)
	}
	for _, i := range issuers {
		mustAccept(t, m3, i)
	}
	for _, i := range issuers[:2] {
		mustAccept(t, i, subject)
	}
	mustAccept(t, outsider, subject)
	eventually(t, 5*time.Second, "the subject to hold 3 attestations", func() bool {
		es, _ := subject.Store().List(peer.Received, "")
		return len(es) == 3
	})

	for _, m := range []*tnode{m2, m3} {
		if adm := m.Admission(subject.ID()); adm.Admitted {
			t.Fatalf("admitted before any presentation: %+v", adm)
		}
		present(t, subject, m)
	}
	want := []lpeer.ID{issuers[0].ID(), issuers[1].ID()}
	slices.Sort(want)
	if adm := m2.Admission(subject.ID()); !adm.Admitted || adm.Via != peer.AdmittedQuorum || !slices.Equal(adm.Issuers, want) {
		t.Fatalf("K=2 with two verified issuers: %+v", adm)
	}
	if adm := m3.Admission(subject.ID()); adm.Admitted || adm.Reason != peer.NotAdmittedUnattested {
		t.Fatalf("K=3 with two verified issuers: %+v", adm)
	}
	if st := m2.Stats(); st.LearnedPresentation != 3 || st.PresentationsReceived != 1 {
		t.Fatalf("m2 stats: %+v", st)
	}

	// The third issuer verifies the subject; a new presentation carries it.
	mustAccept(t, issuers[2], subject)
	eventually(t, 5*time.Second, "the fourth attestation", func() bool {
		es, _ := subject.Store().List(peer.Received, "")
		return len(es) == 4
	})
	present(t, subject, m3)
	if adm := m3.Admission(subject.ID()); !adm.Admitted || adm.Via != peer.AdmittedQuorum || len(adm.Issuers) != 3 {
		t.Fatalf("K=3 with three verified issuers: %+v", adm)
	}

	// A newer rejection by issuer 0 supersedes its acceptance.
	rej := peer.SealTest(issuers[0].key, subject.ID(), false, time.Now().Add(2*time.Second), time.Hour)
	if res, err := peer.LearnEnvelope(m2.Node, rej, peer.ViaGossip, issuers[0].ID()); err != nil || res != "learned" {
		t.Fatalf("learning the rejection: %q %v", res, err)
	}
	if adm := m2.Admission(subject.ID()); adm.Admitted {
		t.Fatalf("still admitted after issuer 0 retracted: %+v", adm)
	}
	// An older acceptance does not bring it back.
	old := peer.SealTest(issuers[0].key, subject.ID(), true, time.Now().Add(-time.Minute), time.Hour)
	if res, _ := peer.LearnEnvelope(m2.Node, old, peer.ViaGossip, issuers[0].ID()); res != "stale" {
		t.Fatalf("older acceptance: %q", res)
	}

	// Revoking an issuer removes its weight.
	if err := m3.Revoke(issuers[1].ID()); err != nil {
		t.Fatal(err)
	}
	if adm := m3.Admission(subject.ID()); adm.Admitted {
		t.Fatalf("K=3 admitted after revoking an issuer: %+v", adm)
	}
}

func TestRestartKeepsAdmissions(t *testing.T) {
	sets := dependentSets(t)
	oracle := testutil.NewOracle(sets...)
	dir := t.TempDir()
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	opts := trustOpts{quorum: 1, key: key, storeAt: filepath.Join(dir, "m.db")}
	m := startTrustNode(t, sets, opts)
	a := startTrustNode(t, sets, trustOpts{brain: oracle})
	r := startTrustNode(t, sets, trustOpts{brain: oracle})
	i := startTrustNode(t, sets, trustOpts{brain: oracle})
	s := startTrustNode(t, sets, trustOpts{brain: oracle})
	mustAccept(t, m, a)
	mustAccept(t, m, r)
	mustAccept(t, m, i)
	mustAccept(t, i, s)
	eventually(t, 5*time.Second, "s to hold i's attestation", func() bool {
		es, _ := s.Store().List(peer.Received, i.ID())
		return len(es) == 1
	})
	present(t, s, m)
	if err := m.Revoke(r.ID()); err != nil {
		t.Fatal(err)
	}
	check := func(m *tnode) {
		t.Helper()
		if adm := m.Admission(a.ID()); !adm.Admitted || adm.Via != peer.AdmittedDirect {
			t.Fatalf("a: %+v", adm)
		}
		if adm := m.Admission(r.ID()); adm.Admitted || adm.Reason != peer.NotAdmittedRevoked {
			t.Fatalf("r: %+v", adm)
		}
		if adm := m.Admission(s.ID()); !adm.Admitted || adm.Via != peer.AdmittedQuorum || len(adm.Issuers) != 1 || adm.Issuers[0] != i.ID() {
			t.Fatalf("s: %+v", adm)
		}
	}
	check(m)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := startTrustNode(t, sets, opts)
	check(m2)
	var found bool
	for _, pi := range m2.Peers() {
		if pi.Peer != s.ID() {
			continue
		}
		found = true
		if len(pi.Vouchers) != 1 || pi.Vouchers[0].Source != peer.SourcePresentation || pi.Vouchers[0].From != s.ID() || !pi.Vouchers[0].Counts || pi.Vouchers[0].LearnedAt == nil {
			t.Fatalf("provenance after restart: %+v", pi.Vouchers)
		}
	}
	if !found {
		t.Fatal("s missing from Peers after restart")
	}
}

func TestGossipSpreadsAttestationsToQuorum(t *testing.T) {
	sets := dependentSets(t)
	oracle := testutil.NewOracle(sets...)
	// c admits with a quorum of one: a, whom c verified, vouches for b on
	// gossip; c never challenges b.
	c := startTrustNode(t, sets, trustOpts{quorum: 1, gossip: true})
	a := startTrustNode(t, sets, trustOpts{brain: oracle, gossip: true})
	b := startTrustNode(t, sets, trustOpts{brain: oracle, gossip: true})
	ctx := ctxT(t, 30*time.Second)
	for _, pair := range [][2]*tnode{{a, b}, {a, c}, {b, c}} {
		if err := pair[0].Host().Connect(ctx, addrInfo(pair[1].Node)); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []*tnode{a, b, c} {
		eventually(t, 10*time.Second, "gossip peers", func() bool { return len(n.GossipPeers()) == 2 })
	}
	mustAccept(t, c, a)
	mustAccept(t, a, b)
	eventually(t, 10*time.Second, "c to admit b through gossip", func() bool { return c.Admission(b.ID()).Admitted })
	adm := c.Admission(b.ID())
	if adm.Via != peer.AdmittedQuorum || len(adm.Issuers) != 1 || adm.Issuers[0] != a.ID() {
		t.Fatalf("c's admission of b: %+v", adm)
	}
	st := c.Stats()
	if st.GossipDelivered == 0 || st.LearnedGossip == 0 || st.GossipRejected != 0 {
		t.Fatalf("c's gossip stats: %+v", st)
	}
	if a.Stats().GossipPublished == 0 {
		t.Fatalf("a published nothing: %+v", a.Stats())
	}
	var prov *peer.AttestationRef
	for _, pi := range c.Peers() {
		if pi.Peer == b.ID() && len(pi.Vouchers) == 1 {
			prov = &pi.Vouchers[0]
		}
	}
	if prov == nil || prov.Source != peer.SourceGossip || (prov.From != a.ID() && prov.From != b.ID()) || (prov.Author != a.ID() && prov.Author != b.ID()) {
		t.Fatalf("provenance of the learned record: %+v", prov)
	}
}

func TestBlockRejectedPeer(t *testing.T) {
	sets := dependentSets(t)
	v := startTrustNode(t, sets, trustOpts{block: 2 * time.Second})
	p := startTrustNode(t, sets, trustOpts{brain: testutil.NewKeywordScript()})
	if got := verifyOnce(t, v.Node, p.Node); got.Accepted {
		t.Fatalf("keyword script accepted: %+v", got)
	}
	if adm := v.Admission(p.ID()); adm.Reason != peer.NotAdmittedBlocked {
		t.Fatalf("after rejection: %+v", adm)
	}
	eventually(t, 5*time.Second, "the rejected peer to be disconnected", func() bool {
		return v.Host().Network().Connectedness(p.ID()) != network.Connected
	})
	ctx := ctxT(t, 10*time.Second)
	if err := v.Host().Connect(ctx, addrInfo(p.Node)); err == nil {
		t.Fatal("dialing a blocked peer succeeded")
	}
	if err := p.Host().Connect(ctx, addrInfo(v.Node)); err == nil {
		// The dial may complete on the dialer's side before the gater
		// refuses it on the listener's; the connection must not survive.
		eventually(t, 2*time.Second, "the gated connection to drop", func() bool {
			return v.Host().Network().Connectedness(p.ID()) != network.Connected
		})
	}
	if v.Stats().Blocked != 1 {
		t.Fatalf("stats: %+v", v.Stats())
	}
	eventually(t, 5*time.Second, "the cooldown to end", func() bool {
		return v.Admission(p.ID()).Reason == peer.NotAdmittedRejected
	})
	if err := v.Host().Connect(ctx, addrInfo(p.Node)); err != nil {
		t.Fatalf("dial after the cooldown: %v", err)
	}
}

// TestCorpusBackedAcceptanceNotAdmittedByDefault runs real sessions on the
// example corpus (source corpus, rank 2): the verifier signs an acceptance
// that names its source, and under the default policy (hybrid) the
// acceptance does not admit the prover; a verifier requiring procedural
// admits it on the same kind of record.
func TestCorpusBackedAcceptanceNotAdmittedByDefault(t *testing.T) {
	sets := dependentSets(t)
	oracle := testutil.NewOracle(sets...)
	quiet := slog.New(slog.DiscardHandler)
	strict := startTrustNode(t, sets, trustOpts{require: peer.DefaultRequireSource, logger: quiet})
	lenient := startTrustNode(t, sets, trustOpts{require: skill.SourceProcedural, logger: quiet})
	prover := startTrustNode(t, sets, trustOpts{brain: oracle, logger: quiet})
	serveEcho(strict.Node)
	serveEcho(lenient.Node)

	mustAccept(t, strict, prover)
	es, err := strict.Store().List(peer.Issued, prover.ID())
	if err != nil || len(es) != 1 {
		t.Fatalf("issued attestations: %d, %v", len(es), err)
	}
	if a := es[0].Attestation; !a.Accepted || a.Provenance.Source != skill.SourceCorpus {
		t.Fatalf("issued record: accepted %v, provenance %+v", a.Accepted, a.Provenance)
	}
	if adm := strict.Admission(prover.ID()); adm.Admitted || adm.Reason != peer.NotAdmittedSource {
		t.Fatalf("default policy on a corpus-backed acceptance: %+v", adm)
	}
	if r := callEcho(t, prover, strict); r != peer.NotAdmittedSource {
		t.Fatalf("gate reason %q, want %q", r, peer.NotAdmittedSource)
	}
	// The prover received the same provenance in its copy.
	eventually(t, 5*time.Second, "the prover to store the verdict", func() bool {
		rs, err := prover.Store().List(peer.Received, strict.ID())
		return err == nil && len(rs) == 1 && rs[0].Attestation.Provenance.Source == skill.SourceCorpus
	})

	mustAccept(t, lenient, prover)
	if adm := lenient.Admission(prover.ID()); !adm.Admitted || adm.Via != peer.AdmittedDirect {
		t.Fatalf("procedural policy on a corpus-backed acceptance: %+v", adm)
	}
	if r := callEcho(t, prover, lenient); r != "" {
		t.Fatalf("refused under a procedural policy: %q", r)
	}
}
