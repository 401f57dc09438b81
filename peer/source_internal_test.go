package peer

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

// mustGenerator is the offline procedural generator.
func mustGenerator(t *testing.T) *procedural.Generator {
	t.Helper()
	g, err := procedural.New(procedural.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// stubSource serves nothing; it only gives a node something to verify
// with, so that its source kind matters.
type stubSource struct{ kind skill.SourceKind }

func (stubSource) Next(context.Context) (*skill.Set, error) { return nil, skill.ErrExhausted }
func (stubSource) Name() string                             { return "stub" }

// provenancerSource says its kind itself (skill.Provenancer).
type provenancerSource struct{ stubSource }

func (p provenancerSource) Kind() skill.SourceKind { return p.kind }

func TestParseRequireSource(t *testing.T) {
	for in, want := range map[string]skill.SourceKind{
		"": DefaultRequireSource, " Hybrid ": skill.SourceHybrid, "llm": skill.SourceLLM,
		"procedural": skill.SourceProcedural, "corpus": skill.SourceCorpus, "any": AnySource, "NONE": AnySource,
	} {
		if got, err := ParseRequireSource(in); err != nil || got != want {
			t.Errorf("ParseRequireSource(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"gpt", "unknown", "hybrid,llm"} {
		if _, err := ParseRequireSource(in); err == nil {
			t.Errorf("ParseRequireSource(%q) accepted", in)
		}
	}
	if DefaultRequireSource != skill.SourceHybrid {
		t.Fatalf("default policy %q, want hybrid", DefaultRequireSource)
	}
	k, _ := testutil.NewKey(t)
	if _, err := New(Config{Key: k, StorePath: t.TempDir() + "/s.db", ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, RequireSource: "gpt"}); err == nil {
		t.Fatal("New accepted require source \"gpt\"")
	}
}

// policyFixture is a node with quorum 1 that has verified issuer ids[0]
// directly on hybrid challenges and ids[1] only on procedural ones.
type policyFixture struct {
	n       *Node
	iks     []func(subject peer.ID, accepted bool, at time.Time, src skill.SourceKind) []byte
	ids     []peer.ID
	now     time.Time
	subject peer.ID
}

func newPolicyFixture(t *testing.T, require skill.SourceKind) *policyFixture {
	t.Helper()
	selfKey, _ := testutil.NewKey(t)
	n := newBareNode(t, Config{Key: selfKey, TrustQuorum: 1, RequireSource: require})
	f := &policyFixture{n: n, now: time.Now()}
	for range 2 {
		k, id := testutil.NewKey(t)
		f.ids = append(f.ids, id)
		f.iks = append(f.iks, func(subject peer.ID, accepted bool, at time.Time, src skill.SourceKind) []byte {
			return SealTestFrom(k, subject, accepted, at, time.Hour, src)
		})
	}
	for i, src := range []skill.SourceKind{skill.SourceHybrid, skill.SourceProcedural} {
		if err := IssueEnvelope(n, SealTestFrom(selfKey, f.ids[i], true, f.now, time.Hour, src)); err != nil {
			t.Fatal(err)
		}
	}
	_, f.subject = testutil.NewKey(t)
	return f
}

func (f *policyFixture) learn(t *testing.T, env []byte) {
	t.Helper()
	if res, err := LearnEnvelope(f.n, env, ViaGossip, f.subject); err != nil || res != learnedNew.String() {
		t.Fatalf("learn: %q, %v", res, err)
	}
}

func (f *policyFixture) voucher(t *testing.T, issuer peer.ID) AttestationRef {
	t.Helper()
	for _, pi := range f.n.Peers() {
		if pi.Peer != f.subject {
			continue
		}
		for _, v := range pi.Vouchers {
			if v.Issuer == issuer {
				return v
			}
		}
	}
	t.Fatalf("no voucher by %s", issuer)
	return AttestationRef{}
}

// TestDefaultQuorumIgnoresProceduralAttestation: under the default policy
// (hybrid) an acceptance on procedural challenges neither admits its
// subject directly nor counts toward the quorum, and an issuer we
// verified only on procedural challenges is no voucher.
func TestDefaultQuorumIgnoresProceduralAttestation(t *testing.T) {
	f := newPolicyFixture(t, "")
	n := f.n
	if n.RequireSource() != skill.SourceHybrid {
		t.Fatalf("default require source %q", n.RequireSource())
	}
	if adm := n.Admission(f.ids[0]); !adm.Admitted || adm.Via != AdmittedDirect {
		t.Fatalf("issuer verified on hybrid challenges: %+v", adm)
	}
	if adm := n.Admission(f.ids[1]); adm.Admitted || adm.Reason != NotAdmittedSource {
		t.Fatalf("issuer verified on procedural challenges: %+v", adm)
	}
	if GateCode(NotAdmittedSource) != ErrCodeSourceBelowMinimum {
		t.Fatalf("gate code %x", GateCode(NotAdmittedSource))
	}
	r, ok := GateReason(&network.StreamError{ErrorCode: ErrCodeSourceBelowMinimum, Remote: true})
	if !ok || r != NotAdmittedSource {
		t.Fatalf("GateReason = %q, %v", r, ok)
	}

	// A verified issuer's procedural voucher: stored, shown, not counted.
	f.learn(t, f.iks[0](f.subject, true, f.now, skill.SourceProcedural))
	if adm := n.Admission(f.subject); adm.Admitted || adm.Reason != NotAdmittedUnattested {
		t.Fatalf("procedural voucher admitted the subject: %+v", adm)
	}
	if v := f.voucher(t, f.ids[0]); v.Counts || v.MeetsSource || v.ChallengeSource != skill.SourceProcedural {
		t.Fatalf("procedural voucher shown as %+v", v)
	}
	// A corpus voucher and one naming no source do not count either.
	for _, src := range []skill.SourceKind{skill.SourceCorpus, skill.SourceUnknown} {
		f.now = f.now.Add(time.Second)
		f.learn(t, f.iks[0](f.subject, true, f.now, src))
		if adm := n.Admission(f.subject); adm.Admitted {
			t.Fatalf("%q voucher admitted the subject: %+v", src, adm)
		}
	}
	// A hybrid voucher from an issuer we verified only on procedural
	// challenges does not count: that issuer is not admitted directly.
	f.learn(t, f.iks[1](f.subject, true, f.now, skill.SourceHybrid))
	if adm := n.Admission(f.subject); adm.Admitted {
		t.Fatalf("voucher by a procedurally verified issuer counted: %+v", adm)
	}
	if v := f.voucher(t, f.ids[1]); v.Counts || !v.MeetsSource {
		t.Fatalf("voucher by a procedurally verified issuer shown as %+v", v)
	}
	// The same verified issuer's newer llm voucher counts.
	f.now = f.now.Add(time.Second)
	f.learn(t, f.iks[0](f.subject, true, f.now, skill.SourceLLM))
	if adm := n.Admission(f.subject); !adm.Admitted || adm.Via != AdmittedQuorum || len(adm.Issuers) != 1 || adm.Issuers[0] != f.ids[0] {
		t.Fatalf("llm voucher of a verified issuer: %+v", adm)
	}

	// Our own acceptance on weak challenges does not admit directly; a
	// rejection stays a rejection whatever its source.
	selfKey := n.host.Peerstore().PrivKey(n.ID())
	_, p := testutil.NewKey(t)
	if err := IssueEnvelope(n, SealTestFrom(selfKey, p, true, f.now, time.Hour, skill.SourceCorpus)); err != nil {
		t.Fatal(err)
	}
	if adm := n.Admission(p); adm.Admitted || adm.Reason != NotAdmittedSource {
		t.Fatalf("own corpus acceptance: %+v", adm)
	}
	if err := IssueEnvelope(n, SealTestFrom(selfKey, p, false, f.now.Add(time.Second), time.Hour, skill.SourceProcedural)); err != nil {
		t.Fatal(err)
	}
	if adm := n.Admission(p); adm.Admitted || adm.Reason != NotAdmittedRejected {
		t.Fatalf("own procedural rejection: %+v", adm)
	}
}

// TestExplicitProceduralPolicyCountsProcedural: with RequireSource
// procedural the same records admit and count; records naming no source
// still do not (rank 0), unless the policy is AnySource.
func TestExplicitProceduralPolicyCountsProcedural(t *testing.T) {
	f := newPolicyFixture(t, skill.SourceProcedural)
	n := f.n
	if adm := n.Admission(f.ids[1]); !adm.Admitted || adm.Via != AdmittedDirect {
		t.Fatalf("issuer verified on procedural challenges: %+v", adm)
	}
	f.learn(t, f.iks[1](f.subject, true, f.now, skill.SourceProcedural))
	if adm := n.Admission(f.subject); !adm.Admitted || adm.Via != AdmittedQuorum || adm.Issuers[0] != f.ids[1] {
		t.Fatalf("procedural voucher under a procedural policy: %+v", adm)
	}
	if v := f.voucher(t, f.ids[1]); !v.Counts || !v.MeetsSource {
		t.Fatalf("procedural voucher shown as %+v", v)
	}
	selfKey := n.host.Peerstore().PrivKey(n.ID())
	_, p := testutil.NewKey(t)
	if err := IssueEnvelope(n, SealTestFrom(selfKey, p, true, f.now, time.Hour, skill.SourceUnknown)); err != nil {
		t.Fatal(err)
	}
	if adm := n.Admission(p); adm.Admitted || adm.Reason != NotAdmittedSource {
		t.Fatalf("own acceptance naming no source under a procedural policy: %+v", adm)
	}

	anyNode := newPolicyFixture(t, AnySource)
	if err := IssueEnvelope(anyNode.n, SealTestFrom(anyNode.n.host.Peerstore().PrivKey(anyNode.n.ID()), p, true, anyNode.now, time.Hour, skill.SourceUnknown)); err != nil {
		t.Fatal(err)
	}
	if adm := anyNode.n.Admission(p); !adm.Admitted {
		t.Fatalf("own acceptance naming no source under AnySource: %+v", adm)
	}
}

// TestPeerReportRequireSource evaluates a stopped node's store under two
// policies.
func TestPeerReportRequireSource(t *testing.T) {
	f := newPolicyFixture(t, "")
	st := f.n.Store()
	for _, tc := range []struct {
		require skill.SourceKind
		want    bool
	}{{"", false}, {skill.SourceHybrid, false}, {skill.SourceProcedural, true}, {AnySource, true}} {
		ps, err := PeerReport(st, 1, tc.require, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		var got *PeerInfo
		for i := range ps {
			if ps[i].Peer == f.ids[1] {
				got = &ps[i]
			}
		}
		if got == nil || got.Admission.Admitted != tc.want || got.Direct == nil || got.Direct.ChallengeSource != skill.SourceProcedural || got.Direct.MeetsSource != tc.want {
			t.Errorf("require %q: %+v, want admitted %v", tc.require, got, tc.want)
		}
	}
	if _, err := PeerReport(st, 1, "gpt", time.Now()); err == nil {
		t.Fatal("PeerReport accepted require source \"gpt\"")
	}
}

// TestWeakSourceDoesNotLoopFirstContact: a peer we accepted on challenges
// below our policy is challenged again only when our own source now
// serves stronger ones.
func TestWeakSourceDoesNotLoopFirstContact(t *testing.T) {
	for _, tc := range []struct {
		kind skill.SourceKind
		want bool
	}{{skill.SourceProcedural, false}, {skill.SourceCorpus, false}, {skill.SourceUnknown, false}, {skill.SourceHybrid, true}, {skill.SourceLLM, true}} {
		k, _ := testutil.NewKey(t)
		n := newBareNode(t, Config{Key: k, Source: stubSource{}, SourceKind: tc.kind, Logger: slog.New(slog.DiscardHandler)})
		_, p := testutil.NewKey(t)
		if err := IssueEnvelope(n, SealTestFrom(k, p, true, time.Now(), time.Hour, skill.SourceProcedural)); err != nil {
			t.Fatal(err)
		}
		got, why := NeedsChallenge(n, p, time.Now())
		if got != tc.want || why != NotAdmittedSource {
			t.Errorf("serving %q: needs challenge %v (%s), want %v", tc.kind, got, why, tc.want)
		}
	}
}

// TestWeakSourceWarnsOnceAtStart: a node verifying with procedural or
// corpus challenges logs one WARN at start saying what a script can do.
func TestWeakSourceWarnsOnceAtStart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		want   string // "" for no warning
		policy string
	}{
		{"procedural", Config{Source: stubSource{}, SourceKind: skill.SourceProcedural}, "a script written against this code", "neither admits nor vouches"},
		{"procedural, explicit policy", Config{Source: stubSource{}, SourceKind: skill.SourceProcedural, RequireSource: skill.SourceProcedural}, "passes them", "admits and vouches on them"},
		{"corpus via Provenancer", Config{Source: provenancerSource{stubSource{kind: skill.SourceCorpus}}}, "pre-solve", "neither admits nor vouches"},
		// The offline generator says its kind itself: a library node
		// given it without SourceKind warned of nothing, and first
		// contact took its kind for unknown.
		{"procedural generator", Config{Source: mustGenerator(t)}, "a script written against this code", "neither admits nor vouches"},
		// Nodes sharing a corpus decline each other as reflectors (issue 12).
		{"corpus warns of shared corpora", Config{Source: provenancerSource{stubSource{kind: skill.SourceCorpus}}}, "decline each other", "own corpus"},
		{"hybrid", Config{Source: stubSource{}, SourceKind: skill.SourceHybrid}, "", ""},
		{"llm via Provenancer", Config{Source: provenancerSource{stubSource{kind: skill.SourceLLM}}}, "", ""},
		{"prover only", Config{SourceKind: skill.SourceProcedural}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tc.cfg.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
			newBareNode(t, tc.cfg)
			var warns []string
			for _, l := range strings.Split(buf.String(), "\n") {
				if strings.Contains(l, "level=WARN") && strings.Contains(l, "acaptcha: challenges come from") {
					warns = append(warns, l)
				}
			}
			if tc.want == "" {
				if len(warns) != 0 {
					t.Fatalf("unexpected warning: %v", warns)
				}
				return
			}
			if len(warns) != 1 || !strings.Contains(warns[0], tc.want) || !strings.Contains(warns[0], tc.policy) {
				t.Fatalf("want one warning with %q and %q, got %v", tc.want, tc.policy, warns)
			}
		})
	}
}
