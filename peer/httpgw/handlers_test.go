package httpgw

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/libp2p/go-libp2p/core/crypto"
	cryptopb "github.com/libp2p/go-libp2p/core/crypto/pb"
	"github.com/libp2p/go-libp2p/core/peer"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"),
		// A protocol service makes the reflection guard's table of word
		// keys once, in the background; a run of one short test can end
		// before it (as in peer's TestMain).
		goleak.IgnoreAnyFunction("github.com/acaptcha/acaptcha/protocol.warmRuneKeys"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
	)
}

// fakeDoor serves a gateway over the fake core on a loopback test server.
func fakeDoor(t *testing.T, edit func(*Config)) (*Gateway, *fakeCore, string) {
	t.Helper()
	_, sets := newAnswerKey(t)
	core := newFakeCore(t, sets[0], skill.DefaultPolicy())
	cfg := Config{Core: core}
	if edit != nil {
		edit(&cfg)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		g.Close()
	})
	return g, core, srv.URL
}

// TestOpenAPIMatchesRoutes: every route is documented, every documented
// path is served, and the error codes listed are the table's.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
		Comp    struct {
			Schemas struct {
				Error struct {
					Properties struct {
						Code struct {
							Enum []string `json:"enum"`
						} `json:"code"`
					} `json:"properties"`
				} `json:"Error"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi %q, want 3.1", doc.OpenAPI)
	}
	served := map[string]bool{}
	for _, rt := range routeTable {
		key := rt.method + " " + rt.path
		served[key] = true
		if _, ok := doc.Paths[rt.path][strings.ToLower(rt.method)]; !ok {
			t.Errorf("route %s is not in openapi.json", key)
		}
	}
	for path, ops := range doc.Paths {
		for m := range ops {
			if key := strings.ToUpper(m) + " " + path; !served[key] {
				t.Errorf("openapi.json documents %s, which is not served", key)
			}
		}
	}
	var codes []string
	for _, r := range errorTable {
		if !slices.Contains(codes, r.Code) {
			codes = append(codes, r.Code)
		}
	}
	enum := doc.Comp.Schemas.Error.Properties.Code.Enum
	slices.Sort(codes)
	slices.Sort(enum)
	if !slices.Equal(codes, enum) {
		t.Errorf("error codes in openapi.json %v, in the table %v", enum, codes)
	}
}

// TestErrorTableDocumented: spec/http.md lists every code with its status.
func TestErrorTableDocumented(t *testing.T) {
	data, err := os.ReadFile("../../spec/http.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	statuses := map[string]int{}
	for _, r := range errorTable {
		if s, ok := statuses[r.Code]; ok && s != r.Status {
			t.Errorf("code %s has two statuses %d and %d", r.Code, s, r.Status)
		}
		statuses[r.Code] = r.Status
		row := "| `" + r.Code + "` | " + strconv.Itoa(r.Status) + " |"
		if !strings.Contains(text, row) {
			t.Errorf("spec/http.md has no row starting %q", row)
		}
	}
	for _, tc := range []struct {
		err  error
		code string
	}{
		{errorf(protocol.ErrUnpaid, "x"), CodeUnpaid},
		{errorf(protocol.ErrPeerQuota, "x"), CodeQuota},
		{errorf(errWrongRound, "x"), CodeWrongRound},
		{errors.New("other"), CodeInternal},
	} {
		if got := classify(tc.err).Code; got != tc.code {
			t.Errorf("classify(%v) = %s, want %s", tc.err, got, tc.code)
		}
	}
}

func TestHandlerErrors(t *testing.T) {
	_, core, base := fakeDoor(t, func(c *Config) { c.MaxSessionsPerPrefix = 3 })
	a := newAgent(t, base)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"unknown session", "GET", "/v1/sessions/nope", "", 404, CodeUnknownSession},
		{"bad json", "POST", "/v1/sessions", "{", 400, CodeBadRequest},
		{"trailing data", "POST", "/v1/sessions", `{"peer_id":"x"} {}`, 400, CodeBadRequest},
		{"oversized", "POST", "/v1/sessions", `{"peer_id":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, 413, CodeBodyTooLarge},
		{"bad peer id", "POST", "/v1/sessions", `{"peer_id":"not-a-peer"}`, 400, CodeBadPeerID},
		{"wrong method", "GET", "/v1/sessions", "", 405, CodeMethod},
		{"no route", "GET", "/v2/nothing", "", 404, CodeNotFound},
		{"verify without record", "POST", "/v1/attestations/verify", `{}`, 400, CodeBadRequest},
		{"verify bad source", "POST", "/v1/attestations/verify", `{"attestation":"AAAA","require_source":"gold"}`, 400, CodeBadRequest},
		// An empty or blank source (an unset variable) widened the check
		// to any; only ASCII white space is trimmed and only ASCII case
		// ignored (spec/http.md §4.6).
		{"verify empty source", "POST", "/v1/attestations/verify", `{"attestation":"AAAA","require_source":""}`, 400, CodeBadRequest},
		{"verify blank source", "POST", "/v1/attestations/verify", `{"attestation":"AAAA","require_source":"  "}`, 400, CodeBadRequest},
		{"verify no-break-space source", "POST", "/v1/attestations/verify", `{"attestation":"AAAA","require_source":" llm "}`, 400, CodeBadRequest},
		{"verify folded source", "POST", "/v1/attestations/verify", `{"attestation":"AAAA","require_source":"corpuſ"}`, 400, CodeBadRequest},
		{"byte-order mark", "POST", "/v1/sessions", "\ufeff{\"peer_id\":\"" + peer.ID("x").String() + "\"}", 400, CodeBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
			if tc.method == http.MethodPost {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			st, eb := a.decode(resp, nil)
			if st != tc.status || eb.Code != tc.code {
				t.Errorf("%s %s: %d %q (%s), want %d %q", tc.method, tc.path, st, eb.Code, eb.Message, tc.status, tc.code)
			}
		})
	}

	// Proof of key possession and payment.
	v := a.create()
	other := newAgent(t, base)
	req := a.startReq(v)
	bad := req
	bad.PublicKey = other.startReq(other.create()).PublicKey
	if st, eb := a.post("/v1/sessions/"+v.SessionID+"/start", bad, nil); st != 400 || eb.Code != CodeBadKey {
		t.Errorf("start with another key: %d %+v", st, eb)
	}
	var after Session
	if st, _ := a.get("/v1/sessions/"+v.SessionID, &after); st != 200 || after.State != StateExpired || after.Error == nil {
		t.Errorf("session after a bad key: %d %+v, want expired", st, after)
	}
	if st, eb := a.post("/v1/sessions/"+v.SessionID+"/start", req, nil); st != 410 || eb.Code != CodeExpiredSession {
		t.Errorf("start of an aborted session: %d %+v", st, eb)
	}
	v = a.create()
	req = a.startReq(v)
	req.Signature[0] ^= 1
	if st, eb := a.post("/v1/sessions/"+v.SessionID+"/start", req, nil); st != 401 || eb.Code != CodeBadSignature {
		t.Errorf("start with a bad signature: %d %+v", st, eb)
	}
	// (the prefix allows 3 open sessions: two aborted ones no longer count)
	v = a.create()
	req = a.startReq(v)
	req.Pow = []byte{0xff}
	if protocol.CheckPow(v.Nonce, a.id, req.Pow, *v.PowDifficulty) {
		t.Skip("the junk pow happens to pay")
	}
	if st, eb := a.post("/v1/sessions/"+v.SessionID+"/start", req, nil); st != 402 || eb.Code != CodeUnpaid {
		t.Errorf("start without paying: %d %+v", st, eb)
	}
	core.mu.Lock()
	aborted := slices.Clone(core.aborted)
	core.mu.Unlock()
	if len(aborted) != 3 || !errors.Is(aborted[2], protocol.ErrUnpaid) || errors.Is(aborted[0], protocol.ErrUnpaid) || errors.Is(aborted[1], protocol.ErrUnpaid) {
		t.Errorf("core aborts %v: want a bad key, a bad signature (neither charged to the unproven peer ID) and an unpaid session", aborted)
	}

	// Limits per prefix: the other agent's session is still open.
	for range 2 {
		a.create()
	}
	if st, eb := a.post("/v1/sessions", map[string]string{"peer_id": a.id.String()}, nil); st != 429 || eb.Code != CodeTooManySessions {
		t.Errorf("4th open session from one prefix: %d %+v", st, eb)
	}
}

func TestQuotaAndWrongState(t *testing.T) {
	_, core, base := fakeDoor(t, nil)
	a := newAgent(t, base)
	core.mu.Lock()
	core.quota = true
	core.mu.Unlock()
	if st, eb := a.post("/v1/sessions", map[string]string{"peer_id": a.id.String()}, nil); st != 429 || eb.Code != CodeQuota {
		t.Errorf("create over the core's draw budget: %d %+v", st, eb)
	}
	core.mu.Lock()
	core.quota = false
	core.mu.Unlock()

	v := a.create()
	var cur Session
	if st, eb := a.post("/v1/sessions/"+v.SessionID+"/start", a.startReq(v), &cur); st != 200 || cur.State != StateProbing || cur.Probe.Seq != 1 {
		t.Fatalf("start: %d %+v %+v", st, eb, cur)
	}
	ans := "x"
	if st, eb := a.post("/v1/sessions/"+v.SessionID+"/answer", answerRequest{Round: ptr(1), Answer: &ans}, nil); st != 409 || eb.Code != CodeWrongState {
		t.Errorf("answer while probing: %d %+v", st, eb)
	}
	// A probe ack that does not echo the probe is a signed protocol_error.
	st, eb := a.post("/v1/sessions/"+v.SessionID+"/probe", probeRequest{Seq: ptr(1), Nonce: ptr([]byte("12345678"))}, nil)
	if st != 409 || eb.Code != CodeBadProbe || eb.Session == nil || eb.Session.Result == nil || eb.Session.Result.Reason != string(skill.ReasonProtocolError) {
		t.Errorf("bad probe ack: %d %+v", st, eb)
	}
}

func TestWrongRoundAndTimeout(t *testing.T) {
	key, _ := newAnswerKey(t)
	_, _, base := fakeDoor(t, nil)
	a := newAgent(t, base)

	// An answer naming another round ends the session protocol_error.
	v := a.create()
	cur := a.startAndProbe(v)
	if cur.State != StateAnswering || cur.Challenge.Round != 1 {
		t.Fatalf("after the probes: %+v", cur)
	}
	ans := key.answer(cur.Challenge)
	st, eb := a.post("/v1/sessions/"+v.SessionID+"/answer", answerRequest{Round: ptr(2), Answer: &ans}, nil)
	if st != 409 || eb.Code != CodeWrongRound || eb.Session == nil || eb.Session.Result.Reason != string(skill.ReasonProtocolError) || eb.Session.Result.FailedRound != 1 {
		t.Errorf("answer for round 2 in round 1: %d %+v", st, eb)
	}

	// Correct answers pass (the fake core judges with skill.Session).
	done := a.run(key.answer)
	if !done.Result.Accepted || len(done.Result.Rounds) != 3 {
		t.Errorf("answer key: %+v", done.Result)
	}
	// A wrong answer is wrong_answer.
	done = a.run(func(*Challenge) string { return "unknown" })
	if done.Result.Reason != string(skill.ReasonWrongAnswer) || done.Result.FailedRound != 1 {
		t.Errorf("script: %+v", done.Result)
	}
}

func TestTimeoutOnTheServerClock(t *testing.T) {
	key, sets := newAnswerKey(t)
	// 1-round sessions with a short budget (the fake core does not check
	// the human bound's floor for us: MaxHumanFraction allows it).
	p := skill.DefaultPolicy()
	p.Rounds, p.Tau, p.Total, p.RTTCredit = 1, 300*time.Millisecond, 10*time.Second, 10*time.Millisecond
	_, a := policyDoor(t, sets[0], p)

	// The agent never answers: the gateway's timer ends the round.
	v := a.create()
	cur := a.startAndProbe(v)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if a.get("/v1/sessions/"+v.SessionID, &cur); cur.State == StateDone {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if cur.State != StateDone || cur.Result.Reason != string(skill.ReasonTimeout) || cur.Result.Rounds[0].Answered {
		t.Fatalf("silent agent: %+v", cur)
	}
	if el := cur.Result.Rounds[0].ElapsedMs; el < 300 {
		t.Errorf("elapsed %d ms recorded for the unanswered round, want at least the budget", el)
	}
	// A late answer gets the verdict.
	ans := key.answer(&Challenge{})
	var late Session
	if st, _ := a.post("/v1/sessions/"+v.SessionID+"/answer", answerRequest{Round: ptr(1), Answer: &ans}, &late); st != 200 || late.State != StateDone || late.Result.Reason != string(skill.ReasonTimeout) {
		t.Errorf("late answer: %d %+v", st, late)
	}
	// A slow agent that answers correctly after the budget but before the
	// grace ends is judged late (timeout), not missing.
	done := a.run(func(c *Challenge) string {
		time.Sleep(time.Duration(c.BudgetMs)*time.Millisecond + 150*time.Millisecond)
		return key.answer(c)
	})
	if done.Result.Reason != string(skill.ReasonTimeout) || !done.Result.Rounds[0].Answered || !done.Result.Rounds[0].Correct {
		t.Errorf("slow agent: %+v", done.Result)
	}
}

func TestStartTTLAndClose(t *testing.T) {
	g, core, base := fakeDoor(t, func(c *Config) { c.StartTTL = 200 * time.Millisecond; c.PowDifficulty = 1 })
	a := newAgent(t, base)
	v := a.create()
	time.Sleep(400 * time.Millisecond)
	var cur Session
	if a.get("/v1/sessions/"+v.SessionID, &cur); cur.State != StateExpired {
		t.Errorf("unstarted session after its TTL: %+v", cur)
	}
	// The state before the body, as on the probe and answer routes: an
	// empty start on the expired session is expired_session, not
	// bad_request.
	if st, eb := a.post("/v1/sessions/"+v.SessionID+"/start", map[string]string{}, nil); st != 410 || eb.Code != CodeExpiredSession {
		t.Errorf("empty start on an expired session: %d %+v", st, eb)
	}
	// Close ends the sessions in flight: unstarted ones are aborted.
	v2 := a.create()
	_ = v2
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	core.mu.Lock()
	n := len(core.aborted)
	core.mu.Unlock()
	if n != 2 {
		t.Errorf("%d core sessions aborted, want 2 (expired, closed)", n)
	}
	if st, eb := a.post("/v1/sessions", map[string]string{"peer_id": a.id.String()}, nil); st != 503 || eb.Code != CodeUnavailable {
		t.Errorf("create after close: %d %+v", st, eb)
	}
}

func TestManifest(t *testing.T) {
	_, core, base := fakeDoor(t, nil)
	a := newAgent(t, base)
	var m Manifest
	if st, _ := a.get(ManifestPath, &m); st != 200 {
		t.Fatal(st)
	}
	if m.Node.PeerID != core.self.String() || m.Policy.Rounds != 3 || m.Pow.MinDifficulty != DefaultPowDifficulty || m.APIVersion != APIVersion {
		t.Errorf("manifest %+v", m)
	}
	for step, ep := range m.Endpoints {
		method, path, _ := strings.Cut(ep, " ")
		found := false
		for _, rt := range routeTable {
			found = found || (rt.method == method && rt.path == path)
		}
		if !found {
			t.Errorf("manifest endpoint %s = %q is not a route", step, ep)
		}
	}
	resp, err := http.Get(base + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("openapi: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// A gateway configured with several probes (the default is one) asks for
// each in turn, seq 1..N of N, before round 1.
func TestSeveralProbes(t *testing.T) {
	key, _ := newAnswerKey(t)
	_, _, base := fakeDoor(t, func(c *Config) { c.Probes = 3 })
	a := newAgent(t, base)
	v := a.create()
	var cur Session
	if st, eb := a.post("/v1/sessions/"+v.SessionID+"/start", a.startReq(v), &cur); st != 200 {
		t.Fatalf("start: %d %+v", st, eb)
	}
	for seq := 1; seq <= 3; seq++ {
		if cur.State != StateProbing || cur.Probe == nil || cur.Probe.Seq != seq || cur.Probe.Of != 3 {
			t.Fatalf("before ack %d: %+v", seq, cur)
		}
		next := Session{}
		if st, eb := a.post("/v1/sessions/"+v.SessionID+"/probe", probeRequest{Seq: ptr(cur.Probe.Seq), Nonce: ptr(cur.Probe.Nonce)}, &next); st != 200 {
			t.Fatalf("probe %d: %d %+v", seq, st, eb)
		}
		cur = next
	}
	if cur.State != StateAnswering || cur.Challenge == nil || cur.Challenge.Round != 1 {
		t.Fatalf("after three probes: %+v", cur)
	}
	if done := a.run(key.answer); !done.Result.Accepted {
		t.Errorf("a session with three probes: %+v", done.Result)
	}
}

// httpKind is a test-only second kind for TestChallengeKind.
const httpKind = "glyph-http"

func init() {
	if err := skill.RegisterKind(skill.Kind{
		Name:         httpKind,
		LowerBound:   func(skill.Policy, *skill.Part, *skill.Question) time.Duration { return 2 * time.Minute },
		Judge:        func(q *skill.Question, a string, _ []string) bool { return a == q.Answer },
		SolverPrompt: "GLYPH: one lower-case word.",
	}); err != nil {
		panic(err)
	}
}

// TestChallengeKind: a challenge names its kind as the wire does, and a
// narrative challenge names none (spec/http.md §4).
func TestChallengeKind(t *testing.T) {
	part := func(text, answer string) skill.Part {
		return skill.Part{Narrative: text, Questions: []skill.Question{{Question: "Which word? " + text, Answer: answer}}}
	}
	glyph := &skill.Set{Kind: httpKind, Domain: "wordplay", Parts: []skill.Part{
		part("sun + flower", "sunflower"), part("rain + bow", "rainbow"), part("star + fish", "starfish"),
	}}
	glyph.ID = glyph.ContentID()
	_, sets := newAnswerKey(t)
	for _, tc := range []struct {
		set  *skill.Set
		want string
	}{{glyph, httpKind}, {sets[0], ""}} {
		core := newFakeCore(t, tc.set, skill.DefaultPolicy())
		g, err := New(Config{Core: core})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(g.Handler())
		var kinds []string
		var raw []string
		a := newAgent(t, srv.URL)
		a.run(func(c *Challenge) string {
			kinds = append(kinds, c.Kind)
			b, _ := json.Marshal(c)
			raw = append(raw, string(b))
			return "wrong"
		})
		srv.CloseClientConnections()
		srv.Close()
		g.Close()
		if len(kinds) != 1 || kinds[0] != tc.want {
			t.Errorf("set of kind %q: challenge kinds %q, want [%q]", tc.set.Kind, kinds, tc.want)
		}
		if tc.want == "" && strings.Contains(raw[0], `"kind"`) {
			t.Errorf("narrative challenge names a kind: %s", raw[0])
		}
	}
}

// Creates and verifies are rate-limited per IP prefix and in total: past
// the burst the door answers 429 rate_limited at once (before any work),
// another prefix keeps its own budget until the global one is spent, and
// the budget refills with the clock.
func TestRequestRateLimit(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	proxy := netip.MustParsePrefix("127.0.0.1/32")
	_, _, base := fakeDoor(t, func(c *Config) {
		c.RequestRate, c.RequestBurst = 1, 3
		c.GlobalRequestRate, c.GlobalRequestBurst = 1, 5
		c.TrustedProxies = []netip.Prefix{proxy}
		c.Now = clock
	})
	post := func(client, path, body string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Forwarded-For", client)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var eb ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		return resp.StatusCode, eb.Code
	}
	_, p1 := testutil.NewKey(t)
	create := `{"peer_id":"` + p1.String() + `"}`
	verify := `{"attestation":"AAAA"}`
	// Prefix A: a burst of 3 (creates and verifies together), then 429.
	for i, body := range []string{create, verify, create} {
		path := map[bool]string{true: "/v1/sessions", false: "/v1/attestations/verify"}[body == create]
		if st, code := post("198.51.100.7", path, body); st == http.StatusTooManyRequests {
			t.Fatalf("request %d of prefix A limited early (%s)", i, code)
		}
	}
	if st, code := post("198.51.100.9", "/v1/attestations/verify", verify); st != http.StatusTooManyRequests || code != CodeRateLimited {
		t.Fatalf("4th request of the /24: %d %s, want 429 rate_limited", st, code)
	}
	// Prefix B has its own 3, but the door's 5 in all run out after 2.
	for i := range 2 {
		if st, code := post("203.0.113.1", "/v1/attestations/verify", verify); st == http.StatusTooManyRequests {
			t.Fatalf("request %d of prefix B limited (%s)", i, code)
		}
	}
	if st, code := post("203.0.113.1", "/v1/attestations/verify", verify); st != http.StatusTooManyRequests || code != CodeRateLimited {
		t.Fatalf("past the door's budget: %d %s, want 429 rate_limited", st, code)
	}
	// Reads have buckets of their own.
	req, _ := http.NewRequest(http.MethodGet, base+"/.well-known/acaptcha.json", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode == http.StatusTooManyRequests {
		t.Fatalf("manifest: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	if st, code := post("198.51.100.7", "/v1/attestations/verify", verify); st == http.StatusTooManyRequests {
		t.Fatalf("after the buckets refilled: %s", code)
	}
	// Creates whose body is refused take their token too (they counted
	// in no limit): a network's burst of bad creates ends in 429.
	mu.Lock()
	now = now.Add(10 * time.Second)
	mu.Unlock()
	codes := []string{}
	for range 4 {
		_, code := post("192.0.2.5", "/v1/sessions", `{"peer_id":"not a peer"}`)
		codes = append(codes, code)
	}
	if codes[0] != CodeBadPeerID || codes[3] != CodeRateLimited {
		t.Fatalf("bad creates of one network: %v, want bad_peer_id then rate_limited", codes)
	}
}

// Connections: over the cap per client address a connection is closed at
// once; others still get served, and closing frees the slot.
func TestConnsPerIP(t *testing.T) {
	_, sets := newAnswerKey(t)
	g, err := New(Config{Core: newFakeCore(t, sets[0], skill.DefaultPolicy()), MaxConnsPerIP: 2})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := g.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", addr.String(), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// served reports whether a request on c gets a 200.
	served := func(c net.Conn) bool {
		code, ok := getOpenAPI(c)
		return ok && code == http.StatusOK
	}
	a, b := dial(), dial()
	if !served(a) || !served(b) {
		t.Fatal("the first two connections of 127.0.0.1 were not served")
	}
	if c := dial(); served(c) {
		t.Fatal("a third connection of 127.0.0.1 was served past the cap of 2")
	}
	a.Close()
	time.Sleep(100 * time.Millisecond) // the server sees the close
	deadline := time.Now().Add(3 * time.Second)
	for {
		if served(dial()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed connection's slot was not freed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// getOpenAPI sends GET /openapi.json on the raw connection c and reports
// the response's status, or false when none came within 3 s.
func getOpenAPI(c net.Conn) (int, bool) {
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write([]byte("GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		return 0, false
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, false
	}
	resp.Body.Close()
	return resp.StatusCode, true
}

// A step body missing a field is bad_request and the session goes on
// (http.md §6); only a present field that does not match is judged.
func TestMissingStepFieldsBadRequest(t *testing.T) {
	key, _ := newAnswerKey(t)
	_, _, base := fakeDoor(t, nil)
	a := newAgent(t, base)
	// A create without peer_id is bad_request, one with a malformed
	// peer_id bad_peer_id (http.md §6).
	if st, eb := a.post("/v1/sessions", map[string]any{}, nil); st != 400 || eb.Code != CodeBadRequest {
		t.Errorf("create without peer_id: %d %+v", st, eb)
	}
	if st, eb := a.post("/v1/sessions", map[string]any{"peer_id": "not-a-peer"}, nil); st != 400 || eb.Code != CodeBadPeerID {
		t.Errorf("create with a bad peer_id: %d %+v", st, eb)
	}
	v := a.create()
	var cur Session
	a.post("/v1/sessions/"+v.SessionID+"/start", a.startReq(v), &cur)
	path := "/v1/sessions/" + v.SessionID
	for _, body := range []any{map[string]any{"nonce": cur.Probe.Nonce}, map[string]any{"seq": cur.Probe.Seq}, map[string]any{}} {
		if st, eb := a.post(path+"/probe", body, nil); st != 400 || eb.Code != CodeBadRequest || eb.Session != nil {
			t.Errorf("probe ack %v: %d %+v", body, st, eb)
		}
	}
	for cur.State == StateProbing {
		next := Session{}
		a.post(path+"/probe", probeRequest{Seq: ptr(cur.Probe.Seq), Nonce: ptr(cur.Probe.Nonce)}, &next)
		cur = next
	}
	if cur.State != StateAnswering {
		t.Fatalf("after the probes: %+v", cur)
	}
	ans := key.answer(cur.Challenge)
	for _, body := range []any{map[string]any{"answer": ans}, map[string]any{"round": 1}} {
		if st, eb := a.post(path+"/answer", body, nil); st != 400 || eb.Code != CodeBadRequest || eb.Session != nil {
			t.Errorf("answer %v: %d %+v", body, st, eb)
		}
	}
	// The session still takes the right answer.
	var next Session
	if st, eb := a.post(path+"/answer", answerRequest{Round: ptr(1), Answer: &ans}, &next); st != 200 || next.State != StateAnswering || next.Challenge.Round != 2 {
		t.Errorf("answer after the bad requests: %d %+v %+v", st, eb, next)
	}
}

// The proof of key possession follows attestation.md §2's key rules
// (http.md §1): an ECDSA key on another curve than P-256 is bad_key,
// though go-libp2p verifies its signature.
func TestStartKeyRules(t *testing.T) {
	_, _, base := fakeDoor(t, nil)
	a := newAgent(t, base)
	k, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	priv, pub, err := crypto.ECDSAKeyPairFromKey(k)
	if err != nil {
		t.Fatal(err)
	}
	if a.id, err = peer.IDFromPublicKey(pub); err != nil {
		t.Fatal(err)
	}
	a.priv = priv
	v := a.create()
	if st, eb := a.post("/v1/sessions/"+v.SessionID+"/start", a.startReq(v), nil); st != 400 || eb.Code != CodeBadKey {
		t.Fatalf("start with a P-384 key: %d %+v", st, eb)
	}

	// A Secp256k1 key in its 65-byte uncompressed form (the same key and
	// peer ID to go-libp2p) is a bad key; the compressed form starts.
	b := newAgent(t, base)
	sk, err := crypto.UnmarshalSecp256k1PrivateKey(bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	b.priv = sk
	if b.id, err = peer.IDFromPrivateKey(sk); err != nil {
		t.Fatal(err)
	}
	v = b.create()
	req := b.startReq(v)
	var pk cryptopb.PublicKey
	if err := proto.Unmarshal(req.PublicKey, &pk); err != nil {
		t.Fatal(err)
	}
	point, err := secp256k1.ParsePubKey(pk.Data)
	if err != nil {
		t.Fatal(err)
	}
	pk.Data = point.SerializeUncompressed()
	if req.PublicKey, err = proto.Marshal(&pk); err != nil {
		t.Fatal(err)
	}
	if st, eb := b.post("/v1/sessions/"+v.SessionID+"/start", req, nil); st != 400 || eb.Code != CodeBadKey {
		t.Fatalf("start with an uncompressed Secp256k1 key: %d %+v", st, eb)
	}
	// The refusal ended that session; a new one starts.
	v = b.create()
	if st, eb := b.post("/v1/sessions/"+v.SessionID+"/start", b.startReq(v), nil); st != 200 {
		t.Fatalf("start with the compressed Secp256k1 key: %d %+v", st, eb)
	}
}

// Drain lets a started session reach its verdict while it refuses new
// sessions and the start of an unstarted one (unavailable, nothing
// signed), and returns once no started session runs.
func TestDrainFinishesRunningSessions(t *testing.T) {
	key, _ := newAnswerKey(t)
	g, _, base := fakeDoor(t, nil)
	a := newAgent(t, base)
	running := a.create()
	var cur Session
	path := "/v1/sessions/" + running.SessionID
	a.post(path+"/start", a.startReq(running), &cur)
	unstarted := a.create()

	drained := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() { drained <- g.Drain(ctx) }()
	waitDraining := time.Now().Add(5 * time.Second)
	for {
		st, eb := a.post("/v1/sessions", map[string]string{"peer_id": a.id.String()}, nil)
		if st == 503 && eb.Code == CodeUnavailable {
			break
		}
		if time.Now().After(waitDraining) {
			t.Fatalf("create while draining: %d %+v", st, eb)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st, eb := a.post("/v1/sessions/"+unstarted.SessionID+"/start", a.startReq(unstarted), nil); st != 503 || eb.Code != CodeUnavailable {
		t.Errorf("start of an unstarted session while draining: %d %+v", st, eb)
	}
	select {
	case err := <-drained:
		t.Fatalf("Drain returned (%v) with a session running", err)
	case <-time.After(100 * time.Millisecond):
	}
	for i := 0; cur.State == StateProbing && i < 10; i++ {
		next := Session{}
		a.post(path+"/probe", probeRequest{Seq: ptr(cur.Probe.Seq), Nonce: ptr(cur.Probe.Nonce)}, &next)
		cur = next
	}
	for i := 0; cur.State == StateAnswering && i < 3; i++ {
		ans := key.answer(cur.Challenge)
		next := Session{}
		if st, eb := a.post(path+"/answer", answerRequest{Round: ptr(cur.Challenge.Round), Answer: &ans}, &next); st != 200 {
			t.Fatalf("answer while draining: %d %+v", st, eb)
		}
		cur = next
	}
	if cur.State != StateDone || cur.Result == nil || !cur.Result.Accepted {
		t.Fatalf("the running session did not reach its verdict while draining: %+v", cur)
	}
	select {
	case err := <-drained:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Drain did not return after the last session ended")
	}
}

// A started session that was aborted (an unpaid proof of work) is not
// running: Drain does not wait for it.
func TestDrainSkipsAbortedSessions(t *testing.T) {
	g, _, base := fakeDoor(t, func(c *Config) { c.PowDifficulty = 8 })
	a := newAgent(t, base)
	v := a.create()
	req := a.startReq(v)
	req.Pow = make([]byte, 33) // never pays
	if st, eb := a.post("/v1/sessions/"+v.SessionID+"/start", req, nil); st != 402 || eb.Code != CodeUnpaid {
		t.Fatalf("unpaid start: %d %+v", st, eb)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := g.Drain(ctx); err != nil {
		t.Fatalf("Drain with only an aborted session: %v", err)
	}
}

// A stopping door still answers the late answer of a round it ended
// itself (the client is owed the signed verdict, §4.4): Drain keeps
// serving for lateAnswerLinger after such a round.
func TestDrainServesLateAnswer(t *testing.T) {
	key, sets := newAnswerKey(t)
	p := skill.DefaultPolicy()
	p.Rounds, p.Tau, p.Total, p.RTTCredit = 1, 300*time.Millisecond, 10*time.Second, 10*time.Millisecond
	g, a := policyDoor(t, sets[0], p)
	v := a.create()
	path := "/v1/sessions/" + v.SessionID
	var cur Session
	a.post(path+"/start", a.startReq(v), &cur)
	for i := 0; cur.State == StateProbing && i < 10; i++ {
		next := Session{}
		a.post(path+"/probe", probeRequest{Seq: ptr(cur.Probe.Seq), Nonce: ptr(cur.Probe.Nonce)}, &next)
		cur = next
	}
	if cur.State != StateAnswering {
		t.Fatalf("not answering: %+v", cur)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	drained := make(chan error, 1)
	go func() { drained <- g.Drain(ctx) }()
	// The server ends the round (300 ms + grace); the answer comes after.
	time.Sleep(p.Tau + p.RTTCredit + AnswerGrace + 500*time.Millisecond)
	select {
	case err := <-drained:
		t.Fatalf("Drain returned (%v) before a late answer could fetch its verdict", err)
	default:
	}
	ans := key.answer(cur.Challenge)
	var done Session
	if st, eb := a.post(path+"/answer", answerRequest{Round: ptr(1), Answer: &ans}, &done); st != 200 || done.State != StateDone || done.Result == nil ||
		done.Result.Reason != string(skill.ReasonTimeout) {
		t.Fatalf("late answer while draining: %d %+v %+v %+v", st, eb, done, done.Result)
	}
	select {
	case err := <-drained:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(lateAnswerLinger + 5*time.Second):
		t.Fatal("Drain did not return after the linger")
	}
}

// TestContentTypeRequired (http.md 1.4.4): a POST body must be declared
// application/json. The door took any Content-Type or none, so a web page
// could make its visitors' browsers create sessions (text/plain needs no
// CORS preflight) and hold the unstarted slots of their networks.
func TestContentTypeRequired(t *testing.T) {
	g, _, base := fakeDoor(t, nil)
	a := newAgent(t, base)
	body := `{"peer_id":"` + a.id.String() + `"}`
	for _, tc := range []struct {
		ctype  string
		status int
	}{
		{"", 415},
		{"text/plain", 415},
		{"text/plain;charset=UTF-8", 415},
		{"application/x-www-form-urlencoded", 415},
		{"multipart/form-data; boundary=x", 415},
		{"application/json; charset=iso-8859-1", 415},
		{"application/json", 201},
		{"Application/JSON", 201},
		{"application/json; charset=utf-8", 201},
		{"application/json;charset=UTF-8", 201},
	} {
		req, err := http.NewRequest(http.MethodPost, base+"/v1/sessions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if tc.ctype != "" {
			req.Header.Set("Content-Type", tc.ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		st, eb := a.decode(resp, nil)
		if st != tc.status || (st == 415 && eb.Code != CodeUnsupportedMediaType) {
			t.Errorf("Content-Type %q: %d %q, want %d", tc.ctype, st, eb.Code, tc.status)
		}
	}
	g.mu.Lock()
	n := len(g.sessions)
	g.mu.Unlock()
	if n != 4 {
		t.Errorf("%d sessions open, want the 4 declared application/json", n)
	}
}

// TestContentTypeOrder (http.md 1.4.7): the Content-Type is checked once
// the route and method are known and before the session is looked up; a
// header that does not parse as a media type is unsupported_media_type,
// a quoted charset "utf-8" is utf-8.
func TestContentTypeOrder(t *testing.T) {
	_, _, base := fakeDoor(t, nil)
	for _, tc := range []struct {
		method, path, ctype string
		status              int
		code                string
	}{
		{http.MethodPost, "/v1/nothing", "text/plain", 404, CodeNotFound},
		{http.MethodPost, "/openapi.json", "text/plain", 405, CodeMethod},
		{http.MethodPost, "/v1/sessions/AAAAAAAAAAAAAAAAAAAAAA/start", "text/plain", 415, CodeUnsupportedMediaType},
		{http.MethodPost, "/v1/sessions/AAAAAAAAAAAAAAAAAAAAAA/start", "application/json", 404, CodeUnknownSession},
		{http.MethodPost, "/v1/attestations/verify", "application/json; charset=utf-8; charset=latin1", 415, CodeUnsupportedMediaType},
		{http.MethodPost, "/v1/attestations/verify", "application/json; charset=", 415, CodeUnsupportedMediaType},
		{http.MethodPost, "/v1/attestations/verify", `application/json; charset="UTF-8"`, 200, ""},
		{http.MethodPost, "/v1/attestations/verify", "application/json;", 200, ""},
	} {
		req, err := http.NewRequest(tc.method, base+tc.path, strings.NewReader(`{"attestation":"AAAA"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", tc.ctype)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var eb struct{ Code string }
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if resp.StatusCode != tc.status || (tc.code != "" && eb.Code != tc.code) {
			t.Errorf("%s %s %q: %d %q, want %d %q", tc.method, tc.path, tc.ctype, resp.StatusCode, eb.Code, tc.status, tc.code)
		}
	}
}

// A start without public_key or signature (absent or null) is bad_request
// and leaves the session awaiting its start (http.md §6: a missing field);
// one present but empty is bad_key and aborts it (§5: 1 to 2 048 bytes).
func TestStartMissingKeyIsBadRequest(t *testing.T) {
	_, _, base := fakeDoor(t, nil)
	a := newAgent(t, base)
	v := a.create()
	path := "/v1/sessions/" + v.SessionID + "/start"
	for _, body := range []map[string]any{
		{"signature": a.startReq(v).Signature},
		{"public_key": nil, "signature": a.startReq(v).Signature},
		{"public_key": a.startReq(v).PublicKey},
	} {
		if st, eb := a.post(path, body, nil); st != 400 || eb.Code != CodeBadRequest {
			t.Errorf("start %v: %d %+v, want 400 bad_request", body, st, eb)
		}
	}
	var cur Session
	if st, _ := a.get("/v1/sessions/"+v.SessionID, &cur); st != 200 || cur.State != StateAwaitingStart {
		t.Fatalf("session after starts without a key: %d %+v, want awaiting its start", st, cur)
	}
	empty := a.startReq(v)
	empty.PublicKey = []byte{}
	if st, eb := a.post(path, empty, nil); st != 400 || eb.Code != CodeBadKey {
		t.Errorf("start with an empty key: %d %+v, want 400 bad_key", st, eb)
	}
}

// An integer member written with a fraction or an exponent is bad_request
// (http.md §1).
func TestIntegerMembersAreIntegers(t *testing.T) {
	_, _, base := fakeDoor(t, nil)
	a := newAgent(t, base)
	v := a.create()
	if st, eb := a.post("/v1/sessions/"+v.SessionID+"/start", a.startReq(v), nil); st != 200 {
		t.Fatalf("start: %d %+v", st, eb)
	}
	for _, body := range []string{`{"seq":1.0,"nonce":"AAAA"}`, `{"seq":1e0,"nonce":"AAAA"}`} {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/sessions/"+v.SessionID+"/probe", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if st, eb := a.decode(resp, nil); st != 400 || eb.Code != CodeBadRequest {
			t.Errorf("probe %s: %d %+v, want 400 bad_request", body, st, eb)
		}
	}
}

// answer_within_ms on a GET after delivery is the time left to the
// deadline; it gave the whole wait again, which a client re-reading its
// session (after a dropped connection) took as the time left.
func TestAnswerWithinOnGetIsTimeLeft(t *testing.T) {
	_, sets := newAnswerKey(t)
	p := skill.DefaultPolicy()
	p.Rounds, p.Tau, p.Total, p.RTTCredit = 1, 2*time.Second, 10*time.Second, 10*time.Millisecond
	_, a := policyDoor(t, sets[0], p)
	v := a.create()
	cur := a.startAndProbe(v)
	if cur.State != StateAnswering {
		t.Fatalf("after the probes: %+v", cur)
	}
	delivered := cur.Challenge.AnswerWithinMs
	time.Sleep(600 * time.Millisecond)
	var again Session
	if st, eb := a.get("/v1/sessions/"+v.SessionID, &again); st != 200 || again.State != StateAnswering {
		t.Fatalf("GET: %d %+v %+v", st, eb, again)
	}
	left := again.Challenge.AnswerWithinMs
	if left > delivered-500 || left < 0 {
		t.Fatalf("answer_within_ms %d at delivery, %d on a GET 600 ms later: want the time left", delivered, left)
	}
}

// policyDoor serves set under policy p from a fake core and returns an
// agent of it; the door closes with the test.
func policyDoor(t *testing.T, set *skill.Set, p skill.Policy) (*Gateway, *agent) {
	t.Helper()
	g, err := New(Config{Core: newFakeCore(t, set, p)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() { srv.Close(); g.Close() })
	return g, newAgent(t, srv.URL)
}
