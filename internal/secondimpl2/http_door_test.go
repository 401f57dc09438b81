package secondimpl2

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

type manifest struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	APIVersion  string `json:"api_version"`
	SpecVersion string `json:"spec_version"`
	Node        struct {
		PeerID      string   `json:"peer_id"`
		Libp2pAddrs []string `json:"libp2p_addrs"`
	} `json:"node"`
	Doors []struct {
		Kind     string `json:"kind"`
		Protocol string `json:"protocol"`
		Spec     string `json:"spec"`
	} `json:"doors"`
	Policy *policy `json:"policy"`
	Pow    struct {
		Algorithm     string `json:"algorithm"`
		Tag           string `json:"tag"`
		Digest        string `json:"digest"`
		MinDifficulty *int   `json:"min_difficulty"`
		MaxDifficulty *int   `json:"max_difficulty"`
		MaxPowBytes   *int   `json:"max_pow_bytes"`
	} `json:"pow"`
	KeyProof      map[string]any    `json:"key_proof"`
	Endpoints     map[string]string `json:"endpoints"`
	Limits        map[string]any    `json:"limits"`
	AnswerFormat  string            `json:"answer_format"`
	Steps         []string          `json:"steps"`
	OpenAPI       string            `json:"openapi"`
	Spec          string            `json:"spec"`
	RequireSource string            `json:"require_source"`
}

func getManifest(t *testing.T, c *client) *manifest {
	t.Helper()
	r, err := c.do("GET", "/.well-known/acaptcha.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.status != 200 {
		t.Fatalf("manifest: %d %s", r.status, r.body)
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("manifest: Cache-Control %q, want no-store (§1)", r.header.Get("Cache-Control"))
	}
	var m manifest
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	return &m
}

// checkManifest holds the manifest to §3.1.
func checkManifest(t *testing.T, m *manifest) {
	t.Helper()
	if m.Name == "" || m.Description == "" || m.AnswerFormat == "" || len(m.Steps) == 0 || m.OpenAPI == "" || m.Spec == "" {
		t.Errorf("manifest lacks a member of §3.1: %+v", m)
	}
	if m.APIVersion != "1.0.0" {
		t.Errorf("api_version %q", m.APIVersion)
	}
	if _, ok := specMajor(m.SpecVersion); !ok {
		t.Errorf("spec_version %q", m.SpecVersion)
	}
	if id, err := b58Decode(m.Node.PeerID); err != nil || !isPeerID(id) {
		t.Errorf("node.peer_id %q: %v", m.Node.PeerID, err)
	}
	kinds := map[string]bool{}
	for _, d := range m.Doors {
		kinds[d.Kind] = true
		if d.Kind != "http" && d.Kind != "libp2p" {
			t.Errorf("door kind %q", d.Kind)
		}
	}
	if !kinds["http"] {
		t.Errorf("doors without http: %+v", m.Doors)
	}
	if m.Policy == nil || m.Policy.Rounds < 1 || m.Policy.Rounds > 3 {
		t.Errorf("policy %+v", m.Policy)
	}
	if m.Pow.Algorithm != "sha256-leading-zero-bits" {
		t.Errorf("pow.algorithm %q", m.Pow.Algorithm)
	}
	if m.Pow.Tag != powTag {
		t.Errorf("pow.tag %q, want the 23 bytes %q", m.Pow.Tag, powTag)
	}
	if m.Pow.MinDifficulty == nil || m.Pow.MaxDifficulty == nil || *m.Pow.MinDifficulty > *m.Pow.MaxDifficulty || *m.Pow.MaxDifficulty > 32 {
		t.Errorf("pow difficulties %v..%v", m.Pow.MinDifficulty, m.Pow.MaxDifficulty)
	}
	if m.Pow.MaxPowBytes == nil || *m.Pow.MaxPowBytes != 32 {
		t.Errorf("pow.max_pow_bytes %v, want 32 (§4.2 step 4)", m.Pow.MaxPowBytes)
	}
	for step, want := range map[string]string{
		"create": "POST /v1/sessions", "status": "GET /v1/sessions/{id}",
		"start": "POST /v1/sessions/{id}/start", "probe": "POST /v1/sessions/{id}/probe",
		"answer": "POST /v1/sessions/{id}/answer", "verify": "POST /v1/attestations/verify",
		"openapi": "GET /openapi.json", "manifest": "GET /.well-known/acaptcha.json",
	} {
		if m.Endpoints[step] != want {
			t.Errorf("endpoints[%q] = %q, want %q", step, m.Endpoints[step], want)
		}
	}
	for _, d := range m.Doors {
		if want := map[string]string{"http": "/v1", "libp2p": "/acaptcha/attest/1.0.0"}[d.Kind]; d.Protocol != want {
			t.Errorf("door %s protocol %q, want %q (§3.1)", d.Kind, d.Protocol, want)
		}
	}
	for _, k := range []string{"key_encoding", "message", "signature"} {
		if v, ok := m.KeyProof[k].(string); !ok || v == "" {
			t.Errorf("key_proof.%s missing (§3.1): %v", k, m.KeyProof)
		}
	}
	// §3.1's limits, with §5's defaults (the node runs with them).
	for k, want := range map[string]float64{
		"max_body_bytes": 4096, "max_verify_body_bytes": 16384, "max_answer_bytes": 64,
		"max_sessions_per_prefix": 8, "max_unstarted_per_prefix": 4, "max_sessions_per_peer": 2,
		"start_ttl_ms": 15000, "probe_timeout_ms": 5000, "probes": 1, "answer_grace_ms": 250,
		"keep_done_ms": 120000, "idle_timeout_ms": 20000,
	} {
		if v, ok := m.Limits[k].(float64); !ok || v != want {
			t.Errorf("limits.%s = %v, want %v (§3.1, §5)", k, m.Limits[k], want)
		}
	}
	switch m.RequireSource {
	case "any", "procedural", "corpus", "hybrid", "llm":
	default:
		t.Errorf("require_source %q", m.RequireSource)
	}
}

func createSession(t *testing.T, c *client, m *manifest, id identity) *session {
	t.Helper()
	r, err := c.do("POST", "/v1/sessions", map[string]any{"peer_id": id.idStr})
	if err != nil {
		t.Fatal(err)
	}
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("create: Cache-Control %q", r.header.Get("Cache-Control"))
	}
	s, err := decodeSession(r.body)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != "awaiting_start" || s.PeerID != id.idStr || s.Verifier != m.Node.PeerID {
		t.Fatalf("create: %s", r.body)
	}
	raw, err := base64.RawURLEncoding.DecodeString(s.SessionID)
	if err != nil || len(raw) != 16 {
		t.Errorf("session_id %q: %d bytes, %v (§4: 128 bits, base64url without padding)", s.SessionID, len(raw), err)
	}
	if len(s.Nonce) != 32 {
		t.Errorf("nonce of %d bytes", len(s.Nonce))
	}
	if s.PowDifficulty == nil || *s.PowDifficulty < *m.Pow.MinDifficulty || *s.PowDifficulty > *m.Pow.MaxDifficulty {
		t.Errorf("pow_difficulty %v outside the manifest's %d..%d", s.PowDifficulty, *m.Pow.MinDifficulty, *m.Pow.MaxDifficulty)
	}
	if s.Policy == nil {
		t.Fatalf("no policy: %s", r.body)
	}
	if _, err := time.Parse(time.RFC3339, s.ExpiresAt); err != nil {
		t.Errorf("expires_at %q: %v", s.ExpiresAt, err)
	}
	return s
}

func startSession(t *testing.T, c *client, id identity, s *session) (*session, []byte) {
	t.Helper()
	verifier, err := b58Decode(s.Verifier)
	if err != nil {
		t.Fatal(err)
	}
	msg := startMessage(s.SessionID, s.Nonce, verifier, id.id)
	if !bytes.Equal(msg, s.StartMessage) {
		t.Errorf("start_message differs from §4.2's bytes:\n got %x\nwant %x", s.StartMessage, msg)
	}
	pow, err := solvePoW(s.Nonce, id.id, *s.PowDifficulty)
	if err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"public_key": b64s(id.pubKey), "signature": b64s(ed25519.Sign(id.priv, msg)), "pow": b64s(pow)}
	r, err := c.do("POST", "/v1/sessions/"+s.SessionID+"/start", body)
	if err != nil {
		t.Fatal(err)
	}
	if r.status != 200 {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	ns, err := decodeSession(r.body)
	if err != nil {
		t.Fatal(err)
	}
	return ns, verifier
}

// probeUntilChallenge answers every probe at once (§4.3).
func probeUntilChallenge(t *testing.T, c *client, s *session) *session {
	t.Helper()
	for i := 0; i < 17 && s.State == "probing"; i++ {
		p := s.Probe
		if p == nil || p.Seq != i+1 || p.Of < 1 || p.Of > 16 || len(p.Nonce) != 8 || p.WithinMs <= 0 {
			t.Fatalf("probe %d: %s", i+1, s.Raw)
		}
		r, err := c.do("POST", "/v1/sessions/"+s.SessionID+"/probe", map[string]any{"seq": p.Seq, "nonce": b64s(p.Nonce)})
		if err != nil {
			t.Fatal(err)
		}
		if r.status != 200 {
			t.Fatalf("probe: %d %s", r.status, r.body)
		}
		if s, err = decodeSession(r.body); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// answerRounds answers each round with answer(round, challenge); a false
// second value sends nothing and waits for the server to end the round.
func answerRounds(t *testing.T, c *client, s *session, oracle map[string]oracleHit,
	answer func(round int, ch *challengeObj, hit oracleHit) (string, bool)) (*session, []tRound, []oracleHit) {
	t.Helper()
	var rounds []tRound
	var hits []oracleHit
	for i := 0; i < 4 && s.State == "answering"; i++ {
		ch := s.Challenge
		if ch == nil || ch.Round != i+1 || ch.Rounds != s.policyRounds(ch) || ch.Narrative == "" || ch.Question == "" || ch.BudgetMs <= 0 {
			t.Fatalf("challenge %d: %s", i+1, s.Raw)
		}
		hit, ok := oracle[ch.Narrative+"\x00"+ch.Question]
		if !ok {
			t.Fatalf("round %d: question not in spec/examples: %q", ch.Round, ch.Question)
		}
		if hit.set.Domain != ch.Domain {
			t.Errorf("round %d: domain %q, the set's is %q", ch.Round, ch.Domain, hit.set.Domain)
		}
		if i > 0 && hit.set != hits[0].set {
			t.Errorf("round %d drew from another set than round 1", ch.Round)
		}
		hits = append(hits, hit)
		a, send := answer(ch.Round, ch, hit)
		if !send {
			rounds = append(rounds, tRound{Round: ch.Round, Narrative: ch.Narrative, Question: ch.Question})
			// the server ends the round itself (§2): poll, bounded.
			wait := time.Duration(ch.AnswerWithinMs+250+2000) * time.Millisecond
			deadline := time.Now().Add(wait)
			for time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
				r, err := c.do("GET", "/v1/sessions/"+s.SessionID, nil)
				if err != nil {
					t.Fatal(err)
				}
				if s, err = decodeSession(r.body); err != nil {
					t.Fatal(err)
				}
				if s.State == "done" {
					break
				}
			}
			return s, rounds, hits
		}
		rounds = append(rounds, tRound{Round: ch.Round, Narrative: ch.Narrative, Question: ch.Question, Answer: a})
		r, err := c.do("POST", "/v1/sessions/"+s.SessionID+"/answer", map[string]any{"round": ch.Round, "answer": a})
		if err != nil {
			t.Fatal(err)
		}
		if r.status != 200 {
			t.Fatalf("answer: %d %s", r.status, r.body)
		}
		if s, err = decodeSession(r.body); err != nil {
			t.Fatal(err)
		}
	}
	return s, rounds, hits
}

func (s *session) policyRounds(ch *challengeObj) int {
	if s.Policy != nil {
		return s.Policy.Rounds
	}
	return ch.Rounds
}

// checkResult verifies the result and its attestation (§4.5,
// attestation.md §6, §3.3, §4, §8).
func checkResult(t *testing.T, s *session, id identity, nonce, verifier []byte, rounds []tRound, hits []oracleHit, wantReason string) *attRecord {
	t.Helper()
	if s.State != "done" || s.Result == nil {
		t.Fatalf("not done: %s", s.Raw)
	}
	res := s.Result
	wantVerdict := map[bool]string{true: "ACCEPTED", false: "REJECTED"}[wantReason == "ok"]
	if res.Reason != wantReason || res.Verdict != wantVerdict || res.Accepted != (wantReason == "ok") {
		t.Fatalf("result %s, want %s %s", s.Raw, wantVerdict, wantReason)
	}
	if len(res.Rounds) != len(rounds) {
		t.Errorf("result has %d rounds, %d delivered", len(res.Rounds), len(rounds))
	}
	rec, err := verifyAttestation(res.Attestation, verifyOpts{Now: time.Now().Unix(), Subject: id.id, Issuer: verifier})
	if err != nil {
		t.Fatalf("attestation does not verify (attestation.md §6): %v", err)
	}
	if !bytes.Equal(rec.Nonce, nonce) {
		t.Errorf("record nonce %x, session nonce %x", rec.Nonce, nonce)
	}
	if want := transcriptDigest("", rounds); !bytes.Equal(rec.Digest, want) {
		t.Errorf("transcript digest %x, recomputed %x", rec.Digest, want)
	}
	if rec.Reason != wantReason {
		t.Errorf("record reason %q", rec.Reason)
	}
	if len(hits) > 0 {
		if want := setID(hits[0].set); rec.SetID != want {
			t.Errorf("set_id %q, content ID %q", rec.SetID, want)
		}
		if rec.Domain != hits[0].set.Domain {
			t.Errorf("domain %q", rec.Domain)
		}
	}
	if rec.Provenance.Source != "corpus" {
		t.Errorf("provenance %+v, want corpus", rec.Provenance)
	}
	if res.Reason != "ok" {
		if want := max(uint32(len(rounds)), 1); rec.FailedRound != want || res.FailedRound != int(want) {
			t.Errorf("failed_round %d / %d, want %d", rec.FailedRound, res.FailedRound, want)
		}
	}
	for i, rr := range res.Rounds {
		if i >= len(rec.Rounds) {
			break
		}
		ar := rec.Rounds[i]
		if rr.Round != int(ar.Round) || rr.Correct != ar.Correct || rr.BudgetMs != int64(ar.BudgetMs) || rr.EffectiveMs != int64(ar.EffectiveMs) {
			t.Errorf("result round %+v, record round %+v", rr, ar)
		}
		// §4.5: each _ms value is its nanosecond time truncated, so the
		// difference of the truncations may exceed effective_ms by one.
		if want := max(rr.ElapsedMs-res.CreditMs, 0); rr.Answered && rr.EffectiveMs != want && rr.EffectiveMs != want-1 {
			t.Errorf("round %d: effective %d, elapsed %d - credit %d", rr.Round, rr.EffectiveMs, rr.ElapsedMs, res.CreditMs)
		}
	}
	if res.CreditMs != min(res.RTTMs, int64(rec.Policy.RTTCreditMs)) {
		t.Errorf("credit %d, rtt %d, cap %d (§2)", res.CreditMs, res.RTTMs, rec.Policy.RTTCreditMs)
	}
	checkView(t, res.Record, rec)
	return rec
}

// checkView compares the JSON view (attestation.md §8) with the envelope.
func checkView(t *testing.T, raw json.RawMessage, r *attRecord) {
	t.Helper()
	var v struct {
		Issuer, Subject  string
		Accepted         bool
		Reason           string
		FailedRound      uint32 `json:"failed_round"`
		Nonce            string
		TranscriptDigest string `json:"transcript_digest"`
		Rounds           []struct {
			Round           uint32
			BudgetMs        uint64 `json:"budget_ms"`
			EffectiveMs     uint64 `json:"effective_ms"`
			NarrativeTokens uint32 `json:"narrative_tokens"`
			Correct         bool
		}
		Domain      string
		SetID       string `json:"set_id"`
		IssuedAt    string `json:"issued_at"`
		ExpiresAt   string `json:"expires_at"`
		SpecVersion string `json:"spec_version"`
		Provenance  struct {
			Source string
			Rank   int
		}
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("record view: %v: %s", err, raw)
	}
	diff := func(what string, got, want any) {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("record view %s = %v, envelope %v", what, got, want)
		}
	}
	diff("issuer", v.Issuer, b58Encode(r.Issuer))
	diff("subject", v.Subject, b58Encode(r.Subject))
	diff("accepted", v.Accepted, r.Accepted)
	diff("reason", v.Reason, r.Reason)
	diff("failed_round", v.FailedRound, r.FailedRound)
	diff("nonce", v.Nonce, hex.EncodeToString(r.Nonce))
	diff("transcript_digest", v.TranscriptDigest, hex.EncodeToString(r.Digest))
	diff("rounds", len(v.Rounds), len(r.Rounds))
	for i := range min(len(v.Rounds), len(r.Rounds)) {
		a, b := v.Rounds[i], r.Rounds[i]
		diff("round", fmt.Sprint(a.Round, a.BudgetMs, a.EffectiveMs, a.NarrativeTokens, a.Correct),
			fmt.Sprint(b.Round, b.BudgetMs, b.EffectiveMs, b.NarrativeTokens, b.Correct))
	}
	diff("domain", v.Domain, r.Domain)
	diff("set_id", v.SetID, r.SetID)
	diff("issued_at", v.IssuedAt, time.Unix(r.IssuedAt, 0).UTC().Format(time.RFC3339))
	diff("expires_at", v.ExpiresAt, time.Unix(r.ExpiresAt, 0).UTC().Format(time.RFC3339))
	diff("spec_version", v.SpecVersion, r.SpecVersion)
	diff("provenance.source", v.Provenance.Source, r.Provenance.Source)
	diff("provenance.rank", v.Provenance.Rank, sourceRank[r.Provenance.Source])
}

type verifyOut struct {
	OK                 bool            `json:"ok"`
	Valid              bool            `json:"valid"`
	Accepted           bool            `json:"accepted"`
	Verdict            string          `json:"verdict"`
	Reason             string          `json:"reason"`
	SourceBelowMinimum bool            `json:"source_below_minimum"`
	Error              string          `json:"error"`
	ErrorCode          string          `json:"error_code"`
	Record             json.RawMessage `json:"record"`
}

func verifyAt(t *testing.T, c *client, body map[string]any) verifyOut {
	t.Helper()
	r, err := c.do("POST", "/v1/attestations/verify", body)
	if err != nil {
		t.Fatal(err)
	}
	if r.status != 200 {
		t.Fatalf("verify: %d %s", r.status, r.body)
	}
	var v verifyOut
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestDoorWalkThrough(t *testing.T) {
	base := startNode(t, "--tau", "3s", "--total", "20s")
	c := newClient(base)
	oracle := loadOracle(t)
	m := getManifest(t, c)
	checkManifest(t, m)

	full := func(t *testing.T, answer func(int, *challengeObj, oracleHit) (string, bool), wantReason string) (*attRecord, []byte) {
		id := newIdentity()
		s := createSession(t, c, m, id)
		nonce := s.Nonce
		sid := s.SessionID
		s, verifier := startSession(t, c, id, s)
		if s.State != "probing" {
			t.Fatalf("after start: %s", s.Raw)
		}
		s = probeUntilChallenge(t, c, s)
		if s.State != "answering" {
			t.Fatalf("after probes: %s", s.Raw)
		}
		s, rounds, hits := answerRounds(t, c, s, oracle, answer)
		rec := checkResult(t, s, id, nonce, verifier, rounds, hits, wantReason)
		// §4.5: an ended session stays readable.
		r, err := c.do("GET", "/v1/sessions/"+sid, nil)
		if err != nil {
			t.Fatal(err)
		}
		g, err := decodeSession(r.body)
		if err != nil || r.status != 200 || g.State != "done" || g.Result == nil || !bytes.Equal(g.Result.Attestation, s.Result.Attestation) {
			t.Errorf("GET after done: %d %s", r.status, r.body)
		}
		return rec, s.Result.Attestation
	}

	t.Run("accepted", func(t *testing.T) {
		_, env := full(t, func(_ int, _ *challengeObj, h oracleHit) (string, bool) { return h.answer, true }, "ok")
		v := verifyAt(t, c, map[string]any{"attestation": b64s(env)})
		if !v.OK || !v.Valid || !v.Accepted || v.Verdict != "ACCEPTED" || v.Reason != "ok" || v.ErrorCode != "" {
			t.Errorf("verify: %+v", v)
		}
		v = verifyAt(t, c, map[string]any{"attestation": b64s(env), "require_source": "hybrid"})
		if v.OK || v.Valid || !v.SourceBelowMinimum || v.ErrorCode != "source_below_minimum" {
			t.Errorf("verify hybrid: %+v", v)
		}
		v = verifyAt(t, c, map[string]any{"attestation": b64s(env), "require_source": " Corpus "})
		if !v.OK {
			t.Errorf("verify corpus: %+v", v)
		}
	})
	t.Run("wrong_answer", func(t *testing.T) {
		_, env := full(t, func(round int, _ *challengeObj, h oracleHit) (string, bool) {
			if round == 2 {
				return "not " + h.answer, true
			}
			return h.answer, true
		}, "wrong_answer")
		v := verifyAt(t, c, map[string]any{"attestation": b64s(env)})
		if v.OK || !v.Valid || v.Accepted || v.ErrorCode != "not_accepted" || v.Verdict != "REJECTED" {
			t.Errorf("verify: %+v", v)
		}
		v = verifyAt(t, c, map[string]any{"attestation": b64s(env), "any_verdict": true})
		if !v.OK || !v.Valid || v.ErrorCode != "" {
			t.Errorf("verify any_verdict: %+v", v)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		var within, budget int64
		rec, _ := full(t, func(round int, ch *challengeObj, h oracleHit) (string, bool) {
			within, budget = ch.AnswerWithinMs, ch.BudgetMs
			return h.answer, round != 1
		}, "timeout")
		// §4: round 1's wait is budget + credit (credit at most 500 ms).
		if within < budget || within > budget+500 {
			t.Errorf("answer_within_ms %d, budget %d", within, budget)
		}
		// attestation.md §3.2: a timeout shows effective_ms above budget_ms.
		if r := rec.Rounds[0]; r.Correct || r.EffectiveMs <= r.BudgetMs {
			t.Errorf("timed-out round %+v", r)
		}
	})
}

func wantErr(t *testing.T, r reply, status int, code string) *errObj {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d %s: %s", r.status, status, code, r.body)
	}
	e, err := decodeErr(r.body)
	if err != nil {
		t.Fatal(err)
	}
	if e.Code != code {
		t.Fatalf("code %q, want %q: %s", e.Code, code, r.body)
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("%s: Cache-Control %q", code, r.header.Get("Cache-Control"))
	}
	return e
}

func TestDoorErrors(t *testing.T) {
	base := startNode(t)
	c := newClient(base)
	oracle := loadOracle(t)
	m := getManifest(t, c)

	t.Run("routing", func(t *testing.T) {
		r, err := c.do("GET", "/v1/nope", nil)
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, r, 404, "not_found")
		r, err = c.do("GET", "/v1/attestations/verify", nil)
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, r, 405, "method_not_allowed")
		if !strings.Contains(r.header.Get("Allow"), "POST") {
			t.Errorf("Allow %q", r.header.Get("Allow"))
		}
		r, err = c.do("GET", "/v1/sessions/AAAAAAAAAAAAAAAAAAAAAA", nil)
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, r, 404, "unknown_session")
		r, err = c.do("GET", "/openapi.json", nil)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct{ OpenAPI string }
		if r.status != 200 || json.Unmarshal(r.body, &doc) != nil || !strings.HasPrefix(doc.OpenAPI, "3.1") {
			t.Errorf("openapi: %d %.200s", r.status, r.body)
		}
	})
	t.Run("media_type", func(t *testing.T) {
		req, _ := http.NewRequest("POST", base+"/v1/sessions", strings.NewReader(`{"peer_id":"x"}`))
		req.Header.Set("Content-Type", "text/plain")
		resp, err := c.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantErr(t, reply{resp.StatusCode, resp.Header, b}, 415, "unsupported_media_type")
	})
	t.Run("bad_signature", func(t *testing.T) {
		id := newIdentity()
		s := createSession(t, c, m, id)
		body := map[string]any{"public_key": b64s(id.pubKey), "signature": b64s(ed25519.Sign(id.priv, []byte("other"))), "pow": ""}
		r, err := c.do("POST", "/v1/sessions/"+s.SessionID+"/start", body)
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, r, 401, "bad_signature")
	})
	t.Run("bad_key", func(t *testing.T) {
		id, other := newIdentity(), newIdentity()
		s := createSession(t, c, m, id)
		verifier, _ := b58Decode(s.Verifier)
		msg := startMessage(s.SessionID, s.Nonce, verifier, id.id)
		body := map[string]any{"public_key": b64s(other.pubKey), "signature": b64s(ed25519.Sign(other.priv, msg))}
		r, err := c.do("POST", "/v1/sessions/"+s.SessionID+"/start", body)
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, r, 400, "bad_key")
	})
	t.Run("unpaid", func(t *testing.T) {
		id := newIdentity()
		s := createSession(t, c, m, id)
		verifier, _ := b58Decode(s.Verifier)
		msg := startMessage(s.SessionID, s.Nonce, verifier, id.id)
		// a counter whose digest falls short of D
		pre := append(append([]byte(powTag), s.Nonce...), id.id...)
		var pow []byte
		for ctr := uint64(0); ctr < 1000; ctr++ {
			p := binary.BigEndian.AppendUint64(nil, ctr)
			h := sha256.Sum256(append(append([]byte{}, pre...), p...))
			if leadingZeros(h) < *s.PowDifficulty {
				pow = p
				break
			}
		}
		body := map[string]any{"public_key": b64s(id.pubKey), "signature": b64s(ed25519.Sign(id.priv, msg)), "pow": b64s(pow)}
		r, err := c.do("POST", "/v1/sessions/"+s.SessionID+"/start", body)
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, r, 402, "unpaid")
	})
	t.Run("bad_probe", func(t *testing.T) {
		id := newIdentity()
		s := createSession(t, c, m, id)
		nonce := s.Nonce
		s, verifier := startSession(t, c, id, s)
		r, err := c.do("POST", "/v1/sessions/"+s.SessionID+"/probe", map[string]any{"seq": s.Probe.Seq, "nonce": b64s(make([]byte, 8))})
		if err != nil {
			t.Fatal(err)
		}
		e := wantErr(t, r, 409, "bad_probe")
		es, err := decodeSession(e.Session)
		if err != nil {
			t.Fatal(err)
		}
		rec := checkResult(t, es, id, nonce, verifier, nil, nil, "protocol_error")
		if rec.Domain != "" || rec.SetID != "" {
			t.Errorf("a session without a delivered challenge names its set: %q %q", rec.Domain, rec.SetID)
		}
	})
	t.Run("wrong_round", func(t *testing.T) {
		id := newIdentity()
		s := createSession(t, c, m, id)
		nonce := s.Nonce
		s, verifier := startSession(t, c, id, s)
		s = probeUntilChallenge(t, c, s)
		ch := s.Challenge
		hit := oracle[ch.Narrative+"\x00"+ch.Question]
		r, err := c.do("POST", "/v1/sessions/"+s.SessionID+"/answer", map[string]any{"round": ch.Round + 1, "answer": hit.answer})
		if err != nil {
			t.Fatal(err)
		}
		e := wantErr(t, r, 409, "wrong_round")
		es, err := decodeSession(e.Session)
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, es, id, nonce, verifier, []tRound{{Round: 1, Narrative: ch.Narrative, Question: ch.Question}}, []oracleHit{hit}, "protocol_error")
		// §4.4: an answer for a done session is answered 200 with its result.
		r, err = c.do("POST", "/v1/sessions/"+s.SessionID+"/answer", map[string]any{"round": 1, "answer": hit.answer})
		if err != nil {
			t.Fatal(err)
		}
		ds, err := decodeSession(r.body)
		if err != nil || r.status != 200 || ds.State != "done" || ds.Result == nil || ds.Result.Reason != "protocol_error" {
			t.Errorf("answer after done: %d %s", r.status, r.body)
		}
	})
}
