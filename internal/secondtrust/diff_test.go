package secondtrust

import (
	"crypto/ed25519"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// party is one key of a generated history.
type party struct {
	key lcrypto.PrivKey
	id  lpeer.ID
}

func newParty(t testing.TB, seed byte) party {
	t.Helper()
	s := make([]byte, ed25519.SeedSize)
	for i := range s {
		s[i] = seed + byte(i)
	}
	k, err := lcrypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(s))
	if err != nil {
		t.Fatal(err)
	}
	id, err := lpeer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return party{k, id}
}

// seal builds and signs a well-formed record of r with the issuer's key.
func seal(t testing.TB, k lcrypto.PrivKey, r Record) (*protocol.Attestation, []byte) {
	t.Helper()
	a := &protocol.Attestation{
		Issuer: lpeer.ID(r.Issuer), Subject: lpeer.ID(r.Subject), Accepted: r.Accepted,
		Nonce: make([]byte, protocol.NonceBytes), TranscriptDigest: make([]byte, protocol.DigestBytes),
		Policy:   protocol.PolicySummary{Rounds: 3, Tau: 15 * time.Second, Total: 2 * time.Minute},
		IssuedAt: time.Unix(r.IssuedAt, 0).UTC(), ExpiresAt: time.Unix(r.ExpiresAt, 0).UTC(),
		SpecVersion: protocol.SpecVersion,
		Provenance:  skill.Provenance{Source: skill.SourceKind(r.Source)},
	}
	if r.Accepted {
		a.Reason = skill.ReasonOK
		for i := 1; i <= 3; i++ {
			a.Rounds = append(a.Rounds, protocol.RoundTiming{Round: i, Budget: 15 * time.Second, Effective: time.Second, Correct: true})
		}
	} else {
		a.Reason = skill.ReasonWrongAnswer
		a.FailedRound = 1
		a.Rounds = []protocol.RoundTiming{{Round: 1, Budget: 15 * time.Second, Effective: time.Second}}
	}
	env, err := protocol.Seal(a, k)
	if err != nil {
		t.Fatalf("seal %+v: %v", r, err)
	}
	return a, env
}

// history is one generated case.
type history struct {
	now     int64
	pol     Policy
	st      State
	parties []party // parties[0] is the node
}

var sources = []string{"", "procedural", "corpus", "hybrid", "llm"}

// genHistory draws a random history around now: few distinct seconds so
// that issue times, expiries, revocations and now tie often.
func genHistory(r *rand.Rand, now int64, parties []party) history {
	h := history{now: now, parties: parties}
	h.st.Self = string(parties[0].id)
	h.st.Revoked = map[string]int64{}
	h.pol.Quorum = []int{0, 1, 1, 2, 2, 3}[r.IntN(6)]
	h.pol.MinSource = []string{"", AnySource, "procedural", "corpus", "hybrid", "llm"}[r.IntN(6)]
	// seconds around now: issue times at most a minute ahead (as an
	// issuer dates them, attestation.md §5), a few far back.
	secs := []int64{now - 7200, now - 600, now - 2, now - 1, now, now + 1, now + 60}
	sec := func() int64 { return secs[r.IntN(len(secs))] }
	rec := func(iss, sub string) Record {
		is := sec()
		var ex int64
		switch r.IntN(4) {
		case 0: // an expiry on the boundary seconds
			ex = max(is+1, []int64{now - 1, now, now + 1}[r.IntN(3)])
		case 1:
			ex = is + []int64{1, 2, 60, 600}[r.IntN(4)]
		default:
			ex = is + []int64{3600, 86400}[r.IntN(2)]
		}
		return Record{Issuer: iss, Subject: sub, Accepted: r.IntN(3) != 0, IssuedAt: is, ExpiresAt: ex, Source: sources[r.IntN(len(sources))]}
	}
	others := parties[1:]
	for _, p := range others {
		for range r.IntN(4) {
			h.st.Own = append(h.st.Own, rec(h.st.Self, string(p.id)))
		}
		if r.IntN(5) == 0 {
			h.st.Revoked[string(p.id)] = sec()
		}
	}
	// learned records: every (issuer, subject) of others, a few versions,
	// arriving in random order; now and then one by the node itself.
	for range r.IntN(4 * len(others)) {
		i, s := others[r.IntN(len(others))], others[r.IntN(len(others))]
		if i.id == s.id {
			continue
		}
		iss := string(i.id)
		if r.IntN(20) == 0 {
			iss = h.st.Self
		}
		from := others[r.IntN(len(others))]
		h.st.Learned = append(h.st.Learned, Learned{Record: rec(iss, string(s.id)), Via: "gossip", From: string(from.id)})
	}
	return h
}

func (h history) keyOf(id string) lcrypto.PrivKey {
	for _, p := range h.parties {
		if string(p.id) == id {
			return p.key
		}
	}
	panic("no key")
}

// fill writes the history into a fresh store: the node's records in
// order, its revocations, the learned records in their order of arrival.
// An anchor acceptance of a party outside the history (the node's
// identity for PeerReport) comes first.
func (h history) fill(t testing.TB, st *peer.Store, anchor party) {
	t.Helper()
	a, env := seal(t, h.parties[0].key, Record{Issuer: h.st.Self, Subject: string(anchor.id), Accepted: true, IssuedAt: h.now - 10, ExpiresAt: h.now + 86400, Source: "llm"})
	if err := st.Put(peer.Issued, env, a); err != nil {
		t.Fatal(err)
	}
	for _, r := range h.st.Own {
		a, env := seal(t, h.parties[0].key, r)
		if err := st.Put(peer.Issued, env, a); err != nil {
			t.Fatal(err)
		}
	}
	for p, at := range h.st.Revoked {
		if err := st.PutRevocation(lpeer.ID(p), time.Unix(at, 0)); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range h.st.Learned {
		a, env := seal(t, h.keyOf(l.Issuer), l.Record)
		if err := st.PutLearned(peer.Learned{Attestation: a, Envelope: env, Via: peer.ViaGossip, From: lpeer.ID(l.From), LearnedAt: time.Unix(h.now-5, 0)}); err != nil {
			t.Fatal(err)
		}
	}
}

func (h history) describe(names map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "now=%d quorum=%d min=%q\n", h.now, h.pol.Quorum, h.pol.MinSource)
	rs := func(r Record) string {
		return fmt.Sprintf("%s->%s acc=%v issued=now%+d expires=now%+d src=%q", names[r.Issuer], names[r.Subject], r.Accepted, r.IssuedAt-h.now, r.ExpiresAt-h.now, r.Source)
	}
	for _, r := range h.st.Own {
		fmt.Fprintf(&b, "  own     %s\n", rs(r))
	}
	for p, at := range h.st.Revoked {
		fmt.Fprintf(&b, "  revoked %s at now%+d\n", names[p], at-h.now)
	}
	for _, l := range h.st.Learned {
		fmt.Fprintf(&b, "  learned %s\n", rs(l.Record))
	}
	return b.String()
}

func sameDecision(mine Decision, got peer.Admission) bool {
	var gi []string
	for _, i := range got.Issuers {
		gi = append(gi, string(i))
	}
	sort.Strings(gi)
	return mine.Admitted == got.Admitted && mine.Via == got.Via && mine.Reason == got.Reason && slices.Equal(mine.Issuers, gi)
}

func fmtDecision(d Decision, names map[string]string) string {
	var is []string
	for _, i := range d.Issuers {
		is = append(is, names[i])
	}
	return fmt.Sprintf("{admitted=%v via=%q reason=%q issuers=%v}", d.Admitted, d.Via, d.Reason, is)
}

func fromGo(a peer.Admission) Decision {
	d := Decision{Admitted: a.Admitted, Via: a.Via, Reason: a.Reason}
	for _, i := range a.Issuers {
		d.Issuers = append(d.Issuers, string(i))
	}
	sort.Strings(d.Issuers)
	return d
}

func scratchDir(t testing.TB) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "secondtrust")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

const (
	diffParties = 6 // the node and five peers
)

func diffSetup(t testing.TB) ([]party, party, map[string]string) {
	var parties []party
	names := map[string]string{}
	for i := range diffParties {
		p := newParty(t, byte(1+i*40))
		parties = append(parties, p)
		names[string(p.id)] = fmt.Sprintf("P%d", i)
	}
	names[string(parties[0].id)] = "self"
	anchor := newParty(t, 250)
	names[string(anchor.id)] = "anchor"
	return parties, anchor, names
}

// diffBounds are a differential test's case count and time budget: the
// shorter ones by default (CI runs every package under the race detector
// on two cores), a quarter of them with -short, the longer ones with
// SECONDTRUST_LONG=1.
func diffBounds(cases int, budget time.Duration, longCases int, longBudget time.Duration) (int, time.Duration) {
	switch {
	case os.Getenv("SECONDTRUST_LONG") != "":
		return longCases, longBudget
	case testing.Short():
		return max(1, cases/4), budget / 4
	}
	return cases, budget
}

// TestDifferentialPeerReport generates random histories, writes each into
// a store and compares this package's decision for every peer with the Go
// node's offline report (peer.PeerReport: the admissions `acaptcha
// peers` shows, evaluated at a given time). Bounded by count and time.
func TestDifferentialPeerReport(t *testing.T) {
	cases, budget := diffBounds(300, 20*time.Second, 600, 45*time.Second)
	parties, anchor, names := diffSetup(t)
	r := rand.New(rand.NewPCG(106, uint64(time.Now().UnixNano())))
	dir := scratchDir(t)
	start := time.Now()
	now := start.Unix()
	ran, disagreements := 0, 0
	for c := 0; c < cases && time.Since(start) < budget; c++ {
		h := genHistory(r, now, parties)
		st, err := peer.OpenStore(filepath.Join(dir, fmt.Sprintf("db%d", c)))
		if err != nil {
			t.Fatal(err)
		}
		h.fill(t, st, anchor)
		req := skill.SourceKind(h.pol.MinSource)
		infos, err := peer.PeerReport(st, h.pol.Quorum, req, time.Unix(now, 0))
		st.Close()
		os.Remove(filepath.Join(dir, fmt.Sprintf("db%d", c)))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]peer.Admission{}
		for _, in := range infos {
			got[string(in.Peer)] = in.Admission
		}
		ran++
		for _, p := range parties[1:] {
			mine := h.st.Admission(string(p.id), now, h.pol)
			g, listed := got[string(p.id)]
			if !listed {
				// a peer the report does not list is one it knows nothing of
				g = peer.Admission{Reason: peer.NotAdmittedUnattested}
			}
			if !sameDecision(mine, g) {
				disagreements++
				if disagreements <= 5 {
					t.Errorf("case %d, peer %s: mine %s, Go %s\n%s", c, names[string(p.id)], fmtDecision(mine, names), fmtDecision(fromGo(g), names), h.describe(names))
				}
			}
		}
	}
	t.Logf("%d histories (%d peer decisions each), %d disagreements, %s", ran, diffParties-1, disagreements, time.Since(start).Round(time.Millisecond))
}

// TestDifferentialNode compares this package's decision with a running
// Go node's Node.Admission (wall-clock time) over histories written into
// its store before it starts. A decision whose inputs change between the
// seconds before and after the node's answer is not compared.
func TestDifferentialNode(t *testing.T) {
	cases, budget := diffBounds(60, 20*time.Second, 150, 60*time.Second)
	parties, anchor, names := diffSetup(t)
	r := rand.New(rand.NewPCG(107, uint64(time.Now().UnixNano())))
	dir := scratchDir(t)
	start := time.Now()
	ran, compared, revoked, disagreements := 0, 0, 0, 0
	for c := 0; c < cases && time.Since(start) < budget; c++ {
		now := time.Now().Unix()
		h := genHistory(r, now, parties)
		path := filepath.Join(dir, fmt.Sprintf("db%d", c))
		st, err := peer.OpenStore(path)
		if err != nil {
			t.Fatal(err)
		}
		h.fill(t, st, anchor)
		n, err := peer.New(peer.Config{
			Key: parties[0].key, Store: st, ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
			TrustQuorum: h.pol.Quorum, RequireSource: skill.SourceKind(h.pol.MinSource),
			Logger: quietLogger(),
		})
		if err != nil {
			st.Close()
			t.Fatal(err)
		}
		ran++
		// compareAll compares every peer's decision with the running
		// node's, skipping one whose inputs change between the seconds
		// before and after the node's answer; when names a moment of
		// the history for the error.
		compareAll := func(when string) {
			for _, q := range parties[1:] {
				before := time.Now().Unix()
				g := n.Admission(q.id)
				after := time.Now().Unix()
				m0, m1 := h.st.Admission(string(q.id), before, h.pol), h.st.Admission(string(q.id), after, h.pol)
				if fmtDecision(m0, names) != fmtDecision(m1, names) {
					continue
				}
				compared++
				if !sameDecision(m0, g) {
					disagreements++
					if disagreements <= 5 {
						t.Errorf("case %d, %speer %s at now%+d: mine %s, Go node %s\n%s", c, when, names[string(q.id)], before-now, fmtDecision(m0, names), fmtDecision(fromGo(g), names), h.describe(names))
					}
				}
			}
		}
		compareAll("")
		// Revoke one peer (trust.md §1 Revocation: dated no earlier than
		// the node's own newest record of it within the skew allowance)
		// and compare the date and the decisions again.
		p := parties[1+r.IntN(len(parties)-1)]
		before := time.Now().Unix()
		if err := n.Revoke(p.id); err != nil {
			t.Fatal(err)
		}
		after := time.Now().Unix()
		revs, err := st.Revocations()
		if err != nil {
			t.Fatal(err)
		}
		at := revs[p.id].Unix()
		if w0, w1 := h.st.RevocationTime(string(p.id), before), h.st.RevocationTime(string(p.id), after); at != w0 && at != w1 {
			disagreements++
			t.Errorf("case %d: revocation of %s dated now%+d, mine now%+d..now%+d\n%s", c, names[string(p.id)], at-now, w0-now, w1-now, h.describe(names))
		}
		revoked++
		h.st.Revoked[string(p.id)] = at
		compareAll("after revoking " + names[string(p.id)] + ", ")
		_ = n.Close()
		st.Close()
		os.Remove(path)
	}
	t.Logf("%d histories, %d decisions compared, %d revocations, %d disagreements, %s", ran, compared, revoked, disagreements, time.Since(start).Round(time.Millisecond))
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
