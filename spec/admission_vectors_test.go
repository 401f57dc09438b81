package spec

import (
	"crypto/ed25519"
	"crypto/sha256"
	"path/filepath"
	"slices"
	"testing"
	"time"

	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// TestAdmissionVector: every case of spec/vectors/admission.json (trust.md
// §1) as the Go node decides it: the case's records written into a store
// (the node's own in their order, its revocations, the learned records in
// their order of arrival) and its offline report (peer.PeerReport, the
// admissions of `acaptcha peers`) evaluated at the vector's time.
func TestAdmissionVector(t *testing.T) {
	type rec struct {
		Issuer    string `json:"issuer"`
		Subject   string `json:"subject"`
		Accepted  bool   `json:"accepted"`
		IssuedAt  int64  `json:"issued_at"`
		ExpiresAt int64  `json:"expires_at"`
		Source    string `json:"source"`
	}
	var v struct {
		Description string `json:"description"`
		Now         int64  `json:"now"`
		Cases       []struct {
			Name          string           `json:"name"`
			Quorum        int              `json:"quorum"`
			RequireSource string           `json:"require_source"`
			Own           []rec            `json:"own"`
			Learned       []rec            `json:"learned"`
			Revoked       map[string]int64 `json:"revoked"`
			Expected      map[string]struct {
				Admitted bool     `json:"admitted"`
				Via      string   `json:"via"`
				Reason   string   `json:"reason"`
				Issuers  []string `json:"issuers"`
			} `json:"expected"`
		} `json:"cases"`
	}
	decodeVector(t, "admission.json", &v)
	if len(v.Cases) == 0 {
		t.Fatal("no cases")
	}
	keys := map[string]lcrypto.PrivKey{}
	names := map[lpeer.ID]string{}
	key := func(name string) (lcrypto.PrivKey, lpeer.ID) {
		k, ok := keys[name]
		if !ok {
			seed := sha256.Sum256([]byte("admission vector " + name))
			var err error
			if k, err = lcrypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(seed[:])); err != nil {
				t.Fatal(err)
			}
			keys[name] = k
		}
		id, err := lpeer.IDFromPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		names[id] = name
		return k, id
	}
	seal := func(r rec) (*protocol.Attestation, []byte) {
		k, iss := key(r.Issuer)
		_, sub := key(r.Subject)
		a := &protocol.Attestation{
			Issuer: iss, Subject: sub, Accepted: r.Accepted,
			Nonce: make([]byte, protocol.NonceBytes), TranscriptDigest: make([]byte, protocol.DigestBytes),
			Policy:   protocol.PolicySummary{Rounds: 3, Tau: 15 * time.Second, Total: 2 * time.Minute},
			IssuedAt: time.Unix(r.IssuedAt, 0).UTC(), ExpiresAt: time.Unix(r.ExpiresAt, 0).UTC(),
			SpecVersion: protocol.SpecVersion, Provenance: skill.Provenance{Source: skill.SourceKind(r.Source)},
		}
		if r.Accepted {
			a.Reason = skill.ReasonOK
			for i := 1; i <= 3; i++ {
				a.Rounds = append(a.Rounds, protocol.RoundTiming{Round: i, Budget: 15 * time.Second, Effective: time.Second, Correct: true})
			}
		} else {
			a.Reason, a.FailedRound = skill.ReasonWrongAnswer, 1
			a.Rounds = []protocol.RoundTiming{{Round: 1, Budget: 15 * time.Second, Effective: time.Second}}
		}
		env, err := protocol.Seal(a, k)
		if err != nil {
			t.Fatal(err)
		}
		return a, env
	}
	for _, c := range v.Cases {
		st, err := peer.OpenStore(filepath.Join(t.TempDir(), "db"))
		if err != nil {
			t.Fatal(err)
		}
		// The report takes the node's identity from its newest issued
		// record: an acceptance of a peer no case names, issued last.
		own := append(slices.Clone(c.Own), rec{Subject: "anchor", Accepted: true, IssuedAt: v.Now + 60, ExpiresAt: v.Now + 3600, Source: "llm"})
		for _, r := range own {
			r.Issuer = "self"
			a, env := seal(r)
			if err := st.Put(peer.Issued, env, a); err != nil {
				t.Fatal(err)
			}
		}
		for p, at := range c.Revoked {
			_, id := key(p)
			if err := st.PutRevocation(id, time.Unix(at, 0)); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range c.Learned {
			a, env := seal(r)
			if err := st.PutLearned(peer.Learned{Attestation: a, Envelope: env, Via: peer.ViaGossip, From: a.Subject, LearnedAt: time.Unix(v.Now-1, 0)}); err != nil {
				t.Fatal(err)
			}
		}
		infos, err := peer.PeerReport(st, c.Quorum, skill.SourceKind(c.RequireSource), time.Unix(v.Now, 0))
		st.Close()
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		got := map[string]peer.Admission{}
		for _, in := range infos {
			got[names[in.Peer]] = in.Admission
		}
		for p, want := range c.Expected {
			g, ok := got[p]
			if !ok {
				g = peer.Admission{Reason: peer.NotAdmittedUnattested}
			}
			var gi []string
			for _, id := range g.Issuers {
				gi = append(gi, names[id])
			}
			slices.Sort(gi)
			w := slices.Clone(want.Issuers)
			slices.Sort(w)
			if g.Admitted != want.Admitted || g.Via != want.Via || g.Reason != want.Reason || !slices.Equal(gi, w) {
				t.Errorf("%s: %s: admitted=%v via=%q reason=%q issuers=%v, want admitted=%v via=%q reason=%q issuers=%v",
					c.Name, p, g.Admitted, g.Via, g.Reason, gi, want.Admitted, want.Via, want.Reason, w)
			}
		}
	}
}
