package secondimpl2

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// http.md 1.4.x read alone against `acaptcha node --http`: the order of a
// start's checks (§4.2), the step routes' order of checks (§1), the body
// rules of §1 and §5, and the end of a session whose probe is not acked
// (§4.3). Each case names the sentence it follows.

// doRaw sends body as is with Content-Type ctype ("" for none).
func (c *client) doRaw(method, path, ctype, body string) (reply, error) {
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, err
}

func (c *client) must(t *testing.T, method, path string, body any) reply {
	t.Helper()
	r, err := c.do(method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (c *client) mustRaw(t *testing.T, method, path, ctype, body string) reply {
	t.Helper()
	r, err := c.doRaw(method, path, ctype, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func getSession(t *testing.T, c *client, id string) *session {
	t.Helper()
	r := c.must(t, "GET", "/v1/sessions/"+id, nil)
	if r.status != 200 {
		t.Fatalf("GET %s: %d %s", id, r.status, r.body)
	}
	s, err := decodeSession(r.body)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkAborted: §4.2 "An aborted session is expired at once: a GET shows
// it with error {code: "expired_session", message} ..., and every later
// step request on it is expired_session (410)".
func checkAborted(t *testing.T, c *client, s *session, why string) {
	t.Helper()
	g := getSession(t, c, s.SessionID)
	if g.State != "expired" || g.Error == nil || g.Error.Code != "expired_session" || g.Error.Message == "" {
		t.Fatalf("%s: GET after the abort: %s", why, g.Raw)
	}
	wantErr(t, c.must(t, "POST", "/v1/sessions/"+s.SessionID+"/start", map[string]any{}), 410, "expired_session")
}

func TestSpec119DoorSteps(t *testing.T) {
	base := startNode(t)
	c := newClient(base)
	m := getManifest(t, c)
	startBody := func(id identity, s *session, sig []byte, pow []byte) map[string]any {
		return map[string]any{"public_key": b64s(id.pubKey), "signature": b64s(sig), "pow": b64s(pow)}
	}
	signed := func(id identity, s *session) []byte {
		verifier, err := b58Decode(s.Verifier)
		if err != nil {
			t.Fatal(err)
		}
		return ed25519.Sign(id.priv, startMessage(s.SessionID, s.Nonce, verifier, id.id))
	}
	paid := func(id identity, s *session) []byte {
		pow, err := solvePoW(s.Nonce, id.id, *s.PowDifficulty)
		if err != nil {
			t.Fatal(err)
		}
		return pow
	}

	t.Run("create names the node", func(t *testing.T) {
		// §6 bad_peer_id: "a create naming the node's own peer ID"
		wantErr(t, c.must(t, "POST", "/v1/sessions", map[string]any{"peer_id": m.Node.PeerID}), 400, "bad_peer_id")
	})

	t.Run("small-order key, empty signature", func(t *testing.T) {
		// §1: an Ed25519 key of small order is bad_key; §4.2 step 1:
		// "else bad_key, whatever the signature (an empty one included)".
		small := make([]byte, 32)
		small[0] = 1 // the neutral element, of order 1
		id := identity{pubKey: marshalPubKey(1, small), id: peerIDFromKey(1, small)}
		id.idStr = b58Encode(id.id)
		r := c.must(t, "POST", "/v1/sessions", map[string]any{"peer_id": id.idStr})
		if r.status != 201 {
			t.Logf("create for a small-order key's peer ID: %d %s", r.status, r.body)
			wantErr(t, r, 400, "bad_peer_id")
			return
		}
		s, err := decodeSession(r.body)
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, c.must(t, "POST", "/v1/sessions/"+s.SessionID+"/start",
			map[string]any{"public_key": b64s(id.pubKey), "signature": "", "pow": ""}), 400, "bad_key")
		checkAborted(t, c, s, "small-order key")
	})

	t.Run("body errors leave the session", func(t *testing.T) {
		id := newIdentity()
		s := createSession(t, c, m, id)
		// §5: public_key or signature absent or null: bad_request, "the
		// session left as it was (§6)".
		wantErr(t, c.must(t, "POST", "/v1/sessions/"+s.SessionID+"/start",
			map[string]any{"signature": b64s(signed(id, s)), "pow": ""}), 400, "bad_request")
		wantErr(t, c.must(t, "POST", "/v1/sessions/"+s.SessionID+"/start",
			map[string]any{"public_key": b64s(id.pubKey), "signature": nil, "pow": ""}), 400, "bad_request")
		// §1: two members of the same name; a member differing only in
		// case; trailing data; a byte-order mark.
		for _, body := range []string{
			`{"public_key":"AA==","public_key":"AA==","signature":"AA==","pow":""}`,
			`{"public_key":"AA==","Signature":"AA==","signature":"AA==","pow":""}`,
			`{"public_key":"AA==","signature":"AA==","pow":""} {}`,
			"\ufeff" + `{"public_key":"AA==","signature":"AA==","pow":""}`,
		} {
			wantErr(t, c.mustRaw(t, "POST", "/v1/sessions/"+s.SessionID+"/start", "application/json", body), 400, "bad_request")
		}
		if g := getSession(t, c, s.SessionID); g.State != "awaiting_start" {
			t.Fatalf("after body errors: %s", g.Raw)
		}
		// §1: the media type is checked before the session lookup.
		wantErr(t, c.mustRaw(t, "POST", "/v1/sessions/AAAAAAAAAAAAAAAAAAAAAA/start", "text/plain", `{}`), 415, "unsupported_media_type")
		// the session is still startable
		ps, _ := startSession(t, c, id, s)
		if ps.State != "probing" {
			t.Fatalf("start after body errors: %s", ps.Raw)
		}
		// §1: a step that does not apply to the state is wrong_state,
		// "answered before its body is read" (a body that is not JSON).
		wantErr(t, c.mustRaw(t, "POST", "/v1/sessions/"+s.SessionID+"/answer", "application/json", `not json`), 409, "wrong_state")
		wantErr(t, c.must(t, "POST", "/v1/sessions/"+s.SessionID+"/start", startBody(id, s, signed(id, s), paid(id, s))), 409, "wrong_state")
		// §1: integers are JSON numbers without a fraction or exponent;
		// a member differing only in case (ſ folds to s) is bad_request.
		p := ps.Probe
		for _, body := range []string{
			`{"seq":1.0,"nonce":"` + b64s(p.Nonce) + `"}`,
			`{"seq":1e0,"nonce":"` + b64s(p.Nonce) + `"}`,
			`{"seq":1,"ſeq":1,"nonce":"` + b64s(p.Nonce) + `"}`,
			`{"seq":1}`,
		} {
			wantErr(t, c.mustRaw(t, "POST", "/v1/sessions/"+s.SessionID+"/probe", "application/json", body), 400, "bad_request")
		}
		// §4.3: no ack within within_ms of the delivery: expired without
		// a verdict; a later ack is expired_session.
		time.Sleep(time.Duration(p.WithinMs)*time.Millisecond + time.Second)
		g := getSession(t, c, s.SessionID)
		if g.State != "expired" || g.Error == nil || g.Error.Code != "expired_session" || g.Result != nil {
			t.Fatalf("a probe not acked within %d ms: %s", p.WithinMs, g.Raw)
		}
		if strings.Contains(g.Error.Message, "127.0.0.1:") || strings.Contains(g.Error.Message, "tcp") {
			t.Errorf("§6: the message carries a network error's text: %q", g.Error.Message)
		}
		wantErr(t, c.must(t, "POST", "/v1/sessions/"+s.SessionID+"/probe", map[string]any{"seq": p.Seq, "nonce": b64s(p.Nonce)}), 410, "expired_session")
	})

	t.Run("key and signature sizes", func(t *testing.T) {
		// §5: public_key 1 to 2 048 bytes (else bad_key), signature 1 to
		// 1 024 bytes (else bad_signature); both abort the session.
		id := newIdentity()
		s := createSession(t, c, m, id)
		wantErr(t, c.must(t, "POST", "/v1/sessions/"+s.SessionID+"/start",
			map[string]any{"public_key": b64s(make([]byte, 2049)), "signature": b64s(signed(id, s)), "pow": b64s(paid(id, s))}), 400, "bad_key")
		checkAborted(t, c, s, "a key of 2 049 bytes")
		s = createSession(t, c, m, id)
		wantErr(t, c.must(t, "POST", "/v1/sessions/"+s.SessionID+"/start",
			startBody(id, s, make([]byte, 1025), paid(id, s))), 401, "bad_signature")
		checkAborted(t, c, s, "a signature of 1 025 bytes")
		s = createSession(t, c, m, id)
		wantErr(t, c.must(t, "POST", "/v1/sessions/"+s.SessionID+"/start",
			map[string]any{"public_key": b64s(id.pubKey), "signature": "", "pow": b64s(paid(id, s))}), 401, "bad_signature")
		checkAborted(t, c, s, "an empty signature")
	})

	t.Run("started sessions per peer before payment", func(t *testing.T) {
		// §4.2: step 3 (fewer than 2 started sessions open, else
		// too_many_sessions) comes before step 4 (payment): a third start
		// that does not pay is too_many_sessions, and aborts its session.
		id := newIdentity()
		for i := 0; i < 2; i++ {
			s := createSession(t, c, m, id)
			if ps, _ := startSession(t, c, id, s); ps.State != "probing" {
				t.Fatalf("start %d: %s", i+1, ps.Raw)
			}
		}
		s := createSession(t, c, m, id)
		wantErr(t, c.must(t, "POST", "/v1/sessions/"+s.SessionID+"/start", startBody(id, s, signed(id, s), nil)), 429, "too_many_sessions")
		checkAborted(t, c, s, "a third start")
	})
}

// http.md §1, §5 (1.4.21): a step request that leaves its session as it
// was (here a start on an aborted session, expired_session) is a read:
// 10 a second per IP prefix in bursts of 50, above which it is
// rate_limited.
func TestSpec119DoorIdleStepsAreReads(t *testing.T) {
	base := startNode(t)
	c := newClient(base)
	m := getManifest(t, c)
	id := newIdentity()
	s := createSession(t, c, m, id)
	wantErr(t, c.must(t, "POST", "/v1/sessions/"+s.SessionID+"/start",
		map[string]any{"public_key": b64s(make([]byte, 2049)), "signature": "AA==", "pow": ""}), 400, "bad_key")
	start := time.Now()
	expired, limited := 0, 0
	for i := 0; i < 80 && limited == 0; i++ {
		r := c.must(t, "POST", "/v1/sessions/"+s.SessionID+"/start", map[string]any{})
		switch e, _ := decodeErr(r.body); {
		case r.status == 410 && e != nil && e.Code == "expired_session":
			expired++
		case r.status == 429 && e != nil && e.Code == "rate_limited":
			limited++
		default:
			t.Fatalf("step %d on an aborted session: %d %s", i+1, r.status, r.body)
		}
	}
	// the burst (50, less the reads above), and 10 a second since
	if max := 50 + int(10*time.Since(start).Seconds()) + 1; limited == 0 || expired > max {
		t.Fatalf("%d expired_session answers in %v before rate_limited (%d), want at most %d", expired, time.Since(start), limited, max)
	}
}

// postAndReset sends one POST on a fresh connection and resets the
// connection at once, before the response can be written.
func postAndReset(t *testing.T, base, path string, body any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(base, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, addr, len(b), b)
	conn.(*net.TCPConn).SetLinger(0)
	conn.Close()
}

// awaitState reads the session until it leaves from (bounded).
func awaitState(t *testing.T, c *client, id, from string) *session {
	t.Helper()
	var g *session
	for i := 0; i < 100; i++ {
		if g = getSession(t, c, id); g.State != from {
			return g
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("session still %s: %s", from, g.Raw)
	return nil
}

// noNetText: http.md §6 (1.4.26), a message, an expired session's error
// and a result's detail never carry a network error's text.
func noNetText(t *testing.T, what, s string) {
	t.Helper()
	for _, w := range []string{"127.0.0.1:", "tcp ", "broken pipe", "connection reset", "->"} {
		if strings.Contains(s, w) {
			t.Errorf("%s carries a network error's text (%q): %q", what, w, s)
		}
	}
}

// http.md §4.2-§4.4 and §6 (1.4.26): a client that resets its connection
// right after its start (probe 1 not delivered) leaves the session
// expired, its error naming what failed and no socket; one that resets it
// right after the ack whose response carries round 1 has seen a challenge
// "delivered" in the sense of §4.4 (its response could not be written):
// done protocol_error, signed, the detail without a socket.
func TestSpec119DoorClientResets(t *testing.T) {
	base := startNode(t)
	c := newClient(base)
	m := getManifest(t, c)

	id := newIdentity()
	s := createSession(t, c, m, id)
	verifier, err := b58Decode(s.Verifier)
	if err != nil {
		t.Fatal(err)
	}
	sig := ed25519.Sign(id.priv, startMessage(s.SessionID, s.Nonce, verifier, id.id))
	pow, err := solvePoW(s.Nonce, id.id, *s.PowDifficulty)
	if err != nil {
		t.Fatal(err)
	}
	postAndReset(t, base, "/v1/sessions/"+s.SessionID+"/start", map[string]any{"public_key": b64s(id.pubKey), "signature": b64s(sig), "pow": b64s(pow)})
	g := awaitState(t, c, s.SessionID, "awaiting_start")
	if g.State != "expired" || g.Error == nil || g.Error.Code != "expired_session" {
		t.Fatalf("start reset by the client: %s", g.Raw)
	}
	noNetText(t, "the expired session's error", g.Error.Message)

	id = newIdentity()
	s = createSession(t, c, m, id)
	ps, _ := startSession(t, c, id, s)
	for ps.Probe != nil && ps.Probe.Seq < ps.Probe.Of {
		r := c.must(t, "POST", "/v1/sessions/"+s.SessionID+"/probe", map[string]any{"seq": ps.Probe.Seq, "nonce": b64s(ps.Probe.Nonce)})
		if ps, err = decodeSession(r.body); err != nil || ps.State != "probing" {
			t.Fatalf("probe: %v %s", err, r.body)
		}
	}
	postAndReset(t, base, "/v1/sessions/"+s.SessionID+"/probe", map[string]any{"seq": ps.Probe.Seq, "nonce": b64s(ps.Probe.Nonce)})
	g = awaitState(t, c, s.SessionID, "probing")
	if g.State == "answering" {
		t.Skipf("the response carrying round 1 was written before the reset arrived: %s", g.Raw)
	}
	if g.State != "done" || g.Result == nil || g.Result.Reason != "protocol_error" || len(g.Result.Attestation) == 0 {
		t.Fatalf("round 1 not delivered: %s", g.Raw)
	}
	noNetText(t, "the result's detail", g.Result.Detail)
}

// http.md §4: expires_at is "when the current step times out", in the
// response that delivers the step too: the start's response (probe 1)
// says within_ms from now, the response carrying round 1 the answer wait
// plus the 250 ms grace.
func TestSpec119DoorExpiresAtOfTheDeliveredStep(t *testing.T) {
	base := startNode(t)
	c := newClient(base)
	m := getManifest(t, c)
	id := newIdentity()
	s := createSession(t, c, m, id)
	near := func(what, got string, want time.Time) {
		t.Helper()
		e, err := time.Parse(time.RFC3339, got)
		if err != nil {
			t.Fatalf("%s: expires_at %q: %v", what, got, err)
		}
		if d := e.Sub(want); d < -time.Second || d > time.Second {
			t.Fatalf("%s: expires_at %s, want about %s (off by %v)", what, got, want.Format(time.RFC3339Nano), d)
		}
	}
	ps, _ := startSession(t, c, id, s)
	near("the start's response (probe 1)", ps.ExpiresAt, time.Now().Add(time.Duration(ps.Probe.WithinMs)*time.Millisecond))
	for ps.State == "probing" {
		r := c.must(t, "POST", "/v1/sessions/"+s.SessionID+"/probe", map[string]any{"seq": ps.Probe.Seq, "nonce": b64s(ps.Probe.Nonce)})
		var err error
		if ps, err = decodeSession(r.body); err != nil {
			t.Fatal(err)
		}
	}
	if ps.State != "answering" {
		t.Fatalf("after the probes: %s", ps.Raw)
	}
	near("the response carrying round 1", ps.ExpiresAt, time.Now().Add(time.Duration(ps.Challenge.AnswerWithinMs)*time.Millisecond+250*time.Millisecond))
}
