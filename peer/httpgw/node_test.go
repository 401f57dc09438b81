package httpgw

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// TestRealNode runs the door over a real node's verifier core: the record
// the agent gets is signed by the node, verifies, names the agent's peer
// ID, and is stored as one the node issued; the node's libp2p draw budget
// is the one HTTP sessions spend.
func TestRealNode(t *testing.T) {
	key, n := newRealNode(t)
	g, err := ForNode(n.Door(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	defer func() { srv.Close(); g.Close() }()

	a := newAgent(t, srv.URL)
	done := a.run(key.answer)
	r := done.Result
	if !r.Accepted || len(r.Attestation) == 0 || len(r.Rounds) != 3 {
		t.Fatalf("agent: %+v", r)
	}
	att, _, err := protocol.VerifyAttestation(r.Attestation, protocol.VerifyOptions{Subject: a.id, Issuer: n.ID()})
	if err != nil || !att.Accepted || att.Provenance.Source != skill.SourceCorpus {
		t.Fatalf("record: %v %+v", err, att)
	}
	e, err := n.Store().Latest(peer.Issued, a.id, time.Now())
	if err != nil || e == nil || !e.Attestation.Accepted {
		t.Fatalf("the node did not store the record it issued: %v %+v", err, e)
	}
	// Verify over HTTP: ok for an acceptance; a script's rejection is
	// valid but not ok unless any_verdict.
	var vr verifyResponse
	if st, eb := a.post("/v1/attestations/verify", verifyRequest{Attestation: r.Attestation, RequireSource: ptr("corpus")}, &vr); st != 200 || !vr.OK || !vr.Valid || vr.Verdict != "ACCEPTED" {
		t.Errorf("verify: %d %+v %+v", st, eb, vr)
	}
	vr = verifyResponse{}
	if a.post("/v1/attestations/verify", verifyRequest{Attestation: r.Attestation, RequireSource: ptr("hybrid")}, &vr); vr.OK || !vr.SourceBelowMinimum || vr.ErrorCode != "source_below_minimum" {
		t.Errorf("verify requiring hybrid: %+v", vr)
	}
	s := newAgent(t, srv.URL)
	r = s.run(func(*Challenge) string { return "unknown" }).Result
	if r.Reason != string(skill.ReasonWrongAnswer) || len(r.Attestation) == 0 {
		t.Fatalf("script: %+v", r)
	}
	vr = verifyResponse{}
	if a.post("/v1/attestations/verify", verifyRequest{Attestation: r.Attestation}, &vr); vr.OK || !vr.Valid || vr.Verdict != "REJECTED" || vr.ErrorCode != NotAccepted {
		t.Errorf("verify a rejection: %+v", vr)
	}
	vr = verifyResponse{}
	if a.post("/v1/attestations/verify", verifyRequest{Attestation: r.Attestation, AnyVerdict: true}, &vr); !vr.OK || vr.ErrorCode != "" {
		t.Errorf("verify a rejection with any_verdict: %+v", vr)
	}
	bad := append([]byte(nil), r.Attestation...)
	bad[len(bad)-1] ^= 1
	vr = verifyResponse{}
	if a.post("/v1/attestations/verify", verifyRequest{Attestation: bad, AnyVerdict: true}, &vr); vr.OK || vr.Valid || vr.Error == "" || vr.ErrorCode != "bad_signature" {
		t.Errorf("verify a tampered record: %+v", vr)
	}
	// The rejection raised the script's proof of work on the node (the
	// libp2p door asks the same peer for the same).
	v := s.create()
	if *v.PowDifficulty <= DefaultPowDifficulty {
		t.Errorf("difficulty %d after a rejection, want above the door's %d", *v.PowDifficulty, DefaultPowDifficulty)
	}
}

// TestReflectedEndsSession: when the core reports the session's challenge
// reflected, the door ends the round protocol_error.
func TestReflectedEndsSession(t *testing.T) {
	_, core, base := fakeDoor(t, nil)
	a := newAgent(t, base)
	v := a.create()
	cur := a.startAndProbe(v)
	core.mu.Lock()
	f := core.reflect
	core.mu.Unlock()
	if f == nil || cur.State != StateAnswering {
		t.Fatalf("no reflection hook registered (state %s)", cur.State)
	}
	f()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && cur.State != StateDone {
		time.Sleep(20 * time.Millisecond)
		a.get("/v1/sessions/"+v.SessionID, &cur)
	}
	if cur.State != StateDone || cur.Result.Reason != string(skill.ReasonProtocolError) {
		t.Fatalf("reflected session: %+v", cur)
	}
}

// newRealNode starts a node on loopback serving the spec's example sets,
// closed when the test ends, with the answer key to them.
func newRealNode(t *testing.T) (answerKey, *peer.Node) {
	t.Helper()
	return newRealNodeWith(t, peer.Limits{})
}

// newRealNodeWith is newRealNode with the node's limits.
func newRealNodeWith(t *testing.T, limits peer.Limits) (answerKey, *peer.Node) {
	t.Helper()
	key, sets := newAnswerKey(t)
	src, err := skill.NewCorpus("examples", sets, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	nk, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	n, err := peer.New(peer.Config{Key: nk, StorePath: filepath.Join(t.TempDir(), "db"), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		Policy: skill.DefaultPolicy(), Source: src, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return key, n
}

// The manifest's min_difficulty is the least a session asks: the door's
// floor, or the node's base when that is higher; its max_difficulty the
// most.
func TestManifestMinDifficultyFollowsNodeBase(t *testing.T) {
	_, n := newRealNodeWith(t, peer.Limits{PowDifficulty: DefaultPowDifficulty + 2})
	gw, err := ForNode(n.Door(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	if got := gw.MinPowDifficulty(); got != DefaultPowDifficulty+2 {
		t.Fatalf("MinPowDifficulty %d, want the node's base %d", got, DefaultPowDifficulty+2)
	}
	rec := httptest.NewRecorder()
	gw.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, ManifestPath, nil))
	var m Manifest
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m.Pow.MinDifficulty != DefaultPowDifficulty+2 {
		t.Fatalf("manifest min_difficulty %d, want %d", m.Pow.MinDifficulty, DefaultPowDifficulty+2)
	}
	// max_difficulty is the most a session asks, the node's maximum (it
	// said the protocol's 32, which no session of the node ever asks).
	if m.Pow.MaxDifficulty != protocol.DefaultMaxPowDifficulty || gw.MaxPowDifficulty() != protocol.DefaultMaxPowDifficulty {
		t.Fatalf("manifest max_difficulty %d, gateway %d, want the node's %d", m.Pow.MaxDifficulty, gw.MaxPowDifficulty(), protocol.DefaultMaxPowDifficulty)
	}
}

// TestLoopbackClientsShareOnePrefixDraws: behind a reverse proxy the door
// does not trust, every client reaches it from loopback. Those clients
// are one network for the node's draw budgets too (the door's own limits
// already count them as 127.0.0.0/24): the core exempted loopback from
// the per-prefix draw budget (libp2p's exemption of local peers), so
// fresh peer IDs behind the proxy drew up to the node's whole budget.
func TestLoopbackClientsShareOnePrefixDraws(t *testing.T) {
	const perPrefix = 3
	key, n := newRealNodeWith(t, peer.Limits{MaxDrawsPerPrefix: perPrefix})
	g, err := ForNode(n.Door(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	defer func() { srv.CloseClientConnections(); srv.Close(); g.Close() }()
	drawn, refused := 0, 0
	for range perPrefix + 3 {
		a := newAgent(t, srv.URL)
		var v Session
		st, eb := a.post("/v1/sessions", map[string]string{"peer_id": a.id.String()}, &v)
		if st == http.StatusTooManyRequests && eb.Code == CodeQuota {
			refused++
			continue
		}
		if st != http.StatusCreated {
			t.Fatalf("create: %d %+v", st, eb)
		}
		var cur Session
		st, eb = a.post("/v1/sessions/"+v.SessionID+"/start", a.startReq(&v), &cur)
		switch {
		case st == http.StatusOK:
			drawn++
			for cur.State == StateProbing {
				next := Session{}
				if st, eb := a.post("/v1/sessions/"+v.SessionID+"/probe", probeRequest{Seq: ptr(cur.Probe.Seq), Nonce: ptr(cur.Probe.Nonce)}, &next); st != http.StatusOK {
					t.Fatalf("probe: %d %+v", st, eb)
				}
				cur = next
			}
			for cur.State == StateAnswering {
				ans := key.answer(cur.Challenge)
				next := Session{}
				if st, eb := a.post("/v1/sessions/"+v.SessionID+"/answer", answerRequest{Round: ptr(cur.Challenge.Round), Answer: &ans}, &next); st != http.StatusOK {
					t.Fatalf("answer: %d %+v", st, eb)
				}
				cur = next
			}
		case eb.Code == CodeQuota:
			refused++
		default:
			t.Fatalf("start: %d %+v", st, eb)
		}
	}
	t.Logf("%d sets drawn for %d loopback clients, %d refused (per-prefix draw budget %d)", drawn, perPrefix+3, refused, perPrefix)
	if drawn > perPrefix {
		t.Fatalf("%d sets drawn for fresh peer IDs behind loopback, want at most the prefix budget %d", drawn, perPrefix)
	}
}
